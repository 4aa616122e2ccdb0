// Whole ResNet training steps (lib/workloads/resnet/) on the cuda backend against the cpu
// reference backend, the CUDA-graph replay against eager execution, and (TK_BENCH=1) the step's
// throughput at ResNet-50's shape.
//
// (a) cpu vs cuda, fp32: a small ResNet (stages of 2, 1, 1, 1 bottleneck blocks, width 8, 10
//     classes, 32x32 images, batch 16: identity and projection shortcuts, every op), both models
//     from the same initial weights (drawn on the host from one seed) and the same batch. The
//     loss within 1e-5 relative, each gradient tensor within 1e-3 and each running statistic
//     within 1e-5 (norm-wise): the two backends sum in different orders (cuDNN's tiles, the
//     BN kernels' row groups), and a pre-activation within an ulp of 0 may fall on different
//     sides of a ReLU, which moves one sample's contribution in a few gradient entries.
// (b) cuda bf16 vs cpu fp32, the same step: bf16 activations through 17 convolutions; the loss
//     within 2e-2, the classifier's gradients within 1e-1, the running statistics within 3e-2
//     (measured on an H100: 2e-5, 5.0e-2, 1.2e-2; a broken bf16 path is off by ~1). The deeper
//     gradients are printed, not bounded: BN's backward projects out each channel's mean and its
//     xhat component, so what reaches the layers below is a small difference of larger terms, and
//     bf16's 2^-8 rounding of those terms dominates it (all gradients 0.43 from fp32, a BN bias
//     0.72; fp32 itself is 5e-6). PyTorch's bf16 autocast is no different: on the full ResNet-50
//     both are ~1.3 from fp64 (contrib/peers/resnet.py check --ref float64, tests/gpu/RESULTS.md).
// (c) eval forward (running statistics) cpu vs cuda fp32: logits within 1e-5, the same top-1.
// (d) graph vs eager: three steps with an SGD update, one model eager, one with the step captured
//     once and replayed, from the same weights, deterministic engines: bit-identical weights.
// (e) on several ranks the backward reports each block's gradients final for their all-reduce
//     (workload.h grads_ready; lib/blocks tk_blk_grads casts the block's bf16 weight gradients
//     first): with tests/unit/grads_case.h's recorder in its place (its copies on the compute
//     stream, where the engine's all-reduce starts), fp32 and bf16, eager and in a CUDA graph:
//     fc, each block, the stem, and no gradient reported final changed after its report.
#include <cuda_runtime_api.h>

#include "cupti_trace.h"
#include "gpu/cudnn_conv.h"
#include "gpu_test.h"
#include "step_check.h"
#include "bn.h"
#include "img_norm.h"
#include "pool.h"
#include "sgd.h"
#include "xent_smooth.h"
#include "../unit/grads_case.h"
#include "../unit/resnet_case.h"

// The model through the engine's instance on c, its initial weights from train.seed 5: batch b,
// precision bf16 or fp32, ResNet-50 (big: the configuration's defaults, ImageNet's 224 x 224 x 1000)
// or a small one (stages of 2, 1, 1, 1 blocks, width 8, 10 classes, 32 x 32 images). Its model:
// I->model.
static tk_instance *make(tk_ctx *c, int b, int bf16, int big) {
    tk_err e = {0};
    char text[256];
    snprintf(text, sizeof text, "{\"model\": {%s\"precision\": \"%s\"}}",
             big ? "" : "\"layers\": [2, 1, 1, 1], \"width\": 8, \"classes\": 10, \"image_size\": 32, ",
             bf16 ? "bf16" : "fp32");
    tk_instance *I = rn_make(text, b, 5, c, &e);
    if (!I || tk_instance_init_weights(I, 5, &e)) gt_die_("resnet model", &e);
    return I;
}

// The same batch into both models' inputs: random 8-bit pixels, labels.
static void set_batch(void *p, uint64_t k) {
    rn_model *m = p;
    const size_t n = (size_t)m->b * m->S * m->S * 3;
    uint8_t *x = gt_host(n);
    int32_t *l = gt_host((size_t)m->b * 4);
    for (size_t i = 0; i < n; i++) x[i] = (uint8_t)(tk_philox_draw(77 + k, 9, i).v[0] >> 24);
    for (int i = 0; i < m->b; i++) l[i] = (int32_t)(tk_philox_draw(77 + k, 10, (uint64_t)i).v[0] % m->cfg.classes);
    if (m->c->backend == TK_BACKEND_CUDA) {
        gt_up(m->in_img, x, n);
        gt_up(m->in_label, l, (size_t)m->b * 4);
    } else {
        memcpy(m->in_img, x, n);
        memcpy(m->in_label, l, (size_t)m->b * 4);
    }
    free(x), free(l);
}

static double loss_of(rn_model *m) {
    double acc[2];
    tk_err e = {0};
    if (tk_ctx_sync(m->c, &e) || tk_memcpy_d2h(m->c, acc, m->loss_acc, 16, TK_STREAM_COMPUTE, &e)) gt_die_("loss", &e);
    tk_ctx_sync(m->c, &e);
    return acc[0];
}

// Tensor i's values (dense: gradient, or weight when w) as fp32 on the host.
static float *tensor(rn_model *m, int i, int w) {
    const tk_param *p = &m->P->p[i];
    size_t n = (size_t)tk_param_numel(p);
    float *h = gt_host(n * 4);
    const void *src = w || !(p->flags & TK_PARAM_DENSE) ? p->w : (const void *)p->g;
    if (m->c->backend == TK_BACKEND_CUDA) gt_down(h, src, n * 4);
    else memcpy(h, src, n * 4);
    return h;
}

// tol_grad bounds every gradient tensor's error (per_tensor), or that of the classifier's (fc.weight,
// fc.bias: well conditioned); all of them together and the worst are printed.
static void compare_step(rn_model *cpu, rn_model *gpu, double tol_loss, double tol_grad, int per_tensor,
                         double tol_stats, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    set_batch(cpu, 0), set_batch(gpu, 0);
    CHECK_EQ_INT(rn_train_step(cpu, &e), 0);
    CHECK_EQ_INT(rn_train_step(gpu, &e), 0);
    double lc = loss_of(cpu), lg = loss_of(gpu), lrel = fabs(lg - lc) / fabs(lc);
    double worst = 0, worst_s = 0, num = 0, den = 0, fc = 0;
    const char *wn = "", *wsn = "";
    for (int i = 0; i < cpu->P->n; i++) {
        const tk_param *p = &cpu->P->p[i];
        const size_t n = (size_t)tk_param_numel(p);
        float *a = tensor(cpu, i, 0), *b = tensor(gpu, i, 0);
        double r = gt_relerr(b, a, n);
        if (p->flags & TK_PARAM_DENSE) {
            if (r >= worst) worst = r, wn = p->name;
            if (strncmp(p->name, "fc.", 3) == 0) fc = r > fc ? r : fc;
            for (size_t j = 0; j < n; j++) num += ((double)b[j] - a[j]) * ((double)b[j] - a[j]), den += (double)a[j] * a[j];
        } else if (r >= worst_s) {
            worst_s = r, wsn = p->name;
        }
        free(a), free(b);
    }
    printf("# table resnet step %s vs cpu fp32: loss %.9g vs %.9g (rel %.1e), classifier gradients %.1e, all "
           "gradients %.1e, worst gradient %s %.1e, worst running statistic %s %.1e\n",
           tk_dtype_name(gpu->t), lg, lc, lrel, fc, sqrt(num / den), wn, worst, wsn, worst_s);
    CHECK(lrel <= tol_loss);
    CHECK((per_tensor ? worst : fc) <= tol_grad);
    CHECK(worst_s <= tol_stats);
}

TK_TEST(step_cpu_vs_cuda_fp32) {
    tk_ctx *cc = NULL;
    tk_err e = {0};
    if (tk_ctx_create(&cc, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    tk_instance *Ic = make(cc, 16, 0, 0), *Ig = make(gt_ctx_, 16, 0, 0);
    rn_model *cpu = Ic->model, *gpu = Ig->model;
    const rn_config cfg = cpu->cfg;
    printf("# cuda stem channels %d\n", gpu->stem.cin);
    compare_step(cpu, gpu, 1e-5, 1e-3, 1, 1e-5, tk_failed_);
    // (c) the eval forward with the updated running statistics
    set_batch(cpu, 1), set_batch(gpu, 1);
    CHECK_EQ_INT(rn_forward(cpu, cpu->in_img, 0, &e), 0);
    CHECK_EQ_INT(rn_forward(gpu, gpu->in_img, 0, &e), 0);
    const size_t nl = (size_t)cfg.batch * cfg.classes;
    float *lc = gt_host(nl * 4), *lg = gt_host(nl * 4);
    memcpy(lc, cpu->logits, nl * 4);
    gt_down(lg, gpu->logits, nl * 4);
    double r = gt_relerr(lg, lc, nl);
    int64_t hc = 0, hg = 0;
    CHECK_EQ_INT(tk_top1_count_ref(lc, cpu->in_label, cfg.batch, cfg.classes, &hc, &e), 0);
    CHECK_EQ_INT(tk_top1_count_ref(lg, cpu->in_label, cfg.batch, cfg.classes, &hg, &e), 0);
    printf("# table resnet eval forward fp32: logits rel err %.1e, top-1 hits %lld vs %lld\n", r, (long long)hg,
           (long long)hc);
    CHECK(r <= 1e-5);
    CHECK_EQ_INT(hg, hc);
    free(lc), free(lg);
    rn_free(Ic), rn_free(Ig);
    tk_ctx_destroy(cc);
}

TK_TEST(step_cpu_fp32_vs_cuda_bf16) {
    tk_ctx *cc = NULL;
    tk_err e = {0};
    if (tk_ctx_create(&cc, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    tk_instance *Ic = make(cc, 16, 0, 0), *Ig = make(gt_ctx_, 16, 1, 0);
    compare_step(Ic->model, Ig->model, 2e-2, 1e-1, 0, 3e-2, tk_failed_);
    rn_free(Ic), rn_free(Ig);
    tk_ctx_destroy(cc);
}

// One training iteration as train-step runs it: forward, backward, SGD at lr 0.05, the stem copy.
static int iteration(void *p, tk_err *e) {
    rn_model *m = p;
    TRY(rn_train_step(m, e));
    TRY(tk_sgd_update(m->c, m->P->dense_w, m->P->dense_g, m->P->dense_n, m->lr, m->P->copy,
                      m->P->copy ? m->P->copy_type : TK_F32, e));
    return rn_refresh_stem(m, e);
}

TK_TEST(graph_vs_eager_bitwise) {
    int saved = gt_ctx_->deterministic;
    gt_ctx_->deterministic = 1;
    tk_instance *Ia = make(gt_ctx_, 16, 1, 0), *Ib = make(gt_ctx_, 16, 1, 0);
    rn_model *a = Ia->model, *b = Ib->model;
    float lr = 0.05f;
    gt_up(a->lr, &lr, 4), gt_up(b->lr, &lr, 4);
    const gt_step_pair pair = {a, b, set_batch, iteration};
    gt_graph_vs_eager(tk_failed_, &pair, 3, 10);
    const size_t n = a->P->dense_n;
    float *wa = gt_host(n * 4), *wb = gt_host(n * 4);
    gt_down(wa, a->P->dense_w, n * 4), gt_down(wb, b->P->dense_w, n * 4);
    double la = loss_of(a), lb = loss_of(b);
    printf("# table resnet graph vs eager (3 steps, bf16): %zu of %zu weights differ, loss sums %.17g vs %.17g\n",
           gt_ndiff(wb, wa, n), n, lb, la);
    CHECK(gt_ndiff(wb, wa, n) == 0);
    CHECK(la == lb);
    free(wa), free(wb);
    rn_free(Ia), rn_free(Ib);
    gt_ctx_->deterministic = saved;
}

TK_TEST(backward_reports_final_gradients) {
    for (int bf16 = 0; bf16 < 2; bf16++) {
        tk_instance *I = make(gt_ctx_, 16, bf16, 0);
        rn_model *m = I->model;
        set_batch(m, 21);
        gr_rec r = {0};
        for (int graph = 0; graph < 2; graph++)
            CHECK(gr_step_ok(&r, m->P, &m->grads, rn_train_step, m, graph, m->nblk + 2));
        gr_release(&r);
        rn_free(I);
    }
}

// ---- the benchmark (TK_BENCH=1): ResNet-50, batch 256, bf16, one batch resident on the GPU ----

typedef struct {
    rn_model *m;
    tk_graph *g;
    int what; // 0 step (graph), 1 step eager, 2 forward, 3 the convolutions alone, 4 the BNs alone
} bench_arg;

// Every BN pass of one training step (forward with statistics, backward), on the model's buffers.
typedef struct {
    tk_blk_norm *bn;
    const tk_blk_conv *cv; // the convolution before it (its statistics from cv's epilogue when cv->fused)
    const void *x, *res;
    void *y;
    int relu;
    int64_t M;
    uint8_t *mask; // the ReLU's mask bits where the step uses them (bn3: rn_block.u3.mask)
    const tk_blk_norm *rbn; // bn3 after a projection: the shortcut BN applied inside (res its input)
} bn_pass;

static int bn_passes(rn_model *m, bn_pass *v) {
    int n = 0;
    // the stem's: statistics only (the max pool applies it: tk_maxpool_bn_fwd), as the step runs it
    v[n++] = (bn_pass){&m->u0.n, &m->u0.c, m->u0.y, NULL, m->u0.c.fused ? m->u0.z : NULL, 1,
                       tk_conv_y_numel(&m->u0.c.s) / m->u0.n.C, NULL, NULL};
    for (int i = 0; i < m->nblk; i++) {
        rn_block *k = &m->blk[i];
        v[n++] = (bn_pass){&k->u1.n, &k->u1.c, k->u1.y, NULL, k->u1.z, 1, tk_conv_y_numel(&k->u1.c.s) / k->u1.n.C,
                           NULL, NULL};
        v[n++] = (bn_pass){&k->u2.n, &k->u2.c, k->u2.y, NULL, k->u2.z, 1, tk_conv_y_numel(&k->u2.c.s) / k->u2.n.C,
                           NULL, NULL};
        // as the step: with a projection, its BN's statistics alone and its apply inside bn3's
        const int rbn = k->down && !k->ud.c.fused && !k->u3.c.fused;
        v[n++] = (bn_pass){&k->u3.n, &k->u3.c, k->u3.y, rbn ? k->ud.y : k->down ? k->ud.z : k->in, k->u3.z, 1,
                           tk_conv_y_numel(&k->u3.c.s) / k->u3.n.C, k->u3.c.fused ? NULL : k->u3.mask,
                           rbn ? &k->ud.n : NULL};
        if (k->down)
            v[n++] = (bn_pass){&k->ud.n, &k->ud.c, k->ud.y, NULL, rbn ? NULL : k->ud.z, 0,
                               tk_conv_y_numel(&k->ud.c.s) / k->ud.n.C, NULL, NULL};
    }
    return n;
}

// BN pass v: its forward (dir 0), its backward (1), or both (2).
static void run_bn(rn_model *m, const bn_pass *v, int dir) {
    tk_err e = {0};
    const float eps = 1e-5f, mom = 0.1f;
    tk_blk_norm *b = v->bn;
    const tk_blk_conv *cv = v->cv;
    if (dir != 1 && cv->fused)
        tk_bn_fwd_train_sums(m->c, m->t, v->x, v->M, b->C, cv->sums, cv->sums + cv->s.K, b->gamma, b->beta, v->res,
                             v->relu, eps, mom, b->rmean, b->rvar, b->smean, b->sinvstd, v->y, m->env.norm_ws, &e);
    else if (dir != 1 && v->rbn) {
        const tk_bn_saved sd = {v->rbn->gamma, v->rbn->beta, v->rbn->smean, v->rbn->sinvstd};
        tk_bn_fwd_train_res_bn(m->c, m->t, v->x, v->M, b->C, b->gamma, b->beta, v->res, sd, v->relu, eps, mom, b->rmean,
                               b->rvar, b->smean, b->sinvstd, v->y, v->mask, m->env.norm_ws, &e);
    } else if (dir != 1)
        tk_bn_fwd_train_mask(m->c, m->t, v->x, v->M, b->C, b->gamma, b->beta, v->res, v->relu, eps, mom, b->rmean,
                             b->rvar, b->smean, b->sinvstd, v->y, v->mask, m->env.norm_ws, &e);
    if (dir != 0 && v->mask)
        tk_bn_bwd_mask(m->c, m->t, v->x, v->mask, m->g[0], m->g[1], v->M, b->C, b->gamma, b->smean, b->sinvstd, m->g[2],
                       m->g[3], b->dgamma, b->dbeta, m->env.norm_ws, &e);
    else if (dir != 0)
        tk_bn_bwd(m->c, m->t, v->x, v->relu && v->res ? v->y : NULL, v->relu && !v->res ? b->beta : NULL, m->g[0],
                  v->res ? m->g[1] : NULL, v->M, b->C, b->gamma, b->smean, b->sinvstd, m->g[2],
                  v->res ? m->g[3] : NULL, b->dgamma, b->dbeta, m->env.norm_ws, &e);
    if (e.code) gt_die_("bench bns", &e);
}

static void run_bns(rn_model *m) {
    bn_pass v[4 * RN_MAX_BLOCKS + 1];
    const int n = bn_passes(m, v);
    for (int i = 0; i < n; i++) run_bn(m, &v[i], 2);
}

static void run_convs(rn_model *m) { // every conv pass of one step, on the model's buffers
    tk_err e = {0};
    const tk_blk_conv *c0 = &m->u0.c;
    rn_conv_fwd(m, c0, m->stem.x, m->u0.y, 1, &e);
    tk_conv(m->c, m->dnn, TK_CONV_BWD_FILTER, &c0->s, m->t, m->stem.x, m->g[0], m->env.wbuf, &e);
    for (int i = 0; i < m->nblk; i++) {
        const rn_block *k = &m->blk[i];
        const tk_blk_conv *cv[4] = {&k->u1.c, &k->u2.c, &k->u3.c, &k->ud.c};
        const void *in[4] = {k->in, k->u1.z, k->u2.z, k->in};
        void *out[4] = {k->u1.y, k->u2.y, k->u3.y, k->ud.y};
        for (int j = 0; j < (k->down ? 4 : 3); j++) {
            if (!e.code) rn_conv_fwd(m, cv[j], in[j], out[j], 1, &e);
            tk_conv(m->c, m->dnn, TK_CONV_BWD_DATA, &cv[j]->s, m->t, m->g[1], cv[j]->wc, m->g[2], &e);
            tk_conv(m->c, m->dnn, TK_CONV_BWD_FILTER, &cv[j]->s, m->t, in[j], m->g[1], m->env.wbuf, &e);
        }
    }
    if (e.code) gt_die_("bench convs", &e);
}

// The step's other passes, one at a time (the breakdown): 0 input normalization, 1 max pool
// forward, 2 max pool backward, 3 average pool forward, 4 average pool backward, 5 loss, 6 SGD
// update of every weight and its bf16 copy.
typedef struct {
    rn_model *m;
    int what, bn, dir;
} part_arg;

static void part_fn(void *p) {
    part_arg *a = p;
    rn_model *m = a->m;
    tk_err e = {0};
    const int b = m->b, W = m->cfg.width;
    const rn_block *last = &m->blk[m->nblk - 1];
    const int hw = (int)(tk_conv_y_numel(&last->u3.c.s) / last->u3.c.s.K / b);
    if (a->bn >= 0) {
        bn_pass v[4 * RN_MAX_BLOCKS + 1];
        bn_passes(m, v);
        run_bn(m, &v[a->bn], a->dir);
        return;
    }
    int rc = 0;
    switch (a->what) {
    case 0: rc = rn_stem_input(m, m->in_img, &e); break;
    case 1: { // as the step: BN's apply and ReLU inside
        const tk_pool_bn pb = {m->u0.n.gamma, m->u0.n.beta, m->u0.n.smean, m->u0.n.sinvstd};
        rc = tk_maxpool_bn_fwd(m->c, m->t, m->u0.y, pb, b, m->H0, m->H0, W, 3, 2, 1, m->pool, m->pool_idx, &e);
        break;
    }
    case 2: rc = tk_maxpool_bwd(m->c, m->t, m->g[0], m->g[1], m->pool_idx, b, m->H0, m->H0, W, 3, 2, 1, m->g[2], &e); break;
    case 3: rc = tk_avgpool_fwd(m->c, m->t, last->u3.z, b, hw, m->Cf, m->feat, &e); break;
    case 4: rc = tk_avgpool_bwd(m->c, m->t, m->dfeat, b, hw, m->Cf, m->g[0], &e); break;
    case 5:
        rc = tk_xent_smooth(m->c, m->logits, m->in_label, b, m->cfg.classes, b, 0.1f, m->t, m->dlogits, m->loss_acc,
                            m->xent_ws, &e);
        break;
    default:
        rc = tk_sgd_update(m->c, m->P->dense_w, m->P->dense_g, m->P->dense_n, m->lr, m->P->copy,
                           m->P->copy ? m->P->copy_type : TK_F32, &e);
    }
    if (rc) gt_die_("bench part", &e);
}

// Each BN pass of the step alone (forward, backward) and the other passes: "# table" lines with
// each one's time and the bytes its kernels move per second (BN forward: x read twice, for the
// statistics and the apply, res read and y written once; backward: x and dy read twice (the ReLU
// mask from x) and dx written, or with dy2 x, dy, dy2, y read once, dz written and read back with
// x, dx written).
static void breakdown(rn_model *m) {
    bn_pass v[4 * RN_MAX_BLOCKS + 1];
    const int n = bn_passes(m, v);
    const double es = (double)tk_dtype_size(m->t);
    double tf = 0, tb = 0;
    for (int i = 0; i < n; i++) {
        double ms[2];
        for (int d = 0; d < 2; d++) {
            part_arg a = {m, 0, i, d};
            ms[d] = gt_time_ms(part_fn, &a, 10);
        }
        const double el = (double)v[i].M * v[i].bn->C;
        const double bf = el * es * (!v[i].y ? 1 : (v[i].cv->fused ? 2 : 3) + (v[i].res != NULL)); // (fused: x read once)
        const double bb = el * es * (v[i].res ? (v[i].mask ? 3 + 1.0 / 16 : 4) + 1 + 2 + 1 : 2 * 2 + 1);
        printf("# table resnet50 bn %2d M %7lld C %4d%s%s: fwd %7.1f us (%5.0f GB/s)  bwd %7.1f us (%5.0f GB/s)\n",
               i, (long long)v[i].M, v[i].bn->C, v[i].relu ? " relu" : "", v[i].res ? " res" : "", ms[0] * 1e3,
               bf / ms[0] / 1e6, ms[1] * 1e3, bb / ms[1] / 1e6);
        tf += ms[0], tb += ms[1];
    }
    printf("# table resnet50 bn total: forwards %.2f ms, backwards %.2f ms\n", tf, tb);
    const char *names[7] = {"input normalize", "max pool+BN fwd", "max pool bwd", "avg pool fwd", "avg pool bwd",
                            "loss (xent)", "SGD update"};
    double tot = 0;
    for (int w = 0; w < 7; w++) {
        part_arg a = {m, w, -1, 0};
        double ms = gt_time_ms(part_fn, &a, 10);
        tot += ms;
        printf("# table resnet50 other %-16s %7.1f us\n", names[w], ms * 1e3);
    }
    printf("# table resnet50 other passes total %.2f ms\n", tot);
    // each forward shape: the plain plan's and the fused (BN statistics) plan's autotuned times
    int nf = 0, nconv = 0;
    double plain = 0, fused = 0;
    for (int i = -1; i < m->nblk; i++) {
        const tk_blk_conv *cv[4] = {&m->u0.c, NULL, NULL, NULL};
        if (i >= 0) cv[0] = &m->blk[i].u1.c, cv[1] = &m->blk[i].u2.c, cv[2] = &m->blk[i].u3.c,
                   cv[3] = m->blk[i].down ? &m->blk[i].ud.c : NULL;
        for (int j = 0; j < 4 && cv[j]; j++) {
            const tk_conv_shape *s = &cv[j]->s;
            const float pm = tk_cudnn_plan_ms(m->dnn, TK_CONV_FWD, s, m->t), fm = tk_cudnn_plan_ms(m->dnn, TK_CUDNN_FWD_STATS, s, m->t);
            nconv++, nf += cv[j]->fused;
            plain += pm, fused += cv[j]->fused ? fm : pm;
            if (i < 1 || m->blk[i].unit == 0 || m->blk[i].unit == 1)
                printf("# table resnet50 conv fwd %3dx%-3d %4d->%4d %dx%d/%d: plain %.3f ms, fused+stats %.3f ms%s\n",
                       s->H, s->W, s->C, s->K, s->R, s->S, s->stride, pm, fm, cv[j]->fused ? " (used)" : "");
        }
    }
    printf("# table resnet50 conv fwd: %d of %d forwards fused with their BN statistics; forwards %.2f ms plain, "
           "%.2f ms as run (autotuning's times)\n", nf, nconv, plain, fused);
}

static void bench_fn(void *p) {
    bench_arg *a = p;
    tk_err e = {0};
    int rc = 0;
    if (a->what == 0) rc = tk_graph_launch(a->m->c, a->g, &e);
    else if (a->what == 1) rc = iteration(a->m, &e);
    else if (a->what == 2) rc = rn_forward(a->m, a->m->in_img, 1, &e);
    else if (a->what == 3) run_convs(a->m);
    else run_bns(a->m);
    if (rc) gt_die_("bench step", &e);
}

TK_TEST(step_throughput_bench) {
    if (!getenv("TK_BENCH")) {
        printf("# TK_BENCH=1 runs this benchmark\n");
        return;
    }
    const int b = getenv("TK_BENCH_BATCH") ? atoi(getenv("TK_BENCH_BATCH")) : 256;
    tk_err e = {0};
    size_t f0, tot, f1;
    cudaMemGetInfo(&f0, &tot);
    tk_instance *I = make(gt_ctx_, b, 1, 1);
    rn_model *m = I->model;
    cudaMemGetInfo(&f1, &tot);
    float lr = 0.01f;
    gt_up(m->lr, &lr, 4);
    set_batch(m, 0);
    tk_graph g = {0};
    CHECK_EQ_INT(iteration(m, &e), 0); // warm-up (cuDNN's first runs), then the capture
    CHECK_EQ_INT(tk_graph_begin(gt_ctx_, &e), 0);
    CHECK_EQ_INT(iteration(m, &e), 0);
    CHECK_EQ_INT(tk_graph_end(gt_ctx_, &g, &e), 0);
    bench_arg a = {m, &g, 0};
    const char *names[5] = {"step, CUDA graph", "step, eager", "forward (training)", "convolutions alone",
                            "batch norms alone"};
    double ms[5];
    for (int w = 0; w < 5; w++) {
        a.what = w;
        ms[w] = gt_time_ms(bench_fn, &a, 20);
        printf("# table resnet50 bench b=%d bf16 %-20s %8.2f ms  %8.0f images/s\n", b, names[w], ms[w], b * 1e3 / ms[w]);
    }
    printf("# table resnet50 bench: convolutions %.0f%%, batch norms %.0f%% of the graph step; model memory %.2f GiB; "
           "%d conv plans, %.0f MiB workspace\n",
           100 * ms[3] / ms[0], 100 * ms[4] / ms[0], (double)(f0 - f1) / (1 << 30), tk_cudnn_nplans(m->dnn),
           (double)tk_cudnn_ws_bytes(m->dnn) / (1 << 20));
    printf("# json {\"type\": \"bench\", \"impl\": \"trainkit\", \"batch\": %d, \"images_per_s\": %.1f, \"ms\": %.3f, "
           "\"eager_images_per_s\": %.1f, \"conv_ms\": %.3f}\n",
           b, b * 1e3 / ms[0], ms[0], b * 1e3 / ms[1], ms[3]);
    breakdown(m);
    for (int i = 0; i < tk_cudnn_nplans(m->dnn); i++) printf("# plan %s\n", tk_cudnn_plan_desc(m->dnn, i));
    CHECK_EQ_INT(gt_trace_graph_steps(m->c, &g, 3, &e), 0); // TK_TRACE=FILE: three replays traced
    tk_graph_destroy(&g);
    rn_free(I);
}
