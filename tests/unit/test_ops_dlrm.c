// The DLRM reference ops (kernels/*_ref.c): small exact cases, finite-difference gradients, and
// AUC against a brute-force pairwise count.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "auc.h"
#include "bce.h"
#include "cast2d.h"
#include "core/philox.h"
#include "dense_log1p.h"
#include "embedding.h"
#include "hybrid_plan.h"
#include "hybrid_plan_case.h"
#include "interaction.h"
#include "lr_schedule.h"
#include "rows.h"
#include "sgd.h"
#include "tk_test.h"

static float urand(uint64_t i) { return tk_philox_uniform(7, 99, i) * 2 - 1; }

TK_TEST(embedding_fwd_exact) {
    // Two tables: 3 rows and 2 rows, D = 2. Row r of the buffer holds (10r, 10r+1).
    float w[5 * 2];
    for (int r = 0; r < 5; r++) w[2 * r] = 10.0f * r, w[2 * r + 1] = 10.0f * r + 1;
    int64_t off[3] = {0, 3, 5};
    int32_t idx[2 * 2] = {2, 1, 0, 0}; // sample 0: t0 row 2, t1 row 1; sample 1: rows 0, 0
    float out[2 * 2 * 2];
    tk_err e;
    CHECK_EQ_INT(tk_embedding_fwd_ref(w, TK_F32, off, idx, 2, 2, 2, out, &e), 0);
    float want[8] = {20, 21, 40, 41, 0, 1, 30, 31};
    for (int i = 0; i < 8; i++) CHECK(out[i] == want[i]);
    uint16_t wb[10];
    for (int i = 0; i < 10; i++) wb[i] = tk_f32_to_bf16(w[i]);
    CHECK_EQ_INT(tk_embedding_fwd_ref(wb, TK_BF16, off, idx, 2, 2, 2, out, &e), 0);
    for (int i = 0; i < 8; i++) CHECK(out[i] == want[i]); // small integers are exact in bf16
    idx[1] = 2; // table 1 has 2 rows
    CHECK_EQ_INT(tk_embedding_fwd_ref(w, TK_F32, off, idx, 2, 2, 2, out, &e), TK_EDATA);
    CHECK_STR(e.what, "embedding_fwd: sample 0: index 2 out of range for table 1");
}

TK_TEST(embedding_bwd_sgd_duplicates_accumulate) {
    float w[5 * 2] = {0};
    int64_t off[3] = {0, 3, 5};
    // Three samples; table 0 row 1 appears twice, table 1 row 0 three times.
    int32_t idx[3 * 2] = {1, 0, 1, 0, 2, 0};
    float dout[3 * 2 * 2];
    for (int i = 0; i < 12; i++) dout[i] = (float)(i + 1);
    float lr = 0.5f;
    uint64_t ws[3 * 2];
    tk_err e;
    CHECK_EQ_INT(tk_embedding_bwd_sgd_ref(w, TK_F32, off, idx, 3, 2, 2, dout, &lr, ws, &e), 0);
    // table 0 row 1 (buffer row 1): -(0.5) * (dout[s0,t0] + dout[s1,t0]) = -0.5*((1,2)+(5,6))
    CHECK(w[2] == -3.0f && w[3] == -4.0f);
    // table 0 row 2: -0.5 * (9, 10)
    CHECK(w[4] == -4.5f && w[5] == -5.0f);
    // table 1 row 0 (buffer row 3): -0.5 * ((3,4)+(7,8)+(11,12))
    CHECK(w[6] == -10.5f && w[7] == -12.0f);
    CHECK(w[0] == 0 && w[1] == 0 && w[8] == 0 && w[9] == 0); // untouched rows
    // bf16 tables: the same update, rounded once.
    uint16_t wb[10] = {0};
    CHECK_EQ_INT(tk_embedding_bwd_sgd_ref(wb, TK_BF16, off, idx, 3, 2, 2, dout, &lr, ws, &e), 0);
    CHECK(tk_bf16_to_f32(wb[6]) == -10.5f && tk_bf16_to_f32(wb[7]) == -12.0f);
}

// A negative index is padding: a zero row forward (no error), skipped backward; an index past
// its table is still an error.
TK_TEST(embedding_negative_index_is_padding) {
    float w[3 * 2] = {1, 2, 3, 4, 5, 6}, out[2 * 1 * 2];
    int64_t off[2] = {0, 3};
    int32_t idx[2] = {-1, 2};
    tk_err e;
    CHECK_EQ_INT(tk_embedding_fwd_ref(w, TK_F32, off, idx, 2, 1, 2, out, &e), 0);
    CHECK(out[0] == 0 && out[1] == 0 && out[2] == 5 && out[3] == 6);
    float dout[4] = {10, 10, 1, 1}, lr = 1;
    uint64_t ws[2];
    CHECK_EQ_INT(tk_embedding_bwd_sgd_ref(w, TK_F32, off, idx, 2, 1, 2, dout, &lr, ws, &e), 0);
    CHECK(w[0] == 1 && w[1] == 2 && w[2] == 3 && w[3] == 4 && w[4] == 4 && w[5] == 5);
    idx[0] = 3;
    CHECK_EQ_INT(tk_embedding_fwd_ref(w, TK_F32, off, idx, 2, 1, 2, out, &e), TK_EDATA);
    CHECK_EQ_INT(tk_embedding_bwd_sgd_ref(w, TK_F32, off, idx, 2, 1, 2, dout, &lr, ws, &e), TK_EDATA);
}

// The dense update: hand values, a bf16 result exactly halfway between two bf16 values (ties to
// even), and a bad table type refused.
TK_TEST(embedding_dense_sgd_values) {
    float w[4] = {1, -2, 0.5f, 3}, g[4] = {2, -4, 1, 0}, lr = 0.25f;
    tk_err e;
    CHECK_EQ_INT(tk_embedding_dense_sgd_ref(w, TK_F32, 4, g, &lr, &e), 0);
    CHECK(w[0] == 0.5f && w[1] == -1.0f && w[2] == 0.25f && w[3] == 3.0f);
    // bf16: 1 - 2^-9 lies halfway between 1 - 2^-8 and 1 in bf16: ties to even gives 1.
    uint16_t wb[2] = {tk_f32_to_bf16(1.0f), tk_f32_to_bf16(2.0f)};
    float gb[2] = {0x1p-9f, -3.0f}, one = 1.0f;
    CHECK_EQ_INT(tk_embedding_dense_sgd_ref(wb, TK_BF16, 2, gb, &one, &e), 0);
    CHECK(tk_bf16_to_f32(wb[0]) == 1.0f && tk_bf16_to_f32(wb[1]) == 5.0f);
    CHECK_EQ_INT(tk_embedding_dense_sgd_ref(w, TK_I32, 4, g, &lr, &e), TK_EINTERNAL);
}

// The bf16 compute path's variants: the lookup written in bf16 (a bf16 table copies exactly, an
// f32 one rounds to nearest even) and the update reading a bf16 gradient (widened exactly, so it
// equals the f32 update on the same values, bit for bit).
TK_TEST(embedding_bf16_output_and_gradient) {
    tk_err e = {0};
    int64_t off[3] = {0, 3, 5};
    int32_t idx[3 * 2] = {1, 0, 1, 0, 2, 1}; // table 0 row 1 twice
    enum { D = 3, N = 3 * 2 * D };
    // f32 table: 1 + 2^-8 is a tie (to even: 1), 1 + 3*2^-8 is one too (to even: 1 + 2^-6), -3.5 is exact.
    float w[5 * D];
    for (int i = 0; i < 5 * D; i++) w[i] = (i % 3 == 0) ? 1.00390625f : (i % 3 == 1) ? 1.01171875f : -3.5f - i;
    uint16_t out[N], wb[5 * D];
    CHECK_EQ_INT(tk_embedding_fwd_act_ref(w, TK_F32, off, idx, 3, 2, D, out, TK_BF16, &e), 0);
    // sample 2, table 1 -> buffer row 3 + 1 = 4: (1, 1.015625, -3.5 - 14)
    CHECK(tk_bf16_to_f32(out[(2 * 2 + 1) * D + 0]) == 1.0f);
    CHECK(tk_bf16_to_f32(out[(2 * 2 + 1) * D + 1]) == 1.015625f);
    CHECK(tk_bf16_to_f32(out[(2 * 2 + 1) * D + 2]) == -17.5f);
    for (int i = 0; i < 5 * D; i++) wb[i] = (uint16_t)(0x3f00 + 7 * i); // arbitrary bf16 patterns
    CHECK_EQ_INT(tk_embedding_fwd_act_ref(wb, TK_BF16, off, idx, 3, 2, D, out, TK_BF16, &e), 0);
    for (int b = 0; b < 3; b++)
        for (int t = 0; t < 2; t++)
            for (int d = 0; d < D; d++)
                CHECK(out[(b * 2 + t) * D + d] == wb[(off[t] + idx[b * 2 + t]) * D + d]);
    CHECK_EQ_INT(tk_embedding_fwd_act_ref(wb, TK_BF16, off, idx, 3, 2, D, out, TK_I32, &e), TK_EINTERNAL);
    // Backward: a bf16 gradient of random values against the f32 update of the same (widened) values.
    float g32[N], lr = 0.3f, wa[5 * D], wf[5 * D];
    uint16_t g16[N];
    for (int i = 0; i < N; i++) g16[i] = tk_f32_to_bf16(urand(700 + i)), g32[i] = tk_bf16_to_f32(g16[i]);
    for (int i = 0; i < 5 * D; i++) wa[i] = wf[i] = urand(800 + i);
    uint64_t ws[3 * 2];
    CHECK_EQ_INT(tk_embedding_bwd_sgd_act_ref(wa, TK_F32, off, idx, 3, 2, D, g16, TK_BF16, &lr, ws, &e), 0);
    CHECK_EQ_INT(tk_embedding_bwd_sgd_ref(wf, TK_F32, off, idx, 3, 2, D, g32, &lr, ws, &e), 0);
    CHECK(memcmp(wa, wf, sizeof wa) == 0);
    // and by hand: table 0 row 1 (buffer row 1) gets -lr * (g[s0,t0] + g[s1,t0]) in fp64
    for (int d = 0; d < D; d++)
        CHECK(wa[D + d] == (float)((double)urand(800 + D + d) - (double)lr * ((double)g32[d] + g32[2 * D + d])));
    CHECK(wa[0] == urand(800)); // row 0 of table 0 is never looked up
}

TK_TEST(dense_log1p_values) {
    int32_t x[4] = {0, 1, -5, 100};
    float y[4];
    tk_err e;
    CHECK_EQ_INT(tk_dense_log1p_ref(x, 4, y, &e), 0);
    CHECK(y[0] == 0.0f);
    CHECK(y[1] == (float)log(2.0));
    CHECK(y[2] == 0.0f);
    CHECK(y[3] == (float)log(101.0));
}

TK_TEST(interaction_fwd_order_and_padding) {
    // T = 2, D = 2: v0 = bot = (1, 2), v1 = (3, 4), v2 = (5, 6).
    float bot[2] = {1, 2}, emb[4] = {3, 4, 5, 6}, out[8];
    tk_err e;
    CHECK_EQ_INT(tk_interaction_width(2, 2), 5);
    CHECK_EQ_INT(tk_interaction_width(26, 128), 479); // MLPerf: 128 + 351
    for (int i = 0; i < 8; i++) out[i] = -1;
    CHECK_EQ_INT(tk_interaction_fwd_ref(bot, emb, 1, 2, 2, 6, out, &e), 0);
    // [v0 | v1.v0, v2.v0, v2.v1 | pad 0]
    float want[6] = {1, 2, 11, 17, 39, 0};
    for (int i = 0; i < 6; i++) CHECK(out[i] == want[i]);
    CHECK_EQ_INT(tk_interaction_fwd_ref(bot, emb, 1, 2, 2, 4, out, &e), TK_EINTERNAL);
}

// L = sum_k R[k] * out[k]: its gradient w.r.t. out is R. The interaction is bilinear in each
// input, so a central difference is exact up to rounding.
static double inter_loss(const float *bot, const float *emb, const float *R, int B, int T, int D,
                         int W) {
    float out[3 * 64];
    tk_err e;
    tk_interaction_fwd_ref(bot, emb, B, T, D, W, out, &e);
    double s = 0;
    for (int i = 0; i < B * W; i++) s += (double)R[i] * out[i];
    return s;
}

TK_TEST(interaction_bwd_finite_differences) {
    enum { B = 3, T = 3, D = 4 };
    const int W = tk_interaction_width(T, D) + 1;
    float bot[B * D], emb[B * T * D], R[B * 64], dbot[B * D], demb[B * T * D];
    for (int i = 0; i < B * D; i++) bot[i] = urand(i);
    for (int i = 0; i < B * T * D; i++) emb[i] = urand(100 + i);
    for (int i = 0; i < B * W; i++) R[i] = urand(1000 + i);
    tk_err e;
    CHECK_EQ_INT(tk_interaction_bwd_ref(bot, emb, R, B, T, D, W, 0, dbot, demb, &e), 0);
    const float h = 1e-2f;
    for (int i = 0; i < B * D; i++) {
        float s = bot[i];
        bot[i] = s + h;
        double lp = inter_loss(bot, emb, R, B, T, D, W);
        bot[i] = s - h;
        double lm = inter_loss(bot, emb, R, B, T, D, W);
        bot[i] = s;
        CHECK_NEAR(dbot[i], (lp - lm) / (2 * h), 1e-3);
    }
    for (int i = 0; i < B * T * D; i++) {
        float s = emb[i];
        emb[i] = s + h;
        double lp = inter_loss(bot, emb, R, B, T, D, W);
        emb[i] = s - h;
        double lm = inter_loss(bot, emb, R, B, T, D, W);
        emb[i] = s;
        CHECK_NEAR(demb[i], (lp - lm) / (2 * h), 1e-3);
    }
    // bot_relu zeroes dbot where the (ReLU) bottom output is not positive.
    float dbot2[B * D];
    CHECK_EQ_INT(tk_interaction_bwd_ref(bot, emb, R, B, T, D, W, 1, dbot2, demb, &e), 0);
    for (int i = 0; i < B * D; i++) CHECK(dbot2[i] == (bot[i] > 0 ? dbot[i] : 0.0f));
}

// Offset of (sample b, table t) in the grouped layout of kernels/interaction.h, written out here
// independently of the references.
static size_t grouped_at(int b, int t, int B, int G, int D) {
    return (size_t)(t / G) * B * G * D + (size_t)b * G * D + (size_t)(t % G) * D;
}

// One (B, T, G, D) case in act (f32 or bf16): the vectors permuted into the grouped layout give
// the plain layout's outputs bit for bit, demb lands in the grouped slots, and the unused slots
// of the last group are neither read (NaN there) nor written (a sentinel stays).
static void grouped_case(int *tk_failed_, tk_dtype act, int B, int T, int G, int D, uint64_t seed) {
    int failed_before = *tk_failed_; // to name this case only when it fails
    *tk_failed_ = 0;
    const int W = tk_interaction_width(T, D) + 1;
    const size_t es = tk_dtype_size(act), ne = (size_t)B * T * D, ng = tk_interaction_emb_elems(B, T, G, D);
    CHECK(ng == (size_t)((T + G - 1) / G) * B * G * D);
    char *bot = malloc((size_t)B * D * es), *dout = malloc((size_t)B * W * es);
    char *emb = malloc(ne * es), *embg = malloc(ng * es), *demb = malloc(ne * es), *dembg = malloc(ng * es);
    char *out = malloc((size_t)B * W * es), *outg = malloc((size_t)B * W * es);
    char *dbot = malloc((size_t)B * D * es), *dbotg = malloc((size_t)B * D * es);
    // Random values (rounded to bf16 on the bf16 path): the sums round, so equal bits need the
    // same products summed in the same order.
#define PUT(buf, i, v)                                                                             \
    do {                                                                                           \
        float v_ = (v);                                                                            \
        if (act == TK_BF16) ((uint16_t *)(buf))[i] = tk_f32_to_bf16(v_);                          \
        else ((float *)(buf))[i] = v_;                                                             \
    } while (0)
    for (int i = 0; i < B * D; i++) PUT(bot, i, urand(seed + i));
    for (int i = 0; i < B * W; i++) PUT(dout, i, urand(seed + 10000 + i));
    for (size_t i = 0; i < ng; i++) PUT(embg, i, NAN); // the unused slots stay NaN
    memset(dembg, 0x5a, ng * es);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int d = 0; d < D; d++) {
                size_t i = ((size_t)b * T + t) * D + d;
                PUT(emb, i, urand(seed + 20000 + i));
                memcpy(embg + (grouped_at(b, t, B, G, D) + d) * es, emb + i * es, es);
            }
#undef PUT
    tk_err e;
    CHECK_EQ_INT(tk_interaction_fwd_act_ref(act, bot, emb, B, T, T, D, W, out, &e), 0);
    CHECK_EQ_INT(tk_interaction_fwd_act_ref(act, bot, embg, B, T, G, D, W, outg, &e), 0);
    CHECK(memcmp(out, outg, (size_t)B * W * es) == 0);
    CHECK_EQ_INT(tk_interaction_bwd_act_ref(act, bot, emb, dout, B, T, T, D, W, 1, dbot, demb, &e), 0);
    CHECK_EQ_INT(tk_interaction_bwd_act_ref(act, bot, embg, dout, B, T, G, D, W, 1, dbotg, dembg, &e), 0);
    CHECK(memcmp(dbot, dbotg, (size_t)B * D * es) == 0);
    int bad = 0, touched = 0;
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            bad += memcmp(demb + ((size_t)b * T + t) * D * es, dembg + grouped_at(b, t, B, G, D) * es,
                          (size_t)D * es) != 0;
    for (int b = 0; b < B; b++) // the last group's unused slots
        for (int t = T; t < (T + G - 1) / G * G; t++)
            for (size_t k = 0; k < (size_t)D * es; k++)
                touched += (unsigned char)dembg[grouped_at(b, t, B, G, D) * es + k] != 0x5a;
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(touched, 0);
    // A finite output everywhere: no NaN of the unused slots leaked in.
    int nan = 0;
    for (int i = 0; i < B * W; i++)
        nan += isnan(act == TK_BF16 ? tk_bf16_to_f32(((uint16_t *)outg)[i]) : ((float *)outg)[i]);
    CHECK_EQ_INT(nan, 0);
    if (*tk_failed_) printf("#   case %s B %d T %d G %d D %d\n", tk_dtype_name(act), B, T, G, D);
    *tk_failed_ |= failed_before;
    free(bot), free(dout), free(emb), free(embg), free(demb), free(dembg);
    free(out), free(outg), free(dbot), free(dbotg);
}

TK_TEST(interaction_grouped_layout_equals_plain) {
    // (B, T, G, D): the MLPerf T = 26 split as 2, 3 (26 = 9+9+8: T % G != 0), 4 and 8 ranks
    // would split it (tm = 13, 9, 7, 4), one table a group, and G = T (the plain layout itself).
    static const int cases[][4] = {{3, 26, 13, 8}, {3, 26, 9, 8}, {2, 26, 7, 4}, {2, 26, 4, 4},
                                   {2, 5, 1, 4},   {3, 5, 2, 3},  {2, 4, 4, 4}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        for (int a = 0; a < 2; a++)
            grouped_case(tk_failed_, a ? TK_BF16 : TK_F32, cases[k][0], cases[k][1], cases[k][2], cases[k][3],
                         1000000 * (k + 1));
    // G outside [1, T] is refused.
    float x[64] = {0}, y[64];
    tk_err e;
    CHECK_EQ_INT(tk_interaction_fwd_act_ref(TK_F32, x, x, 1, 2, 0, 2, 6, y, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "interaction_fwd: group of 0 tables, not in [1, 2]");
    CHECK_EQ_INT(tk_interaction_bwd_act_ref(TK_F32, x, x, x, 1, 2, 3, 2, 6, 0, y, y + 8, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_interaction_bwd_act_ref(TK_BF16, x, x, x, 1, 2, 3, 2, 6, 0, y, y + 8, &e), TK_EINTERNAL);
}

TK_TEST(bce_values_and_gradient) {
    float z[4] = {0, 100, -100, 1.5f}, dz[4];
    uint8_t y[4] = {1, 0, 0, 1};
    double acc[2] = {0, 0};
    tk_err e;
    CHECK_EQ_INT(tk_bce_logits_ref(z, y, 4, dz, acc, &e), 0);
    double want = (log(2.0) + 100 + log1p(exp(-100.0)) + log1p(exp(-1.5))) / 4;
    CHECK_NEAR(acc[0], want, 1e-12);
    CHECK(acc[1] == 1);
    CHECK_NEAR(dz[0], (0.5 - 1) / 4, 1e-7);
    CHECK_NEAR(dz[1], 0.25, 1e-7);
    CHECK_NEAR(dz[3], (1 / (1 + exp(-1.5)) - 1) / 4, 1e-7);
    // finite differences of the mean loss
    for (int i = 0; i < 4; i++) {
        if (fabsf(z[i]) > 50) continue;
        double a[2] = {0, 0}, b[2] = {0, 0};
        float s = z[i];
        z[i] = s + 1e-3f;
        tk_bce_logits_ref(z, y, 4, NULL, a, &e);
        z[i] = s - 1e-3f;
        tk_bce_logits_ref(z, y, 4, NULL, b, &e);
        z[i] = s;
        CHECK_NEAR(dz[i], (a[0] - b[0]) / 2e-3, 1e-4);
    }
    // the accumulator adds up across calls (read only at log points)
    CHECK_EQ_INT(tk_bce_logits_ref(z, y, 4, NULL, acc, &e), 0);
    CHECK(acc[1] == 2);
    float bad[1] = {NAN};
    double acc2[2] = {0, 0};
    tk_bce_logits_ref(bad, y, 1, NULL, acc2, &e);
    CHECK(isnan(acc2[0]));
}

TK_TEST(sgd_update_and_bf16_copy) {
    float w[3] = {1, 2, 3}, g[3] = {0.5f, -1, 2}, lr = 0.25f;
    uint16_t copy[3];
    tk_err e;
    CHECK_EQ_INT(tk_sgd_update_ref(w, g, 3, &lr, copy, TK_BF16, &e), 0);
    CHECK(w[0] == 0.875f && w[1] == 2.25f && w[2] == 2.5f);
    CHECK(tk_bf16_to_f32(copy[0]) == 0.875f && tk_bf16_to_f32(copy[2]) == 2.5f);
    CHECK_EQ_INT(tk_sgd_update_ref(w, g, 3, &lr, NULL, TK_F32, &e), 0);
    CHECK(w[0] == 0.75f);
    CHECK(tk_f32_to_bf16(1.0f + 1.0f / 256) == 0x3f80); // ties round to even
    CHECK(tk_f32_to_bf16(1.0f + 3.0f / 256) == 0x3f82);
}

TK_TEST(lr_schedule_warmup_decay) {
    tk_lr_sched s = {.base_lr = 2, .warmup_steps = 4, .decay_start = 10, .decay_steps = 4,
                     .power = 2, .min_lr = 0};
    // warm-up: 2 * (s+1)/4
    CHECK(tk_lr_at(&s, 0) == 0.5 && tk_lr_at(&s, 3) == 2.0);
    CHECK(tk_lr_at(&s, 4) == 2.0 && tk_lr_at(&s, 9) == 2.0);       // hold
    CHECK(tk_lr_at(&s, 10) == 2.0);                                 // 2 * (4/4)^2
    CHECK(tk_lr_at(&s, 11) == 2.0 * 0.75 * 0.75);
    CHECK(tk_lr_at(&s, 13) == 2.0 * 0.25 * 0.25);
    CHECK(tk_lr_at(&s, 14) == 2.0 * 0.25 * 0.25 && tk_lr_at(&s, 1000) == 0.125); // frozen
    s.min_lr = 0.5;
    CHECK(tk_lr_at(&s, 13) == 0.5);
    // The op reads and advances the device counter.
    int64_t step = 10;
    float lr;
    tk_err e;
    s.min_lr = 0;
    CHECK_EQ_INT(tk_lr_schedule_ref(&s, &step, &lr, &e), 0);
    CHECK(step == 11 && lr == 2.0f);
    CHECK_EQ_INT(tk_lr_schedule_ref(&s, &step, &lr, &e), 0);
    CHECK(step == 12 && lr == 1.125f);
    tk_lr_sched flat = {.base_lr = 3};
    CHECK(tk_lr_at(&flat, 0) == 3 && tk_lr_at(&flat, 99) == 3);
}

static double auc_brute(const float *s, const uint8_t *y, int n) {
    double num = 0, P = 0, N = 0;
    for (int i = 0; i < n; i++) {
        if (y[i]) P++;
        else N++;
    }
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (y[i] && !y[j]) num += s[i] > s[j] ? 1 : s[i] == s[j] ? 0.5 : 0;
    return num / (P * N);
}

TK_TEST(auc_exact_cases) {
    tk_err e;
    uint64_t ws[8];
    double auc;
    // sklearn.metrics.roc_auc_score([0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]) == 0.75
    float s1[4] = {0.1f, 0.4f, 0.35f, 0.8f};
    uint8_t y1[4] = {0, 0, 1, 1};
    CHECK_EQ_INT(tk_auc_ref(s1, y1, 4, ws, &auc, &e), 0);
    CHECK(auc == 0.75);
    // a tie between a positive and a negative counts one half; -0 ties +0
    float s2[3] = {0.5f, 0.5f, 0.0f};
    uint8_t y2[3] = {1, 0, 0};
    CHECK_EQ_INT(tk_auc_ref(s2, y2, 3, ws, &auc, &e), 0);
    CHECK(auc == 0.75);
    float s3[2] = {-0.0f, 0.0f};
    uint8_t y3[2] = {1, 0};
    CHECK_EQ_INT(tk_auc_ref(s3, y3, 2, ws, &auc, &e), 0);
    CHECK(auc == 0.5);
    // one class only: undefined
    uint8_t y4[2] = {1, 1};
    CHECK_EQ_INT(tk_auc_ref(s1, y4, 2, ws, &auc, &e), 0);
    CHECK(isnan(auc));
    float s5[2] = {NAN, 1};
    CHECK_EQ_INT(tk_auc_ref(s5, y1 + 1, 2, ws, &auc, &e), TK_ENUMERIC);
}

TK_TEST(auc_matches_brute_force_with_ties) {
    enum { N = 2000 };
    static float s[N];
    static uint8_t y[N];
    static uint64_t ws[N];
    for (int i = 0; i < N; i++) {
        // Few distinct scores (many ties), negatives included, labels correlated with the score.
        s[i] = (float)((int)(urand(i) * 20)) / 4;
        y[i] = urand(50000 + i) * 3 + s[i] * 0.3 > 0.5;
    }
    double auc;
    tk_err e;
    CHECK_EQ_INT(tk_auc_ref(s, y, N, ws, &auc, &e), 0);
    CHECK_NEAR(auc, auc_brute(s, y, N), 1e-12);
    CHECK(auc > 0.5 && auc < 1);
}

// The bf16 variants' references: cast2d pads with zeros, drops columns and rounds to nearest
// even; the bf16 interaction and BCE are the f32 ops on the widened inputs, rounded.
TK_TEST(cast2d_and_bf16_variants) {
    tk_err e = {0};
    float src[2 * 3] = {1, 2, 3, 4, 1.00390625f, -6}, back[2 * 2];
    uint16_t pad[2 * 4];
    CHECK_EQ_INT(tk_cast2d_ref(src, TK_F32, 3, pad, TK_BF16, 4, 2, 3, &e), 0);
    CHECK(pad[3] == 0 && pad[7] == 0 && pad[0] == 0x3f80 && pad[4] == 0x4080);
    CHECK(pad[5] == 0x3f80); // 1 + 2^-8 is a tie: to even
    CHECK_EQ_INT(tk_cast2d_ref(pad, TK_BF16, 4, back, TK_F32, 2, 2, 2, &e), 0);
    CHECK(back[0] == 1 && back[1] == 2 && back[2] == 4 && back[3] == 1);
    CHECK_EQ_INT(tk_cast2d_ref(src, TK_F32, 3, pad, TK_BF16, 2, 2, 3, &e), TK_EINTERNAL);
    // cast_many: each span on its own (ResNet's bf16 weight gradients into their fp32 spans)
    float wide[7] = {0};
    const tk_cast_span spans[2] = {{pad, wide, 3}, {pad + 4, wide + 4, 3}};
    CHECK_EQ_INT(tk_cast_many_ref(spans, 2, TK_BF16, TK_F32, &e), 0);
    CHECK(wide[0] == 1 && wide[1] == 2 && wide[2] == 3 && wide[3] == 0 && wide[4] == 4 && wide[5] == 1 &&
          wide[6] == -6);
    CHECK_EQ_INT(tk_cast_many_ref(spans, TK_CAST_MANY + 1, TK_BF16, TK_F32, &e), TK_EINTERNAL);
    // interaction: B 2, T 2, D 3, W 7 (3 + 3 dots + 1 pad), values exact in bf16
    enum { B = 2, T = 2, D = 3, W = 7 };
    float bot[B * D], emb[B * T * D], out[B * W], dout[B * W], dbot[B * D], demb[B * T * D];
    uint16_t hb[B * D], he[B * T * D], ho[B * W], hd[B * W], hdb[B * D], hde[B * T * D];
    for (int i = 0; i < B * D; i++) bot[i] = (float)(i % 5) - 2, hb[i] = tk_f32_to_bf16(bot[i]);
    for (int i = 0; i < B * T * D; i++) emb[i] = (float)(i % 7) * 0.5f - 1, he[i] = tk_f32_to_bf16(emb[i]);
    for (int i = 0; i < B * W; i++) dout[i] = (float)(i % 3) - 1, hd[i] = tk_f32_to_bf16(dout[i]);
    CHECK_EQ_INT(tk_interaction_fwd_ref(bot, emb, B, T, D, W, out, &e), 0);
    CHECK_EQ_INT(tk_interaction_fwd_act_ref(TK_BF16, hb, he, B, T, T, D, W, ho, &e), 0);
    for (int i = 0; i < B * W; i++) CHECK(tk_bf16_to_f32(ho[i]) == out[i]);
    CHECK_EQ_INT(tk_interaction_bwd_ref(bot, emb, dout, B, T, D, W, 1, dbot, demb, &e), 0);
    CHECK_EQ_INT(tk_interaction_bwd_act_ref(TK_BF16, hb, he, hd, B, T, T, D, W, 1, hdb, hde, &e), 0);
    for (int i = 0; i < B * D; i++) CHECK(tk_bf16_to_f32(hdb[i]) == dbot[i]);
    for (int i = 0; i < B * T * D; i++) CHECK(tk_bf16_to_f32(hde[i]) == demb[i]); // small sums: exact
    // Random embeddings (not exact in bf16): the bf16 variant is the f32 op on the widened
    // vectors, its outputs rounded to nearest even.
    float ew[B * T * D], bw[B * D], gw[B * W];
    for (int i = 0; i < B * T * D; i++) he[i] = tk_f32_to_bf16(urand(900 + i)), ew[i] = tk_bf16_to_f32(he[i]);
    for (int i = 0; i < B * D; i++) hb[i] = tk_f32_to_bf16(urand(950 + i)), bw[i] = tk_bf16_to_f32(hb[i]);
    for (int i = 0; i < B * W; i++) hd[i] = tk_f32_to_bf16(urand(990 + i)), gw[i] = tk_bf16_to_f32(hd[i]);
    CHECK_EQ_INT(tk_interaction_fwd_ref(bw, ew, B, T, D, W, out, &e), 0);
    CHECK_EQ_INT(tk_interaction_fwd_act_ref(TK_BF16, hb, he, B, T, T, D, W, ho, &e), 0);
    for (int i = 0; i < B * W; i++) CHECK(ho[i] == tk_f32_to_bf16(out[i]));
    CHECK_EQ_INT(tk_interaction_bwd_ref(bw, ew, gw, B, T, D, W, 0, dbot, demb, &e), 0);
    CHECK_EQ_INT(tk_interaction_bwd_act_ref(TK_BF16, hb, he, hd, B, T, T, D, W, 0, hdb, hde, &e), 0);
    for (int i = 0; i < B * D; i++) CHECK(hdb[i] == tk_f32_to_bf16(dbot[i]));
    for (int i = 0; i < B * T * D; i++) CHECK(hde[i] == tk_f32_to_bf16(demb[i]));
    // BCE: bf16 logits give the f32 loss of the same values, dlogit rounded to bf16
    float z[3] = {0.5f, -2, 3}, dz[3];
    uint8_t y[3] = {1, 0, 0};
    uint16_t hz[3], hdz[3];
    for (int i = 0; i < 3; i++) hz[i] = tk_f32_to_bf16(z[i]);
    double a1[2] = {0, 0}, a2[2] = {0, 0};
    CHECK_EQ_INT(tk_bce_logits_ref(z, y, 3, dz, a1, &e), 0);
    CHECK_EQ_INT(tk_bce_logits_act_ref(TK_BF16, hz, y, 3, hdz, a2, &e), 0);
    CHECK(a1[0] == a2[0] && a2[1] == 1);
    for (int i = 0; i < 3; i++) CHECK(hdz[i] == tk_f32_to_bf16(dz[i]));
}

// kernels/rows_ref.c: gather (spos), scatter (dpos), both, neither; rows not written keep their
// values. Expected rows written out by hand: src row r is (10r, 10r+1, 10r+2).
TK_TEST(rows_copy_exact) {
    tk_err e = {0};
    float src[4 * 3], dst[4 * 3];
    for (int r = 0; r < 4; r++) src[3 * r] = 10.0f * r, src[3 * r + 1] = 10.0f * r + 1, src[3 * r + 2] = 10.0f * r + 2;
    int32_t gath[3] = {3, 0, 3}; // repeats are fine on the source side
    CHECK_EQ_INT(tk_rows_copy_ref(src, TK_F32, gath, dst, TK_F32, NULL, 3, NULL, 3, &e), 0);
    float want_g[9] = {30, 31, 32, 0, 1, 2, 30, 31, 32};
    for (int i = 0; i < 9; i++) CHECK(dst[i] == want_g[i]);
    // a negative source row is padding: zeros (bf16 too)
    int32_t padg[3] = {-1, 2, -7};
    for (int i = 0; i < 9; i++) dst[i] = -1;
    CHECK_EQ_INT(tk_rows_copy_ref(src, TK_F32, padg, dst, TK_F32, NULL, 3, NULL, 3, &e), 0);
    float want_p[9] = {0, 0, 0, 20, 21, 22, 0, 0, 0};
    for (int i = 0; i < 9; i++) CHECK(dst[i] == want_p[i] && !signbit(dst[i]));
    uint16_t db[9];
    memset(db, 0xff, sizeof db);
    CHECK_EQ_INT(tk_rows_copy_ref(src, TK_F32, padg, db, TK_BF16, NULL, 3, NULL, 3, &e), 0);
    for (int i = 0; i < 9; i++) CHECK(tk_bf16_to_f32(db[i]) == want_p[i] && !(db[i] & 0x8000));
    int32_t scat[2] = {2, 0};
    for (int i = 0; i < 12; i++) dst[i] = -1;
    CHECK_EQ_INT(tk_rows_copy_ref(src, TK_F32, NULL, dst, TK_F32, scat, 2, NULL, 3, &e), 0);
    float want_s[12] = {10, 11, 12, -1, -1, -1, 0, 1, 2, -1, -1, -1};
    for (int i = 0; i < 12; i++) CHECK(dst[i] == want_s[i]);
    int32_t sp[2] = {1, 3}, dp[2] = {3, 1};
    for (int i = 0; i < 12; i++) dst[i] = -1;
    CHECK_EQ_INT(tk_rows_copy_ref(src, TK_F32, sp, dst, TK_F32, dp, 2, NULL, 3, &e), 0);
    float want_b[12] = {-1, -1, -1, 30, 31, 32, -1, -1, -1, 10, 11, 12};
    for (int i = 0; i < 12; i++) CHECK(dst[i] == want_b[i]);
    for (int i = 0; i < 12; i++) dst[i] = -1;
    CHECK_EQ_INT(tk_rows_copy_ref(src, TK_F32, NULL, dst, TK_F32, NULL, 2, NULL, 3, &e), 0);
    float want_n[12] = {0, 1, 2, 10, 11, 12, -1, -1, -1, -1, -1, -1};
    for (int i = 0; i < 12; i++) CHECK(dst[i] == want_n[i]);
    // the same through the dispatch on a cpu context
    tk_ctx *c;
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    for (int i = 0; i < 12; i++) dst[i] = -1;
    CHECK_EQ_INT(tk_rows_copy(c, src, TK_F32, sp, dst, TK_F32, dp, 2, NULL, 3, &e), 0);
    for (int i = 0; i < 12; i++) CHECK(dst[i] == want_b[i]);
    CHECK_EQ_INT(tk_rows_copy(c, src, TK_F32, NULL, NULL, TK_F32, NULL, 0, NULL, 3, &e), 0); // n == 0: no-op
    // a count read when the op runs: min(n, max(*dn, 0)) rows
    int64_t dn[4] = {1, -2, 7, 0};
    int rows_moved[4] = {1, 0, 2, 0};
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 12; i++) dst[i] = -1;
        CHECK_EQ_INT(tk_rows_copy(c, src, TK_F32, sp, dst, TK_F32, dp, 2, &dn[k], 3, &e), 0);
        // row dp[0] = 3 gets src row 1 once one row moves, row dp[1] = 1 gets src row 3 with two
        for (int i = 0; i < 3; i++) {
            CHECK(dst[9 + i] == (rows_moved[k] >= 1 ? want_b[9 + i] : -1));
            CHECK(dst[3 + i] == (rows_moved[k] >= 2 ? want_b[3 + i] : -1));
        }
    }
    tk_ctx_destroy(c);
}

// Conversions: f32 -> bf16 rounds to nearest even (bits worked out by hand), bf16 -> f32 is exact,
// a same-type copy moves the bits (a signalling NaN stays as it is).
TK_TEST(rows_copy_types) {
    tk_err e = {0};
    // 1 + 3*2^-9 = 0x3f80c000: 0.75 of a bf16 ulp above 1 -> up, 0x3f81
    // 1 + 2^-8   = 0x3f808000: a tie, 0x3f80 is even -> 0x3f80
    // 1 + 3*2^-8 = 0x3f818000: a tie, 0x3f81 is odd -> 0x3f82
    float src[4] = {1.005859375f, 1.00390625f, 1.01171875f, -2.5f};
    uint16_t hb[2 * 2];
    int32_t sp[2] = {1, 0};
    CHECK_EQ_INT(tk_rows_copy_ref(src, TK_F32, sp, hb, TK_BF16, NULL, 2, NULL, 2, &e), 0);
    CHECK(hb[0] == 0x3f82 && hb[1] == 0xc020 && hb[2] == 0x3f81 && hb[3] == 0x3f80);
    uint16_t bs[4] = {0x3f81, 0xc020, 0x4040, 0x0000};
    float back[2 * 2];
    int32_t dp[2] = {1, 0};
    CHECK_EQ_INT(tk_rows_copy_ref(bs, TK_BF16, NULL, back, TK_F32, dp, 2, NULL, 2, &e), 0);
    CHECK(back[0] == 3 && back[1] == 0 && back[2] == 1.0078125f && back[3] == -2.5f);
    uint16_t nan[2] = {0x7f81, 0xffc1}, nan2[2] = {0, 0};
    CHECK_EQ_INT(tk_rows_copy_ref(nan, TK_BF16, NULL, nan2, TK_BF16, NULL, 1, NULL, 2, &e), 0);
    CHECK(nan2[0] == 0x7f81 && nan2[1] == 0xffc1);
}

// Segment sums: rows of dst named by seg_row get the sum of their items' source rows, an empty
// segment writes zeros, the other rows keep their values. Source row r is (r, 10r).
TK_TEST(rows_segsum_exact) {
    tk_err e = {0};
    float src[5 * 2], dst[6 * 2];
    uint16_t hb[5 * 2];
    for (int r = 0; r < 5; r++) src[2 * r] = (float)r, src[2 * r + 1] = 10.0f * r;
    for (int i = 0; i < 10; i++) hb[i] = tk_f32_to_bf16(src[i]); // small integers: exact in bf16
    int32_t pos[6] = {4, 1, 1, 0, 3, 2}, off[4] = {0, 3, 3, 6}, row[3] = {2, 0, 5};
    // row 2 = rows 4 + 1 + 1 = (6, 60); row 0 = empty = (0, 0); row 5 = rows 0 + 3 + 2 = (5, 50)
    float want[12] = {0, 0, -7, -7, 6, 60, -7, -7, -7, -7, 5, 50};
    for (int i = 0; i < 12; i++) dst[i] = -7;
    CHECK_EQ_INT(tk_rows_segsum_ref(src, TK_F32, pos, off, row, 3, NULL, 6, 2, dst, &e), 0);
    for (int i = 0; i < 12; i++) CHECK(dst[i] == want[i]);
    for (int i = 0; i < 12; i++) dst[i] = -7;
    CHECK_EQ_INT(tk_rows_segsum_ref(hb, TK_BF16, pos, off, row, 3, NULL, 6, 2, dst, &e), 0);
    for (int i = 0; i < 12; i++) CHECK(dst[i] == want[i]);
    // Item order, left to right: ((1e8 + 1) - 1e8) + 1 = 1 (1e8 + 1 rounds back to 1e8); a
    // pairwise or right-to-left sum of the same items gives 0.
    float big[3] = {1e8f, 1, -1e8f}, one = 0;
    int32_t bp[4] = {0, 1, 2, 1}, boff[2] = {0, 4}, brow[1] = {0};
    CHECK_EQ_INT(tk_rows_segsum_ref(big, TK_F32, bp, boff, brow, 1, NULL, 4, 1, &one, &e), 0);
    CHECK(one == 1);
    // Pieces of TK_ROWS_PIECE (256) items, cut at the multiples of 256 of k: one segment of 512
    // items, 2^24 then 511 ones. In one chain every + 1 is lost (2^24 + 1 rounds to 2^24, ties to
    // even); by pieces, [0, 256) gives 2^24 (its 255 ones lost), [256, 512) gives 256 exactly, and
    // 2^24 + 256 is a float: 16,777,472.
    float ones[2] = {16777216.0f, 1.0f}, sum = 0;
    int32_t *op = malloc(600 * sizeof *op);
    CHECK(op != NULL);
    for (int k = 0; k < 600; k++) op[k] = k == 0 ? 0 : 1;
    int32_t ooff[2] = {0, 512}, orow[1] = {0};
    CHECK_EQ_INT(tk_rows_segsum_ref(ones, TK_F32, op, ooff, orow, 1, NULL, 512, 1, &sum, &e), 0);
    CHECK(sum == 16777472.0f);
    // The cuts are at the multiples of 256 of k, not of the segment: the same items from k = 100
    // (positions 100.. of op, shifted) are cut at 256: [100, 256) holds 2^24 and 155 ones, lost;
    // [256, 512) 256 ones; [512, 612) 100 ones: 2^24 + 256 + 100 = 16,777,572 (even: a float).
    int32_t *op2 = malloc(612 * sizeof *op2);
    CHECK(op2 != NULL);
    for (int k = 0; k < 612; k++) op2[k] = k == 100 ? 0 : 1;
    int32_t ooff2[3] = {0, 100, 612}, orow2[2] = {1, 0};
    float two_rows[2] = {-1, -1};
    CHECK_EQ_INT(tk_rows_segsum_ref(ones, TK_F32, op2, ooff2, orow2, 2, NULL, 612, 1, two_rows, &e), 0);
    CHECK(two_rows[0] == 16777572.0f && two_rows[1] == 100.0f);
    // more items than nitems says: an internal error, nothing summed
    CHECK_EQ_INT(tk_rows_segsum_ref(ones, TK_F32, op2, ooff2, orow2, 2, NULL, 611, 1, two_rows, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "rows_segsum: the segments hold 612 items, more than the 611 given");
    free(op), free(op2);
    tk_ctx *c;
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    for (int i = 0; i < 12; i++) dst[i] = -7;
    CHECK_EQ_INT(tk_rows_segsum(c, src, TK_F32, pos, off, row, 3, NULL, 6, 2, dst, NULL, &e), 0);
    for (int i = 0; i < 12; i++) CHECK(dst[i] == want[i]);
    CHECK_EQ_INT(tk_rows_segsum(c, NULL, TK_F32, NULL, NULL, NULL, 0, NULL, 0, 2, NULL, NULL, &e), 0); // nseg == 0: no-op
    // dnseg = 2 of 3: rows 2 and 0 written, row 5 left alone; -1: none
    int64_t two = 2, neg = -1;
    for (int i = 0; i < 12; i++) dst[i] = -7;
    CHECK_EQ_INT(tk_rows_segsum(c, src, TK_F32, pos, off, row, 3, &two, 6, 2, dst, NULL, &e), 0);
    for (int i = 0; i < 12; i++) CHECK(dst[i] == (i >= 10 ? -7 : want[i]));
    for (int i = 0; i < 12; i++) dst[i] = -7;
    CHECK_EQ_INT(tk_rows_segsum(c, src, TK_F32, pos, off, row, 3, &neg, 6, 2, dst, NULL, &e), 0);
    for (int i = 0; i < 12; i++) CHECK(dst[i] == -7);
    tk_ctx_destroy(c);
}

TK_TEST(rows_bad_arguments) {
    tk_err e = {0};
    float x[4] = {0};
    CHECK_EQ_INT(tk_rows_copy_ref(x, TK_I32, NULL, x, TK_F32, NULL, 1, NULL, 1, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "rows_copy: unsupported types I32 -> F32");
    CHECK_EQ_INT(tk_rows_copy_ref(x, TK_F32, NULL, x, TK_F16, NULL, 1, NULL, 1, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_rows_copy_ref(x, TK_F32, NULL, x, TK_F32, NULL, 1, NULL, 0, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "rows_copy: bad shape n 1 D 0 (want n >= 0, D > 0)");
    CHECK_EQ_INT(tk_rows_copy_ref(x, TK_F32, NULL, x, TK_F32, NULL, -1, NULL, 4, &e), TK_EINTERNAL);
    int32_t off[2] = {0, 0}, row[1] = {0};
    CHECK_EQ_INT(tk_rows_segsum_ref(x, TK_F16, NULL, off, row, 1, NULL, 0, 1, x, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "rows_segsum: unsupported source type F16");
    CHECK_EQ_INT(tk_rows_segsum_ref(x, TK_F32, NULL, off, row, 1, NULL, 0, -3, x, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "rows_segsum: bad shape nseg 1 items 0 D -3 (want nseg >= 0, items >= 0, D > 0)");
    CHECK_EQ_INT(tk_rows_segsum_ref(x, TK_F32, NULL, off, row, -1, NULL, 0, 1, x, &e), TK_EINTERNAL);
}

// kernels/hybrid_plan_ref.c on the batch worked out by hand in hybrid_plan_case.h (the same case
// runs on the device in tests/gpu/test_hybrid_plan.c), directly and through the dispatch.
TK_TEST(hybrid_plan_exact) {
    tk_err e = {0};
    uint64_t hset[32];
    hpc_sets(hset);
    CHECK_EQ_INT(tk_hset_find(hset, hpc_hoff, hpc_hbits, hpc_fbase, 0, 1), 1);
    CHECK_EQ_INT(tk_hset_find(hset, hpc_hoff, hpc_hbits, hpc_fbase, 0, 0), -1);
    CHECK_EQ_INT(tk_hset_find(hset, hpc_hoff, hpc_hbits, hpc_fbase, 1, 1), -1);
    CHECK_EQ_INT(tk_hset_find(hset, hpc_hoff, hpc_hbits, hpc_fbase, 2, 4), 3);
    tk_ctx *c;
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    for (int r = 0; r < 2; r++)
        for (int via = 0; via < 2; via++) { // the reference, then the dispatch on a cpu context
            size_t off[7];
            tk_hybrid_plan_layout(4, 3, 2, r, 2, off);
            CHECK_EQ_INT(off[1], r ? 4 : 8); // B*tn
            CHECK_EQ_INT(off[6], off[1] + 5 * 6 + 1); // four regions of b*T, seg_off b*T + 1
            int32_t out[64], ws[64];
            int64_t counts[8];
            CHECK(tk_hybrid_plan_ws_bytes(TK_BACKEND_CPU, 4, 3, 2, 4) <= sizeof ws);
            memset(out, 0xff, sizeof out), memset(counts, 0xff, sizeof counts);
            tk_hybrid_plan_args a = {.B = 4, .T = 3, .W = 2, .rank = r, .tm = 2, .cat = hpc_cat, .hset = hset,
                                     .hoff = hpc_hoff, .hbits = hpc_hbits, .fbase = hpc_fbase,
                                     .own_off = r ? hpc_own1 : hpc_own0, .nf = 4, .out = out, .counts = counts,
                                     .ws = ws};
            CHECK_EQ_INT(via ? tk_hybrid_plan(c, &a, &e) : tk_hybrid_plan_ref(&a, &e), 0);
            CHECK_EQ_INT(hpc_mismatches(r, out, off, counts), 0);
            int64_t mat[4];
            memset(mat, 0xff, sizeof mat);
            CHECK_EQ_INT(via ? tk_hybrid_exchange_counts(c, &a, mat, &e) : tk_hybrid_exchange_counts_ref(&a, mat, &e), 0);
            for (int k = 0; k < 4; k++) CHECK_EQ_INT(mat[k], hpc_mat[k]);
            for (int cap = 1; cap <= 3; cap += 2) {
                int32_t send_pad[6], recv_src[6];
                memset(send_pad, 0x7f, sizeof send_pad), memset(recv_src, 0x7f, sizeof recv_src);
                CHECK_EQ_INT(via ? tk_hybrid_plan_fixed(c, &a, cap, 9, send_pad, recv_src, &e)
                                 : tk_hybrid_plan_fixed_ref(&a, cap, 9, send_pad, recv_src, &e),
                             0);
                CHECK_EQ_INT(hpc_fixed_mismatches(r, cap, send_pad, recv_src), 0);
            }
            // capacities past b*tm (the plain exchange's block) are refused
            CHECK_EQ_INT(tk_hybrid_plan_fixed_ref(&a, 5, 9, NULL, NULL, &e), TK_EINTERNAL);
            CHECK_STR(e.what, "hybrid_plan_fixed: capacity 5 outside [0, b*tm = 4]");
        }
    tk_ctx_destroy(c);
}

// The next draw of the Philox stream counted by *x.
static uint64_t hp_rand(uint64_t *x) { return tk_philox_draw(7, 17, (*x)++).v[0]; }

// Random batches (ids from a skewed draw over small tables, random frequent sets): the plan of
// every rank against the exchange matrix, two separate computations that must agree: rank r
// sends mat[r][j] to peer j and receives mat[i][r] from owner i; and the send parts lie in
// send_pad in order, padded with pad_row.
TK_TEST(hybrid_plan_matrix_agrees) {
    tk_err e = {0};
    uint64_t rnd = 12345;
    for (int round = 0; round < 40; round++) {
        const int Ws[4] = {2, 3, 4, 5};
        int W = Ws[round % 4], T = 1 + (int)(hp_rand(&rnd) % 9), b = 1 + (int)(hp_rand(&rnd) % 13);
        int B = W * b, tm = (T + W - 1) / W;
        int64_t rows[9], hoff[9], fbase[9], nf = 0, nslots = 0;
        int32_t hbits[9];
        for (int t = 0; t < T; t++) {
            rows[t] = 1 + (int64_t)(hp_rand(&rnd) % 20);
            hbits[t] = (int32_t)(hp_rand(&rnd) % 3 ? 6 : 0); // 64 slots, or no frequent rows
            hoff[t] = nslots, nslots += hbits[t] ? 64 : 0;
        }
        uint64_t *hset = calloc((size_t)(nslots ? nslots : 1), 8);
        for (int t = 0; t < T; t++) {
            fbase[t] = nf;
            if (!hbits[t]) continue;
            uint32_t local = 0;
            for (int32_t id = 0; id < rows[t]; id++)
                if (hp_rand(&rnd) % 3 == 0) hpc_hset_add(hset + hoff[t], 6, id, local++);
            nf += local;
        }
        int32_t *cat = malloc((size_t)B * T * 4);
        for (int64_t u = 0; u < (int64_t)B * T; u++) {
            int64_t r0 = rows[u % T], x = (int64_t)(hp_rand(&rnd) % (uint64_t)r0);
            cat[u] = (int32_t)(hp_rand(&rnd) % 2 ? x * x / r0 : x); // skewed toward small ids
        }
        int64_t *mat = malloc((size_t)W * W * 8);
        tk_hybrid_plan_args a = {.B = B, .T = T, .W = W, .tm = tm, .cat = cat, .hset = hset, .hoff = hoff,
                                 .hbits = hbits, .fbase = fbase, .nf = nf};
        CHECK_EQ_INT(tk_hybrid_exchange_counts_ref(&a, mat, &e), 0);
        int64_t total = 0;
        for (int k = 0; k < W * W; k++) total += mat[k];
        for (int r = 0; r < W; r++) {
            size_t off[7];
            tk_hybrid_plan_layout(B, T, W, r, tm, off);
            int64_t own_off[10] = {0};
            for (int lt = 0; lt < tm && r * tm + lt < T; lt++) own_off[lt + 1] = own_off[lt] + rows[r * tm + lt];
            int32_t *out = malloc(off[6] * 4), *ws = malloc(tk_hybrid_plan_ws_bytes(TK_BACKEND_CPU, B, T, W, nf));
            int64_t counts[2 * 5 + 4];
            a.rank = r, a.own_off = own_off, a.out = out, a.counts = counts, a.ws = ws;
            CHECK_EQ_INT(tk_hybrid_plan_ref(&a, &e), 0);
            for (int j = 0; j < W; j++) {
                CHECK_EQ_INT(counts[j], mat[r * W + j]);
                CHECK_EQ_INT(counts[W + j], mat[j * W + r]);
            }
            int64_t cap = 0, sent = 0; // the largest part of the whole exchange: everything fits
            for (int k = 0; k < W * W; k++) cap = mat[k] > cap ? mat[k] : cap;
            for (int j = 0; j < W; j++) sent += counts[j];
            CHECK_EQ_INT(sent, counts[2 * W]);
            int32_t *send_pad = malloc((size_t)(W * cap + 1) * 4), *recv_src = malloc((size_t)(b * T + 1) * 4);
            CHECK_EQ_INT(tk_hybrid_plan_fixed_ref(&a, cap, -7, send_pad, recv_src, &e), 0);
            for (int j = 0, from = 0; j < W; from += (int)counts[j], j++)
                for (int64_t q = 0; q < cap; q++)
                    CHECK_EQ_INT(send_pad[j * cap + q], q < counts[j] ? out[off[0] + from + q] : -7);
            // recv_src: owner i's part at i*cap, i*cap + 1, ...
            for (int i = 0, k = 0; i < W; i++)
                for (int64_t q = 0; q < counts[W + i]; q++, k++) CHECK_EQ_INT(recv_src[k], i * cap + q);
            free(out), free(ws), free(send_pad), free(recv_src);
        }
        CHECK(total <= (int64_t)B * T);
        free(hset), free(cat), free(mat);
    }
}

TK_TEST(hybrid_plan_bad_shape) {
    tk_err e = {0};
    int tn = -1;
    tk_hybrid_plan_args a = {.B = 5, .T = 3, .W = 2, .rank = 0, .tm = 2, .nf = 4};
    CHECK_EQ_INT(tk_hybrid_plan_check(&a, &tn, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "hybrid_plan: bad shape B 5 T 3 W 2 rank 0 tm 2 nf 4");
    CHECK_EQ_INT(tk_hybrid_plan_ref(&a, &e), TK_EINTERNAL); // checked before anything is read
    a.B = 4, a.tm = 1; // 2 ranks of 1 table cannot hold 3
    CHECK_EQ_INT(tk_hybrid_plan_check(&a, &tn, &e), TK_EINTERNAL);
    a.tm = 2, a.rank = 2;
    CHECK_EQ_INT(tk_hybrid_plan_check(&a, &tn, &e), TK_EINTERNAL);
    a.rank = 0, a.B = -4;
    CHECK_EQ_INT(tk_hybrid_plan_check(&a, &tn, &e), TK_EINTERNAL);
    a.B = 4, a.rank = 1;
    CHECK_EQ_INT(tk_hybrid_plan_check(&a, &tn, &e), 0);
    CHECK_EQ_INT(tn, 1);
    a.T = 1; // rank 1 of 2 owns no table
    CHECK_EQ_INT(tk_hybrid_plan_check(&a, &tn, &e), 0);
    CHECK_EQ_INT(tn, 0);
}
