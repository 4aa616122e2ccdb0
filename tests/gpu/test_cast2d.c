// kernels/cast2d.cu against kernels/cast2d_ref.c: every type pair, padding (dld > cols) and
// unpadding (sld > cols), exact (a conversion is a function of one value; bf16 rounding is RNE on
// both sides), and the pad columns really written as zeros (the output is poisoned first).
#include "cast2d.h"
#include "gpu_test.h"

static int cast_case(tk_dtype st, tk_dtype dt, int64_t rows, int64_t sld, int64_t dld, int64_t cols) {
    size_t ns = (size_t)(rows * sld), nd = (size_t)(rows * dld), ss = tk_dtype_size(st), ds = tk_dtype_size(dt);
    float *x = gt_host(4 * ns);
    gt_fill(x, ns, -100, 100, 0);
    x[0] = 1.00390625f; // a bf16 tie: rounds to even
    void *hs = gt_host(ns * ss), *hr = gt_host(nd * ds), *hg = gt_host(nd * ds);
    for (size_t i = 0; i < ns; i++)
        if (st == TK_F32) ((float *)hs)[i] = x[i];
        else ((uint16_t *)hs)[i] = tk_f32_to_bf16(x[i]);
    tk_err e = {0};
    memset(hr, 0x7f, nd * ds);
    if (tk_cast2d_ref(hs, st, sld, hr, dt, dld, rows, cols, &e)) gt_die_("cast2d ref", &e);
    void *s = gt_dev(ns * ss + 1), *d = gt_dev(nd * ds + 1);
    gt_up(s, hs, ns * ss);
    gt_poison(d, nd * ds, 0xff);
    if (tk_cast2d(gt_ctx_, s, st, sld, d, dt, dld, rows, cols, &e) || gt_sync(&e)) gt_die_("cast2d cuda", &e);
    gt_down(hg, d, nd * ds);
    int bad = memcmp(hg, hr, nd * ds) != 0;
    // the reference itself: the pad is zero and a value survives the round trip
    if (dld > cols) bad |= dt == TK_F32 ? ((float *)hr)[dld - 1] != 0 : ((uint16_t *)hr)[dld - 1] != 0;
    if (dt == TK_BF16 && st == TK_F32) bad |= ((uint16_t *)hr)[0] != 0x3f80;
    printf("# table cast2d %s -> %s rows %lld sld %lld dld %lld cols %lld: %s\n", tk_dtype_name(st), tk_dtype_name(dt),
           (long long)rows, (long long)sld, (long long)dld, (long long)cols, bad ? "DIFFER" : "identical");
    tk_free(gt_ctx_, s), tk_free(gt_ctx_, d);
    free(x), free(hs), free(hr), free(hg);
    return bad;
}

TK_TEST(cast2d_pad_and_unpad) {
    CHECK_EQ_INT(cast_case(TK_F32, TK_BF16, 1000, 13, 16, 13), 0); // dense features -> K = 16
    CHECK_EQ_INT(cast_case(TK_F32, TK_F32, 512, 16, 13, 13), 0);   // drop the pad of a gradient
    CHECK_EQ_INT(cast_case(TK_BF16, TK_F32, 777, 1, 1, 1), 0);      // bf16 logits -> scores
    CHECK_EQ_INT(cast_case(TK_BF16, TK_BF16, 9, 7, 9, 5), 0);
    CHECK_EQ_INT(cast_case(TK_F32, TK_BF16, 1, 100003, 100003, 100003), 0); // a flat copy
}

TK_TEST(cast2d_bad_arguments) {
    tk_err e = {0};
    CHECK_EQ_INT(tk_cast2d(gt_ctx_, NULL, TK_F32, 4, NULL, TK_F32, 4, 1, 5, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_cast2d(gt_ctx_, NULL, TK_I32, 4, NULL, TK_F32, 4, 1, 4, &e), TK_EINTERNAL);
}

// tk_cast_many: spans of several lengths (one longer than a block's grid-stride pass, one empty)
// in one launch, each identical to the reference; the bytes between spans untouched.
TK_TEST(cast_many_vs_reference) {
    enum { NS = 5 };
    const int64_t len[NS] = {1, 4096, 0, 1234567, 77};
    int64_t off[NS + 1] = {0};
    for (int i = 0; i < NS; i++) off[i + 1] = off[i] + len[i] + 3; // 3 untouched between spans
    const size_t n = (size_t)off[NS];
    float *x = gt_host(4 * n);
    gt_fill(x, n, -50, 50, 0);
    uint16_t *hs = gt_host(2 * n);
    for (size_t i = 0; i < n; i++) hs[i] = tk_f32_to_bf16(x[i]);
    float *hr = gt_host(4 * n), *hg = gt_host(4 * n);
    memset(hr, 0xff, 4 * n);
    void *s = gt_dev(2 * n), *d = gt_dev(4 * n);
    gt_up(s, hs, 2 * n);
    gt_poison(d, 4 * n, 0xff);
    tk_cast_span hsp[NS], dsp[NS];
    for (int i = 0; i < NS; i++) {
        hsp[i] = (tk_cast_span){hs + off[i], hr + off[i], len[i]};
        dsp[i] = (tk_cast_span){(uint16_t *)s + off[i], (float *)d + off[i], len[i]};
    }
    tk_err e = {0};
    CHECK_EQ_INT(tk_cast_many_ref(hsp, NS, TK_BF16, TK_F32, &e), 0);
    CHECK_EQ_INT(tk_cast_many(gt_ctx_, dsp, NS, TK_BF16, TK_F32, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    gt_down(hg, d, 4 * n);
    CHECK(memcmp(hg, hr, 4 * n) == 0); // (both left 0xff between the spans)
    CHECK(hr[off[1]] == tk_bf16_to_f32(hs[off[1]]));
    tk_free(gt_ctx_, s), tk_free(gt_ctx_, d);
    free(x), free(hs), free(hr), free(hg);
}
