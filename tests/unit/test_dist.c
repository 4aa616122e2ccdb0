// Rank detection from launcher environments and the file/tcp rendezvous, with forked ranks.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dist/dist.h"
#include "tk_test.h"

static const char *ALL_VARS[] = {"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                                 "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                                 "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE",
                                 "PMI_RANK", "PMI_SIZE", "PMI_LOCAL_RANK", "PMI_LOCAL_SIZE",
                                 "MPI_LOCALRANKID", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID",
                                 "SLURM_NTASKS_PER_NODE", "TK_RUN_ID", "SLURM_JOB_ID", "SLURM_STEP_ID",
                                 "TK_RENDEZVOUS"};

static void clear_env(void) {
    for (size_t i = 0; i < sizeof ALL_VARS / sizeof ALL_VARS[0]; i++) unsetenv(ALL_VARS[i]);
}

TK_TEST(rank_default_is_0_of_1) {
    clear_env();
    tk_rank_info r;
    tk_err e;
    CHECK_EQ_INT(tk_rank_from_env(&r, &e), 0);
    CHECK(r.rank == 0 && r.world == 1 && r.local_rank == 0);
    CHECK_STR(r.source, "default");
}

TK_TEST(rank_from_each_launcher) {
    tk_rank_info r;
    tk_err e;
    clear_env();
    setenv("SLURM_PROCID", "5", 1), setenv("SLURM_NTASKS", "16", 1), setenv("SLURM_LOCALID", "1", 1);
    setenv("SLURM_NTASKS_PER_NODE", "4(x4)", 1);
    CHECK_EQ_INT(tk_rank_from_env(&r, &e), 0);
    CHECK(r.rank == 5 && r.world == 16 && r.local_rank == 1 && r.local_world == 0);
    CHECK_STR(r.source, "slurm");
    // mpirun inside a Slurm allocation: Open MPI's variables win.
    setenv("OMPI_COMM_WORLD_RANK", "3", 1), setenv("OMPI_COMM_WORLD_SIZE", "8", 1);
    setenv("OMPI_COMM_WORLD_LOCAL_RANK", "3", 1), setenv("OMPI_COMM_WORLD_LOCAL_SIZE", "8", 1);
    CHECK_EQ_INT(tk_rank_from_env(&r, &e), 0);
    CHECK(r.rank == 3 && r.world == 8 && r.local_rank == 3 && r.local_world == 8);
    CHECK_STR(r.source, "mpirun");
    setenv("RANK", "1", 1), setenv("WORLD_SIZE", "2", 1), setenv("LOCAL_RANK", "1", 1);
    CHECK_EQ_INT(tk_rank_from_env(&r, &e), 0);
    CHECK(r.rank == 1 && r.world == 2 && r.local_rank == 1);
    CHECK_STR(r.source, "torchrun");
    clear_env();
    setenv("PMI_RANK", "2", 1), setenv("PMI_SIZE", "4", 1), setenv("MPI_LOCALRANKID", "0", 1);
    CHECK_EQ_INT(tk_rank_from_env(&r, &e), 0);
    CHECK(r.rank == 2 && r.world == 4 && r.local_rank == 0);
    CHECK_STR(r.source, "pmi");
    clear_env();
}

TK_TEST(rank_inconsistent_is_usage_error) {
    tk_rank_info r;
    tk_err e;
    clear_env();
    setenv("RANK", "4", 1), setenv("WORLD_SIZE", "4", 1);
    CHECK_EQ_INT(tk_rank_from_env(&r, &e), TK_EUSAGE);
    CHECK_STR(e.what, "inconsistent torchrun environment: RANK=4, WORLD_SIZE=4");
    setenv("RANK", "x", 1);
    CHECK_EQ_INT(tk_rank_from_env(&r, &e), TK_EUSAGE);
    CHECK_STR(e.what, "environment variable RANK='x' is not a non-negative integer");
    clear_env();
    setenv("WORLD_SIZE", "2", 1);
    CHECK_EQ_INT(tk_rank_from_env(&r, &e), TK_EUSAGE);
    clear_env();
}

static int free_port(void) {
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    bind(s, (struct sockaddr *)&a, sizeof a);
    getsockname(s, (struct sockaddr *)&a, &l);
    int p = ntohs(a.sin_port);
    close(s);
    return p;
}

// Runs `world` forked ranks through tk_rendezvous(spec); each child checks it got the blob and
// exits 0. Returns the number of ranks that failed. skip_rank0: rank 0 never starts.
static int run_ranks(const char *spec, int world, int skip_rank0, double timeout, int *last_code) {
    pid_t pids[16];
    for (int i = 0; i < world; i++) {
        pids[i] = -1;
        if (i == 0 && skip_rank0) continue;
        pids[i] = fork();
        if (pids[i] == 0) {
            tk_rank_info r = {.rank = i, .world = world};
            char blob[128];
            size_t n = sizeof blob;
            for (int k = 0; k < 128; k++) blob[k] = i == 0 ? (char)(k * 7 + 1) : 0;
            tk_err e;
            int rc = tk_rendezvous(spec, &r, blob, &n, timeout, &e);
            if (rc) _exit(rc);
            if (n != 128) _exit(90);
            for (int k = 0; k < 128; k++)
                if (blob[k] != (char)(k * 7 + 1)) _exit(91);
            _exit(0);
        }
    }
    int bad = 0;
    for (int i = 0; i < world; i++) {
        if (pids[i] < 0) continue;
        int st;
        waitpid(pids[i], &st, 0);
        int code = WIFEXITED(st) ? WEXITSTATUS(st) : 99;
        if (code) {
            bad++;
            *last_code = code;
        }
    }
    return bad;
}

TK_TEST(rendezvous_file_4_ranks) {
    clear_env();
    setenv("TK_RUN_ID", "test-run-1", 1);
    char dir[] = "/tmp/tk_rdv_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char spec[300];
    snprintf(spec, sizeof spec, "file:%s/id", dir);
    int code = 0;
    CHECK_EQ_INT(run_ranks(spec, 4, 0, 10, &code), 0);
    // A file left by that run is not taken by a run with another id: rank 1 alone times out.
    setenv("TK_RUN_ID", "test-run-2", 1);
    pid_t p = fork();
    if (p == 0) {
        tk_rank_info r = {.rank = 1, .world = 4};
        char blob[128];
        size_t n = 0;
        tk_err e;
        _exit(tk_rendezvous(spec, &r, blob, &n, 0.3, &e));
    }
    int st;
    waitpid(p, &st, 0);
    CHECK_EQ_INT(WEXITSTATUS(st), TK_EIO);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK_EQ_INT(system(cmd), 0);
    clear_env();
}

TK_TEST(rendezvous_tcp_4_ranks) {
    clear_env();
    setenv("TK_RUN_ID", "tcp-run", 1);
    char spec[64];
    snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", free_port());
    int code = 0;
    CHECK_EQ_INT(run_ranks(spec, 4, 0, 10, &code), 0);
    clear_env();
}

TK_TEST(rendezvous_tcp_missing_rank0_times_out) {
    clear_env();
    char spec[64];
    snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", free_port());
    int code = 0;
    CHECK_EQ_INT(run_ranks(spec, 2, 1, 0.5, &code), 1);
    CHECK_EQ_INT(code, TK_EIO);
}

TK_TEST(rendezvous_tcp_missing_peer_names_it) {
    clear_env();
    char spec[64];
    snprintf(spec, sizeof spec, "tcp:127.0.0.1:%d", free_port());
    tk_rank_info r = {.rank = 0, .world = 3};
    char blob[8] = "abcdefg";
    size_t n = 8;
    tk_err e;
    CHECK_EQ_INT(tk_rendezvous(spec, &r, blob, &n, 0.3, &e), TK_EIO);
    CHECK(strstr(e.what, "only 1 of 3 ranks arrived") != NULL);
    CHECK(strstr(e.what, "missing ranks: 1,2") != NULL);
}

TK_TEST(rendezvous_bad_spec) {
    tk_rank_info r = {.rank = 1, .world = 2};
    char blob[8];
    size_t n = 8;
    tk_err e;
    CHECK_EQ_INT(tk_rendezvous("nfs:/x", &r, blob, &n, 1, &e), TK_EUSAGE);
    CHECK_EQ_INT(tk_rendezvous("tcp:nohostport", &r, blob, &n, 1, &e), TK_EUSAGE);
}

// The spec of a run: the option, else TK_RENDEZVOUS (share/launch's), else none.
TK_TEST(rendezvous_spec_option_then_env) {
    clear_env();
    const char *spec = "x";
    tk_err e;
    CHECK_EQ_INT(tk_rendezvous_spec(NULL, &spec, &e), 0);
    CHECK(spec == NULL);
    setenv("TK_RENDEZVOUS", "", 1); // empty: unset
    CHECK_EQ_INT(tk_rendezvous_spec(NULL, &spec, &e), 0);
    CHECK(spec == NULL);
    setenv("TK_RENDEZVOUS", "file:/tmp/tk-launch.abc/rendezvous", 1);
    CHECK_EQ_INT(tk_rendezvous_spec(NULL, &spec, &e), 0);
    CHECK_STR(spec, "file:/tmp/tk-launch.abc/rendezvous");
    CHECK_EQ_INT(tk_rendezvous_spec("tcp:node1:29500", &spec, &e), 0); // the option wins
    CHECK_STR(spec, "tcp:node1:29500");
    setenv("TK_RENDEZVOUS", "tcp:[::1]:29500", 1);
    CHECK_EQ_INT(tk_rendezvous_spec(NULL, &spec, &e), 0);
    CHECK_STR(spec, "tcp:[::1]:29500");
    const char *bad[] = {"file:", "tcp:nohostport", "tcp::29500", "tcp:host:", "/tmp/rdv", "nfs:/x"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("TK_RENDEZVOUS", bad[i], 1);
        spec = "x";
        CHECK_EQ_INT(tk_rendezvous_spec(NULL, &spec, &e), TK_EUSAGE);
        char want[128];
        snprintf(want, sizeof want, "TK_RENDEZVOUS='%s': expected file:PATH or tcp:HOST:PORT", bad[i]);
        CHECK_STR(e.what, want);
        // a malformed variable does not matter when the option is given
        CHECK_EQ_INT(tk_rendezvous_spec("file:/x", &spec, &e), 0);
    }
    clear_env();
}
