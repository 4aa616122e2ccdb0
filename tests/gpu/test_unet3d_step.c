// Whole 3D U-Net training steps (lib/workloads/unet3d/model.c, step.c) on the cuda backend against
// the cpu reference backend, the eval forward, and the CUDA-graph replay against eager execution.
//
// (a) cpu vs cuda, fp32: a width-8 U-Net (filters 8..80) on a 64x64x64 crop, batch 2 (the
//     bottleneck 2x2x2: its instance norms over 8 voxels), both from the same initial weights
//     (drawn on the host from one seed) and the same batch. The loss within 1e-5 relative, all
//     gradients together within 1e-3 and the worst tensor within 2e-2 (norm-wise): the backends
//     sum in different orders (cuDNN's tiles, the instance norm's row groups), and the deep
//     instance norms over few voxels amplify that (the fp64 PyTorch comparison of the cpu step,
//     tests/cli/unet3d-model-peer.bats, puts its own worst tensor at 1e-4 at width 2).
// (b) cuda bf16 vs cpu fp32, the same step: the loss within 2e-2, the output layer's gradients
//     within 1e-1; the deeper gradients are printed, not bounded (bf16's rounding of the norms'
//     backward terms dominates them, as in tests/gpu/test_resnet_step.c (b)); a broken bf16 path
//     is off by ~1.
// (c) the eval forward (u3_forward_eval) of 1 window of b: its logits as the training forward's
//     of the same image (cpu vs cuda fp32 within 1e-5), the other window's values unused.
// (d) graph vs eager: three steps with an SGD update, one model eager, one with the step captured
//     once and replayed, deterministic engines: bit-identical weights.
// (e) on several ranks the backward reports each block's gradients final for their all-reduce
//     (workload.h grads_ready; lib/blocks tk_blk_grads casts the block's bf16 weight gradients
//     first): with tests/unit/grads_case.h's recorder in its place (its copies on the compute
//     stream, where the engine's all-reduce starts), fp32 and bf16, eager and in a CUDA graph: the
//     output layer, each upsampling block, each encoder unit, and no gradient reported final
//     changed after its report.
// (f) TK_BENCH=1: the benchmark of contrib/bench/unet3d.sh (the MLPerf shape: width 32, batch 2 of
//     128^3, bf16; TK_BENCH_BATCH, TK_BENCH_CROP, TK_BENCH_WIDTH change it): the engine's training
//     iteration (tk_instance_step: schedule, step, config.json's Nesterov SGD) as one CUDA graph
//     and eager, the training forward, the eval forward of the batch's windows; TK_TRACE=FILE
//     traces three graph replays for contrib/bench/step_kernels.py. Then the whole sliding-window
//     evaluation (u3_evaluate, as train-step runs it) of TK_BENCH_CASES=42 cases of
//     TK_BENCH_CASE=256 cubed (random images and labels) with TK_BENCH_SW=4 windows a forward.
#include <cuda_runtime_api.h>

#include "../unit/grads_case.h"
#include "cupti_trace.h"
#include "core/progress.h"
#include "gpu/cudnn_conv.h"
#include "gpu_test.h"
#include "step_check.h"
#include "sgd.h"
#include "swin.h"
#include "../unit/unet3d_case.h"

static u3_config config(int width, int bf16) {
    u3_config c = {0};
    c.width = width;
    c.bf16 = bf16;
    c.b = 2, c.batch = 2;
    c.seed = 5;
    for (int a = 0; a < 3; a++) c.data.crop[a] = 64;
    return c;
}

// The model as train-step makes it (its cuda warm-up step included), its weights from the seed;
// u3_unmake after.
static u3_model *make(tk_ctx *c, const u3_config *cfg) {
    tk_err e = {0};
    u3_model *m = u3_make(c, cfg, &e);
    if (!m) gt_die_("unet3d model", &e);
    return m;
}

// The same batch into both models' inputs: noise plus a brighter ball of kidney (1) with a tumor
// (2) inside, per sample.
static void set_batch(void *p, uint64_t k) {
    u3_model *m = p;
    const size_t n = (size_t)m->b * m->S;
    const int D = m->cfg.data.crop[0];
    float *x = gt_host(n * 4);
    uint8_t *l = gt_host(n);
    for (size_t i = 0; i < n; i++) {
        const size_t v = i % (size_t)m->S;
        const int z = (int)(v / ((size_t)D * D)), y = (int)(v / (size_t)D % (size_t)D), w = (int)(v % (size_t)D);
        const double c = D * (0.4 + 0.2 * (double)(i / (size_t)m->S)), r = D * 0.25;
        const double q = ((z - c) * (z - c) + (y - c) * (y - c) + (w - c) * (w - c)) / (r * r);
        l[i] = q <= 0.2 ? 2 : q <= 1 ? 1 : 0;
        x[i] = (float)(tk_philox_normal(77 + k, 9, i) + (q <= 1 ? 1.5 : 0));
    }
    if (m->c->backend == TK_BACKEND_CUDA) {
        gt_up(m->in_img, x, n * 4);
        gt_up(m->in_label, l, n);
    } else {
        memcpy(m->in_img, x, n * 4);
        memcpy(m->in_label, l, n);
    }
    free(x), free(l);
}

static double loss_of(u3_model *m) {
    double acc[2];
    tk_err e = {0};
    if (tk_ctx_sync(m->c, &e) || tk_memcpy_d2h(m->c, acc, m->loss_acc, 16, TK_STREAM_COMPUTE, &e)) gt_die_("loss", &e);
    tk_ctx_sync(m->c, &e);
    return acc[0];
}

// Tensor i's gradient (or its weight, w) as fp32 on the host.
static float *tensor(u3_model *m, int i, int w) {
    const tk_param *p = &m->P->p[i];
    const size_t n = (size_t)tk_param_numel(p);
    float *h = gt_host(n * 4);
    const void *src = w ? p->w : (const void *)p->g;
    if (m->c->backend == TK_BACKEND_CUDA) gt_down(h, src, n * 4);
    else memcpy(h, src, n * 4);
    return h;
}

// tol_worst bounds every gradient tensor's error (< 0: only the output layer's, by -tol_worst).
static void compare_step(u3_model *cpu, u3_model *gpu, double tol_loss, double tol_all, double tol_worst,
                         int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    set_batch(cpu, 0), set_batch(gpu, 0);
    CHECK_EQ_INT(u3_train_step(cpu, &e), 0);
    CHECK_EQ_INT(u3_train_step(gpu, &e), 0);
    const double lc = loss_of(cpu), lg = loss_of(gpu), lrel = fabs(lg - lc) / fabs(lc);
    double worst = 0, out = 0, num = 0, den = 0;
    const char *wn = "";
    for (int i = 0; i < cpu->P->ndense; i++) {
        const tk_param *p = &cpu->P->p[i];
        const size_t n = (size_t)tk_param_numel(p);
        float *a = tensor(cpu, i, 0), *b = tensor(gpu, i, 0);
        const double r = gt_relerr(b, a, n);
        if (r >= worst) worst = r, wn = p->name;
        if (strncmp(p->name, "output.", 7) == 0) out = r > out ? r : out;
        for (size_t j = 0; j < n; j++) num += ((double)b[j] - a[j]) * ((double)b[j] - a[j]), den += (double)a[j] * a[j];
        free(a), free(b);
    }
    printf("# table unet3d step %s (cin %d, ld %d) vs cpu fp32: loss %.9g vs %.9g (rel %.1e), output layer "
           "gradients %.1e, all gradients %.1e, worst gradient %s %.1e\n",
           tk_dtype_name(gpu->t), gpu->cin, gpu->ld, lg, lc, lrel, out, sqrt(num / den), wn, worst);
    CHECK(lrel <= tol_loss);
    if (tol_all > 0) CHECK(sqrt(num / den) <= tol_all);
    CHECK(tol_worst > 0 ? worst <= tol_worst : out <= -tol_worst);
}

TK_TEST(step_cpu_vs_cuda_fp32) {
    tk_ctx *cc = NULL;
    tk_err e = {0};
    if (tk_ctx_create(&cc, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    u3_config cfg = config(8, 0);
    u3_model *cpu = make(cc, &cfg), *gpu = make(gt_ctx_, &cfg);
    compare_step(cpu, gpu, 1e-5, 1e-3, 2e-2, tk_failed_);
    // (c) the eval forward of one window (sample 0 of the batch) against the training forward's
    // logits of the same image on the cpu
    const size_t nv = (size_t)cpu->S, nl = nv * U3_CLASSES;
    float *ref = gt_host(nl * 4), *got = gt_host(nl * 4), *x = gt_host(nv * 4);
    for (size_t i = 0; i < nv; i++)
        for (int k = 0; k < U3_CLASSES; k++) ref[i * U3_CLASSES + k] = ((float *)cpu->logits)[i * cpu->ld + k];
    memcpy(x, cpu->in_img, nv * 4);
    float *dx = gt_dev(nv * 4), *dy = gt_dev(nl * 4);
    gt_up(dx, x, nv * 4);
    set_batch(gpu, 3); // other images in the model's inputs: the window alone decides
    CHECK_EQ_INT(u3_forward_eval(gpu, dx, 1, dy, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    gt_down(got, dy, nl * 4);
    const double r = gt_relerr(got, ref, nl);
    printf("# table unet3d eval forward fp32, 1 window of 2: logits rel err %.1e\n", r);
    CHECK(r <= 1e-5);
    tk_free(gt_ctx_, dx), tk_free(gt_ctx_, dy);
    free(ref), free(got), free(x);
    u3_unmake(cpu), u3_unmake(gpu);
    tk_ctx_destroy(cc);
}

TK_TEST(step_cpu_fp32_vs_cuda_bf16) {
    tk_ctx *cc = NULL;
    tk_err e = {0};
    if (tk_ctx_create(&cc, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    u3_config c32 = config(8, 0), c16 = config(8, 1);
    u3_model *cpu = make(cc, &c32), *gpu = make(gt_ctx_, &c16);
    compare_step(cpu, gpu, 2e-2, 0, -1e-1, tk_failed_);
    u3_unmake(cpu), u3_unmake(gpu);
    tk_ctx_destroy(cc);
}

// One training iteration as train-step runs it: the step, then SGD at lr 0.05 (the bf16 copy too).
static int iteration(void *p, tk_err *e) {
    u3_model *m = p;
    TRY(u3_train_step(m, e));
    return tk_sgd_update(m->c, m->P->dense_w, m->P->dense_g, m->P->dense_n, m->lr, m->P->copy,
                         m->P->copy ? m->P->copy_type : TK_F32, e);
}

TK_TEST(graph_vs_eager_bitwise) {
    const int saved = gt_ctx_->deterministic;
    gt_ctx_->deterministic = 1;
    u3_config cfg = config(8, 1);
    u3_model *a = make(gt_ctx_, &cfg), *b = make(gt_ctx_, &cfg);
    float lr = 0.05f;
    gt_up(a->lr, &lr, 4), gt_up(b->lr, &lr, 4);
    const gt_step_pair pair = {a, b, set_batch, iteration};
    gt_graph_vs_eager(tk_failed_, &pair, 3, 10);
    const size_t n = a->P->dense_n;
    float *wa = gt_host(n * 4), *wb = gt_host(n * 4);
    gt_down(wa, a->P->dense_w, n * 4), gt_down(wb, b->P->dense_w, n * 4);
    const size_t nd = gt_ndiff(wa, wb, n);
    const double la = loss_of(a), lb = loss_of(b);
    printf("# table unet3d graph vs eager, 3 bf16 steps: %zu of %zu weights differ, loss sums %.9g vs %.9g\n", nd, n,
           la, lb);
    CHECK_EQ_INT(nd, 0);
    CHECK(la == lb);
    free(wa), free(wb);
    u3_unmake(a), u3_unmake(b);
    gt_ctx_->deterministic = saved;
}

// ---- (f) the benchmark (TK_BENCH=1) ----
typedef struct u3_bench_arg {
    u3_model *m;
    tk_instance *I;
    tk_graph *g;
    int what;
    float *x;
    void *y;
} u3_bench_arg;

static void u3_bench_fn(void *p) {
    u3_bench_arg *a = p;
    tk_err e = {0};
    int rc = 0;
    if (a->what == 0) rc = tk_graph_launch(a->m->c, a->g, &e);
    else if (a->what == 1) rc = tk_instance_step(a->I, &e);
    else if (a->what == 2) rc = u3_forward(a->m, &e);
    else rc = u3_forward_eval(a->m, a->x, a->m->b, a->y, &e);
    if (rc) gt_die_("bench step", &e);
}

static int env_int(const char *name, int dflt) { return getenv(name) ? atoi(getenv(name)) : dflt; }

TK_TEST(step_throughput_bench) {
    if (!getenv("TK_BENCH")) {
        printf("# TK_BENCH=1 runs this benchmark\n");
        return;
    }
    u3_config cfg = config(env_int("TK_BENCH_WIDTH", 32), 1);
    cfg.b = cfg.batch = env_int("TK_BENCH_BATCH", 2);
    const int crop = env_int("TK_BENCH_CROP", 128);
    for (int a = 0; a < 3; a++) cfg.data.crop[a] = crop;
    tk_err e = {0};
    size_t f0, tot, f1, f2;
    cudaMemGetInfo(&f0, &tot);
    u3_model *m = make(gt_ctx_, &cfg);
    // the engine's training iteration (schedule, step, optimizer) with config.json's optimizer:
    // SGD with Nesterov momentum 0.9 (TK_BENCH_CONFIG: another configuration's)
    tk_instance *I = u3_case_instance(m);
    const char *cpath = getenv("TK_BENCH_CONFIG") ? getenv("TK_BENCH_CONFIG") : "share/workloads/unet3d/config.json";
    json_error_t je;
    json_t *root = json_load_file(cpath, 0, &je), *opt = root ? json_object_get(root, "optimizer") : NULL;
    if (!opt) {
        printf("# %s: no \"optimizer\" (%s; run from the repository root or set TK_BENCH_CONFIG)\n", cpath, je.text);
        CHECK(opt != NULL);
        json_decref(root);
        u3_unmake(m);
        return;
    }
    json_object_set(I->effective, "optimizer", opt);
    json_decref(root);
    CHECK_EQ_INT(tk_instance_optimizer(I, 168 / cfg.b, &e), 0);
    cudaMemGetInfo(&f1, &tot);
    set_batch(m, 0);
    tk_graph g = {0};
    CHECK_EQ_INT(tk_instance_step(I, &e), 0); // eager once, then the capture
    CHECK_EQ_INT(tk_graph_begin(gt_ctx_, &e), 0);
    CHECK_EQ_INT(tk_instance_step(I, &e), 0);
    CHECK_EQ_INT(tk_graph_end(gt_ctx_, &g, &e), 0);
    const size_t nv = (size_t)m->b * m->S;
    u3_bench_arg a = {m, I, &g, 0, gt_dev(nv * 4), gt_dev(nv * U3_CLASSES * tk_dtype_size(m->t))};
    CHECK_EQ_INT(tk_memcpy_d2d(m->c, a.x, m->in_img, nv * 4, TK_STREAM_COMPUTE, &e), 0);
    const char *names[4] = {"step, CUDA graph", "step, eager", "forward (training)", "eval forward"};
    double ms[4];
    for (int w = 0; w < 4; w++) {
        a.what = w;
        ms[w] = gt_time_ms(u3_bench_fn, &a, 10);
        printf("# table unet3d bench b=%d %d^3 width %d bf16 %-18s %8.2f ms  %8.2f samples/s\n", m->b, crop,
               cfg.width, names[w], ms[w], m->b * 1e3 / ms[w]);
    }
    cudaMemGetInfo(&f2, &tot);
    printf("# table unet3d bench: model memory %.2f GiB, with the eval buffers %.2f GiB; %d conv plans, %.0f MiB "
           "workspace\n", (double)(f0 - f1) / (1 << 30), (double)(f0 - f2) / (1 << 30), tk_cudnn_nplans(m->dnn),
           (double)tk_cudnn_ws_bytes(m->dnn) / (1 << 20));
    printf("# json {\"type\": \"bench\", \"impl\": \"trainkit\", \"batch\": %d, \"crop\": %d, \"width\": %d, "
           "\"samples_per_s\": %.2f, \"ms_per_iter_median\": %.3f, \"eager_samples_per_s\": %.2f, "
           "\"eval_windows_per_s\": %.2f, \"peak_mem_gib\": %.2f}\n",
           m->b, crop, cfg.width, m->b * 1e3 / ms[0], ms[0], m->b * 1e3 / ms[1], m->b * 1e3 / ms[3],
           (double)(f0 - f2) / (1 << 30));
    for (int i = 0; i < tk_cudnn_nplans(m->dnn); i++) printf("# plan %s\n", tk_cudnn_plan_desc(m->dnn, i));
    CHECK_EQ_INT(gt_trace_graph_steps(m->c, &g, 3, &e), 0); // TK_TRACE=FILE: three replays traced
    tk_free(gt_ctx_, a.x), tk_free(gt_ctx_, a.y);
    tk_graph_destroy(&g);
    u3_unmake(m);
    // the evaluation: a model of TK_BENCH_SW windows a forward, the cases in host memory
    const int ncases = env_int("TK_BENCH_CASES", 42), side = env_int("TK_BENCH_CASE", 256);
    if (ncases < 1) return;
    cfg.b = cfg.batch = env_int("TK_BENCH_SW", 4);
    cfg.eval_overlap = 0.5;
    m = make(gt_ctx_, &cfg);
    tk_swin_grid grid;
    CHECK_EQ_INT(tk_swin_grid_init(&grid, side, side, side, crop, cfg.eval_overlap, &e), 0);
    const size_t nvox = (size_t)side * side * side;
    u3_cases cs = {ncases, ncases, calloc((size_t)ncases, sizeof(u3_case))};
    for (int i = 0; i < ncases; i++) {
        u3_case *k = &cs.c[i];
        k->id = i, k->shape[0] = k->shape[1] = k->shape[2] = side;
        k->image = gt_host(nvox * 4), k->label = gt_host(nvox);
        for (size_t v = 0; v < nvox; v++) {
            k->image[v] = (float)tk_philox_normal(31, (uint32_t)i, v);
            k->label[v] = (uint8_t)(tk_philox_draw(32, (uint32_t)i, v / 4).v[v % 4] % 3);
        }
    }
    void *es = NULL;
    CHECK_EQ_INT(u3_evalset_from_cases(m, &cs, &es, &e), 0);
    double dice = 0, secs[2];
    for (int r = 0; r < 2 && es; r++) { // the first run loads the eval plans' kernels
        const double t0 = tk_now();
        CHECK_EQ_INT(u3_evaluate(m, es, &dice, &e), 0);
        secs[r] = tk_now() - t0;
    }
    if (es) {
        printf("# table unet3d bench eval: %d cases of %d^3, roi %d, overlap %.2f, %d windows a forward: %.2f s "
               "(first run %.2f s), %.1f ms a case, mean Dice %.4f\n", ncases, side, crop, cfg.eval_overlap, cfg.b,
               secs[1], secs[0], secs[1] * 1e3 / ncases, dice);
        printf("# json {\"type\": \"bench_eval\", \"impl\": \"trainkit\", \"cases\": %d, \"shapes\": "
               "[\"%dx%dx%d\"], \"roi\": %d, \"overlap\": %.2f, \"windows\": %lld, \"eval_s\": %.3f, "
               "\"cases_per_s\": %.3f, \"ms_per_case_median\": %.1f, \"sw_batch\": %d}\n", ncases, side, side, side,
               crop, cfg.eval_overlap, (long long)grid.count * ncases, secs[1], ncases / secs[1],
               secs[1] * 1e3 / ncases, cfg.b);
        u3_evalset_free(m, es);
    }
    u3_unmake(m);
}

TK_TEST(backward_reports_final_gradients) {
    for (int bf16 = 0; bf16 < 2; bf16++) {
        const u3_config cfg = config(4, bf16);
        u3_model *m = make(gt_ctx_, &cfg);
        set_batch(m, 21);
        gr_rec r = {0};
        for (int graph = 0; graph < 2; graph++)
            CHECK(gr_step_ok(&r, m->P, &m->grads, u3_train_step, m, graph, 1 + U3_UP + U3_ENC));
        gr_release(&r);
        u3_unmake(m);
    }
}
