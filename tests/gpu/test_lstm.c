// The LSTM (kernels/lstm.h) on the cuda backend against its CPU reference: fresh random weights,
// inputs, states and lengths each run (sequence 0 at the full length), 1 to 3 layers, without
// dropout, with it between layers, and after the last too (drop_last; the same Philox masks on
// both sides), every output and gradient: y, hn, cn, dx, dh0, dc0, dW_ih, dW_hh, db_ih, db_hh.
// Tolerances (norm-wise relative): fp32 <= 1e-5 (the GEMMs run without TF32), bf16 <= 1e-2.
// Small-integer cases (weights, inputs and states multiples of 1/4 in [-1, 1], fp32: the input
// projection exact on both sides, the gates mostly saturated, the recurrent sums over h not
// exact) within 1e-5. Exact: outputs and dx rows past the lengths are 0, and a second run gives
// the same bits (no atomics). Timing lines (bf16, dropout after every layer) at MLPerf's sizes:
// the encoder's LSTMs before stacking (2 x 1024, input 240, T 660) and after (3 x 1024, input
// 2048, T 330), the prediction network's (2 x 512, U+1 126); B 32, lengths down to 3/4 T.
#include "gpu_test.h"
#include "lstm.h"

static int within(const char *what, const float *got, const float *ref, size_t n, double tol) {
    const double err = gt_relerr(got, ref, n);
    printf("# table lstm %-48s rel err %.2e (%zu of %zu differ)%s\n", what, err, gt_ndiff(got, ref, n), n,
           err <= tol ? "" : "  <-- FAIL");
    return err <= tol;
}

// A host copy of x (n fp32 values, already rounded to t) in type t, for the reference.
static void *host_as(const float *x, size_t n, tk_dtype t) {
    if (t == TK_F32) {
        float *h = gt_host(n * 4);
        memcpy(h, x, n * 4);
        return h;
    }
    uint16_t *h = gt_host(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = tk_f32_to_bf16(x[i]);
    return h;
}
static float *f32_of(const void *p, size_t n, tk_dtype t) {
    float *f = gt_host(n * 4);
    for (size_t i = 0; i < n; i++)
        f[i] = t == TK_BF16 ? tk_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
    return f;
}
// Uniform in [-a, a), or (ints) multiples of 1/4 in [-1, 1].
static void fill(float *x, size_t n, float a, int ints) {
    gt_fill(x, n, ints ? -4 : -a, ints ? 4 : a, ints);
    if (ints)
        for (size_t i = 0; i < n; i++) x[i] *= 0.25f;
}

// One case: the device run (twice: the bits must repeat) against the reference.
static void lstm_case(int L, int T, int B, int I, int H, tk_dtype t, float p, int last, int ints, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const tk_lstm_shape s = {L, T, B, I, H, last};
    const size_t es = tk_dtype_size(t), TBI = (size_t)T * B * I, TBH = (size_t)T * B * H, LBH = (size_t)L * B * H;
    const float a = 1.0f / sqrtf((float)H);
    int len[64];
    for (int b = 0; b < B; b++) len[b] = b == 0 ? T : 1 + (int)(gt_u32(b) % (uint32_t)T);
    int *dlen = gt_dev(sizeof len);
    gt_up(dlen, len, sizeof len);
    // host parameters and inputs (fp32, rounded to t where the op reads them in t)
    float *wih[TK_LSTM_MAX_LAYERS], *whh[TK_LSTM_MAX_LAYERS], *bi[TK_LSTM_MAX_LAYERS], *bh[TK_LSTM_MAX_LAYERS];
    tk_lstm_w dw, hw;
    tk_lstm_dw dg, hg;
    memset(&dw, 0, sizeof dw), memset(&hw, 0, sizeof hw), memset(&dg, 0, sizeof dg), memset(&hg, 0, sizeof hg);
    void *hbuf[4 * TK_LSTM_MAX_LAYERS];
    for (int k = 0; k < L; k++) {
        const size_t Ik = k ? H : I, n1 = 4 * H * Ik, n2 = (size_t)4 * H * H, nb = (size_t)4 * H;
        wih[k] = gt_host(n1 * 4), whh[k] = gt_host(n2 * 4), bi[k] = gt_host(nb * 4), bh[k] = gt_host(nb * 4);
        fill(wih[k], n1, a, ints), fill(whh[k], n2, a, ints), fill(bi[k], nb, a, ints), fill(bh[k], nb, a, ints);
        dw.w_ih[k] = gt_dev_from(wih[k], n1, t), dw.w_hh[k] = gt_dev_from(whh[k], n2, t);
        dw.b_ih[k] = gt_dev_from(bi[k], nb, TK_F32), dw.b_hh[k] = gt_dev_from(bh[k], nb, TK_F32);
        hw.w_ih[k] = hbuf[4 * k] = host_as(wih[k], n1, t), hw.w_hh[k] = hbuf[4 * k + 1] = host_as(whh[k], n2, t);
        hw.b_ih[k] = bi[k], hw.b_hh[k] = bh[k];
        const size_t sz[4] = {n1, n2, nb, nb};
        float **gd[4] = {&dg.w_ih[k], &dg.w_hh[k], &dg.b_ih[k], &dg.b_hh[k]};
        float **gh[4] = {&hg.w_ih[k], &hg.w_hh[k], &hg.b_ih[k], &hg.b_hh[k]};
        for (int q = 0; q < 4; q++) { // gradients start from the same random values (they are added to)
            float *g0 = gt_host(sz[q] * 4);
            gt_fill(g0, sz[q], -1, 1, 0);
            *gd[q] = gt_dev_from(g0, sz[q], TK_F32);
            *gh[q] = g0;
        }
        hbuf[4 * k + 2] = hbuf[4 * k + 3] = NULL;
    }
    float *x = gt_host(TBI * 4), *h0 = gt_host(LBH * 4), *c0 = gt_host(LBH * 4), *dy = gt_host(TBH * 4);
    float *dhn = gt_host(LBH * 4), *dcn = gt_host(LBH * 4);
    fill(x, TBI, 1, ints), fill(h0, LBH, 0.5f, ints), fill(c0, LBH, 1, ints), fill(dy, TBH, 1, ints);
    fill(dhn, LBH, 1, ints), fill(dcn, LBH, 1, ints);
    void *dx_in = gt_dev_from(x, TBI, t), *ddy = gt_dev_from(dy, TBH, t);
    float *dh0_in = gt_dev_from(h0, LBH, TK_F32), *dc0_in = gt_dev_from(c0, LBH, TK_F32);
    float *ddhn = gt_dev_from(dhn, LBH, TK_F32), *ddcn = gt_dev_from(dcn, LBH, TK_F32);
    void *hx = host_as(x, TBI, t), *hdy = host_as(dy, TBH, t);
    // outputs
    void *y = gt_dev(TBH * es + 16), *gx = gt_dev(TBI * es + 16);
    float *hn = gt_dev(LBH * 4), *cn = gt_dev(LBH * 4), *gh0 = gt_dev(LBH * 4), *gc0 = gt_dev(LBH * 4);
    gt_poison(y, TBH * es, 0xff), gt_poison(gx, TBI * es, 0xff), gt_poison(hn, LBH * 4, 0xff);
    gt_poison(cn, LBH * 4, 0xff), gt_poison(gh0, LBH * 4, 0xff), gt_poison(gc0, LBH * 4, 0xff);
    const size_t wsb = tk_lstm_ws_bytes(t, &s);
    void *ws = gt_dev(wsb);
    gt_poison(ws, wsb, 0xff);
    int64_t step = 3 + (int64_t)(gt_u32(99) % 50), *dstep = gt_dev(8);
    gt_up(dstep, &step, 8);
    tk_dropout dd = {p, gt_seed_ ^ 0x1577, 20, dstep, 0}, hd = dd;
    hd.step = &step;
    CHECK_EQ_INT(tk_lstm_fwd(gt_ctx_, t, &s, &dw, dlen, dx_in, dh0_in, dc0_in, &dd, y, hn, cn, ws, &e), 0);
    CHECK_EQ_INT(tk_lstm_bwd(gt_ctx_, t, &s, &dw, dlen, dx_in, &dd, ddy, ddhn, ddcn, gx, gh0, gc0, &dg, ws, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    // the reference
    void *ry = gt_host(TBH * es), *rgx = gt_host(TBI * es), *rws = calloc(1, wsb);
    float *rhn = gt_host(LBH * 4), *rcn = gt_host(LBH * 4), *rh0 = gt_host(LBH * 4), *rc0 = gt_host(LBH * 4);
    CHECK_EQ_INT(tk_lstm_fwd_ref(t, &s, &hw, len, hx, h0, c0, &hd, ry, rhn, rcn, rws, &e), 0);
    CHECK_EQ_INT(tk_lstm_bwd_ref(t, &s, &hw, len, hx, &hd, hdy, dhn, dcn, rgx, rh0, rc0, &hg, rws, &e), 0);
    char what[128];
    snprintf(what, sizeof what, "%s L%d T%d B%d I%d H%d p%.1f%s%s", tk_dtype_name(t), L, T, B, I, H, p,
             last ? " drop_last" : "", ints ? " ints" : "");
    const double tol = t == TK_BF16 ? 1e-2 : 1e-5;
    printf("# %s\n", what);
    float *gy = gt_host_from(y, TBH, t), *ryf = f32_of(ry, TBH, t);
    CHECK(within("  y", gy, ryf, TBH, tol));
    float *gxh = gt_host_from(gx, TBI, t), *rgxf = f32_of(rgx, TBI, t);
    CHECK(within("  dx", gxh, rgxf, TBI, tol));
    int pad0 = 1; // exact zeros past the lengths
    for (int tt = 0; tt < T; tt++)
        for (int b = 0; b < B; b++)
            if (tt >= len[b]) {
                for (int j = 0; j < H; j++) pad0 &= gy[((size_t)tt * B + b) * H + j] == 0.0f;
                for (int i = 0; i < I; i++) pad0 &= gxh[((size_t)tt * B + b) * I + i] == 0.0f;
            }
    CHECK(pad0);
    const float *dst[4] = {hn, cn, gh0, gc0}, *rst[4] = {rhn, rcn, rh0, rc0};
    static const char *sn[4] = {"  hn", "  cn", "  dh0", "  dc0"};
    for (int q = 0; q < 4; q++) {
        float *v = gt_host_from(dst[q], LBH, TK_F32);
        CHECK(within(sn[q], v, rst[q], LBH, tol));
        free(v);
    }
    for (int k = 0; k < L; k++) {
        const size_t Ik = k ? H : I, sz[4] = {4 * H * Ik, (size_t)4 * H * H, (size_t)4 * H, (size_t)4 * H};
        float *gd[4] = {dg.w_ih[k], dg.w_hh[k], dg.b_ih[k], dg.b_hh[k]};
        float *gr[4] = {hg.w_ih[k], hg.w_hh[k], hg.b_ih[k], hg.b_hh[k]};
        static const char *wn[4] = {"dW_ih", "dW_hh", "db_ih", "db_hh"};
        for (int q = 0; q < 4; q++) {
            char nm[32];
            snprintf(nm, sizeof nm, "  %s[%d]", wn[q], k);
            float *v = gt_host_from(gd[q], sz[q], TK_F32);
            CHECK(within(nm, v, gr[q], sz[q], tol));
            free(v);
        }
    }
    // a second forward gives the same bits
    void *y2 = gt_dev(TBH * es + 16);
    CHECK_EQ_INT(tk_lstm_fwd(gt_ctx_, t, &s, &dw, dlen, dx_in, dh0_in, dc0_in, &dd, y2, NULL, NULL, ws, &e), 0);
    float *gy2 = gt_host_from(y2, TBH, t);
    CHECK(memcmp(gy, gy2, TBH * 4) == 0);
    // free everything
    void *dev[] = {dlen, dx_in, ddy, dh0_in, dc0_in, ddhn, ddcn, y, gx, hn, cn, gh0, gc0, ws, dstep, y2};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    for (int k = 0; k < L; k++) {
        void *d[8] = {(void *)dw.w_ih[k], (void *)dw.w_hh[k], (void *)dw.b_ih[k], (void *)dw.b_hh[k],
                      dg.w_ih[k],         dg.w_hh[k],         dg.b_ih[k],         dg.b_hh[k]};
        for (int q = 0; q < 8; q++) tk_free(gt_ctx_, d[q]);
        free(wih[k]), free(whh[k]), free(bi[k]), free(bh[k]), free(hbuf[4 * k]), free(hbuf[4 * k + 1]);
        free(hg.w_ih[k]), free(hg.w_hh[k]), free(hg.b_ih[k]), free(hg.b_hh[k]);
    }
    free(x), free(h0), free(c0), free(dy), free(dhn), free(dcn), free(hx), free(hdy), free(ry), free(rgx), free(rws);
    free(rhn), free(rcn), free(rh0), free(rc0), free(gy), free(ryf), free(gxh), free(rgxf), free(gy2);
}

TK_TEST(lstm_vs_reference) {
    static const struct {
        int L, T, B, I, H;
    } cases[] = {{1, 5, 2, 16, 33}, {2, 7, 3, 5, 8}, {3, 12, 4, 40, 64}, {2, 20, 8, 128, 256}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int t = 0; t < 2; t++)
            for (int drop = 0; drop < 3; drop++) // none, between layers, and after the last too
                lstm_case(cases[i].L, cases[i].T, cases[i].B, cases[i].I, cases[i].H, t ? TK_BF16 : TK_F32,
                          drop ? 0.3f : 0.0f, drop == 2, 0, tk_failed_);
}

TK_TEST(lstm_small_integers) {
    lstm_case(2, 6, 3, 8, 16, TK_F32, 0.0f, 0, 1, tk_failed_);
    lstm_case(2, 6, 3, 8, 16, TK_F32, 0.5f, 1, 1, tk_failed_);
}

// ---- timing ----

typedef struct {
    tk_lstm_shape s;
    tk_lstm_w w;
    tk_lstm_dw g;
    const int *len;
    void *x, *y, *dy, *dx, *ws;
    tk_dropout d;
    int bwd;
} bench;
static void bench_run(void *arg) {
    bench *b = arg;
    tk_err e = {0};
    if (tk_lstm_fwd(gt_ctx_, TK_BF16, &b->s, &b->w, b->len, b->x, NULL, NULL, &b->d, b->y, NULL, NULL, b->ws, &e))
        gt_die_("lstm fwd", &e);
    if (b->bwd && tk_lstm_bwd(gt_ctx_, TK_BF16, &b->s, &b->w, b->len, b->x, &b->d, b->dy, NULL, NULL, b->dx, NULL,
                              NULL, &b->g, b->ws, &e))
        gt_die_("lstm bwd", &e);
}

static void time_one(int *tk_failed_, const char *what, int L, int T, int B, int I, int H, float p) {
    bench b = {.s = {L, T, B, I, H, 1}}; // the workload's LSTMs drop their output too
    const size_t TBI = (size_t)T * B * I, TBH = (size_t)T * B * H;
    float *h = gt_host((TBI > (size_t)4 * H * I ? TBI : (size_t)4 * H * I) * 4 + TBH * 4 + (size_t)16 * H * H);
    for (int k = 0; k < L; k++) {
        const size_t Ik = k ? H : I;
        fill(h, 4 * H * Ik, 0.03f, 0);
        b.w.w_ih[k] = gt_dev_from(h, 4 * H * Ik, TK_BF16);
        fill(h, (size_t)4 * H * H, 0.03f, 0);
        b.w.w_hh[k] = gt_dev_from(h, (size_t)4 * H * H, TK_BF16);
        fill(h, (size_t)4 * H, 0.03f, 0);
        b.w.b_ih[k] = b.w.b_hh[k] = gt_dev_from(h, (size_t)4 * H, TK_F32);
        b.g.w_ih[k] = gt_dev(4 * H * Ik * 4), b.g.w_hh[k] = gt_dev((size_t)16 * H * H);
        b.g.b_ih[k] = gt_dev((size_t)16 * H), b.g.b_hh[k] = gt_dev((size_t)16 * H);
    }
    fill(h, TBI, 1, 0);
    b.x = gt_dev_from(h, TBI, TK_BF16);
    fill(h, TBH, 1, 0);
    b.dy = gt_dev_from(h, TBH, TK_BF16);
    b.y = gt_dev(TBH * 2 + 16), b.dx = gt_dev(TBI * 2), b.ws = gt_dev(tk_lstm_ws_bytes(TK_BF16, &b.s));
    int len[64], *dlen = gt_dev(sizeof len);
    for (int i = 0; i < B; i++) len[i] = T - (T / 4) * i / (B > 1 ? B - 1 : 1); // lengths down to 3/4 T
    gt_up(dlen, len, sizeof len);
    b.len = dlen;
    gt_poison(b.y, TBH * 2, 0xff);
    int64_t step = 1, *dstep = gt_dev(8);
    gt_up(dstep, &step, 8);
    b.d = (tk_dropout){p, 1, 0, dstep, 0};
    const double fms = gt_time_ms(bench_run, &b, 5);
    b.bwd = 1;
    const double tms = gt_time_ms(bench_run, &b, 5);
    double flop = 0; // 2 flops a multiply-add; the backward 2x the forward
    for (int k = 0; k < L; k++) flop += 2.0 * T * B * 4.0 * H * ((k ? H : I) + H);
    printf("# table lstm bench %s bf16 L%d T%d B%d I%d H%d p%.1f: fwd %.2f ms (%.0f TFLOP/s), fwd+bwd %.2f ms "
           "(%.0f TFLOP/s)\n",
           what, L, T, B, I, H, p, fms, flop / fms * 1e-9, tms, 3 * flop / tms * 1e-9);
    float *yh = gt_host_from(b.y, TBH, TK_BF16); // the timed runs computed something: no poison, no NaN
    CHECK(isfinite(gt_relerr(yh, yh, TBH)));
    free(yh);
    for (int k = 0; k < L; k++) {
        void *d[7] = {(void *)b.w.w_ih[k], (void *)b.w.w_hh[k], (void *)b.w.b_ih[k], b.g.w_ih[k], b.g.w_hh[k],
                      b.g.b_ih[k],         b.g.b_hh[k]};
        for (int q = 0; q < 7; q++) tk_free(gt_ctx_, d[q]);
    }
    void *dv[] = {b.x, b.dy, b.y, b.dx, b.ws, dlen, dstep};
    for (size_t i = 0; i < sizeof dv / sizeof *dv; i++) tk_free(gt_ctx_, dv[i]);
    free(h);
}

TK_TEST(lstm_bench) {
    time_one(tk_failed_, "encoder post-stack", 3, 330, 32, 2048, 1024, 0.1f);
    time_one(tk_failed_, "encoder pre-stack", 2, 660, 32, 240, 1024, 0.1f);
    time_one(tk_failed_, "prediction net", 2, 126, 32, 512, 512, 0.3f);
}
