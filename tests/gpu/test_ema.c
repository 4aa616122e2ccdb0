// kernels/ema.cu against kernels/ema_ref.c: the weights' moving average bit for bit (each product
// and the sum rounded, as the reference) over a length with a ragged tail, on random weights for
// several updates, on small integers whose result is exact, and the swap there and back.
#include "ema.h"
#include "gpu_test.h"

static size_t ema_compare(int *tk_failed_, size_t n, double decay, int ints, int rounds) {
    float *a = gt_host(4 * n), *w = gt_host(4 * n), *got = gt_host(4 * n);
    gt_fill(a, n, -2, 2, ints), gt_fill(w, n, -2, 2, ints);
    float *da = gt_dev(4 * n), *dw = gt_dev(4 * n);
    gt_up(da, a, 4 * n), gt_up(dw, w, 4 * n);
    tk_err e = {0};
    for (int r = 0; r < rounds; r++) {
        if (tk_ema_update_ref(a, w, n, decay, &e)) gt_die_("ema ref", &e);
        CHECK_EQ_INT(tk_ema_update(gt_ctx_, da, dw, n, decay, &e), 0);
    }
    gt_down(got, da, 4 * n);
    size_t d = gt_ndiff(got, a, n);
    printf("# table ema n %zu decay %g x%d: differing %zu\n", n, decay, rounds, d);
    tk_free(gt_ctx_, da), tk_free(gt_ctx_, dw);
    free(a), free(w), free(got);
    return d;
}

TK_TEST(ema_update_matches_reference) {
    CHECK_EQ_INT(ema_compare(tk_failed_, 1000003, 0.999, 0, 5), 0);
    CHECK_EQ_INT(ema_compare(tk_failed_, 77, 0.995, 0, 3), 0);
    // 0.75 and 0.25 times small integers: exact, whatever the rounding
    CHECK_EQ_INT(ema_compare(tk_failed_, 4099, 0.75, 1, 1), 0);
}

TK_TEST(ema_exact_values_and_swap) {
    // decay 0.999: the factors are (float)0.999 and (float)(1 - 0.999), so an average of 0 over a
    // weight of 1 becomes 0.001f exactly, and 1 over 0 becomes 0.999f
    float a[4] = {0, 1, 8, -8}, w[4] = {1, 0, 4, 4}, got[4];
    float *da = gt_dev(16), *dw = gt_dev(16);
    gt_up(da, a, 16), gt_up(dw, w, 16);
    tk_err e = {0};
    CHECK_EQ_INT(tk_ema_update(gt_ctx_, da, dw, 2, 0.999, &e), 0);
    CHECK_EQ_INT(tk_ema_update(gt_ctx_, da + 2, dw + 2, 2, 0.75, &e), 0);
    gt_down(got, da, 16);
    CHECK(got[0] == 0.001f && got[1] == 0.999f && got[2] == 7 && got[3] == -5);
    CHECK_EQ_INT(tk_ema_swap(gt_ctx_, da, dw, 4, &e), 0);
    float g2[4];
    gt_down(got, da, 16), gt_down(g2, dw, 16);
    CHECK(got[0] == 1 && got[1] == 0 && got[2] == 4 && got[3] == 4);
    CHECK(g2[0] == 0.001f && g2[1] == 0.999f && g2[2] == 7 && g2[3] == -5);
    CHECK_EQ_INT(tk_ema_update(gt_ctx_, da, dw, 2, 1.5, &e), TK_EINTERNAL);
    tk_free(gt_ctx_, da), tk_free(gt_ctx_, dw);
}
