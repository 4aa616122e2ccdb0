// Shared-memory collectives of the cpu backend (see comm_shm.h for the design).
//
// Segment layout: a header, one control block per rank (its barrier generation, its pid, the
// descriptors of its last two collectives), then 2 x world data slots of slot_bytes (set 0 and
// set 1, used by alternate rounds). Why double buffering is enough with one barrier per round: a
// rank writes set p again only in round k+2, after it passed the barrier of round k+1, which every
// rank reaches only after it finished reading round k. The descriptors alternate the same way.
//
// Synchronisation: each rank counts the barriers it entered in its own control block (release
// store) and waits until every rank's count reaches its own (acquire loads): no shared counter to
// reset, and "which ranks did not arrive" is simply the ranks whose count is behind.
#include "gpu/comm_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/progress.h"
#include "core/bf16.h"

// The counters are shared between processes: only lock-free atomics are address-free.
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2 && ATOMIC_INT_LOCK_FREE == 2, "lock-free atomics needed");

#define SHM_MAGIC 0x314d4d4f434b5455ull // "UTKCOMM1"
#define SHM_VERSION 1u
#define SHM_DEFAULT_BUDGET ((size_t)32 << 20)
#define SHM_MAX_SLOT ((size_t)1 << 30)
#define SHM_TILE 512 // elements reduced per pass (an fp32 accumulator on the stack)

struct shm_hdr {
    _Atomic uint64_t magic; // stored last by rank 0: a joiner never reads a half-made header
    uint32_t version;
    int32_t world;
    uint64_t nonce;      // also in the rendezvous blob: a stale segment is never joined
    uint64_t slot_bytes;
    uint64_t total_bytes;
    uint64_t data_off;
    _Atomic int32_t failed; // 0, or 1 + the first rank that gave up
};

struct shm_rank {
    _Atomic uint64_t gen; // barriers this rank entered
    _Atomic int32_t pid;  // 0 until the rank joined
    uint64_t pidns;       // its pid namespace (0: unknown), written before pid
    uint64_t desc[2][4];  // (kind, dtype, count, scale bits) of its collectives, by parity
} __attribute__((aligned(128)));

struct tk_shm {
    int rank, world;
    double timeout_s;
    char path[512];
    int linked; // rank 0: the file still has a name
    unsigned char *base;
    size_t size, slot;
    struct shm_hdr *hdr;
    struct shm_rank *ranks;
    uint64_t gen, round, seq;
    int broken;
    uint64_t pidns;    // this process's pid namespace: a peer's pid means something only in the same
    const void **src;  // world pointers (the sum's inputs)
};

static const char *coll_name(int k) {
    switch (k) {
    case TK_COLL_ALL_REDUCE: return "all-reduce";
    case TK_COLL_REDUCE_SCATTER: return "reduce-scatter";
    case TK_COLL_ALL_GATHER: return "all-gather";
    case TK_COLL_ALL_TO_ALL: return "all-to-all";
    case TK_COLL_ALL_TO_ALLV: return "all-to-allv";
    }
    return "communicator creation";
}

// ---- sums -----------------------------------------------------------------------------------


int tk_shm_sum_check(tk_dtype t, float scale, tk_err *e) {
    switch (t) {
    case TK_F32:
    case TK_BF16: return 0;
    case TK_F16:
#ifdef __FLT16_MAX__
        return 0;
#else
        return tk_err_set(e, TK_EINTERNAL, "sum of F16 on the cpu backend: this compiler has no _Float16");
#endif
    case TK_I32:
    case TK_I64:
    case TK_U8:
        if (scale == 1.0f) return 0;
        return tk_err_set(e, TK_EINTERNAL, "scaled collective on %s (cpu)", tk_dtype_name(t));
    }
    return tk_err_set(e, TK_EINTERNAL, "collective: bad dtype %d", (int)t);
}

// Integers wrap (unsigned arithmetic, as NCCL's sums do on the device).
#define SUM_INT(T)                                                                                 \
    do {                                                                                           \
        T *d = dst;                                                                                \
        for (size_t i = 0; i < n; i++) {                                                           \
            T acc = ((const T *)src[0])[i];                                                        \
            for (int j = 1; j < nsrc; j++) acc = (T)(acc + ((const T *)src[j])[i]);                \
            d[i] = acc;                                                                            \
        }                                                                                          \
    } while (0)

void tk_shm_sum(tk_dtype t, float scale, const void *const *src, int nsrc, void *dst, size_t n) {
    if (t == TK_I32) { SUM_INT(uint32_t); return; }
    if (t == TK_I64) { SUM_INT(uint64_t); return; }
    if (t == TK_U8) { SUM_INT(uint8_t); return; }
    // Floating types: a tile of fp32 accumulators, so dst may be one of the inputs.
    float acc[SHM_TILE];
    for (size_t i0 = 0; i0 < n; i0 += SHM_TILE) {
        size_t m = n - i0 < SHM_TILE ? n - i0 : SHM_TILE;
        for (int j = 0; j < nsrc; j++) {
            float x[SHM_TILE];
            if (t == TK_F32) {
                memcpy(x, (const float *)src[j] + i0, m * sizeof(float));
            } else if (t == TK_BF16) {
                const uint16_t *s = (const uint16_t *)src[j] + i0;
                for (size_t i = 0; i < m; i++) x[i] = tk_bf16_to_f32(s[i]);
            } else {
#ifdef __FLT16_MAX__
                const _Float16 *s = (const _Float16 *)src[j] + i0;
                for (size_t i = 0; i < m; i++) x[i] = (float)s[i];
#endif
            }
            if (j == 0)
                for (size_t i = 0; i < m; i++) acc[i] = x[i] * scale;
            else
                for (size_t i = 0; i < m; i++) acc[i] += x[i] * scale;
        }
        if (t == TK_F32) {
            memcpy((float *)dst + i0, acc, m * sizeof(float));
        } else if (t == TK_BF16) {
            uint16_t *d = (uint16_t *)dst + i0;
            for (size_t i = 0; i < m; i++) d[i] = tk_f32_to_bf16(acc[i]);
        } else {
#ifdef __FLT16_MAX__
            _Float16 *d = (_Float16 *)dst + i0;
            for (size_t i = 0; i < m; i++) d[i] = (_Float16)acc[i];
#endif
        }
    }
}

// ---- waiting --------------------------------------------------------------------------------

// 1 when pid is gone: no such process, or a zombie nobody reaped yet (kill() still succeeds on
// those; /proc tells). EPERM means it exists under another user.
static int pid_dead(pid_t pid) {
    if (kill(pid, 0) != 0) return errno == ESRCH;
    char p[64], buf[256];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *rp = strrchr(buf, ')'); // the command name may hold spaces and parentheses
    return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

// Mark the segment failed (the first rank to give up is recorded) and this transport unusable.
static void give_up(tk_shm *s) {
    int32_t zero = 0;
    if (s->hdr) atomic_compare_exchange_strong(&s->hdr->failed, &zero, s->rank + 1);
    s->broken = 1;
}

static void list_ranks(char *buf, size_t n, const int *r, int k) {
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < k && used + 16 < n; i++)
        used += (size_t)snprintf(buf + used, n - used, "%s%d", i ? ", " : "", r[i]);
    if (k && used + 16 >= n) snprintf(buf + used, n - used, ", ...");
}

static void pause_short(void) {
    struct timespec ts = {0, 50000}; // 50 us: ranks may outnumber the cores
    nanosleep(&ts, NULL);
}

// Enter the next barrier and wait until every rank entered it too.
static int barrier(tk_shm *s, const char *what, tk_err *e) {
    struct shm_rank *me = &s->ranks[s->rank];
    s->gen++;
    atomic_store_explicit(&me->gen, s->gen, memory_order_release);
    double start = 0, next_check = 0;
    for (long spin = 0;; spin++) {
        // The mark first: ranks that gave up had entered this barrier, and a late rank must not
        // take that for their arrival.
        int32_t f = atomic_load_explicit(&s->hdr->failed, memory_order_acquire);
        if (f && f != s->rank + 1) {
            give_up(s);
            tk_err_set(e, TK_EDEVICE, "rank %d of %d: %s: rank %d gave up on the collectives", s->rank,
                       s->world, what, f - 1);
            return tk_err_hint(e, "see rank %d's log for why", f - 1);
        }
        int behind = 0;
        for (int j = 0; j < s->world && !behind; j++)
            behind = atomic_load_explicit(&s->ranks[j].gen, memory_order_acquire) < s->gen;
        if (!behind) return 0;
        if (spin < 64) { // a short collective's peers usually arrive within microseconds
            sched_yield();
            continue;
        }
        double now = tk_now();
        if (!start) start = now, next_check = now;
        if (now >= next_check) {
            next_check = now + 0.02;
            for (int j = 0; j < s->world; j++) {
                pid_t pid = atomic_load_explicit(&s->ranks[j].pid, memory_order_acquire);
                if (!pid || s->ranks[j].pidns != s->pidns) continue;
                if (atomic_load_explicit(&s->ranks[j].gen, memory_order_acquire) >= s->gen) continue;
                // Its count again after the death: a rank may arrive, fail a check that every rank
                // fails alike (check_same) and exit while this one looks.
                if (pid_dead(pid) && atomic_load_explicit(&s->ranks[j].gen, memory_order_acquire) < s->gen) {
                    give_up(s);
                    tk_err_set(e, TK_EDEVICE, "rank %d of %d: %s: rank %d (pid %d) exited", s->rank, s->world,
                               what, j, (int)pid);
                    return tk_err_hint(e, "a peer rank died; see its log");
                }
            }
        }
        if (now - start > s->timeout_s) {
            int missing[64], k = 0;
            for (int j = 0; j < s->world && k < 64; j++)
                if (atomic_load_explicit(&s->ranks[j].gen, memory_order_acquire) < s->gen) missing[k++] = j;
            char list[200];
            list_ranks(list, sizeof list, missing, k);
            give_up(s);
            tk_err_set(e, TK_EDEVICE, "rank %d of %d: %s: rank%s %s did not arrive within %g s", s->rank,
                       s->world, what, k == 1 ? "" : "s", list, s->timeout_s);
            return tk_err_hint(e, "a peer rank died or hangs; see its log");
        }
        pause_short();
    }
}

// ---- creation -------------------------------------------------------------------------------

static size_t slot_size(int world, tk_err *e, int *rc) {
    size_t min = 64 * (size_t)world, slot;
    const char *v = getenv("TK_COMM_SHM_SLOT_BYTES");
    *rc = 0;
    if (v && *v) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (errno || *end || v[0] == '-' || x < min || x > SHM_MAX_SLOT) {
            *rc = tk_err_set(e, TK_EUSAGE, "TK_COMM_SHM_SLOT_BYTES: expected a byte count in [%zu, %zu], got '%s'",
                             min, SHM_MAX_SLOT, v);
            return 0;
        }
        slot = (size_t)x;
    } else {
        slot = SHM_DEFAULT_BUDGET / (2 * (size_t)world);
        if (slot < 65536) slot = 65536;
    }
    slot &= ~(size_t)63; // keeps every slot 64-byte aligned
    return slot < min ? min : slot;
}

// The run id (as the rendezvous reads it), reduced to characters safe in a file name.
static void run_tag(char *buf, size_t n) {
    const char *id = getenv("TK_RUN_ID");
    if (!id || !*id) id = getenv("SLURM_JOB_ID");
    if (!id || !*id) id = "norun";
    size_t k = 0;
    for (; *id && k + 1 < n; id++) {
        char c = *id;
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
        buf[k++] = ok ? c : '_';
    }
    buf[k] = 0;
}

static int map_fd(tk_shm *s, int fd, size_t size) {
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) return -1;
    s->base = p;
    s->size = size;
    s->hdr = p;
    return 0;
}

static void layout(tk_shm *s) {
    s->ranks = (struct shm_rank *)(s->base + ((sizeof(struct shm_hdr) + 127) & ~(size_t)127));
}

static int create_segment(tk_shm *s, uint64_t nonce, tk_err *e) {
    int rc;
    size_t slot = slot_size(s->world, e, &rc);
    if (rc) return rc;
    size_t W = (size_t)s->world;
    size_t ctl = ((sizeof(struct shm_hdr) + 127) & ~(size_t)127) + W * sizeof(struct shm_rank);
    size_t data_off = (ctl + 4095) & ~(size_t)4095;
    if (slot > (SIZE_MAX - data_off) / (2 * W))
        return tk_err_set(e, TK_EUSAGE, "shared-memory segment for %d ranks is too large", s->world);
    size_t total = data_off + 2 * W * slot;

    char tag[72];
    run_tag(tag, sizeof tag);
    const char *tmp = getenv("TMPDIR");
    const char *dirs[3] = {"/dev/shm", tmp && *tmp ? tmp : "/tmp", "/tmp"};
    int err = 0;
    const char *failed_dir = dirs[0];
    for (int d = 0; d < 3; d++) {
        if (d == 2 && strcmp(dirs[1], "/tmp") == 0) break;
        struct stat st;
        if (stat(dirs[d], &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        snprintf(s->path, sizeof s->path, "%s/tk-comm-%s-%016" PRIx64, dirs[d], tag, nonce);
        int fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            err = errno, failed_dir = dirs[d];
            continue;
        }
        // Reserve the pages now: a full tmpfs then fails here, not with SIGBUS at a later store.
        int fe = posix_fallocate(fd, 0, (off_t)total);
        if (fe || map_fd(s, fd, total)) {
            err = fe ? fe : errno, failed_dir = dirs[d];
            close(fd);
            unlink(s->path);
            continue;
        }
        close(fd);
        s->linked = 1;
        s->slot = slot;
        layout(s);
        s->hdr->version = SHM_VERSION;
        s->hdr->world = s->world;
        s->hdr->nonce = nonce;
        s->hdr->slot_bytes = slot;
        s->hdr->total_bytes = total;
        s->hdr->data_off = data_off;
        atomic_store_explicit(&s->hdr->magic, SHM_MAGIC, memory_order_release);
        return 0;
    }
    tk_err_errno(e, err, "cannot create a %zu-byte shared-memory segment for %d ranks in %s", total, s->world,
                 failed_dir);
    return tk_err_hint(e, "free space in /dev/shm (or TMPDIR), or set TK_COMM_SHM_SLOT_BYTES lower");
}

// 0 joined; 1 not there (yet) or not this run's; else an error code.
static int join_segment(tk_shm *s, const char *path, uint64_t nonce, tk_err *e) {
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 1;
        return tk_err_errno(e, errno, "cannot open the shared-memory segment %s", path);
    }
    struct stat st;
    int rc = 1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size >= sizeof(struct shm_hdr)) {
        if (map_fd(s, fd, (size_t)st.st_size) != 0) {
            rc = tk_err_errno(e, errno, "cannot map the shared-memory segment %s", path);
        } else {
            struct shm_hdr *h = s->hdr;
            size_t W = (size_t)s->world;
            if (atomic_load_explicit(&h->magic, memory_order_acquire) == SHM_MAGIC && h->version == SHM_VERSION &&
                h->world == s->world && h->nonce == nonce && h->total_bytes == (uint64_t)st.st_size &&
                h->slot_bytes >= 64 * W && h->data_off + 2 * W * h->slot_bytes == h->total_bytes)
                rc = 0;
            if (rc) {
                munmap(s->base, s->size);
                s->base = NULL, s->hdr = NULL;
            }
        }
    }
    close(fd);
    if (rc) return rc;
    s->slot = (size_t)s->hdr->slot_bytes;
    layout(s);
    return 0;
}

static uint64_t random_u64(void) {
    uint64_t x = 0;
    if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        x = ((uint64_t)ts.tv_sec * 1000000007u) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)getpid() << 32);
    }
    return x ? x : 1;
}

static void unlink_segment(tk_shm *s) {
    if (s->linked) unlink(s->path);
    s->linked = 0;
}

void tk_shm_destroy(tk_shm *s) {
    if (!s) return;
    unlink_segment(s);
    if (s->base) munmap(s->base, s->size);
    free(s->src);
    free(s);
}

int tk_shm_create(const tk_rank_info *r, const char *rendezvous, double timeout_s, tk_shm **out,
                  tk_err *e) {
    *out = NULL;
    tk_shm *s = calloc(1, sizeof *s);
    if (!s) return tk_err_set(e, TK_EIO, "out of host memory");
    s->rank = r->rank;
    s->world = r->world;
    s->timeout_s = timeout_s > 0 ? timeout_s : 1;
    s->src = calloc((size_t)r->world, sizeof *s->src);
    struct stat ns;
    if (stat("/proc/self/ns/pid", &ns) == 0) s->pidns = ((uint64_t)ns.st_dev << 40) ^ (uint64_t)ns.st_ino;
    int rc = 0;
    if (!s->src) rc = tk_err_set(e, TK_EIO, "out of host memory");
    // The blob: the nonce (8 bytes, host order: same host) and the path with its NUL.
    unsigned char blob[TK_RDV_MAX_BLOB];
    size_t n;
    if (!rc && r->rank == 0) {
        uint64_t nonce = random_u64();
        rc = create_segment(s, nonce, e);
        if (!rc) {
            memcpy(blob, &nonce, 8);
            n = 8 + strlen(s->path) + 1;
            memcpy(blob + 8, s->path, n - 8);
            rc = tk_rendezvous(rendezvous, r, blob, &n, s->timeout_s, e);
        }
    } else if (!rc) {
        // A file rendezvous may first show a stale blob of an earlier run (rank 0 replaces it),
        // whose segment is gone or has another nonce: read it again until the deadline.
        double deadline = tk_now() + s->timeout_s;
        int retry = strncmp(rendezvous, "file:", 5) == 0;
        for (;;) {
            n = sizeof blob;
            double left = deadline - tk_now();
            rc = tk_rendezvous(rendezvous, r, blob, &n, left > 0.05 ? left : 0.05, e);
            if (rc) break;
            if (n < 10 || n > 8 + sizeof s->path || blob[n - 1] || blob[8] != '/' || memchr(blob + 8, 0, n - 8) != blob + n - 1) {
                rc = tk_err_set(e, TK_EDATA, "rendezvous %s: got %zu bytes, not a shared-memory segment name",
                                rendezvous, n);
                break;
            }
            uint64_t nonce;
            memcpy(&nonce, blob, 8);
            rc = join_segment(s, (const char *)blob + 8, nonce, e);
            if (rc != 1) break;
            if (!retry || tk_now() > deadline) {
                rc = tk_err_set(e, TK_EIO, "rendezvous %s: the shared-memory segment %s is gone or is not this run's",
                                rendezvous, (const char *)blob + 8);
                tk_err_hint(e, "the cpu backend runs its ranks on one host; is rank 0 running on this one?");
                break;
            }
            struct timespec ts = {0, 50000000};
            nanosleep(&ts, NULL);
        }
        if (!rc) {
            int32_t zero = 0, pid = (int32_t)getpid();
            s->ranks[s->rank].pidns = s->pidns; // published by the pid's store below
            if (!atomic_compare_exchange_strong(&s->ranks[s->rank].pid, &zero, pid))
                rc = tk_err_set(e, TK_EUSAGE, "rank %d of %d: another process (pid %d) already joined as rank %d",
                                s->rank, s->world, (int)zero, s->rank);
        }
    }
    if (!rc && r->rank == 0) s->ranks[0].pidns = s->pidns;
    if (!rc && r->rank == 0) atomic_store_explicit(&s->ranks[0].pid, (int32_t)getpid(), memory_order_release);
    if (!rc) rc = barrier(s, coll_name(-1), e);
    // Every rank has mapped the segment (or creation failed): its name is no longer needed.
    unlink_segment(s);
    if (rc) {
        if (s->hdr && !s->broken) give_up(s);
        tk_shm_destroy(s);
        return rc;
    }
    *out = s;
    return 0;
}

// ---- collectives ----------------------------------------------------------------------------

static unsigned char *slot_ptr(const tk_shm *s, int rank) {
    size_t set = (size_t)(s->round & 1);
    return s->base + s->hdr->data_off + (set * (size_t)s->world + (size_t)rank) * s->slot;
}

// Every rank must call the same collective: compare the descriptors after the first barrier.
static int check_same(tk_shm *s, const char *what, tk_err *e) {
    int p = (int)(s->seq & 1);
    const uint64_t *mine = s->ranks[s->rank].desc[p];
    for (int j = 0; j < s->world; j++) {
        const uint64_t *d = s->ranks[j].desc[p];
        if (memcmp(d, mine, sizeof s->ranks[j].desc[p]) == 0) continue;
        float fm, fd;
        uint32_t um = (uint32_t)mine[3], ud = (uint32_t)d[3];
        memcpy(&fm, &um, 4), memcpy(&fd, &ud, 4);
        // Not marked in the segment: every rank sees the same descriptors and fails here too
        // (a mark could make a rank still inside the barrier report "gave up" instead).
        s->broken = 1;
        tk_err_set(e, TK_EINTERNAL,
                   "rank %d of %d: collectives differ: this rank called %s(count %" PRIu64 ", %s, scale %g), rank %d %s(count %" PRIu64 ", %s, scale %g)",
                   s->rank, s->world, what, mine[2], tk_dtype_name((tk_dtype)mine[1]), fm, j, coll_name((int)d[0]),
                   d[2], d[1] <= TK_U8 ? tk_dtype_name((tk_dtype)d[1]) : "?", fd);
        return TK_EINTERNAL;
    }
    return 0;
}

int tk_shm_counts_check(int rank, int world, int src, int dst, size_t sent, size_t expected, tk_err *e) {
    if (sent == expected) return 0;
    tk_err_set(e, TK_EINTERNAL,
               "rank %d of %d: all-to-allv counts differ: rank %d sends %zu elements to rank %d, which expects %zu",
               rank, world, src, sent, dst, expected);
    return tk_err_hint(e, "rank %d's send_counts[%d] must equal rank %d's recv_counts[%d]", src, dst, dst, src);
}

// memcpy, but an empty call may pass NULL buffers.
static void copy(void *dst, const void *src, size_t n) {
    if (n) memcpy(dst, src, n);
}

// Block j of an all-to-all(v) or of a reduce-scatter's input: counts[j] elements, or count for
// every block when counts is NULL; blocks are packed in rank order.
static size_t block(const size_t *counts, size_t count, size_t j) { return counts ? counts[j] : count; }

// The elements of a block of n that the round starting at element off moves, per at most.
static size_t chunk(size_t n, size_t off, size_t per) { return n <= off ? 0 : n - off < per ? n - off : per; }

// Total of counts[0..W-1] in bytes; 1 when it overflows.
static int bytes_total(const size_t *counts, size_t W, size_t es, size_t *out) {
    size_t n = 0;
    for (size_t j = 0; j < W; j++) {
        if (counts[j] > SIZE_MAX / es - n) return 1;
        n += counts[j];
    }
    *out = n * es;
    return 0;
}

// An all-to-allv's first round carries no data: every rank puts its send and recv counts in its
// slot (2 * world of them fit: a slot holds at least 64 bytes per rank), so after the barrier
// every rank reads the whole count matrix, checks every pair of the contract in the same order
// (every rank fails alike, as in check_same) and takes the largest block, which sets the number
// of data rounds on every rank alike.
static int counts_round(tk_shm *s, const size_t *send_counts, const size_t *recv_counts, size_t *largest,
                        tk_err *e) {
    const char *what = coll_name(TK_COLL_ALL_TO_ALLV);
    size_t W = (size_t)s->world;
    uint64_t *mine = (uint64_t *)slot_ptr(s, s->rank);
    for (size_t j = 0; j < W; j++) mine[j] = send_counts[j], mine[W + j] = recv_counts[j];
    TRY(barrier(s, what, e));
    TRY(check_same(s, what, e));
    *largest = 0;
    for (size_t i = 0; i < W; i++)
        for (size_t j = 0; j < W; j++) {
            uint64_t sent = ((const uint64_t *)slot_ptr(s, (int)i))[j];
            uint64_t expected = ((const uint64_t *)slot_ptr(s, (int)j))[W + i];
            int rc = tk_shm_counts_check(s->rank, s->world, (int)i, (int)j, sent, expected, e);
            if (rc) {
                s->broken = 1; // not marked in the segment: see check_same
                return rc;
            }
            if (sent > *largest) *largest = sent;
        }
    s->round++;
    return 0;
}

// Every collective. send_counts and recv_counts: the all-to-allv's (else NULL, and count is the
// per-rank count of tk_shm_collective).
static int collective(tk_shm *s, tk_coll k, const void *send, const size_t *send_counts, void *recv,
                      const size_t *recv_counts, size_t count, tk_dtype t, float scale, tk_err *e) {
    const char *what = coll_name(k);
    if (s->broken) {
        tk_err_set(e, TK_EDEVICE, "rank %d of %d: the communicator was aborted after an earlier error", s->rank,
                   s->world);
        return tk_err_hint(e, "a collective failed or timed out before; the run cannot continue");
    }
    int rc = 0;
    int reduce = k == TK_COLL_ALL_REDUCE || k == TK_COLL_REDUCE_SCATTER, v = k == TK_COLL_ALL_TO_ALLV;
    size_t es = (unsigned)t <= TK_U8 ? tk_dtype_size(t) : 0, W = (size_t)s->world, total;
    if (!es) rc = tk_err_set(e, TK_EINTERNAL, "%s: bad dtype %d", what, (int)t);
    else if (v != (send_counts != NULL)) rc = tk_err_set(e, TK_EINTERNAL, "%s: counts %s", what, v ? "missing" : "given");
    else if (reduce) rc = tk_shm_sum_check(t, scale, e);
    else if (scale != 1.0f) rc = tk_err_set(e, TK_EINTERNAL, "%s with a scale", what);
    if (!rc && !v && count > SIZE_MAX / (W * es)) rc = tk_err_set(e, TK_EINTERNAL, "%s: count %zu overflows", what, count);
    if (!rc && v && (bytes_total(send_counts, W, es, &total) || bytes_total(recv_counts, W, es, &total)))
        rc = tk_err_set(e, TK_EINTERNAL, "%s: counts overflow", what);
    if (rc) { // a bad call on one rank would leave the others waiting: make them give up now
        give_up(s);
        return rc;
    }
    uint32_t sb;
    memcpy(&sb, &scale, 4);
    uint64_t *desc = s->ranks[s->rank].desc[s->seq & 1];
    desc[0] = (uint64_t)k, desc[1] = (uint64_t)t, desc[2] = count, desc[3] = sb;
    if (v) TRY(counts_round(s, send_counts, recv_counts, &count, e)); // count: the largest block

    // Elements per block per round: a whole slot, or a world-th of it when every rank's slot
    // holds one block for each rank.
    size_t per = (k == TK_COLL_ALL_REDUCE || k == TK_COLL_ALL_GATHER) ? s->slot / es : s->slot / (W * es);
    size_t rounds = count ? (count + per - 1) / per : !v; // even an empty call meets the others
    const unsigned char *in = send;
    unsigned char *outp = recv;
    for (size_t rd = 0; rd < rounds; rd++, s->round++) {
        size_t off = rd * per, c = count - off < per ? count - off : per;
        unsigned char *mine = slot_ptr(s, s->rank);
        if (k == TK_COLL_ALL_REDUCE || k == TK_COLL_ALL_GATHER) {
            copy(mine, in + off * es, c * es);
        } else { // block j (its part of this round) to the j-th world-th of the slot
            for (size_t j = 0, at = 0; j < W; at += block(send_counts, count, j), j++)
                copy(mine + j * per * es, in + (at + off) * es, chunk(block(send_counts, count, j), off, per) * es);
        }
        TRY(barrier(s, what, e));
        if (rd == 0 && !v) TRY(check_same(s, what, e)); // the all-to-allv's counts round checked it
        switch (k) {
        case TK_COLL_ALL_REDUCE: {
            // Rank r reduces part r of the round into its own slot (nobody else reads that part
            // before the next barrier), then everyone copies every part out.
            size_t lo = c * (size_t)s->rank / W, hi = c * (size_t)(s->rank + 1) / W;
            for (size_t j = 0; j < W; j++) s->src[j] = slot_ptr(s, (int)j) + lo * es;
            tk_shm_sum(t, scale, s->src, s->world, mine + lo * es, hi - lo);
            TRY(barrier(s, what, e));
            for (size_t j = 0; j < W; j++) {
                size_t a = c * j / W, b = c * (j + 1) / W;
                copy(outp + (off + a) * es, slot_ptr(s, (int)j) + a * es, (b - a) * es);
            }
            break;
        }
        case TK_COLL_REDUCE_SCATTER:
            for (size_t j = 0; j < W; j++) s->src[j] = slot_ptr(s, (int)j) + (size_t)s->rank * per * es;
            tk_shm_sum(t, scale, s->src, s->world, outp + off * es, c);
            break;
        case TK_COLL_ALL_GATHER:
            for (size_t j = 0; j < W; j++) copy(outp + (j * count + off) * es, slot_ptr(s, (int)j), c * es);
            break;
        case TK_COLL_ALL_TO_ALL:
        case TK_COLL_ALL_TO_ALLV: // this rank's world-th of every rank's slot to block j of recv
            for (size_t j = 0, at = 0; j < W; at += block(recv_counts, count, j), j++)
                copy(outp + (at + off) * es, slot_ptr(s, (int)j) + (size_t)s->rank * per * es,
                     chunk(block(recv_counts, count, j), off, per) * es);
            break;
        }
    }
    s->seq++;
    return 0;
}

int tk_shm_collective(tk_shm *s, tk_coll k, const void *send, void *recv, size_t count, tk_dtype t,
                      float scale, tk_err *e) {
    return collective(s, k, send, NULL, recv, NULL, count, t, scale, e);
}

int tk_shm_all_to_allv(tk_shm *s, const void *send, const size_t *send_counts, void *recv,
                       const size_t *recv_counts, tk_dtype t, tk_err *e) {
    return collective(s, TK_COLL_ALL_TO_ALLV, send, send_counts, recv, recv_counts, 0, t, 1.0f, e);
}
