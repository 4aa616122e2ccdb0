// The 3D U-Net's ops on the cuda backend against their CPU references (kernels/{instnorm,dice_ce,
// conv3d}.h): fresh random inputs each run, and small-integer inputs where the results must be
// exact. Tolerances (norm-wise relative): fp32 <= 1e-5, bf16 <= 1e-2 (the references round the
// same fp32 math once; cuDNN's bf16 kernels may round partial sums); small integers: fp32
// convolutions and the instance norm's forward and statistics bit-exact. The 3-D convolutions run
// through cuDNN's graph API (lib/gpu/cudnn_conv3d.h) at the U-Net's kinds of shape, small.
#include "conv3d.h"
#include "act_io.h"
#include "colcat.h"
#include "conv3d_bias.h"
#include "dice_ce.h"
#include "gpu/cudnn_conv3d.h"
#include "gpu_test.h"
#include "instnorm.h"

// got vs ref (n values): relative error within tol; prints a table line.
static int within(const char *what, const float *got, const float *ref, size_t n, double tol) {
    const double err = gt_relerr(got, ref, n);
    printf("# table unet %-52s rel err %.2e (%zu of %zu differ)%s\n", what, err, gt_ndiff(got, ref, n), n,
           err <= tol ? "" : "  <-- FAIL");
    return err <= tol;
}

// An error as a TAP comment line, after a prefix.
static void note(const char *prefix, const tk_err *e) {
    char buf[1024];
    tk_err_format(e, buf, sizeof buf);
    printf("# %s%s\n", prefix, buf);
}

// n values of type t in host memory as fp32.
static float *as_f32(const void *h, size_t n, tk_dtype t) {
    float *f = gt_host(n * 4);
    for (size_t i = 0; i < n; i++)
        f[i] = t == TK_BF16 ? tk_bf16_to_f32(((const uint16_t *)h)[i]) : ((const float *)h)[i];
    return f;
}

// A random tensor: on the device (type t) and as the host copy the reference reads (same values).
typedef struct {
    void *dev, *host;
} pair;
static pair rand_pair(size_t n, tk_dtype t, float lo, float hi, int ints) {
    float *x = gt_host(n * 4);
    gt_fill(x, n, lo, hi, ints);
    pair p = {gt_dev_from(x, n, t), gt_host(n * tk_dtype_size(t) + 16)};
    gt_down(p.host, p.dev, n * tk_dtype_size(t));
    free(x);
    return p;
}
static void pair_free(pair p) {
    tk_free(gt_ctx_, p.dev);
    free(p.host);
}

// ---- instance norm ----

// ints: integer x and S a power of two, so mean and variance are exact on both sides: y, mean and
// invstd must be bit-exact. With a ReLU the backward also takes a second gradient dy2. The backward's reference takes
// the ReLU's mask from the device's own y (an output within an ulp of 0 may take either sign: the sums run in other
// orders).
static void instnorm_case(int N, int64_t S, int C, tk_dtype t, int relu, int ints, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const size_t n = (size_t)N * S * C, es = tk_dtype_size(t), nc = (size_t)N * C;
    pair x = ints ? rand_pair(n, t, -3, 4, 1) : rand_pair(n, t, -0.5f, 2.5f, 0), dy = rand_pair(n, t, -1, 1, ints),
         dy2 = rand_pair(n, t, -1, 1, ints);
    float *gamma = gt_host((size_t)C * 4), *beta = gt_host((size_t)C * 4);
    gt_fill(gamma, (size_t)C, 0.5f, 1.5f, 0), gt_fill(beta, (size_t)C, -0.5f, 0.5f, 0);
    float *dgm = gt_dev((size_t)C * 4), *dbt = gt_dev((size_t)C * 4), *dsm = gt_dev(nc * 4), *dsi = gt_dev(nc * 4),
          *ddg = gt_dev((size_t)C * 4), *ddb = gt_dev((size_t)C * 4);
    gt_up(dgm, gamma, (size_t)C * 4), gt_up(dbt, beta, (size_t)C * 4);
    void *y = gt_dev(n * es), *dx = gt_dev(n * es), *ws = gt_dev(tk_instnorm_ws_bytes(TK_BACKEND_CUDA, N, S, C) + 1);
    gt_poison(y, n * es, 0xff), gt_poison(dx, n * es, 0xff);
    CHECK_EQ_INT(tk_instnorm_fwd(gt_ctx_, t, x.dev, N, S, C, dgm, dbt, relu, TK_INSTNORM_EPS, dsm, dsi, y, ws, &e), 0);
    CHECK_EQ_INT(tk_instnorm_bwd(gt_ctx_, t, x.dev, relu ? y : NULL, dy.dev, relu ? dy2.dev : NULL, N, S, C, dgm, dsm,
                                 dsi, dx, ddg, ddb, ws, &e),
                 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    // the reference
    void *hy = gt_host(n * es), *hdx = gt_host(n * es), *gy = gt_host(n * es);
    float *sm = gt_host(nc * 4), *si = gt_host(nc * 4), *dg = gt_host((size_t)C * 4), *db = gt_host((size_t)C * 4);
    CHECK_EQ_INT(tk_instnorm_fwd_ref(t, x.host, N, S, C, gamma, beta, relu, TK_INSTNORM_EPS, sm, si, hy, &e), 0);
    gt_down(gy, y, n * es);
    CHECK_EQ_INT(tk_instnorm_bwd_ref(t, x.host, relu ? gy : NULL, dy.host, relu ? dy2.host : NULL, N, S, C, gamma, sm,
                                     si, hdx, dg, db, &e),
                 0);
    char what[112];
    const double tol = t == TK_BF16 ? 1e-2 : 1e-5;
    struct {
        const char *name;
        const void *dev, *host;
        size_t n;
        int exact;
        tk_dtype t;
    } outs[] = {{"y", y, hy, n, ints, t},
                {"dx", dx, hdx, n, 0, t},
                {"mean", dsm, sm, nc, ints, TK_F32},
                {"invstd", dsi, si, nc, ints, TK_F32},
                {"dgamma", ddg, dg, (size_t)C, 0, TK_F32},
                {"dbeta", ddb, db, (size_t)C, 0, TK_F32}};
    for (int k = 0; k < 6; k++) {
        float *got = gt_host_from(outs[k].dev, outs[k].n, outs[k].t), *ref = as_f32(outs[k].host, outs[k].n, outs[k].t);
        snprintf(what, sizeof what, "instnorm %s %s N%d S%lld C%d%s%s", outs[k].name, tk_dtype_name(t), N, (long long)S,
                 C, relu ? " relu" : "", ints ? " ints" : "");
        // statistics are fp32 on both sides; dgamma/dbeta add bf16-rounded dz the same way
        CHECK(within(what, got, ref, outs[k].n,
                     outs[k].exact ? 0
                     : k >= 2      ? (t == TK_BF16 && k >= 4 ? 1e-4 : 1e-5)
                                   : tol));
        free(got), free(ref);
    }
    size_t flips = 0; // ReLU mask elements the two forwards disagree on: an ulp at 0, not a wrong y
    for (size_t i = 0; relu && i < n; i++) {
        const float a = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)gy)[i]) : ((float *)gy)[i];
        const float b = t == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)hy)[i]) : ((float *)hy)[i];
        flips += (a > 0) != (b > 0);
    }
    CHECK(flips * 1000 <= n);
    void *dev[] = {dgm, dbt, dsm, dsi, ddg, ddb, y, dx, ws};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    pair_free(x), pair_free(dy), pair_free(dy2);
    free(gamma), free(beta), free(hy), free(hdx), free(gy), free(sm), free(si), free(dg), free(db);
}

TK_TEST(instnorm_vs_reference) {
    // (N, S, C): the U-Net's widths at small volumes, an odd volume, an odd channel count (the
    // scalar path), a large single-sample slice
    static const struct {
        int N;
        int64_t S;
        int C;
    } cases[] = {{2, 512, 32}, {2, 4096, 64}, {2, 64, 320}, {2, 210, 40}, {1, 1000, 3}, {2, 32768, 32}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int t = 0; t < 2; t++)
            for (int relu = 0; relu < 2; relu++)
                instnorm_case(cases[i].N, cases[i].S, cases[i].C, t ? TK_BF16 : TK_F32, relu, 0, tk_failed_);
    instnorm_case(2, 512, 32, TK_F32, 1, 1, tk_failed_);
    instnorm_case(2, 4096, 64, TK_BF16, 1, 1, tk_failed_);
}

// The forward and backward at the U-Net's largest activations (batch 2, 128^3, 32 channels, bf16):
// time and bytes moved per second (no reference: the cases above check the values).
static struct {
    void *x, *y, *dx, *ws;
    float *g, *b, *sm, *si, *dg, *db;
    int64_t S;
    int bwd;
} bw;
static void instnorm_run(void *arg) {
    (void)arg;
    tk_err e = {0};
    if (bw.bwd)
        tk_instnorm_bwd(gt_ctx_, TK_BF16, bw.x, bw.y, bw.y, NULL, 2, bw.S, 32, bw.g, bw.sm, bw.si, bw.dx, bw.dg, bw.db,
                        bw.ws, &e);
    else
        tk_instnorm_fwd(gt_ctx_, TK_BF16, bw.x, 2, bw.S, 32, bw.g, bw.b, 1, TK_INSTNORM_EPS, bw.sm, bw.si, bw.y, bw.ws,
                        &e);
}
TK_TEST(instnorm_bandwidth) {
    bw.S = 128 * 128 * 128;
    const size_t n = (size_t)2 * bw.S * 32;
    pair x = rand_pair(n, TK_BF16, -1, 2, 0);
    float ones[32];
    for (int i = 0; i < 32; i++) ones[i] = 1;
    bw.x = x.dev, bw.y = gt_dev(n * 2), bw.dx = gt_dev(n * 2);
    bw.ws = gt_dev(tk_instnorm_ws_bytes(TK_BACKEND_CUDA, 2, bw.S, 32));
    bw.g = gt_dev(128), bw.b = gt_dev(128), bw.sm = gt_dev(256), bw.si = gt_dev(256), bw.dg = gt_dev(128),
    bw.db = gt_dev(128);
    gt_up(bw.g, ones, 128), gt_up(bw.b, ones, 128);
    for (bw.bwd = 0; bw.bwd < 2; bw.bwd++) {
        const double ms = gt_time_ms(instnorm_run, NULL, 9);
        // forward: x read twice (statistics, apply), y written; backward: x, y, dy read twice, dx written
        const double bytes = (double)n * 2 * (bw.bwd ? 7 : 3);
        printf("# table unet instnorm %s bf16 N2 128^3 C32: %.3f ms, %.0f GB/s counted\n", bw.bwd ? "bwd" : "fwd", ms,
               bytes / ms / 1e6);
        CHECK(ms > 0);
    }
    tk_err e = {0};
    CHECK_EQ_INT(gt_sync(&e), 0);
    void *dev[] = {bw.y, bw.dx, bw.ws, bw.g, bw.b, bw.sm, bw.si, bw.dg, bw.db};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    pair_free(x);
}

// ---- Dice + cross-entropy ----

// ld: values a voxel (3, or padded: the pad columns of z random, of dz must come back 0).
static void dice_case(int N, int64_t S, int ld, tk_dtype t, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const size_t nv = (size_t)N * S, nz = nv * ld, es = tk_dtype_size(t);
    pair z = rand_pair(nz, t, -4, 4, 0);
    uint8_t *label = gt_host(nv), *dlabel = gt_dev(nv);
    for (size_t i = 0; i < nv; i++) { // mostly background, some kidney, less tumor
        const uint32_t u = gt_u32(i) % 100;
        label[i] = u < 70 ? 0 : u < 90 ? 1 : 2;
    }
    gt_up(dlabel, label, nv);
    float *dloss = gt_dev(4), *ddice = gt_dev((size_t)N * 8);
    void *dz = gt_dev(nz * es), *ws = gt_dev(tk_dice_ce_ws_bytes(TK_BACKEND_CUDA, N, S));
    gt_poison(dz, nz * es, 0xff);
    CHECK_EQ_INT(tk_dice_ce(gt_ctx_, t, z.dev, dlabel, N, S, ld, dloss, ddice, dz, ws, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    float loss, *dice = gt_host((size_t)N * 8);
    void *hdz = gt_host(nz * es);
    CHECK_EQ_INT(tk_dice_ce_ref(t, z.host, label, N, S, ld, &loss, dice, hdz, &e), 0);
    float gl, *gd = gt_host((size_t)N * 8), *got = gt_host_from(dz, nz, t), *ref = as_f32(hdz, nz, t);
    gt_down(&gl, dloss, 4), gt_down(gd, ddice, (size_t)N * 8);
    char what[96];
    snprintf(what, sizeof what, "dice_ce loss %s N%d S%lld ld %d", tk_dtype_name(t), N, (long long)S, ld);
    CHECK(within(what, &gl, &loss, 1, 1e-5)); // (fp32 and fp64 sums of the same logits)
    snprintf(what, sizeof what, "dice_ce dice %s N%d S%lld ld %d", tk_dtype_name(t), N, (long long)S, ld);
    CHECK(within(what, gd, dice, (size_t)N * 2, 1e-5));
    snprintf(what, sizeof what, "dice_ce dz %s N%d S%lld ld %d", tk_dtype_name(t), N, (long long)S, ld);
    CHECK(within(what, got, ref, nz, t == TK_BF16 ? 1e-2 : 1e-5)); // (the pad columns: 0 == 0 or NaN: fails)
    // the value alone (dz NULL: evaluation) is the same
    float gl2;
    CHECK_EQ_INT(tk_dice_ce(gt_ctx_, t, z.dev, dlabel, N, S, ld, dloss, NULL, NULL, ws, &e), 0);
    gt_down(&gl2, dloss, 4);
    CHECK(gl2 == gl);
    void *dev[] = {dlabel, dloss, ddice, dz, ws};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    pair_free(z);
    free(label), free(dice), free(hdz), free(gd), free(got), free(ref);
}

TK_TEST(dice_ce_vs_reference) {
    static const struct {
        int N;
        int64_t S;
        int ld;
    } cases[] = {{2, 4096, 3}, {1, 1000, 3}, {2, 32768, 3}, {2, 128 * 128 * 128, 3}, {2, 4096, 8}, {2, 32768, 4}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        dice_case(cases[i].N, cases[i].S, cases[i].ld, TK_F32, tk_failed_);
        dice_case(cases[i].N, cases[i].S, cases[i].ld, TK_BF16, tk_failed_);
    }
}

// ---- the convolutions' bias ----

TK_TEST(conv3d_bias_vs_reference) {
    static const struct {
        int64_t M;
        int K;
    } cases[] = {{2 * 16 * 16 * 16, 32}, {2 * 32 * 32 * 32, 3}, {4096, 320}, {1000, 7}, {2 * 128 * 128 * 128, 3}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int tt = 0; tt < 2; tt++)
            for (int ints = 0; ints < 2; ints++) {
                const tk_dtype t = tt ? TK_BF16 : TK_F32;
                const int64_t M = cases[i].M;
                const int K = cases[i].K;
                const size_t n = (size_t)M * K;
                tk_err e = {0};
                pair y = rand_pair(n, t, -2, 2, ints), dy = rand_pair(n, t, -2, 2, ints);
                float *b = gt_host((size_t)K * 4), *db = gt_host((size_t)K * 4), *gdb = gt_host((size_t)K * 4);
                gt_fill(b, (size_t)K, -1, 1, ints);
                float *db_dev = gt_dev((size_t)K * 4), *b_dev = gt_dev((size_t)K * 4);
                void *ws = gt_dev(tk_conv3d_bias_ws_bytes(TK_BACKEND_CUDA, M, K));
                gt_up(b_dev, b, (size_t)K * 4);
                CHECK_EQ_INT(tk_conv3d_bias_fwd(gt_ctx_, t, y.dev, M, K, b_dev, &e), 0);
                CHECK_EQ_INT(tk_conv3d_bias_bwd(gt_ctx_, t, dy.dev, M, K, db_dev, ws, &e), 0);
                CHECK_EQ_INT(gt_sync(&e), 0);
                CHECK_EQ_INT(tk_conv3d_bias_fwd_ref(t, y.host, M, K, b, &e), 0);
                CHECK_EQ_INT(tk_conv3d_bias_bwd_ref(t, dy.host, M, K, db, &e), 0);
                float *got = gt_host_from(y.dev, n, t), *ref = as_f32(y.host, n, t);
                gt_down(gdb, db_dev, (size_t)K * 4);
                char what[96];
                // y: the same fp32 add rounded once on both sides (bit-exact); db: fp64 sums of the same values
                snprintf(what, sizeof what, "bias fwd %s%s M%lld K%d", tk_dtype_name(t), ints ? " ints" : "",
                         (long long)M, K);
                CHECK(within(what, got, ref, n, 0));
                snprintf(what, sizeof what, "bias bwd %s%s M%lld K%d", tk_dtype_name(t), ints ? " ints" : "",
                         (long long)M, K);
                CHECK(within(what, gdb, db, (size_t)K, ints ? 0 : 1e-6));
                tk_free(gt_ctx_, db_dev), tk_free(gt_ctx_, b_dev), tk_free(gt_ctx_, ws);
                pair_free(y), pair_free(dy);
                free(b), free(db), free(gdb), free(got), free(ref);
            }
}

// ---- the skip connections' concatenation and split ----

// Both directions against the reference, bit for bit (with a bias too: the same fp32 add rounded
// once): the U-Net's shapes (16-byte rows: the vector path) and odd ones (the element path), both
// types, misaligned pointers.
TK_TEST(colcat_vs_reference) {
    static const struct {
        int64_t rows, ca, cb;
        tk_dtype t;
        int off;
    } cases[] = {{2 * 64 * 64 * 64, 32, 32, TK_BF16, 0}, {4096, 256, 256, TK_BF16, 0}, {1000, 7, 5, TK_BF16, 0},
                 {999, 16, 8, TK_F32, 0}, {777, 3, 9, TK_F32, 0}, {513, 32, 32, TK_BF16, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int with_bias = 0; with_bias < 2; with_bias++) {
            const int64_t R = cases[i].rows, ca = cases[i].ca, cb = cases[i].cb;
            const tk_dtype t = cases[i].t;
            const size_t es = tk_dtype_size(t), off = (size_t)cases[i].off * es, na = (size_t)(R * ca) * es,
                         nb = (size_t)(R * cb) * es, n = na + nb;
            tk_err e = {0};
            float *x = gt_host((size_t)(R * (ca + cb)) * 4), *bias = gt_host((size_t)ca * 4);
            gt_fill(x, (size_t)(R * (ca + cb)), -3, 3, 0);
            gt_fill(bias, (size_t)ca, -1, 1, 0);
            unsigned char *a = gt_host(na), *b = gt_host(nb), *ref = gt_host(n), *got = gt_host(n),
                          *a2 = gt_host(na), *b2 = gt_host(nb);
            for (size_t j = 0; j < (size_t)(R * ca); j++) tk_act_st(a, t, j, x[j]);
            for (size_t j = 0; j < (size_t)(R * cb); j++) tk_act_st(b, t, j, x[R * ca + j]);
            unsigned char *da = gt_dev(na + off), *db = gt_dev(nb + off), *dw = gt_dev(n + off);
            float *dbias = gt_dev((size_t)ca * 4);
            gt_up(da + off, a, na), gt_up(db + off, b, nb), gt_up(dbias, bias, (size_t)ca * 4);
            CHECK_EQ_INT(tk_colcat(gt_ctx_, t, da + off, ca, with_bias ? dbias : NULL, db + off, cb, R, dw + off, &e), 0);
            CHECK_EQ_INT(tk_colcat_ref(t, a, ca, with_bias ? bias : NULL, b, cb, R, ref, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            gt_down(got, dw + off, n);
            const int cat_ok = !memcmp(got, ref, n);
            CHECK_EQ_INT(tk_colsplit(gt_ctx_, t, dw + off, ca, cb, R, da + off, db + off, &e), 0);
            CHECK_EQ_INT(tk_colsplit_ref(t, ref, ca, cb, R, a2, b2, &e), 0);
            CHECK_EQ_INT(gt_sync(&e), 0);
            unsigned char *ga = gt_host(na), *gb = gt_host(nb);
            gt_down(ga, da + off, na), gt_down(gb, db + off, nb);
            const int split_ok = !memcmp(ga, a2, na) && !memcmp(gb, b2, nb) && (with_bias || !memcmp(a2, a, na));
            printf("# table unet colcat %s rows %lld, %lld + %lld columns%s%s: cat %s, split %s\n", tk_dtype_name(t),
                   (long long)R, (long long)ca, (long long)cb, with_bias ? ", bias" : "", off ? ", misaligned" : "",
                   cat_ok ? "exact" : "DIFFERS", split_ok ? "exact" : "DIFFERS");
            CHECK(cat_ok && split_ok);
            tk_free(gt_ctx_, da), tk_free(gt_ctx_, db), tk_free(gt_ctx_, dw), tk_free(gt_ctx_, dbias);
            free(x), free(bias), free(a), free(b), free(ref), free(got), free(a2), free(b2), free(ga), free(gb);
        }
}

// ---- 3-D convolution ----

// All three passes of one shape through cuDNN against the reference; a shape cuDNN has no engine
// for is reported (refused: 1) when `optional` (channel counts of 1 or 3, which the model may pad).
static int conv3d_case(tk_cudnn *h, const tk_conv3d_shape *s, tk_dtype t, int ints, int optional, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    for (int p = 0; p < 3 && !e.code; p++) tk_cudnn_plan3d(h, (tk_conv_pass)p, s, t, &e);
    if (e.code) {
        note(optional ? "(the model must pad these channels) " : "", &e);
        CHECK(optional);
        return 1;
    }
    const size_t nws = tk_cudnn_ws_bytes(h);
    void *ws = nws ? gt_dev(nws) : NULL;
    tk_cudnn_set_ws(h, ws, nws);
    const size_t n[3] = {(size_t)tk_conv3d_x_numel(s), (size_t)tk_conv3d_y_numel(s), (size_t)tk_conv3d_w_numel(s)};
    const float lo = ints ? -2 : -1, hi = ints ? 2 : 1;
    pair x = rand_pair(n[0], t, lo, hi, ints), dy = rand_pair(n[1], t, lo, hi, ints),
         w = rand_pair(n[2], t, lo, hi, ints);
    const size_t es = tk_dtype_size(t);
    void *out = gt_dev((n[0] > n[1] ? (n[0] > n[2] ? n[0] : n[2]) : (n[1] > n[2] ? n[1] : n[2])) * es);
    static const char *const names[3] = {"fwd", "dgrad", "wgrad"};
    for (int p = 0; p < 3; p++) {
        const pair a = p == TK_CONV_BWD_DATA ? dy : x, b = p == TK_CONV_BWD_FILTER ? dy : w;
        const size_t no = p == TK_CONV_FWD ? n[1] : p == TK_CONV_BWD_DATA ? n[0] : n[2];
        void *href = gt_host(no * es);
        CHECK_EQ_INT(tk_conv3d_ref((tk_conv_pass)p, s, t, a.host, b.host, href, &e), 0);
        gt_poison(out, no * es, 0xff);
        CHECK_EQ_INT(tk_conv3d(gt_ctx_, h, (tk_conv_pass)p, s, t, a.dev, b.dev, out, &e), 0);
        CHECK_EQ_INT(gt_sync(&e), 0);
        float *got = gt_host_from(out, no, t), *ref = as_f32(href, no, t);
        char what[128];
        snprintf(what, sizeof what, "conv3d %s %s%s N%d %dx%dx%dx%d->%d %d^3/%d", names[p], tk_dtype_name(t),
                 ints ? " ints" : "", s->N, s->D, s->H, s->W, s->C, s->K, s->T, s->stride);
        CHECK(within(what, got, ref, no, t == TK_BF16 ? 1e-2 : ints ? 0 : 1e-5));
        free(href), free(got), free(ref);
    }
    tk_free(gt_ctx_, out);
    if (ws) tk_free(gt_ctx_, ws);
    pair_free(x), pair_free(dy), pair_free(w);
    return 0;
}

TK_TEST(conv3d_cudnn_vs_reference) {
    tk_err e = {0};
    tk_cudnn *h = NULL;
    if (tk_cudnn_create(gt_ctx_, 0, &h, &e)) {
        note("", &e);
        CHECK(h != NULL); // (the test fails: check-gpu machines have cuDNN)
        return;
    }
    printf("# %s\n", tk_cudnn_describe());
    // (N, D, H, W, C, K, k, stride, pad, optional): the U-Net's kinds of convolution, small
    static const struct {
        int N, D, H, W, C, K, k, stride, pad, optional;
    } cases[] = {
        {2, 8, 8, 8, 32, 32, 3, 1, 1, 0},   // a block's 3x3x3 convolution
        {2, 9, 8, 7, 32, 64, 3, 2, 1, 0},   // downsampling, odd extents
        {2, 8, 8, 8, 64, 64, 3, 2, 1, 0},   // downsampling, even
        {1, 4, 4, 4, 320, 320, 3, 1, 1, 0}, // the bottleneck's width
        {2, 8, 8, 8, 1, 32, 3, 1, 1, 1},    // the input block (one channel in)
        {2, 8, 8, 8, 32, 3, 1, 1, 0, 1},    // the output layer (three classes out)
        {2, 8, 8, 8, 32, 8, 1, 1, 0, 0},    // 1x1x1
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        tk_conv3d_shape s;
        CHECK_EQ_INT(tk_conv3d_shape_init(&s, cases[i].N, cases[i].D, cases[i].H, cases[i].W, cases[i].C, cases[i].K,
                                          cases[i].k, cases[i].stride, cases[i].pad, &e),
                     0);
        for (int t = 0; t < 2; t++)
            for (int ints = 0; ints < 2; ints++)
                conv3d_case(h, &s, t ? TK_BF16 : TK_F32, ints, cases[i].optional, tk_failed_);
    }
    // the transposed 2x2x2 stride-2 upsampling (its forward is the dgrad pass): 4^3 x 64 -> 8^3 x 32,
    // and the bottleneck's 320 -> 320
    static const int up[][4] = {{4, 64, 32, 2}, {2, 320, 320, 1}};
    for (int i = 0; i < 2; i++) {
        tk_conv3d_shape s;
        CHECK_EQ_INT(
            tk_conv3d_shape_transposed(&s, up[i][3], up[i][0], up[i][0], up[i][0], up[i][1], up[i][2], 2, 2, 0, &e), 0);
        for (int t = 0; t < 2; t++)
            for (int ints = 0; ints < 2; ints++) conv3d_case(h, &s, t ? TK_BF16 : TK_F32, ints, 0, tk_failed_);
    }
    // a pass that was not planned is refused, naming the shape
    tk_conv3d_shape s;
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 1, 5, 5, 5, 8, 8, 3, 1, 1, &e), 0);
    CHECK_EQ_INT(tk_cudnn_conv3d(h, TK_CONV_FWD, &s, TK_F32, NULL, NULL, NULL, &e), TK_EINTERNAL);
    CHECK(strstr(e.what, "N1 5x5x5x8 -> 8 3x3x3/1") != NULL);
    for (int i = 0; i < tk_cudnn_nplans(h); i++) printf("#   plan %s\n", tk_cudnn_plan_desc(h, i));
    tk_cudnn_destroy(h);
}

// The U-Net's convolutions at full size (batch 2 of 128^3, bf16): each pass's time and TFLOP/s
// through cuDNN's chosen engine, for the record (no reference; the cases above check the values).
static struct {
    tk_cudnn *h;
    const tk_conv3d_shape *s;
    tk_conv_pass p;
    void *a, *b, *out;
} ct;
static void conv3d_run(void *arg) {
    (void)arg;
    tk_err e = {0};
    tk_conv3d(gt_ctx_, ct.h, ct.p, ct.s, TK_BF16, ct.a, ct.b, ct.out, &e);
}
TK_TEST(conv3d_unet_timing) {
    tk_err e = {0};
    if (tk_cudnn_create(gt_ctx_, 0, &ct.h, &e)) {
        note("", &e);
        CHECK(ct.h != NULL);
        return;
    }
    // (N, D, C, K, k, stride, pad, transposed; transposed: D, C, K of its input and output)
    static const int cases[][8] = {{2, 128, 32, 32, 3, 1, 1, 0},  {2, 128, 32, 64, 3, 2, 1, 0},
                                   {2, 16, 256, 256, 3, 1, 1, 0}, {2, 8, 320, 320, 3, 1, 1, 0},
                                   {2, 64, 64, 32, 2, 2, 0, 1},   {2, 128, 32, 3, 1, 1, 0, 0}};
    static const char *const names[3] = {"fwd", "dgrad", "wgrad"};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const int *c = cases[i];
        tk_conv3d_shape s;
        CHECK_EQ_INT(c[7] ? tk_conv3d_shape_transposed(&s, c[0], c[1], c[1], c[1], c[2], c[3], c[4], c[5], c[6], &e)
                          : tk_conv3d_shape_init(&s, c[0], c[1], c[1], c[1], c[2], c[3], c[4], c[5], c[6], &e),
                     0);
        int planned = 1;
        for (int p = 0; p < 3 && planned; p++) planned = !tk_cudnn_plan3d(ct.h, (tk_conv_pass)p, &s, TK_BF16, &e);
        if (!planned) {
            note("(timing skipped) ", &e);
            e = (tk_err){0};
            continue;
        }
        const size_t nws = tk_cudnn_ws_bytes(ct.h),
                     n[3] = {(size_t)tk_conv3d_x_numel(&s), (size_t)tk_conv3d_y_numel(&s),
                             (size_t)tk_conv3d_w_numel(&s)};
        void *ws = nws ? gt_dev(nws) : NULL, *x = gt_dev(n[0] * 2), *y = gt_dev(n[1] * 2), *w = gt_dev(n[2] * 2),
             *o = gt_dev((n[0] > n[1] ? n[0] : n[1]) * 2);
        tk_cudnn_set_ws(ct.h, ws, nws);
        gt_poison(x, n[0] * 2, 0x3c), gt_poison(y, n[1] * 2, 0x3c), gt_poison(w, n[2] * 2, 0x3c); // (small values)
        const double flops = 2.0 * (double)n[1] * s.T * s.R * s.S * s.C;
        for (int p = 0; p < 3; p++) {
            ct.s = &s, ct.p = (tk_conv_pass)p;
            ct.a = p == TK_CONV_BWD_DATA ? y : x, ct.b = p == TK_CONV_BWD_FILTER ? y : w;
            ct.out = p == TK_CONV_BWD_FILTER ? (void *)w : o;
            const double ms = gt_time_ms(conv3d_run, NULL, 7);
            printf("# table unet conv3d %s%s bf16 N%d %dx%dx%dx%d->%d %d^3/%d: %.3f ms, %.1f TFLOP/s\n", names[p],
                   c[7] ? " (transposed)" : "", s.N, s.D, s.H, s.W, s.C, s.K, s.T, s.stride, ms, flops / ms / 1e9);
        }
        CHECK_EQ_INT(gt_sync(&e), 0);
        void *dev[] = {ws, x, y, w, o};
        for (int k = 0; k < 5; k++)
            if (dev[k]) tk_free(gt_ctx_, dev[k]);
    }
    tk_cudnn_destroy(ct.h);
}
