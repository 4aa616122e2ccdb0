// tk_dist_gatherv (lib/engine/dist.h) with forked cpu ranks (lib/gpu/comm_shm): every rank sends
// bytes of its own count (some 0, some larger than the shared segment's slot), drawn from a seed
// and its rank; the root then regenerates what each rank must have sent and compares every byte
// and every size, and each other rank checks the sizes and that it got no bytes. One rank: a
// copy. The rank processes exit 0 when all is well; the parent checks their exit statuses.
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine/dist.h"
#include "tk_test.h"

static char g_dir[128];
static uint64_t g_seed;
static int g_runs;

static uint64_t mix(uint64_t x) { // splitmix64's finalizer
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

// Rank r's count in case k: 0 for one rank of each world above 1, else up to ~3 slots' worth.
static size_t count_of(int k, int r, int world) {
    if (world > 1 && r == (k + 1) % world) return 0;
    return 1 + (size_t)(mix(g_seed ^ ((uint64_t)k << 32) ^ (uint64_t)r) % 12000);
}
static unsigned char byte_of(int k, int r, size_t i) { return (unsigned char)mix(g_seed ^ mix(((uint64_t)k << 48) ^ ((uint64_t)r << 32) ^ i)); }

static pid_t g_parent;

static void rm_dir(void) {
    char p[256];
    snprintf(p, sizeof p, "rm -rf '%s'", g_dir);
    if (getpid() == g_parent && system(p) != 0) printf("# could not remove %s\n", g_dir);
}

static void dir_once(void) {
    if (g_dir[0]) return;
    g_parent = getpid();
    atexit(rm_dir);
    snprintf(g_dir, sizeof g_dir, "%s/tk-gatherv-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(g_dir)) abort();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    g_seed = mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 44));
    const char *s = getenv("TK_TEST_SEED");
    if (s && *s) g_seed = strtoull(s, NULL, 0);
    printf("# seed %llu (TK_TEST_SEED replays it)\n", (unsigned long long)g_seed);
}

static int say(int rank, const char *what, const tk_err *e) {
    char buf[1024];
    tk_err_format(e, buf, sizeof buf);
    printf("# rank %d: %s: %s\n", rank, what, buf);
    fflush(stdout);
    return 1;
}

// Cases 0..ncases-1 in order on one communicator, the root of case k being rank k % world.
static int rank_main(int rank, int world, int ncases) {
    tk_ctx *c = NULL;
    tk_comm *m = NULL;
    tk_dist d;
    tk_err e = {0};
    char spec[256];
    snprintf(spec, sizeof spec, "file:%s/rdv-%d", g_dir, g_runs);
    tk_rank_info ri = {.rank = rank, .world = world, .local_rank = rank, .local_world = world};
    if (tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e)) return say(rank, "ctx", &e);
    if (world > 1 && tk_comm_create(c, &ri, spec, 30, &m, &e)) return say(rank, "comm", &e);
    if (tk_dist_init(&d, c, m, 30, &e)) return say(rank, "dist", &e);
    int bad = 0;
    for (int k = 0; k < ncases && !bad; k++) {
        const int root = k % world;
        const size_t n = count_of(k, rank, world);
        unsigned char *mine = malloc(n + 1);
        for (size_t i = 0; i < n; i++) mine[i] = byte_of(k, rank, i);
        void *all = (void *)1;
        int64_t sizes[8];
        if (tk_dist_gatherv(&d, root, n ? mine : NULL, n, &all, sizes, &e)) return say(rank, "gatherv", &e);
        size_t off = 0;
        for (int r = 0; r < world; r++) {
            const size_t want = count_of(k, r, world);
            if ((size_t)sizes[r] != want) printf("# case %d rank %d: size of rank %d %lld, want %zu\n", k, rank, r, (long long)sizes[r], want), bad = 1;
            for (size_t i = 0; rank == root && all && i < want && !bad; i++)
                if (((unsigned char *)all)[off + i] != byte_of(k, r, i))
                    printf("# case %d root %d: byte %zu of rank %d wrong\n", k, root, i, r), bad = 1;
            off += want;
        }
        if ((rank == root) != (all != NULL)) printf("# case %d rank %d: all %s\n", k, rank, all ? "set" : "NULL"), bad = 1;
        free(all);
        free(mine);
    }
    tk_dist_release(&d);
    if (m) tk_comm_destroy(m);
    tk_ctx_destroy(c);
    fflush(stdout);
    return bad;
}

// world forked ranks; 0 when every one exited 0 within 60 s.
static int run(int world, int ncases) {
    dir_once();
    g_runs++;
    char id[64]; // the shared segment's name
    snprintf(id, sizeof id, "gathervtest-%d-%d", (int)getpid(), g_runs);
    setenv("TK_RUN_ID", id, 1);
    pid_t pid[8];
    fflush(stdout);
    for (int r = 0; r < world; r++)
        if ((pid[r] = fork()) == 0) {
            alarm(60);
            _exit(rank_main(r, world, ncases));
        }
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st;
        waitpid(pid[r], &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st)) printf("# world %d: rank %d status 0x%x\n", world, r, st), bad = 1;
    }
    return bad;
}

TK_TEST(gatherv_one_rank_is_a_copy) { CHECK(run(1, 3) == 0); }

TK_TEST(gatherv_two_and_three_ranks_every_root_small_slots) {
    // slots of 4 KiB: the larger sends go through the segment in several pieces
    setenv("TK_COMM_SHM_SLOT_BYTES", "4096", 1);
    CHECK(run(2, 4) == 0);
    CHECK(run(3, 6) == 0);
    unsetenv("TK_COMM_SHM_SLOT_BYTES");
    CHECK(run(3, 3) == 0);
}

TK_TEST(gatherv_nothing_anywhere_and_bad_root) {
    tk_ctx *c;
    tk_dist d;
    tk_err e = {0};
    CHECK(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e) == 0);
    CHECK(tk_dist_init(&d, c, NULL, 10, &e) == 0);
    void *all = (void *)1;
    int64_t sizes[1] = {-1};
    CHECK(tk_dist_gatherv(&d, 0, NULL, 0, &all, sizes, &e) == 0);
    CHECK(all == NULL && sizes[0] == 0);
    CHECK(tk_dist_gatherv(&d, 1, "x", 1, &all, sizes, &e) == TK_EINTERNAL);
    tk_dist_release(&d);
    tk_ctx_destroy(c);
}
