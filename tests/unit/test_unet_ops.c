// The CPU references of the 3D U-Net's ops (kernels/{instnorm,dice_ce,conv3d}_ref.c): small cases
// whose results are exact and computed here from the definitions, direct-loop sums written
// independently of the reference, and finite differences of the backward passes against the
// forward.
#include <math.h>
#include <string.h>

#include "core/bf16.h"
#include "instnorm.h"
#include "tk_test.h"
#include "tk_test_cpu.h"

// ---- instance norm ----

// Each (n, c) holds m - d and m + d in turn (d a power of two): mean m, biased variance d^2, so with
// eps 0 invstd = 1 / d and y = gamma (x - m) / d + beta = beta -+ gamma, exactly.
TK_TEST(instnorm_exact) {
    tk_err e = {0};
    enum { N = 2, S = 6, C = 3 };
    const float m[N][C] = {{1, -3, 100}, {0.5f, 7, -20}}, d[N][C] = {{2, 0.5f, 8}, {1, 4, 0.25f}};
    const float gamma[C] = {1.5f, -2, 0.75f}, beta[C] = {0.25f, 1, -0.5f};
    float x[N * S * C], y[N * S * C], sm[N * C], si[N * C];
    for (int n = 0; n < N; n++)
        for (int s = 0; s < S; s++)
            for (int c = 0; c < C; c++) x[(n * S + s) * C + c] = m[n][c] + (s % 2 ? d[n][c] : -d[n][c]);
    for (int relu = 0; relu < 2; relu++) {
        CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, gamma, beta, relu, 0.0f, sm, si, y, &e), 0);
        int bad = 0;
        for (int n = 0; n < N; n++)
            for (int c = 0; c < C; c++) {
                bad += sm[n * C + c] != m[n][c] || si[n * C + c] != 1 / d[n][c];
                for (int s = 0; s < S; s++) {
                    float want = beta[c] + (s % 2 ? gamma[c] : -gamma[c]);
                    if (relu && want < 0) want = 0;
                    bad += y[(n * S + s) * C + c] != want;
                }
            }
        CHECK_EQ_INT(bad, 0);
    }
    // eps as torch's: invstd = 1 / sqrt(d^2 + 1e-5)
    CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, gamma, beta, 0, TK_INSTNORM_EPS, sm, si, y, &e), 0);
    for (int i = 0; i < N * C; i++) {
        const double dd = d[i / C][i % C];
        CHECK_NEAR(si[i], 1 / sqrt(dd * dd + 1e-5), 1e-6);
    }
    // bf16: the same exact values (all representable) come out the same
    uint16_t xb[N * S * C], yb[N * S * C];
    for (int i = 0; i < N * S * C; i++) xb[i] = tk_f32_to_bf16(x[i]);
    CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_BF16, xb, N, S, C, gamma, beta, 1, 0.0f, sm, si, yb, &e), 0);
    CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, gamma, beta, 1, 0.0f, sm, si, y, &e), 0);
    int bad = 0;
    for (int i = 0; i < N * S * C; i++) bad += tk_bf16_to_f32(yb[i]) != y[i];
    CHECK_EQ_INT(bad, 0);
    // bad arguments are refused
    CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F16, x, N, S, C, gamma, beta, 0, 0.0f, sm, si, y, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, 0, C, gamma, beta, 0, 0.0f, sm, si, y, &e), TK_EINTERNAL);
}

// The backward of a known case: dy = 1 everywhere, no ReLU: dbeta = N S, dgamma = sum xhat = 0,
// dx = gamma invstd (1 - 1 - 0) = 0.
TK_TEST(instnorm_backward_constant_dy) {
    tk_err e = {0};
    enum { N = 2, S = 8, C = 2 };
    float x[N * S * C], y[N * S * C], dy[N * S * C], dx[N * S * C], sm[N * C], si[N * C], dg[C], db[C];
    const float gamma[C] = {2, -1}, beta[C] = {0, 1};
    tk_test_fill(x, N * S * C, 29, 1, -3, 3);
    for (int i = 0; i < N * S * C; i++) dy[i] = 1;
    CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, gamma, beta, 0, TK_INSTNORM_EPS, sm, si, y, &e), 0);
    CHECK_EQ_INT(tk_instnorm_bwd_ref(TK_F32, x, NULL, dy, N, S, C, gamma, sm, si, dx, dg, db, &e), 0);
    for (int c = 0; c < C; c++) {
        CHECK(db[c] == N * S);
        CHECK_NEAR(dg[c], 0, 1e-5);
    }
    for (int i = 0; i < N * S * C; i++) CHECK_NEAR(dx[i], 0, 1e-5);
}

// L = sum_i w_i y_i; dL/dx, dL/dgamma, dL/dbeta by central differences of the forward against the
// backward with dy = w, with and without the ReLU. A coordinate whose step moves a pre-activation
// across the ReLU's kink is skipped (the difference is not the derivative there); few may be.
TK_TEST(instnorm_backward_finite_differences) {
    tk_err e = {0};
    enum { N = 2, S = 27, C = 3, NE = N * S * C };
    float x[NE], wgt[NE], gamma[C] = {1.5f, -0.7f, 1.1f}, beta[C] = {0.2f, 0.1f, -0.3f};
    tk_test_fill(x, NE, 29, 2, -2, 2), tk_test_fill(wgt, NE, 29, 3, -1, 1);
    for (int relu = 0; relu < 2; relu++) {
        float y[NE], dx[NE], sm[N * C], si[N * C], dg[C], db[C];
        CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, gamma, beta, relu, TK_INSTNORM_EPS, sm, si, y, &e), 0);
        CHECK_EQ_INT(tk_instnorm_bwd_ref(TK_F32, x, relu ? y : NULL, wgt, N, S, C, gamma, sm, si, dx, dg, db, &e), 0);
        float xx[NE], gg[C], bb[C], tmp[NE], pre0[NE], pre[NE], tsm[N * C], tsi[N * C];
        memcpy(xx, x, sizeof x), memcpy(gg, gamma, sizeof gamma), memcpy(bb, beta, sizeof beta);
        CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, gamma, beta, 0, TK_INSTNORM_EPS, tsm, tsi, pre0, &e), 0);
        const double h = 1e-3;
        double worst = 0;
        int skipped = 0, tried = 0;
        // L at the current (xx, gg, bb); *kink set when a pre-activation changed sign
#define LOSS(out, kink)                                                                                            \
    do {                                                                                                           \
        tk_instnorm_fwd_ref(TK_F32, xx, N, S, C, gg, bb, relu, TK_INSTNORM_EPS, tsm, tsi, tmp, &e);                \
        tk_instnorm_fwd_ref(TK_F32, xx, N, S, C, gg, bb, 0, TK_INSTNORM_EPS, tsm, tsi, pre, &e);                   \
        (out) = 0;                                                                                                 \
        for (int i_ = 0; i_ < NE; i_++) {                                                                          \
            (out) += (double)tmp[i_] * wgt[i_];                                                                    \
            (kink) |= relu && (pre[i_] > 0) != (pre0[i_] > 0);                                                     \
        }                                                                                                          \
    } while (0)
#define FD(v, v0, g)                                                                                               \
    do {                                                                                                           \
        float up = (float)((v0) + h), dn = (float)((v0) - h);                                                     \
        double lp, lm;                                                                                             \
        int kink = 0;                                                                                              \
        v = up;                                                                                                    \
        LOSS(lp, kink);                                                                                            \
        v = dn;                                                                                                    \
        LOSS(lm, kink);                                                                                            \
        v = (v0);                                                                                                  \
        tried++;                                                                                                   \
        if (kink) skipped++;                                                                                       \
        else worst = fmax(worst, fabs((lp - lm) / ((double)up - dn) - (g)));                                      \
    } while (0)
        for (int i = 0; i < NE; i++) FD(xx[i], x[i], dx[i]);
        for (int c = 0; c < C; c++) {
            FD(gg[c], gamma[c], dg[c]);
            FD(bb[c], beta[c], db[c]);
        }
#undef FD
#undef LOSS
        printf("# instnorm backward, relu %d: worst |finite difference - analytic| %.2e (%d of %d skipped at the "
               "kink)\n", relu, worst, skipped, tried);
        CHECK(worst < 2e-3);
        CHECK(skipped * 10 < tried);
    }
}
