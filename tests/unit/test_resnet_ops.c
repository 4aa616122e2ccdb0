// The CPU references of ResNet's ops (kernels/{conv,bn,pool,xent_smooth,img_norm,stem_s2d}_ref.c): small
// cases computed by hand, the adjoint identities of the linear ops, and finite differences of the
// backward passes. Expected values come from the definitions, not from the code under test.
#include <math.h>

#include "bn.h"
#include "conv.h"
#include "core/philox.h"
#include "img_norm.h"
#include "pool.h"
#include "sgd.h"
#include "stem_s2d.h"
#include "tk_test.h"
#include "tk_test_cpu.h"
#include "xent_smooth.h"

static double dot(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// ---- convolution ----

TK_TEST(conv_by_hand) {
    tk_err e = {0};
    tk_conv_shape s;
    // x 3x3 = 1..9, w 2x2 = [[1, 0], [0, -1]]: y[p,q] = x[p,q] - x[p+1,q+1] = -4 everywhere
    float x[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, w[4] = {1, 0, 0, -1}, y[4], dy[4] = {1, 1, 1, 1}, dx[9], dw[4];
    CHECK_EQ_INT(tk_conv_shape_init(&s, 1, 3, 3, 1, 1, 2, 2, 1, 0, &e), 0);
    CHECK(s.P == 2 && s.Q == 2);
    CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &s, TK_F32, x, w, y, &e), 0);
    for (int i = 0; i < 4; i++) CHECK(y[i] == -4);
    // dx[h,w] = [h < 2 && w < 2] - [h >= 1 && w >= 1]
    const float want_dx[9] = {1, 1, 0, 1, 0, -1, 0, -1, -1};
    CHECK_EQ_INT(tk_conv_ref(TK_CONV_BWD_DATA, &s, TK_F32, dy, w, dx, &e), 0);
    for (int i = 0; i < 9; i++) CHECK(dx[i] == want_dx[i]);
    // dw[r,s] = sum of the 2x2 window of x at (r, s): 12, 16, 24, 28
    const float want_dw[4] = {12, 16, 24, 28};
    CHECK_EQ_INT(tk_conv_ref(TK_CONV_BWD_FILTER, &s, TK_F32, x, dy, dw, &e), 0);
    for (int i = 0; i < 4; i++) CHECK(dw[i] == want_dw[i]);
    // 3x3 ones, stride 2, pad 1: the sums of the windows centered at (0,0), (0,2), (2,0), (2,2)
    float ones[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, y2[4];
    CHECK_EQ_INT(tk_conv_shape_init(&s, 1, 3, 3, 1, 1, 3, 3, 2, 1, &e), 0);
    CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &s, TK_F32, x, ones, y2, &e), 0);
    CHECK(y2[0] == 12 && y2[1] == 16 && y2[2] == 24 && y2[3] == 28);
    // channels: x = [1, 2] at one pixel; filters [1, 0], [0, 1], [1, 1] (K R S C = 3 1 1 2)
    float xc[2] = {1, 2}, wc[6] = {1, 0, 0, 1, 1, 1}, yc[3];
    CHECK_EQ_INT(tk_conv_shape_init(&s, 1, 1, 1, 2, 3, 1, 1, 1, 0, &e), 0);
    CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &s, TK_F32, xc, wc, yc, &e), 0);
    CHECK(yc[0] == 1 && yc[1] == 2 && yc[2] == 3);
    // a shape with no output is refused
    CHECK_EQ_INT(tk_conv_shape_init(&s, 1, 2, 2, 1, 1, 5, 5, 1, 1, &e), TK_EINTERNAL);
}

// <conv(x, w), dy> = <x, dgrad(dy, w)> = <w, wgrad(x, dy)>: the two backward passes are the
// adjoints of the forward (exactly, up to rounding), for every stride and padding of ResNet.
TK_TEST(conv_adjoints) {
    tk_err e = {0};
    const int cases[][8] = {{2, 7, 5, 3, 6, 1, 1, 0}, {2, 8, 6, 4, 5, 1, 2, 0}, {2, 7, 7, 4, 3, 3, 1, 1},
                            {3, 9, 8, 3, 4, 3, 2, 1}, {1, 15, 13, 3, 4, 7, 2, 3}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int *k = cases[c];
        tk_conv_shape s;
        CHECK_EQ_INT(tk_conv_shape_init(&s, k[0], k[1], k[2], k[3], k[4], k[5], k[5], k[6], k[7], &e), 0);
        size_t nx = (size_t)tk_conv_x_numel(&s), ny = (size_t)tk_conv_y_numel(&s), nw = (size_t)tk_conv_w_numel(&s);
        float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *y = malloc(ny * 4), *dx = malloc(nx * 4),
              *dw = malloc(nw * 4);
        tk_test_fill(x, nx, 11, 1, -1, 1), tk_test_fill(w, nw, 11, 2, -1, 1), tk_test_fill(dy, ny, 11, 3, -1, 1);
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &s, TK_F32, x, w, y, &e), 0);
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_BWD_DATA, &s, TK_F32, dy, w, dx, &e), 0);
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_BWD_FILTER, &s, TK_F32, x, dy, dw, &e), 0);
        double a = dot(y, dy, ny), b = dot(x, dx, nx), d = dot(w, dw, nw);
        CHECK_NEAR(b, a, 1e-5 * (1 + fabs(a)));
        CHECK_NEAR(d, a, 1e-5 * (1 + fabs(a)));
        free(x), free(w), free(dy), free(y), free(dx), free(dw);
    }
}

// bf16 tensors: the same fp32 math on the widened inputs, the outputs rounded once.
TK_TEST(conv_bf16_rounds_outputs) {
    tk_err e = {0};
    tk_conv_shape s;
    CHECK_EQ_INT(tk_conv_shape_init(&s, 1, 1, 1, 3, 1, 1, 1, 1, 0, &e), 0);
    // 1 + 2^-8 + 2^-9 is not a bf16; x * w sums to it and rounds to 1 + 2^-7 (nearest even)
    float xf[3] = {1, 0.00390625f, 0.001953125f}, wf[3] = {1, 1, 1};
    uint16_t xb[3], wb[3], yb;
    for (int i = 0; i < 3; i++) xb[i] = tk_f32_to_bf16(xf[i]), wb[i] = tk_f32_to_bf16(wf[i]);
    CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &s, TK_BF16, xb, wb, &yb, &e), 0);
    CHECK(tk_bf16_to_f32(yb) == 1.0078125f);
}

// ---- batch normalization ----

TK_TEST(bn_forward_by_hand) {
    tk_err e = {0};
    // one channel: x = 1, 2, 3, 4: mean 2.5, biased variance 1.25, unbiased 5/3
    float x[4] = {1, 2, 3, 4}, g = 2, b = 0.5f, rm = 0, rv = 1, sm, si, y[4];
    const float eps = 1e-5f;
    CHECK_EQ_INT(tk_bn_fwd_train_ref(TK_F32, x, 4, 1, &g, &b, NULL, 0, eps, 0.1f, &rm, &rv, &sm, &si, y, &e), 0);
    const double inv = 1 / sqrt(1.25 + eps);
    CHECK_NEAR(sm, 2.5, 1e-7);
    CHECK_NEAR(si, inv, 1e-6);
    CHECK_NEAR(rm, 0.25, 1e-7);
    CHECK_NEAR(rv, 0.9 + 0.1 * 5.0 / 3.0, 1e-6);
    for (int i = 0; i < 4; i++) CHECK_NEAR(y[i], 2 * (x[i] - 2.5) * inv + 0.5, 1e-6);
    // two channels interleaved, residual and ReLU: y = max(0, bn(x) + res)
    float x2[6] = {0, 10, 2, 10, 4, 40}, g2[2] = {1, 1}, b2[2] = {0, 0}, res[6] = {0.5f, 0, -3, 1, 0, 0};
    float rm2[2] = {0, 0}, rv2[2] = {1, 1}, sm2[2], si2[2], y2[6];
    CHECK_EQ_INT(tk_bn_fwd_train_ref(TK_F32, x2, 3, 2, g2, b2, res, 1, 0, 0.1f, rm2, rv2, sm2, si2, y2, &e), 0);
    // channel 0: mean 2, var 8/3; channel 1: mean 20, var 200
    const double i0 = 1 / sqrt(8.0 / 3), i1 = 1 / sqrt(200.0);
    const double want[6] = {fmax(0, -2 * i0 + 0.5), fmax(0, -10 * i1), fmax(0, 0 - 3), fmax(0, -10 * i1 + 1),
                            fmax(0, 2 * i0), fmax(0, 20 * i1)};
    for (int i = 0; i < 6; i++) CHECK_NEAR(y2[i], want[i], 1e-6);
    // eval: the running statistics (mean 1, variance 4) instead
    float re = 1, rve = 4, ye[4];
    CHECK_EQ_INT(tk_bn_fwd_eval_ref(TK_F32, x, 4, 1, &g, &b, NULL, 0, 0, &re, &rve, ye, &e), 0);
    for (int i = 0; i < 4; i++) CHECK_NEAR(ye[i], 2 * (x[i] - 1) / 2 + 0.5, 1e-6);
}

// L = sum_i w_i y_i; dL/dx, dL/dgamma, dL/dbeta by central differences against tk_bn_bwd_ref with
// dy + dy2 = w, a residual input, and a ReLU whose pre-activations keep away from 0.
TK_TEST(bn_backward_finite_differences) {
    tk_err e = {0};
    enum { M = 12, C = 3 };
    float x[M * C], res[M * C], wgt[M * C], dy[M * C], dy2[M * C], gamma[C] = {1.5f, -0.7f, 1.1f},
          beta[C] = {0.2f, 0.1f, -0.3f};
    tk_test_fill(x, M * C, 11, 21, -2, 2), tk_test_fill(res, M * C, 11, 22, -1, 1),
        tk_test_fill(wgt, M * C, 11, 23, -1, 1), tk_test_fill(dy2, M * C, 11, 24, -1, 1);
    for (int i = 0; i < M * C; i++) dy[i] = wgt[i] - dy2[i];
    {   // the residual pushes every pre-activation at least 0.5 away from the ReLU's kink
        float rm[C] = {0}, rv[C] = {1, 1, 1}, sm[C], si[C], pre[M * C];
        CHECK_EQ_INT(tk_bn_fwd_train_ref(TK_F32, x, M, C, gamma, beta, NULL, 0, 1e-5f, 0.1f, rm, rv, sm, si, pre, &e), 0);
        for (int i = 0; i < M * C; i++) res[i] = pre[i] >= 0 ? 0.5f : -0.5f;
    }
    for (int relu = 0; relu < 2; relu++) {
        float rm[C] = {0}, rv[C] = {1, 1, 1}, sm[C], si[C], y[M * C], dx[M * C], dz[M * C], dg[C], db[C];
        CHECK_EQ_INT(tk_bn_fwd_train_ref(TK_F32, x, M, C, gamma, beta, res, relu, 1e-5f, 0.1f, rm, rv, sm, si, y, &e), 0);
        CHECK_EQ_INT(tk_bn_bwd_ref(TK_F32, x, relu ? y : NULL, NULL, dy, dy2, M, C, gamma, sm, si, dx, dz, dg, db, &e), 0);
        // L as a function of the inputs; h small against the margin of every pre-activation
        double margin = 1e9;
        float pre[M * C], tmp[M * C], trm[C], trv[C], tsm[C], tsi[C];
        CHECK_EQ_INT(tk_bn_fwd_train_ref(TK_F32, x, M, C, gamma, beta, res, 0, 1e-5f, 0.1f, trm, trv, tsm, tsi, pre, &e), 0);
        for (int i = 0; i < M * C; i++) margin = fmin(margin, fabs(pre[i]));
        const double h = 1e-3;
        CHECK(margin > 0.4);
#define LOSS(out) (tk_bn_fwd_train_ref(TK_F32, xx, M, C, gg, bb, res, relu, 1e-5f, 0.1f, trm, trv, tsm, tsi, tmp, &e), \
                   (out) = dot(tmp, wgt, M * C))
        float xx[M * C], gg[C], bb[C];
        memcpy(xx, x, sizeof x), memcpy(gg, gamma, sizeof gamma), memcpy(bb, beta, sizeof beta);
        double lp, lm, worst = 0;
        // (each difference divided by the actual step: v +- h rounded to fp32)
#define FD(v, v0, g)                                                                                               \
    do {                                                                                                           \
        float up = (float)((v0) + h), dn = (float)((v0) - h);                                                     \
        v = up, LOSS(lp);                                                                                          \
        v = dn, LOSS(lm);                                                                                          \
        v = (v0);                                                                                                  \
        worst = fmax(worst, fabs((lp - lm) / ((double)up - dn) - (g)));                                           \
    } while (0)
        for (int i = 0; i < M * C; i++) FD(xx[i], x[i], dx[i]);
        for (int c = 0; c < C; c++) {
            FD(gg[c], gamma[c], dg[c]);
            FD(bb[c], beta[c], db[c]);
        }
#undef FD
#undef LOSS
        printf("# bn backward, relu %d: worst |finite difference - analytic| %.2e\n", relu, worst);
        CHECK(worst < 2e-3);
        // the residual's gradient is dz: (dy + dy2) masked by the ReLU
        for (int i = 0; i < M * C; i++) CHECK(dz[i] == (relu && !(y[i] > 0) ? 0.0f : dy[i] + dy2[i]));
    }
    // without a residual, the ReLU's mask recomputed from x and beta is y > 0: the same bits
    float rm[C] = {0}, rv[C] = {1, 1, 1}, sm[C], si[C], y[M * C], a[4][M * C], g[4][C];
    CHECK_EQ_INT(tk_bn_fwd_train_ref(TK_F32, x, M, C, gamma, beta, NULL, 1, 1e-5f, 0.1f, rm, rv, sm, si, y, &e), 0);
    int zeros = 0;
    for (int i = 0; i < M * C; i++) zeros += !(y[i] > 0);
    CHECK(zeros > 0 && zeros < M * C);
    CHECK_EQ_INT(tk_bn_bwd_ref(TK_F32, x, y, NULL, wgt, NULL, M, C, gamma, sm, si, a[0], a[1], g[0], g[1], &e), 0);
    CHECK_EQ_INT(tk_bn_bwd_ref(TK_F32, x, NULL, beta, wgt, NULL, M, C, gamma, sm, si, a[2], a[3], g[2], g[3], &e), 0);
    CHECK(memcmp(a[0], a[2], sizeof a[0]) == 0 && memcmp(a[1], a[3], sizeof a[1]) == 0);
    CHECK(memcmp(g[0], g[2], sizeof g[0]) == 0 && memcmp(g[1], g[3], sizeof g[1]) == 0);
    for (int i = 0; i < M * C; i++) CHECK(a[1][i] == (y[i] > 0 ? wgt[i] : 0.0f));
}

// ---- pooling ----

TK_TEST(maxpool_by_hand) {
    tk_err e = {0};
    // 4x4, one channel; 3x3 windows at stride 2, pad 1: centered at (0,0), (0,2), (2,0), (2,2)
    const float x[16] = {1, 9, 2, 3,  //
                         4, 5, 6, 8,  //
                         7, 0, 7, 1,  //
                         2, 2, 3, 3};
    float y[4], dy[4] = {1, 10, 100, 1000}, dx[16];
    uint8_t idx[4];
    CHECK_EQ_INT(tk_maxpool_fwd_ref(TK_F32, x, 1, 4, 4, 1, 3, 2, 1, y, idx, &e), 0);
    // window (0,0) = rows -1..1, cols -1..1: max 9 at (0,1) -> tap (1,2) = 5; (0,2): rows -1..1, cols
    // 1..3: max 9 at (0,1) -> tap (1,0) = 3; (2,0): rows 1..3, cols -1..1: 7 at (2,0) -> tap (1,1) =
    // 4; (2,2): rows 1..3, cols 1..3: 8 at (1,3) -> tap (0,2) = 2 (the 7 at (2,2) is smaller)
    CHECK(y[0] == 9 && y[1] == 9 && y[2] == 7 && y[3] == 8);
    CHECK(idx[0] == 5 && idx[1] == 3 && idx[2] == 4 && idx[3] == 2);
    CHECK_EQ_INT(tk_maxpool_bwd_ref(TK_F32, dy, NULL, idx, 1, 4, 4, 1, 3, 2, 1, dx, &e), 0);
    for (int i = 0; i < 16; i++) CHECK(dx[i] == (i == 1 ? 11 : i == 8 ? 100 : i == 7 ? 1000 : 0));
    // ties: all equal -> the first pixel of each window inside the image
    float flat[16], yf[4];
    for (int i = 0; i < 16; i++) flat[i] = 3;
    CHECK_EQ_INT(tk_maxpool_fwd_ref(TK_F32, flat, 1, 4, 4, 1, 3, 2, 1, yf, idx, &e), 0);
    CHECK(idx[0] == 4 && idx[1] == 3 && idx[2] == 1 && idx[3] == 0);
    // dy2 adds to dy
    float d2[4] = {1, 1, 1, 1};
    CHECK_EQ_INT(tk_maxpool_fwd_ref(TK_F32, x, 1, 4, 4, 1, 3, 2, 1, y, idx, &e), 0);
    CHECK_EQ_INT(tk_maxpool_bwd_ref(TK_F32, dy, d2, idx, 1, 4, 4, 1, 3, 2, 1, dx, &e), 0);
    CHECK(dx[1] == 13 && dx[8] == 101 && dx[7] == 1001);
    CHECK_EQ_INT(tk_maxpool_fwd_ref(TK_F32, x, 1, 4, 4, 1, 0, 2, 1, y, idx, &e), TK_EINTERNAL);
}

TK_TEST(avgpool_by_hand_and_adjoint) {
    tk_err e = {0};
    // two images of 2 pixels x 2 channels
    const float x[8] = {1, 10, 3, 30, 5, 50, 7, 70};
    float y[4], dy[4] = {2, 4, 6, 8}, dx[8];
    CHECK_EQ_INT(tk_avgpool_fwd_ref(TK_F32, x, 2, 2, 2, y, &e), 0);
    CHECK(y[0] == 2 && y[1] == 20 && y[2] == 6 && y[3] == 60);
    CHECK_EQ_INT(tk_avgpool_bwd_ref(TK_F32, dy, 2, 2, 2, dx, &e), 0);
    const float want[8] = {1, 2, 1, 2, 3, 4, 3, 4};
    for (int i = 0; i < 8; i++) CHECK(dx[i] == want[i]);
    CHECK_NEAR(dot(y, dy, 4), dot(x, dx, 8), 1e-9);
}

// ---- loss and accuracy ----

TK_TEST(xent_by_hand_and_finite_differences) {
    tk_err e = {0};
    enum { B = 3, K = 4 };
    float z[B * K] = {1, 2, 3, 0.5f, -1, 0, 1, 2, 5, 5, 5, 5}, dz[B * K];
    int32_t lab[B] = {2, 0, -1}; // the third row is padding
    const float eps = 0.1f;
    const int N = 8;
    double acc[2] = {0.5, 3};
    CHECK_EQ_INT(tk_xent_smooth_ref(z, lab, B, K, N, eps, TK_F32, dz, acc, &e), 0);
    // by the definition: -sum_j q_j log softmax_j with q = eps/K + (1 - eps) [j == y]
    double want = 0;
    for (int b = 0; b < 2; b++) {
        double se = 0;
        for (int j = 0; j < K; j++) se += exp(z[b * K + j]);
        for (int j = 0; j < K; j++) {
            double q = (double)eps / K + (j == lab[b] ? 1 - (double)eps : 0);
            want -= q * (z[b * K + j] - log(se));
        }
    }
    CHECK_NEAR(acc[0], 0.5 + want / N, 1e-12);
    CHECK(acc[1] == 4);
    for (int j = 0; j < K; j++) CHECK(dz[2 * K + j] == 0);
    // dz = d(acc[0]) / dz by central differences
    double worst = 0;
    for (int i = 0; i < 2 * K; i++) {
        float zz[B * K];
        memcpy(zz, z, sizeof z);
        double a1[2] = {0, 0}, a2[2] = {0, 0}, h = 1e-3;
        float up = (float)(z[i] + h), dn = (float)(z[i] - h);
        zz[i] = up;
        tk_xent_smooth_ref(zz, lab, B, K, N, eps, TK_F32, NULL, a1, &e);
        zz[i] = dn;
        tk_xent_smooth_ref(zz, lab, B, K, N, eps, TK_F32, NULL, a2, &e);
        worst = fmax(worst, fabs((a1[0] - a2[0]) / ((double)up - dn) - dz[i]));
    }
    CHECK(worst < 1e-6);
    CHECK_EQ_INT(tk_xent_smooth_ref(z, lab, B, K, 2, eps, TK_F32, dz, acc, &e), TK_EINTERNAL); // N < B
}

TK_TEST(top1_by_hand) {
    tk_err e = {0};
    const float z[5 * 3] = {0, 2, 1, /**/ 3, 3, 1, /**/ 1, 1, 4, /**/ NAN, 0, 1, /**/ 9, 0, 0};
    const int32_t lab[5] = {1, 1, 2, 2, -1};
    int64_t n = 10;
    CHECK_EQ_INT(tk_top1_count_ref(z, lab, 5, 3, &n, &e), 0);
    // row 0 hit; row 1 tie -> index 0, a miss; row 2 hit; row 3 NaN ignored -> index 2, a hit;
    // row 4 padding never counts
    CHECK_EQ_INT(n, 13);
}

// ---- the input normalization ----

TK_TEST(img_normalize_by_hand) {
    tk_err e = {0};
    const uint8_t px[6] = {0, 128, 255, 10, 20, 30};
    const tk_img_norm n = {{100, 128, 55}, {2, 4, 0.5f}};
    float out[8];
    CHECK_EQ_INT(tk_img_normalize_ref(px, 2, n, TK_F32, out, 4, &e), 0);
    const float want[8] = {-50, 0, 400, 0, -45, -27, -50, 0};
    for (int i = 0; i < 8; i++) CHECK(out[i] == want[i]);
    CHECK_EQ_INT(tk_img_normalize_ref(px, 2, n, TK_F32, out, 2, &e), TK_EINTERNAL);
}

// ---- the stem as a 4x4 convolution over a space-to-depth input (kernels/stem_s2d.h) ----

// The 4x4 convolution over stem_s2d's input and filter gives the 7x7/2, pad 3 convolution's output,
// and its filter gradient mapped back gives the 7x7 one's (tk_conv_ref both ways, the oracle):
// exactly, on small integers (every product and sum exact in fp32), at sizes 6, 10 and 16.
TK_TEST(stem_s2d_matches_direct_conv) {
    tk_err e = {0};
    const int N = 2, K = 5;
    const tk_img_norm id = {{0, 0, 0}, {1, 1, 1}};
    for (int S = 6; S <= 16; S += S == 10 ? 6 : 4) {
        tk_conv_shape sd, ss;
        const int Hs = tk_s2d_side(S);
        CHECK_EQ_INT(tk_conv_shape_init(&sd, N, S, S, 3, K, 7, 7, 2, 3, &e), 0);
        CHECK_EQ_INT(tk_conv_shape_init(&ss, N, Hs, Hs, TK_S2D_C, K, 4, 4, 1, 0, &e), 0);
        CHECK_EQ_INT(ss.P, sd.P);
        CHECK_EQ_INT(ss.Q, sd.Q);
        const size_t npx = (size_t)N * S * S * 3, ny = (size_t)tk_conv_y_numel(&sd);
        uint8_t *px = malloc(npx);
        float *x = malloc(npx * 4), *xs = malloc((size_t)tk_conv_x_numel(&ss) * 4), *w = malloc((size_t)K * 147 * 4),
              *ws = malloc((size_t)tk_conv_w_numel(&ss) * 4), *yd = malloc(ny * 4), *ys = malloc(ny * 4),
              *dy = malloc(ny * 4), *dwd = malloc((size_t)K * 147 * 4), *dws = malloc((size_t)tk_conv_w_numel(&ss) * 4),
              *dw2 = malloc((size_t)K * 147 * 4);
        for (size_t i = 0; i < npx; i++) px[i] = (uint8_t)(tk_philox_draw(31, 1, i).v[0] % 4);
        tk_test_fill(w, (size_t)K * 147, 31, 2, -2, 3);
        tk_test_fill(dy, ny, 31, 3, -2, 3);
        for (size_t i = 0; i < (size_t)K * 147; i++) w[i] = floorf(w[i]);
        for (size_t i = 0; i < ny; i++) dy[i] = floorf(dy[i]);
        CHECK_EQ_INT(tk_img_normalize_ref(px, (int64_t)N * S * S, id, TK_F32, x, 3, &e), 0);
        CHECK_EQ_INT(tk_stem_s2d_input_ref(px, N, S, id, TK_F32, xs, &e), 0);
        CHECK_EQ_INT(tk_stem_s2d_weight_ref(w, K, TK_F32, ws, &e), 0);
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &sd, TK_F32, x, w, yd, &e), 0);
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_FWD, &ss, TK_F32, xs, ws, ys, &e), 0);
        size_t bad = 0, nz = 0;
        for (size_t i = 0; i < ny; i++) bad += yd[i] != ys[i], nz += yd[i] != 0;
        CHECK_EQ_INT(bad, 0);
        CHECK(nz > ny / 2); // the case is not all zeros
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_BWD_FILTER, &sd, TK_F32, x, dy, dwd, &e), 0);
        CHECK_EQ_INT(tk_conv_ref(TK_CONV_BWD_FILTER, &ss, TK_F32, xs, dy, dws, &e), 0);
        CHECK_EQ_INT(tk_stem_s2d_wgrad_ref(dws, K, TK_F32, dw2, &e), 0);
        bad = 0;
        for (size_t i = 0; i < (size_t)K * 147; i++) bad += dwd[i] != dw2[i];
        CHECK_EQ_INT(bad, 0);
        printf("# stem s2d S %d: forward and filter gradient equal the 7x7/2 convolution's (%zu outputs)\n", S, ny);
        free(px), free(x), free(xs), free(w), free(ws), free(yd), free(ys), free(dy), free(dwd), free(dws), free(dw2);
    }
    // the layout checks: odd sizes and other types are refused
    CHECK_EQ_INT(tk_stem_s2d_input_ref(NULL, 1, 7, id, TK_F32, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_stem_s2d_weight_ref(NULL, 1, TK_I32, NULL, &e), TK_EINTERNAL);
}

// The space-to-depth input holds img_normalize's values (real mean and std, fp32 and bf16) at the
// places stem_s2d.h names, zeros in the padding and the 4 spare channels: checked element by element
// against the normalized image.
TK_TEST(stem_s2d_input_layout) {
    tk_err e = {0};
    const int N = 2, S = 8, Hs = tk_s2d_side(S);
    const tk_img_norm n = {{123.675f, 116.28f, 103.53f}, {58.395f, 57.12f, 57.375f}};
    uint8_t px[2 * 8 * 8 * 3];
    for (size_t i = 0; i < sizeof px; i++) px[i] = (uint8_t)(tk_philox_draw(32, 1, i).v[0] >> 24);
    for (int bf = 0; bf < 2; bf++) {
        const tk_dtype t = bf ? TK_BF16 : TK_F32;
        float x[2 * 8 * 8 * 3], xs[2 * 7 * 7 * TK_S2D_C];
        uint16_t xb[2 * 8 * 8 * 3], xsb[2 * 7 * 7 * TK_S2D_C];
        CHECK_EQ_INT(tk_img_normalize_ref(px, N * S * S, n, t, bf ? (void *)xb : x, 3, &e), 0);
        CHECK_EQ_INT(tk_stem_s2d_input_ref(px, N, S, n, t, bf ? (void *)xsb : xs, &e), 0);
        size_t bad = 0;
        for (int b = 0; b < N; b++)
            for (int i = 0; i < Hs; i++)
                for (int j = 0; j < Hs; j++)
                    for (int ch = 0; ch < TK_S2D_C; ch++) {
                        const int y = 2 * i - 4 + (ch / 3) / 2, xx = 2 * j - 4 + (ch / 3) % 2;
                        const size_t o = (((size_t)b * Hs + i) * Hs + j) * TK_S2D_C + ch;
                        float want = 0, got = bf ? tk_bf16_to_f32(xsb[o]) : xs[o];
                        if (ch < 12 && y >= 0 && y < S && xx >= 0 && xx < S) {
                            const size_t q = (((size_t)b * S + y) * S + xx) * 3 + ch % 3;
                            want = bf ? tk_bf16_to_f32(xb[q]) : x[q];
                        }
                        bad += got != want;
                    }
        CHECK_EQ_INT(bad, 0);
    }
}
