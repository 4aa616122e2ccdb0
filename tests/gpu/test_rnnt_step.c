// The RNN-T workload's training step (lib/workloads/rnnt/workload.c wl_step through the engine's
// instance: the schedule, the features from the audio (speed perturbation, dither, STFT, mel,
// SpecAugment, splicing), the model's forward and backward, the LAMB update with clipping and the
// moving average) captured in CUDA graphs by its plan's key, as train-step captures it, and
// (TK_BENCH=1) the model's step as one graph at the benchmark's shape.
//
// (a) graph vs eager: two instances from the same weights (train.seed), deterministic algorithms,
//     three iterations on three synthetic batches made the input as the loader and the staging
//     make it (workload.h rnnt_wl_input: the plan built on the host, copied with the batch):
//     one eager, one through the engine's graph cache (engine/graphs.h, train-step's path: a
//     capture for a key it has not seen, else a replay). Batches 1 and 3 have the same key (padded
//     frames, labels, row level) but other lengths, speed factors, labels, audio, utterance ids and
//     epochs (a step that read any of them on the host, or baked one into the graph, would differ
//     in the replay); batch 2 another key. Every tensor (weights, LAMB's moments, the moving
//     average) and the loss accumulated over the three the same bits; bf16 and fp32, a small
//     network on 1-second utterances (4 a batch, 29 classes).
// (b) TK_BENCH=1: contrib/bench/rnnt.sh's training line with the step captured: the reference's
//     network (model.h's sizes; bf16, TK_BENCH_FP32=1: fp32) and share/workloads/rnnt/config.json's
//     "optimizer" (TK_BENCH_CONFIG: another file's) at TK_BENCH_BATCH (256) utterances of
//     TK_BENCH_T (410) feature frames and TK_BENCH_U (70) labels, the shapes and synthetic batch of
//     test_rnnt_model.c's eager bench (its comment says why those), the plan padded as train-step
//     pads it (workload.h: to 416 frames, 72 labels and a row level). The schedule, the step from
//     the plan and the optimizer as one CUDA graph, TK_BENCH_WARMUP (3) replays, then
//     TK_BENCH_STEPS (10) between two events: one line
//       rnnt-bench batch=N T=.. U=.. utts_per_s=X ms_per_step=Y
//     (rnnt.sh parses it; the same form as test_rnnt_model's eager line) and, as "#" lines, the
//     same step eagerly from the plan and eagerly through rnnt_model_step (the plan built and
//     copied each step, at the batch's own extents).
#include <cuda_runtime_api.h>
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "../unit/rnnt_case.h"
#include "../unit/wl_case.h"
#include "core/philox.h"
#include "engine/graphs.h"
#include "engine/optimizer.h"
#include "gpu_test.h"
#include "step_check.h"
#include "workloads/rnnt/data.h"
#include "workloads/rnnt/workload.h"

static int env_int(const char *name, int dflt) { return getenv(name) ? atoi(getenv(name)) : dflt; }

// ---- (a) graph vs eager ----

static const char *const small_text =
    "{\"model\": {\"enc_hidden\": 16, \"enc_pre_layers\": 1, \"enc_post_layers\": 2, \"pred_hidden\": 12,"
    " \"pred_layers\": 1, \"joint_hidden\": 10, \"vocab\": 29, \"precision\": \"%s\"},"
    " \"data\": {\"max_duration\": 1.0, \"buckets\": 1}, \"eval\": {\"max_duration\": 1.0},"
    " \"optimizer\": {\"name\": \"lamb\", \"base_lr\": 0.007, \"eps\": 1e-9, \"weight_decay\": 0.001,"
    " \"max_grad_norm\": 1, \"lr_schedule\": \"warmup_hold_exp\", \"warmup_epochs\": 1, \"hold_epochs\": 1,"
    " \"gamma\": 0.9, \"ema\": 0.9}}";

enum { B = 4 };

static tk_instance *make_small(int bf16) {
    char text[1024];
    snprintf(text, sizeof text, small_text, bf16 ? "bf16" : "fp32");
    tk_err e = {0};
    tk_instance *I = tk_case_create(tk_case_config("rnnt", text, B, 3, &e), gt_ctx_, &e);
    if (!I || tk_instance_init_weights(I, 3, &e) || tk_instance_optimizer(I, 10, &e)) gt_die_("rnnt instance", &e);
    return I;
}

// A batch's host fields (data.h's RNNT_F_* order, the sizes the workload's batch gives).
typedef struct {
    void *f[RNNT_NFIELDS];
    int64_t n[RNNT_NFIELDS];
} fields;

static void fields_make(tk_instance *I, fields *h) {
    tk_wl_field f[TK_BATCH_MAX_FIELDS];
    I->wl->batch(I->model, f);
    for (int k = 0; k < RNNT_NFIELDS; k++)
        h->n[k] = f[k].shape[0], h->f[k] = calloc((size_t)h->n[k], tk_dtype_size(f[k].dtype));
}

// Batch (shape s, content key k): utterance 0 the longest (s: 0.9 or 0.7 s, speed factor 1) with the
// most tokens (14 or 9); the others at most 60% of its samples, speed factors in [0.85, 1.15) and
// fewer tokens, drawn from `draw`; the audio, the tokens, the utterance ids and the epoch from k.
static void fill(fields *h, int s, uint64_t k, uint64_t draw) {
    const rnnt_batch b = rnnt_batch_from_fields(h->f);
    const int K = (int)(h->n[RNNT_F_TOKENS] / B), L0 = s ? 11200 : 14400, U0 = s ? 9 : 14;
    memset(b.pcm, 0, (size_t)h->n[RNNT_F_PCM] * 4);
    memset(b.tokens, 0, (size_t)h->n[RNNT_F_TOKENS] * 4);
    int64_t o = 0;
    for (int u = 0; u < B; u++) {
        b.len[u] = u == 0 ? L0 : 2000 + (int)(tk_philox_uniform(draw, 1, (uint64_t)u) * (0.6 * L0 - 2000));
        b.rate[u] = u == 0 ? 1.0f : 0.85f + 0.3f * (float)tk_philox_uniform(draw, 2, (uint64_t)u);
        b.ntok[u] = u == 0 ? U0 : 1 + (int)(tk_philox_uniform(draw, 3, (uint64_t)u) * (U0 - 1));
        b.utt[u] = (int32_t)(k * 100 + (uint64_t)u);
        for (int j = 0; j < b.ntok[u] && j < K; j++)
            b.tokens[(size_t)u * K + j] = (int32_t)(tk_philox_draw(0x7e57 + k, 4, (uint64_t)(u * K + j)).v[0] % 28);
        for (int i = 0; i < b.len[u]; i++)
            b.pcm[o + i] = 0.3f * (float)sin(0.003 * (double)i * (1 + u + (double)k)) +
                           0.05f * (float)(tk_philox_uniform(0x7e57 + k, 5, (uint64_t)(o + i)) - 0.5);
        o += b.len[u];
    }
    b.epoch[0] = (int32_t)k;
}

static int64_t input(tk_instance *I, fields *h) {
    tk_err e = {0};
    if (rnnt_wl_input(I->model, h->f, &e)) gt_die_("rnnt input", &e);
    return I->wl->graph_key(I->model);
}

TK_TEST(graph_vs_eager_bitwise) {
    const int saved = gt_ctx_->deterministic;
    gt_ctx_->deterministic = 1;
    for (int bf16 = 1; bf16 >= 0; bf16--) {
        tk_instance *a = make_small(bf16), *b = make_small(bf16);
        fields h;
        fields_make(a, &h);
        // batch 3: shape 0 as batch 1, other draws until its key is batch 1's
        fill(&h, 0, 1, 11);
        const int64_t k1 = input(a, &h);
        uint64_t d3 = 12;
        for (; d3 < 200; d3++) {
            fill(&h, 0, 3, d3);
            if (input(a, &h) == k1) break;
        }
        CHECK(d3 < 200);
        const struct { int s; uint64_t k, draw; } steps[3] = {{0, 1, 11}, {1, 2, 21}, {0, 3, d3}};
        tk_graph_cache gc;
        memset(&gc, 0, sizeof gc);
        int64_t keys[3];
        tk_err e = {0};
        int rc = 0;
        for (int i = 0; i < 3 && !rc; i++) {
            fill(&h, steps[i].s, steps[i].k, steps[i].draw);
            keys[i] = input(a, &h);
            CHECK(input(b, &h) == keys[i] && keys[i] >= 0);
            rc = tk_instance_step(a, &e);
            if (!rc) rc = tk_graph_cache_launch(&gc, b, 0, keys[i], i + 1, &e);
            if (!rc) rc = gt_sync(&e);
        }
        if (rc) printf("#   graph vs eager: %s\n", e.what);
        CHECK_EQ_INT(rc, 0);
        int graphs = 0;
        for (int j = 0; j < TK_GRAPH_CACHE; j++) graphs += gc.g[0][j].valid;
        CHECK(keys[0] == keys[2] && keys[1] != keys[0]);
        CHECK_EQ_INT(graphs, 2); // (batch 3 replayed batch 1's graph)
        double la = -1, lb = -2;
        CHECK_EQ_INT(tk_instance_read_loss(a, &la, 0, &e), 0);
        CHECK_EQ_INT(tk_instance_read_loss(b, &lb, 0, &e), 0);
        const int nd = gt_tensors_differ(a, b);
        printf("# table rnnt graph vs eager, 3 %s steps (keys %lld %lld %lld, %d graphs): %d of %d tensors differ, "
               "loss %.17g vs %.17g\n",
               bf16 ? "bf16" : "fp32", (long long)keys[0], (long long)keys[1], (long long)keys[2], graphs, nd, a->P.n,
               la, lb);
        CHECK_EQ_INT(nd, 0);
        CHECK(la == lb);
        CHECK(la > 0 && isfinite(la)); // (a loss: not the zeroed accumulator)
        tk_graph_cache_free(&gc);
        for (int k = 0; k < RNNT_NFIELDS; k++) free(h.f[k]);
        tk_case_free(a), tk_case_free(b);
    }
    gt_ctx_->deterministic = saved;
}

// ---- (b) the benchmark (TK_BENCH=1) ----

typedef struct bench_arg {
    rnnt_case *k;
    tk_optimizer *o;
    float *lr;
    const void *plan;
    const rnnt_plan_shape *s;
    const rnnt_step_batch *bt;
    tk_graph *g;
    int mode, n; // 0 the graph, 1 eager from the plan, 2 eager through rnnt_model_step
} bench_arg;

static void bench_fn(void *p) {
    bench_arg *a = p;
    tk_err e = {0};
    const float scale = 1.0f / (float)a->k->m->B;
    for (int i = 0; i < a->n; i++) {
        int rc = a->mode == 0 ? tk_graph_launch(gt_ctx_, a->g, &e)
                              : tk_optimizer_schedule(a->o, a->k->step, a->lr, &e) ||
                                    (a->mode == 1 ? rnnt_model_step_plan(a->k->m, a->plan, a->s, scale, 1, &e)
                                                  : rnnt_model_step(a->k->m, a->bt, scale, 1, &e)) ||
                                    tk_optimizer_update(a->o, &a->k->P, a->lr, a->k->step, &e);
        if (rc) gt_die_("rnnt bench step", &e);
    }
}

TK_TEST(rnnt_step_bench) {
    if (!getenv("TK_BENCH")) {
        printf("# TK_BENCH=1 runs this benchmark\n");
        return;
    }
    const int b = env_int("TK_BENCH_BATCH", 256), T = env_int("TK_BENCH_T", 410), U = env_int("TK_BENCH_U", 70);
    const int warm = env_int("TK_BENCH_WARMUP", 3), steps = env_int("TK_BENCH_STEPS", 10);
    const int bf16 = !env_int("TK_BENCH_FP32", 0);
    const char *cpath = getenv("TK_BENCH_CONFIG") ? getenv("TK_BENCH_CONFIG") : "share/workloads/rnnt/config.json";
    CHECK(b >= 1 && T >= 2 && U >= 1 && warm >= 0 && steps >= 1);
    if (*tk_failed_) return;
    tk_err e = {0};
    json_error_t je;
    json_t *root = json_load_file(cpath, 0, &je);
    if (!root) printf("# %s: %s (run from the repository root or set TK_BENCH_CONFIG)\n", cpath, je.text);
    CHECK(root != NULL);
    if (!root) return;
    tk_opt_config oc;
    CHECK_EQ_INT(tk_optimizer_config(root, cpath, 281241 / b, &oc, &e), 0); // (LibriSpeech's 281,241 utterances)
    json_decref(root);
    if (*tk_failed_) {
        printf("# %s: %s\n", e.where, e.what);
        return;
    }
    const rnnt_plan_pad pad = {RNNT_PAD_FRAMES, RNNT_PAD_LABELS, RNNT_ROW_LEVELS};
    rnnt_model_cfg cfg = rnnt_model_cfg_default(b, (T + pad.T - 1) / pad.T * pad.T, (U + pad.U - 1) / pad.U * pad.U);
    cfg.seed = gt_seed_, cfg.bf16 = bf16;
    size_t f0, f1, tot;
    cudaMemGetInfo(&f0, &tot);
    rnnt_case *k = rc_make(gt_ctx_, &cfg, gt_seed_, &e);
    if (!k) gt_die_("rnnt bench model", &e);
    tk_optimizer o;
    float *lr = gt_dev(4);
    CHECK_EQ_INT(tk_optimizer_init(&o, &oc, &k->P, &e), 0);
    CHECK_EQ_INT(tk_optimizer_ema_reset(&o, &k->P, &e), 0);
    cudaMemGetInfo(&f1, &tot);
    // the batch: every utterance T frames and U labels, features uniform in [-1, 1)
    k->T = T, k->U = U;
    for (int u = 0; u < b; u++) {
        k->feat_len[u] = T, k->lab_len[u] = U;
        for (int j = 0; j < U; j++) k->labels[(size_t)u * U + j] = (int)(gt_u32((uint64_t)(u * U + j)) % (k->m->V - 1));
    }
    gt_fill(k->feat, (size_t)T * b * k->m->I, -1, 1, 0);
    gt_up(k->m->feat, k->feat, (size_t)T * b * k->m->I * 4);
    const rnnt_step_batch bt = rc_bt(k);
    const size_t pn = rnnt_plan_bytes(&k->m->pd);
    void *hplan = gt_host(pn), *plan = gt_dev(pn);
    rnnt_plan_shape s;
    CHECK_EQ_INT(rnnt_plan_fill(&k->m->pd, &bt, &pad, hplan, &s, &e), 0);
    if (*tk_failed_) {
        printf("# plan: %s\n", e.what);
        return;
    }
    gt_up(plan, hplan, pn);
    tk_graph g = {0};
    bench_arg a = {k, &o, lr, plan, &s, &bt, &g, 1, 1};
    bench_fn(&a); // eager once (the kernels' first launches), then the capture
    CHECK_EQ_INT(tk_graph_begin(gt_ctx_, &e), 0);
    const int rs = tk_optimizer_schedule(&o, k->step, lr, &e) ||
                   rnnt_model_step_plan(k->m, plan, &s, 1.0f / (float)b, 1, &e) ||
                   tk_optimizer_update(&o, &k->P, lr, k->step, &e);
    tk_err e2 = {0};
    CHECK_EQ_INT(tk_graph_end(gt_ctx_, &g, rs ? &e2 : &e), 0);
    CHECK_EQ_INT(rs, 0);
    if (!g.valid || *tk_failed_) {
        printf("# capture: %s\n", e.what);
        rc_free(k);
        return;
    }
    a.mode = 0, a.n = warm;
    bench_fn(&a);
    CHECK_EQ_INT(gt_sync(&e), 0);
    cudaStream_t st = (cudaStream_t)gt_ctx_->stream[TK_STREAM_COMPUTE];
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0), cudaEventCreate(&t1);
    cudaEventRecord(t0, st);
    a.n = steps;
    bench_fn(&a);
    cudaEventRecord(t1, st);
    cudaEventSynchronize(t1);
    float total = 0;
    cudaEventElapsedTime(&total, t0, t1);
    cudaEventDestroy(t0), cudaEventDestroy(t1);
    const double ms = total / steps;
    a.mode = 1, a.n = 1;
    const double eager_plan = gt_time_ms(bench_fn, &a, 5);
    a.mode = 2;
    const double eager_step = gt_time_ms(bench_fn, &a, 5);
    double acc[2] = {0, 0};
    gt_down(acc, k->acc, 16);
    printf("# table rnnt step bench: %s, batch %d T %d U %d padded to %d, %d (joint rows %lld of %lld), %s, "
           "%d graph replays %.3f ms a step; eager from the plan %.3f ms, eager rnnt_model_step (unpadded, the plan "
           "built each step) %.3f ms; model and optimizer %.2f GiB; mean loss %.5g\n",
           bf16 ? "bf16" : "fp32", b, T, U, s.Tp, s.Up, (long long)s.rows_cap, (long long)s.rows, cpath, steps, ms,
           eager_plan, eager_step, (double)(f0 - f1) / (1 << 30), acc[0] / (acc[1] > 0 ? acc[1] : 1));
    CHECK(isfinite(acc[0]));
    if (!*tk_failed_)
        printf("rnnt-bench batch=%d T=%d U=%d utts_per_s=%.2f ms_per_step=%.3f\n", b, T, U, b * 1e3 / ms, ms);
    tk_graph_destroy(&g);
    free(hplan);
    rc_free(k);
}
