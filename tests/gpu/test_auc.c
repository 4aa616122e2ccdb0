// kernels/auc.cu against kernels/auc_ref.c: the same double bit for bit on random scores, on
// scores with many ties (and -0 vs +0), with few positives, and NaN when a class is missing.
// TK_OPS_BENCH=1 also times the MLPerf eval set size (89,137,319 samples).
#include "auc.h"
#include "gpu_test.h"

static double auc_both(const float *s, const uint8_t *y, int64_t n, double *ref) {
    tk_err e = {0};
    void *wsr = gt_host(tk_auc_ws_bytes(TK_BACKEND_CPU, n));
    if (tk_auc_ref(s, y, n, wsr, ref, &e)) gt_die_("auc ref", &e);
    float *ds = gt_dev(4 * (n > 0 ? n : 1));
    uint8_t *dy = gt_dev(n > 0 ? n : 1);
    double *da = gt_dev(8), out;
    void *ws = gt_dev(tk_auc_ws_bytes(TK_BACKEND_CUDA, n));
    if (n > 0) gt_up(ds, s, 4 * n), gt_up(dy, y, n);
    gt_poison(da, 8, 0x11);
    if (tk_auc(gt_ctx_, ds, dy, n, ws, da, &e)) gt_die_("auc cuda", &e);
    gt_down(&out, da, 8);
    tk_free(gt_ctx_, ds), tk_free(gt_ctx_, dy), tk_free(gt_ctx_, da), tk_free(gt_ctx_, ws);
    free(wsr);
    return out;
}

static int auc_case(int64_t n, int levels, float pos_rate, const char *what) {
    float *s = gt_host(4 * n), *u = gt_host(4 * n);
    uint8_t *y = gt_host(n);
    gt_fill(s, n, -4, 4, 0);
    gt_fill(u, n, 0, 1, 0);
    for (int64_t i = 0; i < n; i++) {
        if (levels) s[i] = (float)((int)((s[i] + 4) / 8 * levels)) - levels / 2; // integers: ties, and 0
        if (levels && s[i] == 0 && (i & 1)) s[i] = -0.0f;
        y[i] = u[i] < pos_rate + (s[i] > 0 ? 0.1f : 0); // labels correlated with the score
    }
    double ref, got = auc_both(s, y, n, &ref);
    int same = memcmp(&ref, &got, 8) == 0;
    printf("# table auc %-22s n %8lld: gpu %.17g ref %.17g %s\n", what, (long long)n, got, ref, same ? "identical" : "DIFFER");
    free(s), free(u), free(y);
    return !same;
}

TK_TEST(auc_random_exact) { CHECK_EQ_INT(auc_case(100003, 0, 0.3f, "random"), 0); }
TK_TEST(auc_ties_exact) {
    CHECK_EQ_INT(auc_case(65536, 16, 0.3f, "16 score levels"), 0);
    CHECK_EQ_INT(auc_case(1000, 2, 0.5f, "2 score levels, +-0"), 0);
}
TK_TEST(auc_rare_positives_exact) { CHECK_EQ_INT(auc_case(1 << 20, 0, 0.003f, "0.3% positives"), 0); }
TK_TEST(auc_one_class_is_nan) {
    float s[3] = {0.1f, 0.2f, 0.3f};
    uint8_t y[3] = {1, 1, 1};
    double ref, got = auc_both(s, y, 3, &ref);
    CHECK(isnan(got) && isnan(ref));
    got = auc_both(s, y, 0, &ref);
    CHECK(isnan(got));
}

typedef struct { float *s; uint8_t *y; void *ws; double *a; int64_t n; } abench;
static void abench_run(void *p) {
    abench *b = p;
    tk_err e = {0};
    if (tk_auc(gt_ctx_, b->s, b->y, b->n, b->ws, b->a, &e)) gt_die_("auc bench", &e);
}
TK_TEST(auc_bench) {
    (void)tk_failed_;
    if (!getenv("TK_OPS_BENCH")) return;
    int64_t n = 89137319;
    float *h = gt_host(4 * (size_t)n);
    gt_fill(h, n, -4, 4, 0);
    uint8_t *y = gt_host(n);
    for (int64_t i = 0; i < n; i++) y[i] = (gt_u32(i) & 31) == 0;
    abench b = {gt_dev(4 * n), gt_dev(n), gt_dev(tk_auc_ws_bytes(TK_BACKEND_CUDA, n)), gt_dev(8), n};
    gt_up(b.s, h, 4 * n), gt_up(b.y, y, n);
    double ms = gt_time_ms(abench_run, &b, 5);
    printf("# table bench auc n %lld: %.2f ms (workspace %.2f GiB)\n", (long long)n, ms,
           tk_auc_ws_bytes(TK_BACKEND_CUDA, n) / 1073741824.0);
    tk_free(gt_ctx_, b.s), tk_free(gt_ctx_, b.y), tk_free(gt_ctx_, b.ws), tk_free(gt_ctx_, b.a);
    free(h), free(y);
}
