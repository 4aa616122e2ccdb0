// The pieces of the hybrid-parallel DLRM (lib/workloads/dlrm with several ranks) on the cpu
// backend: tk_memcpy2d, the normalized BCE, and a W-rank model (forked processes, shared-memory
// collectives) against the 1-rank one, each made and trained through the engine's instance (as
// train-step does): the initialization and the checkpoint writer bitwise, three training steps
// and the evaluation forward within fp32 rounding, for W = 2, 3 (T = 5 tables: the last rank owns
// fewer) and 4 (the last rank owns none).
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bce.h"
#include "ckpt/safetensors.h"
#include "core/philox.h"
#include "core/progress.h"
#include "gpu/comm.h"
#include "dlrm_case.h"
#include "tk_test.h"

// ---- W ranks against one ----
// First in the file: the ranks are forked, and a child of a process that has already run an
// OpenMP parallel region can hang in its next one (libgomp's thread pool does not survive fork).

static const char *CFG =
    "{\"workload\": \"dlrm\", \"name\": \"t\","
    " \"model\": {\"num_dense\": 3, \"embedding_dim\": 4, \"bottom_mlp\": [5, 4],"
    "   \"top_mlp\": [6, 3, 1], \"interaction_width\": null, \"table_sizes\": [7, 3, 11, 5, 9],"
    "   \"max_table_rows\": 0, \"table_dtype\": \"f32\"},"
    " \"train\": {\"global_batch_size\": 12, \"max_epochs\": 1, \"evals_per_epoch\": 1, \"seed\": 5},"
    " \"optimizer\": {\"name\": \"sgd\", \"base_lr\": 0.5, \"warmup_steps\": 0, \"decay_start_step\": 30,"
    "   \"decay_steps\": 4, \"poly_power\": 2.0, \"min_lr\": 0.0},"
    " \"target\": {\"metric\": \"auc\", \"auc\": 0.8025}}";

enum { NB = 12, NT = 5, ND = 3, NEVAL = 7 };
static const int ROWS[NT] = {7, 3, 11, 5, 9};
static char g_dir[256];

static void records(uint64_t salt, int n, uint8_t *l, int32_t *d, int32_t *k) {
    for (int b = 0; b < n; b++) {
        tk_philox_ctr r = tk_philox_draw(salt, 91, (uint64_t)b);
        l[b] = r.v[0] & 1;
        for (int j = 0; j < ND; j++) d[b * ND + j] = (int32_t)(r.v[1 + j] % 40);
        for (int t = 0; t < NT; t++) k[b * NT + t] = (int32_t)((r.v[(t + 1) % 4] >> (3 * t)) % (uint32_t)ROWS[t]);
    }
}

// One rank of a world (world 1: no communicator): init, save "init", 3 steps (loss read after
// each), save "step", then the forward of NEVAL samples (a partial batch); losses and logits go
// to a small binary file for the parent.
static int g_force_comm; // world 1 through a communicator: the exchange step on one rank
static int run_rank(int rank, int world, const char *tag) {
    tk_err e;
    tk_ctx *c = NULL;
    tk_comm *comm = NULL;
    tk_instance I = {0};
    int rc = tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e);
    if (!rc && (world > 1 || g_force_comm)) {
        char spec[512];
        snprintf(spec, sizeof spec, "file:%s/rdv-%s", g_dir, tag);
        tk_rank_info ri = {.rank = rank, .world = world, .local_rank = rank, .local_world = world};
        rc = tk_comm_create(c, &ri, spec, 20, &comm, &e);
    }
    if (!rc) rc = dlrm_make(&I, CFG, NULL, 0, c, comm, 20, &e);
    tk_dlrm *m = I.model;
    char path[600];
    snprintf(path, sizeof path, "%s/%s-init.safetensors", g_dir, tag);
    if (!rc) rc = tk_instance_save(&I, path, NULL, &e);
    double out[3 + NEVAL];
    uint8_t l[NB];
    int32_t d[NB * ND], k[NB * NT];
    for (int s = 0; !rc && s < 3; s++) {
        records(100 + (uint64_t)s, NB, l, d, k);
        rc = dlrm_put(&I, l, d, k, NB, &e);
        if (!rc) rc = tk_instance_step(&I, &e);
        if (!rc) rc = tk_instance_read_loss(&I, &out[s], 1, &e);
    }
    snprintf(path, sizeof path, "%s/%s-step.safetensors", g_dir, tag);
    if (!rc) rc = tk_instance_save(&I, path, NULL, &e);
    float logit[NB], *dl = NULL;
    int32_t *dd = NULL, *dk = NULL; // the eval forward's inputs: every sample's (as the eval set is)
    records(7, NEVAL, l, d, k);
    if (!rc) rc = tk_malloc(c, (void **)&dl, NB * 4, &e);
    if (!rc) rc = tk_malloc(c, (void **)&dd, sizeof d, &e);
    if (!rc) rc = tk_malloc(c, (void **)&dk, sizeof k, &e);
    if (!rc) rc = tk_memcpy_h2d(c, dd, d, sizeof d, TK_STREAM_COMPUTE, &e);
    if (!rc) rc = tk_memcpy_h2d(c, dk, k, sizeof k, TK_STREAM_COMPUTE, &e);
    if (!rc) rc = tk_dlrm_forward(m, dd, dk, NEVAL, dl, &e);
    if (!rc) rc = tk_memcpy_d2h(c, logit, dl, NEVAL * 4, TK_STREAM_COMPUTE, &e);
    if (dl) tk_free(c, dl);
    if (dd) tk_free(c, dd);
    if (dk) tk_free(c, dk);
    for (int i = 0; i < NEVAL; i++) out[3 + i] = logit[i];
    if (!rc) {
        snprintf(path, sizeof path, "%s/%s-r%d.bin", g_dir, tag, rank);
        FILE *f = fopen(path, "wb");
        rc = !f || fwrite(out, sizeof out, 1, f) != 1;
        if (f) fclose(f);
    } else {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("# %s rank %d: %s\n", tag, rank, buf);
        fflush(stdout);
    }
    tk_instance_destroy(&I);
    tk_comm_destroy(comm);
    tk_ctx_destroy(c);
    return rc;
}

static int run_world(int world, const char *tag) {
    char run[128];
    snprintf(run, sizeof run, "dlrmdist-%d-%s", (int)getpid(), tag);
    setenv("TK_RUN_ID", run, 1);
    fflush(stdout);
    pid_t pid[8];
    for (int r = 0; r < world; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm(30); // a hung rank dies
            _exit(run_rank(r, world, tag));
        }
    }
    int bad = 0;
    for (int r = 0; r < world; r++) {
        int st;
        waitpid(pid[r], &st, 0);
        bad |= !WIFEXITED(st) || WEXITSTATUS(st) != 0;
    }
    return bad;
}

static int read_out(const char *tag, int rank, double *out) {
    char path[600];
    snprintf(path, sizeof path, "%s/%s-r%d.bin", g_dir, tag, rank);
    FILE *f = fopen(path, "rb");
    int ok = f && fread(out, sizeof(double) * (3 + NEVAL), 1, f) == 1;
    if (f) fclose(f);
    return ok;
}

static int same_bytes(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        if (x != y) same = 0;
        if (x == EOF || y == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

// Largest |a - b| / max|a| over the tensors of two checkpoints with the same tensor list.
static double ckpt_diff(const char *a, const char *b) {
    tk_st_file *fa = NULL, *fb = NULL;
    tk_err e;
    double worst = INFINITY;
    if (tk_st_open(&fa, a, &e) || tk_st_open(&fb, b, &e) || fa->n != fb->n) goto out;
    worst = 0;
    for (int i = 0; i < fa->n; i++) {
        const tk_st_tensor *ta = &fa->t[i], *tb = tk_st_find(fb, ta->name);
        size_t nb = (size_t)(ta->end - ta->begin);
        if (!tb || (size_t)(tb->end - tb->begin) != nb || ta->dtype != TK_F32) return INFINITY;
        float *x = malloc(nb + 4), *y = malloc(nb + 4);
        tk_st_read(fa, ta, 0, x, nb, &e);
        tk_st_read(fb, tb, 0, y, nb, &e);
        double mx = 1e-30, d = 0;
        for (size_t j = 0; j < nb / 4; j++) {
            mx = fmax(mx, fabs(x[j]));
            d = fmax(d, fabs((double)x[j] - y[j]));
        }
        worst = fmax(worst, d / mx);
        free(x);
        free(y);
    }
out:
    tk_st_close(fa);
    tk_st_close(fb);
    return worst;
}

TK_TEST(w_ranks_match_one_rank) {
    snprintf(g_dir, sizeof g_dir, "/tmp/tk-dlrmdist-%d", (int)getpid());
    mkdir(g_dir, 0700);
    double one[3 + NEVAL];
    if (run_world(1, "w1") || !read_out("w1", 0, one)) {
        CHECK(!"the 1-rank run failed");
        return;
    }
    // one rank through a communicator of world 1 (train-step --force-exchange): the exchange step,
    // whose all-to-alls are copies, adds the same sums in the same order: the same bits
    double onec[3 + NEVAL];
    g_force_comm = 1;
    int frc = run_world(1, "c1");
    g_force_comm = 0;
    if (frc || !read_out("c1", 0, onec)) {
        CHECK(!"the 1-rank run through a communicator failed");
    } else {
        for (int i = 0; i < 3 + NEVAL; i++) CHECK(onec[i] == one[i]);
        char a[600], b[600];
        snprintf(a, sizeof a, "%s/w1-step.safetensors", g_dir);
        snprintf(b, sizeof b, "%s/c1-step.safetensors", g_dir);
        CHECK(same_bytes(a, b));
    }
    for (int world = 2; world <= 4; world++) {
        char tag[16], a[600], b[600];
        snprintf(tag, sizeof tag, "w%d", world);
        if (run_world(world, tag)) {
            CHECK(!"a W-rank run failed");
            printf("# world %d failed\n", world);
            continue;
        }
        // initialization and the writer: the same bytes as one rank
        snprintf(a, sizeof a, "%s/w1-init.safetensors", g_dir);
        snprintf(b, sizeof b, "%s/%s-init.safetensors", g_dir, tag);
        CHECK(same_bytes(a, b));
        snprintf(a, sizeof a, "%s/w1-step.safetensors", g_dir);
        snprintf(b, sizeof b, "%s/%s-step.safetensors", g_dir, tag);
        double dw = ckpt_diff(a, b);
        printf("# world %d: weights after 3 steps within %.1e of one rank\n", world, dw);
        CHECK(dw <= 1e-5);
        for (int r = 0; r < world; r++) {
            double out[3 + NEVAL];
            CHECK(read_out(tag, r, out));
            for (int i = 0; i < 3 + NEVAL; i++) CHECK_NEAR(out[i], one[i], 1e-5);
        }
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    CHECK_EQ_INT(system(cmd), 0);
}

TK_TEST(memcpy2d_cpu_copies_rows_between_pitches) {
    tk_ctx *c = NULL;
    tk_err e;
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    enum { H = 5, SP = 11, DP = 7, WD = 4, OFF = 3 };
    unsigned char src[H * SP], dst[H * DP];
    for (int i = 0; i < H * SP; i++) src[i] = (unsigned char)(i * 7 + 1);
    memset(dst, 0xAB, sizeof dst);
    // rows of 4 bytes from column 3 of an 11-byte pitch into a 7-byte pitch
    CHECK_EQ_INT(tk_memcpy2d(c, dst, DP, src + OFF, SP, WD, H, TK_STREAM_COMPUTE, &e), 0);
    int bad = 0;
    for (int r = 0; r < H; r++)
        for (int k = 0; k < DP; k++) {
            unsigned char want = k < WD ? (unsigned char)((r * SP + OFF + k) * 7 + 1) : 0xAB;
            bad += dst[r * DP + k] != want;
        }
    CHECK_EQ_INT(bad, 0);
    // zero rows or width: nothing written; a width over a pitch is refused
    memset(dst, 0xAB, sizeof dst);
    CHECK_EQ_INT(tk_memcpy2d(c, dst, DP, src, SP, WD, 0, TK_STREAM_COMPUTE, &e), 0);
    CHECK_EQ_INT(tk_memcpy2d(c, dst, DP, src, SP, 0, H, TK_STREAM_COMPUTE, &e), 0);
    CHECK(dst[0] == 0xAB && dst[H * DP - 1] == 0xAB);
    CHECK_EQ_INT(tk_memcpy2d(c, dst, DP, src, SP, DP + 1, H, TK_STREAM_COMPUTE, &e), TK_EINTERNAL);
    tk_ctx_destroy(c);
}

TK_TEST(bce_normalized_by_the_global_batch_adds_up_over_shares) {
    tk_ctx *c = NULL;
    tk_err e;
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    enum { N = 12 };
    float z[N], dfull[N], dpart[N];
    uint8_t y[N];
    for (int i = 0; i < N; i++) z[i] = (float)(i - 5) * 0.7f, y[i] = (uint8_t)(i % 3 == 0);
    double afull[2] = {0, 0}, apart[3][2] = {{0, 0}, {0, 0}, {0, 0}};
    CHECK_EQ_INT(tk_bce_logits(c, z, y, N, dfull, afull, &e), 0);
    for (int s = 0; s < 3; s++) // three shares of 4 samples of a batch of 12
        CHECK_EQ_INT(tk_bce_logits_act_n(c, TK_F32, z + 4 * s, y + 4 * s, 4, N, dpart + 4 * s, apart[s], &e), 0);
    int same = 1;
    for (int i = 0; i < N; i++) same &= dfull[i] == dpart[i]; // the same expression per sample
    CHECK(same);
    CHECK_NEAR(apart[0][0] + apart[1][0] + apart[2][0], afull[0], 1e-14);
    CHECK(apart[0][1] == 1 && afull[1] == 1);
    // the gradient is divided by N, not by the share's size: an independent value
    double sig = 1.0 / (1.0 + exp(-(double)z[4]));
    CHECK_NEAR(dpart[4], (sig - y[4]) / N, 1e-7);
    CHECK_EQ_INT(tk_bce_logits_act_n(c, TK_F32, z, y, 4, 3, dpart, NULL, &e), TK_EINTERNAL); // N < B
    tk_ctx_destroy(c);
}
