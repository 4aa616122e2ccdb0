// The RNN-T model (lib/workloads/rnnt/model.c, decode.c) and kernels/rnnt_greedy on cuda against
// the cpu backend (the reference), on fresh random batches:
// - one training step, fp32, dropout on (the same Philox masks on both sides): the loss within
//   1e-5 relative and every gradient within 1e-5 norm-wise relative; bf16 activations against
//   the cpu's fp32 step: the loss within 1e-2, every gradient within 2e-2 norm-wise (the bf16
//   bound on gradients that pass five LSTM layers is a first guess: not yet measured);
// - greedy decoding: the same hypotheses (exactly) with and without the CUDA graph;
// - tk_rnnt_greedy_step on small-integer logits (ties: the first index wins on both sides) and a
//   random state: every state array and the prediction state exactly the reference's.
#include <math.h>
#include <string.h>

#include "../unit/rnnt_case.h"
#include "gpu_test.h"
#include "rnnt_greedy.h"
#include "workloads/rnnt/decode.h"

static tk_ctx *cpu_ctx(void) {
    static tk_ctx *c;
    tk_err e = {0};
    if (!c && tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    return c;
}

static rnnt_model_cfg cfg_of(int bf16) {
    rnnt_model_cfg c = rnnt_model_cfg_default(4, 13, 6);
    c.in_feats = 24, c.enc_n_hid = 32, c.enc_pre_rnn_layers = 2, c.enc_post_rnn_layers = 3;
    c.pred_n_hid = 24, c.pred_rnn_layers = 2, c.joint_n_hid = 20, c.n_classes = 17;
    c.seed = gt_seed_, c.bf16 = bf16;
    return c;
}

static rnnt_case *make(tk_ctx *c, const rnnt_model_cfg *cfg) {
    tk_err e = {0};
    rnnt_case *k = rc_make(c, cfg, gt_seed_ ^ 0x5eed, &e);
    if (!k) gt_die_("rnnt model", &e);
    return k;
}

static void step_case(int *tk_failed_, int bf16) {
    tk_err e = {0};
    rnnt_model_cfg cc = cfg_of(0), gc = cfg_of(bf16);
    rnnt_case *kc = make(cpu_ctx(), &cc), *kg = make(gt_ctx_, &gc);
    CHECK(!rc_batch(kc, 13, 6, gt_seed_, &e));
    CHECK(!rc_batch(kg, 13, 6, gt_seed_, &e));
    const double lc = rc_step(kc, 5, 1, &e), lg = rc_step(kg, 5, 1, &e);
    CHECK(isfinite(lc) && isfinite(lg));
    const double tol = bf16 ? 1e-2 : 1e-5, gtol = bf16 ? 2e-2 : 1e-5;
    printf("# loss cpu %.9g cuda %.9g\n", lc, lg);
    CHECK(fabs(lg - lc) <= tol * fabs(lc));
    float *gcpu = gt_host(kc->P.dense_n * 4), *gcu = gt_host(kg->P.dense_n * 4);
    CHECK(!rc_get(kc, 1, gcpu, &e));
    CHECK(!rc_get(kg, 1, gcu, &e));
    double worst = 0;
    for (int i = 0; i < kc->P.ndense; i++) {
        const tk_param *p = &kc->P.p[i];
        const size_t o = (size_t)((float *)p->w - kc->P.dense_w), n = (size_t)tk_param_numel(p);
        const double r = gt_relerr(gcu + o, gcpu + o, n);
        worst = r > worst ? r : worst;
        if (!(r <= gtol)) {
            printf("#   %s: gradient %.3g norm-wise relative\n", p->name, r);
            *tk_failed_ = 1;
        }
    }
    printf("# worst gradient %.3g\n", worst);
    free(gcpu), free(gcu);
    rc_free(kc), rc_free(kg);
}

TK_TEST(step_fp32_matches_cpu) { step_case(tk_failed_, 0); }
TK_TEST(step_bf16_near_cpu) { step_case(tk_failed_, 1); }

// 6 symbols a frame, 40 an utterance: up to 47 iterations, past the first look at the state
enum { CAPD = 40 };
static void decode_on(rnnt_case *k, int graph, int32_t *hyp, int32_t *n, int *tk_failed_) {
    tk_err e = {0};
    rnnt_decoder *d = NULL;
    CHECK(!rnnt_decoder_create(k->m, 6, CAPD, graph, &d, &e));
    if (d) CHECK(!rnnt_decode(d, k->T, k->feat_len, hyp, n, &e));
    rnnt_decoder_destroy(d);
}

TK_TEST(decode_matches_cpu) {
    tk_err e = {0};
    rnnt_model_cfg cc = cfg_of(0);
    rnnt_case *kc = make(cpu_ctx(), &cc), *kg = make(gt_ctx_, &cc);
    CHECK(!rc_decode_weights(kc, gt_seed_, &e) && !rc_decode_weights(kg, gt_seed_, &e));
    CHECK(!rc_batch(kc, 13, 6, gt_seed_ + 1, &e) && !rc_batch(kg, 13, 6, gt_seed_ + 1, &e));
    int32_t hc[4 * CAPD], nc[4], hg[4 * CAPD], ng[4], hn[4 * CAPD], nn[4];
    decode_on(kc, 0, hc, nc, tk_failed_);
    decode_on(kg, 1, hg, ng, tk_failed_);
    decode_on(kg, 0, hn, nn, tk_failed_);
    for (int b = 0; b < 4; b++) {
        printf("# utterance %d: %d symbols\n", b, nc[b]);
        CHECK_EQ_INT(ng[b], nc[b]);
        CHECK_EQ_INT(nn[b], nc[b]);
        for (int i = 0; i < nc[b] && i < CAPD; i++) {
            CHECK_EQ_INT(hg[b * CAPD + i], hc[b * CAPD + i]);
            CHECK_EQ_INT(hn[b * CAPD + i], hc[b * CAPD + i]);
        }
    }
    rc_free(kc), rc_free(kg);
}

// The op alone: random state, logits of small integers (many ties).
TK_TEST(greedy_step_matches_reference) {
    tk_err e = {0};
    enum { B = 7, V = 37, L = 2, H = 9, T2 = 5, CAP = 6 };
    int32_t Tn[B], label[B], t[B], sym[B], n[B], fidx[B], hyp[B * CAP];
    float lg[B * V], hn[L * B * H], cn[L * B * H], h[L * B * H], c[L * B * H];
    gt_fill(lg, B * V, -3, 3, 1);
    gt_fill(hn, L * B * H, -1, 1, 0), gt_fill(cn, L * B * H, -1, 1, 0);
    gt_fill(h, L * B * H, -1, 1, 0), gt_fill(c, L * B * H, -1, 1, 0);
    for (int b = 0; b < B; b++) {
        Tn[b] = 1 + (int)(gt_u32((uint64_t)b) % T2);
        t[b] = (int)(gt_u32((uint64_t)b + 100) % (unsigned)(Tn[b] + 1)); // some done already
        n[b] = (int)(gt_u32((uint64_t)b + 200) % (CAP + 1));
        sym[b] = (int)(gt_u32((uint64_t)b + 300) % 3);
        label[b] = (int)(gt_u32((uint64_t)b + 400) % V) - 1;
        fidx[b] = -7;
    }
    for (int i = 0; i < B * CAP; i++) hyp[i] = -5;
    lg[2 * V + V - 1] = 50; // utterance 2: the blank wins
    // the reference on copies
    int32_t rT[B], rl[B], rt[B], rs[B], rn[B], rf[B], rh[B * CAP];
    float rhh[L * B * H], rcc[L * B * H];
    memcpy(rT, Tn, sizeof Tn), memcpy(rl, label, sizeof label), memcpy(rt, t, sizeof t), memcpy(rs, sym, sizeof sym);
    memcpy(rn, n, sizeof n), memcpy(rf, fidx, sizeof fidx), memcpy(rh, hyp, sizeof hyp);
    memcpy(rhh, h, sizeof h), memcpy(rcc, c, sizeof c);
    tk_rnnt_greedy rs_ = {B, V, V - 1, L, H, T2, 3, CAP, rT, rl, rt, rs, rn, rf, rh};
    CHECK(!tk_rnnt_greedy_step_ref(TK_F32, &rs_, lg, hn, cn, rhh, rcc, &e));
    // cuda
    int32_t *dT = gt_dev(sizeof Tn), *dl = gt_dev(sizeof label), *dt = gt_dev(sizeof t), *ds = gt_dev(sizeof sym),
            *dn = gt_dev(sizeof n), *df = gt_dev(sizeof fidx), *dh = gt_dev(sizeof hyp);
    float *dlg = gt_dev(sizeof lg), *dhn = gt_dev(sizeof hn), *dcn = gt_dev(sizeof cn), *dhh = gt_dev(sizeof h),
          *dcc = gt_dev(sizeof c);
    gt_up(dT, Tn, sizeof Tn), gt_up(dl, label, sizeof label), gt_up(dt, t, sizeof t), gt_up(ds, sym, sizeof sym);
    gt_up(dn, n, sizeof n), gt_up(df, fidx, sizeof fidx), gt_up(dh, hyp, sizeof hyp), gt_up(dlg, lg, sizeof lg);
    gt_up(dhn, hn, sizeof hn), gt_up(dcn, cn, sizeof cn), gt_up(dhh, h, sizeof h), gt_up(dcc, c, sizeof c);
    tk_rnnt_greedy gs = {B, V, V - 1, L, H, T2, 3, CAP, dT, dl, dt, ds, dn, df, dh};
    CHECK(!tk_rnnt_greedy_step(gt_ctx_, TK_F32, &gs, dlg, dhn, dcn, dhh, dcc, &e));
    gt_down(label, dl, sizeof label), gt_down(t, dt, sizeof t), gt_down(sym, ds, sizeof sym), gt_down(n, dn, sizeof n);
    gt_down(fidx, df, sizeof fidx), gt_down(hyp, dh, sizeof hyp), gt_down(h, dhh, sizeof h), gt_down(c, dcc, sizeof c);
    CHECK(!memcmp(label, rl, sizeof label) && !memcmp(t, rt, sizeof t) && !memcmp(sym, rs, sizeof sym));
    CHECK(!memcmp(n, rn, sizeof n) && !memcmp(fidx, rf, sizeof fidx) && !memcmp(hyp, rh, sizeof hyp));
    CHECK(!memcmp(h, rhh, sizeof h) && !memcmp(c, rcc, sizeof c));
    void *all[] = {dT, dl, dt, ds, dn, df, dh, dlg, dhn, dcn, dhh, dcc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) tk_free(gt_ctx_, all[i]);
}
