// Collectives of the cpu backend with several ranks (lib/gpu/comm_shm.c): the test forks W rank
// processes that meet through a file: rendezvous in a temporary directory, run collectives, and
// write what they received to files; the parent recomputes every expected element on its own
// (exact integer sums for small-integer data, the documented rank-order fp32 sum for random data)
// and compares bytes; an all-to-allv's values encode (source, destination, index), so every
// element received is checked to be the right one from the right rank. Failure cases: a peer that exits, is killed, hangs, never joins, or calls
// another collective or breaks the all-to-allv count contract; every one must end in an error
// within seconds, never a hang. After each run
// no segment of that run may be left in /dev/shm.
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/progress.h"
#include "gpu/comm.h"
#include "tk_test.h"

static char g_dir[128];     // temporary directory (rendezvous files, outputs)
static char g_run[64];      // TK_RUN_ID of the current run
static int g_runs;
static uint64_t g_seed;     // random data: fresh per test process, printed
static pid_t g_parent;

// ---- data -----------------------------------------------------------------------------------

typedef struct {
    tk_coll k;
    tk_dtype t;
    size_t count;
    float scale;
    int random;  // 0: small integers (exact results), 1: random values
    int inplace; // all-reduce with send == recv
    int pattern; // all-to-allv: the counts (vcount)
} ccase;

#define MAX_CASES 256
static ccase g_cases[MAX_CASES];
static int g_ncases;

static uint64_t mix(uint64_t x) { // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static uint64_t draw(int ci, int rank, size_t i) {
    return mix(g_seed ^ mix(((uint64_t)ci << 40) ^ ((uint64_t)rank << 32) ^ mix(i)));
}

static float bf16_f(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static uint16_t f_bf16(float f) { // round to nearest even (finite values only in this test)
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t lsb = (u >> 16) & 1;
    return (uint16_t)((u + 0x7fff + lsb) >> 16);
}

// All-to-allv counts: elements rank src sends to rank dst, in pattern p.
static size_t vcount(int p, int world, int src, int dst) {
    switch (p) {
    case 0: return (size_t)((src * 5 + dst * 3 + 1) % 4) * 7;                // mixed, zeros among them
    case 1: return src == dst ? 0 : 1 + (size_t)src * 300 + (size_t)dst * 70; // no own block; > a 512-byte slot
    case 2: return src == world - 1 && dst == 0 ? 2500 : src == dst ? 3 : 0;  // one large pair, the rest tiny
    case 3: return 0;                                                         // nothing at all
    case 4: return src == 1 && dst == 0 ? ((size_t)9 << 20) / 8 + 5 : 1000;   // more than a default slot (i64)
    }
    return 0;
}
// Sum of vcount over the sends (send = 1) or the receives of rank r, up to peer `upto` (excluded).
static size_t vsum(int p, int world, int r, int send, int upto) {
    size_t n = 0;
    for (int j = 0; j < upto; j++) n += send ? vcount(p, world, r, j) : vcount(p, world, j, r);
    return n;
}

static size_t esize(tk_dtype t) { return t == TK_F32 || t == TK_I32 ? 4 : t == TK_I64 ? 8 : t == TK_U8 ? 1 : 2; }

// Element idx of the block that rank src sends to rank dst in all-to-allv case ci: src, dst and
// idx in plain sight for I64, hashed into the narrower types.
static uint64_t vvalue(int ci, int src, int dst, size_t idx) {
    uint64_t x = (uint64_t)src << 56 | (uint64_t)dst << 48 | (uint64_t)ci << 32 | idx;
    return g_cases[ci].t == TK_I64 ? x : mix(x);
}

// Element i of rank r's send (send = 1) or recv in all-to-allv pattern p is element *idx of the
// block to (from) rank *peer.
static void vlocate(int p, int world, int r, int send, size_t i, int *peer, size_t *idx) {
    int j = 0;
    size_t at = 0;
    for (size_t n; i >= at + (n = send ? vcount(p, world, r, j) : vcount(p, world, j, r)); j++) at += n;
    *peer = j, *idx = i - at;
}

// The value of hash h in case ci's type, stored at p.
static void store(const ccase *c, uint64_t h, void *p) {
    float f = c->random ? (float)((double)(h >> 40) / (double)(1u << 23) - 1.0) : (float)((int)(h % 17) - 8);
    switch (c->t) {
    case TK_F32: memcpy(p, &f, 4); break;
    case TK_BF16: { uint16_t b = f_bf16(f); memcpy(p, &b, 2); break; }
    case TK_F16: { _Float16 x = (_Float16)f; memcpy(p, &x, 2); break; }
    case TK_I32: { uint32_t x = (uint32_t)h; memcpy(p, &x, 4); break; }
    case TK_I64: memcpy(p, &h, 8); break;
    case TK_U8: *(uint8_t *)p = (uint8_t)h; break;
    }
}

// Element i of rank r's send for case ci, stored at p.
static void input(int ci, int r, int world, size_t i, void *p) {
    const ccase *c = &g_cases[ci];
    if (c->k != TK_COLL_ALL_TO_ALLV) {
        store(c, draw(ci, r, i), p);
        return;
    }
    int dst;
    size_t idx;
    vlocate(c->pattern, world, r, 1, i, &dst, &idx);
    store(c, vvalue(ci, r, dst, idx), p);
}

static float as_float(tk_dtype t, const void *p) {
    if (t == TK_F32) { float f; memcpy(&f, p, 4); return f; }
    if (t == TK_BF16) { uint16_t b; memcpy(&b, p, 2); return bf16_f(b); }
    _Float16 x;
    memcpy(&x, p, 2);
    return (float)x;
}

// The expected sum over ranks of input element i (in every rank's send) into p.
static void expect_sum(int ci, int world, size_t i, void *p) {
    const ccase *c = &g_cases[ci];
    unsigned char x[8];
    if (c->t == TK_I32 || c->t == TK_I64 || c->t == TK_U8) {
        uint64_t s = 0; // wrapping sums, truncated to the type below
        for (int r = 0; r < world; r++) {
            memset(x, 0, 8);
            input(ci, r, world, i, x);
            uint64_t v = 0;
            memcpy(&v, x, esize(c->t)); // little-endian host
            s += v;
        }
        memcpy(p, &s, esize(c->t));
        return;
    }
    float v;
    if (!c->random) { // small integers: the exact value, then converted (exact in every type)
        long sum = 0;
        for (int r = 0; r < world; r++) {
            input(ci, r, world, i, x);
            sum += lrintf(as_float(c->t, x));
        }
        v = (float)((double)sum * c->scale);
    } else { // the contract: fp32, each input times the scale, summed in rank order
        v = 0;
        for (int r = 0; r < world; r++) {
            input(ci, r, world, i, x);
            float y = as_float(c->t, x) * c->scale;
            v = r ? v + y : y;
        }
    }
    if (c->t == TK_F32) memcpy(p, &v, 4);
    else if (c->t == TK_BF16) { uint16_t b = f_bf16(v); memcpy(p, &b, 2); }
    else { _Float16 h = (_Float16)v; memcpy(p, &h, 2); }
}

// Elements of rank r's send and recv.
static size_t in_count(const ccase *c, int world, int r) {
    if (c->k == TK_COLL_ALL_TO_ALLV) return vsum(c->pattern, world, r, 1, world);
    return c->k == TK_COLL_ALL_REDUCE || c->k == TK_COLL_ALL_GATHER ? c->count : (size_t)world * c->count;
}
static size_t out_count(const ccase *c, int world, int r) {
    if (c->k == TK_COLL_ALL_TO_ALLV) return vsum(c->pattern, world, r, 0, world);
    return c->k == TK_COLL_ALL_REDUCE || c->k == TK_COLL_REDUCE_SCATTER ? c->count : (size_t)world * c->count;
}

// Expected output element o of rank q.
static void expect(int ci, int world, int q, size_t o, void *p) {
    const ccase *c = &g_cases[ci];
    size_t n = c->count;
    switch (c->k) {
    case TK_COLL_ALL_REDUCE: expect_sum(ci, world, o, p); break;
    case TK_COLL_REDUCE_SCATTER: expect_sum(ci, world, (size_t)q * n + o, p); break;
    case TK_COLL_ALL_GATHER: input(ci, (int)(o / n), world, o % n, p); break;
    case TK_COLL_ALL_TO_ALL: input(ci, (int)(o / n), world, (size_t)q * n + o % n, p); break;
    case TK_COLL_ALL_TO_ALLV: {
        int src;
        size_t idx;
        vlocate(c->pattern, world, q, 0, o, &src, &idx);
        store(c, vvalue(ci, src, q, idx), p);
        break;
    }
    }
}

static void add_case(tk_coll k, tk_dtype t, size_t count, float scale, int random, int inplace) {
    if (g_ncases < MAX_CASES) g_cases[g_ncases++] = (ccase){k, t, count, scale, random, inplace, 0};
}
static void add_vcase(tk_dtype t, int pattern) {
    if (g_ncases < MAX_CASES) g_cases[g_ncases++] = (ccase){TK_COLL_ALL_TO_ALLV, t, 0, 1.0f, 1, 0, pattern};
}

// ---- ranks ----------------------------------------------------------------------------------

typedef int (*rank_fn)(int rank, int world, void *arg);

static void new_run(void) {
    snprintf(g_run, sizeof g_run, "shmtest-%d-%d", (int)getpid(), ++g_runs);
    setenv("TK_RUN_ID", g_run, 1);
}

static int open_comm(int rank, int world, double timeout, tk_ctx **c, tk_comm **m, tk_err *e) {
    char spec[256];
    snprintf(spec, sizeof spec, "file:%s/rdv-%s", g_dir, g_run);
    tk_rank_info r = {.rank = rank, .world = world, .local_rank = rank, .local_world = world};
    if (tk_ctx_create(c, TK_BACKEND_CPU, 0, e)) return e->code;
    return tk_comm_create(*c, &r, spec, timeout, m, e);
}

static void say_err(int rank, const char *what, const tk_err *e) {
    char buf[1024];
    tk_err_format(e, buf, sizeof buf);
    printf("# rank %d: %s: %s\n", rank, what, buf);
    fflush(stdout);
}

// Fork world ranks running fn; wait for all (at most limit_s, then kill them). status[r] gets
// the wait status. wait_first: a rank whose process is reaped only after every other rank
// ended (so it stays a zombie meanwhile), or -1.
static int run_ranks(int world, rank_fn fn, void *arg, double limit_s, int wait_first_not, int *status) {
    pid_t pid[8];
    fflush(stdout);
    for (int r = 0; r < world; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm((unsigned)limit_s + 5); // a hung rank dies even if the parent is gone
            int rc = fn(r, world, arg);
            fflush(stdout);
            _exit(rc);
        }
    }
    double deadline = tk_now() + limit_s;
    int left = world, hung = 0;
    int done[8] = {0};
    while (left) {
        for (int r = 0; r < world; r++) {
            if (done[r]) continue;
            if (r == wait_first_not && left > 1) continue;
            if (waitpid(pid[r], &status[r], WNOHANG) == pid[r]) done[r] = 1, left--;
        }
        if (left && tk_now() > deadline) {
            hung = 1;
            for (int r = 0; r < world; r++)
                if (!done[r]) kill(pid[r], SIGKILL);
            for (int r = 0; r < world; r++)
                if (!done[r]) waitpid(pid[r], &status[r], 0), done[r] = 1;
            break;
        }
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    if (hung) printf("# ranks still running after %g s were killed\n", limit_s);
    return hung;
}

// Segments of the current run left behind (in /dev/shm, or TMPDIR or /tmp without it).
static int leftovers(void) {
    char prefix[128];
    snprintf(prefix, sizeof prefix, "tk-comm-%s-", g_run);
    const char *tmp = getenv("TMPDIR");
    const char *dirs[] = {"/dev/shm", tmp && *tmp ? tmp : "/tmp", "/tmp"};
    int n = 0;
    for (int d = 0; d < 3; d++) {
        DIR *dir = opendir(dirs[d]);
        if (!dir) continue;
        struct dirent *de;
        while ((de = readdir(dir)))
            if (strncmp(de->d_name, prefix, strlen(prefix)) == 0) {
                printf("# left behind: %s/%s\n", dirs[d], de->d_name);
                n++;
            }
        closedir(dir);
    }
    return n;
}

static int exited(int st, int code) { return WIFEXITED(st) && WEXITSTATUS(st) == code; }

// ---- correctness ----------------------------------------------------------------------------

// Every case in order on one communicator; outputs to out-RUN-RANK.bin.
static int rank_cases(int rank, int world, void *arg) {
    (void)arg;
    tk_ctx *c;
    tk_comm *m;
    tk_err e = {0};
    if (open_comm(rank, world, 30, &c, &m, &e)) return say_err(rank, "create", &e), 10;
    char path[256];
    snprintf(path, sizeof path, "%s/out-%s-%d.bin", g_dir, g_run, rank);
    FILE *f = fopen(path, "wb");
    if (!f) return 11;
    for (int ci = 0; ci < g_ncases; ci++) {
        const ccase *cc = &g_cases[ci];
        size_t es = esize(cc->t), ni = in_count(cc, world, rank), no = out_count(cc, world, rank);
        unsigned char *in = malloc(ni * es + 1), *out = malloc(no * es + 1);
        for (size_t i = 0; i < ni; i++) input(ci, rank, world, i, in + i * es);
        memset(out, 0xa5, no * es); // garbage where nothing was written
        int rc = 0;
        void *sp = ni ? in : NULL, *rp = no ? out : NULL; // empty calls may pass NULL
        size_t sc[8], rcn[8];
        for (int j = 0; j < world; j++)
            sc[j] = vcount(cc->pattern, world, rank, j), rcn[j] = vcount(cc->pattern, world, j, rank);
        switch (cc->k) {
        case TK_COLL_ALL_REDUCE:
            if (cc->inplace) memcpy(out, in, ni * es);
            rc = tk_allreduce_sum(m, cc->inplace ? rp : sp, rp, cc->count, cc->t, cc->scale, TK_STREAM_COMM, &e);
            break;
        case TK_COLL_REDUCE_SCATTER:
            rc = tk_reduce_scatter_sum(m, sp, rp, cc->count, cc->t, cc->scale, TK_STREAM_COMM, &e);
            break;
        case TK_COLL_ALL_GATHER: rc = tk_all_gather(m, sp, rp, cc->count, cc->t, TK_STREAM_COMM, &e); break;
        case TK_COLL_ALL_TO_ALL: rc = tk_all_to_all(m, sp, rp, cc->count, cc->t, TK_STREAM_COMM, &e); break;
        case TK_COLL_ALL_TO_ALLV: rc = tk_all_to_allv(m, sp, sc, rp, rcn, cc->t, TK_STREAM_COMM, &e); break;
        }
        if (!rc) rc = tk_comm_wait(m, TK_STREAM_COMM, 1, &e);
        if (rc) {
            say_err(rank, "collective", &e);
            return 12;
        }
        fwrite(out, es, no, f);
        free(in), free(out);
    }
    fclose(f);
    tk_comm_destroy(m);
    tk_ctx_destroy(c);
    return 0;
}

// Run the cases with world ranks, then check every output byte. 0 when all is well.
static int check_cases(int world, const char *slot_bytes) {
    new_run();
    if (slot_bytes) setenv("TK_COMM_SHM_SLOT_BYTES", slot_bytes, 1);
    else unsetenv("TK_COMM_SHM_SLOT_BYTES");
    int st[8], bad = 0;
    double t0 = tk_now();
    if (run_ranks(world, rank_cases, NULL, 120, -1, st)) return 1;
    unsetenv("TK_COMM_SHM_SLOT_BYTES");
    for (int r = 0; r < world; r++)
        if (!exited(st[r], 0)) printf("# world %d: rank %d ended with status 0x%x\n", world, r, st[r]), bad = 1;
    if (bad) return 1;
    FILE *f[8];
    for (int r = 0; r < world; r++) {
        char path[256];
        snprintf(path, sizeof path, "%s/out-%s-%d.bin", g_dir, g_run, r);
        f[r] = fopen(path, "rb");
        if (!f[r]) return 1;
    }
    for (int ci = 0; ci < g_ncases && !bad; ci++) {
        const ccase *cc = &g_cases[ci];
        size_t es = esize(cc->t), nmax = 0;
        for (int q = 0; q < world; q++) nmax = out_count(cc, world, q) > nmax ? out_count(cc, world, q) : nmax;
        unsigned char *got = malloc(nmax * es + 1), *first = malloc(nmax * es + 1), want[8];
        for (int q = 0; q < world && !bad; q++) {
            size_t no = out_count(cc, world, q);
            if (fread(got, es, no, f[q]) != no) {
                printf("# short output of rank %d\n", q);
                bad = 1;
                break;
            }
            for (size_t o = 0; o < no && !bad; o++) {
                expect(ci, world, q, o, want);
                if (memcmp(got + o * es, want, es) != 0) {
                    uint64_t g = 0, w = 0;
                    memcpy(&g, got + o * es, es), memcpy(&w, want, es);
                    printf("# world %d case %d (coll %d, dtype %s, count %zu, pattern %d, scale %g, %s%s): rank %d element %zu is 0x%llx, want 0x%llx\n",
                           world, ci, (int)cc->k, tk_dtype_name(cc->t), cc->count, cc->pattern, cc->scale,
                           cc->random ? "random" : "small integers", cc->inplace ? ", in place" : "", q, o,
                           (unsigned long long)g, (unsigned long long)w);
                    bad = 1;
                }
            }
            // An all-reduce gives every rank the same bytes.
            if (cc->k == TK_COLL_ALL_REDUCE) {
                if (q == 0) memcpy(first, got, no * es);
                else if (memcmp(first, got, no * es) != 0) printf("# all-reduce case %d: rank %d differs from rank 0\n", ci, q), bad = 1;
            }
        }
        free(got), free(first);
    }
    for (int r = 0; r < world; r++) fclose(f[r]);
    if (leftovers()) bad = 1;
    printf("# world %d, slot %s: %d collectives checked in %.2f s\n", world, slot_bytes ? slot_bytes : "default",
           g_ncases, tk_now() - t0);
    return bad;
}

static void setup(void) {
    if (g_dir[0]) return;
    g_parent = getpid();
    snprintf(g_dir, sizeof g_dir, "%s/tk-comm-shm-test-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) {
        printf("# mkdtemp failed\n");
        exit(1);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g_seed = mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 44));
    const char *s = getenv("TK_TEST_SEED"); // to replay a failure
    if (s && *s) g_seed = strtoull(s, NULL, 0);
    printf("# seed %llu (TK_TEST_SEED=%llu replays it)\n", (unsigned long long)g_seed, (unsigned long long)g_seed);
}

__attribute__((destructor)) static void cleanup(void) {
    if (!g_dir[0] || getpid() != g_parent) return;
    DIR *d = opendir(g_dir);
    if (!d) return;
    struct dirent *de;
    char p[512];
    while ((de = readdir(d)))
        if (de->d_name[0] != '.') snprintf(p, sizeof p, "%s/%s", g_dir, de->d_name), unlink(p);
    closedir(d);
    rmdir(g_dir);
}

TK_TEST(comm_shm_small_integers_exact) {
    setup();
    g_ncases = 0;
    const size_t counts[] = {0, 1, 7, 1001};
    const tk_dtype red[] = {TK_F32, TK_BF16, TK_F16, TK_I32, TK_I64, TK_U8};
    const tk_dtype mov[] = {TK_F32, TK_BF16, TK_I64, TK_U8};
    for (int ci = 0; ci < 4; ci++) {
        for (int d = 0; d < 6; d++) {
            int fl = red[d] == TK_F32 || red[d] == TK_BF16 || red[d] == TK_F16;
            add_case(TK_COLL_ALL_REDUCE, red[d], counts[ci], 1.0f, 0, 0);
            add_case(TK_COLL_REDUCE_SCATTER, red[d], counts[ci], 1.0f, 0, 0);
            if (fl) add_case(TK_COLL_ALL_REDUCE, red[d], counts[ci], 0.5f, 0, ci == 3);
            if (fl) add_case(TK_COLL_REDUCE_SCATTER, red[d], counts[ci], 0.25f, 0, 0);
        }
        for (int d = 0; d < 4; d++) {
            add_case(TK_COLL_ALL_GATHER, mov[d], counts[ci], 1.0f, 0, 0);
            add_case(TK_COLL_ALL_TO_ALL, mov[d], counts[ci], 1.0f, 0, 0);
        }
    }
    // 512-byte slots: 1001 elements take from 8 to 126 rounds.
    for (int w = 2; w <= 4; w++) CHECK_EQ_INT(check_cases(w, "512"), 0);
}

TK_TEST(comm_shm_random_data_rank_order) {
    setup();
    g_ncases = 0;
    add_case(TK_COLL_ALL_REDUCE, TK_F32, 10007, 1.0f / 3, 1, 0);
    add_case(TK_COLL_ALL_REDUCE, TK_F32, 4099, 1.0f, 1, 1);
    add_case(TK_COLL_ALL_REDUCE, TK_BF16, 3001, 0.1f, 1, 0);
    add_case(TK_COLL_ALL_REDUCE, TK_F16, 999, 0.7f, 1, 1);
    add_case(TK_COLL_REDUCE_SCATTER, TK_F32, 2049, 1.0f / 3, 1, 0);
    add_case(TK_COLL_REDUCE_SCATTER, TK_BF16, 1023, 1.0f, 1, 0);
    add_case(TK_COLL_ALL_GATHER, TK_F32, 3333, 1.0f, 1, 0);
    add_case(TK_COLL_ALL_TO_ALL, TK_BF16, 777, 1.0f, 1, 0);
    for (int w = 2; w <= 4; w++) CHECK_EQ_INT(check_cases(w, "4096"), 0);
}

TK_TEST(comm_shm_all_to_allv) {
    setup();
    g_ncases = 0;
    // Each pattern in three element sizes, between other collectives on the same communicator
    // (the counts round must leave the slots' alternation in step).
    const tk_dtype ts[] = {TK_I64, TK_U8, TK_BF16};
    for (int p = 0; p < 4; p++)
        for (int d = 0; d < 3; d++) {
            add_vcase(ts[d], p);
            add_case(d == 1 ? TK_COLL_ALL_REDUCE : TK_COLL_ALL_TO_ALL, TK_I64, 33, 1.0f, 0, 0);
        }
    add_vcase(TK_I64, 1);
    add_vcase(TK_I64, 3); // back to back: nothing between an empty call and the next
    add_vcase(TK_I64, 0);
    // 512-byte slots: pattern 1's blocks (up to 1041 elements) take up to 66 rounds.
    for (int w = 2; w <= 4; w++) CHECK_EQ_INT(check_cases(w, "512"), 0);
}

TK_TEST(comm_shm_default_slot_large_message) {
    setup();
    g_ncases = 0;
    // 12 MiB + 4 bytes: more than one default slot (8 MiB for 2 ranks).
    add_case(TK_COLL_ALL_REDUCE, TK_F32, ((size_t)3 << 20) + 1, 0.5f, 0, 1);
    add_case(TK_COLL_ALL_GATHER, TK_U8, ((size_t)9 << 20) + 3, 1.0f, 0, 0);
    add_vcase(TK_I64, 4); // rank 1 to rank 0: 9 MiB + 40 bytes
    CHECK_EQ_INT(check_cases(2, NULL), 0);
}

// ---- failures -------------------------------------------------------------------------------

typedef struct {
    int victim;       // the rank that misbehaves
    int mode;         // see rank_fail
    double timeout;   // the communicator's
    double max_s;     // how long a survivor may take to fail
    const char *want; // in a survivor's error message
} fcase;

// mode 0: the victim makes one all-reduce, then exits (status 7) while the others make a second.
// mode 1: the victim is killed by SIGKILL in the middle of a stream of all-reduces.
// mode 2: the victim makes no call for 3 s (longer than the timeout), then one that must fail
//         at once (the others gave up).
// mode 3: the victim exits before it even creates the communicator.
// mode 4: the victim calls an all-reduce of another count.
// A survivor exits 0 when its error names the victim as wanted, or 20 when it names another
// survivor that gave up first (with 3+ ranks they race); at least one must exit 0.
static int rank_fail(int rank, int world, void *arg) {
    const fcase *fc = arg;
    tk_ctx *c;
    tk_comm *m;
    tk_err e = {0};
    int victim = rank == fc->victim;
    if (victim && fc->mode == 3) _exit(7);
    double t0 = tk_now();
    int rc = open_comm(rank, world, fc->timeout, &c, &m, &e);
    if (fc->mode == 3) { // survivors: creation fails
        double dt = tk_now() - t0;
        int alt = rc == TK_EDEVICE && strstr(e.what, "gave up") && dt <= fc->max_s;
        if (!alt && (rc != TK_EDEVICE || !strstr(e.what, fc->want) || dt > fc->max_s)) {
            say_err(rank, "create should have failed", &e);
            printf("# rank %d: rc %d after %.2f s\n", rank, rc, dt);
            return 1;
        }
        printf("# rank %d: creation failed as expected after %.2f s: %s\n", rank, dt, e.what);
        return alt ? 20 : 0;
    }
    if (rc) return say_err(rank, "create", &e), 10;
    float x[33];
    for (int i = 0; i < 33; i++) x[i] = (float)i;
    long n = 0;
    if (fc->mode == 0 || fc->mode == 2) {
        rc = tk_allreduce_sum(m, x, x, 33, TK_F32, 1.0f, TK_STREAM_COMM, &e);
        if (rc) return say_err(rank, "first all-reduce", &e), 11;
        n = 1;
        if (victim && fc->mode == 0) _exit(7);
        if (victim) {
            sleep(3);
            t0 = tk_now();
            rc = tk_allreduce_sum(m, x, x, 33, TK_F32, 0.5f, TK_STREAM_COMM, &e); // what the others called
            if (rc != TK_EDEVICE || tk_now() - t0 > 0.5 || !strstr(e.what, "gave up")) {
                say_err(rank, "a call after the others gave up should fail at once", &e);
                return 1;
            }
            return 0;
        }
    }
    if (fc->mode == 1 && victim) {
        for (int i = 0; i < 20; i++)
            if (tk_allreduce_sum(m, x, x, 33, TK_F32, 0.5f, TK_STREAM_COMM, &e)) return 11;
        raise(SIGKILL);
    }
    size_t count = fc->mode == 4 && victim ? 34 : 33;
    float y[34] = {0};
    t0 = tk_now();
    for (;;) { // until it fails; mode 1's victim leaves after 20 all-reduces
        rc = tk_allreduce_sum(m, y, y, count, TK_F32, 0.5f, TK_STREAM_COMM, &e);
        if (rc) break;
        if (++n > 100000) return printf("# rank %d: collectives kept working\n", rank), 1;
    }
    double dt = tk_now() - t0;
    const char *want = fc->mode == 4 ? "collectives differ" : fc->want;
    int want_rc = fc->mode == 4 ? TK_EINTERNAL : TK_EDEVICE;
    int alt = fc->mode != 4 && rc == want_rc && strstr(e.what, "gave up") && dt <= fc->max_s;
    if (!alt && (rc != want_rc || !strstr(e.what, want) || dt > fc->max_s)) {
        say_err(rank, "unexpected failure", &e);
        printf("# rank %d: rc %d after %.2f s; wanted rc %d and \"%s\" within %g s\n", rank, rc, dt, want_rc, want,
               fc->max_s);
        return 1;
    }
    printf("# rank %d: failed as expected after %.2f s: %s\n", rank, dt, e.what);
    // Once failed, always failed.
    rc = tk_allreduce_sum(m, y, y, count, TK_F32, 0.5f, TK_STREAM_COMM, &e);
    if (rc != TK_EDEVICE || !strstr(e.what, "aborted")) return say_err(rank, "call after a failure", &e), 1;
    if (tk_comm_wait(m, TK_STREAM_COMM, 1, &e) != 0) return 1; // cpu: nothing pending
    tk_comm_destroy(m);
    tk_ctx_destroy(c);
    return alt ? 20 : 0;
}

static int check_failure(int world, fcase fc, int victim_status_ok(int st)) {
    new_run();
    int st[8];
    double t0 = tk_now();
    // mode 0: the victim stays a zombie until the others ended (kill(pid, 0) succeeds on it).
    if (run_ranks(world, rank_fail, &fc, 30, fc.mode == 0 ? fc.victim : -1, st)) return 1;
    int bad = 0, precise = 0;
    for (int r = 0; r < world; r++) {
        int ok = r == fc.victim ? victim_status_ok(st[r]) : exited(st[r], 0) || exited(st[r], 20);
        precise += r != fc.victim && exited(st[r], 0);
        if (!ok) printf("# mode %d: rank %d ended with status 0x%x\n", fc.mode, r, st[r]), bad = 1;
    }
    if (!precise) printf("# mode %d: no survivor named the victim\n", fc.mode), bad = 1;
    if (leftovers()) bad = 1;
    printf("# mode %d, world %d: %.2f s\n", fc.mode, world, tk_now() - t0);
    return bad;
}

static int status_7(int st) { return exited(st, 7); }
static int status_kill(int st) { return WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL; }
static int status_0(int st) { return exited(st, 0); }

TK_TEST(comm_shm_peer_exits) {
    setup();
    // A long timeout: the exit must be noticed from the pid, not by waiting.
    CHECK_EQ_INT(check_failure(3, (fcase){2, 0, 60, 3, "rank 2 (pid"}, status_7), 0);
    CHECK_EQ_INT(check_failure(3, (fcase){0, 0, 60, 3, "rank 0 (pid"}, status_7), 0);
}

TK_TEST(comm_shm_peer_killed) {
    setup();
    CHECK_EQ_INT(check_failure(2, (fcase){0, 1, 60, 3, "rank 0 (pid"}, status_kill), 0);
    CHECK_EQ_INT(check_failure(4, (fcase){3, 1, 60, 3, "rank 3 (pid"}, status_kill), 0);
}

TK_TEST(comm_shm_peer_hangs_timeout) {
    setup();
    CHECK_EQ_INT(check_failure(2, (fcase){1, 2, 1, 2.5, "rank 1 did not arrive within 1 s"}, status_0), 0);
    CHECK_EQ_INT(check_failure(3, (fcase){2, 2, 1, 2.5, "rank 2 did not arrive within 1 s"}, status_0), 0);
}

TK_TEST(comm_shm_peer_never_joins) {
    setup();
    CHECK_EQ_INT(check_failure(3, (fcase){2, 3, 1, 3, "communicator creation: rank 2 did not arrive"}, status_7), 0);
}

TK_TEST(comm_shm_mismatched_calls) {
    setup();
    CHECK_EQ_INT(check_failure(2, (fcase){1, 4, 10, 3, NULL}, status_0), 0);
}

// mode 0: every rank makes an all-to-allv that works (pattern 0), then one where the last rank
// expects one element more from rank 0 than rank 0 sends it. mode 1: rank 1 calls tk_all_to_all
// where the others call tk_all_to_allv. Every rank, involved or not, must fail at once with
// TK_EINTERNAL and the same message, and later calls with TK_EDEVICE.
static int rank_vmismatch(int rank, int world, void *arg) {
    int mode = *(const int *)arg;
    tk_ctx *c;
    tk_comm *m;
    tk_err e = {0};
    if (open_comm(rank, world, 10, &c, &m, &e)) return say_err(rank, "create", &e), 10;
    int64_t in[128] = {0}, out[128];
    size_t sc[8], rcn[8];
    for (int j = 0; j < world; j++) sc[j] = vcount(0, world, rank, j), rcn[j] = vcount(0, world, j, rank);
    if (tk_all_to_allv(m, in, sc, out, rcn, TK_I64, TK_STREAM_COMM, &e)) return say_err(rank, "first all-to-allv", &e), 11;
    char want[160];
    if (mode == 0) {
        size_t n = vcount(0, world, 0, world - 1);
        if (rank == world - 1) rcn[0]++;
        snprintf(want, sizeof want,
                 "rank %d of %d: all-to-allv counts differ: rank 0 sends %zu elements to rank %d, which expects %zu",
                 rank, world, n, world - 1, n + 1);
    } else {
        snprintf(want, sizeof want, "rank %d of %d: collectives differ", rank, world);
    }
    double t0 = tk_now();
    int rc = mode == 1 && rank == 1 ? tk_all_to_all(m, in, out, 5, TK_I64, TK_STREAM_COMM, &e)
                                    : tk_all_to_allv(m, in, sc, out, rcn, TK_I64, TK_STREAM_COMM, &e);
    double dt = tk_now() - t0;
    if (rc != TK_EINTERNAL || strncmp(e.what, want, strlen(want)) || dt > 3) {
        say_err(rank, "unexpected result", &e);
        printf("# rank %d: rc %d after %.2f s; wanted rc %d and \"%s\"\n", rank, rc, dt, TK_EINTERNAL, want);
        return 1;
    }
    printf("# rank %d: failed as expected after %.2f s: %s\n", rank, dt, e.what);
    rc = tk_all_to_allv(m, in, sc, out, rcn, TK_I64, TK_STREAM_COMM, &e);
    if (rc != TK_EDEVICE || !strstr(e.what, "aborted")) return say_err(rank, "call after a failure", &e), 1;
    tk_comm_destroy(m);
    tk_ctx_destroy(c);
    return 0;
}

static int check_vmismatch(int world, int mode) {
    new_run();
    int st[8], bad = 0;
    if (run_ranks(world, rank_vmismatch, &mode, 30, -1, st)) return 1;
    for (int r = 0; r < world; r++)
        if (!exited(st[r], 0)) printf("# mode %d, world %d: rank %d ended with status 0x%x\n", mode, world, r, st[r]), bad = 1;
    return bad || leftovers();
}

TK_TEST(comm_shm_all_to_allv_count_contract) {
    setup();
    for (int w = 2; w <= 4; w++) CHECK_EQ_INT(check_vmismatch(w, 0), 0); // world 2: sends 0, expects 1
    for (int w = 2; w <= 3; w++) CHECK_EQ_INT(check_vmismatch(w, 1), 0);
}

TK_TEST(comm_shm_bad_slot_size) {
    setup();
    new_run();
    setenv("TK_COMM_SHM_SLOT_BYTES", "12", 1);
    tk_ctx *c;
    tk_comm *m = NULL;
    tk_err e = {0};
    // Rank 0 checks the variable before anything else: no peer needed.
    CHECK_EQ_INT(open_comm(0, 2, 1, &c, &m, &e), TK_EUSAGE);
    CHECK(m == NULL);
    CHECK_STR(e.what, "TK_COMM_SHM_SLOT_BYTES: expected a byte count in [128, 1073741824], got '12'");
    unsetenv("TK_COMM_SHM_SLOT_BYTES");
    CHECK_EQ_INT(leftovers(), 0);
    tk_ctx_destroy(c);
}
