// kernels/interaction.cu against kernels/interaction_ref.c: forward and backward (with and
// without the bottom ReLU), the MLPerf shape (T 26, D 128, W 480 padded) and a small odd one,
// random and small-integer inputs; bit for bit (both sum products in fp64 in the same order); the
// grouped emb/demb layout of several ranks (G < T tables a group).
// TK_OPS_BENCH=1 also times the MLPerf shape at batch 65536.
#include <math.h>

#include "gpu_test.h"
#include "interaction.h"

static int inter_case(int B, int T, int D, int W, int ints, int relu) {
    size_t nb = (size_t)B * D, ne = (size_t)B * T * D, no = (size_t)B * W;
    float *bot = gt_host(4 * nb), *emb = gt_host(4 * ne), *dout = gt_host(4 * no);
    float *outr = gt_host(4 * no), *outg = gt_host(4 * no), *dbr = gt_host(4 * nb), *dbg = gt_host(4 * nb);
    float *der = gt_host(4 * ne), *deg = gt_host(4 * ne);
    gt_fill(bot, nb, ints ? -3 : -1, ints ? 3 : 1, ints);
    gt_fill(emb, ne, ints ? -3 : -1, ints ? 3 : 1, ints);
    gt_fill(dout, no, ints ? -3 : -1, ints ? 3 : 1, ints);
    tk_err e = {0};
    if (tk_interaction_fwd_ref(bot, emb, B, T, D, W, outr, &e) ||
        tk_interaction_bwd_ref(bot, emb, dout, B, T, D, W, relu, dbr, der, &e))
        gt_die_("interaction ref", &e);
    float *d_bot = gt_dev(4 * nb), *d_emb = gt_dev(4 * ne), *d_dout = gt_dev(4 * no), *d_out = gt_dev(4 * no);
    float *d_dbot = gt_dev(4 * nb), *d_demb = gt_dev(4 * ne);
    gt_up(d_bot, bot, 4 * nb), gt_up(d_emb, emb, 4 * ne), gt_up(d_dout, dout, 4 * no);
    gt_poison(d_out, 4 * no, 0xff), gt_poison(d_dbot, 4 * nb, 0xff), gt_poison(d_demb, 4 * ne, 0xff);
    if (tk_interaction_fwd(gt_ctx_, d_bot, d_emb, B, T, D, W, d_out, &e) ||
        tk_interaction_bwd(gt_ctx_, d_bot, d_emb, d_dout, B, T, D, W, relu, d_dbot, d_demb, &e) || gt_sync(&e))
        gt_die_("interaction cuda", &e);
    gt_down(outg, d_out, 4 * no), gt_down(dbg, d_dbot, 4 * nb), gt_down(deg, d_demb, 4 * ne);
    size_t df = gt_ndiff(outg, outr, no), db = gt_ndiff(dbg, dbr, nb), de = gt_ndiff(deg, der, ne);
    printf("# table interaction %-6s B %3d T %2d D %3d W %3d relu %d: differing fwd %zu, dbot %zu, demb %zu "
           "(rel err %.1e %.1e %.1e)\n", ints ? "ints" : "random", B, T, D, W, relu, df, db, de,
           gt_relerr(outg, outr, no), gt_relerr(dbg, dbr, nb), gt_relerr(deg, der, ne));
    void *dev[] = {d_bot, d_emb, d_dout, d_out, d_dbot, d_demb};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
    free(bot), free(emb), free(dout), free(outr), free(outg), free(dbr), free(dbg), free(der), free(deg);
    return df + db + de != 0;
}

TK_TEST(interaction_mlperf_shape_random) {
    CHECK_EQ_INT(inter_case(64, 26, 128, 480, 0, 1), 0);
    CHECK_EQ_INT(inter_case(33, 26, 128, 479, 0, 0), 0);
}
TK_TEST(interaction_small_odd_shape) {
    CHECK_EQ_INT(inter_case(17, 3, 13, 24, 0, 1), 0);
    CHECK_EQ_INT(inter_case(5, 1, 7, 8, 0, 0), 0);
}
// Extreme values through the forward's fast fp32 -> fp64 widening (exact for finite floats, Inf
// and NaN sent to the plain conversion a sample at a time): subnormals, values whose products
// overflow fp32, signed zeros, and an Inf or a NaN in one sample each; the other samples of the
// same blocks keep the fast path. Equal to the reference (NaN where it has NaN).
TK_TEST(interaction_extreme_values) {
    const int B = 12, T = 26, D = 128, W = 480;
    size_t nb = (size_t)B * D, ne = (size_t)B * T * D, no = (size_t)B * W;
    float *bot = gt_host(4 * nb), *emb = gt_host(4 * ne), *outr = gt_host(4 * no), *outg = gt_host(4 * no);
    gt_fill(bot, nb, -1, 1, 0), gt_fill(emb, ne, -1, 1, 0);
    emb[(size_t)1 * T * D + 3 * D + 5] = INFINITY;
    bot[(size_t)2 * D + 7] = NAN;
    for (int d = 0; d < D; d += 3) emb[(size_t)5 * T * D + 9 * D + d] = d % 2 ? 1e-40f : -3e-39f; // subnormals
    for (int d = 0; d < D; d += 5) emb[(size_t)6 * T * D + 2 * D + d] = d % 2 ? 3e38f : -2e38f;     // overflow f32
    for (int d = 0; d < D; d++) bot[(size_t)7 * D + d] = d % 2 ? -0.0f : 0.0f;
    emb[(size_t)9 * T * D + 25 * D + 127] = -INFINITY;
    tk_err e = {0};
    if (tk_interaction_fwd_ref(bot, emb, B, T, D, W, outr, &e)) gt_die_("interaction ref", &e);
    float *d_bot = gt_dev(4 * nb), *d_emb = gt_dev(4 * ne), *d_out = gt_dev(4 * no);
    gt_up(d_bot, bot, 4 * nb), gt_up(d_emb, emb, 4 * ne), gt_poison(d_out, 4 * no, 0xff);
    if (tk_interaction_fwd(gt_ctx_, d_bot, d_emb, B, T, D, W, d_out, &e) || gt_sync(&e)) gt_die_("interaction", &e);
    gt_down(outg, d_out, 4 * no);
    size_t bad = 0, nan = 0, inf = 0;
    for (size_t i = 0; i < no; i++) {
        bad += gt_ulps(outg[i], outr[i]) != 0 || (outr[i] == outr[i] && signbit(outg[i]) != signbit(outr[i]));
        nan += outr[i] != outr[i], inf += isinf(outr[i]) != 0;
    }
    printf("# table interaction extreme values: %zu of %zu differ (the reference has %zu NaN, %zu Inf)\n", bad, no,
           nan, inf);
    CHECK(nan > 0 && inf > 0); // the case tests what it says
    CHECK_EQ_INT((int)bad, 0);
    tk_free(gt_ctx_, d_bot), tk_free(gt_ctx_, d_emb), tk_free(gt_ctx_, d_out);
    free(bot), free(emb), free(outr), free(outg);
}
TK_TEST(interaction_ints_exact) {
    CHECK_EQ_INT(inter_case(40, 26, 128, 480, 1, 1), 0);
    CHECK_EQ_INT(inter_case(9, 4, 16, 26, 1, 0), 0);
}
// The bf16-activation variants (tk_interaction_{fwd,bwd}_act with TK_BF16: bot, emb, out, dout,
// dbot and demb all bf16) against their references (widen, the f32 reference, round): the inputs
// are rounded to bf16 first and both sides read the same bytes. Random inputs: bf16 rel err <=
// 1e-2 (both round the same fp64 sums, so at most an ulp of bf16 apart anywhere); small integers:
// bit for bit, and equal to the f32 op's results (every sum is then exact in bf16).
static int inter_case_bf16(int B, int T, int D, int W, int relu, int ints) {
    size_t nb = (size_t)B * D, ne = (size_t)B * T * D, no = (size_t)B * W;
    float *bot = gt_host(4 * nb), *emb = gt_host(4 * ne), *dout = gt_host(4 * no);
    float *outr = gt_host(4 * no), *outg = gt_host(4 * no), *dbr = gt_host(4 * nb), *dbg = gt_host(4 * nb);
    float *der = gt_host(4 * ne), *deg = gt_host(4 * ne);
    uint16_t *hb = gt_host(2 * nb), *he = gt_host(2 * ne), *hd = gt_host(2 * no), *ho = gt_host(2 * no);
    uint16_t *hdb = gt_host(2 * nb), *hde = gt_host(2 * ne);
    // ints: values in {-1, 0, 1} keep every dot (|.| <= D <= 128) and every gradient sum (|.| <= T+1)
    // an integer below 256, exact in bf16
    gt_fill(bot, nb, -1, 1, ints), gt_fill(emb, ne, -1, 1, ints), gt_fill(dout, no, -1, 1, ints);
    for (size_t i = 0; i < nb; i++) hb[i] = tk_f32_to_bf16(bot[i]), bot[i] = tk_bf16_to_f32(hb[i]);
    for (size_t i = 0; i < ne; i++) he[i] = tk_f32_to_bf16(emb[i]), emb[i] = tk_bf16_to_f32(he[i]);
    for (size_t i = 0; i < no; i++) hd[i] = tk_f32_to_bf16(dout[i]), dout[i] = tk_bf16_to_f32(hd[i]);
    tk_err e = {0};
    if (tk_interaction_fwd_act_ref(TK_BF16, hb, he, B, T, T, D, W, ho, &e) ||
        tk_interaction_bwd_act_ref(TK_BF16, hb, he, hd, B, T, T, D, W, relu, hdb, hde, &e))
        gt_die_("interaction bf16 ref", &e);
    for (size_t i = 0; i < no; i++) outr[i] = tk_bf16_to_f32(ho[i]);
    for (size_t i = 0; i < nb; i++) dbr[i] = tk_bf16_to_f32(hdb[i]);
    for (size_t i = 0; i < ne; i++) der[i] = tk_bf16_to_f32(hde[i]);
    void *d_bot = gt_dev(2 * nb), *d_dout = gt_dev(2 * no), *d_out = gt_dev(2 * no), *d_dbot = gt_dev(2 * nb);
    void *d_emb = gt_dev(2 * ne), *d_demb = gt_dev(2 * ne);
    gt_up(d_bot, hb, 2 * nb), gt_up(d_emb, he, 2 * ne), gt_up(d_dout, hd, 2 * no);
    gt_poison(d_out, 2 * no, 0xff), gt_poison(d_dbot, 2 * nb, 0xff), gt_poison(d_demb, 2 * ne, 0xff);
    if (tk_interaction_fwd_act(gt_ctx_, TK_BF16, d_bot, d_emb, B, T, T, D, W, d_out, &e) ||
        tk_interaction_bwd_act(gt_ctx_, TK_BF16, d_bot, d_emb, d_dout, B, T, T, D, W, relu, d_dbot, d_demb, &e) ||
        gt_sync(&e))
        gt_die_("interaction bf16 cuda", &e);
    gt_down_as(outg, d_out, no, TK_BF16), gt_down_as(dbg, d_dbot, nb, TK_BF16), gt_down_as(deg, d_demb, ne, TK_BF16);
    double rf = gt_relerr(outg, outr, no), rb = gt_relerr(dbg, dbr, nb), re = gt_relerr(deg, der, ne);
    size_t nf = gt_ndiff(outg, outr, no), ndb = gt_ndiff(dbg, dbr, nb), nde = gt_ndiff(deg, der, ne);
    int bad = !(rf <= 1e-2 && rb <= 1e-2 && re <= 1e-2);
    size_t vs32 = 0;
    if (ints) { // exact: bit for bit, and the f32 reference's values
        bad |= nf + ndb + nde != 0;
        float *o32 = gt_host(4 * no), *db32 = gt_host(4 * nb), *de32 = gt_host(4 * ne);
        if (tk_interaction_fwd_ref(bot, emb, B, T, D, W, o32, &e) ||
            tk_interaction_bwd_ref(bot, emb, dout, B, T, D, W, relu, db32, de32, &e))
            gt_die_("interaction f32 ref", &e);
        vs32 = gt_ndiff(outg, o32, no) + gt_ndiff(dbg, db32, nb) + gt_ndiff(deg, de32, ne);
        bad |= vs32 != 0;
        free(o32), free(db32), free(de32);
    }
    printf("# table interaction bf16 %-6s B %3d T %2d D %3d W %3d relu %d: rel err fwd %.1e dbot %.1e demb %.1e "
           "(differing %zu %zu %zu; vs f32 %zu)\n", ints ? "ints" : "random", B, T, D, W, relu, rf, rb, re, nf, ndb,
           nde, vs32);
    void *dev[] = {d_bot, d_emb, d_dout, d_out, d_dbot, d_demb};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
    free(bot), free(emb), free(dout), free(outr), free(outg), free(dbr), free(dbg), free(der), free(deg);
    free(hb), free(he), free(hd), free(ho), free(hdb), free(hde);
    return bad;
}

TK_TEST(interaction_bf16_activations) {
    CHECK_EQ_INT(inter_case_bf16(64, 26, 128, 480, 1, 0), 0); // the fixed-F backward, vector staging
    CHECK_EQ_INT(inter_case_bf16(33, 26, 16, 367, 0, 0), 0);
    CHECK_EQ_INT(inter_case_bf16(17, 3, 13, 24, 1, 0), 0);   // the generic backward, scalar staging
}
TK_TEST(interaction_bf16_ints_exact) {
    CHECK_EQ_INT(inter_case_bf16(40, 26, 128, 480, 1, 1), 0);
    CHECK_EQ_INT(inter_case_bf16(9, 4, 16, 26, 0, 1), 0);
    CHECK_EQ_INT(inter_case_bf16(7, 3, 13, 24, 1, 1), 0);
}
// Many vectors: the forward's tiles take several rounds of 32 lanes (F 41: 66 tiles; F 121: 496
// tiles), the generic backward; and the MLPerf F with D > 128.
TK_TEST(interaction_many_tables) {
    CHECK_EQ_INT(inter_case(9, 40, 44, 864, 0, 1), 0);
    CHECK_EQ_INT(inter_case(5, 120, 20, 7281, 1, 0), 0);
    CHECK_EQ_INT(inter_case_bf16(7, 40, 36, 856, 1, 0), 0);
    // T 26 with D past the fixed-F backward's 128 threads (a thread takes a second dimension)
    CHECK_EQ_INT(inter_case(6, 26, 136, 488, 0, 1), 0);
    CHECK_EQ_INT(inter_case_bf16(5, 26, 136, 487, 1, 0), 0);
}

// The grouped layout (kernels/interaction.h: G tables a group; several ranks pass the all-to-all
// buffer as emb and demb with G = tm): the cuda ops against their references on the same grouped
// bytes, f32 and bf16, judged as above (f32 and small integers bit for bit, bf16 random rel err
// <= 1e-2). The unused slots of the last group (T % G != 0) hold NaN on the way in and the 0xff
// poison on the way out: they must be neither read (the outputs match the reference's) nor
// written (the poison stays).
static void *host_as(const float *x, size_t n, tk_dtype t) { // f32 host array -> host array of type t
    void *h = gt_host(n * tk_dtype_size(t));
    for (size_t i = 0; i < n; i++)
        if (t == TK_BF16) ((uint16_t *)h)[i] = tk_f32_to_bf16(x[i]);
        else ((float *)h)[i] = x[i];
    return h;
}
static void host_widen(float *x, const void *h, size_t n, tk_dtype t) {
    for (size_t i = 0; i < n; i++) x[i] = t == TK_BF16 ? tk_bf16_to_f32(((const uint16_t *)h)[i]) : ((const float *)h)[i];
}
static size_t grouped_at(int b, int t, int B, int G, int D) {
    return ((size_t)(t / G) * B * G + (size_t)b * G + (size_t)(t % G)) * D;
}

static int inter_case_grouped(tk_dtype act, int B, int T, int G, int D, int W, int relu, int ints) {
    size_t es = tk_dtype_size(act), nb = (size_t)B * D, no = (size_t)B * W, ng = tk_interaction_emb_elems(B, T, G, D);
    size_t nv = (size_t)B * T * D, slots = (size_t)(T + G - 1) / G * G; // valid elements; slots a sample
    float *bot = gt_host(4 * nb), *emb = gt_host(4 * ng), *dout = gt_host(4 * no);
    float *outr = gt_host(4 * no), *outg = gt_host(4 * no), *dbr = gt_host(4 * nb), *dbg = gt_host(4 * nb);
    float *der = gt_host(4 * ng), *deg = gt_host(4 * ng), *dvr = gt_host(4 * nv), *dvg = gt_host(4 * nv);
    gt_fill(bot, nb, -1, 1, ints), gt_fill(emb, ng, -1, 1, ints), gt_fill(dout, no, -1, 1, ints);
    for (int b = 0; b < B; b++)
        for (size_t t = (size_t)T; t < slots; t++)
            for (int d = 0; d < D; d++) emb[grouped_at(b, (int)t, B, G, D) + d] = NAN;
    gt_round(bot, nb, act), gt_round(emb, ng, act), gt_round(dout, no, act);
    void *hb = host_as(bot, nb, act), *he = host_as(emb, ng, act), *hd = host_as(dout, no, act);
    void *ho = gt_host(es * no), *hdb = gt_host(es * nb), *hde = gt_host(es * ng);
    memset(hde, 0xff, es * ng);
    tk_err e = {0};
    if (tk_interaction_fwd_act_ref(act, hb, he, B, T, G, D, W, ho, &e) ||
        tk_interaction_bwd_act_ref(act, hb, he, hd, B, T, G, D, W, relu, hdb, hde, &e))
        gt_die_("interaction grouped ref", &e);
    host_widen(outr, ho, no, act), host_widen(dbr, hdb, nb, act), host_widen(der, hde, ng, act);
    void *d_bot = gt_dev(es * nb), *d_emb = gt_dev(es * ng), *d_dout = gt_dev(es * no), *d_out = gt_dev(es * no);
    void *d_dbot = gt_dev(es * nb), *d_demb = gt_dev(es * ng);
    gt_up(d_bot, hb, es * nb), gt_up(d_emb, he, es * ng), gt_up(d_dout, hd, es * no);
    gt_poison(d_out, es * no, 0xff), gt_poison(d_dbot, es * nb, 0xff), gt_poison(d_demb, es * ng, 0xff);
    if (tk_interaction_fwd_act(gt_ctx_, act, d_bot, d_emb, B, T, G, D, W, d_out, &e) ||
        tk_interaction_bwd_act(gt_ctx_, act, d_bot, d_emb, d_dout, B, T, G, D, W, relu, d_dbot, d_demb, &e) ||
        gt_sync(&e))
        gt_die_("interaction grouped cuda", &e);
    gt_down_as(outg, d_out, no, act), gt_down_as(dbg, d_dbot, nb, act), gt_down_as(deg, d_demb, ng, act);
    size_t written = 0; // unused slots whose poison (NaN) was overwritten
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t o = grouped_at(b, t, B, G, D), v = ((size_t)b * T + t) * D;
            memcpy(dvr + v, der + o, 4 * (size_t)D), memcpy(dvg + v, deg + o, 4 * (size_t)D);
        }
        for (size_t t = (size_t)T; t < slots; t++)
            for (int d = 0; d < D; d++) written += !isnan(deg[grouped_at(b, (int)t, B, G, D) + d]);
    }
    size_t df = gt_ndiff(outg, outr, no), db = gt_ndiff(dbg, dbr, nb), de = gt_ndiff(dvg, dvr, nv);
    double rf = gt_relerr(outg, outr, no), rb = gt_relerr(dbg, dbr, nb), re = gt_relerr(dvg, dvr, nv);
    int bad = written != 0 || !(rf <= 1e-2 && rb <= 1e-2 && re <= 1e-2);
    if (act == TK_F32 || ints) bad |= df + db + de != 0;
    printf("# table interaction grouped %s %-6s B %3d T %2d G %2d D %3d W %3d relu %d: differing fwd %zu, dbot %zu, "
           "demb %zu (rel err %.1e %.1e %.1e); unused slots written %zu\n", tk_dtype_name(act), ints ? "ints" : "random",
           B, T, G, D, W, relu, df, db, de, rf, rb, re, written);
    void *dev[] = {d_bot, d_emb, d_dout, d_out, d_dbot, d_demb};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
    free(bot), free(emb), free(dout), free(outr), free(outg), free(dbr), free(dbg), free(der), free(deg);
    free(dvr), free(dvg), free(hb), free(he), free(hd), free(ho), free(hdb), free(hde);
    return bad;
}

TK_TEST(interaction_grouped_layout) {
    for (int a = 0; a < 2; a++) {
        tk_dtype act = a ? TK_BF16 : TK_F32;
        CHECK_EQ_INT(inter_case_grouped(act, 64, 26, 13, 128, 480, 1, 0), 0); // 2 ranks
        CHECK_EQ_INT(inter_case_grouped(act, 33, 26, 9, 128, 479, 0, 0), 0);  // 3 ranks: 9 + 9 + 8
        CHECK_EQ_INT(inter_case_grouped(act, 40, 26, 4, 128, 480, 1, 1), 0);  // 8 ranks: 4 x 6 + 2, ints
        CHECK_EQ_INT(inter_case_grouped(act, 17, 26, 1, 16, 367, 1, 0), 0);   // a table a group
        CHECK_EQ_INT(inter_case_grouped(act, 17, 5, 2, 13, 29, 1, 0), 0);     // generic bwd, scalar staging
        CHECK_EQ_INT(inter_case_grouped(act, 9, 4, 3, 16, 26, 0, 1), 0);      // generic bwd, vector staging
    }
    tk_err e = {0}; // G outside [1, T]
    CHECK_EQ_INT(tk_interaction_fwd_act(gt_ctx_, TK_F32, NULL, NULL, 1, 26, 27, 128, 480, NULL, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_interaction_bwd_act(gt_ctx_, TK_BF16, NULL, NULL, NULL, 1, 26, 0, 128, 480, 1, NULL, NULL, &e),
                 TK_EINTERNAL);
}

TK_TEST(interaction_width_too_small) {
    tk_err e = {0};
    CHECK_EQ_INT(tk_interaction_fwd(gt_ctx_, NULL, NULL, 1, 26, 128, 478, NULL, &e), TK_EINTERNAL);
}

typedef struct { void *bot, *emb, *out, *dout, *dbot, *demb; int bwd, G; tk_dtype act; } ibench;
static void ibench_run(void *p) {
    ibench *b = p;
    tk_err e = {0};
    int rc = b->bwd ? tk_interaction_bwd_act(gt_ctx_, b->act, b->bot, b->emb, b->dout, 65536, 26, b->G, 128, 480, 1,
                                             b->dbot, b->demb, &e)
                    : tk_interaction_fwd_act(gt_ctx_, b->act, b->bot, b->emb, 65536, 26, b->G, 128, 480, b->out, &e);
    if (rc) gt_die_("interaction bench", &e);
}
TK_TEST(interaction_bench) {
    (void)tk_failed_;
    if (!getenv("TK_OPS_BENCH")) return;
    size_t B = 65536, ns = 28; // emb slots a sample: 26, or 28 grouped by 4 (8 ranks: 6 x 4 + 2)
    ibench b = {gt_dev(4 * B * 128), gt_dev(4 * B * ns * 128), gt_dev(4 * B * 480), gt_dev(4 * B * 480),
                gt_dev(4 * B * 128), gt_dev(4 * B * ns * 128), 0, 26, TK_F32};
    gt_poison(b.bot, 4 * B * 128, 0x3c), gt_poison(b.emb, 4 * B * ns * 128, 0x3d), gt_poison(b.dout, 4 * B * 480, 0x3c);
    double fb = 4.0 * B * (27 * 128 + 480), bb = 4.0 * B * (2 * 27 * 128 + 480);
    // The plain layout (G = 26), then the grouped one as 2 and 8 ranks read the all-to-all buffer.
    static const int groups[] = {26, 13, 4};
    for (int k = 0; k < 3; k++)
        for (int a = 0; a < 2; a++) { // f32, then everything in bf16 (half the bytes)
            b.G = groups[k], b.act = a ? TK_BF16 : TK_F32, b.bwd = 0;
            double f = gt_time_ms(ibench_run, &b, 11);
            b.bwd = 1;
            double g = gt_time_ms(ibench_run, &b, 11);
            double s = a ? 0.5 : 1;
            char grp[16] = "";
            if (b.G != 26) snprintf(grp, sizeof grp, " G %d", b.G);
            printf("# table bench interaction %s%s fwd B 65536: %.3f ms (%.0f GB/s); bwd %.3f ms (%.0f GB/s)\n",
                   tk_dtype_name(b.act), grp, f, s * fb / f / 1e6, g, s * bb / g / 1e6);
        }
    void *dev[] = {b.bot, b.emb, b.out, b.dout, b.dbot, b.demb};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
}
