// BERT's CUDA ops against their CPU references (kernels/{activation,layernorm,attention,bert_embed,
// bert_rows,xent}.h): fresh random inputs (||cuda - ref|| / ||ref|| <= 1e-5 in fp32, <= 1e-2 in
// bf16, the bf16 inputs rounded first so both sides see the same values) and small-integer cases
// that must agree bit for bit (copies, sums of integers, the dropout masks). The reference runs
// on a cpu context with the same arguments.
#include <cuda_runtime_api.h>

#include "activation.h"
#include "attention.h"
#include "bert_embed.h"
#include "bert_rows.h"
#include "gemm.h"
#include "gpu_test.h"
#include "layernorm.h"
#include "xent.h"

static tk_ctx *cpu_;
__attribute__((constructor(102))) static void cpu_init_(void) {
    tk_err e = {0};
    if (tk_ctx_create(&cpu_, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
}

static float *rnd(size_t n, float lo, float hi, int ints) {
    float *x = gt_host(n * 4);
    gt_fill(x, n, lo, hi, ints);
    return x;
}
static double tol(tk_dtype t) { return t == TK_F32 ? 1e-5 : 1e-2; }
static void ok_or_die(int rc, tk_err *e, const char *what) {
    if (rc) gt_die_(what, e);
}
// err <= tol, with a table line; returns 1 when bad.
static int judge(const char *what, tk_dtype t, double err, double limit) {
    printf("# table bert %-34s %-4s rel_err %.2e (limit %.0e)\n", what, tk_dtype_name(t), err, limit);
    return !(err <= limit);
}

static const tk_dtype types[2] = {TK_F32, TK_BF16};

// ---- activations ----

// n 100003: 8 elements a thread (aligned), then the last 3 one a thread; 16: only the first; 7:
// only the second.
TK_TEST(activation_random) {
    static const size_t sizes[] = {100003, 16, 7};
    for (int si = 0; si < 3; si++) {
        for (int ti = 0; ti < 2; ti++) {
            const size_t n = sizes[si];
            tk_dtype t = types[ti];
            float *x = rnd(n, -4, 4, 0), *g = rnd(n, -1, 1, 0), *y = gt_host(n * 4), *dx = gt_host(n * 4);
            void *dxv = gt_dev_from(x, n, t), *dg = gt_dev_from(g, n, t), *dy = gt_dev(n * 4), *ddx = gt_dev(n * 4);
            tk_err e = {0};
            for (int op = 0; op < 4; op++) {
                int rc;
                if (op == 0) rc = tk_gelu_fwd_ref(TK_F32, n, x, y, &e) || tk_gelu_fwd(gt_ctx_, t, n, dxv, dy, &e);
                else if (op == 1) rc = tk_gelu_bwd_ref(TK_F32, n, x, g, y, &e) || tk_gelu_bwd(gt_ctx_, t, n, dxv, dg, dy, &e);
                else if (op == 2) rc = tk_tanh_fwd_ref(TK_F32, n, x, y, &e) || tk_tanh_fwd(gt_ctx_, t, n, dxv, dy, &e);
                else {
                    // tanh_bwd reads the forward's output: give both sides the same y
                    for (size_t i = 0; i < n; i++) dx[i] = tanhf(x[i]);
                    void *dyy = gt_dev_from(dx, n, t);
                    rc = tk_tanh_bwd_ref(TK_F32, n, dx, g, y, &e) || tk_tanh_bwd(gt_ctx_, t, n, dyy, dg, dy, &e);
                    gt_sync(&e);
                    tk_free(gt_ctx_, dyy);
                }
                ok_or_die(rc, &e, "activation");
                float *got = gt_host_from(dy, n, t);
                static const char *names[] = {"gelu_fwd", "gelu_bwd", "tanh_fwd", "tanh_bwd"};
                char what[48];
                snprintf(what, sizeof what, "%s n %zu", names[op], n);
                CHECK(!judge(what, t, gt_relerr(got, y, n), tol(t)));
                free(got);
            }
            void *d[] = {dxv, dg, dy, ddx};
            for (int i = 0; i < 4; i++) tk_free(gt_ctx_, d[i]);
            free(x), free(g), free(y), free(dx);
        }
    }
}

// ---- the GEMM's GELU epilogues and strided batches ----

static int gelu_gemm_case(int M, int N, int K, tk_dtype t, int unfused_ok, int *tk_failed_) {
    (void)unfused_ok;
    float *A = rnd((size_t)M * K, -1, 1, 0), *B = rnd((size_t)K * N, -1, 1, 0), *bias = rnd(N, -1, 1, 0);
    float *pre = rnd((size_t)M * N, -3, 3, 0), *D = gt_host((size_t)M * N * 4), *aux = gt_host((size_t)M * N * 4);
    float *bg = gt_host((size_t)N * 4);
    void *dA = gt_dev_from(A, (size_t)M * K, t), *dB = gt_dev_from(B, (size_t)K * N, t), *db = gt_dev_from(bias, N, t);
    void *dpre = gt_dev_from(pre, (size_t)M * N, t), *dD = gt_dev((size_t)M * N * 4), *daux = gt_dev((size_t)M * N * 4);
    float *dbg = gt_dev((size_t)N * 4);
    tk_err e = {0};
    int bad = 0;
    // GELU_BIAS: D and the pre-activation aux
    tk_gemm_args g = {.M = M, .N = N, .K = K, .transb = 1, .ab_type = TK_F32, .cd_type = TK_F32, .A = A, .B = B,
                      .D = D, .alpha = 1, .epi = TK_EPI_GELU_BIAS, .bias = bias, .aux = aux};
    ok_or_die(tk_gemm_ref(&g, &e), &e, "gemm ref");
    g.ab_type = g.cd_type = t, g.A = dA, g.B = dB, g.D = dD, g.bias = db, g.aux = daux;
    ok_or_die(tk_gemm(gt_ctx_, &g, &e) || gt_sync(&e), &e, "gemm gelu_bias");
    float *gD = gt_host_from(dD, (size_t)M * N, t), *gaux = gt_host_from(daux, (size_t)M * N, t);
    bad |= judge("gemm gelu_bias D", t, gt_relerr(gD, D, (size_t)M * N), tol(t));
    bad |= judge("gemm gelu_bias aux", t, gt_relerr(gaux, aux, (size_t)M * N), tol(t));
    // DGELU_BGRAD from a given pre-activation: dA (M, K) B (K, N) stored (N, K)
    tk_gemm_args h = {.M = M, .N = N, .K = K, .transb = 1, .ab_type = TK_F32, .cd_type = TK_F32, .A = A, .B = B,
                      .D = D, .alpha = 1, .epi = TK_EPI_DGELU_BGRAD, .aux = pre, .bgrad = bg};
    ok_or_die(tk_gemm_ref(&h, &e), &e, "gemm ref");
    h.ab_type = h.cd_type = t, h.A = dA, h.B = dB, h.D = dD, h.aux = dpre, h.bgrad = dbg;
    ok_or_die(tk_gemm(gt_ctx_, &h, &e) || gt_sync(&e), &e, "gemm dgelu_bgrad");
    free(gD);
    gD = gt_host_from(dD, (size_t)M * N, t);
    float *gbg = gt_host_from(dbg, N, TK_F32);
    bad |= judge("gemm dgelu_bgrad D", t, gt_relerr(gD, D, (size_t)M * N), tol(t));
    bad |= judge("gemm dgelu_bgrad bgrad", t, gt_relerr(gbg, bg, N), tol(t));
    void *d[] = {dA, dB, db, dpre, dD, daux, dbg};
    for (int i = 0; i < 7; i++) tk_free(gt_ctx_, d[i]);
    free(A), free(B), free(bias), free(pre), free(D), free(aux), free(bg), free(gD), free(gaux), free(gbg);
    CHECK(!bad);
    return bad;
}

TK_TEST(gemm_gelu_epilogues) {
    int shapes[][3] = {{256, 384, 128}, {33, 65, 17}, {2432, 256, 1024}};
    for (int s = 0; s < 3; s++)
        for (int ti = 0; ti < 2; ti++) gelu_gemm_case(shapes[s][0], shapes[s][1], shapes[s][2], types[ti], 1, tk_failed_);
}

TK_TEST(gemm_strided_batch) {
    const int NB = 12, M = 67, N = 64, K = 32;
    for (int ints = 0; ints < 2; ints++)
        for (int ti = 0; ti < 2; ti++)
            for (int tr = 0; tr < 4; tr++) {
                tk_dtype t = types[ti];
                size_t na = (size_t)NB * M * K, nb = (size_t)NB * K * N, nd = (size_t)NB * M * N;
                float *A = rnd(na, -3, 3, ints), *B = rnd(nb, -3, 3, ints), *D = gt_host(nd * 4);
                void *dA = gt_dev_from(A, na, t), *dB = gt_dev_from(B, nb, t), *dD = gt_dev(nd * 4);
                float alpha = ints ? 1.0f : 0.125f;
                tk_gemm_args g = {.M = M, .N = N, .K = K, .transa = tr >> 1, .transb = tr & 1, .ab_type = TK_F32,
                                  .cd_type = TK_F32, .A = A, .B = B, .D = D, .alpha = alpha, .batch = NB,
                                  .stride_a = (int64_t)M * K, .stride_b = (int64_t)K * N, .stride_c = (int64_t)M * N};
                tk_err e = {0};
                ok_or_die(tk_gemm_ref(&g, &e), &e, "batched gemm ref");
                g.ab_type = g.cd_type = t, g.A = dA, g.B = dB, g.D = dD;
                ok_or_die(tk_gemm(gt_ctx_, &g, &e) || gt_sync(&e), &e, "batched gemm");
                float *got = gt_host_from(dD, nd, t);
                // |D| <= 3 * 3 * 32 = 288: integers up to 256 are exact in bf16, larger even ones too
                // only when they round to themselves: compare the bf16 case on the ref rounded to bf16
                if (ints) {
                    gt_round(D, nd, t);
                    size_t nd_bad = gt_ndiff(got, D, nd);
                    printf("# table bert gemm batch ints ta%d tb%d %-4s differing %zu\n", tr >> 1, tr & 1,
                           tk_dtype_name(t), nd_bad);
                    CHECK(nd_bad == 0);
                } else {
                    CHECK(!judge("gemm strided batch", t, gt_relerr(got, D, nd), tol(t)));
                }
                tk_free(gt_ctx_, dA), tk_free(gt_ctx_, dB), tk_free(gt_ctx_, dD);
                free(A), free(B), free(D), free(got);
            }
}

// ---- LayerNorm ----

static void ln_case(int R, int H, int where, tk_dtype t, int *tk_failed_) {
    size_t n = (size_t)R * H;
    float *x = rnd(n, -2, 2, 0), *res = rnd(n, -1, 1, 0), *g = rnd(H, 0.5f, 1.5f, 0), *b = rnd(H, -1, 1, 0);
    float *dy = rnd(n, -1, 1, 0);
    float *y = gt_host(n * 4), *s = gt_host(n * 4), *mu = gt_host(R * 4), *rs = gt_host(R * 4);
    float *ds = gt_host(n * 4), *dx = gt_host(n * 4), *dg = gt_host(H * 4), *dbt = gt_host(H * 4);
    const int use_res = where != TK_LN_DROP_POST;
    void *Dx = gt_dev_from(x, n, t), *Dres = gt_dev_from(res, n, t), *Ddy = gt_dev_from(dy, n, t);
    float *Dg = gt_dev_from(g, H, TK_F32), *Db = gt_dev_from(b, H, TK_F32);
    void *Dy = gt_dev(n * 4), *Ds = gt_dev(n * 4), *Dds = gt_dev(n * 4), *Ddx = gt_dev(n * 4);
    float *Dmu = gt_dev(R * 4), *Drs = gt_dev(R * 4), *Ddg = gt_dev(H * 4), *Ddb = gt_dev(H * 4);
    void *ws = gt_dev(tk_layernorm_bwd_ws_bytes(TK_BACKEND_CUDA, R, H) + 16);
    int64_t step = 7, *Dstep = gt_dev(8);
    gt_up(Dstep, &step, 8);
    tk_dropout dh = {.p = 0.1f, .seed = 11, .site = 5, .step = &step, .offset = 24}, dd = dh;
    dd.step = Dstep;
    tk_err e = {0};
    ok_or_die(tk_layernorm_fwd_ref(TK_F32, R, H, x, use_res ? res : NULL, &dh, where, g, b, 1e-12f, y, s, mu, rs, &e),
              &e, "ln fwd ref");
    ok_or_die(tk_layernorm_bwd_ref(TK_F32, R, H, dy, s, mu, rs, g, &dh, where, ds, dx, dg, dbt, NULL, &e), &e,
              "ln bwd ref");
    ok_or_die(tk_layernorm_fwd(gt_ctx_, t, R, H, Dx, use_res ? Dres : NULL, &dd, where, Dg, Db, 1e-12f, Dy, Ds, Dmu, Drs,
                               &e),
              &e, "ln fwd");
    // the backward on the device's own saved s and statistics
    ok_or_die(tk_layernorm_bwd(gt_ctx_, t, R, H, Ddy, Ds, Dmu, Drs, Dg, &dd, where, Dds, Ddx, Ddg, Ddb, ws, &e) ||
                  gt_sync(&e),
              &e, "ln bwd");
    char what[64];
    const char *wn = where == TK_LN_DROP_PRE ? "pre" : where == TK_LN_DROP_POST ? "post" : "none";
    struct { const char *n; void *d; float *h; size_t k; tk_dtype ty; } outs[] = {
        {"y", Dy, y, n, t}, {"s", Ds, s, n, t}, {"mean", Dmu, mu, (size_t)R, TK_F32}, {"rstd", Drs, rs, (size_t)R, TK_F32},
        {"ds", Dds, ds, n, t}, {"dx", Ddx, dx, n, t}, {"dgamma", Ddg, dg, (size_t)H, TK_F32}, {"dbeta", Ddb, dbt, (size_t)H, TK_F32}};
    for (int i = 0; i < 8; i++) {
        float *got = gt_host_from(outs[i].d, outs[i].k, outs[i].ty);
        snprintf(what, sizeof what, "layernorm %s %dx%d %s", wn, R, H, outs[i].n);
        // the statistics are fp32 on both sides, but of bf16 inputs on the bf16 path: its tolerance
        CHECK(!judge(what, t, gt_relerr(got, outs[i].h, outs[i].k), tol(t)));
        free(got);
    }
    void *dv[] = {Dx, Dres, Ddy, Dg, Db, Dy, Ds, Dds, Ddx, Dmu, Drs, Ddg, Ddb, ws, Dstep};
    for (int i = 0; i < 15; i++) tk_free(gt_ctx_, dv[i]);
    float *hv[] = {x, res, g, b, dy, y, s, mu, rs, ds, dx, dg, dbt};
    for (int i = 0; i < 13; i++) free(hv[i]);
}

TK_TEST(layernorm_random) {
    // (dgamma/dbeta: 1000 x 1024 and 2050 x 64 add more chunks of rows than the finish has lanes)
    int shapes[][2] = {{300, 1024}, {77, 40}, {5, 13}, {1000, 1024}, {2050, 64}};
    for (int s = 0; s < 5; s++)
        for (int w = 0; w < 3; w++)
            for (int ti = 0; ti < 2; ti++) ln_case(shapes[s][0], shapes[s][1], w, types[ti], tk_failed_);
}

// ---- attention ----

// packed: the sequences' rows one after the other (start = prefix sums), the last slot unused
// (length 0), 3 rows past them; else the padded layout (start b L). Rows outside the sequences are
// written by neither side (both start 0).
static void attn_case(int B, int L, int NH, int D, float p, tk_dtype t, int packed, int *tk_failed_) {
    const int H = NH * D;
    int32_t *len = gt_host(B * 4), *start = gt_host(B * 4);
    int rows = 0;
    for (int b = 0; b < B; b++) {
        len[b] = b == 0 ? L : packed && b == B - 1 ? 0 : 1 + (int)(gt_u32(b) % L);
        start[b] = packed ? rows : b * L;
        rows += packed ? len[b] : L;
    }
    rows += packed ? 3 : 0;
    const size_t nq = (size_t)rows * 3 * H, nc = (size_t)rows * H, np = (size_t)B * NH * L * L;
    const size_t nqh = (size_t)B * L * 3 * H, nch = (size_t)B * L * H; // the per-head layouts
    float *qkv = rnd(nq, -1, 1, 0), *dctx = rnd(nc, -1, 1, 0);
    int64_t step = 3;
    tk_dropout dh = {.p = p, .seed = 2, .site = 9, .step = &step, .offset = 1000}, dd = dh;
    int64_t *Dstep = gt_dev(8);
    gt_up(Dstep, &step, 8);
    dd.step = Dstep;
    // reference
    float *ctx = gt_host(nc * 4), *dqkv = gt_host(nq * 4);
    memset(ctx, 0, nc * 4), memset(dqkv, 0, nq * 4);
    // the reference regenerates Pd in the backward, the device keeps it (bufs.Pd): the same results
    tk_attn_bufs hb = {.qkvh = gt_host(nqh * 4), .P = gt_host(np * 4), .S = gt_host(np * 4), .ctxh = gt_host(nch * 4),
                       .dqkvh = gt_host(nqh * 4)};
    tk_err e = {0};
    ok_or_die(tk_attention_fwd(cpu_, TK_F32, B, L, NH, D, start, len, qkv, &dh, &hb, ctx, &e) ||
                  tk_attention_bwd(cpu_, TK_F32, B, L, NH, D, start, len, qkv, &dh, &hb, dctx, dqkv, &e),
              &e, "attention ref");
    // device
    const size_t es = tk_dtype_size(t);
    void *Dq = gt_dev_from(qkv, nq, t), *Ddc = gt_dev_from(dctx, nc, t), *Dctx = gt_dev(nc * es),
         *Ddq = gt_dev(nq * es);
    int32_t *Dlen = gt_dev(B * 4), *Dstart = gt_dev(B * 4);
    gt_up(Dlen, len, B * 4), gt_up(Dstart, start, B * 4);
    tk_attn_bufs db = {.qkvh = gt_dev(nqh * es), .P = gt_dev(np * es), .Pd = gt_dev(np * es), .S = gt_dev(np * es),
                       .ctxh = gt_dev(nch * es), .dqkvh = gt_dev(nqh * es)};
    // the per-head scratch poisoned: the split must write its padding positions
    gt_poison(db.qkvh, nqh * es, 0xff), gt_poison(db.ctxh, nch * es, 0xff);
    gt_poison(Dctx, nc * es, 0);
    gt_poison(Ddq, nq * es, 0);
    ok_or_die(tk_attention_fwd(gt_ctx_, t, B, L, NH, D, Dstart, Dlen, Dq, &dd, &db, Dctx, &e) ||
                  tk_attention_bwd(gt_ctx_, t, B, L, NH, D, Dstart, Dlen, Dq, &dd, &db, Ddc, Ddq, &e) || gt_sync(&e),
              &e, "attention");
    char what[96];
    float *gc = gt_host_from(Dctx, nc, t), *gq = gt_host_from(Ddq, nq, t), *gp = gt_host_from(db.P, np, t);
    snprintf(what, sizeof what, "attention%s B%d L%d NH%d D%d p%.1f ctx", packed ? " packed" : "", B, L, NH, D, p);
    CHECK(!judge(what, t, gt_relerr(gc, ctx, nc), tol(t)));
    snprintf(what, sizeof what, "attention%s B%d L%d NH%d D%d p%.1f P", packed ? " packed" : "", B, L, NH, D, p);
    CHECK(!judge(what, t, gt_relerr(gp, hb.P, np), tol(t)));
    snprintf(what, sizeof what, "attention%s B%d L%d NH%d D%d p%.1f dqkv", packed ? " packed" : "", B, L, NH, D, p);
    CHECK(!judge(what, t, gt_relerr(gq, dqkv, nq), tol(t)));
    // the padding keys get exactly 0
    size_t nz = 0;
    for (int b = 0; b < B; b++)
        for (size_t r = 0; r < (size_t)NH * L; r++)
            for (int j = len[b]; j < L; j++) nz += gp[((size_t)b * NH * L + r) * L + j] != 0;
    CHECK(nz == 0);
    void *dv[] = {Dq, Ddc, Dctx, Ddq, Dlen, db.qkvh, db.P, db.S, db.ctxh, db.dqkvh, Dstep, db.Pd, Dstart};
    for (int i = 0; i < 13; i++) tk_free(gt_ctx_, dv[i]);
    void *hv[] = {qkv, dctx, len, ctx, dqkv, hb.qkvh, hb.P, hb.S, hb.ctxh, hb.dqkvh, gc, gq, gp, start};
    for (int i = 0; i < 14; i++) free(hv[i]);
}

TK_TEST(attention_random) {
    for (int ti = 0; ti < 2; ti++) {
        for (int packed = 0; packed < 2; packed++) {
            attn_case(3, 67, 4, 16, 0.1f, types[ti], packed, tk_failed_); // L not a multiple of 8
            attn_case(2, 128, 2, 64, 0.0f, types[ti], packed, tk_failed_);
            attn_case(3, 128, 2, 64, 0.1f, types[ti], packed, tk_failed_);
        }
    }
}

// The dropout masks: ones through probs_dropout at p = 0.5 are 0 or 2 on both sides, bit for bit.
TK_TEST(dropout_masks_identical) {
    const int B = 2, NH = 3, L = 37;
    const size_t n = (size_t)B * NH * L * L;
    float *one = gt_host(n * 4), *ref = gt_host(n * 4);
    for (size_t i = 0; i < n; i++) one[i] = 1;
    int64_t step = 123456, *Dstep = gt_dev(8);
    gt_up(Dstep, &step, 8);
    tk_dropout dh = {.p = 0.5f, .seed = 77, .site = 3, .step = &step, .offset = 5}, dd = dh;
    dd.step = Dstep;
    tk_err e = {0};
    for (int ti = 0; ti < 2; ti++) {
        tk_dtype t = types[ti];
        void *Dp = gt_dev_from(one, n, t), *Dd = gt_dev(n * 4);
        ok_or_die(tk_attn_probs_dropout_ref(TK_F32, B, NH, L, one, &dh, ref, &e), &e, "dropout ref");
        ok_or_die(tk_attn_probs_dropout(gt_ctx_, t, B, NH, L, Dp, &dd, Dd, &e) || gt_sync(&e), &e, "dropout");
        float *got = gt_host_from(Dd, n, t);
        size_t d = gt_ndiff(got, ref, n), kept = 0;
        for (size_t i = 0; i < n; i++) kept += ref[i] != 0;
        printf("# table bert dropout masks %-4s differing %zu of %zu (kept %zu)\n", tk_dtype_name(t), d, n, kept);
        CHECK(d == 0 && kept > n / 3 && kept < 2 * n / 3);
        tk_free(gt_ctx_, Dp), tk_free(gt_ctx_, Dd);
        free(got);
    }
    tk_free(gt_ctx_, Dstep);
    free(one), free(ref);
}

// ---- embeddings ----

// lens: sequence lengths (the padding tokens left out of dword), else NULL.
static void embed_case(int B, int L, int H, int V, int ints, int lens, tk_dtype t, int *tk_failed_) {
    const int T = 2, NP = L + 3;
    const size_t n = (size_t)B * L;
    int32_t *len = gt_host((size_t)B * 4), *Dlen = gt_dev((size_t)B * 4);
    for (int b = 0; b < B; b++) len[b] = b == 0 ? L : 1 + (int)(gt_u32(b + 77) % (uint32_t)L);
    gt_up(Dlen, len, (size_t)B * 4);
    float *w = rnd((size_t)V * H, -3, 3, ints), *p = rnd((size_t)NP * H, -3, 3, ints), *ty = rnd((size_t)T * H, -3, 3, ints);
    float *de = rnd(n * H, -3, 3, ints), *dw0 = rnd((size_t)V * H, -3, 3, ints);
    int32_t *ids = gt_host(n * 4);
    uint8_t *seg = gt_host(n);
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int32_t)(gt_u32(i) % (uint32_t)(i % 3 ? V : 5)); // some ids repeat a lot
        seg[i] = (uint8_t)((gt_u32(i + n) >> 3) & 1);
    }
    float *out = gt_host(n * H * 4), *dw = gt_host((size_t)V * H * 4), *dp = gt_host((size_t)NP * H * 4),
          *dt = gt_host((size_t)T * H * 4);
    memcpy(dw, dw0, (size_t)V * H * 4);
    void *Dw = gt_dev_from(w, (size_t)V * H, t), *Dp = gt_dev_from(p, (size_t)NP * H, t),
         *Dt = gt_dev_from(ty, (size_t)T * H, t), *Dde = gt_dev_from(de, n * H, t), *Dout = gt_dev(n * H * 4);
    float *Ddw = gt_dev_from(dw, (size_t)V * H, TK_F32), *Ddp = gt_dev((size_t)NP * H * 4),
          *Ddt = gt_dev((size_t)T * H * 4);
    int32_t *Dids = gt_dev(n * 4);
    uint8_t *Dseg = gt_dev(n);
    void *ws = gt_dev(tk_bert_embed_bwd_ws_bytes(TK_BACKEND_CUDA, B, L, H, T) + 16);
    gt_up(Dids, ids, n * 4), gt_up(Dseg, seg, n);
    gt_poison(Ddp, (size_t)NP * H * 4, 0xff);
    tk_err e = {0};
    ok_or_die(tk_bert_embed_fwd_ref(TK_F32, TK_F32, B, L, H, ids, seg, w, p, ty, out, &e) ||
                  tk_bert_embed_bwd_ref(TK_F32, B, L, H, T, NP, ids, seg, lens ? len : NULL, de, dw, dp, dt, NULL, &e),
              &e, "embed ref");
    ok_or_die(tk_bert_embed_fwd(gt_ctx_, t, t, B, L, H, Dids, Dseg, Dw, Dp, Dt, Dout, &e) ||
                  tk_bert_embed_bwd(gt_ctx_, t, B, L, H, T, NP, Dids, Dseg, lens ? Dlen : NULL, Dde, Ddw, Ddp, Ddt, ws,
                                    &e) ||
                  gt_sync(&e),
              &e, "embed");
    float *go = gt_host_from(Dout, n * H, t), *gw = gt_host_from(Ddw, (size_t)V * H, TK_F32),
          *gp = gt_host_from(Ddp, (size_t)NP * H, TK_F32), *gty = gt_host_from(Ddt, (size_t)T * H, TK_F32);
    if (ints) { // sums of integers: exact (the forward rounded to the activation type as the device does)
        gt_round(out, n * H, t);
        size_t d = gt_ndiff(go, out, n * H) + gt_ndiff(gw, dw, (size_t)V * H) + gt_ndiff(gp, dp, (size_t)NP * H) +
                   gt_ndiff(gty, dt, (size_t)T * H);
        printf("# table bert embed ints%s %-4s differing %zu\n", lens ? " lens" : "", tk_dtype_name(t), d);
        CHECK(d == 0);
    } else {
        CHECK(!judge("embed fwd", t, gt_relerr(go, out, n * H), tol(t)));
        // the gradients are fp32 sums of the same act values: fp32 tolerance on both paths
        CHECK(!judge("embed bwd dword", t, gt_relerr(gw, dw, (size_t)V * H), 1e-5));
        CHECK(!judge("embed bwd dpos", t, gt_relerr(gp, dp, (size_t)NP * H), 1e-5));
        CHECK(!judge("embed bwd dtype", t, gt_relerr(gty, dt, (size_t)T * H), 1e-5));
    }
    void *dv[] = {Dw, Dp, Dt, Dde, Dout, Ddw, Ddp, Ddt, Dids, Dseg, ws, Dlen};
    for (int i = 0; i < 12; i++) tk_free(gt_ctx_, dv[i]);
    void *hv[] = {w, p, ty, de, dw0, ids, seg, out, dw, dp, dt, go, gw, gp, gty, len};
    for (int i = 0; i < 16; i++) free(hv[i]);
}

TK_TEST(bert_embed_random_and_ints) {
    for (int ti = 0; ti < 2; ti++) {
        for (int lens = 0; lens < 2; lens++) {
            embed_case(4, 64, 128, 1000, 0, lens, types[ti], tk_failed_);
            embed_case(3, 37, 40, 300, 1, lens, types[ti], tk_failed_);
            embed_case(3, 37, 36, 300, 1, lens, types[ti], tk_failed_); // H % 8 != 0: the scalar word kernel
        }
        // BERT-large's width (128 threads x 8 features a row), long runs (every third id < 5)
        embed_case(8, 128, 1024, 30528, 0, 1, types[ti], tk_failed_);
    }
}

// ---- gathered rows ----

// start NULL (the padded layout) or the packed starts of the lengths (positions inside them).
static void rows_case(tk_dtype t, int packed, int *tk_failed_) {
    enum { B = 5, L = 40, H = 24, P = 6 };
    int32_t len[B] = {40, 31, 33, 28, 36}, start[B + 1];
    tk_err e = {0};
    ok_or_die(tk_bert_starts_ref(B, L, 1, len, start, &e), &e, "starts ref");
    const int64_t rows = packed ? start[B] + 5 : (int64_t)B * L;
    float *hid = rnd((size_t)rows * H, -3, 3, 0), *dr = rnd((size_t)B * P * H, -3, 3, 0), *dc = rnd((size_t)B * H, -3, 3, 0);
    int32_t pos[B * P], nm[B] = {6, 0, 3, 1, 5}, ids[B * P], lab[B * P], glab[B * P];
    for (int i = 0; i < B * P; i++) pos[i] = 1 + (i % P) * 5 + (i / P), ids[i] = i * 7; // distinct, in [1, 28)
    float *out = gt_host((size_t)B * P * H * 4), *dh = gt_host((size_t)rows * H * 4);
    void *Dh = gt_dev_from(hid, (size_t)rows * H, t), *Ddr = gt_dev_from(dr, (size_t)B * P * H, t),
         *Ddc = gt_dev_from(dc, (size_t)B * H, t);
    void *Dout = gt_dev((size_t)B * P * H * 4), *Ddh = gt_dev((size_t)rows * H * 4);
    int32_t *Dpos = gt_dev(sizeof pos), *Dnm = gt_dev(sizeof nm), *Dids = gt_dev(sizeof ids), *Dlab = gt_dev(sizeof lab);
    int32_t *Dst = gt_dev(sizeof start);
    gt_up(Dpos, pos, sizeof pos), gt_up(Dnm, nm, sizeof nm), gt_up(Dids, ids, sizeof ids), gt_up(Dst, start, sizeof start);
    gt_poison(Ddh, (size_t)rows * H * 4, 0xff);
    const int32_t *hs = packed ? start : NULL, *ds = packed ? Dst : NULL;
    ok_or_die(tk_bert_gather_ref(TK_F32, B, L, H, P, hid, hs, pos, nm, ids, out, lab, &e) ||
                  tk_bert_scatter_ref(TK_F32, B, L, H, P, rows, dr, hs, pos, nm, dc, dh, &e),
              &e, "rows ref");
    ok_or_die(tk_bert_gather(gt_ctx_, t, B, L, H, P, Dh, ds, Dpos, Dnm, Dids, Dout, Dlab, &e) ||
                  tk_bert_scatter(gt_ctx_, t, B, L, H, P, rows, Ddr, ds, Dpos, Dnm, Ddc, Ddh, &e) || gt_sync(&e),
              &e, "rows");
    float *gr = gt_host_from(Dout, (size_t)B * P * H, t), *gd = gt_host_from(Ddh, (size_t)rows * H, t);
    gt_down(glab, Dlab, sizeof glab);
    size_t d = gt_ndiff(gr, out, (size_t)B * P * H) + gt_ndiff(gd, dh, (size_t)rows * H);
    for (int i = 0; i < B * P; i++) d += glab[i] != lab[i];
    printf("# table bert gather/scatter%s %-4s differing %zu\n", packed ? " packed" : "", tk_dtype_name(t), d);
    CHECK(d == 0);
    void *dv[] = {Dh, Ddr, Ddc, Dout, Ddh, Dpos, Dnm, Dids, Dlab, Dst};
    for (int i = 0; i < 10; i++) tk_free(gt_ctx_, dv[i]);
    free(hid), free(dr), free(dc), free(out), free(dh), free(gr), free(gd);
}

TK_TEST(bert_rows_exact) {
    for (int ti = 0; ti < 2; ti++)
        for (int packed = 0; packed < 2; packed++) rows_case(types[ti], packed, tk_failed_);
}

// The starts, the packing of the real tokens and back: copies and zeros, bit for bit (random values
// and small integers), with an unused slot (length 0) and rows past the last sequence.
static void pack_case(int B, int L, int H, tk_dtype t, int ints, int *tk_failed_) {
    int32_t *len = gt_host((size_t)B * 4), *st = gt_host((size_t)(B + 1) * 4), *gst = gt_host((size_t)(B + 1) * 4);
    for (int b = 0; b < B; b++) len[b] = b == 1 ? 0 : b == 0 ? L : 1 + (int)(gt_u32(b + 50) % L);
    tk_err e = {0};
    ok_or_die(tk_bert_starts_ref(B, L, 1, len, st, &e), &e, "starts ref");
    const int64_t rows = st[B] + 7, n = (int64_t)B * L;
    float *src = rnd((size_t)n * H, -4, 4, ints), *pk = gt_host((size_t)rows * H * 4), *bk = gt_host((size_t)n * H * 4);
    void *Dsrc = gt_dev_from(src, (size_t)n * H, t), *Dpk = gt_dev((size_t)rows * H * 4),
         *Dbk = gt_dev((size_t)n * H * 4);
    int32_t *Dlen = gt_dev((size_t)B * 4), *Dst = gt_dev((size_t)(B + 1) * 4);
    gt_up(Dlen, len, (size_t)B * 4);
    gt_poison(Dpk, (size_t)rows * H * 4, 0xff), gt_poison(Dbk, (size_t)n * H * 4, 0xff);
    ok_or_die(tk_bert_pack_ref(TK_F32, B, L, H, rows, st, len, src, pk, &e) ||
                  tk_bert_unpack_ref(TK_F32, B, L, H, st, len, pk, bk, &e),
              &e, "pack ref");
    ok_or_die(tk_bert_starts(gt_ctx_, B, L, 1, Dlen, Dst, &e) ||
                  tk_bert_pack(gt_ctx_, t, B, L, H, rows, Dst, Dlen, Dsrc, Dpk, &e) ||
                  tk_bert_unpack(gt_ctx_, t, B, L, H, Dst, Dlen, Dpk, Dbk, &e) || gt_sync(&e),
              &e, "pack");
    gt_down(gst, Dst, (size_t)(B + 1) * 4);
    float *gp = gt_host_from(Dpk, (size_t)rows * H, t), *gb = gt_host_from(Dbk, (size_t)n * H, t);
    size_t d = gt_ndiff(gp, pk, (size_t)rows * H) + gt_ndiff(gb, bk, (size_t)n * H);
    for (int b = 0; b <= B; b++) d += gst[b] != st[b];
    // and the padded starts: b L
    ok_or_die(tk_bert_starts(gt_ctx_, B, L, 0, Dlen, Dst, &e) || gt_sync(&e), &e, "starts");
    gt_down(gst, Dst, (size_t)(B + 1) * 4);
    for (int b = 0; b <= B; b++) d += gst[b] != b * L;
    printf("# table bert pack/unpack B%d L%d H%d %s %-4s differing %zu\n", B, L, H, ints ? "ints" : "random",
           tk_dtype_name(t), d);
    CHECK(d == 0);
    void *dv[] = {Dsrc, Dpk, Dbk, Dlen, Dst};
    for (int i = 0; i < 5; i++) tk_free(gt_ctx_, dv[i]);
    free(len), free(st), free(gst), free(src), free(pk), free(bk), free(gp), free(gb);
}

TK_TEST(bert_pack_exact) {
    for (int ti = 0; ti < 2; ti++)
        for (int ints = 0; ints < 2; ints++) {
            pack_case(32, 512, 1024, types[ti], ints, tk_failed_);
            pack_case(5, 37, 40, types[ti], ints, tk_failed_);
        }
}

// ---- cross-entropy ----

static void xent_case(int R, int C, int ld, float scale, tk_dtype t, int *tk_failed_) {
    size_t n = (size_t)R * ld;
    float *x = rnd(n, -4, 4, 0), *dx = gt_host(n * 4);
    int32_t *lab = gt_host(R * 4);
    for (int r = 0; r < R; r++) lab[r] = r % 7 == 3 ? -1 : (int32_t)(gt_u32(r) % (uint32_t)C);
    double acc[2] = {0.5, 2}, *ws = gt_host(tk_xent_ws_bytes(TK_BACKEND_CPU, R));
    int64_t cnt[2] = {0, 0}, gcnt[2];
    void *Dx = gt_dev_from(x, n, t), *Ddx = gt_dev(n * 4), *Dws = gt_dev(tk_xent_ws_bytes(TK_BACKEND_CUDA, R));
    int32_t *Dlab = gt_dev(R * 4);
    double *Dacc = gt_dev(16), gacc[2];
    int64_t *Dcnt = gt_dev(16);
    gt_up(Dlab, lab, R * 4), gt_up(Dacc, acc, 16), gt_up(Dcnt, cnt, 16);
    tk_err e = {0};
    ok_or_die(tk_xent_correct_ref(TK_F32, R, C, ld, x, lab, cnt, &e) ||
                  tk_xent_fwd_bwd_ref(TK_F32, R, C, ld, x, lab, scale, acc, 1, dx, ws, &e),
              &e, "xent ref");
    ok_or_die(tk_xent_correct(gt_ctx_, t, R, C, ld, Dx, Dlab, Dcnt, &e) ||
                  tk_xent_fwd_bwd(gt_ctx_, t, R, C, ld, Dx, Dlab, scale, Dacc, 1, Ddx, Dws, &e) || gt_sync(&e),
              &e, "xent");
    gt_down(gacc, Dacc, 16), gt_down(gcnt, Dcnt, 16);
    float *gdx = gt_host_from(Ddx, n, t);
    float la = (float)acc[0], lg = (float)gacc[0];
    char what[64];
    snprintf(what, sizeof what, "xent %dx%d loss", R, C);
    CHECK(!judge(what, t, gt_relerr(&lg, &la, 1), tol(t)));
    snprintf(what, sizeof what, "xent %dx%d dlogits", R, C);
    CHECK(!judge(what, t, gt_relerr(gdx, dx, n), tol(t)));
    printf("# table bert xent correct %-4s %lld/%lld vs ref %lld/%lld\n", tk_dtype_name(t), (long long)gcnt[0],
           (long long)gcnt[1], (long long)cnt[0], (long long)cnt[1]);
    CHECK(gcnt[0] == cnt[0] && gcnt[1] == cnt[1] && gacc[1] == acc[1]);
    void *dv[] = {Dx, Ddx, Dws, Dlab, Dacc, Dcnt};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dv[i]);
    free(x), free(dx), free(lab), free(ws), free(gdx);
}

TK_TEST(xent_random) {
    for (int ti = 0; ti < 2; ti++) {
        xent_case(500, 30522, 30528, 0.5f, types[ti], tk_failed_);
        xent_case(64, 2, 2, 1.0f, types[ti], tk_failed_);
    }
}
