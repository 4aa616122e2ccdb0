// The engine's check of a backward's grads_ready reports (TK_CHECK_GRADS_READY=1,
// lib/engine/instance.c) on 2 forked cpu ranks (shared-memory collectives): the MLP's instance
// (lib/workloads/mlp) with its step replaced by one that writes known gradients, layer by layer
// from the last, and reports each layer to grads_ready. Reports after the writes pass and the
// gradients come out summed over the ranks, with 64- and 1024-float buckets (most reduced during
// the fake backward) as with the default one (all after it); a gradient written again after its
// report fails the step with TK_EINTERNAL naming the tensor, whether it was reduced already (64:
// found at the step's end) or not (1024, the default: found at the next report, before the
// all-reduce that would otherwise hide it).
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "engine/instance.h"
#include "gpu/comm.h"
#include "tk_test.h"
#include "workloads/mlp/mlp.h"

static const char *CFG =
    "{\"workload\": \"mlp\", \"name\": \"t\", \"model\": {\"num_dense\": 13, \"hidden\": [64, 32]},"
    " \"train\": {\"global_batch_size\": 8, \"max_epochs\": 1, \"evals_per_epoch\": 1, \"seed\": 5},"
    " \"optimizer\": {\"name\": \"sgd\", \"base_lr\": 0.5, \"warmup_steps\": 0, \"decay_start_step\": 30,"
    "   \"decay_steps\": 4, \"poly_power\": 2.0, \"min_lr\": 0.0},"
    " \"target\": {\"metric\": \"auc\", \"auc\": 0.8}}";

static char g_dir[] = "/tmp/test_grads_check.XXXXXX";
static int g_late; // 0: no late write; 1: layer 1's weight written again after its report

// Layer l's weight and bias gradients (rank + 1) (l + 1); reported after each layer. The late
// write comes after layer 1's report, before layer 0's.
static int fake_step(void *model, tk_err *e) {
    tk_mlp *m = model;
    const float r = (float)(m->env.dist->rank + 1);
    for (int l = m->nl - 1; l >= 0; l--) {
        const tk_mlp_layer *L = &m->L[l];
        for (int k = 0; k < L->in * L->out; k++) L->dW[k] = r * (float)(l + 1);
        for (int k = 0; k < L->out; k++) L->db[k] = r * (float)(l + 1);
        if (g_late && l == 0) m->L[1].dW[100] += 1.0f;
        TRY(m->env.grads_ready(m->env.grads_arg, L->woff, e));
    }
    return 0;
}

// One rank: the instance, one step of fake_step; its status, or 100 + the number of gradients
// not the ranks' sum (after a step that passed), or 99 when a failed step's message does not name
// layers.1.weight.
static int run_rank(int rank, const char *tag) {
    tk_err e = {0};
    tk_ctx *c = NULL;
    tk_comm *comm = NULL;
    tk_instance I = {0};
    int rc = tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e);
    char spec[256];
    snprintf(spec, sizeof spec, "file:%s/rdv-%s", g_dir, tag);
    tk_rank_info ri = {.rank = rank, .world = 2, .local_rank = rank, .local_world = 2};
    if (!rc) rc = tk_comm_create(c, &ri, spec, 20, &comm, &e);
    json_t *root = json_loads(CFG, 0, NULL);
    if (!rc) rc = tk_instance_config(&I, root, "cfg", NULL, 0, NULL, &e);
    json_decref(root);
    if (!rc) rc = tk_instance_create(&I, c, comm, 20, &e);
    if (!rc) rc = tk_instance_optimizer(&I, 10, &e);
    if (!rc) rc = tk_instance_init_weights(&I, 5, &e);
    tk_workload wl;
    if (!rc) {
        wl = *I.wl;
        wl.step = fake_step;
        I.wl = &wl;
        rc = tk_instance_step(&I, &e);
    }
    if (!rc) {
        const tk_mlp *m = I.model;
        int bad = 0;
        for (int l = 0; l < m->nl; l++) {
            const tk_mlp_layer *L = &m->L[l];
            for (int k = 0; k < L->in * L->out; k++) bad += L->dW[k] != 3.0f * (float)(l + 1);
            for (int k = 0; k < L->out; k++) bad += L->db[k] != 3.0f * (float)(l + 1);
        }
        rc = bad ? 100 + (bad < 100 ? bad : 99) : 0;
    } else {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("# %s rank %d: %s\n", tag, rank, buf);
        fflush(stdout);
        if (!strstr(buf, "layers.1.weight")) rc = 99;
    }
    if (I.wl) tk_instance_destroy(&I);
    tk_comm_destroy(comm);
    tk_ctx_destroy(c);
    return rc;
}

// Both ranks' exit statuses (the same on both, or -1).
static int run_world(const char *tag, const char *bucket, int late) {
    char run[128];
    snprintf(run, sizeof run, "gradscheck-%d-%s", (int)getpid(), tag);
    setenv("TK_RUN_ID", run, 1);
    setenv("TK_CHECK_GRADS_READY", "1", 1);
    if (bucket) setenv("TK_GRAD_BUCKET_FLOATS", bucket, 1);
    else unsetenv("TK_GRAD_BUCKET_FLOATS");
    g_late = late;
    fflush(stdout);
    pid_t pid[2];
    for (int r = 0; r < 2; r++) {
        pid[r] = fork();
        if (pid[r] == 0) {
            alarm(30); // a hung rank dies
            _exit(run_rank(r, tag));
        }
    }
    int st[2];
    for (int r = 0; r < 2; r++) {
        waitpid(pid[r], &st[r], 0);
        st[r] = WIFEXITED(st[r]) ? WEXITSTATUS(st[r]) : -1;
    }
    return st[0] == st[1] ? st[0] : -1;
}

TK_TEST(reports_after_the_writes_pass_summed) {
    CHECK(mkdtemp(g_dir) != NULL);
    CHECK_EQ_INT(run_world("64", "64", 0), 0);
    CHECK_EQ_INT(run_world("1024", "1024", 0), 0);
    CHECK_EQ_INT(run_world("default", NULL, 0), 0);
}

// (The layout: layer 0's weight at float 0 and bias at 832, layer 1's at 896 and 2944, layer 2's
// at 3008 and 3072, 3136 floats; the late write at 996. 1024-float buckets: layer 1's report
// reduces [1024, 3136), layer 0's [0, 1024).)
TK_TEST(a_write_after_its_report_fails_the_step) {
    CHECK_EQ_INT(run_world("late-64", "64", 1), TK_EINTERNAL);
    CHECK_EQ_INT(run_world("late-1024", "1024", 1), TK_EINTERNAL);
    CHECK_EQ_INT(run_world("late-default", NULL, 1), TK_EINTERNAL);
}

TK_TEST(zz_cleanup) {
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    CHECK_EQ_INT(system(cmd), 0);
}
