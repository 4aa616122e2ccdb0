// kernels/interaction.cu against kernels/interaction_ref.c: forward and backward (with and
// without the bottom ReLU), the MLPerf shape (T 26, D 128, W 480 padded) and a small odd one,
// random and small-integer inputs; bit for bit (both sum products in fp64 in the same order).
// TK_OPS_BENCH=1 also times the MLPerf shape at batch 65536.
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
TK_TEST(interaction_ints_exact) {
    CHECK_EQ_INT(inter_case(40, 26, 128, 480, 1, 1), 0);
    CHECK_EQ_INT(inter_case(9, 4, 16, 26, 1, 0), 0);
}
// The bf16-activation variants (tk_interaction_{fwd,bwd}_act with TK_BF16) against their
// references (widen, the f32 reference, round): bot and dout rounded to bf16 first; bf16 rel err
// <= 1e-2 (both round the same fp64 sums, so the difference is at most an ulp of bf16 anywhere).
static int inter_case_bf16(int B, int T, int D, int W, int relu) {
    size_t nb = (size_t)B * D, ne = (size_t)B * T * D, no = (size_t)B * W;
    float *bot = gt_host(4 * nb), *emb = gt_host(4 * ne), *dout = gt_host(4 * no);
    float *outr = gt_host(4 * no), *outg = gt_host(4 * no), *dbr = gt_host(4 * nb), *dbg = gt_host(4 * nb);
    float *der = gt_host(4 * ne), *deg = gt_host(4 * ne);
    uint16_t *hb = gt_host(2 * nb), *hd = gt_host(2 * no), *ho = gt_host(2 * no), *hdb = gt_host(2 * nb);
    gt_fill(bot, nb, -1, 1, 0), gt_fill(emb, ne, -1, 1, 0), gt_fill(dout, no, -1, 1, 0);
    for (size_t i = 0; i < nb; i++) hb[i] = tk_f32_to_bf16(bot[i]);
    for (size_t i = 0; i < no; i++) hd[i] = tk_f32_to_bf16(dout[i]);
    tk_err e = {0};
    if (tk_interaction_fwd_act_ref(TK_BF16, hb, emb, B, T, D, W, ho, &e) ||
        tk_interaction_bwd_act_ref(TK_BF16, hb, emb, hd, B, T, D, W, relu, hdb, der, &e))
        gt_die_("interaction bf16 ref", &e);
    for (size_t i = 0; i < no; i++) outr[i] = tk_bf16_to_f32(ho[i]);
    for (size_t i = 0; i < nb; i++) dbr[i] = tk_bf16_to_f32(hdb[i]);
    void *d_bot = gt_dev(2 * nb), *d_dout = gt_dev(2 * no), *d_out = gt_dev(2 * no), *d_dbot = gt_dev(2 * nb);
    float *d_emb = gt_dev(4 * ne), *d_demb = gt_dev(4 * ne);
    gt_up_as(d_bot, bot, nb, TK_BF16), gt_up(d_emb, emb, 4 * ne), gt_up_as(d_dout, dout, no, TK_BF16);
    gt_poison(d_out, 2 * no, 0xff), gt_poison(d_dbot, 2 * nb, 0xff), gt_poison(d_demb, 4 * ne, 0xff);
    if (tk_interaction_fwd_act(gt_ctx_, TK_BF16, d_bot, d_emb, B, T, D, W, d_out, &e) ||
        tk_interaction_bwd_act(gt_ctx_, TK_BF16, d_bot, d_emb, d_dout, B, T, D, W, relu, d_dbot, d_demb, &e) ||
        gt_sync(&e))
        gt_die_("interaction bf16 cuda", &e);
    gt_down_as(outg, d_out, no, TK_BF16), gt_down_as(dbg, d_dbot, nb, TK_BF16), gt_down(deg, d_demb, 4 * ne);
    double rf = gt_relerr(outg, outr, no), rb = gt_relerr(dbg, dbr, nb), re = gt_relerr(deg, der, ne);
    printf("# table interaction bf16   B %3d T %2d D %3d W %3d relu %d: rel err fwd %.1e dbot %.1e demb %.1e "
           "(differing %zu %zu %zu)\n", B, T, D, W, relu, rf, rb, re, gt_ndiff(outg, outr, no), gt_ndiff(dbg, dbr, nb),
           gt_ndiff(deg, der, ne));
    void *dev[] = {d_bot, d_emb, d_dout, d_out, d_dbot, d_demb};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
    free(bot), free(emb), free(dout), free(outr), free(outg), free(dbr), free(dbg), free(der), free(deg);
    free(hb), free(hd), free(ho), free(hdb);
    return !(rf <= 1e-2 && rb <= 1e-2 && re <= 1e-2);
}

TK_TEST(interaction_bf16_activations) {
    CHECK_EQ_INT(inter_case_bf16(64, 26, 128, 480, 1), 0);
    CHECK_EQ_INT(inter_case_bf16(33, 26, 16, 367, 0), 0);
    CHECK_EQ_INT(inter_case_bf16(17, 3, 13, 24, 1), 0);
}

TK_TEST(interaction_width_too_small) {
    tk_err e = {0};
    CHECK_EQ_INT(tk_interaction_fwd(gt_ctx_, NULL, NULL, 1, 26, 128, 478, NULL, &e), TK_EINTERNAL);
}

typedef struct { float *bot, *emb, *out, *dout, *dbot, *demb; int bwd; } ibench;
static void ibench_run(void *p) {
    ibench *b = p;
    tk_err e = {0};
    int rc = b->bwd ? tk_interaction_bwd(gt_ctx_, b->bot, b->emb, b->dout, 65536, 26, 128, 480, 1, b->dbot, b->demb, &e)
                    : tk_interaction_fwd(gt_ctx_, b->bot, b->emb, 65536, 26, 128, 480, b->out, &e);
    if (rc) gt_die_("interaction bench", &e);
}
TK_TEST(interaction_bench) {
    (void)tk_failed_;
    if (!getenv("TK_OPS_BENCH")) return;
    size_t B = 65536;
    ibench b = {gt_dev(4 * B * 128), gt_dev(4 * B * 26 * 128), gt_dev(4 * B * 480), gt_dev(4 * B * 480),
                gt_dev(4 * B * 128), gt_dev(4 * B * 26 * 128), 0};
    gt_poison(b.bot, 4 * B * 128, 0x3c), gt_poison(b.emb, 4 * B * 26 * 128, 0x3d), gt_poison(b.dout, 4 * B * 480, 0x3c);
    double f = gt_time_ms(ibench_run, &b, 11);
    b.bwd = 1;
    double g = gt_time_ms(ibench_run, &b, 11);
    double fb = 4.0 * B * (27 * 128 + 480), bb = 4.0 * B * (2 * 27 * 128 + 480);
    printf("# table bench interaction fwd B 65536: %.3f ms (%.0f GB/s); bwd %.3f ms (%.0f GB/s)\n", f, fb / f / 1e6, g,
           bb / g / 1e6);
    void *dev[] = {b.bot, b.emb, b.out, b.dout, b.dbot, b.demb};
    for (int i = 0; i < 6; i++) tk_free(gt_ctx_, dev[i]);
}
