// The RNN-T model (lib/workloads/rnnt/model.c) on the cpu backend:
// - its tensors: the reference's state-dict names and shapes, and the parameter count of the
//   reference's torch model at its sizes (49,006,080: computed in torch, contrib/peers/rnnt.py
//   --count prints it; tests/cli/rnnt-peer.bats checks the two agree);
// - the reference's init (common/rnn.py with train.py's weights_init_scale 0.5: forget rows of
//   bias_ih 1.0 x 0.5, of bias_hh 0; every LSTM value within 0.5/sqrt(H); the Linears within
//   1/sqrt(in));
// - one training step's gradients (with and without dropout) against central finite differences
//   of its fp64 accumulated loss, along a random direction in each tensor;
// - the greedy decoder (decode.c) on hand-set models whose hypotheses are known.
// TK_RNNT_DRIVE=step prints a tiny model's weights, batch, loss and gradients for
// contrib/peers/rnnt.py --compare (format in drive() below).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "rnnt_case.h"
#include "tk_drive.h"
#include "tk_test.h"
#include "tk_test_cpu.h"
#include "workloads/rnnt/decode.h"

static rnnt_case *make(const rnnt_model_cfg *cfg, tk_err *e) { return rc_make(tk_test_cpu(), cfg, 5, e); }

static const tk_param *find(const rnnt_case *k, const char *name) {
    int i = tk_params_find(&k->P, name);
    return i < 0 ? NULL : &k->P.p[i];
}

TK_TEST(reference_count) {
    rnnt_model_cfg c = rnnt_model_cfg_default(1, 8, 4);
    CHECK_EQ_INT(rnnt_model_ref_count(&c), 49006080);
}

TK_TEST(tensors_as_the_reference) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(2, 5, 3);
    rnnt_case *k = make(&c, &e);
    CHECK(k);
    if (!k) return;
    CHECK_EQ_INT(rnnt_model_param_count(k->m), rnnt_model_ref_count(&c));
    // 4 tensors per LSTM layer (2 + 2 + 2) + embed + 3 Linears of 2
    CHECK_EQ_INT(k->P.n, 4 * 6 + 1 + 6);
    static const struct { const char *name; int64_t d0, d1; } want[] = {
        {"encoder.pre_rnn.lstm.weight_ih_l0", 32, 6},  {"encoder.pre_rnn.lstm.weight_hh_l1", 32, 8},
        {"encoder.pre_rnn.lstm.bias_hh_l1", 32, 0},    {"encoder.post_rnn.lstm.weight_ih_l0", 32, 16},
        {"encoder.post_rnn.lstm.weight_ih_l1", 32, 8}, {"prediction.embed.weight", 4, 6},
        {"prediction.dec_rnn.lstm.weight_ih_l0", 24, 6}, {"prediction.dec_rnn.lstm.bias_ih_l1", 24, 0},
        {"joint_pred.weight", 7, 6},                   {"joint_pred.bias", 7, 0},
        {"joint_enc.weight", 7, 8},                    {"joint_net.2.weight", 5, 7},
        {"joint_net.2.bias", 5, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const tk_param *p = find(k, want[i].name);
        CHECK(p);
        if (!p) continue;
        CHECK_EQ_INT(p->ndim, want[i].d1 ? 2 : 1);
        CHECK_EQ_INT(p->shape[0], want[i].d0);
        if (want[i].d1) CHECK_EQ_INT(p->shape[1], want[i].d1);
        CHECK(p->flags & TK_PARAM_DENSE);
    }
    CHECK(find(k, "joint_net.0.weight") == NULL);
    rc_free(k);
}

TK_TEST(init_as_the_reference) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(2, 5, 3);
    c.enc_n_hid = 64; // enough values to see the bounds reached
    rnnt_case *k = make(&c, &e);
    CHECK(k);
    if (!k) return;
    const int H = 64;
    const float *bi = find(k, "encoder.post_rnn.lstm.bias_ih_l1")->w;
    const float *bh = find(k, "encoder.post_rnn.lstm.bias_hh_l1")->w;
    const float *wi = find(k, "encoder.post_rnn.lstm.weight_ih_l0")->w;
    int forget_ok = 1, hh_ok = 1;
    for (int j = H; j < 2 * H; j++) forget_ok &= bi[j] == 0.5f, hh_ok &= bh[j] == 0.0f;
    CHECK(forget_ok);
    CHECK(hh_ok);
    const float a = 0.5f / sqrtf((float)H);
    float mx = 0;
    for (int j = 0; j < 4 * H * 2 * H; j++) mx = fabsf(wi[j]) > mx ? fabsf(wi[j]) : mx;
    CHECK(mx <= a && mx > 0.95f * a);
    float mb = 0;
    for (int j = 0; j < 4 * H; j++)
        if (j < H || j >= 2 * H) mb = fabsf(bi[j]) > mb ? fabsf(bi[j]) : mb;
    CHECK(mb <= a && mb > 0.8f * a);
    const float *je = find(k, "joint_enc.weight")->w; // Linear(64, 7): 1/sqrt(64)
    float mj = 0;
    for (int j = 0; j < 7 * H; j++) mj = fabsf(je[j]) > mj ? fabsf(je[j]) : mj;
    CHECK(mj <= 0.125f && mj > 0.11f);
    const tk_param *em = find(k, "prediction.embed.weight");
    double s2 = 0;
    for (int64_t j = 0; j < tk_param_numel(em); j++) s2 += (double)((float *)em->w)[j] * ((float *)em->w)[j];
    CHECK(s2 / (double)tk_param_numel(em) > 0.3 && s2 / (double)tk_param_numel(em) < 3); // N(0, 1)
    rc_free(k);
}

// Central differences of the loss along a random direction of each tensor vs the gradient's dot.
static void fd_case(int *tk_failed_, int train) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(3, 7, 4);
    rnnt_case *k = make(&c, &e);
    CHECK(k);
    if (!k) return;
    CHECK(!rc_batch(k, 7, 4, 99, &e));
    const double l0 = rc_step(k, 3, train, &e);
    CHECK(isfinite(l0) && l0 > 0);
    const size_t n = k->P.dense_n;
    float *g = malloc(n * 4), *w0 = malloc(n * 4);
    memcpy(g, k->P.dense_g, n * 4);
    memcpy(w0, k->P.dense_w, n * 4);
    for (int i = 0; i < k->P.ndense; i++) {
        const tk_param *p = &k->P.p[i];
        const size_t o = (size_t)((float *)p->w - k->P.dense_w), cnt = (size_t)tk_param_numel(p);
        double dot = 0;
        float *d = malloc(cnt * 4);
        for (size_t j = 0; j < cnt; j++)
            d[j] = 2 * tk_philox_uniform(17, (uint32_t)i, j) - 1, dot += (double)g[o + j] * d[j];
        const double h = 1e-3;
        double lp, lm;
        for (size_t j = 0; j < cnt; j++) k->P.dense_w[o + j] = (float)(w0[o + j] + h * d[j]);
        lp = rc_step(k, 3, train, &e);
        for (size_t j = 0; j < cnt; j++) k->P.dense_w[o + j] = (float)(w0[o + j] - h * d[j]);
        lm = rc_step(k, 3, train, &e);
        memcpy(k->P.dense_w + o, w0 + o, cnt * 4);
        const double fd = (lp - lm) / (2 * h);
        if (getenv("RC_DEBUG")) printf("# %s %.8g %.8g\n", p->name, fd, dot);
        if (!(fabs(fd - dot) <= 1e-5 + 5e-3 * fabs(dot))) {
            printf("#   %s: directional derivative %.8g, gradient %.8g\n", p->name, fd, dot);
            *tk_failed_ = 1;
        }
        free(d);
    }
    free(g), free(w0);
    rc_free(k);
}

TK_TEST(gradients_finite_differences) { fd_case(tk_failed_, 0); }
TK_TEST(gradients_finite_differences_dropout) { fd_case(tk_failed_, 1); }

// Dropout on changes the loss; the same update counter gives the same loss, another one another.
TK_TEST(dropout_masks_follow_the_counter) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(3, 7, 4);
    rnnt_case *k = make(&c, &e);
    CHECK(k);
    if (!k) return;
    CHECK(!rc_batch(k, 7, 4, 5, &e));
    const double a = rc_step(k, 1, 1, &e), b = rc_step(k, 1, 1, &e), d = rc_step(k, 2, 1, &e), z = rc_step(k, 1, 0, &e);
    CHECK(isfinite(a) && a == b);
    CHECK(a != d && a != z);
    rc_free(k);
}

// Each rank draws its own dropout masks (model.h: rank r's elements from r drop_stride on): the
// same weights and batch on rank 1 of 2 give another loss than on rank 0 with dropout on (every
// rank drew rank 0's masks before), the same loss without it; rank 0 of 2 is the one-rank model.
TK_TEST(dropout_masks_per_rank) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(3, 7, 4);
    rnnt_case *k0 = rc_make_rank(tk_test_cpu(), &c, 5, 0, 2, &e), *k1 = rc_make_rank(tk_test_cpu(), &c, 5, 1, 2, &e),
              *k = make(&c, &e);
    CHECK(k0 && k1 && k);
    if (k0 && k1 && k) {
        CHECK(!rc_batch(k0, 7, 4, 5, &e) && !rc_batch(k1, 7, 4, 5, &e) && !rc_batch(k, 7, 4, 5, &e));
        const double a0 = rc_step(k0, 1, 1, &e), a1 = rc_step(k1, 1, 1, &e), a = rc_step(k, 1, 1, &e);
        const double z0 = rc_step(k0, 1, 0, &e), z1 = rc_step(k1, 1, 0, &e);
        CHECK(isfinite(a0) && isfinite(a1) && isfinite(z0));
        CHECK(a0 != a1);
        CHECK(a0 == a);
        CHECK(z0 == z1 && z0 != a0);
        CHECK(k1->m->drop_offset > 0);
    }
    rc_free(k0), rc_free(k1), rc_free(k);
}

// A step padded to fixed extents (the captured step's plan: frames, labels and the joint's rows
// rounded up, garbage in the padded frames' features) gives the unpadded step's loss and every
// gradient bit for bit, with and without dropout, for an odd and an even frame count.
static void padded_case(int *tk_failed_, int T, int train) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(3, 12, 6);
    rnnt_case *k = make(&c, &e);
    CHECK(k);
    if (!k) return;
    CHECK(!rc_batch(k, T, 3, 41, &e));
    const double l0 = rc_step(k, 2, train, &e);
    const size_t n = k->P.dense_n;
    float *g0 = malloc(n * 4), *g1 = malloc(n * 4);
    CHECK(!rc_get(k, 1, g0, &e));
    // the padded frames of the features: anything finite (the LSTMs are causal, and cut off at T)
    float *junk = malloc((size_t)(12 - T) * 3 * 6 * 4);
    for (int i = 0; i < (12 - T) * 3 * 6; i++) junk[i] = 3.0f - (float)(i % 7);
    CHECK(!tk_memcpy_h2d(k->c, k->m->feat + (size_t)T * 3 * 6, junk, (size_t)(12 - T) * 3 * 6 * 4, 0, &e));
    const rnnt_plan_pad pad = {4, 4, 3};
    rnnt_plan_shape s;
    const double l1 = rc_step_plan(k, 2, train, &pad, &s, &e);
    CHECK(!rc_get(k, 1, g1, &e));
    CHECK_EQ_INT(s.T, T);
    CHECK_EQ_INT(s.Tp, (T + 3) / 4 * 4);
    CHECK_EQ_INT(s.U, 3);
    CHECK_EQ_INT(s.Up, 4);
    CHECK(s.rows_cap > s.rows && s.key >= 0);
    CHECK(isfinite(l0) && l0 > 0);
    CHECK(l0 == l1);
    size_t diff = 0;
    for (size_t i = 0; i < n; i++) diff += memcmp(&g0[i], &g1[i], 4) != 0;
    if (diff) printf("# T %d train %d: %zu gradient values differ\n", T, train, diff);
    CHECK_EQ_INT((long long)diff, 0);
    free(g0), free(g1), free(junk);
    rc_free(k);
}

TK_TEST(padded_step_is_the_step) {
    padded_case(tk_failed_, 7, 0);
    padded_case(tk_failed_, 7, 1);
    padded_case(tk_failed_, 6, 1);
}

TK_TEST(bad_batch_is_an_error) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(2, 5, 3);
    rnnt_case *k = make(&c, &e);
    CHECK(k);
    if (!k) return;
    CHECK(!rc_batch(k, 5, 3, 5, &e));
    k->labels[1] = 4; // the blank (V - 1)
    CHECK(isnan(rc_step(k, 0, 0, &e)));
    CHECK_EQ_INT(e.code, TK_EINTERNAL);
    rc_free(k);
}


// ---- greedy decoding on hand-set models ----

// joint_net.2 zeroed, its bias b: the logits are b whatever the input.
static void set_out_bias(rnnt_case *k, const float *b) {
    const tk_param *w = find(k, "joint_net.2.weight"), *bb = find(k, "joint_net.2.bias");
    memset(w->w, 0, tk_param_bytes(w));
    memcpy(bb->w, b, tk_param_bytes(bb));
}

static int decode(rnnt_case *k, int per_step, int cap, int32_t *hyp, int32_t *n, tk_err *e) {
    rnnt_decoder *d;
    if (rnnt_decoder_create(k->m, per_step, cap, 1, &d, e)) return -1;
    int rc = rnnt_decode(d, k->T, k->feat_len, hyp, n, e);
    rnnt_decoder_destroy(d);
    return rc;
}

// A symbol always wins: max_per_step of it a frame until the cap; the blank always: nothing.
TK_TEST(decode_limits_exact) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(3, 9, 4);
    rnnt_case *k = make(&c, &e);
    CHECK(k);
    if (!k) return;
    CHECK(!rc_batch(k, 9, 4, 8, &e));
    k->feat_len[0] = 9, k->feat_len[1] = 4, k->feat_len[2] = 1; // 5, 2, 1 encoder frames
    const float sym2[5] = {0, 0, 3, 0, 1}, blank[5] = {0, 1, 0, 0, 2};
    int32_t hyp[3 * 12], n[3];
    set_out_bias(k, sym2);
    CHECK(!decode(k, 3, 12, hyp, n, &e));
    CHECK_EQ_INT(n[0], 12); // 5 frames x 3 > 12: the cap
    CHECK_EQ_INT(n[1], 6);  // 2 frames x 3
    CHECK_EQ_INT(n[2], 3);
    int all2 = 1;
    for (int b = 0; b < 3; b++)
        for (int i = 0; i < n[b]; i++) all2 &= hyp[b * 12 + i] == 2;
    CHECK(all2);
    // 10 a frame, cap 100: 50 iterations, past the first look at the state (RNNT_DECODE_CHECK)
    int32_t hyp100[3 * 100];
    CHECK(!decode(k, 10, 100, hyp100, n, &e));
    CHECK(n[0] == 50 && n[1] == 20 && n[2] == 10);
    CHECK(hyp100[49] == 2 && hyp100[100 + 19] == 2 && hyp100[200 + 9] == 2);
    set_out_bias(k, blank);
    CHECK(!decode(k, 3, 12, hyp, n, &e));
    CHECK(n[0] == 0 && n[1] == 0 && n[2] == 0);
    rc_free(k);
}

// A hand-set prediction network whose state carries the labels: the logits are bias (0, 3, 0, 0, 1)
// (symbol 1 over the blank 4) plus h0 x 10 for symbol 0 and minus it for symbol 1, h0 the
// prediction network's unit 0. Label 1's embedding drives unit 0's cell to 1 (input and output
// gates open, candidate tanh(8)); other labels feed zeros, the forget gate (sigmoid(0)) halves the
// cell each step (the logits of symbol 0, 1: 10 h0, 3 - 10 h0, the blank's 1). By hand, 3 symbols a
// frame, 2 frames: start, c = 0: 1 wins; input 1: c = 1, 10 h0 = 7.6: 0; input 0: c = 1/2, 4.6: 0
// (3 symbols: the next frame); c = 1/4, 2.4: 0; c = 1/8, 1.24: 1 (1.76); input 1: c = 1.06, 7.9:
// 0, the third symbol of the last frame. Hypothesis 1 0 0 0 1 0; capped at 4: 1 0 0 0; 2 symbols
// a frame: 1 0 | 0 0.
TK_TEST(decode_follows_the_prediction_state) {
    tk_err e = {0};
    rnnt_model_cfg c = rc_tiny(1, 4, 2);
    c.pred_rnn_layers = 1;
    rnnt_case *k = make(&c, &e);
    CHECK(k);
    if (!k) return;
    CHECK(!rc_batch(k, 4, 2, 8, &e));
    k->feat_len[0] = 4; // 2 encoder frames
    const char *zero[] = {"prediction.dec_rnn.lstm.weight_ih_l0", "prediction.dec_rnn.lstm.weight_hh_l0",
                          "prediction.dec_rnn.lstm.bias_ih_l0", "prediction.dec_rnn.lstm.bias_hh_l0",
                          "prediction.embed.weight", "joint_pred.weight", "joint_pred.bias", "joint_enc.weight",
                          "joint_enc.bias", "joint_net.2.weight"};
    for (size_t i = 0; i < sizeof zero / sizeof zero[0]; i++)
        memset(find(k, zero[i])->w, 0, tk_param_bytes(find(k, zero[i])));
    const int P = 6, J = 7;
    float *emb = find(k, "prediction.embed.weight")->w, *wih = find(k, "prediction.dec_rnn.lstm.weight_ih_l0")->w;
    float *bih = find(k, "prediction.dec_rnn.lstm.bias_ih_l0")->w, *jpw = find(k, "joint_pred.weight")->w;
    float *ow = find(k, "joint_net.2.weight")->w, *ob = find(k, "joint_net.2.bias")->w;
    emb[1 * P + 0] = 8;           // label 1's row
    bih[0 * P + 0] = 10;          // unit 0's input gate open
    bih[3 * P + 0] = 10;          // its output gate open
    wih[(2 * P + 0) * P + 0] = 1; // its candidate: tanh(input 0)
    jpw[0 * P + 0] = 10;          // joint unit 0 = 10 h0
    const float bias[5] = {0, 3, 0, 0, 1};
    memcpy(ob, bias, sizeof bias);
    ow[0 * J + 0] = 1, ow[1 * J + 0] = -1;
    int32_t hyp[10], n[1];
    CHECK(!decode(k, 3, 10, hyp, n, &e));
    CHECK_EQ_INT(n[0], 6);
    const int want[6] = {1, 0, 0, 0, 1, 0};
    for (int i = 0; i < 6 && i < n[0]; i++) CHECK_EQ_INT(hyp[i], want[i]);
    CHECK(!decode(k, 3, 4, hyp, n, &e));
    CHECK_EQ_INT(n[0], 4);
    for (int i = 0; i < 4 && i < n[0]; i++) CHECK_EQ_INT(hyp[i], want[i]);
    CHECK(!decode(k, 2, 10, hyp, n, &e));
    CHECK_EQ_INT(n[0], 4);
    for (int i = 0; i < 4 && i < n[0]; i++) CHECK_EQ_INT(hyp[i], want[i]);
    rc_free(k);
}

// ---- the driver for contrib/peers/rnnt.py ----
// Output, one block per array: "NAME COUNT" then COUNT lines of values: cfg (in_feats E pre post
// P pred J V B T U), feat_len, lab_len, labels (B U), feat (T B I), then every tensor by its
// name, then "loss 1" (scale 1 / B), then "grad.NAME" of every tensor; with dropout (the step's
// counter 3) the masks, "mask.SITE COUNT": the factor of each element of the site's tensor
// (pre_rnn's and post_rnn's outputs (T, B, E) per layer, dec_rnn's (U + 1, B, P), the joint's
// packed rows (rows, J)).
static void print_arr(const char *name, const float *v, size_t n) {
    printf("%s %zu\n", name, n);
    for (size_t i = 0; i < n; i++) printf("%.9g\n", v[i]);
}
static void print_int(const char *name, const int *v, size_t n) {
    printf("%s %zu\n", name, n);
    for (size_t i = 0; i < n; i++) printf("%d\n", v[i]);
}
static void print_weights(const rnnt_case *k) {
    for (int i = 0; i < k->P.ndense; i++)
        print_arr(k->P.p[i].name, k->P.p[i].w, (size_t)tk_param_numel(&k->P.p[i]));
}
static void print_mask(const rnnt_model *m, float p, uint32_t site, size_t n) {
    tk_dropout d = {p, m->cfg.seed, site, m->step, 0};
    const uint32_t th = tk_dropout_thresh(p);
    printf("mask.%u %zu\n", site, n);
    for (size_t i = 0; i < n; i++) printf("%.9g\n", tk_dropout_factor(&d, th, *m->step, (int64_t)i));
}

// TK_RNNT_DRIVE=decode: cfg, feat_len, feat, the tensors, "limits 2" (symbols a frame, a
// hypothesis), "n B" and "hyp B cap": the greedy decoder's hypotheses (4 utterances, 11 frames;
// measured: 9, 10 (the cap), 6 and 9 symbols, frames ended by the blank and by the 3 a frame).
static int drive_decode(tk_err *e) {
    rnnt_model_cfg c = rc_tiny(4, 11, 1);
    c.enc_post_rnn_layers = 3;
    rnnt_case *k = rc_make(tk_test_cpu(), &c, 23, e);
    if (!k) return e->code ? e->code : TK_EINTERNAL;
    const int per_step = 3, cap = 10, B = c.b;
    int32_t hyp[4 * 10], n[4];
    int rc = rc_decode_weights(k, 41, e);
    if (!rc) rc = rc_batch(k, 11, 1, 31, e);
    if (!rc) rc = decode(k, per_step, cap, hyp, n, e);
    if (!rc) {
        const int cfgv[] = {c.in_feats, c.enc_n_hid, c.enc_pre_rnn_layers, c.enc_post_rnn_layers, c.pred_n_hid,
                            c.pred_rnn_layers, c.joint_n_hid, c.n_classes, B, k->T, 0};
        const int lim[2] = {per_step, cap};
        print_int("cfg", cfgv, sizeof cfgv / sizeof cfgv[0]);
        print_int("feat_len", k->feat_len, (size_t)B);
        print_arr("feat", k->feat, (size_t)k->T * B * c.in_feats);
        print_weights(k);
        print_int("limits", lim, 2);
        print_int("n", n, (size_t)B);
        print_int("hyp", hyp, (size_t)B * cap);
    }
    rc_free(k);
    return rc;
}

static int drive(const char *mode, tk_err *e) {
    if (!strcmp(mode, "decode")) return drive_decode(e);
    const int train = !strcmp(mode, "dropout");
    rnnt_model_cfg c = rc_tiny(3, 9, 4);
    c.enc_pre_rnn_layers = 2, c.enc_post_rnn_layers = 3;
    rnnt_case *k = rc_make(tk_test_cpu(), &c, 21, e);
    if (!k) return e->code ? e->code : TK_EINTERNAL;
    int rc = rc_batch(k, 9, 4, 77, e);
    const double loss = rc ? NAN : rc_step(k, 3, train, e);
    if (!rc && isnan(loss)) rc = e->code ? e->code : TK_EINTERNAL;
    if (!rc) {
        const rnnt_model *m = k->m;
        const int B = m->B, T = k->T, U = k->U, T2 = (T + 1) / 2;
        const int cfgv[] = {c.in_feats, c.enc_n_hid, c.enc_pre_rnn_layers, c.enc_post_rnn_layers, c.pred_n_hid,
                            c.pred_rnn_layers, c.joint_n_hid, c.n_classes, B, T, U};
        print_int("cfg", cfgv, sizeof cfgv / sizeof cfgv[0]);
        print_int("feat_len", k->feat_len, (size_t)B);
        print_int("lab_len", k->lab_len, (size_t)B);
        print_int("labels", k->labels, (size_t)B * U);
        print_arr("feat", k->feat, (size_t)T * B * m->I);
        print_weights(k);
        float lf = (float)loss;
        print_arr("loss", &lf, 1);
        for (int i = 0; i < k->P.ndense; i++) {
            char nm[TK_PARAM_NAME + 8];
            snprintf(nm, sizeof nm, "grad.%s", k->P.p[i].name);
            print_arr(nm, k->P.p[i].g, (size_t)tk_param_numel(&k->P.p[i]));
        }
        if (train) {
            for (int l = 0; l < c.enc_pre_rnn_layers; l++)
                print_mask(m, c.enc_dropout, m->site_pre + l, (size_t)T * B * m->E);
            for (int l = 0; l < c.enc_post_rnn_layers; l++)
                print_mask(m, c.enc_dropout, m->site_post + l, (size_t)T2 * B * m->E);
            for (int l = 0; l < c.pred_rnn_layers; l++)
                print_mask(m, c.pred_dropout, m->site_dec + l, (size_t)(U + 1) * B * m->P_);
            print_mask(m, c.joint_dropout, m->site_joint, (size_t)m->rows * m->J);
        }
    }
    rc_free(k);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *s = getenv("TK_RNNT_DRIVE");
    if (!s) return;
    tk_err e = {0};
    int rc = drive(s, &e);
    tk_drive_exit("test_rnnt_model", rc, &e);
}
