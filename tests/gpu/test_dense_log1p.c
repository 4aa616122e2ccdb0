// kernels/dense_log1p.cu against kernels/dense_log1p_ref.c, negative counts and INT32_MAX
// included; within 1 ulp (fp64 log1p on the device vs glibc, then rounded to fp32).
#include "dense_log1p.h"
#include "gpu_test.h"

TK_TEST(dense_log1p_matches_reference) {
    const int64_t n = 65536 * 13 + 5;
    int32_t *x = gt_host(4 * n);
    float *u = gt_host(4 * n), *yr = gt_host(4 * n), *yg = gt_host(4 * n);
    gt_fill(u, n, 0, 1, 0);
    for (int64_t i = 0; i < n; i++) x[i] = (int32_t)(exp(u[i] * 16.0) - 3); // heavy tail, some < 0
    x[0] = 0, x[1] = -1, x[2] = INT32_MAX, x[3] = INT32_MIN, x[4] = 1;
    tk_err e = {0};
    if (tk_dense_log1p_ref(x, n, yr, &e)) gt_die_("dense_log1p ref", &e);
    int32_t *dx = gt_dev(4 * n);
    float *dy = gt_dev(4 * n);
    gt_up(dx, x, 4 * n);
    gt_poison(dy, 4 * n, 0xff);
    CHECK_EQ_INT(tk_dense_log1p(gt_ctx_, dx, n, dy, &e), 0);
    gt_down(yg, dy, 4 * n);
    int64_t ulps = gt_max_ulps(yg, yr, n);
    printf("# table dense_log1p n %lld: differing %zu, max ulps %lld\n", (long long)n, gt_ndiff(yg, yr, n),
           (long long)ulps);
    CHECK(ulps <= 1);
    CHECK(yg[1] == 0 && yg[3] == 0);
    tk_free(gt_ctx_, dx), tk_free(gt_ctx_, dy);
    free(x), free(u), free(yr), free(yg);
}
