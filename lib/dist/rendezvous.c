// Rendezvous: rank 0 hands a small blob (the NCCL unique id) to every other rank, through a file
// on a shared file system or over TCP. Both ways are bounded in time and tagged with the run id.
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/progress.h"
#include "dist/dist.h"

#define RDV_MAGIC "TKRV1"
#define RDV_VERSION 1u

static void run_id(char *buf, size_t n) {
    const char *id = getenv("TK_RUN_ID");
    const char *job = getenv("SLURM_JOB_ID"), *step = getenv("SLURM_STEP_ID");
    if (id && *id) snprintf(buf, n, "%s", id);
    else if (job && *job) snprintf(buf, n, "slurm-%s.%s", job, step ? step : "");
    else buf[0] = 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

// ---- file:PATH --------------------------------------------------------------------------------
// PATH holds: "TKRV1\n" RUNID "\n" WORLD "\n" LEN "\n" then LEN raw bytes.

static int file_publish(const char *path, const char *rid, int world, const void *blob, size_t n,
                        tk_err *e) {
    tk_afile f;
    TRY(tk_afile_open(&f, path, e));
    fprintf(f.fp, "%s\n%s\n%d\n%zu\n", RDV_MAGIC, rid, world, n);
    int rc = tk_write_all(f.fp, blob, n, path, e);
    if (rc) {
        tk_afile_abort(&f);
        return rc;
    }
    return tk_afile_commit(&f, e);
}

// 1: got a matching file; 0: not (yet) there or not ours.
static int file_try_read(const char *path, const char *rid, int world, time_t not_before, void *blob,
                         size_t *n) {
    struct stat st;
    if (stat(path, &st) != 0) return 0;
    if (!rid[0] && st.st_mtime < not_before) return 0; // stale file of an earlier run
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char magic[16], frid[256];
    int fworld;
    size_t len;
    int ok = fscanf(f, "%15[^\n]\n", magic) == 1 && strcmp(magic, RDV_MAGIC) == 0;
    frid[0] = 0;
    if (ok) {
        int c = fgetc(f);
        size_t k = 0;
        while (c != EOF && c != '\n' && k + 1 < sizeof frid) frid[k++] = (char)c, c = fgetc(f);
        frid[k] = 0;
        ok = c == '\n';
    }
    ok = ok && fscanf(f, "%d\n%zu", &fworld, &len) == 2 && fgetc(f) == '\n';
    ok = ok && strcmp(frid, rid) == 0 && fworld == world && len <= TK_RDV_MAX_BLOB;
    ok = ok && fread(blob, 1, len, f) == len;
    fclose(f);
    if (ok) *n = len;
    return ok;
}

// ---- tcp:HOST:PORT ----------------------------------------------------------------------------
// A joining rank sends: "TKRV" u32 version, u32 world, u32 rank, u32 run-id length, run id.
// Rank 0 answers: u32 status (0 = accepted, 1 = not this run), u32 length, blob.

static int split_host_port(const char *hp, char *host, size_t hn, char *port, size_t pn) {
    const char *colon = strrchr(hp, ':');
    if (!colon || colon == hp || !colon[1]) return -1;
    size_t h = (size_t)(colon - hp);
    if (hp[0] == '[' && h >= 2 && hp[h - 1] == ']') hp++, h -= 2; // [::1]:port
    if (h >= hn || strlen(colon + 1) >= pn) return -1;
    memcpy(host, hp, h);
    host[h] = 0;
    snprintf(port, pn, "%s", colon + 1);
    return 0;
}

// Read or write exactly n bytes before the deadline. 0 ok, -1 closed/error, -2 timeout.
static int io_all(int fd, void *buf, size_t n, int writing, double deadline) {
    char *p = buf;
    while (n) {
        double left = deadline - tk_now();
        if (left <= 0) return -2;
        struct pollfd pfd = {fd, writing ? POLLOUT : POLLIN, 0};
        int pr = poll(&pfd, 1, (int)(left * 1000) + 1);
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) return pr == 0 ? -2 : -1;
        ssize_t k = writing ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (k <= 0) return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static int tcp_serve(const char *spec, const char *port, const tk_rank_info *r, const char *rid,
                     const void *blob, size_t n, double timeout_s, tk_err *e) {
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
    struct addrinfo *ai = NULL;
    int gai = getaddrinfo(NULL, port, &hints, &ai);
    if (gai) return tk_err_set(e, TK_EUSAGE, "rendezvous %s: bad port: %s", spec, gai_strerror(gai));
    int ls = -1;
    for (struct addrinfo *a = ai; a && ls < 0; a = a->ai_next) {
        ls = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
        if (ls < 0) continue;
        int one = 1;
        setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (a->ai_family == AF_INET6) {
            int zero = 0; // accept IPv4 too
            setsockopt(ls, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof zero);
        }
        if (bind(ls, a->ai_addr, a->ai_addrlen) != 0 || listen(ls, 1024) != 0) {
            close(ls);
            ls = -1;
        }
    }
    int err = errno;
    freeaddrinfo(ai);
    if (ls < 0) return tk_err_errno(e, err, "rendezvous %s: rank 0 cannot listen on port %s", spec, port);

    int rc = 0, joined = 0;
    char *seen = calloc((size_t)r->world, 1);
    double deadline = tk_now() + timeout_s;
    while (joined < r->world - 1) {
        double left = deadline - tk_now();
        struct pollfd pfd = {ls, POLLIN, 0};
        int pr = left > 0 ? poll(&pfd, 1, (int)(left * 1000) + 1) : 0;
        if (pr < 0 && errno == EINTR) continue;
        if (pr <= 0) {
            char missing[256] = "";
            size_t k = 0;
            for (int i = 1; i < r->world && k + 12 < sizeof missing; i++)
                if (!seen[i]) k += (size_t)snprintf(missing + k, sizeof missing - k, "%s%d", k ? "," : "", i);
            rc = tk_err_set(e, TK_EIO, "rendezvous %s: only %d of %d ranks arrived within %g s (missing ranks: %s)",
                            spec, joined + 1, r->world, timeout_s, missing);
            tk_err_hint(e, "did a rank fail to start, or do the ranks use different --rendezvous values?");
            break;
        }
        int s = accept4(ls, NULL, NULL, SOCK_CLOEXEC);
        if (s < 0) continue;
        // A short deadline per peer, so one bad client cannot hold up the others.
        double pd = tk_now() + 5.0 < deadline ? tk_now() + 5.0 : deadline;
        char magic[4];
        uint32_t hdr[4];
        char prid[256];
        int ok = io_all(s, magic, 4, 0, pd) == 0 && memcmp(magic, "TKRV", 4) == 0 &&
                 io_all(s, hdr, sizeof hdr, 0, pd) == 0;
        if (ok) {
            uint32_t version = ntohl(hdr[0]), world = ntohl(hdr[1]), rank = ntohl(hdr[2]),
                     rlen = ntohl(hdr[3]);
            ok = rlen < sizeof prid && io_all(s, prid, rlen, 0, pd) == 0;
            if (ok) prid[rlen] = 0;
            int match = ok && version == RDV_VERSION && (int)world == r->world && rank >= 1 &&
                        (int)rank < r->world && !seen[rank] && strcmp(prid, rid) == 0;
            uint32_t out[2] = {htonl(match ? 0u : 1u), htonl(match ? (uint32_t)n : 0u)};
            if (ok && io_all(s, out, sizeof out, 1, pd) == 0 && (!match || io_all(s, (void *)blob, n, 1, pd) == 0) &&
                match) {
                seen[rank] = 1;
                joined++;
            }
        }
        close(s);
    }
    free(seen);
    close(ls);
    return rc;
}

static int tcp_join(const char *spec, const char *host, const char *port, const tk_rank_info *r,
                    const char *rid, void *blob, size_t *n, double timeout_s, tk_err *e) {
    double deadline = tk_now() + timeout_s;
    int refused = 0;
    while (tk_now() < deadline) {
        struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
        struct addrinfo *ai = NULL;
        int gai = getaddrinfo(host, port, &hints, &ai);
        if (gai == EAI_NONAME || gai == EAI_SERVICE)
            return tk_err_set(e, TK_EUSAGE, "rendezvous %s: cannot resolve '%s': %s", spec, host, gai_strerror(gai));
        int s = -1;
        for (struct addrinfo *a = ai; a && s < 0; a = a->ai_next) {
            s = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, 0);
            if (s >= 0 && connect(s, a->ai_addr, a->ai_addrlen) != 0) {
                close(s);
                s = -1;
            }
        }
        if (ai) freeaddrinfo(ai);
        if (s < 0) {
            refused = 1;
            sleep_ms(100); // rank 0 is not listening yet
            continue;
        }
        size_t rl = strlen(rid);
        uint32_t hdr[4] = {htonl(RDV_VERSION), htonl((uint32_t)r->world), htonl((uint32_t)r->rank), htonl((uint32_t)rl)};
        uint32_t ans[2];
        int ok = io_all(s, "TKRV", 4, 1, deadline) == 0 && io_all(s, hdr, sizeof hdr, 1, deadline) == 0 &&
                 io_all(s, (void *)rid, rl, 1, deadline) == 0 && io_all(s, ans, sizeof ans, 0, deadline) == 0;
        if (ok && ntohl(ans[0]) != 0) {
            close(s);
            tk_err_set(e, TK_EUSAGE, "rendezvous %s: rank 0 there belongs to another run or world size", spec);
            return tk_err_hint(e, "use a distinct port per job, and the same world size on every rank");
        }
        uint32_t len = ok ? ntohl(ans[1]) : 0;
        ok = ok && len <= TK_RDV_MAX_BLOB && io_all(s, blob, len, 0, deadline) == 0;
        close(s);
        if (ok) {
            *n = len;
            return 0;
        }
        sleep_ms(100);
    }
    tk_err_set(e, TK_EIO, "rendezvous %s: rank 0 did not answer within %g s%s", spec, timeout_s,
               refused ? " (connection refused)" : "");
    return tk_err_hint(e, "is rank 0 running, and is HOST:PORT its address?");
}

// 0 when spec has the form file:PATH or tcp:HOST:PORT.
static int spec_form_ok(const char *spec) {
    char host[256], port[32];
    if (strncmp(spec, "file:", 5) == 0) return spec[5] ? 0 : -1;
    if (strncmp(spec, "tcp:", 4) == 0) return split_host_port(spec + 4, host, sizeof host, port, sizeof port);
    return -1;
}

int tk_rendezvous_spec(const char *given, const char **spec, tk_err *e) {
    *spec = given;
    if (given) return 0;
    const char *v = getenv(TK_RENDEZVOUS_ENV);
    if (!v || !*v) return 0;
    if (spec_form_ok(v) != 0) {
        tk_err_set(e, TK_EUSAGE, "%s='%s': expected file:PATH or tcp:HOST:PORT", TK_RENDEZVOUS_ENV, v);
        return tk_err_hint(e, "share/launch sets it for its ranks; unset it, or give --rendezvous");
    }
    *spec = v;
    return 0;
}

int tk_rendezvous(const char *spec, const tk_rank_info *r, void *blob, size_t *n, double timeout_s,
                  tk_err *e) {
    char rid[200];
    run_id(rid, sizeof rid);
    if (r->world <= 1) return 0;
    if (r->rank == 0 && *n > TK_RDV_MAX_BLOB)
        return tk_err_set(e, TK_EINTERNAL, "rendezvous blob too large (%zu bytes)", *n);
    if (strncmp(spec, "file:", 5) == 0 && spec[5]) {
        const char *path = spec + 5;
        if (r->rank == 0) {
            // A stale file from an earlier run must not be read by this run's ranks.
            unlink(path);
            return file_publish(path, rid, r->world, blob, *n, e);
        }
        time_t not_before = time(NULL) - (time_t)timeout_s;
        double deadline = tk_now() + timeout_s;
        while (tk_now() < deadline) {
            if (file_try_read(path, rid, r->world, not_before, blob, n)) return 0;
            sleep_ms(50);
        }
        tk_err_set(e, TK_EIO, "rendezvous %s: rank 0 did not publish within %g s", spec, timeout_s);
        return tk_err_hint(e, "is rank 0 running, and do all ranks see the same file system and run id (TK_RUN_ID)?");
    }
    if (strncmp(spec, "tcp:", 4) == 0) {
        char host[256], port[32];
        if (split_host_port(spec + 4, host, sizeof host, port, sizeof port) != 0)
            return tk_err_set(e, TK_EUSAGE, "rendezvous '%s': expected tcp:HOST:PORT", spec);
        if (r->rank == 0) return tcp_serve(spec, port, r, rid, blob, *n, timeout_s, e);
        return tcp_join(spec, host, port, r, rid, blob, n, timeout_s, e);
    }
    return tk_err_set(e, TK_EUSAGE, "--rendezvous: expected file:PATH or tcp:HOST:PORT, got '%s'", spec);
}
