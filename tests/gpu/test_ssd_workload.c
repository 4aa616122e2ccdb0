// The SSD workload's own device work (lib/workloads/ssd/workload.c) on cuda: the transposes
// between the network's (N, A, D) outputs and the loss's box-major (N, D, A) layout, both
// directions, against their definition on the host (exact: copies), on fresh random values and on
// small integers that name their own position (a misplaced value shows which).
#include "gpu_test.h"
#include "workloads/ssd/workload.h"

static void transpose_case(int *tk_failed_, int N, int A, int D, int ints) {
    const size_t n = (size_t)N * A * D;
    float *x = gt_host(n * 4), *want = gt_host(n * 4), *got = gt_host(n * 4), *back = gt_host(n * 4);
    if (ints)
        for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000003);
    else gt_fill(x, n, -4.0f, 4.0f, 0);
    for (int i = 0; i < N; i++) // want[i, d, a] = x[i, a, d]
        for (int a = 0; a < A; a++)
            for (int d = 0; d < D; d++) want[((size_t)i * D + d) * A + a] = x[((size_t)i * A + a) * D + d];
    ssd_wl w = {.c = gt_ctx_, .b = N, .D = D};
    float *dx = gt_dev(n * 4), *dy = gt_dev(n * 4), *dz = gt_dev(n * 4);
    gt_up(dx, x, n * 4);
    gt_poison(dy, n * 4, 0xff), gt_poison(dz, n * 4, 0xff);
    tk_err e = {0};
    CHECK_EQ_INT(ssd_wl_transpose(&w, dx, dy, A, 1, &e), 0);
    CHECK_EQ_INT(ssd_wl_transpose(&w, dy, dz, A, 0, &e), 0);
    gt_down(got, dy, n * 4);
    gt_down(back, dz, n * 4);
    printf("# ssd transpose N %d A %d D %d %s\n", N, A, D, ints ? "(positions)" : "(random)");
    CHECK(memcmp(got, want, n * 4) == 0);
    CHECK(memcmp(back, x, n * 4) == 0);
    tk_free(gt_ctx_, dx), tk_free(gt_ctx_, dy), tk_free(gt_ctx_, dz);
    free(x), free(want), free(got), free(back);
}

TK_TEST(ssd_transpose_loc_conf) {
    transpose_case(tk_failed_, 2, 4, 8732, 1);   // loc at 300x300
    transpose_case(tk_failed_, 2, 81, 8732, 0);  // conf
    transpose_case(tk_failed_, 3, 81, 6120, 1);  // tiny.json's 260x260
    transpose_case(tk_failed_, 1, 5, 7, 0);
}
