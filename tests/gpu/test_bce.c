// kernels/bce.cu against kernels/bce_ref.c: per-sample gradients (within 1 ulp: both in fp64, the
// device's exp/log1p may differ from glibc's in the last bit of a double) and the loss
// accumulated on the device across calls, including extreme logits and a NaN.
#include "bce.h"
#include "gpu_test.h"

TK_TEST(bce_random_and_extremes) {
    const int B = 4099;
    float *z = gt_host(4 * B), *dr = gt_host(4 * B), *dg = gt_host(4 * B), *u = gt_host(4 * B);
    uint8_t *y = gt_host(B);
    gt_fill(z, B, -8, 8, 0);
    gt_fill(u, B, 0, 1, 0);
    for (int b = 0; b < B; b++) y[b] = u[b] < 0.3f;
    z[0] = 0, z[1] = -40, z[2] = 40, z[3] = 1e-30f, z[4] = -88.5f;
    double accr[2] = {0.5, 3}, accg[2];
    tk_err e = {0};
    for (int r = 0; r < 2; r++) // accumulates across calls
        if (tk_bce_logits_ref(z, y, B, dr, accr, &e)) gt_die_("bce ref", &e);
    float *dz = gt_dev(4 * B), *dd = gt_dev(4 * B);
    uint8_t *dy = gt_dev(B);
    double *dacc = gt_dev(16), init[2] = {0.5, 3};
    gt_up(dz, z, 4 * B), gt_up(dy, y, B), gt_up(dacc, init, 16);
    gt_poison(dd, 4 * B, 0xff);
    for (int r = 0; r < 2; r++) CHECK_EQ_INT(tk_bce_logits(gt_ctx_, dz, dy, B, dd, dacc, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    gt_down(dg, dd, 4 * B), gt_down(accg, dacc, 16);
    int64_t ulps = gt_max_ulps(dg, dr, B);
    double lerr = fabs(accg[0] - accr[0]) / fabs(accr[0]);
    printf("# table bce B %d: dlogit max ulps %lld (%zu differ), loss %.17g vs %.17g (rel %.1e)\n", B, (long long)ulps,
           gt_ndiff(dg, dr, B), accg[0], accr[0], lerr);
    CHECK(ulps <= 1);
    CHECK(lerr <= 1e-13);
    CHECK(accg[1] == accr[1]);
    // loss only (dlogit NULL), then a NaN logit poisons the accumulator
    z[7] = NAN;
    gt_up(dz, z, 4 * B);
    CHECK_EQ_INT(tk_bce_logits(gt_ctx_, dz, dy, B, NULL, dacc, &e), 0);
    gt_down(accg, dacc, 16);
    CHECK(isnan(accg[0]) && accg[1] == 6);
    void *dev[] = {dz, dd, dy, dacc};
    for (int i = 0; i < 4; i++) tk_free(gt_ctx_, dev[i]);
    free(z), free(dr), free(dg), free(u), free(y);
}

// The bf16 variant (logit and dlogit in bf16; fp64 loss) against its reference: dlogit within
// 1e-2 relative (bf16), the loss within 1e-12 (the same fp64 math on the same bf16 logits).
TK_TEST(bce_bf16_logits) {
    const int B = 4099;
    float *z = gt_host(4 * B), *u = gt_host(4 * B), *dr = gt_host(4 * B), *dg = gt_host(4 * B);
    uint16_t *hz = gt_host(2 * B), *hdz = gt_host(2 * B);
    uint8_t *y = gt_host(B);
    gt_fill(z, B, -8, 8, 0), gt_fill(u, B, 0, 1, 0);
    for (int b = 0; b < B; b++) y[b] = u[b] < 0.3f, hz[b] = tk_f32_to_bf16(z[b]);
    double accr[2] = {0, 0}, accg[2];
    tk_err e = {0};
    if (tk_bce_logits_act_ref(TK_BF16, hz, y, B, hdz, accr, &e)) gt_die_("bce bf16 ref", &e);
    for (int b = 0; b < B; b++) dr[b] = tk_bf16_to_f32(hdz[b]);
    void *dz = gt_dev(2 * B), *dd = gt_dev(2 * B);
    uint8_t *dy = gt_dev(B);
    double *dacc = gt_dev(16), zero[2] = {0, 0};
    gt_up_as(dz, z, B, TK_BF16), gt_up(dy, y, B), gt_up(dacc, zero, 16);
    gt_poison(dd, 2 * B, 0xff);
    CHECK_EQ_INT(tk_bce_logits_act(gt_ctx_, TK_BF16, dz, dy, B, dd, dacc, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    gt_down_as(dg, dd, B, TK_BF16), gt_down(accg, dacc, 16);
    double derr = gt_relerr(dg, dr, B), lerr = fabs(accg[0] - accr[0]) / fabs(accr[0]);
    printf("# table bce bf16 B %d: dlogit rel err %.1e (%zu differ), loss rel %.1e\n", B, derr, gt_ndiff(dg, dr, B), lerr);
    CHECK(derr <= 1e-2);
    CHECK(lerr <= 1e-12);
    CHECK(accg[1] == 1);
    void *dev[] = {dz, dd, dy, dacc};
    for (int i = 0; i < 4; i++) tk_free(gt_ctx_, dev[i]);
    free(z), free(u), free(dr), free(dg), free(hz), free(hdz), free(y);
}

// The variant normalized by a global batch N > B (one rank's share of a distributed batch):
// dlogit within 1 ulp of the reference, the loss (sum / N) within 1e-13; fp32 and bf16 logits.
TK_TEST(bce_normalized_share) {
    const int B = 1500, N = 4 * 1500;
    float *z = gt_host(4 * B), *u = gt_host(4 * B), *dr = gt_host(4 * B), *dg = gt_host(4 * B);
    uint8_t *y = gt_host(B);
    gt_fill(z, B, -8, 8, 0), gt_fill(u, B, 0, 1, 0);
    for (int b = 0; b < B; b++) y[b] = u[b] < 0.3f;
    tk_err e = {0};
    double accr[2] = {0, 0}, accg[2];
    if (tk_bce_logits_act_n_ref(TK_F32, z, y, B, N, dr, accr, &e)) gt_die_("bce_n ref", &e);
    float *dz = gt_dev(4 * B), *dd = gt_dev(4 * B);
    uint8_t *dy = gt_dev(B);
    double *dacc = gt_dev(16), zero[2] = {0, 0};
    gt_up(dz, z, 4 * B), gt_up(dy, y, B), gt_up(dacc, zero, 16);
    CHECK_EQ_INT(tk_bce_logits_act_n(gt_ctx_, TK_F32, dz, dy, B, N, dd, dacc, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    gt_down(dg, dd, 4 * B), gt_down(accg, dacc, 16);
    int64_t ulps = gt_max_ulps(dg, dr, B);
    double lerr = fabs(accg[0] - accr[0]) / fabs(accr[0]);
    printf("# table bce share B %d of N %d: dlogit max ulps %lld, loss rel %.1e\n", B, N, (long long)ulps, lerr);
    CHECK(ulps <= 1);
    CHECK(lerr <= 1e-13);
    CHECK(accg[1] == 1);
    // an independent value: the gradient of sample 5 is (sigmoid(z) - y) / N
    CHECK(fabs(dg[5] - (1.0 / (1.0 + exp(-(double)z[5])) - y[5]) / N) <= 1e-7 / N);
    // bf16 logits: the same kernel template, dlogit rounded to bf16
    uint16_t *hz = gt_host(2 * B), *hdz = gt_host(2 * B);
    for (int b = 0; b < B; b++) hz[b] = tk_f32_to_bf16(z[b]);
    accr[0] = accr[1] = 0;
    if (tk_bce_logits_act_n_ref(TK_BF16, hz, y, B, N, hdz, accr, &e)) gt_die_("bce_n bf16 ref", &e);
    for (int b = 0; b < B; b++) dr[b] = tk_bf16_to_f32(hdz[b]);
    void *bz = gt_dev(2 * B), *bd = gt_dev(2 * B);
    gt_up_as(bz, z, B, TK_BF16), gt_up(dacc, zero, 16);
    CHECK_EQ_INT(tk_bce_logits_act_n(gt_ctx_, TK_BF16, bz, dy, B, N, bd, dacc, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    gt_down_as(dg, bd, B, TK_BF16), gt_down(accg, dacc, 16);
    CHECK(gt_relerr(dg, dr, B) <= 1e-2);
    CHECK(fabs(accg[0] - accr[0]) <= 1e-12 * fabs(accr[0]));
    void *dev[] = {dz, dd, dy, dacc, bz, bd};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
    free(z), free(u), free(dr), free(dg), free(y), free(hz), free(hdz);
}
