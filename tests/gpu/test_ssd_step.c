// The SSD workload's whole training iteration (lib/workloads/ssd/workload.c wl_step through the
// engine's instance: the schedule, the forward, the matching, the loss with hard-negative mining,
// the backward, config.json's SGD) captured in one CUDA graph, as train-step captures it, and
// (TK_BENCH=1) its throughput at SSD300's full shape.
//
// (a) graph vs eager: two instances from the same weights (train.seed), deterministic algorithms,
//     three iterations on three different synthetic batches (other images, other box counts: a
//     step that read the batch on the host, or baked a count into the graph, would differ): one
//     eager, one captured at its first iteration and replayed (tests/gpu/step_check.h). Every
//     tensor of the model (weights, BatchNorm's running statistics, the optimizer's momentum)
//     and the loss accumulated over the three the same bits; bf16 and fp32, a width-8 network on
//     258x258 (the stem's default form on cuda, the space-to-depth 4x4 convolution: checked) and
//     on 257x257 (an odd side: the 7x7 one), 81 classes, batch 2, max_boxes 8, the lr in warm-up
//     (it changes every step: read from device memory in the replay).
// (b) TK_BENCH=1: the benchmark of contrib/bench/ssd.sh: share/workloads/ssd/config.json's
//     "model", "data" and "optimizer" sections (SSD300-ResNet34, bf16; TK_BENCH_CONFIG: another
//     file's) at batch TK_BENCH_BATCH (32) on one fixed synthetic batch in GPU memory (N(0, 1)
//     images, 1 to 4 random boxes an image), the iteration as one CUDA graph replayed
//     TK_BENCH_STEPS (50) times back to back after 5 warm-up replays; prints one line
//     `ssd-bench batch=N images_per_s=X ms_per_step=Y` (contrib/bench/ssd.sh parses it) and, as
//     "#" lines, the eager iteration's time and the model's memory. TK_TRACE=FILE then writes a
//     CUPTI trace of three more replays (contrib/bench/step_kernels.py lists their kernels).
#include <cuda_runtime_api.h>
#include <jansson.h>
#include <math.h>

#include "core/philox.h"
#include "cupti_trace.h"
#include "gpu_test.h"
#include "step_check.h"
#include "workloads/ssd/workload.h"
#include "../unit/wl_case.h"

static int env_int(const char *name, int dflt) { return getenv(name) ? atoi(getenv(name)) : dflt; }

// The workload through the engine's instance on the device: the sections in text (a JSON object
// with an "optimizer"), global batch b, train.seed 3 (its weights), steps_per_epoch spe.
static tk_instance *make(const char *text, int b, int64_t spe) {
    tk_err e = {0};
    tk_instance *I = tk_case_create(tk_case_config("ssd", text, b, 3, &e), gt_ctx_, &e);
    if (!I || tk_instance_init_weights(I, 3, &e) || tk_instance_optimizer(I, spe, &e)) gt_die_("ssd instance", &e);
    return I;
}

// Synthetic batch k into the instance's inputs: N(0, 1) images; image n has 1 to 4 boxes (at most
// max_boxes), centres in [0.15, 0.85), sides in [0.05, 0.45), labels 1 .. C - 1, compacted as the
// reader compacts them (workload.h: gt_off; the rows after the last box zero).
static void set_batch(void *p, uint64_t k) {
    tk_instance *I = p;
    const ssd_wl *w = I->model;
    const ssd_model *m = w->net;
    const size_t nimg = (size_t)w->b * m->S * m->S * 3, room = (size_t)w->b * w->M;
    float *img = gt_host(nimg * 4), *gt = calloc(room * 4, sizeof(float));
    int32_t *lab = calloc(room, sizeof(int32_t)), *off = gt_host((size_t)(w->b + 1) * 4);
    if (!gt || !lab) gt_die_("out of host memory", NULL);
    const uint64_t key = 0x55d0 + k;
    for (size_t i = 0; i < nimg; i++) img[i] = (float)tk_philox_normal(key, 1, i);
    int32_t r = 0;
    for (int n = 0; n < w->b; n++) {
        off[n] = r;
        const int nb = 1 + (int)(tk_philox_draw(key, 2, (uint64_t)n).v[0] % 4);
        for (int j = 0; j < nb && j < w->M; j++, r++) {
            const uint64_t q = (uint64_t)n * 64 + (uint64_t)j;
            const double cx = 0.15 + 0.7 * tk_philox_uniform(key, 3, q), cy = 0.15 + 0.7 * tk_philox_uniform(key, 4, q);
            const double bw = 0.05 + 0.4 * tk_philox_uniform(key, 5, q), bh = 0.05 + 0.4 * tk_philox_uniform(key, 6, q);
            float *g = gt + (size_t)r * 4;
            g[0] = (float)fmax(0, cx - bw / 2), g[1] = (float)fmax(0, cy - bh / 2);
            g[2] = (float)fmin(1, cx + bw / 2), g[3] = (float)fmin(1, cy + bh / 2);
            lab[r] = 1 + (int32_t)(tk_philox_draw(key, 7, q).v[0] % (uint32_t)(w->C - 1));
        }
    }
    off[w->b] = r;
    gt_up(m->in_img, img, nimg * 4);
    gt_up(w->gt, gt, room * 16);
    gt_up(w->gt_label, lab, room * 4);
    gt_up(w->gt_off, off, (size_t)(w->b + 1) * 4);
    free(img), free(gt), free(lab), free(off);
}

static int iteration(void *p, tk_err *e) { return tk_instance_step(p, e); }

static const char *const small_text =
    "{\"model\": {\"width\": 8, \"image_size\": %d, \"precision\": \"%s\"}, \"data\": {\"max_boxes\": 8},"
    " \"optimizer\": {\"name\": \"sgd\", \"base_lr\": 0.05, \"momentum\": 0.9, \"weight_decay\": 0.0005,"
    " \"lr_schedule\": \"step\", \"warmup_steps\": 5, \"milestone_epochs\": [30], \"gamma\": 0.1}}";

TK_TEST(graph_vs_eager_bitwise) {
    const int saved = gt_ctx_->deterministic;
    gt_ctx_->deterministic = 1;
    for (int form = 0; form < 4; form++) {
        const int bf16 = form % 2 == 0, side = form < 2 ? 258 : 257; // (258: the s2d stem; 257: the 7x7)
        char text[512];
        snprintf(text, sizeof text, small_text, side, bf16 ? "bf16" : "fp32");
        tk_instance *a = make(text, 2, 10), *b = make(text, 2, 10);
        const ssd_model *ma = ((const ssd_wl *)a->model)->net;
        CHECK_EQ_INT(ma->stem.s2d, side % 2 == 0);
        const gt_step_pair pair = {a, b, set_batch, iteration};
        gt_graph_vs_eager(tk_failed_, &pair, 3, 1);
        tk_err e = {0};
        double la = -1, lb = -2;
        CHECK_EQ_INT(tk_instance_read_loss(a, &la, 0, &e), 0);
        CHECK_EQ_INT(tk_instance_read_loss(b, &lb, 0, &e), 0);
        const int nd = gt_tensors_differ(a, b);
        printf("# table ssd graph vs eager, 3 %s steps at %d (stem %s): %d of %d tensors differ, loss %.17g vs %.17g\n",
               bf16 ? "bf16" : "fp32", side, ma->stem.s2d ? "s2d" : "direct", nd, a->P.n, la, lb);
        CHECK_EQ_INT(nd, 0);
        CHECK(la == lb);
        CHECK(la > 0 && la < 1e3); // (a loss: not the zeroed accumulator)
        tk_case_free(a), tk_case_free(b);
    }
    gt_ctx_->deterministic = saved;
}

// ---- (b) the benchmark (TK_BENCH=1) ----

// config.json's sections the bench keeps, as a JSON text (free it), or NULL with a message.
static char *bench_sections(const char *path) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je), *keep = json_object();
    static const char *const names[] = {"model", "data", "eval", "optimizer"};
    for (size_t i = 0; root && i < sizeof names / sizeof *names; i++) {
        json_t *s = json_object_get(root, names[i]);
        if (s) json_object_set(keep, names[i], s);
    }
    char *text = root && json_object_get(keep, "optimizer") ? json_dumps(keep, JSON_COMPACT) : NULL;
    if (!text) printf("# %s: no \"optimizer\" (%s; run from the repository root or set TK_BENCH_CONFIG)\n", path, je.text);
    json_decref(root), json_decref(keep);
    return text;
}

typedef struct bench_arg {
    tk_instance *I;
    tk_graph *g;
    int graph, n;
} bench_arg;

static void bench_fn(void *p) {
    bench_arg *a = p;
    tk_err e = {0};
    for (int i = 0; i < a->n; i++)
        if (a->graph ? tk_graph_launch(gt_ctx_, a->g, &e) : tk_instance_step(a->I, &e)) gt_die_("ssd bench step", &e);
}

TK_TEST(step_throughput_bench) {
    if (!getenv("TK_BENCH")) {
        printf("# TK_BENCH=1 runs this benchmark\n");
        return;
    }
    const int b = env_int("TK_BENCH_BATCH", 32), steps = env_int("TK_BENCH_STEPS", 50);
    const char *cpath = getenv("TK_BENCH_CONFIG") ? getenv("TK_BENCH_CONFIG") : "share/workloads/ssd/config.json";
    char *text = bench_sections(cpath);
    CHECK(text != NULL);
    if (!text || b < 1 || steps < 1) return;
    size_t f0, f1, tot;
    cudaMemGetInfo(&f0, &tot);
    tk_instance *I = make(text, b, 117266 / b); // (COCO 2017 train's 117,266 images with boxes an epoch)
    free(text);
    cudaMemGetInfo(&f1, &tot);
    set_batch(I, 0);
    tk_err e = {0};
    tk_graph g = {0};
    CHECK_EQ_INT(tk_instance_step(I, &e), 0); // eager once (the create's warm-up ran on zeroed inputs), then the capture
    CHECK_EQ_INT(tk_graph_begin(gt_ctx_, &e), 0);
    CHECK_EQ_INT(tk_instance_step(I, &e), 0);
    CHECK_EQ_INT(tk_graph_end(gt_ctx_, &g, &e), 0);
    if (!g.valid) {
        tk_case_free(I);
        return;
    }
    bench_arg a = {I, &g, 1, 5};
    bench_fn(&a); // warm-up replays
    CHECK_EQ_INT(gt_sync(&e), 0);
    cudaStream_t s = (cudaStream_t)gt_ctx_->stream[TK_STREAM_COMPUTE];
    cudaEvent_t t0, t1;
    cudaEventCreate(&t0), cudaEventCreate(&t1);
    cudaEventRecord(t0, s);
    a.n = steps;
    bench_fn(&a);
    cudaEventRecord(t1, s);
    cudaEventSynchronize(t1);
    float total = 0;
    cudaEventElapsedTime(&total, t0, t1);
    cudaEventDestroy(t0), cudaEventDestroy(t1);
    const double ms = total / steps;
    a.graph = 0, a.n = 1;
    const double eager = gt_time_ms(bench_fn, &a, 5);
    double loss = 0;
    CHECK_EQ_INT(tk_instance_read_loss(I, &loss, 1, &e), 0);
    printf("# table ssd bench: %s batch %d, %d graph replays %.3f ms a step, eager %.3f ms; model memory %.2f GiB; "
           "mean loss %.4g\n", cpath, b, steps, ms, eager, (double)(f0 - f1) / (1 << 30), loss);
    CHECK(isfinite(loss));
    printf("ssd-bench batch=%d images_per_s=%.2f ms_per_step=%.3f\n", b, b * 1e3 / ms, ms);
    CHECK_EQ_INT(gt_trace_graph_steps(gt_ctx_, &g, 3, &e), 0); // TK_TRACE=FILE: three replays traced
    tk_graph_destroy(&g);
    tk_case_free(I);
}
