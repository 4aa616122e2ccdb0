// kernels/embedding.cu against kernels/embedding_ref.c: the lookup of all tables in one launch
// and the backward fused with SGD, fp32 and bf16 tables, vector and scalar paths (D = 128, 36,
// 13), skewed indices so rows repeat within a batch (1- and 3-row tables: runs longer than 64,
// the block-summed path) and one in 32 padding (-1), random and small-integer inputs, the lookup output and its gradient in
// f32 or bf16 (the bf16 compute path: tk_embedding_fwd_act / tk_embedding_bwd_sgd_act). The
// lookup matches bit for bit; the update bit for bit on small integers and within 1 ulp of the
// table type on random inputs (rows seen more than 64 times are summed in another, fixed, order).
// TK_OPS_BENCH=1 also times the MLPerf-shaped batch (65536 x 26 lookups of 128).
#include "embedding.h"
#include "gpu_test.h"

typedef struct {
    int B, T, D;
    tk_dtype wt;
    int ints;
    tk_dtype ot; // the lookup output's and the gradient's type
} ecase;

// Table sizes from 1 row (every sample hits it) to thousands.
static const int64_t kRows[] = {3, 17, 1000, 1, 5000, 64, 2};

static int64_t *make_offsets(int T) {
    int64_t *off = gt_host(8 * (size_t)(T + 1));
    off[0] = 0;
    for (int t = 0; t < T; t++) off[t + 1] = off[t] + kRows[t % 7];
    return off;
}

// Skewed indices (u^3 piles up near row 0), so duplicates are common; one in 32 is padding (-1:
// a zero row forward, skipped backward).
static void make_idx(int32_t *idx, int B, int T, const int64_t *off) {
    float *u = gt_host(4 * (size_t)B * T), *p = gt_host(4 * (size_t)B * T);
    gt_fill(u, (size_t)B * T, 0, 1, 0);
    gt_fill(p, (size_t)B * T, 0, 1, 0);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            float x = u[b * T + t];
            int64_t rows = off[t + 1] - off[t];
            int64_t r = (int64_t)((double)x * x * x * rows);
            idx[b * T + t] = p[b * T + t] < 1.0f / 32 ? -1 : (int32_t)(r < rows ? r : rows - 1);
        }
    free(u), free(p);
}

// fp32 values -> a table buffer of type t (host), and back.
static void *to_table(const float *x, size_t n, tk_dtype t) {
    if (t == TK_F32) {
        float *h = gt_host(4 * n);
        memcpy(h, x, 4 * n);
        return h;
    }
    uint16_t *h = gt_host(2 * n);
    for (size_t i = 0; i < n; i++) h[i] = tk_f32_to_bf16(x[i]);
    return h;
}

static int emb_case(const ecase *k, const char *label) {
    const int B = k->B, T = k->T, D = k->D;
    int64_t *off = make_offsets(T);
    size_t rows = (size_t)off[T], nw = rows * D, nout = (size_t)B * T * D, es = tk_dtype_size(k->wt);
    size_t os = tk_dtype_size(k->ot);
    float *w0 = gt_host(4 * nw), *dout = gt_host(4 * nout), *outr = gt_host(4 * nout), *outg = gt_host(4 * nout);
    int32_t *idx = gt_host(4 * (size_t)B * T);
    make_idx(idx, B, T, off);
    gt_fill(w0, nw, k->ints ? -8 : -1, k->ints ? 8 : 1, k->ints);
    gt_fill(dout, nout, k->ints ? -3 : -1, k->ints ? 3 : 1, k->ints);
    float lr = k->ints ? 0.25f : 0.0371f;
    void *wr = to_table(w0, nw, k->wt), *wg = gt_host(es * nw);
    void *gin = to_table(dout, nout, k->ot); // the gradient in its type (both sides read these bytes)
    void *ohr = gt_host(os * nout), *ohg = gt_host(os * nout);
    tk_err e = {0};
    int bad = 0;

    // forward
    if (tk_embedding_fwd_act_ref(wr, k->wt, off, idx, B, T, D, ohr, k->ot, &e)) gt_die_("embedding_fwd_ref", &e);
    void *dw = gt_dev(es * nw), *doff = gt_dev(8 * (size_t)(T + 1)), *didx = gt_dev(4 * (size_t)B * T);
    void *dout_d = gt_dev(os * nout), *dres = gt_dev(os * nout), *dlr = gt_dev(4);
    gt_up(dw, wr, es * nw), gt_up(doff, off, 8 * (size_t)(T + 1)), gt_up(didx, idx, 4 * (size_t)B * T);
    gt_up(dout_d, gin, os * nout), gt_up(dlr, &lr, 4);
    gt_poison(dres, os * nout, 0xff);
    if (tk_embedding_fwd_act(gt_ctx_, dw, k->wt, doff, didx, B, T, D, dres, k->ot, &e) || gt_sync(&e))
        gt_die_("embedding_fwd", &e);
    gt_down(ohg, dres, os * nout);
    for (size_t i = 0; i < nout; i++) {
        outr[i] = k->ot == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)ohr)[i]) : ((float *)ohr)[i];
        outg[i] = k->ot == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)ohg)[i]) : ((float *)ohg)[i];
    }
    size_t dfwd = gt_ndiff(outg, outr, nout);
    // The output is the looked-up row (rounded to the output type): checks the reference too.
    size_t wrong = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) {
                int32_t r = idx[b * T + t];
                float v = r < 0 ? 0.0f : w0[(size_t)(off[t] + r) * D + d];
                if (k->wt == TK_BF16 || k->ot == TK_BF16) v = tk_bf16_to_f32(tk_f32_to_bf16(v));
                wrong += !(outr[((size_t)b * T + t) * D + d] == v);
            }

    // backward + SGD
    void *wsr = gt_host(tk_embedding_bwd_ws_bytes(TK_BACKEND_CPU, B, T));
    void *wsd = gt_dev(tk_embedding_bwd_ws_bytes(TK_BACKEND_CUDA, B, T));
    if (tk_embedding_bwd_sgd_act_ref(wr, k->wt, off, idx, B, T, D, gin, k->ot, &lr, wsr, &e))
        gt_die_("embedding_bwd_sgd_ref", &e);
    if (tk_embedding_bwd_sgd_act(gt_ctx_, dw, k->wt, doff, didx, B, T, D, dout_d, k->ot, dlr, wsd, &e) || gt_sync(&e))
        gt_die_("embedding_bwd_sgd", &e);
    gt_down(wg, dw, es * nw);
    size_t dbwd = 0, touched = 0;
    int64_t ulps = 0; // in units of the table type
    for (size_t i = 0; i < nw; i++) {
        float a = k->wt == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)wg)[i]) : ((float *)wg)[i];
        float r = k->wt == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)wr)[i]) : ((float *)wr)[i];
        int64_t u = gt_ulps(a, r) / (k->wt == TK_BF16 ? 65536 : 1);
        ulps = u > ulps ? u : ulps;
        dbwd += !(a == r);
        touched += r != w0[i];
    }
    bad = dfwd != 0 || wrong != 0 || (k->ints ? dbwd != 0 : ulps > 1) || touched == 0;
    printf("# table embedding %-6s B %4d T %d D %3d %-4s out/grad %-4s fwd differing %zu (wrong %zu); bwd differing "
           "%zu, max %lld ulp (of %zu, %zu updated)\n", label, B, T, D, tk_dtype_name(k->wt), tk_dtype_name(k->ot),
           dfwd, wrong, dbwd, (long long)ulps, nw, touched);
    void *dev[] = {dw, doff, didx, dout_d, dres, dlr, wsd};
    for (int i = 0; i < 7; i++) tk_free(gt_ctx_, dev[i]);
    free(off), free(w0), free(dout), free(outr), free(outg), free(idx), free(wr), free(wg), free(wsr);
    free(gin), free(ohr), free(ohg);
    return bad;
}

TK_TEST(embedding_random) {
    int Ds[] = {128, 36, 13};
    for (int d = 0; d < 3; d++)
        for (int t = 0; t < 2; t++)
            for (int o = 0; o < 2; o++) {
                ecase k = {512, 7, Ds[d], t ? TK_BF16 : TK_F32, 0, o ? TK_BF16 : TK_F32};
                CHECK_EQ_INT(emb_case(&k, "random"), 0);
            }
}

TK_TEST(embedding_ints_exact) {
    ecase ks[] = {{300, 7, 128, TK_BF16, 1, TK_F32}, {300, 5, 13, TK_F32, 1, TK_F32},
                  {300, 7, 128, TK_BF16, 1, TK_BF16}, {300, 5, 13, TK_F32, 1, TK_BF16}};
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(emb_case(&ks[i], "ints"), 0);
}

// tk_embedding_dense_sgd against its reference, bit for bit (both do the update of a row used
// once: fp64 product and difference, one rounding), random and small integers (exact: w - lr g
// with lr 0.25 and whole numbers), odd sizes for the grid-stride tail; and the reference equals
// tk_embedding_bwd_sgd_ref over identity indices (one table of n / D rows, each used once).
TK_TEST(embedding_dense_sgd) {
    const int64_t sizes[] = {1, 1000003, 4250624};
    tk_err e = {0};
    for (int ints = 0; ints < 2; ints++)
        for (int wi = 0; wi < 2; wi++)
            for (int si = 0; si < 3; si++) {
                const tk_dtype wt = wi ? TK_BF16 : TK_F32;
                const int64_t n = sizes[si];
                const size_t es = tk_dtype_size(wt);
                float *w0 = gt_host(4 * (size_t)n), *g = gt_host(4 * (size_t)n), lr = ints ? 0.25f : 0.0371f;
                gt_fill(w0, (size_t)n, ints ? -8 : -1, ints ? 8 : 1, ints);
                gt_fill(g, (size_t)n, ints ? -3 : -1, ints ? 3 : 1, ints);
                void *wr = to_table(w0, (size_t)n, wt), *wg = gt_host(es * (size_t)n);
                void *dw = gt_dev(es * (size_t)n), *dg = gt_dev(4 * (size_t)n), *dlr = gt_dev(4);
                gt_up(dw, wr, es * (size_t)n), gt_up(dg, g, 4 * (size_t)n), gt_up(dlr, &lr, 4);
                CHECK_EQ_INT(tk_embedding_dense_sgd_ref(wr, wt, n, g, &lr, &e), 0);
                CHECK_EQ_INT(tk_embedding_dense_sgd(gt_ctx_, dw, wt, n, dg, dlr, &e), 0);
                CHECK_EQ_INT(gt_sync(&e), 0);
                gt_down(wg, dw, es * (size_t)n);
                size_t diff = 0, moved = 0, exact_bad = 0;
                for (int64_t i = 0; i < n; i++) {
                    float a = wt == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)wg)[i]) : ((float *)wg)[i];
                    float r = wt == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)wr)[i]) : ((float *)wr)[i];
                    diff += !(a == r);
                    moved += r != w0[i];
                    if (ints) exact_bad += !(r == w0[i] - 0.25f * g[i]); // |w| <= 8.75: exact in bf16 too
                }
                printf("# table embedding dense_sgd %s n %8lld %s: differing %zu, exact misses %zu, %zu moved\n",
                       tk_dtype_name(wt), (long long)n, ints ? "ints  " : "random", diff, exact_bad, moved);
                CHECK(diff == 0 && exact_bad == 0);
                CHECK(n == 1 || moved > 0);
                tk_free(gt_ctx_, dw), tk_free(gt_ctx_, dg), tk_free(gt_ctx_, dlr);
                free(w0), free(g), free(wr), free(wg);
            }
    // The reference = the sparse update of rows used once.
    const int D = 128, rows = 777;
    const int64_t n = (int64_t)rows * D, off[2] = {0, rows};
    float *w0 = gt_host(4 * (size_t)n), *g = gt_host(4 * (size_t)n), lr = 0.0371f;
    int32_t *ident = gt_host(4 * (size_t)rows);
    for (int r = 0; r < rows; r++) ident[r] = rows - 1 - r; // any order: each row once
    gt_fill(w0, (size_t)n, -1, 1, 0);
    for (int r = 0; r < rows; r++) gt_fill(g + (size_t)(rows - 1 - r) * D, D, -1, 1, 0); // sample r uses row rows-1-r
    float *gs = gt_host(4 * (size_t)n); // the gradient in sample order, for the sparse update
    for (int r = 0; r < rows; r++) memcpy(gs + (size_t)r * D, g + (size_t)(rows - 1 - r) * D, 4 * (size_t)D);
    for (int wi = 0; wi < 2; wi++) {
        const tk_dtype wt = wi ? TK_BF16 : TK_F32;
        void *a = to_table(w0, (size_t)n, wt), *b = to_table(w0, (size_t)n, wt);
        void *ws = gt_host(tk_embedding_bwd_ws_bytes(TK_BACKEND_CPU, rows, 1));
        CHECK_EQ_INT(tk_embedding_dense_sgd_ref(a, wt, n, g, &lr, &e), 0);
        CHECK_EQ_INT(tk_embedding_bwd_sgd_ref(b, wt, off, ident, rows, 1, D, gs, &lr, ws, &e), 0);
        CHECK(memcmp(a, b, tk_dtype_size(wt) * (size_t)n) == 0);
        free(a), free(b), free(ws);
    }
    free(w0), free(g), free(gs), free(ident);
}

TK_TEST(embedding_bad_index_gives_zero_row) {
    const int B = 4, T = 2, D = 8;
    int64_t off[] = {0, 3, 5};
    int32_t idx[] = {0, 1, 3, 0, 2, -1, 1, 1}; // (1, 0) and (2, 1) out of range
    float w[5 * 8], out[4 * 2 * 8];
    gt_fill(w, 40, 1, 2, 0);
    void *dw = gt_dev(sizeof w), *doff = gt_dev(sizeof off), *didx = gt_dev(sizeof idx), *dout = gt_dev(sizeof out);
    gt_up(dw, w, sizeof w), gt_up(doff, off, sizeof off), gt_up(didx, idx, sizeof idx);
    tk_err e = {0};
    CHECK_EQ_INT(tk_embedding_fwd(gt_ctx_, dw, TK_F32, doff, didx, B, T, D, dout, &e), 0);
    gt_down(out, dout, sizeof out);
    for (int d = 0; d < D; d++) {
        CHECK(out[(1 * T + 0) * D + d] == 0 && out[(2 * T + 1) * D + d] == 0);
        CHECK(out[(3 * T + 1) * D + d] == w[(3 + 1) * D + d]);
    }
    void *dev[] = {dw, doff, didx, dout};
    for (int i = 0; i < 4; i++) tk_free(gt_ctx_, dev[i]);
}

// The backward (a CUB radix sort and our kernels) captured in a graph and replayed equals eager.
TK_TEST(embedding_bwd_graph_equals_eager) {
    const int B = 256, T = 7, D = 128;
    int64_t *off = make_offsets(T);
    size_t nw = (size_t)off[T] * D, nout = (size_t)B * T * D;
    float *w0 = gt_host(4 * nw), *dout = gt_host(4 * nout), lr = 0.01f;
    int32_t *idx = gt_host(4 * (size_t)B * T);
    make_idx(idx, B, T, off);
    gt_fill(w0, nw, -1, 1, 0), gt_fill(dout, nout, -1, 1, 0);
    void *wa = gt_dev(4 * nw), *wb = gt_dev(4 * nw), *doff = gt_dev(8 * (size_t)(T + 1)), *didx = gt_dev(4 * (size_t)B * T);
    void *dd = gt_dev(4 * nout), *dlr = gt_dev(4), *ws = gt_dev(tk_embedding_bwd_ws_bytes(TK_BACKEND_CUDA, B, T));
    gt_up(wa, w0, 4 * nw), gt_up(wb, w0, 4 * nw), gt_up(doff, off, 8 * (size_t)(T + 1));
    gt_up(didx, idx, 4 * (size_t)B * T), gt_up(dd, dout, 4 * nout), gt_up(dlr, &lr, 4);
    tk_err e = {0};
    CHECK_EQ_INT(tk_embedding_bwd_sgd(gt_ctx_, wa, TK_F32, doff, didx, B, T, D, dd, dlr, ws, &e), 0);
    CHECK_EQ_INT(tk_embedding_bwd_sgd(gt_ctx_, wa, TK_F32, doff, didx, B, T, D, dd, dlr, ws, &e), 0);
    tk_graph g = {0};
    CHECK_EQ_INT(tk_graph_begin(gt_ctx_, &e), 0);
    CHECK_EQ_INT(tk_embedding_bwd_sgd(gt_ctx_, wb, TK_F32, doff, didx, B, T, D, dd, dlr, ws, &e), 0);
    CHECK_EQ_INT(tk_graph_end(gt_ctx_, &g, &e), 0);
    CHECK_EQ_INT(tk_graph_launch(gt_ctx_, &g, &e), 0);
    CHECK_EQ_INT(tk_graph_launch(gt_ctx_, &g, &e), 0); // two updates, as eagerly
    CHECK_EQ_INT(gt_sync(&e), 0);
    float *a = gt_host(4 * nw), *b = gt_host(4 * nw);
    gt_down(a, wa, 4 * nw), gt_down(b, wb, 4 * nw);
    CHECK(memcmp(a, b, 4 * nw) == 0);
    CHECK(memcmp(a, w0, 4 * nw) != 0);
    tk_graph_destroy(&g);
    void *dev[] = {wa, wb, doff, didx, dd, dlr, ws};
    for (int i = 0; i < 7; i++) tk_free(gt_ctx_, dev[i]);
    free(off), free(w0), free(dout), free(idx), free(a), free(b);
}

// ---- TK_OPS_BENCH=1 ----
typedef struct {
    void *w, *off, *idx, *out, *dout, *lr, *ws;
    int B, T, D, bwd;
    tk_dtype ot;
} ebench;

static void ebench_run(void *p) {
    ebench *b = p;
    tk_err e = {0};
    int rc = b->bwd ? tk_embedding_bwd_sgd_act(gt_ctx_, b->w, TK_BF16, b->off, b->idx, b->B, b->T, b->D, b->dout, b->ot,
                                               b->lr, b->ws, &e)
                    : tk_embedding_fwd_act(gt_ctx_, b->w, TK_BF16, b->off, b->idx, b->B, b->T, b->D, b->out, b->ot, &e);
    if (rc) gt_die_("embedding bench", &e);
}

TK_TEST(embedding_bench) {
    (void)tk_failed_; // a benchmark, not a check
    if (!getenv("TK_OPS_BENCH")) return;
    // 26 tables of 1M rows (bf16, 6.5 GiB), batch 65536, indices skewed as above (hot rows).
    const int B = 65536, T = 26, D = 128;
    const int64_t R = 1000000;
    int64_t off[27];
    for (int t = 0; t <= T; t++) off[t] = t * R;
    int32_t *idx = gt_host(4 * (size_t)B * T);
    float *u = gt_host(4 * (size_t)B * T);
    gt_fill(u, (size_t)B * T, 0, 1, 0);
    for (size_t i = 0; i < (size_t)B * T; i++) idx[i] = (int32_t)((double)u[i] * u[i] * u[i] * (R - 1));
    ebench b = {gt_dev(2 * (size_t)R * T * D), gt_dev(sizeof off), gt_dev(4 * (size_t)B * T), gt_dev(4 * (size_t)B * T * D),
                gt_dev(4 * (size_t)B * T * D), gt_dev(4), gt_dev(tk_embedding_bwd_ws_bytes(TK_BACKEND_CUDA, B, T)), B, T, D, 0, TK_F32};
    float lr = 1e-6f;
    gt_up(b.off, off, sizeof off), gt_up(b.idx, idx, 4 * (size_t)B * T), gt_up(b.lr, &lr, 4);
    gt_poison(b.w, 2 * (size_t)R * T * D, 0x3c); // bf16 0x3c3c = 0.0115
    gt_poison(b.dout, 4 * (size_t)B * T * D, 0x3c);
    double f = gt_time_ms(ebench_run, &b, 11);
    b.ot = TK_BF16;
    double fh = gt_time_ms(ebench_run, &b, 11);
    b.bwd = 1;
    double gh = gt_time_ms(ebench_run, &b, 11);
    b.ot = TK_F32;
    double g = gt_time_ms(ebench_run, &b, 11);
    for (size_t i = 0; i < (size_t)B * T; i++) idx[i] = (int32_t)((double)u[i] * (R - 1)); // uniform: few repeats
    gt_up(b.idx, idx, 4 * (size_t)B * T);
    double g2 = gt_time_ms(ebench_run, &b, 11);
    double bytes_f = (double)B * T * D * (2 + 4); // read bf16 rows, write fp32
    printf("# table bench embedding fwd  B 65536 T 26 D 128 bf16: %.3f ms (%.0f GB/s of rows read + out written)\n", f,
           bytes_f / f / 1e6);
    printf("# table bench embedding bwd+sgd: skewed rows (u^3) %.3f ms, uniform rows %.3f ms\n", g, g2);
    printf("# table bench embedding bf16 out/grad: fwd %.3f ms, bwd+sgd (skewed) %.3f ms\n", fh, gh);
    void *dev[] = {b.w, b.off, b.idx, b.out, b.dout, b.lr, b.ws};
    for (int i = 0; i < 7; i++) tk_free(gt_ctx_, dev[i]);
    free(idx), free(u);
}
