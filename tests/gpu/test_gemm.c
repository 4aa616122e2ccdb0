// tk_gemm on the cuda backend (cuBLASLt) against tk_gemm_ref: every transpose combination, every
// epilogue, fp32 / bf16 / fp16 inputs, odd and aligned shapes, fused and unfused epilogues, fresh
// random inputs (||D - ref|| / ||ref|| <= 1e-5 for fp32, 1e-2 otherwise) and small integers
// (bit-exact); a captured graph of GEMMs replays to the bits of the eager run.
// TK_GEMM_BENCH=1 also times DLRM's GEMM shapes and a large square one (not a test).
#include "gemm.h"
#include "gpu_test.h"

// lib/gpu/gemm_cublaslt.cu, for tests: force the unfused epilogues / ask which path a call takes.
void tk_gemm_cuda_set_unfused(tk_ctx *c, int on);
int tk_gemm_cuda_is_fused(tk_ctx *c, const tk_gemm_args *g, tk_err *e);

typedef struct {
    int M, N, K, ta, tb;
    tk_dtype ab, cd;
    tk_epilogue epi;
    int ints;
    float beta;
} gcase;

typedef struct {
    int cases, failed, fused;
    double max_err;
    size_t ties, ties_set; // relu pre-activations exactly 0, and how many of them set the mask bit
} gstats;

static const char *epi_name(tk_epilogue e) {
    static const char *n[] = {"none", "bias", "relu_bias", "drelu", "drelu_bgrad", "bgradb"};
    return n[e];
}

// The bit of D[m, n] in cuBLASLt's relu mask: a column-major bit matrix of D^T whose leading
// dimension is N rounded up to 128 (see tk_gemm_aux_bytes).
static size_t aux_bit(int N, int m, int n) { return (size_t)m * (((size_t)N + 127) / 128 * 128) + n; }

// One case; returns 0 when it passes, and adds to st.
static int gemm_case(const gcase *k, gstats *st) {
    const int M = k->M, N = k->N, K = k->K;
    size_t nA = (size_t)M * K, nB = (size_t)K * N, nD = (size_t)M * N, nbg = M > N ? M : N;
    float *A = gt_host(4 * nA), *B = gt_host(4 * nB), *C = gt_host(4 * nD), *bias = gt_host(4 * N);
    float *Dr = gt_host(4 * nD), *Dg = gt_host(4 * nD), *bgr = gt_host(4 * nbg), *bgg = gt_host(4 * nbg);
    uint8_t *auxr = gt_host(nD);
    float lo = k->ints ? -3 : -1, hi = k->ints ? 3 : 1;
    gt_fill(A, nA, lo, hi, k->ints);
    gt_fill(B, nB, lo, hi, k->ints);
    gt_fill(C, nD, lo, hi, k->ints);
    gt_fill(bias, N, lo, hi, k->ints);
    gt_round(A, nA, k->ab);
    gt_round(B, nB, k->ab);
    gt_round(C, nD, k->cd);
    gt_round(bias, N, k->cd);
    for (size_t i = 0; i < nD; i++) auxr[i] = (gt_u32(i) >> 7) & 1;

    tk_gemm_args g = {.M = M, .N = N, .K = K, .transa = k->ta, .transb = k->tb, .ab_type = TK_F32,
                      .cd_type = TK_F32, .A = A, .B = B, .C = k->beta != 0 ? C : NULL, .D = Dr,
                      .alpha = 1, .beta = k->beta, .epi = k->epi, .bias = bias, .aux = auxr, .bgrad = bgr};
    tk_err e = {0};
    if (tk_gemm_ref(&g, &e)) gt_die_("tk_gemm_ref", &e);
    float *Vr = NULL; // RELU_BIAS: the pre-activation, to tell ties (exactly 0) from errors
    if (k->epi == TK_EPI_RELU_BIAS) {
        Vr = gt_host(4 * nD);
        tk_gemm_args gv = g;
        gv.epi = TK_EPI_BIAS, gv.D = Vr;
        if (tk_gemm_ref(&gv, &e)) gt_die_("tk_gemm_ref", &e);
    }

    // Device side: the same values in the case's types; the relu mask in cuBLASLt's layout.
    size_t es_ab = tk_dtype_size(k->ab), es_cd = tk_dtype_size(k->cd);
    size_t aux_bytes = tk_gemm_aux_bytes(gt_ctx_, M, N);
    void *dA = gt_dev(es_ab * nA), *dB = gt_dev(es_ab * nB), *dC = gt_dev(es_cd * nD), *dD = gt_dev(es_cd * nD);
    void *dbias = gt_dev(es_cd * N), *daux = gt_dev(aux_bytes), *dbg = gt_dev(4 * nbg);
    gt_up_as(dA, A, nA, k->ab);
    gt_up_as(dB, B, nB, k->ab);
    gt_up_as(dC, C, nD, k->cd);
    gt_up_as(dbias, bias, N, k->cd);
    uint8_t *bits = gt_host(aux_bytes);
    if (k->epi == TK_EPI_DRELU || k->epi == TK_EPI_DRELU_BGRAD) {
        memset(bits, 0, aux_bytes);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++)
                if (auxr[(size_t)m * N + n]) bits[aux_bit(N, m, n) / 8] |= (uint8_t)(1u << (aux_bit(N, m, n) % 8));
        gt_up(daux, bits, aux_bytes);
    } else {
        gt_poison(daux, aux_bytes, 0xa5);
    }
    gt_poison(dD, es_cd * nD, 0xff);
    gt_poison(dbg, 4 * nbg, 0xff);
    g.ab_type = k->ab, g.cd_type = k->cd, g.A = dA, g.B = dB, g.C = k->beta != 0 ? dC : NULL, g.D = dD;
    g.bias = dbias, g.aux = daux, g.bgrad = dbg;
    int fused = tk_gemm_cuda_is_fused(gt_ctx_, &g, &e);
    int bad = 0;
    if (fused < 0 || tk_gemm(gt_ctx_, &g, &e) || gt_sync(&e)) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("#   %dx%dx%d ta%d tb%d %s/%s %s: error: %s\n", M, N, K, k->ta, k->tb, tk_dtype_name(k->ab),
               tk_dtype_name(k->cd), epi_name(k->epi), buf);
        bad = 1;
    }
    double err = 0;
    if (!bad) {
        gt_down_as(Dg, dD, nD, k->cd);
        int nb = k->epi == TK_EPI_DRELU_BGRAD ? N : k->epi == TK_EPI_BGRADB ? M : 0;
        if (nb) gt_down(bgg, dbg, 4 * (size_t)nb);
        double tol = k->ab == TK_F32 && k->cd == TK_F32 ? 1e-5 : 1e-2;
        if (k->ints) {
            size_t d = gt_ndiff(Dg, Dr, nD) + gt_ndiff(bgg, bgr, (size_t)nb);
            bad |= d != 0;
            err = (double)d;
        } else {
            err = gt_relerr(Dg, Dr, nD);
            double eb = nb ? gt_relerr(bgg, bgr, (size_t)nb) : 0;
            if (eb > err) err = eb;
            bad |= !(err <= tol);
        }
        size_t mask_bad = 0;
        if (k->epi == TK_EPI_RELU_BIAS) {
            gt_down(bits, daux, aux_bytes);
            for (int m = 0; m < M; m++)
                for (int n = 0; n < N; n++) {
                    size_t b = aux_bit(N, m, n), i = (size_t)m * N + n;
                    int bit = (bits[b / 8] >> (b % 8)) & 1;
                    // The bit must say D > 0; where D == 0 it must be clear unless the
                    // pre-activation is a tie: exactly 0 (ints), or within one rounding of an
                    // operand (|x| < 4) of 0 in the output type: cuBLASLt's bf16/fp16 epilogue
                    // can round x + bias to exactly 0, and sets the bit at 0.
                    float tie_tol = k->cd == TK_F32 ? 1e-4f : k->cd == TK_F16 ? 4e-3f : 3e-2f;
                    int tie = k->ints ? Vr[i] == 0 : Dg[i] == 0 && fabsf(Vr[i]) <= tie_tol;
                    if (tie) st->ties++, st->ties_set += bit;
                    else mask_bad += bit != (Dg[i] > 0);
                }
            bad |= mask_bad != 0;
        }
        if (bad)
            printf("#   %dx%dx%d ta%d tb%d %s/%s %s %s beta %g %s: %s %g, mask mismatches %zu\n", M, N, K,
                   k->ta, k->tb, tk_dtype_name(k->ab), tk_dtype_name(k->cd), epi_name(k->epi),
                   k->ints ? "ints" : "random", k->beta, fused ? "fused" : "unfused",
                   k->ints ? "differing elements" : "rel err", err, mask_bad);
    }
    st->cases++;
    st->failed += bad;
    st->fused += fused > 0;
    if (!k->ints && err > st->max_err) st->max_err = err;
    void *dev[] = {dA, dB, dC, dD, dbias, daux, dbg};
    for (int i = 0; i < 7; i++) tk_free(gt_ctx_, dev[i]);
    free(A), free(B), free(C), free(bias), free(Dr), free(Dg), free(bgr), free(bgg), free(auxr), free(bits), free(Vr);
    return bad;
}

// Every transpose and epilogue for one type pair, on the given shapes, fused (when cuBLASLt
// has the kernel) and forced unfused.
static int sweep(tk_dtype ab, tk_dtype cd, int ints, const int (*shapes)[3], int nshapes) {
    gstats st = {0};
    for (int unf = 0; unf < 2; unf++) {
        tk_gemm_cuda_set_unfused(gt_ctx_, unf);
        for (int s = 0; s < nshapes; s++)
            for (int epi = TK_EPI_NONE; epi <= TK_EPI_BGRADB; epi++)
                for (int t = 0; t < 4; t++) {
                    gcase k = {shapes[s][0], shapes[s][1], shapes[s][2], t >> 1, t & 1, ab, cd,
                               (tk_epilogue)epi, ints, 0};
                    gemm_case(&k, &st);
                    if (epi <= TK_EPI_BIAS) { // beta != 0: D = A B + beta C (+ bias)
                        k.beta = ints ? 2.0f : 0.5f;
                        gemm_case(&k, &st);
                    }
                }
    }
    tk_gemm_cuda_set_unfused(gt_ctx_, 0);
    printf("# table gemm %-4s/%-4s %-6s cases %3d failed %d fused %3d max_rel_err %.2e relu ties %zu (bit set %zu)\n",
           tk_dtype_name(ab), tk_dtype_name(cd), ints ? "ints" : "random", st.cases, st.failed, st.fused,
           st.max_err, st.ties, st.ties_set);
    return st.failed;
}

// Odd shapes, shapes a multiple of the tensor-core tile, and a DLRM-like tall one.
static const int rand_shapes[][3] = {{37, 29, 53}, {5, 130, 7}, {128, 256, 64}, {512, 64, 96}};
// |D| stays <= 256 so small-integer results are exact in bf16 too (K <= 24, |x| <= 3).
static const int int_shapes[][3] = {{9, 11, 13}, {32, 64, 24}, {7, 135, 16}};
#define NS(a) ((int)(sizeof(a) / sizeof(a[0])))

TK_TEST(gemm_f32_random) { CHECK_EQ_INT(sweep(TK_F32, TK_F32, 0, rand_shapes, NS(rand_shapes)), 0); }
TK_TEST(gemm_f32_ints_exact) { CHECK_EQ_INT(sweep(TK_F32, TK_F32, 1, int_shapes, NS(int_shapes)), 0); }
TK_TEST(gemm_bf16_f32_random) { CHECK_EQ_INT(sweep(TK_BF16, TK_F32, 0, rand_shapes, NS(rand_shapes)), 0); }
TK_TEST(gemm_bf16_random) { CHECK_EQ_INT(sweep(TK_BF16, TK_BF16, 0, rand_shapes, NS(rand_shapes)), 0); }
TK_TEST(gemm_bf16_ints_exact) { CHECK_EQ_INT(sweep(TK_BF16, TK_BF16, 1, int_shapes, NS(int_shapes)), 0); }
TK_TEST(gemm_f16_random) { CHECK_EQ_INT(sweep(TK_F16, TK_F16, 0, rand_shapes, NS(rand_shapes)), 0); }
TK_TEST(gemm_f16_ints_exact) { CHECK_EQ_INT(sweep(TK_F16, TK_F16, 1, int_shapes, NS(int_shapes)), 0); }

TK_TEST(gemm_empty_sizes) {
    // K = 0: D = beta C (+ epilogue); BGRADB over an empty K is 0.
    gstats st = {0};
    int shapes[][3] = {{8, 12, 0}, {0, 12, 8}, {8, 0, 8}};
    for (int s = 0; s < 3; s++)
        for (int epi = TK_EPI_NONE; epi <= TK_EPI_BGRADB; epi++) {
            gcase k = {shapes[s][0], shapes[s][1], shapes[s][2], 0, 1, TK_F32, TK_F32, (tk_epilogue)epi, 1,
                       epi == TK_EPI_NONE ? 2.0f : 0};
            gemm_case(&k, &st);
        }
    CHECK_EQ_INT(st.failed, 0);
}

TK_TEST(gemm_bad_arguments) {
    tk_err e = {0};
    float x;
    tk_gemm_args g = {.M = 2, .N = 2, .K = 2, .ab_type = TK_F32, .cd_type = TK_BF16, .A = &x, .B = &x,
                      .D = &x, .alpha = 1};
    CHECK_EQ_INT(tk_gemm(gt_ctx_, &g, &e), TK_EINTERNAL); // fp32 inputs, bf16 output: unsupported
    g.cd_type = TK_F32;
    g.beta = 1; // without C
    CHECK_EQ_INT(tk_gemm(gt_ctx_, &g, &e), TK_EINTERNAL);
    g.beta = 0;
    g.epi = TK_EPI_RELU_BIAS; // without bias
    CHECK_EQ_INT(tk_gemm(gt_ctx_, &g, &e), TK_EINTERNAL);
}

// A small MLP step (forward Linear+ReLU twice, backward with dReLU+bias-grad and the weight
// gradients with BGRADB) captured as one graph: replays give the eager results bit for bit,
// also after the inputs change in place.
TK_TEST(gemm_graph_replay_equals_eager) {
    const int Bt = 96, I = 40, H = 72, O = 24;
    tk_dtype t = TK_BF16;
    float *hx = gt_host(4 * Bt * I), *hw1 = gt_host(4 * H * I), *hw2 = gt_host(4 * O * H), *hb1 = gt_host(4 * H),
          *hb2 = gt_host(4 * O), *hdy = gt_host(4 * Bt * O);
    void *x = gt_dev(2 * Bt * I), *w1 = gt_dev(2 * H * I), *w2 = gt_dev(2 * O * H), *b1 = gt_dev(2 * H),
         *b2 = gt_dev(2 * O), *y1 = gt_dev(2 * Bt * H), *y2 = gt_dev(2 * Bt * O), *dy = gt_dev(2 * Bt * O),
         *dy1 = gt_dev(2 * Bt * H), *dw2 = gt_dev(4 * O * H), *dw1 = gt_dev(4 * H * I), *db2 = gt_dev(4 * O),
         *db1 = gt_dev(4 * H), *a1 = gt_dev(tk_gemm_aux_bytes(gt_ctx_, Bt, H)),
         *a2 = gt_dev(tk_gemm_aux_bytes(gt_ctx_, Bt, O));
    // Outputs compared: y2 (bf16), dy1 (bf16), dw1, dw2, db1, db2 (fp32).
    struct { void *p; size_t bytes; } outs[] = {{y2, 2 * Bt * O}, {dy1, 2 * Bt * H}, {dw2, 4 * O * H},
                                                {dw1, 4 * H * I}, {db2, 4 * O}, {db1, 4 * H}};
    enum { NOUT = 6 };
    tk_gemm_args seq[] = {
        // y1 = relu(x w1^T + b1)
        {.M = Bt, .N = H, .K = I, .transb = 1, .ab_type = t, .cd_type = t, .A = x, .B = w1, .D = y1, .alpha = 1,
         .epi = TK_EPI_RELU_BIAS, .bias = b1, .aux = a1},
        // y2 = relu(y1 w2^T + b2)
        {.M = Bt, .N = O, .K = H, .transb = 1, .ab_type = t, .cd_type = t, .A = y1, .B = w2, .D = y2, .alpha = 1,
         .epi = TK_EPI_RELU_BIAS, .bias = b2, .aux = a2},
        // dW2 = dy^T y1, db2 = sum dy (dy is taken as the gradient of y2's pre-activation)
        {.M = O, .N = H, .K = Bt, .transa = 1, .ab_type = t, .cd_type = TK_F32, .A = dy, .B = y1, .D = dw2,
         .alpha = 1, .epi = TK_EPI_BGRADB, .bgrad = db2},
        // dy1 = (dy w2) * relu'(a1), db1 = column sums of dy1
        {.M = Bt, .N = H, .K = O, .ab_type = t, .cd_type = t, .A = dy, .B = w2, .D = dy1, .alpha = 1,
         .epi = TK_EPI_DRELU_BGRAD, .aux = a1, .bgrad = db1},
        // dW1 = dy1^T x
        {.M = H, .N = I, .K = Bt, .transa = 1, .ab_type = t, .cd_type = TK_F32, .A = dy1, .B = x, .D = dw1,
         .alpha = 1},
    };
    int nseq = (int)(sizeof seq / sizeof seq[0]);
    tk_err e = {0};
    char *eager[NOUT], *graph[NOUT];
    for (int i = 0; i < NOUT; i++) eager[i] = gt_host(outs[i].bytes), graph[i] = gt_host(outs[i].bytes);
    tk_graph gr = {0};
    int captured = 0;
    for (int round = 0; round < 2; round++) {
        // New inputs each round, written into the same buffers the graph captured.
        gt_fill(hx, Bt * I, -1, 1, 0);
        gt_fill(hw1, H * I, -0.3f, 0.3f, 0);
        gt_fill(hw2, O * H, -0.3f, 0.3f, 0);
        gt_fill(hb1, H, -0.2f, 0.2f, 0);
        gt_fill(hb2, O, -0.2f, 0.2f, 0);
        gt_fill(hdy, Bt * O, -1, 1, 0);
        gt_up_as(x, hx, Bt * I, t), gt_up_as(w1, hw1, H * I, t), gt_up_as(w2, hw2, O * H, t);
        gt_up_as(b1, hb1, H, t), gt_up_as(b2, hb2, O, t), gt_up_as(dy, hdy, Bt * O, t);
        int ok = 1;
        for (int i = 0; i < nseq && ok; i++) ok = tk_gemm(gt_ctx_, &seq[i], &e) == 0;
        ok = ok && gt_sync(&e) == 0;
        CHECK(ok);
        if (!ok) break;
        for (int i = 0; i < NOUT; i++) gt_down(eager[i], outs[i].p, outs[i].bytes), gt_poison(outs[i].p, outs[i].bytes, 0xff);
        if (!captured) {
            CHECK_EQ_INT(tk_graph_begin(gt_ctx_, &e), 0);
            for (int i = 0; i < nseq; i++) CHECK_EQ_INT(tk_gemm(gt_ctx_, &seq[i], &e), 0);
            CHECK_EQ_INT(tk_graph_end(gt_ctx_, &gr, &e), 0);
            captured = 1;
        }
        CHECK_EQ_INT(tk_graph_launch(gt_ctx_, &gr, &e), 0);
        CHECK_EQ_INT(gt_sync(&e), 0);
        for (int i = 0; i < NOUT; i++) {
            gt_down(graph[i], outs[i].p, outs[i].bytes);
            CHECK(memcmp(eager[i], graph[i], outs[i].bytes) == 0);
        }
    }
    tk_graph_destroy(&gr);
    for (int i = 0; i < NOUT; i++) free(eager[i]), free(graph[i]);
    void *dev[] = {x, w1, w2, b1, b2, y1, y2, dy, dy1, dw2, dw1, db2, db1, a1, a2};
    for (int i = 0; i < 15; i++) tk_free(gt_ctx_, dev[i]);
    free(hx), free(hw1), free(hw2), free(hb1), free(hb2), free(hdy);
}

// ---- TK_GEMM_BENCH=1: median time of DLRM's GEMMs at batch 65536 and an 8192^3 GEMM ----

typedef struct {
    tk_gemm_args g;
} gbench;

static void gbench_run(void *p) {
    tk_err e = {0};
    if (tk_gemm(gt_ctx_, &((gbench *)p)->g, &e)) gt_die_("bench gemm", &e);
}

TK_TEST(gemm_bench) {
    (void)tk_failed_; // a benchmark, not a check
    if (!getenv("TK_GEMM_BENCH")) return;
    // M, N, K, transa, transb, epilogue: DLRM layers as forward (x W^T), data-gradient and
    // weight-gradient GEMMs at the MLPerf global batch of 65536, then a large square one.
    struct { int M, N, K, ta, tb; tk_epilogue epi; const char *what; } sh[] = {
        {65536, 1024, 480, 0, 1, TK_EPI_RELU_BIAS, "top1 fwd 480->1024"},
        {65536, 1024, 1024, 0, 1, TK_EPI_RELU_BIAS, "top2 fwd 1024->1024"},
        {65536, 1024, 1024, 0, 0, TK_EPI_DRELU_BGRAD, "top2 dgrad"},
        {65536, 1024, 1024, 0, 0, TK_EPI_DRELU, "top2 dgrad, drelu only"},
        {65536, 1024, 1024, 0, 0, TK_EPI_NONE, "top2 dgrad, no epilogue"},
        {1024, 1024, 65536, 1, 0, TK_EPI_BGRADB, "top2 wgrad+bgrad"},
        {65536, 512, 13, 0, 1, TK_EPI_RELU_BIAS, "bot1 fwd 13->512"},
        {65536, 512, 16, 0, 1, TK_EPI_RELU_BIAS, "bot1 fwd 16->512 (padded)"},
        {8192, 8192, 8192, 0, 1, TK_EPI_NONE, "square 8192"},
        {8192, 8192, 8192, 0, 1, TK_EPI_RELU_BIAS, "square 8192 relu_bias"},
    };
    size_t maxA = 0, maxB = 0, maxD = 0;
    for (int i = 0; i < NS(sh); i++) {
        size_t a = (size_t)sh[i].M * sh[i].K, b = (size_t)sh[i].K * sh[i].N, d = (size_t)sh[i].M * sh[i].N;
        maxA = a > maxA ? a : maxA, maxB = b > maxB ? b : maxB, maxD = d > maxD ? d : maxD;
    }
    // Random bf16 data (never zeros: they run faster than real data).
    void *A = gt_dev(2 * maxA), *B = gt_dev(2 * maxB), *D = gt_dev(2 * maxD), *bias = gt_dev(2 * 8192);
    void *aux = gt_dev(maxD / 8 + (1 << 20)), *bg = gt_dev(4 * 65536);
    size_t chunk = 1 << 20;
    float *h = gt_host(4 * chunk);
    void *bufs[] = {A, B};
    size_t lens[] = {maxA, maxB};
    for (int b = 0; b < 2; b++)
        for (size_t off = 0; off < lens[b]; off += chunk) {
            size_t n = lens[b] - off < chunk ? lens[b] - off : chunk;
            gt_fill(h, n, -1, 1, 0);
            gt_up_as((char *)bufs[b] + 2 * off, h, n, TK_BF16);
        }
    gt_fill(h, 8192, -1, 1, 0);
    gt_up_as(bias, h, 8192, TK_BF16);
    free(h);
    tk_err e = {0};
    for (int i = 0; i < NS(sh); i++) {
        tk_gemm_args g = {.M = sh[i].M, .N = sh[i].N, .K = sh[i].K, .transa = sh[i].ta, .transb = sh[i].tb,
                          .ab_type = TK_BF16, .cd_type = sh[i].epi == TK_EPI_BGRADB ? TK_F32 : TK_BF16,
                          .A = A, .B = B, .D = D, .alpha = 1, .epi = sh[i].epi, .bias = bias, .aux = aux, .bgrad = bg};
        int fused = tk_gemm_cuda_is_fused(gt_ctx_, &g, &e);
        gbench b = {g};
        double ms = gt_time_ms(gbench_run, &b, 21);
        double tf = 2.0 * sh[i].M * sh[i].N * sh[i].K / (ms * 1e-3) / 1e12;
        printf("# table bench %-24s %6dx%5dx%5d %-11s %-7s %8.3f ms %6.1f TFLOP/s (%4.1f%% of 780)\n",
               sh[i].what, sh[i].M, sh[i].N, sh[i].K, epi_name(sh[i].epi), fused == 1 ? "fused" : "unfused", ms,
               tf, 100 * tf / 780);
    }
    void *dev[] = {A, B, D, bias, aux, bg};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
}
