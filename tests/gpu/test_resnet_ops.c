// ResNet's ops on the cuda backend against their CPU references (kernels/{conv,bn,pool,
// xent_smooth,img_norm,stem_s2d,stem_conv}.h; stem_conv also at SSD300's shape, and which stem
// lib/blocks/stem.h picks): fresh random inputs each run, and small-integer inputs where the results must
// be exact. Convolutions run through cuDNN (lib/gpu/cudnn_conv.h), fp32 with fp32-only engines and
// bf16 with fp32 accumulation. Tolerances: fp32 <= 1e-5 relative (norm-wise), bf16 <= 1e-2 (the
// reference rounds the same fp32 math to bf16 once; cuDNN's bf16 kernels may round partial sums);
// small integers: fp32 bit-exact.
#include "blocks/stem.h"
#include "bn.h"
#include "conv.h"
#include "gpu/cudnn_conv.h"
#include "gpu_test.h"
#include "img_norm.h"
#include "pool.h"
#include "stem_conv.h"
#include "stem_s2d.h"
#include "xent_smooth.h"

// got vs ref (n values): relative error within tol; prints a table line.
static int close_enough(const char *what, const float *got, const float *ref, size_t n, double tol) {
    double err = gt_relerr(got, ref, n);
    printf("# table resnet %-44s rel err %.2e (%zu of %zu differ)%s\n", what, err, gt_ndiff(got, ref, n), n,
           err <= tol ? "" : "  <-- FAIL");
    return err <= tol;
}

static float *rand_host(size_t n, int ints) {
    float *x = gt_host(n * 4);
    gt_fill(x, n, ints ? -2 : -1, ints ? 2 : 1, ints);
    return x;
}

// ---- convolution ----

typedef struct {
    int N, H, C, K, R, stride, pad;
} conv_case;

static const conv_case conv_cases[] = {
    {4, 14, 64, 32, 1, 1, 0},  // 1x1 (bottleneck)
    {4, 14, 32, 64, 1, 2, 0},  // 1x1/2 (shortcut)
    {4, 14, 32, 32, 3, 1, 1},  // 3x3
    {4, 15, 32, 48, 3, 2, 1},  // 3x3/2 (v1.5), odd size
    {2, 32, 4, 16, 7, 2, 3},   // the stem, input padded to 4 channels
    {2, 9, 8, 8, 3, 1, 1},     // small channel counts
    {2, 19, 16, 16, 4, 1, 0},  // the stem as a 4x4 convolution over its space-to-depth input (32x32 images)
};

static void conv_one(tk_cudnn *h, const conv_case *cc, tk_dtype t, int ints, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    tk_conv_shape s;
    CHECK_EQ_INT(tk_conv_shape_init(&s, cc->N, cc->H, cc->H, cc->C, cc->K, cc->R, cc->R, cc->stride, cc->pad, &e), 0);
    for (int p = 0; p < 3; p++) CHECK_EQ_INT(tk_cudnn_plan(h, (tk_conv_pass)p, &s, t, &e), 0);
    if (e.code) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("# %s\n", buf);
        return;
    }
    size_t nws = tk_cudnn_ws_bytes(h);
    void *ws = nws ? gt_dev(nws) : NULL;
    tk_cudnn_set_ws(h, ws, nws);
    const size_t nx = (size_t)tk_conv_x_numel(&s), ny = (size_t)tk_conv_y_numel(&s), nw = (size_t)tk_conv_w_numel(&s);
    float *x = rand_host(nx, ints), *w = rand_host(nw, ints), *dy = rand_host(ny, ints);
    gt_round(x, nx, t), gt_round(w, nw, t), gt_round(dy, ny, t);
    const size_t es = tk_dtype_size(t);
    void *hx = gt_host(nx * es), *hw = gt_host(nw * es), *hdy = gt_host(ny * es);
    void *dx_ = gt_dev(nx * es), *dw_ = gt_dev(nw * es), *ddy = gt_dev(ny * es), *out = gt_dev((nx > ny ? (nx > nw ? nx : nw) : (ny > nw ? ny : nw)) * es);
    gt_up_as(dx_, x, nx, t), gt_up_as(dw_, w, nw, t), gt_up_as(ddy, dy, ny, t);
    gt_down(hx, dx_, nx * es), gt_down(hw, dw_, nw * es), gt_down(hdy, ddy, ny * es);
    const char *names[3] = {"fwd", "dgrad", "wgrad"};
    for (int p = 0; p < 3; p++) {
        const void *a = p == TK_CONV_BWD_DATA ? hdy : hx, *b = p == TK_CONV_BWD_FILTER ? hdy : hw;
        const void *da = p == TK_CONV_BWD_DATA ? ddy : dx_, *db = p == TK_CONV_BWD_FILTER ? ddy : dw_;
        size_t no = p == TK_CONV_FWD ? ny : p == TK_CONV_BWD_DATA ? nx : nw;
        void *href = gt_host(no * es);
        float *ref = gt_host(no * 4), *got = gt_host(no * 4);
        CHECK_EQ_INT(tk_conv_ref((tk_conv_pass)p, &s, t, a, b, href, &e), 0);
        for (size_t i = 0; i < no; i++) ref[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)href)[i]) : ((float *)href)[i];
        gt_poison(out, no * es, 0xff);
        CHECK_EQ_INT(tk_cudnn_conv(h, (tk_conv_pass)p, &s, t, da, db, out, &e), 0);
        CHECK_EQ_INT(gt_sync(&e), 0);
        gt_down_as(got, out, no, t);
        char what[96];
        snprintf(what, sizeof what, "conv %s %s%s N%d %dx%dx%d->%d %dx%d/%d", names[p], tk_dtype_name(t),
                 ints ? " ints" : "", s.N, s.H, s.W, s.C, s.K, s.R, s.S, s.stride);
        CHECK(close_enough(what, got, ref, no, t == TK_BF16 ? 1e-2 : ints ? 0 : 1e-5));
        free(href), free(ref), free(got);
    }
    void *dev[] = {dx_, dw_, ddy, out, ws};
    for (int i = 0; i < 5; i++)
        if (dev[i]) tk_free(gt_ctx_, dev[i]);
    free(x), free(w), free(dy), free(hx), free(hw), free(hdy);
}

// A cuDNN handle on the test context (NULL, the reason printed, when there is no cuDNN).
static tk_cudnn *dnn(void) {
    setenv("TK_CUDNN_FUSION", "1", 1); // (the fused plans are opt-in; these tests plan them)
    tk_err e = {0};
    tk_cudnn *h = NULL;
    if (tk_cudnn_create(gt_ctx_, 0, &h, &e)) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("# %s\n", buf);
        return NULL;
    }
    return h;
}

TK_TEST(conv_cudnn_vs_reference) {
    tk_cudnn *h = dnn();
    CHECK(h != NULL);
    if (!h) return;
    printf("# %s\n", tk_cudnn_describe());
    for (size_t i = 0; i < sizeof conv_cases / sizeof *conv_cases; i++) {
        conv_one(h, &conv_cases[i], TK_F32, 0, tk_failed_);
        conv_one(h, &conv_cases[i], TK_F32, 1, tk_failed_);
        conv_one(h, &conv_cases[i], TK_BF16, 0, tk_failed_);
        conv_one(h, &conv_cases[i], TK_BF16, 1, tk_failed_);
    }
    for (int i = 0; i < tk_cudnn_nplans(h); i++) printf("#   plan %s\n", tk_cudnn_plan_desc(h, i));
    tk_cudnn_destroy(h);
}

// ---- the fused passes (cuDNN's runtime fusion, gpu/cudnn_conv.h) ----

// One fused pass against the references: FWD_STATS, SBR_FWD_STATS (x through relu(x scale + bias)
// first, per input channel) or SBR_WGRAD. The prologue's output is computed here in fp32 and
// rounded to t (what the unfused path's BN kernel writes); y or dw against the reference
// convolution in t on it; the per-channel sum and sum of squares against fp64 sums of the
// reference's fp32 output (before its rounding to t: the fused engine may sum its accumulators or
// the rounded y; either is within bf16's tolerance). A shape cuDNN refuses to fuse is reported and
// skipped (the model then runs the unfused passes, which the step tests cover). Returns whether
// the shape was fused.
static int fused_one(tk_cudnn *h, const conv_case *cc, tk_dtype t, int ints, tk_cudnn_fused kind, int *failed_) {
    int *tk_failed_ = failed_;
    static const char *const kname[6] = {"", "", "", "fwd+stats", "sbr+fwd+stats", "sbr+wgrad"};
    tk_err e = {0};
    tk_conv_shape s;
    CHECK_EQ_INT(tk_conv_shape_init(&s, cc->N, cc->H, cc->H, cc->C, cc->K, cc->R, cc->R, cc->stride, cc->pad, &e), 0);
    char what[160];
    snprintf(what, sizeof what, "conv %s %s%s N%d %dx%dx%d->%d %dx%d/%d", kname[kind], tk_dtype_name(t),
             ints ? " ints" : "", s.N, s.H, s.W, s.C, s.K, s.R, s.S, s.stride);
    if (tk_cudnn_plan_fused(h, kind, &s, t, &e)) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("# table resnet %s: refused (%s)\n", what, buf);
        return 0;
    }
    size_t nws = tk_cudnn_ws_bytes(h);
    void *ws = nws ? gt_dev(nws) : NULL;
    tk_cudnn_set_ws(h, ws, nws);
    const size_t nx = (size_t)tk_conv_x_numel(&s), ny = (size_t)tk_conv_y_numel(&s), nw = (size_t)tk_conv_w_numel(&s);
    const int K = s.K, C = s.C, pro = kind != TK_CUDNN_FWD_STATS, wgrad = kind == TK_CUDNN_SBR_WGRAD;
    const size_t es = tk_dtype_size(t), no = wgrad ? nw : ny;
    float *x = rand_host(nx, ints), *w = rand_host(nw, ints), *dy = rand_host(ny, ints);
    float *sc = rand_host((size_t)C, ints), *bi = rand_host((size_t)C, ints), *xr = gt_host(nx * 4);
    gt_round(x, nx, t), gt_round(w, nw, t), gt_round(dy, ny, t);
    for (size_t i = 0; i < nx; i++) {
        float v = pro ? x[i] * sc[i % C] + bi[i % C] : x[i];
        xr[i] = pro && !(v > 0) ? 0 : v;
    }
    gt_round(xr, nx, t);
    // the references: in t on t's values, and (statistics) in fp32
    void *hxr = gt_host(nx * es), *hw = gt_host(nw * es), *hdy = gt_host(ny * es), *ho = gt_host(no * es);
    void *dx_ = gt_dev(nx * es), *dw_ = gt_dev(nw * es), *ddy = gt_dev(ny * es), *dout = gt_dev(no * es);
    float *dstat = gt_dev((size_t)(2 * K + 2 * C) * 4);
    gt_up_as(dx_, xr, nx, t), gt_down(hxr, dx_, nx * es); // (t's bytes of the prologue's output, for the reference)
    gt_up_as(dx_, x, nx, t), gt_up_as(dw_, w, nw, t), gt_up_as(ddy, dy, ny, t);
    gt_down(hw, dw_, nw * es), gt_down(hdy, ddy, ny * es);
    gt_up(dstat + 2 * K, sc, (size_t)C * 4), gt_up(dstat + 2 * K + C, bi, (size_t)C * 4);
    float *ref = gt_host(no * 4), *got = gt_host(no * 4), *y32 = gt_host(ny * 4);
    if (wgrad) CHECK_EQ_INT(tk_conv_ref(TK_CONV_BWD_FILTER, &s, t, hxr, hdy, ho, &e), 0);
    else CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &s, t, hxr, hw, ho, &e), 0);
    for (size_t i = 0; i < no; i++) ref[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)ho)[i]) : ((float *)ho)[i];
    gt_poison(dout, no * es, 0xff), gt_poison(dstat, (size_t)2 * K * 4, 0x7f); // the call zeroes the sums itself
    const float *dsc = pro ? dstat + 2 * K : NULL, *dbi = pro ? dstat + 2 * K + C : NULL;
    if (wgrad) CHECK_EQ_INT(tk_cudnn_wgrad_sbr(h, &s, t, dx_, dsc, dbi, ddy, dout, &e), 0);
    else CHECK_EQ_INT(tk_cudnn_conv_fwd_stats(h, &s, t, dx_, dsc, dbi, dw_, dout, dstat, dstat + K, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    gt_down_as(got, dout, no, t);
    const double tol = t == TK_BF16 ? 1e-2 : ints ? 0 : 1e-5;
    CHECK(close_enough(what, got, ref, no, tol));
    if (!wgrad) {
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &s, TK_F32, xr, w, y32, &e), 0); // xr, w hold t's values
        double *sd = calloc((size_t)2 * K, sizeof *sd);
        float *sref = gt_host((size_t)2 * K * 4), *sgot = gt_host((size_t)2 * K * 4);
        for (size_t i = 0; i < ny; i++) sd[i % K] += y32[i], sd[K + i % K] += (double)y32[i] * y32[i];
        for (int k = 0; k < 2 * K; k++) sref[k] = (float)sd[k];
        gt_down(sgot, dstat, (size_t)2 * K * 4);
        char w2[200];
        snprintf(w2, sizeof w2, "%s sum", what);
        CHECK(close_enough(w2, sgot, sref, (size_t)K, tol));
        snprintf(w2, sizeof w2, "%s sqsum", what);
        CHECK(close_enough(w2, sgot + K, sref + K, (size_t)K, tol));
        free(sd), free(sref), free(sgot);
    }
    void *dev[] = {dx_, dw_, ddy, dout, dstat, ws};
    for (int i = 0; i < 6; i++)
        if (dev[i]) tk_free(gt_ctx_, dev[i]);
    void *host[] = {x, w, dy, sc, bi, xr, hxr, hw, hdy, ho, ref, got, y32};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
    return 1;
}

// Every fused kind on every conv case; the genstats forward must be there for bf16 (cudnn-frontend
// runs its scale-bias-relu-conv-genstats sample on sm80 and sm90): a refusal of every bf16 case
// fails. The prologue kinds are reported (the model falls back without them).
TK_TEST(conv_fused_vs_reference) {
    tk_cudnn *h = dnn();
    CHECK(h != NULL);
    if (!h) return;
    const size_t nc = sizeof conv_cases / sizeof *conv_cases;
    int fused[3] = {0, 0, 0};
    for (int k = 0; k < 3; k++)
        for (size_t i = 0; i < nc; i++) {
            tk_cudnn_fused kind = (tk_cudnn_fused)(TK_CUDNN_FWD_STATS + k);
            fused_one(h, &conv_cases[i], TK_F32, 0, kind, tk_failed_);
            fused_one(h, &conv_cases[i], TK_F32, 1, kind, tk_failed_);
            fused[k] += fused_one(h, &conv_cases[i], TK_BF16, 0, kind, tk_failed_);
            fused_one(h, &conv_cases[i], TK_BF16, 1, kind, tk_failed_);
        }
    for (int i = 0; i < tk_cudnn_nplans(h); i++) printf("#   plan %s\n", tk_cudnn_plan_desc(h, i));
    printf("# table resnet conv fused bf16 shapes of %zu: fwd+stats %d, sbr+fwd+stats %d, sbr+wgrad %d\n", nc,
           fused[0], fused[1], fused[2]);
    CHECK(fused[0] > 0);
    tk_cudnn_destroy(h);
}

// ---- batch normalization ----

// ints: small-integer x, dy, dy2, res and M a power of two, so the statistics are exact on both
// sides: y, y eval, dz, dbeta and every statistic must then be bit-exact.
static void bn_case(int64_t M, int C, tk_dtype t, int relu, int res, int ints, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const size_t n = (size_t)M * C, es = tk_dtype_size(t);
    float *x = gt_host(n * 4), *r = rand_host(n, ints), *dy = rand_host(n, ints), *dy2 = rand_host(n, ints);
    if (ints) gt_fill(x, n, -2, 5, 1);
    else gt_fill(x, n, -0.5f, 2.5f, 0); // a mean away from 0, as convolution outputs have
    gt_round(x, n, t), gt_round(r, n, t), gt_round(dy, n, t), gt_round(dy2, n, t);
    float *gamma = rand_host((size_t)C, 0), *beta = rand_host((size_t)C, 0), *rm = rand_host((size_t)C, 0),
          *rv = gt_host((size_t)C * 4);
    gt_fill(rv, (size_t)C, 0.5f, 1.5f, 0);
    // the reference on host copies in t
    void *hx = gt_host(n * es), *hr = gt_host(n * es), *hdy = gt_host(n * es), *hdy2 = gt_host(n * es);
    void *dx = gt_dev(n * es), *dr = gt_dev(n * es), *ddy = gt_dev(n * es), *ddy2 = gt_dev(n * es);
    gt_up_as(dx, x, n, t), gt_up_as(dr, r, n, t), gt_up_as(ddy, dy, n, t), gt_up_as(ddy2, dy2, n, t);
    gt_down(hx, dx, n * es), gt_down(hr, dr, n * es), gt_down(hdy, ddy, n * es), gt_down(hdy2, ddy2, n * es);
    float *rm_ref = gt_host((size_t)C * 4), *rv_ref = gt_host((size_t)C * 4), *sm_ref = gt_host((size_t)C * 4),
          *si_ref = gt_host((size_t)C * 4), *dg_ref = gt_host((size_t)C * 4), *db_ref = gt_host((size_t)C * 4);
    memcpy(rm_ref, rm, (size_t)C * 4), memcpy(rv_ref, rv, (size_t)C * 4);
    void *hy = gt_host(n * es), *hdxo = gt_host(n * es), *hdz = gt_host(n * es), *hye = gt_host(n * es);
    const float eps = 1e-5f, mom = 0.1f;
    CHECK_EQ_INT(tk_bn_fwd_train_ref(t, hx, M, C, gamma, beta, res ? hr : NULL, relu, eps, mom, rm_ref, rv_ref, sm_ref,
                                     si_ref, hy, &e), 0);
    CHECK_EQ_INT(tk_bn_bwd_ref(t, hx, relu ? hy : NULL, NULL, hdy, res ? hdy2 : NULL, M, C, gamma, sm_ref, si_ref, hdxo, hdz,
                               dg_ref, db_ref, &e), 0);
    CHECK_EQ_INT(tk_bn_fwd_eval_ref(t, hx, M, C, gamma, beta, res ? hr : NULL, relu, eps, rm_ref, rv_ref, hye, &e), 0);
    // the device
    float *dgm = gt_dev((size_t)C * 4), *dbt = gt_dev((size_t)C * 4), *drm = gt_dev((size_t)C * 4),
          *drv = gt_dev((size_t)C * 4), *dsm = gt_dev((size_t)C * 4), *dsi = gt_dev((size_t)C * 4),
          *ddg = gt_dev((size_t)C * 4), *ddb = gt_dev((size_t)C * 4);
    void *dy_ = gt_dev(n * es), *ddx = gt_dev(n * es), *ddz = gt_dev(n * es), *dye = gt_dev(n * es);
    void *ws = gt_dev(tk_bn_ws_bytes(TK_BACKEND_CUDA, M, C));
    gt_up(dgm, gamma, (size_t)C * 4), gt_up(dbt, beta, (size_t)C * 4), gt_up(drm, rm, (size_t)C * 4),
        gt_up(drv, rv, (size_t)C * 4);
    gt_poison(dy_, n * es, 0xff), gt_poison(ddx, n * es, 0xff), gt_poison(ddz, n * es, 0xff);
    CHECK_EQ_INT(tk_bn_fwd_train(gt_ctx_, t, dx, M, C, dgm, dbt, res ? dr : NULL, relu, eps, mom, drm, drv, dsm, dsi,
                                 dy_, ws, &e), 0);
    CHECK_EQ_INT(tk_bn_bwd(gt_ctx_, t, dx, relu ? dy_ : NULL, NULL, ddy, res ? ddy2 : NULL, M, C, dgm, dsm, dsi, ddx, ddz,
                           ddg, ddb, ws, &e), 0);
    CHECK_EQ_INT(tk_bn_fwd_eval(gt_ctx_, t, dx, M, C, dgm, dbt, res ? dr : NULL, relu, eps, drm, drv, dye, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    char what[96];
    const double tol = t == TK_BF16 ? 1e-2 : 1e-5;
    float *got = gt_host(n * 4), *ref = gt_host(n * 4), *gc = gt_host((size_t)C * 4);
    // The backward's reference takes its ReLU mask from the device's own forward output: a y that
    // lands within an ulp of 0 may take the other sign on the two sides (the statistics' sums run in
    // other orders), and such a flipped mask element moves dgamma by a whole dy * xhat term, which the
    // forward's comparison already judged. Where the two y agree this is the reference above.
    void *hyd = gt_host(n * es), *hdxd = gt_host(n * es), *hdzd = gt_host(n * es);
    float *dgd = gt_host((size_t)C * 4), *dbd = gt_host((size_t)C * 4);
    gt_down(hyd, dy_, n * es);
    CHECK_EQ_INT(tk_bn_bwd_ref(t, hx, relu ? hyd : NULL, NULL, hdy, res ? hdy2 : NULL, M, C, gamma, sm_ref, si_ref, hdxd,
                               hdzd, dgd, dbd, &e), 0);
    size_t flips = 0;
    for (size_t i = 0; relu && i < n; i++)
        flips += t == TK_BF16 ? (tk_bf16_to_f32(((uint16_t *)hyd)[i]) > 0) != (tk_bf16_to_f32(((uint16_t *)hy)[i]) > 0)
                              : (((float *)hyd)[i] > 0) != (((float *)hy)[i] > 0);
    if (flips) printf("# bn %s M%lld C%d: %zu ReLU mask elements differ between the device's y and the reference's\n",
                      tk_dtype_name(t), (long long)M, C, flips);
    CHECK(flips * 1000 <= n); // an ulp at 0, not a wrong forward
    struct { const char *name; void *dev, *host; } outs[] = {{"y", dy_, hy}, {"dx", ddx, hdxd}, {"dz", ddz, hdzd},
                                                             {"y eval", dye, hye}};
    for (int k = 0; k < 4; k++) {
        gt_down_as(got, outs[k].dev, n, t);
        for (size_t i = 0; i < n; i++) ref[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)outs[k].host)[i]) : ((float *)outs[k].host)[i];
        snprintf(what, sizeof what, "bn %s %s M%lld C%d%s%s%s", outs[k].name, tk_dtype_name(t), (long long)M, C,
                 relu ? " relu" : "", res ? " res" : "", ints ? " ints" : "");
        CHECK(close_enough(what, got, ref, n, ints && k != 1 ? 0 : tol));
    }
    struct { const char *name; float *dev, *host; } stats[] = {{"mean", dsm, sm_ref}, {"invstd", dsi, si_ref},
        {"running mean", drm, rm_ref}, {"running var", drv, rv_ref}, {"dgamma", ddg, dgd}, {"dbeta", ddb, dbd}};
    for (int k = 0; k < 6; k++) {
        gt_down(gc, stats[k].dev, (size_t)C * 4);
        snprintf(what, sizeof what, "bn %s %s M%lld C%d%s", stats[k].name, tk_dtype_name(t), (long long)M, C,
                 ints ? " ints" : "");
        // statistics are fp32 on both sides; dgamma/dbeta sum rounded bf16 values the same way
        CHECK(close_enough(what, gc, stats[k].host, (size_t)C,
                           ints && k != 4 ? 0 : k >= 4 && t == TK_BF16 ? 1e-4 : 1e-5));
    }
    if (relu && res && tk_bn_mask_ok(TK_BACKEND_CUDA, t, C)) { // the ReLU's mask as bits (bf16, C % 8 == 0)
        const size_t nb = (n + 7) / 8;
        uint8_t *hm = gt_host(nb), *gm = gt_host(nb), *dm = gt_dev(nb);
        void *hdx3 = gt_host(n * es), *hdz3 = gt_host(n * es), *gdx = gt_host(n * es), *gdz = gt_host(n * es),
             *gdx3 = gt_host(n * es), *gdz3 = gt_host(n * es), *hy3 = gt_host(n * es);
        float *dg3 = gt_host((size_t)C * 4), *db3 = gt_host((size_t)C * 4), *rm3 = gt_host((size_t)C * 4),
              *rv3 = gt_host((size_t)C * 4), *sm3 = gt_host((size_t)C * 4), *si3 = gt_host((size_t)C * 4);
        memcpy(rm3, rm, (size_t)C * 4), memcpy(rv3, rv, (size_t)C * 4);
        CHECK_EQ_INT(tk_bn_fwd_train_mask_ref(t, hx, M, C, gamma, beta, hr, 1, eps, mom, rm3, rv3, sm3, si3, hy3, hm, &e),
                     0);
        CHECK(memcmp(hy3, hy, n * es) == 0); // the reference's y is the plain forward's
        int bits_ok = 1; // and its bits are y > 0
        for (size_t i = 0; i < n; i++)
            bits_ok &= (hm[i / 8] >> (i % 8) & 1) == (tk_bf16_to_f32(((uint16_t *)hy)[i]) > 0);
        CHECK(bits_ok);
        CHECK_EQ_INT(tk_bn_bwd_mask_ref(t, hx, hm, hdy, hdy2, M, C, gamma, sm_ref, si_ref, hdx3, hdz3, dg3, db3, &e), 0);
        CHECK(memcmp(hdx3, hdxo, n * es) == 0 && memcmp(hdz3, hdz, n * es) == 0);
        // the device: y-path backward (its outputs kept), then the mask forward and backward
        gt_down(gdx, ddx, n * es), gt_down(gdz, ddz, n * es);
        gt_poison(dm, nb, 0x55), gt_poison(ddx, n * es, 0xff), gt_poison(ddz, n * es, 0xff);
        gt_up(drm, rm, (size_t)C * 4), gt_up(drv, rv, (size_t)C * 4);
        CHECK_EQ_INT(tk_bn_fwd_train_mask(gt_ctx_, t, dx, M, C, dgm, dbt, dr, 1, eps, mom, drm, drv, dsm, dsi, dy_, dm, ws,
                                          &e), 0);
        CHECK_EQ_INT(tk_bn_bwd_mask(gt_ctx_, t, dx, dm, ddy, ddy2, M, C, dgm, dsm, dsi, ddx, ddz, ddg, ddb, ws, &e), 0);
        CHECK_EQ_INT(gt_sync(&e), 0);
        gt_down(gm, dm, nb), gt_down(gdx3, ddx, n * es), gt_down(gdz3, ddz, n * es);
        size_t nbad = 0;
        for (size_t i = 0; i < nb; i++) nbad += gm[i] != hm[i];
        const int same = memcmp(gdx3, gdx, n * es) == 0 && memcmp(gdz3, gdz, n * es) == 0;
        printf("# table resnet bn mask %s M%lld C%d: %zu of %zu mask bytes differ from the reference; dx, dz %s the "
               "y-path's%s\n", tk_dtype_name(t), (long long)M, C, nbad, nb, same ? "bit-identical to" : "DIFFER from",
               nbad || !same ? "  <-- FAIL" : "");
        CHECK(nbad == 0);
        CHECK(same);
        tk_free(gt_ctx_, dm);
        void *hh[] = {hm, gm, hdx3, hdz3, gdx, gdz, gdx3, gdz3, hy3, dg3, db3, rm3, rv3, sm3, si3};
        for (size_t i = 0; i < sizeof hh / sizeof *hh; i++) free(hh[i]);
    }
    if (relu && !res) { // the backward with its mask recomputed from x (no y): the same as from y
        void *hdx2 = gt_host(n * es), *hdz2 = gt_host(n * es);
        float *dg2 = gt_host((size_t)C * 4), *db2 = gt_host((size_t)C * 4);
        CHECK_EQ_INT(tk_bn_bwd_ref(t, hx, NULL, beta, hdy, NULL, M, C, gamma, sm_ref, si_ref, hdx2, hdz2, dg2, db2, &e),
                     0);
        CHECK(memcmp(hdx2, hdxo, n * es) == 0 && memcmp(hdz2, hdz, n * es) == 0); // the reference agrees with itself
        gt_poison(ddx, n * es, 0xff), gt_poison(ddz, n * es, 0xff);
        CHECK_EQ_INT(tk_bn_bwd(gt_ctx_, t, dx, NULL, dbt, ddy, NULL, M, C, dgm, dsm, dsi, ddx, ddz, ddg, ddb, ws, &e), 0);
        CHECK_EQ_INT(gt_sync(&e), 0);
        // the device's mask from x is its y > 0 exactly: judged against the y-path reference on the device's y
        struct { const char *name; void *dev, *host; } o2[] = {{"dx x-mask", ddx, hdxd}, {"dz x-mask", ddz, hdzd}};
        for (int k = 0; k < 2; k++) {
            gt_down_as(got, o2[k].dev, n, t);
            for (size_t i = 0; i < n; i++) ref[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)o2[k].host)[i]) : ((float *)o2[k].host)[i];
            snprintf(what, sizeof what, "bn %s %s M%lld C%d%s", o2[k].name, tk_dtype_name(t), (long long)M, C,
                     ints ? " ints" : "");
            CHECK(close_enough(what, got, ref, n, ints && k == 1 ? 0 : tol));
        }
        struct { const char *name; float *dev, *host; } s2[] = {{"dgamma x-mask", ddg, dgd}, {"dbeta x-mask", ddb, dbd}};
        for (int k = 0; k < 2; k++) {
            gt_down(gc, s2[k].dev, (size_t)C * 4);
            snprintf(what, sizeof what, "bn %s %s M%lld C%d%s", s2[k].name, tk_dtype_name(t), (long long)M, C,
                     ints ? " ints" : "");
            CHECK(close_enough(what, gc, s2[k].host, (size_t)C, ints && k == 1 ? 0 : t == TK_BF16 ? 1e-4 : 1e-5));
        }
        free(hdx2), free(hdz2), free(dg2), free(db2);
    }
    void *dev[] = {dgm, dbt, drm, drv, dsm, dsi, ddg, ddb, dy_, ddx, ddz, dye, ws, dx, dr, ddy, ddy2};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    void *host[] = {x, r, dy, dy2, gamma, beta, rm, rv, hx, hr, hdy, hdy2, rm_ref, rv_ref, sm_ref, si_ref, dg_ref,
                    db_ref, hy, hdxo, hdz, hye, got, ref, gc, hyd, hdxd, hdzd, dgd, dbd};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
}

// tk_bn_fwd_train_sums: the statistics from given per-channel sums (computed here in fp64 from x and
// rounded to fp32, as a fused convolution hands them over); the kernel against its reference (the
// same formula: y, mean, invstd and the running statistics within the type's tolerance, exact on
// small integers), and the reference against the two-pass tk_bn_fwd_train_ref (within 1e-5: the
// one-pass variance on inputs whose mean is about their standard deviation).
static void bn_sums_case(int64_t M, int C, tk_dtype t, int relu, int res, int ints, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const size_t n = (size_t)M * C, es = tk_dtype_size(t), cb = (size_t)C * 4;
    float *x = gt_host(n * 4), *r = rand_host(n, ints);
    if (ints) gt_fill(x, n, -2, 5, 1);
    else gt_fill(x, n, -0.5f, 2.5f, 0);
    gt_round(x, n, t), gt_round(r, n, t);
    float *gamma = rand_host((size_t)C, 0), *beta = rand_host((size_t)C, 0), *rm = rand_host((size_t)C, 0),
          *rv = gt_host(cb), *sums = gt_host(2 * cb);
    gt_fill(rv, (size_t)C, 0.5f, 1.5f, 0);
    double *sd = calloc((size_t)2 * C, sizeof *sd);
    for (size_t i = 0; i < n; i++) sd[i % C] += x[i], sd[C + i % C] += (double)x[i] * x[i];
    for (int k = 0; k < 2 * C; k++) sums[k] = (float)sd[k];
    void *hx = gt_host(n * es), *hr = gt_host(n * es), *hy = gt_host(n * es), *hy2 = gt_host(n * es);
    void *dx = gt_dev(n * es), *dr = gt_dev(n * es), *dy = gt_dev(n * es);
    gt_up_as(dx, x, n, t), gt_up_as(dr, r, n, t);
    gt_down(hx, dx, n * es), gt_down(hr, dr, n * es);
    // host: from the sums, and two-pass
    float *ref[2][4];
    for (int a = 0; a < 2; a++)
        for (int k = 0; k < 4; k++) ref[a][k] = gt_host(cb);
    for (int a = 0; a < 2; a++) memcpy(ref[a][0], rm, cb), memcpy(ref[a][1], rv, cb);
    const float eps = 1e-5f, mom = 0.1f;
    CHECK_EQ_INT(tk_bn_fwd_train_sums_ref(t, hx, M, C, sums, sums + C, gamma, beta, res ? hr : NULL, relu, eps, mom,
                                          ref[0][0], ref[0][1], ref[0][2], ref[0][3], hy, &e), 0);
    CHECK_EQ_INT(tk_bn_fwd_train_ref(t, hx, M, C, gamma, beta, res ? hr : NULL, relu, eps, mom, ref[1][0], ref[1][1],
                                     ref[1][2], ref[1][3], hy2, &e), 0);
    // device
    float *dev[7];
    for (int k = 0; k < 7; k++) dev[k] = gt_dev(k == 6 ? 2 * cb : cb);
    gt_up(dev[0], rm, cb), gt_up(dev[1], rv, cb), gt_up(dev[4], gamma, cb), gt_up(dev[5], beta, cb),
        gt_up(dev[6], sums, 2 * cb);
    void *ws = gt_dev(tk_bn_ws_bytes(TK_BACKEND_CUDA, M, C));
    gt_poison(dy, n * es, 0xff);
    CHECK_EQ_INT(tk_bn_fwd_train_sums(gt_ctx_, t, dx, M, C, dev[6], dev[6] + C, dev[4], dev[5], res ? dr : NULL, relu,
                                      eps, mom, dev[0], dev[1], dev[2], dev[3], dy, ws, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    float *got = gt_host(n * 4), *want = gt_host(n * 4), *gc = gt_host(cb);
    char what[96];
    const double tol = t == TK_BF16 ? 1e-2 : 1e-5;
    // the reference from the sums against the two-pass reference
    float *one = gt_host(n * 4);
    for (size_t i = 0; i < n; i++) {
        one[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hy)[i]) : ((float *)hy)[i];
        want[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hy2)[i]) : ((float *)hy2)[i];
    }
    snprintf(what, sizeof what, "bn sums y %s M%lld C%d%s%s%s ref vs two-pass", tk_dtype_name(t), (long long)M, C,
             relu ? " relu" : "", res ? " res" : "", ints ? " ints" : "");
    CHECK(close_enough(what, one, want, n, ints ? 0 : tol));
    free(one), free(hy2);
    gt_down_as(got, dy, n, t);
    // the kernel against its reference
    for (size_t i = 0; i < n; i++) want[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hy)[i]) : ((float *)hy)[i];
    snprintf(what, sizeof what, "bn sums y %s M%lld C%d%s%s%s", tk_dtype_name(t), (long long)M, C, relu ? " relu" : "",
             res ? " res" : "", ints ? " ints" : "");
    CHECK(close_enough(what, got, want, n, ints ? 0 : tol));
    const char *names[4] = {"running mean", "running var", "mean", "invstd"};
    for (int k = 0; k < 4; k++) {
        gt_down(gc, dev[k], cb);
        snprintf(what, sizeof what, "bn sums %s %s M%lld C%d%s", names[k], tk_dtype_name(t), (long long)M, C,
                 ints ? " ints" : "");
        CHECK(close_enough(what, gc, ref[0][k], (size_t)C, ints ? 0 : 1e-5));
        snprintf(what, sizeof what, "bn sums %s %s M%lld C%d%s vs two-pass", names[k], tk_dtype_name(t), (long long)M,
                 C, ints ? " ints" : "");
        CHECK(close_enough(what, ref[0][k], ref[1][k], (size_t)C, ints ? 0 : 1e-5));
    }
    for (int k = 0; k < 7; k++) tk_free(gt_ctx_, dev[k]);
    void *dv[] = {dx, dr, dy, ws};
    for (int k = 0; k < 4; k++) tk_free(gt_ctx_, dv[k]);
    for (int a = 0; a < 2; a++)
        for (int k = 0; k < 4; k++) free(ref[a][k]);
    void *host[] = {x, r, gamma, beta, rm, rv, sums, sd, hx, hr, hy, got, want, gc};
    for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
}

TK_TEST(bn_sums_vs_reference) {
    for (int tt = 0; tt < 2; tt++) {
        tk_dtype t = tt ? TK_BF16 : TK_F32;
        bn_sums_case(1000, 64, t, 1, 0, 0, tk_failed_);   // vector path, ReLU
        bn_sums_case(2000, 256, t, 1, 1, 0, tk_failed_);  // residual + ReLU
        bn_sums_case(37, 3, t, 0, 0, 0, tk_failed_);      // scalar path
        bn_sums_case(300, 2056, t, 1, 1, 0, tk_failed_);  // more channels than a block's threads
        bn_sums_case(1024, 64, t, 1, 1, 1, tk_failed_);   // small integers: exact
    }
}

TK_TEST(bn_vs_reference) {
    for (int tt = 0; tt < 2; tt++) {
        tk_dtype t = tt ? TK_BF16 : TK_F32;
        bn_case(1000, 64, t, 1, 0, 0, tk_failed_);      // vector path, ReLU
        bn_case(2000, 256, t, 1, 1, 0, tk_failed_);     // residual + ReLU
        bn_case(37, 3, t, 0, 0, 0, tk_failed_);         // scalar path, odd channels
        bn_case(100003, 32, t, 1, 1, 0, tk_failed_);    // many row groups (G capped at 1024)
        bn_case(6, 2048, t, 0, 1, 0, tk_failed_);       // ResNet-50's last stage at tiny M
        bn_case(300, 2056, t, 1, 1, 0, tk_failed_);     // a last tile of one vector (bf16: 257 vectors)
        bn_case(1024, 64, t, 1, 1, 1, tk_failed_);      // small integers: exact
        bn_case(4096, 5, t, 1, 0, 1, tk_failed_);       // small integers, scalar path
        bn_case(262144, 48, t, 0, 1, 1, tk_failed_);    // small integers, G capped, every final lane busy
    }
}

// ---- pooling ----

TK_TEST(pool_vs_reference) {
    tk_err e = {0};
    // C 24: 16-byte vectors of channels in both types; C 6: one channel per thread. Shapes: ResNet's
    // 3x3/2 pad 1 windows (the tiled kernels) with odd H and even W, even H and odd W (a partial
    // last row tile, a last column window of one input column) and without dy2; other windows
    // (the general kernels)
    static const int shapes[][6] = {{17, 14, 3, 2, 1, 1}, {12, 15, 3, 2, 1, 0}, {10, 9, 3, 1, 1, 1}, {9, 8, 2, 2, 0, 1}};
    for (int sh = 0; sh < 4; sh++)
    for (int tt = 0; tt < 4; tt++)
        for (int ints = 0; ints < 2; ints++) {
            const tk_dtype t = tt & 1 ? TK_BF16 : TK_F32;
            const int N = 3, H = shapes[sh][0], W = shapes[sh][1], C = tt < 2 ? 24 : 6, R = shapes[sh][2],
                      st = shapes[sh][3], pad = shapes[sh][4], two = shapes[sh][5];
            const int P = tk_pool_out(H, R, st, pad), Q = tk_pool_out(W, R, st, pad);
            const size_t nx = (size_t)N * H * W * C, ny = (size_t)N * P * Q * C, es = tk_dtype_size(t);
            float *x = rand_host(nx, ints), *dy = rand_host(ny, 0), *dy2 = rand_host(ny, 0);
            gt_round(x, nx, t), gt_round(dy, ny, t), gt_round(dy2, ny, t);
            void *hx = gt_host(nx * es), *hdy = gt_host(ny * es), *hdy2 = gt_host(ny * es), *hy = gt_host(ny * es),
                 *hdx = gt_host(nx * es);
            uint8_t *hidx = gt_host(ny), *gidx = gt_host(ny);
            void *dx = gt_dev(nx * es), *ddy = gt_dev(ny * es), *ddy2 = gt_dev(ny * es), *dyo = gt_dev(ny * es),
                 *ddx = gt_dev(nx * es);
            uint8_t *didx = gt_dev(ny);
            gt_up_as(dx, x, nx, t), gt_up_as(ddy, dy, ny, t), gt_up_as(ddy2, dy2, ny, t);
            gt_down(hx, dx, nx * es), gt_down(hdy, ddy, ny * es), gt_down(hdy2, ddy2, ny * es);
            CHECK_EQ_INT(tk_maxpool_fwd_ref(t, hx, N, H, W, C, R, st, pad, hy, hidx, &e), 0);
            CHECK_EQ_INT(tk_maxpool_bwd_ref(t, hdy, two ? hdy2 : NULL, hidx, N, H, W, C, R, st, pad, hdx, &e), 0);
            gt_poison(dyo, ny * es, 0xff), gt_poison(ddx, nx * es, 0xff);
            CHECK_EQ_INT(tk_maxpool_fwd(gt_ctx_, t, dx, N, H, W, C, R, st, pad, dyo, didx, &e), 0);
            CHECK_EQ_INT(tk_maxpool_bwd(gt_ctx_, t, ddy, two ? ddy2 : NULL, didx, N, H, W, C, R, st, pad, ddx, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            gt_down(gidx, didx, ny);
            CHECK(memcmp(gidx, hidx, ny) == 0); // ties (small integers) resolved alike
            // the same inputs and summation order on both sides: bit-exact
            float *a = gt_host(ny * 4), *b = gt_host(ny * 4), *c2 = gt_host(nx * 4), *d = gt_host(nx * 4);
            gt_down_as(a, dyo, ny, t), gt_down_as(c2, ddx, nx, t);
            for (size_t i = 0; i < ny; i++) b[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hy)[i]) : ((float *)hy)[i];
            for (size_t i = 0; i < nx; i++) d[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hdx)[i]) : ((float *)hdx)[i];
            char what[96];
            snprintf(what, sizeof what, "maxpool fwd %dx%d %d/%d %s C%d%s", H, W, R, st, tk_dtype_name(t), C,
                     ints ? " ints" : "");
            CHECK(close_enough(what, a, b, ny, 0));
            snprintf(what, sizeof what, "maxpool bwd %dx%d %d/%d%s %s C%d%s", H, W, R, st, two ? "" : " no dy2",
                     tk_dtype_name(t), C, ints ? " ints" : "");
            CHECK(close_enough(what, c2, d, nx, 0));
            // global average pooling over the same input (HW = H W)
            void *hp = gt_host((size_t)N * C * es), *dp = gt_dev((size_t)N * C * es), *hq = gt_host(nx * es);
            CHECK_EQ_INT(tk_avgpool_fwd_ref(t, hx, N, H * W, C, hp, &e), 0);
            CHECK_EQ_INT(tk_avgpool_fwd(gt_ctx_, t, dx, N, H * W, C, dp, &e), 0);
            CHECK_EQ_INT(tk_avgpool_bwd_ref(t, hp, N, H * W, C, hq, &e), 0);
            CHECK_EQ_INT(tk_avgpool_bwd(gt_ctx_, t, dp, N, H * W, C, ddx, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            gt_down_as(a, dp, (size_t)N * C, t), gt_down_as(c2, ddx, nx, t);
            for (size_t i = 0; i < (size_t)N * C; i++) b[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hp)[i]) : ((float *)hp)[i];
            for (size_t i = 0; i < nx; i++) d[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hq)[i]) : ((float *)hq)[i];
            snprintf(what, sizeof what, "avgpool fwd HW %d %s C%d%s", H * W, tk_dtype_name(t), C, ints ? " ints" : "");
            CHECK(close_enough(what, a, b, (size_t)N * C, 0));
            snprintf(what, sizeof what, "avgpool bwd HW %d %s C%d%s", H * W, tk_dtype_name(t), C, ints ? " ints" : "");
            CHECK(close_enough(what, c2, d, nx, 0));
            void *dev[] = {dx, ddy, ddy2, dyo, ddx, didx, dp};
            for (int i = 0; i < 7; i++) tk_free(gt_ctx_, dev[i]);
            void *host[] = {x, dy, dy2, hx, hdy, hdy2, hy, hdx, hidx, gidx, a, b, c2, d, hp, hq};
            for (int i = 0; i < 16; i++) free(host[i]);
        }
}

// ---- loss and accuracy ----

// Max pooling with BN + ReLU before it (tk_maxpool_bn_fwd): against its reference (the same fp32
// operations in the same order: bit-exact, and the same first maxima), and on the device against
// what it replaces in the step, BN's training forward writing its output and the plain max pool
// of that (bit-identical y and idx), with the statistics alone (y NULL) matching the full forward's.
TK_TEST(pool_bn_vs_reference) {
    tk_err e = {0};
    for (int sh = 0; sh < 2; sh++) // odd H, even W; even H, odd W
    for (int tt = 0; tt < 4; tt++)
        for (int ints = 0; ints < 2; ints++) {
            const tk_dtype t = tt & 1 ? TK_BF16 : TK_F32;
            const int N = 3, H = sh ? 12 : 17, W = sh ? 15 : 14, C = tt < 2 ? 24 : 6, R = 3, st = 2, pad = 1;
            const int P = tk_pool_out(H, R, st, pad), Q = tk_pool_out(W, R, st, pad);
            const size_t nx = (size_t)N * H * W * C, ny = (size_t)N * P * Q * C, es = tk_dtype_size(t), cb = (size_t)C * 4;
            const int64_t M = (int64_t)N * H * W;
            float *x = rand_host(nx, ints), *g = rand_host((size_t)C, ints), *bt = rand_host((size_t)C, ints),
                  *mu = rand_host((size_t)C, ints), *is = gt_host(cb);
            gt_fill(is, (size_t)C, 0.5f, 2.0f, 0);
            if (ints)
                for (int c = 0; c < C; c++) is[c] = c % 2 ? 0.5f : 1.0f; // exact scales and shifts
            gt_round(x, nx, t);
            void *hx = gt_host(nx * es), *hy = gt_host(ny * es), *gy = gt_host(ny * es), *gy2 = gt_host(ny * es);
            uint8_t *hidx = gt_host(ny), *gidx = gt_host(ny), *gidx2 = gt_host(ny);
            void *dx = gt_dev(nx * es), *dy = gt_dev(ny * es), *dz = gt_dev(nx * es);
            uint8_t *didx = gt_dev(ny);
            float *dp = gt_dev(8 * cb);
            gt_up_as(dx, x, nx, t), gt_down(hx, dx, nx * es);
            gt_up(dp, g, cb), gt_up(dp + C, bt, cb), gt_up(dp + 2 * C, mu, cb), gt_up(dp + 3 * C, is, cb);
            const tk_pool_bn hb = {g, bt, mu, is}, db = {dp, dp + C, dp + 2 * C, dp + 3 * C};
            CHECK_EQ_INT(tk_maxpool_bn_fwd_ref(t, hx, hb, N, H, W, C, R, st, pad, hy, hidx, &e), 0);
            gt_poison(dy, ny * es, 0xff);
            CHECK_EQ_INT(tk_maxpool_bn_fwd(gt_ctx_, t, dx, db, N, H, W, C, R, st, pad, dy, didx, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            gt_down(gy, dy, ny * es), gt_down(gidx, didx, ny);
            printf("# table resnet maxpool+bn fwd %dx%d %s C%d%s vs reference: %s\n", H, W, tk_dtype_name(t), C,
                   ints ? " ints" : "",
                   memcmp(gy, hy, ny * es) == 0 && memcmp(gidx, hidx, ny) == 0 ? "bit-exact" : "DIFFER  <-- FAIL");
            CHECK(memcmp(gy, hy, ny * es) == 0);
            CHECK(memcmp(gidx, hidx, ny) == 0);
            // on the device: BN's forward (x's own statistics) + plain pool vs statistics alone + the fused pool
            float *rm = dp + 4 * C, *rv = dp + 5 * C, *sm = dp + 6 * C, *si = dp + 7 * C;
            void *ws = gt_dev(tk_bn_ws_bytes(TK_BACKEND_CUDA, M, C));
            float *st1 = gt_host(4 * cb), *st2 = gt_host(4 * cb);
            gt_up(rm, mu, cb), gt_up(rv, is, cb);
            CHECK_EQ_INT(tk_bn_fwd_train(gt_ctx_, t, dx, M, C, dp, dp + C, NULL, 1, 1e-5f, 0.1f, rm, rv, sm, si, dz, ws, &e),
                         0);
            CHECK_EQ_INT(tk_maxpool_fwd(gt_ctx_, t, dz, N, H, W, C, R, st, pad, dy, didx, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            gt_down(gy, dy, ny * es), gt_down(gidx, didx, ny), gt_down(st1, rm, 4 * cb);
            gt_up(rm, mu, cb), gt_up(rv, is, cb);
            gt_poison(dy, ny * es, 0xff), gt_poison(sm, 2 * cb, 0xff);
            CHECK_EQ_INT(tk_bn_fwd_train(gt_ctx_, t, dx, M, C, dp, dp + C, NULL, 1, 1e-5f, 0.1f, rm, rv, sm, si, NULL, ws,
                                         &e), 0);
            const tk_pool_bn sb = {dp, dp + C, sm, si};
            CHECK_EQ_INT(tk_maxpool_bn_fwd(gt_ctx_, t, dx, sb, N, H, W, C, R, st, pad, dy, didx, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            gt_down(gy2, dy, ny * es), gt_down(gidx2, didx, ny), gt_down(st2, rm, 4 * cb);
            const int same = memcmp(gy, gy2, ny * es) == 0 && memcmp(gidx, gidx2, ny) == 0 && memcmp(st1, st2, 4 * cb) == 0;
            printf("# table resnet maxpool+bn fwd %dx%d %s C%d%s vs bn fwd + maxpool: %s\n", H, W, tk_dtype_name(t),
                   C, ints ? " ints" : "", same ? "bit-identical" : "DIFFER  <-- FAIL");
            CHECK(same);
            void *dev[] = {dx, dy, dz, didx, dp, ws};
            for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
            void *host[] = {x, g, bt, mu, is, hx, hy, gy, gy2, hidx, gidx, gidx2, st1, st2};
            for (int i = 0; i < 14; i++) free(host[i]);
        }
}

// Pooling at ResNet-50's shapes, batch 256, bf16 (TK_BENCH=1): the stem's max pool with the BN
// apply inside (112x112x64 -> 56x56x64) and its backward with two incoming gradients, as the step
// calls them; the head's average pool (7x7x2048) both ways. Prints each one's median time and the
// bytes its kernels must move per second.
typedef struct {
    int what;
    void *x, *y, *dy, *dy2, *dx, *f, *df;
    uint8_t *idx;
    tk_pool_bn bn;
} pool_bench_arg;

enum { PB_N = 256, PB_H = 112, PB_C = 64, PB_HW = 49, PB_F = 2048 };

static void pool_bench_fn(void *p) {
    pool_bench_arg *a = p;
    tk_err e = {0};
    int rc;
    if (a->what == 0) rc = tk_maxpool_bn_fwd(gt_ctx_, TK_BF16, a->x, a->bn, PB_N, PB_H, PB_H, PB_C, 3, 2, 1, a->y, a->idx, &e);
    else if (a->what == 1)
        rc = tk_maxpool_bwd(gt_ctx_, TK_BF16, a->dy, a->dy2, a->idx, PB_N, PB_H, PB_H, PB_C, 3, 2, 1, a->dx, &e);
    else if (a->what == 2) rc = tk_avgpool_fwd(gt_ctx_, TK_BF16, a->x, PB_N, PB_HW, PB_F, a->f, &e);
    else rc = tk_avgpool_bwd(gt_ctx_, TK_BF16, a->df, PB_N, PB_HW, PB_F, a->dx, &e);
    if (rc) gt_die_("pool bench", &e);
}

// n bf16 values of a random chunk repeated.
static void *bench_fill(size_t n) {
    const size_t k = (size_t)1 << 22;
    float *h = rand_host(k, 0);
    uint8_t *d = gt_dev(n * 2);
    gt_up_as(d, h, n < k ? n : k, TK_BF16);
    for (size_t o = k; o < n; o += k)
        if (cudaMemcpy(d + o * 2, d, (n - o < k ? n - o : k) * 2, cudaMemcpyDeviceToDevice) != cudaSuccess)
            gt_die_("cudaMemcpy", NULL);
    free(h);
    return d;
}

TK_TEST(pool_bench) {
    if (!getenv("TK_BENCH")) {
        printf("# TK_BENCH=1 runs this benchmark\n");
        return;
    }
    const int P = tk_pool_out(PB_H, 3, 2, 1);
    const size_t nx = (size_t)PB_N * PB_H * PB_H * PB_C, ny = (size_t)PB_N * P * P * PB_C, nf = (size_t)PB_N * PB_F;
    pool_bench_arg a = {0};
    a.x = bench_fill(nx), a.dy = bench_fill(ny), a.dy2 = bench_fill(ny), a.df = bench_fill(nf);
    a.y = gt_dev(ny * 2), a.dx = gt_dev(nx * 2), a.f = gt_dev(nf * 2), a.idx = gt_dev(ny);
    float *prm = rand_host(4 * PB_C, 0), *dprm = gt_dev(4 * PB_C * 4);
    for (int c = 0; c < PB_C; c++) prm[3 * PB_C + c] = 1.0f + prm[3 * PB_C + c] * 0.5f; // invstd > 0
    gt_up(dprm, prm, 4 * PB_C * 4);
    a.bn = (tk_pool_bn){dprm, dprm + PB_C, dprm + 2 * PB_C, dprm + 3 * PB_C};
    const char *names[4] = {"max pool+BN fwd", "max pool bwd (dy + dy2)", "avg pool fwd", "avg pool bwd"};
    const double bytes[4] = {nx * 2.0 + ny * 3.0, ny * 5.0 + nx * 2.0, (size_t)PB_N * PB_HW * PB_F * 2.0 + nf * 2.0,
                             nf * 2.0 + (size_t)PB_N * PB_HW * PB_F * 2.0};
    for (int w = 0; w < 4; w++) {
        a.what = w;
        const double ms = gt_time_ms(pool_bench_fn, &a, 20);
        printf("# table resnet pool bench b=%d bf16 %-24s %7.1f us (%5.0f GB/s)\n", PB_N, names[w], ms * 1e3,
               bytes[w] / ms / 1e6);
    }
    tk_err e = {0};
    CHECK_EQ_INT(gt_sync(&e), 0);
    void *dev[] = {a.x, a.y, a.dy, a.dy2, a.dx, a.f, a.df, a.idx, dprm};
    for (int i = 0; i < 9; i++) tk_free(gt_ctx_, dev[i]);
    free(prm);
}

// A block's last BN with the shortcut BN applied inside it (tk_bn_fwd_train_res_bn): on the device
// against the passes it replaces (the shortcut BN's full forward writing its output, then the
// last BN with that output as its residual): bit-identical y, mask bits and statistics; and
// against its reference within the type's tolerance.
TK_TEST(bn_res_bn_vs_reference) {
    tk_err e = {0};
    const int64_t Ms[2] = {1000, 37};
    const int Cs[2] = {64, 12};
    for (int tt = 0; tt < 2; tt++)
        for (int sh = 0; sh < 2; sh++) {
            const tk_dtype t = tt ? TK_BF16 : TK_F32;
            const int64_t M = Ms[sh];
            const int C = Cs[sh];
            const size_t n = (size_t)M * C, es = tk_dtype_size(t), cb = (size_t)C * 4, nb = (n + 7) / 8;
            float *x = gt_host(n * 4), *r = gt_host(n * 4);
            gt_fill(x, n, -0.5f, 2.5f, 0), gt_fill(r, n, -1.0f, 3.0f, 0);
            gt_round(x, n, t), gt_round(r, n, t);
            float *par = rand_host(8 * (size_t)C, 0); // gamma, beta (x's BN), gamma, beta (r's BN), running x4
            for (int c = 0; c < 4 * C; c++) par[4 * C + c] = c % C * 0.01f + 0.5f;
            void *hx = gt_host(n * es), *hr = gt_host(n * es), *hy = gt_host(n * es), *g1 = gt_host(n * es),
                 *g2 = gt_host(n * es);
            uint8_t *hm = gt_host(nb), *m1 = gt_host(nb), *m2 = gt_host(nb);
            float *hs = gt_host(8 * cb), *s1 = gt_host(8 * cb), *s2 = gt_host(8 * cb);
            void *dx = gt_dev(n * es), *dr = gt_dev(n * es), *dz = gt_dev(n * es), *dy = gt_dev(n * es);
            uint8_t *dm = gt_dev(nb);
            float *dp = gt_dev(16 * cb); // par (8 C), then save mean/invstd of r's BN and x's BN (4 C)
            gt_up_as(dx, x, n, t), gt_up_as(dr, r, n, t), gt_down(hx, dx, n * es), gt_down(hr, dr, n * es);
            const int mask_ok = tk_bn_mask_ok(TK_BACKEND_CUDA, t, C);
            float *P = dp, *Sv = dp + 8 * C; // Sv: r mean, r invstd, x mean, x invstd
            // host reference: r's statistics, then the fused forward
            memcpy(hs, par, 8 * cb);
            CHECK_EQ_INT(tk_bn_fwd_train_ref(t, hr, M, C, par + 2 * C, par + 3 * C, NULL, 0, 1e-5f, 0.1f, hs + 6 * C,
                                             hs + 7 * C, hs, hs + C, NULL, &e), 0);
            const tk_bn_saved hrb = {par + 2 * C, par + 3 * C, hs, hs + C};
            float *hx_rm = gt_host(cb), *hx_rv = gt_host(cb), *hx_sm = gt_host(cb), *hx_si = gt_host(cb);
            memcpy(hx_rm, par + 4 * C, cb), memcpy(hx_rv, par + 5 * C, cb);
            CHECK_EQ_INT(tk_bn_fwd_train_res_bn_ref(t, hx, M, C, par, par + C, hr, hrb, 1, 1e-5f, 0.1f, hx_rm, hx_rv, hx_sm,
                                                    hx_si, hy, mask_ok ? hm : NULL, &e), 0);
            void *ws = gt_dev(tk_bn_ws_bytes(TK_BACKEND_CUDA, M, C));
            for (int way = 0; way < 2; way++) {
                gt_up(P, par, 8 * cb);
                gt_poison(dy, n * es, 0xff), gt_poison(dm, nb, 0x55);
                // r's BN: written out (way 0) or statistics only (way 1)
                CHECK_EQ_INT(tk_bn_fwd_train(gt_ctx_, t, dr, M, C, P + 2 * C, P + 3 * C, NULL, 0, 1e-5f, 0.1f, P + 6 * C,
                                             P + 7 * C, Sv, Sv + C, way ? NULL : dz, ws, &e), 0);
                const tk_bn_saved rb = {P + 2 * C, P + 3 * C, Sv, Sv + C};
                if (way)
                    CHECK_EQ_INT(tk_bn_fwd_train_res_bn(gt_ctx_, t, dx, M, C, P, P + C, dr, rb, 1, 1e-5f, 0.1f, P + 4 * C,
                                                        P + 5 * C, Sv + 2 * C, Sv + 3 * C, dy, mask_ok ? dm : NULL, ws,
                                                        &e), 0);
                else
                    CHECK_EQ_INT(tk_bn_fwd_train_mask(gt_ctx_, t, dx, M, C, P, P + C, dz, 1, 1e-5f, 0.1f, P + 4 * C,
                                                      P + 5 * C, Sv + 2 * C, Sv + 3 * C, dy, mask_ok ? dm : NULL, ws, &e),
                                 0);
                CHECK_EQ_INT(gt_sync(&e), 0);
                gt_down(way ? g2 : g1, dy, n * es), gt_down(way ? m2 : m1, dm, nb), gt_down(way ? s2 : s1, P + 4 * C, 8 * cb);
            }
            const int same = memcmp(g1, g2, n * es) == 0 && (!mask_ok || memcmp(m1, m2, nb) == 0) &&
                             memcmp(s1, s2, 8 * cb) == 0;
            printf("# table resnet bn + shortcut bn %s M%lld C%d vs shortcut bn written + bn: %s%s\n", tk_dtype_name(t),
                   (long long)M, C, same ? "bit-identical" : "DIFFER  <-- FAIL", mask_ok ? " (with mask bits)" : "");
            CHECK(same);
            float *a = gt_host(n * 4), *b = gt_host(n * 4);
            for (size_t i = 0; i < n; i++) {
                a[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)g2)[i]) : ((float *)g2)[i];
                b[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hy)[i]) : ((float *)hy)[i];
            }
            char what[96];
            snprintf(what, sizeof what, "bn + shortcut bn y %s M%lld C%d vs reference", tk_dtype_name(t), (long long)M, C);
            CHECK(close_enough(what, a, b, n, t == TK_BF16 ? 1e-2 : 1e-5));
            if (mask_ok) { // the bits are y > 0 of the device's own y
                int ok = 1;
                for (size_t i = 0; i < n; i++) ok &= (m2[i / 8] >> (i % 8) & 1) == (a[i] > 0);
                CHECK(ok);
            }
            void *dev[] = {dx, dr, dz, dy, dm, dp, ws};
            for (int i = 0; i < 7; i++) tk_free(gt_ctx_, dev[i]);
            void *host[] = {x, r, par, hx, hr, hy, g1, g2, hm, m1, m2, hs, s1, s2, hx_rm, hx_rv, hx_sm, hx_si, a, b};
            for (size_t i = 0; i < sizeof host / sizeof *host; i++) free(host[i]);
        }
}

TK_TEST(xent_top1_vs_reference) {
    tk_err e = {0};
    const int B = 67, K = 1000, N = 256;
    for (int tt = 0; tt < 2; tt++) {
        const tk_dtype t = tt ? TK_BF16 : TK_F32;
        float *z = rand_host((size_t)B * K, 0), *zi = rand_host((size_t)B * K, 1);
        for (size_t i = 0; i < (size_t)B * K; i++) z[i] *= 8;
        int32_t *lab = gt_host((size_t)B * 4);
        for (int b = 0; b < B; b++) lab[b] = (int32_t)(gt_u32((uint64_t)b) % K);
        lab[3] = -1; // padding: no loss, no gradient, never a hit
        lab[5] = K;  // out of range: likewise
        const size_t es = tk_dtype_size(t);
        void *hdz = gt_host((size_t)B * K * es);
        double acc_ref[2] = {0.25, 1}, acc[2];
        CHECK_EQ_INT(tk_xent_smooth_ref(z, lab, B, K, N, 0.1f, t, hdz, acc_ref, &e), 0);
        float *dz = gt_dev((size_t)B * K * 4), *dzi = gt_dev((size_t)B * K * 4);
        int32_t *dl = gt_dev((size_t)B * 4);
        void *ddz = gt_dev((size_t)B * K * es), *ws = gt_dev(tk_xent_smooth_ws_bytes(TK_BACKEND_CUDA, B));
        double *dacc = gt_dev(16), init[2] = {0.25, 1};
        int64_t *cnt = gt_dev(8), c0 = 7, cg, cr = 7;
        gt_up(dz, z, (size_t)B * K * 4), gt_up(dzi, zi, (size_t)B * K * 4), gt_up(dl, lab, (size_t)B * 4);
        gt_up(dacc, init, 16), gt_up(cnt, &c0, 8);
        gt_poison(ddz, (size_t)B * K * es, 0xff);
        CHECK_EQ_INT(tk_xent_smooth(gt_ctx_, dz, dl, B, K, N, 0.1f, t, ddz, dacc, ws, &e), 0);
        CHECK_EQ_INT(gt_sync(&e), 0);
        gt_down(acc, dacc, 16);
        float *got = gt_host((size_t)B * K * 4), *ref = gt_host((size_t)B * K * 4);
        gt_down_as(got, ddz, (size_t)B * K, t);
        for (size_t i = 0; i < (size_t)B * K; i++)
            ref[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hdz)[i]) : ((float *)hdz)[i];
        char what[64];
        snprintf(what, sizeof what, "xent dz %s", tk_dtype_name(t));
        CHECK(close_enough(what, got, ref, (size_t)B * K, t == TK_BF16 ? 1e-2 : 1e-6));
        printf("# table resnet xent loss %.17g vs %.17g\n", acc[0], acc_ref[0]);
        CHECK(fabs(acc[0] - acc_ref[0]) <= 1e-12 * fabs(acc_ref[0]) && acc[1] == 2);
        // top-1 on random logits and on small integers (ties: the first index)
        for (int ints = 0; ints < 2; ints++) {
            cr = cg = 7;
            gt_up(cnt, &c0, 8);
            const float *zz = ints ? zi : z;
            for (int b = 0; b < B; b += 2) lab[b] = ints ? 0 : lab[b]; // many ties at index 0 on integers
            gt_up(dl, lab, (size_t)B * 4);
            CHECK_EQ_INT(tk_top1_count_ref(zz, lab, B, K, &cr, &e), 0);
            CHECK_EQ_INT(tk_top1_count(gt_ctx_, ints ? dzi : dz, dl, B, K, cnt, &e), 0);
            gt_down(&cg, cnt, 8);
            printf("# table resnet top1 %s: %lld vs %lld hits\n", ints ? "ints" : "random", (long long)cg - 7,
                   (long long)cr - 7);
            CHECK_EQ_INT(cg, cr);
        }
        void *dev[] = {dz, dzi, dl, ddz, ws, dacc, cnt};
        for (int i = 0; i < 7; i++) tk_free(gt_ctx_, dev[i]);
        free(z), free(zi), free(lab), free(hdz), free(got), free(ref);
    }
}

// ---- the input normalization ----

TK_TEST(img_normalize_vs_reference) {
    tk_err e = {0};
    const int64_t npix = 3 * 29 * 31;
    uint8_t *src = gt_host((size_t)npix * 3);
    for (int64_t i = 0; i < npix * 3; i++) src[i] = (uint8_t)(gt_u32((uint64_t)i) >> 24);
    const tk_img_norm n = {{123.675f, 116.28f, 103.53f}, {58.395f, 57.12f, 57.375f}};
    uint8_t *dsrc = gt_dev((size_t)npix * 3);
    gt_up(dsrc, src, (size_t)npix * 3);
    for (int tt = 0; tt < 2; tt++)
        for (int cin = 3; cin <= 8; cin += cin == 3 ? 1 : 4) {
            const tk_dtype t = tt ? TK_BF16 : TK_F32;
            const size_t no = (size_t)npix * cin, es = tk_dtype_size(t);
            void *href = gt_host(no * es), *dd = gt_dev(no * es);
            float *ref = gt_host(no * 4), *got = gt_host(no * 4);
            CHECK_EQ_INT(tk_img_normalize_ref(src, npix, n, t, href, cin, &e), 0);
            gt_poison(dd, no * es, 0xff);
            CHECK_EQ_INT(tk_img_normalize(gt_ctx_, dsrc, npix, n, t, dd, cin, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            gt_down_as(got, dd, no, t);
            for (size_t i = 0; i < no; i++) ref[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)href)[i]) : ((float *)href)[i];
            char what[64];
            snprintf(what, sizeof what, "img_normalize %s cin %d", tk_dtype_name(t), cin);
            CHECK(close_enough(what, got, ref, no, 0)); // the same fp32 division on both sides
            tk_free(gt_ctx_, dd);
            free(href), free(ref), free(got);
        }
    tk_free(gt_ctx_, dsrc);
    free(src);
}

// kernels/stem_s2d.h's three maps against their references, exactly (the same fp32 division and
// rounding, pure index maps otherwise): the input at sizes 32 and 224 (a ResNet-50 image), the
// filter and its gradient at K 64; then the stem as cuDNN runs it (the 4x4 convolution over the
// device's own maps) against the 7x7/2 reference convolution of the plain normalized image.
TK_TEST(stem_s2d_vs_reference) {
    tk_err e = {0};
    const tk_img_norm n = {{123.675f, 116.28f, 103.53f}, {58.395f, 57.12f, 57.375f}};
    for (int tt = 0; tt < 2; tt++) {
        const tk_dtype t = tt ? TK_BF16 : TK_F32;
        const size_t es = tk_dtype_size(t);
        for (int S = 32; S <= 224; S += 192) {
            const int N = S == 32 ? 3 : 1, Hs = tk_s2d_side(S);
            const size_t npx = (size_t)N * S * S * 3, no = (size_t)N * Hs * Hs * TK_S2D_C;
            uint8_t *src = gt_host(npx), *dsrc = gt_dev(npx);
            for (size_t i = 0; i < npx; i++) src[i] = (uint8_t)(gt_u32((uint64_t)i) >> 24);
            gt_up(dsrc, src, npx);
            void *href = gt_host(no * es), *dd = gt_dev(no * es);
            float *ref = gt_host(no * 4);
            CHECK_EQ_INT(tk_stem_s2d_input_ref(src, N, S, n, t, href, &e), 0);
            gt_poison(dd, no * es, 0xff);
            CHECK_EQ_INT(tk_stem_s2d_input(gt_ctx_, dsrc, N, S, n, t, dd, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            float *got = gt_host_from(dd, no, t);
            for (size_t i = 0; i < no; i++) ref[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)href)[i]) : ((float *)href)[i];
            char what[64];
            snprintf(what, sizeof what, "stem_s2d_input %s S %d", tk_dtype_name(t), S);
            CHECK(close_enough(what, got, ref, no, 0));
            tk_free(gt_ctx_, dd), tk_free(gt_ctx_, dsrc);
            free(src), free(href), free(ref), free(got);
        }
        const int K = 64, nws = K * 4 * 4 * TK_S2D_C;
        float *w = gt_host((size_t)K * 147 * 4), *dws = gt_host((size_t)nws * 4);
        gt_fill(w, (size_t)K * 147, -1, 1, 0);
        gt_fill(dws, (size_t)nws, -1, 1, 0);
        float *dw_d = gt_dev((size_t)K * 147 * 4);
        void *dwsd = gt_dev_from(dws, (size_t)nws, t), *wsd = gt_dev((size_t)nws * es), *wsr = gt_host((size_t)nws * es);
        gt_up(dw_d, w, (size_t)K * 147 * 4);
        gt_poison(wsd, (size_t)nws * es, 0xff);
        CHECK_EQ_INT(tk_stem_s2d_weight(gt_ctx_, dw_d, K, t, wsd, &e), 0);
        CHECK_EQ_INT(tk_stem_s2d_weight_ref(w, K, t, wsr, &e), 0);
        CHECK_EQ_INT(gt_sync(&e), 0);
        float *got = gt_host_from(wsd, (size_t)nws, t), *ref = gt_host((size_t)nws * 4);
        for (int i = 0; i < nws; i++) ref[i] = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)wsr)[i]) : ((float *)wsr)[i];
        CHECK(close_enough(t == TK_BF16 ? "stem_s2d_weight bf16" : "stem_s2d_weight f32", got, ref, (size_t)nws, 0));
        float *dwr = gt_host((size_t)K * 147 * 4), *dwg = gt_host((size_t)K * 147 * 4);
        gt_poison(dw_d, (size_t)K * 147 * 4, 0xff);
        CHECK_EQ_INT(tk_stem_s2d_wgrad(gt_ctx_, dwsd, K, t, dw_d, &e), 0);
        CHECK_EQ_INT(tk_stem_s2d_wgrad_ref(dws, K, TK_F32, dwr, &e), 0); // dws already rounded to t
        gt_down(dwg, dw_d, (size_t)K * 147 * 4);
        CHECK(close_enough(t == TK_BF16 ? "stem_s2d_wgrad bf16" : "stem_s2d_wgrad f32", dwg, dwr, (size_t)K * 147, 0));
        tk_free(gt_ctx_, dw_d), tk_free(gt_ctx_, dwsd), tk_free(gt_ctx_, wsd);
        free(w), free(dws), free(wsr), free(got), free(ref), free(dwr), free(dwg);
    }
    // the stem end to end on the device (batch 2, 32x32, K 16) vs the 7x7/2 reference
    tk_cudnn *h = NULL;
    if (tk_cudnn_create(gt_ctx_, 0, &h, &e)) {
        printf("# no cuDNN: %s\n", e.what);
        return;
    }
    for (int tt = 0; tt < 2; tt++) {
        const tk_dtype t = tt ? TK_BF16 : TK_F32;
        const int N = 2, S = 32, K = 16, Hs = tk_s2d_side(S);
        tk_conv_shape sd, ss;
        CHECK_EQ_INT(tk_conv_shape_init(&sd, N, S, S, 3, K, 7, 7, 2, 3, &e), 0);
        CHECK_EQ_INT(tk_conv_shape_init(&ss, N, Hs, Hs, TK_S2D_C, K, 4, 4, 1, 0, &e), 0);
        CHECK_EQ_INT(tk_cudnn_plan(h, TK_CONV_FWD, &ss, t, &e), 0);
        size_t nws = tk_cudnn_ws_bytes(h);
        void *ws = nws ? gt_dev(nws) : NULL;
        tk_cudnn_set_ws(h, ws, nws);
        const size_t npx = (size_t)N * S * S * 3, ny = (size_t)tk_conv_y_numel(&sd);
        uint8_t *src = gt_host(npx), *dsrc = gt_dev(npx);
        for (size_t i = 0; i < npx; i++) src[i] = (uint8_t)(gt_u32((uint64_t)i + 7) >> 24);
        gt_up(dsrc, src, npx);
        float *w = gt_host((size_t)K * 147 * 4), *x = gt_host(npx * 4), *ref = gt_host(ny * 4);
        gt_fill(w, (size_t)K * 147, -0.2f, 0.2f, 0);
        gt_round(w, (size_t)K * 147, t); // the filter the device rounds to t
        float *wd = gt_dev((size_t)K * 147 * 4);
        gt_up(wd, w, (size_t)K * 147 * 4);
        void *xs = gt_dev((size_t)tk_conv_x_numel(&ss) * tk_dtype_size(t)), *w16 = gt_dev((size_t)tk_conv_w_numel(&ss) * tk_dtype_size(t)),
             *y = gt_dev(ny * tk_dtype_size(t));
        CHECK_EQ_INT(tk_stem_s2d_input(gt_ctx_, dsrc, N, S, n, t, xs, &e), 0);
        CHECK_EQ_INT(tk_stem_s2d_weight(gt_ctx_, wd, K, t, w16, &e), 0);
        CHECK_EQ_INT(tk_conv(gt_ctx_, h, TK_CONV_FWD, &ss, t, xs, w16, y, &e), 0);
        CHECK_EQ_INT(gt_sync(&e), 0);
        float *got = gt_host_from(y, ny, t);
        CHECK_EQ_INT(tk_img_normalize_ref(src, (int64_t)N * S * S, n, TK_F32, x, 3, &e), 0);
        gt_round(x, npx, t);
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &sd, TK_F32, x, w, ref, &e), 0);
        gt_round(ref, ny, t);
        CHECK(close_enough(t == TK_BF16 ? "stem s2d conv (cuDNN) vs 7x7/2 ref bf16" : "stem s2d conv (cuDNN) vs 7x7/2 ref f32",
                           got, ref, ny, t == TK_BF16 ? 1e-2 : 1e-5));
        tk_free(gt_ctx_, dsrc), tk_free(gt_ctx_, wd), tk_free(gt_ctx_, xs), tk_free(gt_ctx_, w16), tk_free(gt_ctx_, y);
        if (ws) tk_free(gt_ctx_, ws);
        tk_cudnn_set_ws(h, NULL, 0);
        free(src), free(w), free(x), free(ref), free(got);
    }
    tk_cudnn_destroy(h);
}

// The stem's own convolution kernel (kernels/stem_conv.h) against conv_ref.c at its two shapes,
// 224x224 images (ResNet-50: 115x115x16 -> 112x112x64, 4x4/1, bf16) and 300x300 (SSD300:
// 153x153x16 -> 150x150x64, where the last warp's pixels past column 149 are masked): random
// inputs within bf16's tolerance, and small integers (x, w in -2..2: every sum exact in fp32, so
// the bf16 results equal the reference's bit for bit). Batches of 1 and 3 images (fewer row pairs
// than blocks: one each) and 7 or 9 (the persistent blocks take 2 or 3 row pairs in turn, across
// images: the double-buffered loads). y is poisoned first (0xffff, a bf16 NaN) and sits between
// two poisoned guard regions: every output written (no NaN left), nothing before or after it.
enum { STEM_GUARD = 4096 }; // bf16 values of poison either side of y

static void stem_conv_one(int S, int N, int ints, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const int K = 64, Hs = tk_s2d_side(S), Q = S / 2;
    const size_t nx = (size_t)N * Hs * Hs * TK_S2D_C, nw = (size_t)K * 4 * 4 * TK_S2D_C, ny = (size_t)N * Q * Q * K,
                 nall = ny + 2 * STEM_GUARD;
    float *x = rand_host(nx, ints), *w = rand_host(nw, ints);
    void *dx = gt_dev_from(x, nx, TK_BF16), *dw = gt_dev_from(w, nw, TK_BF16);
    uint16_t *dall = gt_dev(nall * 2), *dy = dall + STEM_GUARD;
    uint16_t *hx = gt_host(nx * 2), *hw = gt_host(nw * 2), *hy = gt_host(ny * 2), *hall = gt_host(nall * 2);
    gt_down(hx, dx, nx * 2), gt_down(hw, dw, nw * 2);
    CHECK_EQ_INT(tk_stem_conv_fwd_ref(hx, N, S, hw, K, TK_BF16, hy, &e), 0);
    float *ref = gt_host(ny * 4), *got = gt_host(ny * 4);
    for (size_t i = 0; i < ny; i++) ref[i] = tk_bf16_to_f32(hy[i]);
    gt_poison(dall, nall * 2, 0xff);
    CHECK_EQ_INT(tk_stem_conv_fwd(gt_ctx_, dx, N, S, dw, K, TK_BF16, dy, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    gt_down(hall, dall, nall * 2);
    size_t guard = 0, unwritten = 0;
    for (size_t i = 0; i < STEM_GUARD; i++) guard += (hall[i] != 0xffff) + (hall[STEM_GUARD + ny + i] != 0xffff);
    for (size_t i = 0; i < ny; i++) {
        got[i] = tk_bf16_to_f32(hall[STEM_GUARD + i]);
        unwritten += got[i] != got[i];
    }
    char what[96];
    snprintf(what, sizeof what, "stem_conv bf16%s N%d %dx%dx16->%d 4x4/1 (max %lld ulps)", ints ? " ints" : "", N, Hs,
             Hs, K, (long long)gt_max_ulps(got, ref, ny));
    CHECK(close_enough(what, got, ref, ny, ints ? 0 : 1e-2));
    if (guard || unwritten)
        printf("# stem_conv S %d N %d: %zu guard values overwritten, %zu outputs unwritten\n", S, N, guard, unwritten);
    CHECK_EQ_INT((int)guard, 0);
    CHECK_EQ_INT((int)unwritten, 0);
    tk_free(gt_ctx_, dx), tk_free(gt_ctx_, dw), tk_free(gt_ctx_, dall);
    free(x), free(w), free(hx), free(hw), free(hy), free(hall), free(ref), free(got);
}

TK_TEST(stem_conv_vs_reference) {
    // the shapes it runs (bf16, K 64, S 224 or 300) and no others
    CHECK(tk_stem_conv_ok(TK_BF16, 224, 64) && tk_stem_conv_ok(TK_BF16, 300, 64));
    CHECK(!tk_stem_conv_ok(TK_F32, 224, 64) && !tk_stem_conv_ok(TK_F32, 300, 64));
    CHECK(!tk_stem_conv_ok(TK_BF16, 32, 64) && !tk_stem_conv_ok(TK_BF16, 258, 64) && !tk_stem_conv_ok(TK_BF16, 302, 64));
    CHECK(!tk_stem_conv_ok(TK_BF16, 224, 16) && !tk_stem_conv_ok(TK_BF16, 300, 8));
    static const int cases[][3] = {{224, 7, 0}, {224, 1, 0}, {224, 2, 1}, {224, 3, 1},
                                   {300, 1, 0}, {300, 9, 0}, {300, 1, 1}, {300, 3, 1}}; // S, N, ints
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        stem_conv_one(cases[i][0], cases[i][1], cases[i][2], tk_failed_);
}

// The stem block (lib/blocks/stem.h) on cuda picks the own kernel exactly where it applies:
// ResNet-50's 224 and SSD300's 300 (model.stem auto: the space-to-depth form) in bf16 with 64
// channels, not TK_STEM_CONV=cudnn, not fp32, not another side (258: the SSD tests' width-8 models
// run cuDNN's 4x4 convolution).
TK_TEST(stem_block_picks_own_kernel) {
    tk_cudnn *h = dnn();
    CHECK(h != NULL);
    if (!h) return;
    static const struct {
        int S, K, bf16, cudnn_env, own;
    } cases[] = {{224, 64, 1, 0, 1}, {300, 64, 1, 0, 1}, {224, 64, 1, 1, 0}, {300, 64, 1, 1, 0},
                 {300, 64, 0, 0, 0}, {258, 64, 1, 0, 0}, {300, 8, 1, 0, 0}};
    const char *was = getenv("TK_STEM_CONV"); // (the caller's setting, put back at the end)
    char *saved = was ? strdup(was) : NULL;
    unsetenv("TK_STEM_CONV");
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tk_err e = {0};
        const tk_blk_env env = {.c = gt_ctx_, .dnn = h, .t = cases[i].bf16 ? TK_BF16 : TK_F32};
        tk_blk_stem st;
        if (cases[i].cudnn_env) setenv("TK_STEM_CONV", "cudnn", 1);
        CHECK_EQ_INT(tk_blk_stem_pick(&env, &st, 2, cases[i].S, cases[i].K, TK_BLK_STEM_AUTO, &e), 0);
        unsetenv("TK_STEM_CONV");
        printf("# stem block %s S %d K %d%s: s2d %d own %d\n", cases[i].bf16 ? "bf16" : "fp32", cases[i].S, cases[i].K,
               cases[i].cudnn_env ? " TK_STEM_CONV=cudnn" : "", st.s2d, st.own);
        if (cases[i].own) CHECK_EQ_INT(st.s2d, 1);
        CHECK_EQ_INT(st.own, cases[i].own);
    }
    if (saved) setenv("TK_STEM_CONV", saved, 1);
    free(saved);
    tk_cudnn_destroy(h);
}

// The stem convolution's forward at the models' shapes (TK_BENCH=1): ResNet-50's (224, batch 256)
// and SSD300's (300, batch 114, issue 30's), the own kernel against cuDNN's plan of the same
// convolution, each one's median time and the bytes it must move per second.
typedef struct {
    int own, N, S;
    tk_cudnn *h;
    tk_conv_shape s;
    void *x, *w, *y;
} stem_bench_arg;

static void stem_bench_fn(void *p) {
    stem_bench_arg *a = p;
    tk_err e = {0};
    if (a->own ? tk_stem_conv_fwd(gt_ctx_, a->x, a->N, a->S, a->w, 64, TK_BF16, a->y, &e)
               : tk_cudnn_conv(a->h, TK_CONV_FWD, &a->s, TK_BF16, a->x, a->w, a->y, &e))
        gt_die_("stem bench", &e);
}

TK_TEST(stem_conv_bench) {
    if (!getenv("TK_BENCH")) {
        printf("# TK_BENCH=1 runs this benchmark\n");
        return;
    }
    tk_cudnn *h = dnn();
    CHECK(h != NULL);
    if (!h) return;
    static const int shapes[][2] = {{224, 256}, {300, 114}}; // S, N
    for (int i = 0; i < 2; i++) {
        tk_err e = {0};
        stem_bench_arg a = {.N = shapes[i][1], .S = shapes[i][0], .h = h};
        const int hs = tk_s2d_side(a.S);
        CHECK_EQ_INT(tk_conv_shape_init(&a.s, a.N, hs, hs, TK_S2D_C, 64, 4, 4, 1, 0, &e), 0);
        CHECK_EQ_INT(tk_cudnn_plan(h, TK_CONV_FWD, &a.s, TK_BF16, &e), 0);
        if (e.code) break;
        const size_t nx = (size_t)tk_conv_x_numel(&a.s), ny = (size_t)tk_conv_y_numel(&a.s),
                     nws = tk_cudnn_ws_bytes(h);
        void *ws = nws ? gt_dev(nws) : NULL;
        tk_cudnn_set_ws(h, ws, nws);
        a.x = bench_fill(nx), a.w = bench_fill((size_t)tk_conv_w_numel(&a.s)), a.y = gt_dev(ny * 2);
        for (a.own = 1; a.own >= 0; a.own--) {
            const double ms = gt_time_ms(stem_bench_fn, &a, 20);
            printf("# table stem conv bench %dx%d b=%d bf16 %-6s %7.1f us (%5.0f GB/s)\n", a.S, a.S, a.N,
                   a.own ? "own" : "cuDNN", ms * 1e3, (nx + ny) * 2.0 / ms / 1e6);
        }
        CHECK_EQ_INT(gt_sync(&e), 0);
        tk_cudnn_set_ws(h, NULL, 0);
        void *dev[] = {a.x, a.w, a.y, ws};
        for (int k = 0; k < 4; k++)
            if (dev[k]) tk_free(gt_ctx_, dev[k]);
    }
    tk_cudnn_destroy(h);
}
