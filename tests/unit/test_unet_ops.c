// The CPU references of the 3D U-Net's ops (kernels/{instnorm,dice_ce,conv3d}_ref.c): small cases
// whose results are exact and computed here from the definitions, direct-loop sums written
// independently of the reference, and finite differences of the backward passes against the
// forward.
// With TK_DICE_CE_DRIVE=f32|bf16 in the environment the binary is instead the C side of
// tests/cli/unet-ops-oracle.bats: it reads "N S" and then N S lines "z0 z1 z2 label" (logits of
// sample-major voxels) from stdin, runs tk_dice_ce_ref on them (rounded to bf16 first for bf16)
// and prints "loss L", "dice d10 d11 d20 ..." (per sample, classes 1 and 2) and N S lines of dz,
// then exits before its TAP tests: 0, or the error's code with a message on stderr.
// With TK_UNET_OPS_DRIVE=conv3d or instnorm it is the C side of tests/cli/unet-ops-oracle.bats in
// the same way (fp32; whitespace-separated numbers on stdin, tensors channels last; each result
// printed as a line "NAME COUNT" and COUNT values, one a line):
//   conv3d: "N D H W C K k stride pad 0", then x, w (KTRSC), dy; prints y, dx, dw;
//           "N D H W Cin Cout k stride pad 1" (ConvTranspose3d of an input (N, D, H, W, Cin)), then
//           in, w (Cin, k, k, k, Cout), dout; prints out, din, dw.
//   instnorm: "N S C relu", then x, gamma, beta, dy; prints y, dx, dgamma, dbeta (eps 1e-5).
#include <math.h>
#include <string.h>
#include <time.h>

#include "conv3d.h"
#include "colcat.h"
#include "conv3d_bias.h"
#include "core/bf16.h"
#include "dice_ce.h"
#include "instnorm.h"
#include "tk_drive.h"
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
    CHECK_EQ_INT(tk_instnorm_bwd_ref(TK_F32, x, NULL, dy, NULL, N, S, C, gamma, sm, si, dx, dg, db, &e), 0);
    for (int c = 0; c < C; c++) {
        CHECK(db[c] == N * S);
        CHECK_NEAR(dg[c], 0, 1e-5);
    }
    for (int i = 0; i < N * S * C; i++) CHECK_NEAR(dx[i], 0, 1e-5);
}

// L = sum_i w_i y_i; dL/dx, dL/dgamma, dL/dbeta by central differences of the forward against the
// backward with dy + dy2 = w (a skip connection's two gradients), with and without the ReLU. A coordinate whose step
// moves a pre-activation across the ReLU's kink is skipped (the difference is not the derivative there); few may be.
TK_TEST(instnorm_backward_finite_differences) {
    tk_err e = {0};
    enum { N = 2, S = 27, C = 3, NE = N * S * C };
    float x[NE], wgt[NE], dy[NE], dy2[NE], gamma[C] = {1.5f, -0.7f, 1.1f}, beta[C] = {0.2f, 0.1f, -0.3f};
    tk_test_fill(x, NE, 29, 2, -2, 2), tk_test_fill(wgt, NE, 29, 3, -1, 1), tk_test_fill(dy2, NE, 29, 4, -1, 1);
    for (int i = 0; i < NE; i++) dy[i] = wgt[i] - dy2[i];
    for (int relu = 0; relu < 2; relu++) {
        float y[NE], dx[NE], sm[N * C], si[N * C], dg[C], db[C];
        CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, gamma, beta, relu, TK_INSTNORM_EPS, sm, si, y, &e), 0);
        CHECK_EQ_INT(tk_instnorm_bwd_ref(TK_F32, x, relu ? y : NULL, dy, dy2, N, S, C, gamma, sm, si, dx, dg, db, &e),
                     0);
        float xx[NE], gg[C], bb[C], tmp[NE], pre0[NE], pre[NE], tsm[N * C], tsi[N * C];
        memcpy(xx, x, sizeof x), memcpy(gg, gamma, sizeof gamma), memcpy(bb, beta, sizeof beta);
        CHECK_EQ_INT(tk_instnorm_fwd_ref(TK_F32, x, N, S, C, gamma, beta, 0, TK_INSTNORM_EPS, tsm, tsi, pre0, &e), 0);
        const double h = 1e-3;
        double worst = 0;
        int skipped = 0, tried = 0;
        // L at the current (xx, gg, bb); *kink set when a pre-activation changed sign
#define LOSS(out, kink)                                                                                                \
    do {                                                                                                               \
        tk_instnorm_fwd_ref(TK_F32, xx, N, S, C, gg, bb, relu, TK_INSTNORM_EPS, tsm, tsi, tmp, &e);                    \
        tk_instnorm_fwd_ref(TK_F32, xx, N, S, C, gg, bb, 0, TK_INSTNORM_EPS, tsm, tsi, pre, &e);                       \
        (out) = 0;                                                                                                     \
        for (int i_ = 0; i_ < NE; i_++) {                                                                              \
            (out) += (double)tmp[i_] * wgt[i_];                                                                        \
            (kink) |= relu && (pre[i_] > 0) != (pre0[i_] > 0);                                                         \
        }                                                                                                              \
    } while (0)
#define FD(v, v0, g)                                                                                                   \
    do {                                                                                                               \
        float up = (float)((v0) + h), dn = (float)((v0)-h);                                                            \
        double lp, lm;                                                                                                 \
        int kink = 0;                                                                                                  \
        v = up;                                                                                                        \
        LOSS(lp, kink);                                                                                                \
        v = dn;                                                                                                        \
        LOSS(lm, kink);                                                                                                \
        v = (v0);                                                                                                      \
        tried++;                                                                                                       \
        if (kink)                                                                                                      \
            skipped++;                                                                                                 \
        else                                                                                                           \
            worst = fmax(worst, fabs((lp - lm) / ((double)up - dn) - (g)));                                            \
    } while (0)
        for (int i = 0; i < NE; i++) FD(xx[i], x[i], dx[i]);
        for (int c = 0; c < C; c++) {
            FD(gg[c], gamma[c], dg[c]);
            FD(bb[c], beta[c], db[c]);
        }
#undef FD
#undef LOSS
        printf("# instnorm backward, relu %d: worst |finite difference - analytic| %.2e (%d of %d skipped at the "
               "kink)\n",
               relu, worst, skipped, tried);
        CHECK(worst < 2e-3);
        CHECK(skipped * 10 < tried);
    }
}

// ---- Dice + cross-entropy ----

// Equal logits: p = 1/3 everywhere, so I_k = T_k / 3, P_k = S / 3, ce = log 3, and the gradient
// follows from dice_ce.h's formulas evaluated here in fp64.
TK_TEST(dice_ce_uniform_logits) {
    tk_err e = {0};
    enum { N = 2, S = 6, K = 3 };
    const uint8_t label[N * S] = {0, 1, 1, 2, 0, 0, /**/ 2, 2, 2, 0, 1, 0};
    float z[N * S * K], dz[N * S * K], loss, dice[N * 2];
    for (int i = 0; i < N * S * K; i++) z[i] = 0.5f;
    CHECK_EQ_INT(tk_dice_ce_ref(TK_F32, z, label, N, S, 3, &loss, dice, dz, &e), 0);
    double want_d[N][2], den[N][2], dsum = 0;
    for (int n = 0; n < N; n++)
        for (int k = 1; k <= 2; k++) {
            int T = 0;
            for (int s = 0; s < S; s++) T += label[n * S + s] == k;
            den[n][k - 1] = T + S / 3.0 + 1e-6;
            want_d[n][k - 1] = (2 * T / 3.0 + 1e-6) / den[n][k - 1];
            dsum += want_d[n][k - 1];
            CHECK_NEAR(dice[n * 2 + k - 1], want_d[n][k - 1], 1e-6);
        }
    CHECK_NEAR(loss, (1 - dsum / (2 * N) + log(3.0)) / 2, 1e-6);
    int bad = 0;
    for (int n = 0; n < N; n++)
        for (int s = 0; s < S; s++) {
            const int y = label[n * S + s];
            double g[K] = {0, 0, 0}, pg = 0;
            for (int k = 1; k < K; k++) g[k] = -(2.0 * (y == k) - want_d[n][k - 1]) / (4.0 * N * den[n][k - 1]);
            for (int k = 0; k < K; k++) pg += g[k] / 3;
            for (int k = 0; k < K; k++) {
                const double want = (g[k] - pg) / 3 + (1 / 3.0 - (y == k)) / (2.0 * N * S);
                bad += fabs(dz[(n * S + s) * K + k] - want) > 1e-7;
            }
        }
    CHECK_EQ_INT(bad, 0);
    // the loss alone (dz NULL) is the same; a label outside 0..2 is refused, naming its voxel
    float loss2;
    CHECK_EQ_INT(tk_dice_ce_ref(TK_F32, z, label, N, S, 3, &loss2, NULL, NULL, &e), 0);
    CHECK(loss2 == loss);
    uint8_t bad_label[N * S];
    memcpy(bad_label, label, sizeof label);
    bad_label[S + 4] = 3;
    CHECK_EQ_INT(tk_dice_ce_ref(TK_F32, z, bad_label, N, S, 3, &loss2, NULL, NULL, &e), TK_EINTERNAL);
    CHECK(strstr(e.what, "voxel 4 of sample 1") != NULL);
}

// Confident, correct logits: p -> one-hot of the label, so dice -> 1 and ce -> 0 (loss ~ 0); a
// sample without foreground voxels of a class gets dice ~ 1e-6 / 1e-6 = 1 from the smoothing.
TK_TEST(dice_ce_confident_and_empty_class) {
    tk_err e = {0};
    enum { N = 1, S = 4, K = 3 };
    const uint8_t label[S] = {0, 1, 0, 1}; // no class 2
    float z[S * K], loss, dice[2];
    for (int s = 0; s < S; s++)
        for (int k = 0; k < K; k++) z[s * K + k] = k == label[s] ? 40 : -40;
    CHECK_EQ_INT(tk_dice_ce_ref(TK_F32, z, label, N, S, 3, &loss, dice, NULL, &e), 0);
    CHECK_NEAR(dice[0], 1, 1e-6);
    CHECK_NEAR(dice[1], 1, 1e-6); // (0 + 1e-6) / (0 + ~0 + 1e-6): the softmax's p_2 ~ e^-80
    CHECK_NEAR(loss, 0, 1e-6);
}

// Padded rows (ld 8: an output layer padded to 8 channels): the same loss, dice and gradient as the
// dense rows, whatever the pad columns of z hold; the pad columns of dz are 0.
TK_TEST(dice_ce_padded_rows) {
    tk_err e = {0};
    enum { N = 2, S = 5, K = 3, LD = 8 };
    const uint8_t label[N * S] = {0, 1, 2, 1, 0, /**/ 2, 0, 0, 2, 1};
    float z[N * S * K], zp[N * S * LD], dz[N * S * K], dzp[N * S * LD], loss, lossp, dice[2 * N], dicep[2 * N];
    tk_test_fill(z, N * S * K, 43, 1, -3, 3), tk_test_fill(zp, N * S * LD, 43, 2, -50, 50);
    for (int i = 0; i < N * S; i++)
        for (int k = 0; k < K; k++) zp[i * LD + k] = z[i * K + k];
    for (int i = 0; i < N * S * LD; i++) dzp[i] = NAN;
    CHECK_EQ_INT(tk_dice_ce_ref(TK_F32, z, label, N, S, K, &loss, dice, dz, &e), 0);
    CHECK_EQ_INT(tk_dice_ce_ref(TK_F32, zp, label, N, S, LD, &lossp, dicep, dzp, &e), 0);
    CHECK(loss == lossp);
    CHECK(memcmp(dice, dicep, sizeof dice) == 0);
    int bad = 0;
    for (int i = 0; i < N * S; i++)
        for (int k = 0; k < LD; k++) bad += dzp[i * LD + k] != (k < K ? dz[i * K + k] : 0.0f);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(tk_dice_ce_ref(TK_F32, z, label, N, S, 2, &loss, NULL, NULL, &e), TK_EINTERNAL);
}

// The gradient against central differences of the loss (h = 1e-2: the loss is fp32, the gradients
// are of order 1 / (2 N S)).
TK_TEST(dice_ce_finite_differences) {
    tk_err e = {0};
    enum { N = 2, S = 5, K = 3, NE = N * S * K };
    float z[NE], dz[NE], loss, lp, lm;
    uint8_t label[N * S] = {0, 1, 2, 1, 0, /**/ 2, 0, 0, 2, 1};
    tk_test_fill(z, NE, 31, 1, -2, 2);
    CHECK_EQ_INT(tk_dice_ce_ref(TK_F32, z, label, N, S, 3, &loss, NULL, dz, &e), 0);
    double worst = 0, gmax = 0;
    for (int i = 0; i < NE; i++) {
        const float z0 = z[i], up = z0 + 1e-2f, dn = z0 - 1e-2f;
        z[i] = up;
        tk_dice_ce_ref(TK_F32, z, label, N, S, 3, &lp, NULL, NULL, &e);
        z[i] = dn;
        tk_dice_ce_ref(TK_F32, z, label, N, S, 3, &lm, NULL, NULL, &e);
        z[i] = z0;
        worst = fmax(worst, fabs(((double)lp - lm) / ((double)up - dn) - dz[i]));
        gmax = fmax(gmax, fabs(dz[i]));
    }
    printf("# dice_ce: worst |finite difference - analytic| %.2e (largest gradient %.2e)\n", worst, gmax);
    CHECK(worst < 1e-4);
    CHECK(gmax > 1e-2);
}

// ---- 3-D convolution ----

// The three passes by their definitions, in fp64: every (output voxel, tap) pair's products
// scattered into y, dx and dw (zeroed here); the reference gathers, in fp32.
static void conv3d_direct(const tk_conv3d_shape *s, const float *x, const float *w, const float *dy, double *y,
                          double *dx, double *dw) {
    memset(y, 0, (size_t)tk_conv3d_y_numel(s) * sizeof(double));
    memset(dx, 0, (size_t)tk_conv3d_x_numel(s) * sizeof(double));
    memset(dw, 0, (size_t)tk_conv3d_w_numel(s) * sizeof(double));
    for (int n = 0; n < s->N; n++)
        for (int z = 0; z < s->Z; z++)
            for (int p = 0; p < s->P; p++)
                for (int q = 0; q < s->Q; q++)
                    for (int a = 0; a < s->T; a++)
                        for (int r = 0; r < s->R; r++)
                            for (int u = 0; u < s->S; u++) {
                                const int d = z * s->stride - s->pad + a, h = p * s->stride - s->pad + r,
                                          ww = q * s->stride - s->pad + u;
                                if (d < 0 || d >= s->D || h < 0 || h >= s->H || ww < 0 || ww >= s->W) continue;
                                for (int k = 0; k < s->K; k++)
                                    for (int c = 0; c < s->C; c++) {
                                        const size_t ix = ((((size_t)n * s->D + d) * s->H + h) * s->W + ww) * s->C + c;
                                        const size_t iy = ((((size_t)n * s->Z + z) * s->P + p) * s->Q + q) * s->K + k;
                                        const size_t iw = ((((size_t)k * s->T + a) * s->R + r) * s->S + u) * s->C + c;
                                        y[iy] += (double)x[ix] * w[iw];
                                        dx[ix] += (double)dy[iy] * w[iw];
                                        dw[iw] += (double)dy[iy] * x[ix];
                                    }
                            }
}

// The three passes on small integers, against conv3d_direct's sums (exact in fp64, and in fp32,
// which holds every partial sum of these integers exactly).
static void conv3d_exact(const tk_conv3d_shape *s, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const size_t nx = (size_t)tk_conv3d_x_numel(s), ny = (size_t)tk_conv3d_y_numel(s),
                 nw = (size_t)tk_conv3d_w_numel(s);
    float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *out = malloc((nx + ny + nw) * 4);
    double *y = malloc(ny * 8), *dx = malloc(nx * 8), *dw = malloc(nw * 8);
    uint16_t *xb = malloc(nx * 2), *wb = malloc(nw * 2), *dyb = malloc(ny * 2), *ob = malloc((nx + ny + nw) * 2);
    // integers in [-2, 2]: fp32 holds every sum exactly
    tk_test_fill(x, nx, 37, 1, -2, 3), tk_test_fill(w, nw, 37, 2, -2, 3), tk_test_fill(dy, ny, 37, 3, -2, 3);
    for (size_t i = 0; i < nx; i++) x[i] = floorf(x[i]);
    for (size_t i = 0; i < nw; i++) w[i] = floorf(w[i]);
    for (size_t i = 0; i < ny; i++) dy[i] = floorf(dy[i]);
    conv3d_direct(s, x, w, dy, y, dx, dw);
    const double *want[3] = {y, dx, dw};
    const size_t nout[3] = {ny, nx, nw};
    for (int pass = 0; pass < 3; pass++) {
        const float *a = pass == TK_CONV_BWD_DATA ? dy : x, *b = pass == TK_CONV_BWD_FILTER ? dy : w;
        CHECK_EQ_INT(tk_conv3d_ref((tk_conv_pass)pass, s, TK_F32, a, b, out, &e), 0);
        int bad = 0;
        for (size_t i = 0; i < nout[pass]; i++) bad += out[i] != (float)want[pass][i];
        if (bad)
            printf("# conv3d %dx%dx%d/%d pad %d, pass %d: %d of %zu differ\n", s->T, s->R, s->S, s->stride, s->pad,
                   pass, bad, nout[pass]);
        CHECK_EQ_INT(bad, 0);
    }
    // bf16: the same inputs (exact in bf16) give the exact sums rounded to bf16 once (fp32 accumulation)
    for (size_t i = 0; i < nx; i++) xb[i] = tk_f32_to_bf16(x[i]);
    for (size_t i = 0; i < nw; i++) wb[i] = tk_f32_to_bf16(w[i]);
    for (size_t i = 0; i < ny; i++) dyb[i] = tk_f32_to_bf16(dy[i]);
    for (int pass = 0; pass < 3; pass++) {
        const uint16_t *a = pass == TK_CONV_BWD_DATA ? dyb : xb, *b = pass == TK_CONV_BWD_FILTER ? dyb : wb;
        CHECK_EQ_INT(tk_conv3d_ref((tk_conv_pass)pass, s, TK_BF16, a, b, ob, &e), 0);
        int bad = 0;
        for (size_t i = 0; i < nout[pass]; i++) bad += ob[i] != tk_f32_to_bf16((float)want[pass][i]);
        CHECK_EQ_INT(bad, 0);
    }
    free(x), free(w), free(dy), free(out), free(y), free(dx), free(dw), free(xb), free(wb), free(dyb), free(ob);
}

TK_TEST(conv3d_exact_unet_shapes) {
    tk_err e = {0};
    tk_conv3d_shape s;
    // 3x3x3 stride 1 pad 1 (every block's second convolution), uneven extents
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 2, 5, 4, 6, 3, 4, 3, 1, 1, &e), 0);
    CHECK(s.Z == 5 && s.P == 4 && s.Q == 6);
    conv3d_exact(&s, tk_failed_);
    // 3x3x3 stride 2 pad 1 (downsampling), odd and even extents: 7 -> 4, 6 -> 3, 5 -> 3
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 2, 7, 6, 5, 4, 3, 3, 2, 1, &e), 0);
    CHECK(s.Z == 4 && s.P == 3 && s.Q == 3);
    conv3d_exact(&s, tk_failed_);
    // 1x1x1 (the output layer, 3 classes)
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 2, 3, 4, 5, 8, 3, 1, 1, 0, &e), 0);
    conv3d_exact(&s, tk_failed_);
    // 2x2x2 stride 2 (the convolution the upsampling transposes)
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 1, 6, 4, 8, 3, 5, 2, 2, 0, &e), 0);
    CHECK(s.Z == 3 && s.P == 2 && s.Q == 4);
    conv3d_exact(&s, tk_failed_);
    // channel counts over one register block (8) and not a multiple of it, rows not a multiple of 4
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 1, 5, 4, 3, 10, 17, 3, 1, 1, &e), 0);
    conv3d_exact(&s, tk_failed_);
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 2, 6, 5, 9, 19, 9, 3, 2, 1, &e), 0);
    conv3d_exact(&s, tk_failed_);
    // shapes with no output are refused
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 1, 2, 4, 4, 1, 1, 3, 1, 0, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_conv3d_shape_init(&s, 1, 4, 4, 4, 1, 1, 3, 0, 1, &e), TK_EINTERNAL);
}

// ConvTranspose3d(Cin, Cout, 2, stride 2) by its own definition: every input voxel (i, j, l) spreads
// in[ci] * wt[ci, a, b, c, co] to output voxel (2i + a, 2j + b, 2l + c); against the backward data
// pass of tk_conv3d_shape_transposed's convolution.
TK_TEST(conv3d_transposed_upsampling) {
    tk_err e = {0};
    enum { N = 2, Di = 3, Hi = 2, Wi = 4, Ci = 4, Co = 3, k = 2 };
    tk_conv3d_shape s;
    CHECK_EQ_INT(tk_conv3d_shape_transposed(&s, N, Di, Hi, Wi, Ci, Co, k, 2, 0, &e), 0);
    CHECK(s.D == 6 && s.H == 4 && s.W == 8 && s.C == Co && s.K == Ci && s.Z == Di && s.P == Hi && s.Q == Wi);
    enum { NI = N * Di * Hi * Wi * Ci, NO = N * 6 * 4 * 8 * Co, NW = Ci * k * k * k * Co };
    float in[NI], wt[NW], out[NO], want[NO];
    tk_test_fill(in, NI, 41, 1, -3, 4), tk_test_fill(wt, NW, 41, 2, -3, 4);
    for (int i = 0; i < NI; i++) in[i] = floorf(in[i]);
    for (int i = 0; i < NW; i++) wt[i] = floorf(wt[i]);
    memset(want, 0, sizeof want);
    for (int n = 0; n < N; n++)
        for (int i = 0; i < Di; i++)
            for (int j = 0; j < Hi; j++)
                for (int l = 0; l < Wi; l++)
                    for (int ci = 0; ci < Ci; ci++)
                        for (int a = 0; a < k; a++)
                            for (int b = 0; b < k; b++)
                                for (int c = 0; c < k; c++)
                                    for (int co = 0; co < Co; co++)
                                        want[((((size_t)n * 6 + 2 * i + a) * 4 + 2 * j + b) * 8 + 2 * l + c) * Co +
                                             co] += in[(((n * Di + i) * Hi + j) * Wi + l) * Ci + ci] *
                                                    wt[(((ci * k + a) * k + b) * k + c) * Co + co];
    CHECK_EQ_INT(tk_conv3d_ref(TK_CONV_BWD_DATA, &s, TK_F32, in, wt, out, &e), 0);
    int bad = 0;
    for (int i = 0; i < NO; i++) bad += out[i] != want[i];
    CHECK_EQ_INT(bad, 0);
    // the output size of ConvTranspose3d: (in - 1) stride - 2 pad + k
    CHECK_EQ_INT(tk_conv3d_shape_transposed(&s, 1, 5, 5, 5, 8, 4, 3, 2, 1, &e), 0);
    CHECK(s.D == 9 && s.Z == 5);
}

// The three fp32 passes on random values against conv3d_direct, max |out - direct| <= 1e-5 max
// |direct| per pass: each of the U-Net's filter shapes with every channel count 1..9 as C and as K
// (the reference's unrolled small-channel kernels), odd and even extents, rows longer and shorter
// than its vector blocks, batch 1 and 2, and counts over 8 and 16.
TK_TEST(conv3d_random_vs_direct) {
    static const int kf[4][3] = {{3, 1, 1}, {3, 2, 1}, {2, 2, 0}, {1, 1, 0}}; // k, stride, pad
    tk_err e = {0};
    double worst = 0;
    int nshapes = 0;
    for (int f = 0; f < 4; f++)
        for (int C = 1; C <= 11; C++) {
            const int K = C == 10 ? 20 : C == 11 ? 3 : 1 + (4 * C + f) % 9, Ci = C == 11 ? 17 : C;
            const int N = 1 + C % 2, D = 3 + (C + f) % 3, H = 4 + (C * f) % 3, W = 5 + (7 * C + 3 * f) % 33;
            tk_conv3d_shape s;
            CHECK_EQ_INT(tk_conv3d_shape_init(&s, N, D, H, W, Ci, K, kf[f][0], kf[f][1], kf[f][2], &e), 0);
            const size_t nx = (size_t)tk_conv3d_x_numel(&s), ny = (size_t)tk_conv3d_y_numel(&s),
                         nw = (size_t)tk_conv3d_w_numel(&s);
            float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *out = malloc((nx + ny + nw) * 4);
            double *want[3] = {malloc(ny * 8), malloc(nx * 8), malloc(nw * 8)};
            tk_test_fill(x, nx, 43, (uint32_t)(3 * nshapes), -1, 1);
            tk_test_fill(w, nw, 43, (uint32_t)(3 * nshapes + 1), -1, 1);
            tk_test_fill(dy, ny, 43, (uint32_t)(3 * nshapes + 2), -1, 1);
            conv3d_direct(&s, x, w, dy, want[0], want[1], want[2]);
            const size_t nout[3] = {ny, nx, nw};
            for (int pass = 0; pass < 3; pass++) {
                const float *a = pass == TK_CONV_BWD_DATA ? dy : x, *b = pass == TK_CONV_BWD_FILTER ? dy : w;
                CHECK_EQ_INT(tk_conv3d_ref((tk_conv_pass)pass, &s, TK_F32, a, b, out, &e), 0);
                double err = 0, big = 0;
                for (size_t i = 0; i < nout[pass]; i++)
                    err = fmax(err, fabs(out[i] - want[pass][i])), big = fmax(big, fabs(want[pass][i]));
                worst = fmax(worst, err / big);
                if (err > 1e-5 * big)
                    printf("# conv3d %d %dx%dx%dx%d K %d %d/%d pad %d, pass %d: error %.2e of %.2e\n", N, D, H, W, Ci,
                           K, kf[f][0], kf[f][1], kf[f][2], pass, err, big);
                CHECK(err <= 1e-5 * big);
            }
            free(x), free(w), free(dy), free(out), free(want[0]), free(want[1]), free(want[2]);
            nshapes++;
        }
    printf("# conv3d: %d random shapes, worst error / largest value %.2e\n", nshapes, worst);
}

// The CPU time of the process (every thread's, idle OpenMP threads' spinning included): on a shared
// machine a steadier measure than the wall clock; with OMP_NUM_THREADS=1 the time a pass costs one
// core.
static double clock_ms(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}
static double cpu_ms(void) { return clock_ms(CLOCK_PROCESS_CPUTIME_ID); }

// With TK_BENCH set: the fp32 passes of every convolution of the 3D U-Net at widths 2 and 4 on
// 64^3 crops, batch 2 (lib/workloads/unet3d/model.c's layers), CPU ms per pass (the best of 2),
// and their sum: one training step's convolution time on the cpu backend (and the wall clock's).
TK_TEST(conv3d_bench_unet) {
    if (!getenv("TK_BENCH")) {
        printf("# conv3d_bench_unet: set TK_BENCH to time it\n");
        return;
    }
    enum { B = 2 };
    static const int dim[6] = {64, 32, 16, 8, 4, 2};
    tk_err e = {0};
    const int only = atoi(getenv("TK_BENCH")); // 2 or 4: that width only
    for (int width = 2; width <= 4; width += 2) {
        if (only == 2 || only == 4) width = only;
        // (D or Din, C or Cin, K or Cout, k, stride, pad, transposed) in the model's order
        int L[32][7], n = 0;
#define F(l) ((l) < 4 ? width << (l) : 10 * width)
#define LAYER(d, c, k, kk, st, pd, tr) (L[n][0] = d, L[n][1] = c, L[n][2] = k, L[n][3] = kk, L[n][4] = st, \
                                        L[n][5] = pd, L[n][6] = tr, n++)
        LAYER(64, 1, width, 3, 1, 1, 0);
        LAYER(64, width, width, 3, 1, 1, 0);
        for (int i = 0; i < 5; i++) {
            const int co = F(i < 4 ? i + 1 : 4);
            LAYER(dim[i], F(i), co, 3, 2, 1, 0);
            LAYER(dim[i + 1], co, co, 3, 1, 1, 0);
        }
        for (int j = 0, cin = F(4); j < 5; j++) {
            const int l = 4 - j, co = F(l);
            LAYER(dim[l + 1], cin, co, 2, 2, 0, 1);
            LAYER(dim[l], 2 * co, co, 3, 1, 1, 0);
            LAYER(dim[l], co, co, 3, 1, 1, 0);
            cin = co;
        }
        LAYER(64, width, 3, 1, 1, 0, 0);
#undef LAYER
#undef F
        double total[3] = {0}, wall = 0;
        for (int i = 0; i < n; i++) {
            const int *l = L[i];
            tk_conv3d_shape s;
            CHECK_EQ_INT(l[6] ? tk_conv3d_shape_transposed(&s, B, l[0], l[0], l[0], l[1], l[2], l[3], l[4], l[5], &e)
                              : tk_conv3d_shape_init(&s, B, l[0], l[0], l[0], l[1], l[2], l[3], l[4], l[5], &e),
                         0);
            const size_t nx = (size_t)tk_conv3d_x_numel(&s), ny = (size_t)tk_conv3d_y_numel(&s),
                         nw = (size_t)tk_conv3d_w_numel(&s);
            float *x = malloc(nx * 4), *w = malloc(nw * 4), *dy = malloc(ny * 4), *out = malloc((nx + ny + nw) * 4);
            tk_test_fill(x, nx, 47, 1, -1, 1), tk_test_fill(w, nw, 47, 2, -1, 1), tk_test_fill(dy, ny, 47, 3, -1, 1);
            double ms[3];
            for (int pass = 0; pass < 3; pass++) {
                const float *a = pass == TK_CONV_BWD_DATA ? dy : x, *b = pass == TK_CONV_BWD_FILTER ? dy : w;
                ms[pass] = 1e30;
                double best_wall = 1e30;
                for (int rep = 0; rep < 2; rep++) {
                    const double t0 = cpu_ms(), w0 = clock_ms(CLOCK_MONOTONIC);
                    CHECK_EQ_INT(tk_conv3d_ref((tk_conv_pass)pass, &s, TK_F32, a, b, out, &e), 0);
                    ms[pass] = fmin(ms[pass], cpu_ms() - t0);
                    best_wall = fmin(best_wall, clock_ms(CLOCK_MONOTONIC) - w0);
                }
                total[pass] += ms[pass], wall += best_wall;
            }
            printf("# width %d %s %2d^3 %2d -> %2d %dx%dx%d/%d: fwd %7.2f bwd_data %7.2f bwd_filter %7.2f ms\n", width,
                   l[6] ? "up  " : "conv", l[0], l[1], l[2], l[3], l[3], l[3], l[4], ms[0], ms[1], ms[2]);
            free(x), free(w), free(dy), free(out);
        }
        printf("# width %d total: fwd %.1f bwd_data %.1f bwd_filter %.1f, all %.1f ms (wall clock %.1f ms)\n", width,
               total[0], total[1], total[2], total[0] + total[1] + total[2], wall);
        if (only == 2 || only == 4) break;
    }
}

// The bias: y + b per channel, and the column sums of dy, on small integers (exact).
TK_TEST(conv3d_bias_exact) {
    tk_err e = {0};
    enum { M = 10, K = 3 };
    const float b[K] = {0.5f, -2, 3};
    float y[M * K], dy[M * K], db[K];
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) y[m * K + k] = (float)(m - k), dy[m * K + k] = (float)(m % 3 - k);
    CHECK_EQ_INT(tk_conv3d_bias_fwd_ref(TK_F32, y, M, K, b, &e), 0);
    int bad = 0;
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++) bad += y[m * K + k] != (float)(m - k) + b[k];
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(tk_conv3d_bias_bwd_ref(TK_F32, dy, M, K, db, &e), 0);
    // sum over m of (m % 3) - k: 0+1+2 three times and 0 once = 9, minus 10 k
    for (int k = 0; k < K; k++) CHECK(db[k] == 9 - 10 * k);
    uint16_t yb[2] = {tk_f32_to_bf16(1), tk_f32_to_bf16(256)};
    const float b1[1] = {1};
    CHECK_EQ_INT(tk_conv3d_bias_fwd_ref(TK_BF16, yb, 2, 1, b1, &e), 0);
    CHECK(tk_bf16_to_f32(yb[0]) == 2 && tk_bf16_to_f32(yb[1]) == 256); // 257 rounds to even in bf16
    CHECK_EQ_INT(tk_conv3d_bias_bwd_ref(TK_F32, dy, 0, K, db, &e), TK_EINTERNAL);
}

// The skip connection's concatenation and its gradient's split, on small integers: every element
// where the definition puts it, and the split undoes the concatenation.
TK_TEST(colcat_exact) {
    tk_err e = {0};
    enum { R = 5, CA = 3, CB = 2 };
    float a[R * CA], b[R * CB], out[R * (CA + CB)], a2[R * CA], b2[R * CB];
    const float bias[CA] = {0.5f, -4, 8};
    for (int i = 0; i < R * CA; i++) a[i] = (float)i;
    for (int i = 0; i < R * CB; i++) b[i] = (float)(-1 - i);
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        CHECK_EQ_INT(tk_colcat_ref(TK_F32, a, CA, with_bias ? bias : NULL, b, CB, R, out, &e), 0);
        int bad = 0;
        for (int r = 0; r < R; r++)
            for (int k = 0; k < CA + CB; k++)
                bad += out[r * (CA + CB) + k] != (k < CA ? (float)(r * CA + k) + (with_bias ? bias[k] : 0)
                                                         : (float)(-1 - (r * CB + k - CA)));
        CHECK_EQ_INT(bad, 0);
    }
    CHECK_EQ_INT(tk_colcat_ref(TK_F32, a, CA, NULL, b, CB, R, out, &e), 0);
    CHECK_EQ_INT(tk_colsplit_ref(TK_F32, out, CA, CB, R, a2, b2, &e), 0);
    CHECK(!memcmp(a, a2, sizeof a) && !memcmp(b, b2, sizeof b));
    // bf16: bits copied as they are; with a bias the sum rounded once (256 + 1 to even: 256)
    uint16_t h[4] = {1, 2, 3, tk_f32_to_bf16(256)}, g[2] = {9, 8}, o[6];
    CHECK_EQ_INT(tk_colcat_ref(TK_BF16, h, 2, NULL, g, 1, 2, o, &e), 0);
    CHECK(o[0] == 1 && o[1] == 2 && o[2] == 9 && o[3] == 3 && o[4] == h[3] && o[5] == 8);
    const float one[2] = {1, 1};
    h[0] = tk_f32_to_bf16(2);
    CHECK_EQ_INT(tk_colcat_ref(TK_BF16, h, 2, one, g, 1, 2, o, &e), 0);
    CHECK(tk_bf16_to_f32(o[0]) == 3 && tk_bf16_to_f32(o[4]) == 256 && o[2] == 9);
    CHECK_EQ_INT(tk_colcat_ref(TK_U8, a, CA, NULL, b, CB, R, out, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_colsplit_ref(TK_F32, out, 0, CB, R, a2, b2, &e), TK_EINTERNAL);
}

// The oracle driver (see the top of the file).
static int drive_dice_ce(const char *type, tk_err *e) {
    tk_dtype t = strcmp(type, "bf16") == 0 ? TK_BF16 : strcmp(type, "f32") == 0 ? TK_F32 : TK_U8;
    if (t == TK_U8) return tk_err_set(e, TK_EUSAGE, "TK_DICE_CE_DRIVE must be f32 or bf16, not \"%s\"", type);
    int N;
    long long S;
    if (scanf("%d %lld", &N, &S) != 2 || N < 1 || S < 1 || N * S > 100000000)
        return tk_err_set(e, TK_EDATA, "stdin: no \"N S\" line");
    const size_t nv = (size_t)N * S;
    float *z = malloc(nv * 3 * sizeof(float)), *dz = malloc(nv * 3 * sizeof(float)),
          *dice = malloc(N * 2 * sizeof(float));
    uint16_t *zb = malloc(nv * 3 * 2), *dzb = malloc(nv * 3 * 2);
    uint8_t *label = malloc(nv);
    int rc = !z || !dz || !dice || !zb || !dzb || !label ? tk_err_set(e, TK_EIO, "out of memory") : 0;
    for (size_t i = 0; i < nv && !rc; i++) {
        int y;
        if (scanf("%f %f %f %d", &z[3 * i], &z[3 * i + 1], &z[3 * i + 2], &y) != 4 || y < 0 || y > 255)
            rc = tk_err_set(e, TK_EDATA, "stdin: voxel %zu: no \"z0 z1 z2 label\" line", i);
        label[i] = (uint8_t)y;
    }
    for (size_t i = 0; i < nv * 3 && !rc; i++) zb[i] = tk_f32_to_bf16(z[i]);
    float loss = 0;
    if (!rc)
        rc = tk_dice_ce_ref(t, t == TK_BF16 ? (void *)zb : z, label, N, S, 3, &loss, dice,
                            t == TK_BF16 ? (void *)dzb : dz, e);
    if (!rc) {
        printf("loss %.9g\ndice", loss);
        for (int i = 0; i < 2 * N; i++) printf(" %.9g", dice[i]);
        printf("\n");
        for (size_t i = 0; i < nv * 3; i++)
            printf("%.9g%c", t == TK_BF16 ? tk_bf16_to_f32(dzb[i]) : dz[i], i % 3 == 2 ? '\n' : ' ');
        if (fflush(stdout)) rc = tk_err_set(e, TK_EIO, "stdout: write failed");
    }
    free(z), free(dz), free(dice), free(zb), free(dzb), free(label);
    return rc;
}

// n floats from stdin into a new array (NULL with e filled when they are not there).
static float *read_floats(size_t n, const char *what, tk_err *e) {
    float *p = malloc(n * sizeof(float) + 1);
    for (size_t i = 0; p && i < n; i++)
        if (scanf("%f", &p[i]) != 1) {
            free(p);
            tk_err_set(e, TK_EDATA, "stdin: %s: value %zu of %zu missing", what, i, n);
            return NULL;
        }
    if (!p && !e->code) tk_err_set(e, TK_EIO, "out of memory");
    return p;
}
static void print_tensor(const char *name, const float *p, size_t n) {
    printf("%s %zu\n", name, n);
    for (size_t i = 0; i < n; i++) printf("%.9g\n", p[i]);
}

static int drive_conv3d(tk_err *e) {
    int N, D, H, W, C, K, k, stride, pad, transposed;
    if (scanf("%d %d %d %d %d %d %d %d %d %d", &N, &D, &H, &W, &C, &K, &k, &stride, &pad, &transposed) != 10)
        return tk_err_set(e, TK_EDATA, "stdin: no \"N D H W C K k stride pad transposed\" line");
    tk_conv3d_shape s;
    // transposed: the convolution whose backward data pass it is (its x the output, y the input)
    TRY(transposed ? tk_conv3d_shape_transposed(&s, N, D, H, W, C, K, k, stride, pad, e)
                   : tk_conv3d_shape_init(&s, N, D, H, W, C, K, k, stride, pad, e));
    const size_t nx = (size_t)tk_conv3d_x_numel(&s), ny = (size_t)tk_conv3d_y_numel(&s),
                 nw = (size_t)tk_conv3d_w_numel(&s);
    const size_t nin = transposed ? ny : nx, nout = transposed ? nx : ny;
    float *in = read_floats(nin, "input", e), *w = in ? read_floats(nw, "filters", e) : NULL,
          *dout = w ? read_floats(nout, "output gradient", e) : NULL;
    float *out = malloc(nout * 4 + 1), *din = malloc(nin * 4 + 1), *dw = malloc(nw * 4 + 1);
    int rc = e->code ? e->code : !out || !din || !dw ? tk_err_set(e, TK_EIO, "out of memory") : 0;
    const tk_conv_pass fwd = transposed ? TK_CONV_BWD_DATA : TK_CONV_FWD,
                       bwd = transposed ? TK_CONV_FWD : TK_CONV_BWD_DATA;
    if (!rc) rc = tk_conv3d_ref(fwd, &s, TK_F32, in, w, out, e);
    if (!rc) rc = tk_conv3d_ref(bwd, &s, TK_F32, dout, w, din, e);
    if (!rc)
        rc = transposed ? tk_conv3d_ref(TK_CONV_BWD_FILTER, &s, TK_F32, dout, in, dw, e)
                        : tk_conv3d_ref(TK_CONV_BWD_FILTER, &s, TK_F32, in, dout, dw, e);
    if (!rc) print_tensor("out", out, nout), print_tensor("din", din, nin), print_tensor("dw", dw, nw);
    free(in), free(w), free(dout), free(out), free(din), free(dw);
    return rc;
}

static int drive_instnorm(tk_err *e) {
    int N, C, relu;
    long long S;
    if (scanf("%d %lld %d %d", &N, &S, &C, &relu) != 4 || N < 1 || S < 1 || C < 1 || (double)N * S * C > 1e8)
        return tk_err_set(e, TK_EDATA, "stdin: no \"N S C relu\" line");
    const size_t n = (size_t)N * S * C;
    float *x = read_floats(n, "x", e), *g = x ? read_floats(C, "gamma", e) : NULL,
          *b = g ? read_floats(C, "beta", e) : NULL, *dy = b ? read_floats(n, "dy", e) : NULL;
    float *y = malloc(n * 4 + 1), *dx = malloc(n * 4 + 1), *sm = malloc((size_t)N * C * 4),
          *si = malloc((size_t)N * C * 4), *dg = malloc((size_t)C * 4), *db = malloc((size_t)C * 4);
    int rc = e->code ? e->code : !y || !dx || !sm || !si || !dg || !db ? tk_err_set(e, TK_EIO, "out of memory") : 0;
    if (!rc) rc = tk_instnorm_fwd_ref(TK_F32, x, N, S, C, g, b, relu, TK_INSTNORM_EPS, sm, si, y, e);
    if (!rc) rc = tk_instnorm_bwd_ref(TK_F32, x, relu ? y : NULL, dy, NULL, N, S, C, g, sm, si, dx, dg, db, e);
    if (!rc)
        print_tensor("y", y, n), print_tensor("dx", dx, n), print_tensor("dgamma", dg, C), print_tensor("dbeta", db, C);
    free(x), free(g), free(b), free(dy), free(y), free(dx), free(sm), free(si), free(dg), free(db);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *s = getenv("TK_DICE_CE_DRIVE"), *op = getenv("TK_UNET_OPS_DRIVE");
    if (!s && !op) return;
    tk_err e = {0};
    int rc = s                             ? drive_dice_ce(s, &e)
             : strcmp(op, "conv3d") == 0   ? drive_conv3d(&e)
             : strcmp(op, "instnorm") == 0 ? drive_instnorm(&e)
                                           : tk_err_set(&e, TK_EUSAGE, "TK_UNET_OPS_DRIVE must be conv3d or instnorm");
    tk_drive_exit("test_unet_ops", rc, &e);
}
