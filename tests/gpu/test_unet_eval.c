// The 3D U-Net's sliding-window evaluation on the cuda backend against the CPU references
// (kernels/swin.h, kernels/dice_score.h), on fresh random window outputs each run. The kernels are
// written to round as the references do (window order per voxel, no fused multiply-add, IEEE
// division), so the gather, the weighted sums, the weight sums, the argmax and the Dice must come
// out bit for bit; the table also gives the fp32 relative error (<= 1e-5) and the argmax decisions
// that differ where the reference's margin between the top two classes exceeds 1e-4 (must be 0).
// Grids with a crop and a pad: roi 128 over 160 x 130 x 200 (4 windows), roi 32 over
// 70 x 45 x 100 (30 windows), in batches of 1, 3, 4 and all; logits fp32 and bf16, ld 3 and 4.
#include <math.h>

#include "dice_score.h"
#include "gpu_test.h"
#include "swin.h"

static int within(const char *what, const float *got, const float *ref, size_t n, double tol) {
    const double err = gt_relerr(got, ref, n);
    const size_t nd = gt_ndiff(got, ref, n);
    printf("# table unet-eval %-56s rel err %.2e (%zu of %zu differ)%s\n", what, err, nd, n,
           err <= tol && nd == 0 ? "" : "  <-- FAIL");
    return err <= tol && nd == 0;
}

typedef struct {
    int64_t D, H, W;
    int roi, B;
} eval_case;

// One volume: the gather of every batch and the accumulation of random logits on both backends,
// then the Dice against a label that mostly follows the reference's prediction.
static void eval_run(const eval_case *ec, tk_dtype t, int ld, int *tk_failed_) {
    tk_err e = {0};
    tk_swin_grid g;
    CHECK_EQ_INT(tk_swin_grid_init(&g, ec->D, ec->H, ec->W, ec->roi, TK_SWIN_OVERLAP, &e), 0);
    if (e.code) return;
    const size_t nv = (size_t)(ec->D * ec->H * ec->W), rv = (size_t)ec->roi * ec->roi * ec->roi,
                 no = (size_t)tk_swin_out_numel(&g), es = tk_dtype_size(t);
    const int B = ec->B < g.count ? ec->B : (int)g.count;
    float *img = gt_host(nv * 4), *map = gt_host(rv * 4), *y = gt_host(B * rv * ld * 4);
    gt_fill(img, nv, -3, 3, 0);
    tk_swin_gaussian(ec->roi, map);
    float *dimg = gt_dev(nv * 4), *dmap = gt_dev(rv * 4), *dacc = gt_dev(no * 12), *dws = gt_dev(no * 4);
    void *dx = gt_dev(B * rv * ld * es), *dy = gt_dev(B * rv * ld * es);
    gt_up(dimg, img, nv * 4), gt_up(dmap, map, rv * 4);
    CHECK_EQ_INT(cudaMemsetAsync(dacc, 0, no * 12, (cudaStream_t)gt_ctx_->stream[TK_STREAM_COMPUTE]), 0);
    CHECK_EQ_INT(cudaMemsetAsync(dws, 0, no * 4, (cudaStream_t)gt_ctx_->stream[TK_STREAM_COMPUTE]), 0);
    float *acc = calloc(no * 3, 4), *ws = calloc(no, 4);
    void *hx = gt_host(B * rv * ld * es), *hy = gt_host(B * rv * ld * es), *gx = gt_host(B * rv * ld * es);
    size_t xdiff = 0;
    for (int64_t w0 = 0; w0 < g.count; w0 += B) {
        const int nb = g.count - w0 < B ? (int)(g.count - w0) : B;
        const size_t nx = nb * rv * ld;
        gt_poison(dx, nx * es, 0xff);
        CHECK_EQ_INT(tk_swin_gather(gt_ctx_, t, dimg, &g, w0, nb, TK_SWIN_PAD, ld, dx, &e), 0);
        CHECK_EQ_INT(tk_swin_gather_ref(t, img, &g, w0, nb, TK_SWIN_PAD, ld, hx, &e), 0);
        gt_down(gx, dx, nx * es);
        xdiff += memcmp(gx, hx, nx * es) != 0;
        gt_fill(y, nx, -4, 4, 0);
        gt_round(y, nx, t);
        gt_up_as(dy, y, nx, t);
        gt_down(hy, dy, nx * es);
        CHECK_EQ_INT(tk_swin_accumulate(gt_ctx_, t, dy, ld, &g, w0, nb, dmap, dacc, dws, &e), 0);
        CHECK_EQ_INT(tk_swin_accumulate_ref(t, hy, ld, &g, w0, nb, map, acc, ws, &e), 0);
    }
    CHECK_EQ_INT(gt_sync(&e), 0);
    char what[128];
    snprintf(what, sizeof what, "gather %s ld %d %lldx%lldx%lld roi %d B %d", tk_dtype_name(t), ld, (long long)ec->D,
             (long long)ec->H, (long long)ec->W, ec->roi, B);
    printf("# table unet-eval %-56s %zu batches differ%s\n", what, xdiff, xdiff ? "  <-- FAIL" : "");
    CHECK_EQ_INT(xdiff, 0);
    float *gacc = gt_host(no * 12), *gws = gt_host(no * 4);
    gt_down(gacc, dacc, no * 12), gt_down(gws, dws, no * 4);
    snprintf(what, sizeof what, "sums %s ld %d %lldx%lldx%lld roi %d B %d", tk_dtype_name(t), ld, (long long)ec->D,
             (long long)ec->H, (long long)ec->W, ec->roi, B);
    CHECK(within(what, gacc, acc, no * 3, 1e-5));
    snprintf(what, sizeof what, "weights %lldx%lldx%lld roi %d B %d", (long long)ec->D, (long long)ec->H,
             (long long)ec->W, ec->roi, B);
    CHECK(within(what, gws, ws, no, 1e-5));

    // the label: the argmax of the reference's sums, 20% of the voxels at random (outside the crop: all random)
    uint8_t *label = gt_host(nv), *pred = gt_host(no), *gpred = gt_host(no), *dlabel = gt_dev(nv), *dpred = gt_dev(no);
    float *u = gt_host(nv * 4);
    gt_fill(u, nv, 0, 1, 0);
    for (size_t v = 0; v < nv; v++) label[v] = (uint8_t)((int)(u[v] * 15) % 3); // (u < 0.2: 0, 1, 2 alike)
    for (int64_t i = 0; i < g.out[0]; i++)
        for (int64_t j = 0; j < g.out[1]; j++)
            for (int64_t k = 0; k < g.out[2]; k++) {
                const size_t v = ((size_t)i * g.out[1] + j) * g.out[2] + k,
                             l = ((size_t)(i + g.crop[0]) * ec->H + j + g.crop[1]) * ec->W + k + g.crop[2];
                const float *a = &acc[v * 3];
                int best = 0;
                for (int c = 1; c < 3; c++) best = a[c] > a[best] ? c : best;
                if (u[l] >= 0.2f) label[l] = (uint8_t)best;
            }
    gt_up(dlabel, label, nv);
    float dice[2], gdice[2], *ddice = gt_dev(8);
    void *wsp = gt_dev(tk_dice_score_ws_bytes(TK_BACKEND_CUDA));
    gt_poison(dpred, no, 0xff);
    CHECK_EQ_INT(tk_dice_score(gt_ctx_, &g, dacc, dws, dlabel, dpred, ddice, wsp, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    CHECK_EQ_INT(tk_dice_score_ref(&g, acc, ws, label, pred, dice, &e), 0);
    gt_down(gpred, dpred, no), gt_down(gdice, ddice, 8);
    size_t nd = 0, nd_margin = 0;
    for (size_t v = 0; v < no; v++) {
        if (gpred[v] == pred[v]) continue;
        nd++;
        float p[3], top = -INFINITY, second = -INFINITY;
        for (int k = 0; k < 3; k++) p[k] = acc[v * 3 + k] / ws[v];
        for (int k = 0; k < 3; k++)
            if (p[k] > top) second = top, top = p[k];
            else if (p[k] > second) second = p[k];
        nd_margin += top - second > 1e-4f;
    }
    snprintf(what, sizeof what, "argmax %s ld %d %lldx%lldx%lld roi %d", tk_dtype_name(t), ld, (long long)ec->D,
             (long long)ec->H, (long long)ec->W, ec->roi);
    printf("# table unet-eval %-56s %zu of %zu differ (%zu with margin > 1e-4)%s\n", what, nd, no, nd_margin,
           nd ? "  <-- FAIL" : "");
    CHECK_EQ_INT(nd_margin, 0);
    CHECK_EQ_INT(nd, 0);
    snprintf(what, sizeof what, "dice %s ld %d %lldx%lldx%lld roi %d (%.6f %.6f)", tk_dtype_name(t), ld,
             (long long)ec->D, (long long)ec->H, (long long)ec->W, ec->roi, dice[0], dice[1]);
    CHECK(within(what, gdice, dice, 2, 1e-5));
    CHECK(dice[0] > 0.3f && dice[0] < 0.99f && dice[1] > 0.3f && dice[1] < 0.99f); // a case that tells
    void *dev[] = {dimg, dmap, dacc, dws, dx, dy, dlabel, dpred, ddice, wsp};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    free(img), free(map), free(y), free(acc), free(ws), free(hx), free(hy), free(gx), free(gacc), free(gws);
    free(label), free(pred), free(gpred), free(u);
}

TK_TEST(swin_vs_reference) {
    static const eval_case cases[] = {
        {160, 130, 200, 128, 3}, {160, 130, 200, 128, 1}, {70, 45, 100, 32, 4}, {70, 45, 100, 32, 64}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        eval_run(&cases[i], TK_F32, 3, tk_failed_);
        eval_run(&cases[i], TK_BF16, i % 2 ? 3 : 4, tk_failed_);
    }
}

// The accumulation of a batch of 4 windows of 128^3 into a volume of 256^3 (bf16 logits): bytes
// moved per call, against the copy ceiling.
static struct {
    tk_swin_grid g;
    void *y;
    float *map, *acc, *ws;
} at;
static void acc_run(void *arg) {
    (void)arg;
    tk_err e = {0};
    tk_swin_accumulate(gt_ctx_, TK_BF16, at.y, 3, &at.g, 0, 4, at.map, at.acc, at.ws, &e);
}
TK_TEST(swin_accumulate_timing) {
    tk_err e = {0};
    CHECK_EQ_INT(tk_swin_grid_init(&at.g, 256, 256, 256, 128, 0.5, &e), 0);
    const size_t rv = 128 * 128 * 128, no = (size_t)tk_swin_out_numel(&at.g);
    at.y = gt_dev(4 * rv * 3 * 2), at.map = gt_dev(rv * 4), at.acc = gt_dev(no * 12), at.ws = gt_dev(no * 4);
    gt_poison(at.y, 4 * rv * 6, 0x3c), gt_poison(at.map, rv * 4, 0x3c), gt_poison(at.acc, no * 12, 0);
    gt_poison(at.ws, no * 4, 0);
    const double ms = gt_time_ms(acc_run, NULL, 7);
    // windows 0..3 cover 128 x 192 x 320 clipped to 128 x 192 x 256 voxels (read and written: 16 bytes each) plus
    // 4 windows of logits (6 bytes a voxel) and their map reads (4)
    const double bytes = 128.0 * 192 * 256 * 32 + 4.0 * rv * 10;
    printf("# table unet-eval accumulate bf16 4 windows of 128^3: %.3f ms, %.0f GB/s\n", ms, bytes / ms / 1e6);
    CHECK_EQ_INT(gt_sync(&e), 0);
    tk_free(gt_ctx_, at.y), tk_free(gt_ctx_, at.map), tk_free(gt_ctx_, at.acc), tk_free(gt_ctx_, at.ws);
}
