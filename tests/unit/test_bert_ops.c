// The CPU references of BERT's ops (kernels/{activation,layernorm,attention,bert_embed,bert_rows,
// xent,dropout}.h, the GEMM's GELU epilogues and strided batch): small cases computed by hand, and
// every backward against finite differences of its forward.
#include <math.h>
#include <stdlib.h>

#include "activation.h"
#include "attention.h"
#include "bert_embed.h"
#include "bert_rows.h"
#include "core/philox.h"
#include "dropout.h"
#include "gemm.h"
#include "layernorm.h"
#include "tk_test.h"
#include "tk_test_cpu.h"
#include "xent.h"

static double dot(const float *a, const float *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

// ---- GELU, tanh ----

TK_TEST(gelu_known_values) {
    // 0.5 x (1 + erf(x / sqrt 2)): Phi(1) = 0.841344746..., phi(1) = 0.241970724...
    CHECK_NEAR(tk_gelu_f(0.0f), 0.0, 1e-7);
    CHECK_NEAR(tk_gelu_f(1.0f), 0.8413447461, 1e-6);
    CHECK_NEAR(tk_gelu_f(-1.0f), -0.1586552539, 1e-6);
    CHECK_NEAR(tk_gelu_f(2.0f), 1.9544997361, 1e-6);
    CHECK_NEAR(tk_dgelu_f(0.0f), 0.5, 1e-7);
    CHECK_NEAR(tk_dgelu_f(1.0f), 0.8413447461 + 0.2419707245, 1e-6);
    float x[3] = {-1, 0, 1}, y[3], g[3] = {1, 2, 3}, dx[3];
    tk_err e = {0};
    CHECK(tk_gelu_fwd(tk_test_cpu(), TK_F32, 3, x, y, &e) == 0);
    CHECK_NEAR(y[0], -0.1586552539, 1e-6);
    CHECK(tk_gelu_bwd(tk_test_cpu(), TK_F32, 3, x, g, dx, &e) == 0);
    CHECK_NEAR(dx[1], 1.0, 1e-6);
    CHECK(tk_gelu_fwd(tk_test_cpu(), TK_BF16, 3, x, y, &e) == TK_EINTERNAL); // the reference is fp32
}

TK_TEST(gelu_tanh_backward_matches_differences) {
    const int n = 64;
    float x[64], y[64], g[64], dx[64], xp[64], yp[64];
    tk_test_fill(x, n, 7, 1, -3, 3);
    tk_test_fill(g, n, 7, 2, -1, 1);
    tk_err e = {0};
    for (int which = 0; which < 2; which++) {
        if (which == 0) CHECK(tk_gelu_bwd(tk_test_cpu(), TK_F32, n, x, g, dx, &e) == 0);
        else {
            CHECK(tk_tanh_fwd(tk_test_cpu(), TK_F32, n, x, y, &e) == 0);
            CHECK(tk_tanh_bwd(tk_test_cpu(), TK_F32, n, y, g, dx, &e) == 0);
        }
        for (int i = 0; i < n; i++) {
            double h = 1e-3, f[2];
            for (int s = 0; s < 2; s++) {
                memcpy(xp, x, sizeof x);
                xp[i] += s ? -h : h;
                if (which == 0) tk_gelu_fwd(tk_test_cpu(), TK_F32, n, xp, yp, &e);
                else tk_tanh_fwd(tk_test_cpu(), TK_F32, n, xp, yp, &e);
                f[s] = yp[i];
            }
            CHECK_NEAR(dx[i], g[i] * (f[0] - f[1]) / (2 * h), 2e-3);
        }
    }
}

// ---- GEMM: the GELU epilogues and the strided batch ----

static float naive(const float *A, const float *B, int M, int N, int K, int ta, int tb, int m, int n) {
    double s = 0;
    for (int k = 0; k < K; k++) s += (double)(ta ? A[k * M + m] : A[m * K + k]) * (tb ? B[n * K + k] : B[k * N + n]);
    (void)N;
    return (float)s;
}

TK_TEST(gemm_gelu_epilogues) {
    enum { M = 5, N = 7, K = 3 };
    float A[M * K], B[K * N], bias[N], D[M * N], aux[M * N], G[M * N], bg[N];
    tk_test_fill(A, M * K, 7, 3, -1, 1), tk_test_fill(B, K * N, 7, 4, -1, 1), tk_test_fill(bias, N, 7, 5, -1, 1);
    tk_err e = {0};
    tk_gemm_args g = {.M = M, .N = N, .K = K, .ab_type = TK_F32, .cd_type = TK_F32, .A = A, .B = B, .D = D, .alpha = 1,
                      .epi = TK_EPI_GELU_BIAS, .bias = bias, .aux = aux};
    CHECK(tk_gemm(tk_test_cpu(), &g, &e) == 0);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float v = naive(A, B, M, N, K, 0, 0, m, n) + bias[n];
            CHECK_NEAR(aux[m * N + n], v, 1e-6);
            CHECK_NEAR(D[m * N + n], 0.5 * v * (1 + erf(v / sqrt(2.0))), 1e-6);
        }
    // DGELU_BGRAD: G = (dY B) * gelu'(aux), bgrad = column sums of G
    float dY[M * K];
    tk_test_fill(dY, M * K, 7, 6, -1, 1);
    tk_gemm_args b = {.M = M, .N = N, .K = K, .ab_type = TK_F32, .cd_type = TK_F32, .A = dY, .B = B, .D = G, .alpha = 1,
                      .epi = TK_EPI_DGELU_BGRAD, .aux = aux, .bgrad = bg};
    CHECK(tk_gemm(tk_test_cpu(), &b, &e) == 0);
    for (int n = 0; n < N; n++) {
        double s = 0;
        for (int m = 0; m < M; m++) {
            double x = aux[m * N + n];
            double d = 0.5 * (1 + erf(x / sqrt(2.0))) + x * exp(-x * x / 2) / sqrt(2 * M_PI);
            double want = naive(dY, B, M, N, K, 0, 0, m, n) * d;
            CHECK_NEAR(G[m * N + n], want, 1e-6);
            s += want;
        }
        CHECK_NEAR(bg[n], s, 1e-5);
    }
    b.epi = TK_EPI_DGELU, b.bgrad = NULL;
    CHECK(tk_gemm(tk_test_cpu(), &b, &e) == 0);
    b.aux = NULL;
    CHECK(tk_gemm(tk_test_cpu(), &b, &e) == TK_EINTERNAL); // DGELU needs the forward's aux
}

TK_TEST(gemm_strided_batch) {
    enum { NB = 3, M = 4, N = 5, K = 6 };
    float A[NB * M * K], B[NB * K * N], D[NB * M * N];
    tk_test_fill(A, sizeof A / 4, 7, 7, -1, 1), tk_test_fill(B, sizeof B / 4, 7, 8, -1, 1);
    tk_err e = {0};
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            tk_gemm_args g = {.M = M, .N = N, .K = K, .transa = ta, .transb = tb, .ab_type = TK_F32, .cd_type = TK_F32,
                              .A = A, .B = B, .D = D, .alpha = 0.5f, .batch = NB, .stride_a = M * K, .stride_b = K * N,
                              .stride_c = M * N};
            CHECK(tk_gemm(tk_test_cpu(), &g, &e) == 0);
            for (int i = 0; i < NB; i++)
                for (int m = 0; m < M; m++)
                    for (int n = 0; n < N; n++)
                        CHECK_NEAR(D[i * M * N + m * N + n], 0.5 * naive(A + i * M * K, B + i * K * N, M, N, K, ta, tb, m, n),
                                   1e-6);
            g.epi = TK_EPI_BIAS;
            g.bias = B;
            CHECK(tk_gemm(tk_test_cpu(), &g, &e) == TK_EINTERNAL); // a batch takes no epilogue
        }
}

// ---- dropout ----

TK_TEST(dropout_masks) {
    int64_t step = 5;
    uint32_t th = tk_dropout_thresh(0.1f);
    CHECK_EQ_INT(th, 6554); // round(0.1 * 65536)
    int64_t kept = 0, n = 200000, same = 0;
    for (int64_t i = 0; i < n; i++) {
        int k = tk_dropout_keep(3, 7, step, i, th);
        kept += k;
        same += k == tk_dropout_keep(3, 7, step + 1, i, th); // another update: another mask
        // the word is bits [16 (i%2), +16) of word (i/2)%4 of the draw for i/8
        tk_philox_ctr r = tk_philox_draw(3, TK_RNG_DROPOUT | 7u << 8, (uint64_t)step << 37 | (uint64_t)i >> 3);
        uint32_t w = (r.v[(i >> 1) & 3] >> (16 * (i & 1))) & 0xffff;
        if ((w >= th) != k) CHECK(0);
    }
    // keep rate 1 - 6554/65536 = 0.89999; 3 sigma of a binomial over 200000 is 0.002
    CHECK_NEAR((double)kept / n, 1.0 - 6554.0 / 65536.0, 0.002);
    CHECK(same < n - n / 20 && same > n / 2);
    CHECK(tk_dropout_keep(3, 7, step, 12345, 0)); // p = 0 keeps everything
}

// ---- LayerNorm ----

TK_TEST(layernorm_forward_by_hand) {
    // x = 1 2 3 4: mean 2.5, var 1.25, (x - 2.5) / sqrt(1.25) = -1.3416 -0.4472 0.4472 1.3416
    float x[4] = {0, 1, 2, 3}, res[4] = {1, 1, 1, 1}, g[4] = {1, 2, 1, 1}, b[4] = {0, 0, 1, 0}, y[4], s[4], mu, rs;
    tk_err e = {0};
    CHECK(tk_layernorm_fwd(tk_test_cpu(), TK_F32, 1, 4, x, res, NULL, TK_LN_DROP_NONE, g, b, 0.0f, y, s, &mu, &rs,
                           &e) == 0);
    CHECK_NEAR(mu, 2.5, 1e-7);
    CHECK_NEAR(rs, 1 / sqrt(1.25), 1e-6);
    CHECK_NEAR(y[0], -1.3416407865, 1e-6);
    CHECK_NEAR(y[1], 2 * -0.4472135955, 1e-6);
    CHECK_NEAR(y[2], 0.4472135955 + 1, 1e-6);
    CHECK_NEAR(y[3], 1.3416407865, 1e-6);
    CHECK_NEAR(s[3], 4, 0);
}

// loss = sum(y * w); the backward's ds (the gradient of s) and dx, dgamma, dbeta against central
// differences of the loss in x, res, gamma, beta, with dropout before (PRE) or after (POST).
static void ln_fd_case(int where, int *tk_failed_) {
    enum { R = 3, H = 16 };
    float x[R * H], res[R * H], g[H], b[H], w[R * H], y[R * H], s[R * H], mu[R], rs[R];
    float ds[R * H], dx[R * H], dg[H], db[H];
    tk_test_fill(x, R * H, 7, 10, -2, 2), tk_test_fill(res, R * H, 7, 11, -1, 1), tk_test_fill(g, H, 7, 12, 0.5f, 1.5f),
        tk_test_fill(b, H, 7, 13, -1, 1);
    tk_test_fill(w, R * H, 7, 14, -1, 1);
    int64_t step = 3;
    tk_dropout d = {.p = 0.25f, .seed = 9, .site = 4, .step = &step, .offset = 40};
    tk_err e = {0};
    const void *r = where == TK_LN_DROP_POST ? NULL : res;
    CHECK(tk_layernorm_fwd(tk_test_cpu(), TK_F32, R, H, x, r, &d, where, g, b, 1e-5f, y, s, mu, rs, &e) == 0);
    CHECK(tk_layernorm_bwd(tk_test_cpu(), TK_F32, R, H, w, s, mu, rs, g, &d, where, ds, dx, dg, db, NULL, &e) == 0);
    float *vars[4] = {x, res, g, b}, *grads[4] = {dx, ds, dg, db};
    int sizes[4] = {R * H, R * H, H, H};
    for (int v = where == TK_LN_DROP_POST ? 0 : 0; v < 4; v++) {
        if (v == 1 && where == TK_LN_DROP_POST) continue; // no residual there
        for (int i = 0; i < sizes[v]; i++) {
            float keep = vars[v][i];
            double f[2], h = 1e-2;
            for (int k = 0; k < 2; k++) {
                vars[v][i] = keep + (k ? -h : h);
                tk_layernorm_fwd(tk_test_cpu(), TK_F32, R, H, x, r, &d, where, g, b, 1e-5f, y, NULL, mu, rs, &e);
                f[k] = dot(y, w, R * H);
            }
            vars[v][i] = keep;
            CHECK_NEAR(grads[v][i], (f[0] - f[1]) / (2 * h), 2e-3);
        }
    }
    // the stats are the forward's again (the loop above overwrote them) for the in-place check
    tk_layernorm_fwd(tk_test_cpu(), TK_F32, R, H, x, r, &d, where, g, b, 1e-5f, y, s, mu, rs, &e);
    float wd[R * H];
    memcpy(wd, w, sizeof w);
    CHECK(tk_layernorm_bwd(tk_test_cpu(), TK_F32, R, H, wd, s, mu, rs, g, &d, where, wd, NULL, dg, db, NULL, &e) == 0);
    for (int i = 0; i < R * H; i++) CHECK(wd[i] == ds[i]); // ds may be dy's buffer
}

TK_TEST(layernorm_backward_pre_dropout) { ln_fd_case(TK_LN_DROP_PRE, tk_failed_); }
TK_TEST(layernorm_backward_post_dropout) { ln_fd_case(TK_LN_DROP_POST, tk_failed_); }
TK_TEST(layernorm_backward_no_dropout) { ln_fd_case(TK_LN_DROP_NONE, tk_failed_); }

// ---- attention ----

TK_TEST(attention_forward_by_hand) {
    // one sequence of 3 tokens (2 real), one head of D = 1: q = (1, 2, 0), k = (0, ln 3, 5),
    // v = (2, 4, 9); S_ij = q_i k_j over the keys j < 2: row 0: P = (1/4, 3/4), ctx = 0.5 + 3
    float qkv[3 * 3] = {1, 0, 2, 2, logf(3), 4, 0, 5, 9}, ctx[3] = {77, 77, 77};
    int32_t len[1] = {2}, start[1] = {0};
    float qkvh[9], P[9], S[9], ctxh[3], dqkvh[9];
    tk_attn_bufs ab = {.qkvh = qkvh, .P = P, .S = S, .ctxh = ctxh, .dqkvh = dqkvh};
    tk_err e = {0};
    CHECK(tk_attention_fwd(tk_test_cpu(), TK_F32, 1, 3, 1, 1, start, len, qkv, NULL, &ab, ctx, &e) == 0);
    CHECK_NEAR(P[0], 0.25, 1e-6);
    CHECK_NEAR(P[1], 0.75, 1e-6);
    CHECK(P[2] == 0); // the padding key
    CHECK_NEAR(ctx[0], 3.5, 1e-6);
    // row 1: q = 2: scores (0, 2 ln 3): P = (1/10, 9/10): ctx = 0.2 + 3.6
    CHECK_NEAR(ctx[1], 3.8, 1e-5);
    // row 2 (a padding query) is outside the sequence: not written
    CHECK(ctx[2] == 77);
}

// loss = sum(ctx * w): dqkv against central differences, with padding and dropout.
TK_TEST(attention_backward_matches_differences) {
    enum { B = 2, L = 5, NH = 2, D = 3, H = NH * D };
    float qkv[B * L * 3 * H], ctx[B * L * H], w[B * L * H], dqkv[B * L * 3 * H];
    static float qkvh[3 * B * L * H], P[B * NH * L * L], S[B * NH * L * L], ctxh[B * L * H], dqkvh[3 * B * L * H];
    static float Pd[B * NH * L * L], dqkv2[B * L * 3 * H];
    tk_attn_bufs ab = {.qkvh = qkvh, .P = P, .S = S, .ctxh = ctxh, .dqkvh = dqkvh};
    int32_t len[B] = {5, 3}, start[B] = {0, L};
    int64_t step = 2;
    tk_dropout d = {.p = 0.2f, .seed = 5, .site = 1, .step = &step, .offset = 0};
    tk_test_fill(qkv, sizeof qkv / 4, 7, 20, -1, 1), tk_test_fill(w, sizeof w / 4, 7, 21, -1, 1);
    tk_err e = {0};
    CHECK(tk_attention_fwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &ab, ctx, &e) == 0);
    memset(dqkv, 0, sizeof dqkv); // (rows outside the sequences are not written)
    CHECK(tk_attention_bwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &ab, w, dqkv, &e) == 0);
    // the dropped-out probabilities kept by the forward (bufs.Pd) instead of drawn again: the same
    tk_attn_bufs kept = ab;
    kept.Pd = Pd;
    CHECK(tk_attention_fwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &kept, ctx, &e) == 0);
    memset(dqkv2, 0, sizeof dqkv2);
    CHECK(tk_attention_bwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &kept, w, dqkv2, &e) == 0);
    CHECK(memcmp(dqkv, dqkv2, sizeof dqkv) == 0);
    for (size_t i = 0; i < sizeof qkv / 4; i++) {
        float keep = qkv[i];
        double f[2], h = 1e-2;
        for (int k = 0; k < 2; k++) {
            qkv[i] = keep + (k ? -h : h);
            tk_attention_fwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &ab, ctx, &e);
            f[k] = dot(ctx, w, sizeof ctx / 4);
        }
        qkv[i] = keep;
        CHECK_NEAR(dqkv[i], (f[0] - f[1]) / (2 * h), 2e-3);
    }
}

// The same sequences packed (rows start[s] = len[0] + .. + len[s-1], one row past them, and an
// unused slot of length 0): the same ctx and dqkv on the sequences' rows as the padded layout
// (the same per-head products, the same dropout elements), nothing written elsewhere.
TK_TEST(attention_packed_equals_padded) {
    enum { B = 3, L = 5, NH = 2, D = 3, H = NH * D, T = 5 + 3 + 1 };
    static float qkv[B * L * 3 * H], w[B * L * H], ctx[B * L * H], dqkv[B * L * 3 * H];
    static float pq[T * 3 * H], pw[T * H], pctx[T * H], pdqkv[T * 3 * H];
    static float qkvh[3 * B * L * H], P[B * NH * L * L], S[B * NH * L * L], ctxh[B * L * H], dqkvh[3 * B * L * H];
    tk_attn_bufs ab = {.qkvh = qkvh, .P = P, .S = S, .ctxh = ctxh, .dqkvh = dqkvh};
    int32_t len[B] = {5, 3, 0}, start[B] = {0, L, 2 * L}, pstart[B] = {0, 5, 8};
    int64_t step = 3;
    tk_dropout d = {.p = 0.25f, .seed = 9, .site = 4, .step = &step, .offset = 7};
    tk_test_fill(qkv, sizeof qkv / 4, 7, 30, -1, 1), tk_test_fill(w, sizeof w / 4, 7, 31, -1, 1);
    for (int s = 0; s < B; s++) {
        memcpy(pq + (size_t)pstart[s] * 3 * H, qkv + (size_t)start[s] * 3 * H, sizeof(float) * 3 * H * len[s]);
        memcpy(pw + (size_t)pstart[s] * H, w + (size_t)start[s] * H, sizeof(float) * H * len[s]);
    }
    for (int i = 0; i < T * H; i++) pctx[i] = 55;
    for (int i = 0; i < T * 3 * H; i++) pdqkv[i] = 55;
    tk_err e = {0};
    CHECK(tk_attention_fwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &ab, ctx, &e) == 0);
    CHECK(tk_attention_bwd(tk_test_cpu(), TK_F32, B, L, NH, D, start, len, qkv, &d, &ab, w, dqkv, &e) == 0);
    CHECK(tk_attention_fwd(tk_test_cpu(), TK_F32, B, L, NH, D, pstart, len, pq, &d, &ab, pctx, &e) == 0);
    CHECK(tk_attention_bwd(tk_test_cpu(), TK_F32, B, L, NH, D, pstart, len, pq, &d, &ab, pw, pdqkv, &e) == 0);
    for (int s = 0; s < B; s++) {
        CHECK(memcmp(pctx + (size_t)pstart[s] * H, ctx + (size_t)start[s] * H, sizeof(float) * H * len[s]) == 0);
        CHECK(memcmp(pdqkv + (size_t)pstart[s] * 3 * H, dqkv + (size_t)start[s] * 3 * H,
                     sizeof(float) * 3 * H * len[s]) == 0);
    }
    for (int i = 8 * H; i < T * H; i++) CHECK(pctx[i] == 55); // the row past the sequences
    for (int i = 8 * 3 * H; i < T * 3 * H; i++) CHECK(pdqkv[i] == 55);
}

// ---- embeddings, rows ----

TK_TEST(bert_embed_by_hand) {
    enum { B = 2, L = 2, H = 2, V = 3 };
    float word[V * H] = {1, 2, 3, 4, 5, 6}, pos[3 * H] = {10, 20, 30, 40, 50, 60}, type[2 * H] = {100, 200, 300, 400};
    int32_t ids[B * L] = {2, 0, 2, 2};
    uint8_t seg[B * L] = {0, 1, 1, 1};
    float out[B * L * H];
    tk_err e = {0};
    CHECK(tk_bert_embed_fwd(tk_test_cpu(), TK_F32, TK_F32, B, L, H, ids, seg, word, pos, type, out, &e) == 0);
    float want[B * L * H] = {5 + 10 + 100, 6 + 20 + 200, 1 + 30 + 300, 2 + 40 + 400,
                             5 + 10 + 300, 6 + 20 + 400, 5 + 30 + 300, 6 + 40 + 400};
    for (int i = 0; i < B * L * H; i++) CHECK_NEAR(out[i], want[i], 0);
    float de[B * L * H] = {1, 2, 3, 4, 5, 6, 7, 8}, dword[V * H] = {100, 100, 0, 0, 0, 0}, dpos[3 * H], dtype[2 * H];
    memset(dpos, 0x7f, sizeof dpos);
    CHECK(tk_bert_embed_bwd(tk_test_cpu(), TK_F32, B, L, H, 2, 3, ids, seg, NULL, de, dword, dpos, dtype, NULL, &e) ==
          0);
    float wword[V * H] = {100 + 3, 100 + 4, 0, 0, 1 + 5 + 7, 2 + 6 + 8}; // added to what was there
    float wpos[3 * H] = {1 + 5, 2 + 6, 3 + 7, 4 + 8, 0, 0};               // rows >= L: 0
    float wtype[2 * H] = {1, 2, 3 + 5 + 7, 4 + 6 + 8};
    for (int i = 0; i < V * H; i++) CHECK_NEAR(dword[i], wword[i], 0);
    for (int i = 0; i < 3 * H; i++) CHECK_NEAR(dpos[i], wpos[i], 0);
    for (int i = 0; i < 2 * H; i++) CHECK_NEAR(dtype[i], wtype[i], 0);
    // with the lengths (2, 1): token 3 (sequence 1, position 1) is padding, out of dword (id 2's
    // run is then tokens 0 and 2), still in dpos and dtype
    int32_t len[B] = {2, 1};
    float dword2[V * H] = {0};
    CHECK(tk_bert_embed_bwd(tk_test_cpu(), TK_F32, B, L, H, 2, 3, ids, seg, len, de, dword2, dpos, dtype, NULL, &e) ==
          0);
    float wword2[V * H] = {3, 4, 0, 0, 1 + 5, 2 + 6};
    for (int i = 0; i < V * H; i++) CHECK_NEAR(dword2[i], wword2[i], 0);
    for (int i = 0; i < 3 * H; i++) CHECK_NEAR(dpos[i], wpos[i], 0);
}

TK_TEST(bert_gather_scatter_by_hand) {
    enum { B = 2, L = 4, H = 2, P = 2 };
    float hid[B * L * H], rows[B * P * H], cls[B * H];
    for (int i = 0; i < B * L * H; i++) hid[i] = (float)i;
    int32_t pos[B * P] = {2, 3, 1, 3}, nm[B] = {2, 1}, ids[B * P] = {7, 8, 9, 10}, lab[B * P];
    tk_err e = {0};
    CHECK(tk_bert_gather(tk_test_cpu(), TK_F32, B, L, H, P, hid, NULL, pos, nm, ids, rows, lab, &e) == 0);
    float want[B * P * H] = {4, 5, 6, 7, 10, 11, 8, 9}; // b1's second slot is padding: position 0
    for (int i = 0; i < B * P * H; i++) CHECK_NEAR(rows[i], want[i], 0);
    CHECK_EQ_INT(lab[0], 7);
    CHECK_EQ_INT(lab[1], 8);
    CHECK_EQ_INT(lab[2], 9);
    CHECK_EQ_INT(lab[3], -1);
    CHECK(tk_bert_gather(tk_test_cpu(), TK_F32, B, L, H, 1, hid, NULL, NULL, NULL, NULL, cls, NULL, &e) == 0);
    CHECK_NEAR(cls[2], 8, 0);
    float g[B * P * H] = {1, 1, 2, 2, 3, 3, 50, 50}, gc[B * H] = {10, 20, 30, 40}, dh[B * L * H];
    pos[1] = 2; // a repeated position adds up
    CHECK(tk_bert_scatter(tk_test_cpu(), TK_F32, B, L, H, P, 0, g, NULL, pos, nm, gc, dh, &e) == 0);
    float wd[B * L * H] = {10, 20, 0, 0, 3, 3, 0, 0, 30, 40, 3, 3, 0, 0, 0, 0};
    for (int i = 0; i < B * L * H; i++) CHECK_NEAR(dh[i], wd[i], 0);
    // packed: sequence 1 starts at row 5 (rows 0 .. 6 of hid); scatter zeroes its 7 rows
    int32_t start[B] = {0, 5};
    pos[1] = 3;
    CHECK(tk_bert_gather(tk_test_cpu(), TK_F32, B, L, H, P, hid, start, pos, nm, ids, rows, lab, &e) == 0);
    float wp[B * P * H] = {4, 5, 6, 7, 12, 13, 10, 11}; // b1: rows 6, then the padding slot's row 5
    for (int i = 0; i < B * P * H; i++) CHECK_NEAR(rows[i], wp[i], 0);
    pos[1] = 2;
    for (int i = 0; i < B * L * H; i++) dh[i] = 99;
    CHECK(tk_bert_scatter(tk_test_cpu(), TK_F32, B, L, H, P, 7, g, start, pos, nm, gc, dh, &e) == 0);
    float wdp[7 * H] = {10, 20, 0, 0, 3, 3, 0, 0, 0, 0, 30, 40, 3, 3};
    for (int i = 0; i < 7 * H; i++) CHECK_NEAR(dh[i], wdp[i], 0);
    CHECK(dh[7 * H] == 99); // past the rows: untouched
}

TK_TEST(bert_pack_unpack_by_hand) {
    enum { B = 3, L = 3, H = 2, ROWS = 6 };
    float src[B * L * H], pk[ROWS * H], back[B * L * H];
    for (int i = 0; i < B * L * H; i++) src[i] = (float)(i + 1);
    int32_t len[B] = {2, 0, 3}, start[B + 1];
    tk_err e = {0};
    CHECK(tk_bert_starts(tk_test_cpu(), B, L, 0, len, start, &e) == 0);
    CHECK(start[0] == 0 && start[1] == 3 && start[2] == 6 && start[3] == 9);
    CHECK(tk_bert_starts(tk_test_cpu(), B, L, 1, len, start, &e) == 0);
    CHECK(start[0] == 0 && start[1] == 2 && start[2] == 2 && start[3] == 5);
    for (int i = 0; i < ROWS * H; i++) pk[i] = -1;
    CHECK(tk_bert_pack(tk_test_cpu(), TK_F32, B, L, H, ROWS, start, len, src, pk, &e) == 0);
    // rows: sequence 0's tokens 0, 1; sequence 2's tokens 0 .. 2; row 5 (past them) zeroed
    float want[ROWS * H] = {1, 2, 3, 4, 13, 14, 15, 16, 17, 18, 0, 0};
    for (int i = 0; i < ROWS * H; i++) CHECK_NEAR(pk[i], want[i], 0);
    for (int i = 0; i < B * L * H; i++) back[i] = -1;
    CHECK(tk_bert_unpack(tk_test_cpu(), TK_F32, B, L, H, start, len, pk, back, &e) == 0);
    float wb[B * L * H] = {1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 13, 14, 15, 16, 17, 18};
    for (int i = 0; i < B * L * H; i++) CHECK_NEAR(back[i], wb[i], 0);
}

// ---- cross-entropy ----

TK_TEST(xent_by_hand) {
    // row 0: logits (0, ln 3) over C = 2 of ld 3 (a padding column), label 1: p = (1/4, 3/4),
    // loss -ln(3/4); row 1 ignored; row 2: logits (0, 0), label 0: loss ln 2. n = 2, scale 0.5.
    float x[9] = {0, logf(3), 99, 5, 5, 5, 0, 0, -99}, dx[9];
    int32_t lab[3] = {1, -1, 0};
    double acc[2] = {1, 0}, ws[3];
    tk_err e = {0};
    CHECK(tk_xent_fwd_bwd(tk_test_cpu(), TK_F32, 3, 2, 3, x, lab, 0.5f, acc, 1, dx, ws, &e) == 0);
    double w = 0.5 / 2;
    CHECK_NEAR(acc[0], 1 + w * (-log(0.75) + log(2)), 1e-7);
    CHECK_NEAR(acc[1], 1, 0);
    CHECK_NEAR(dx[0], w * 0.25, 1e-7);
    CHECK_NEAR(dx[1], w * (0.75 - 1), 1e-7);
    CHECK(dx[2] == 0 && dx[3] == 0 && dx[4] == 0 && dx[5] == 0 && dx[8] == 0);
    CHECK_NEAR(dx[6], w * (0.5 - 1), 1e-7);
    int64_t cnt[2] = {0, 0};
    float tie[6] = {1, 1, 0, 2, 2, 3}; // row 0 ties: the first maximum, 0; row 1: 2 wins
    int32_t tl[2] = {0, 1};
    CHECK(tk_xent_correct(tk_test_cpu(), TK_F32, 2, 3, 3, tie, tl, cnt, &e) == 0);
    CHECK_EQ_INT(cnt[0], 1);
    CHECK_EQ_INT(cnt[1], 2);
    // the padding column is never predicted, however large
    float pad[3] = {0, 1, 50};
    int32_t pl[1] = {1};
    CHECK(tk_xent_correct(tk_test_cpu(), TK_F32, 1, 2, 3, pad, pl, cnt, &e) == 0);
    CHECK_EQ_INT(cnt[0], 2);
}

TK_TEST(xent_gradient_matches_differences) {
    enum { R = 4, C = 6, LD = 8 };
    float x[R * LD], dx[R * LD];
    int32_t lab[R] = {3, -1, 0, 5};
    double ws[R];
    tk_test_fill(x, R * LD, 7, 30, -2, 2);
    tk_err e = {0};
    double acc[2] = {0, 0};
    CHECK(tk_xent_fwd_bwd(tk_test_cpu(), TK_F32, R, C, LD, x, lab, 1.0f, acc, 0, dx, ws, &e) == 0);
    for (int i = 0; i < R * LD; i++) {
        float keep = x[i];
        double f[2], h = 1e-3;
        for (int k = 0; k < 2; k++) {
            double a[2] = {0, 0};
            x[i] = keep + (k ? -h : h);
            tk_xent_fwd_bwd(tk_test_cpu(), TK_F32, R, C, LD, x, lab, 1.0f, a, 0, NULL, ws, &e);
            f[k] = a[0];
        }
        x[i] = keep;
        CHECK_NEAR(dx[i], (f[0] - f[1]) / (2 * h), 1e-4);
    }
}
