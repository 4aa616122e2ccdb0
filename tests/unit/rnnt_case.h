// The RNN-T model (lib/workloads/rnnt/model.h) outside the engine, for the unit and device tests:
// its parameters, activations, update counter and loss accumulator made here the way the engine
// makes them for a workload's create, a tiny configuration, and a random batch.
#ifndef TK_TESTS_RNNT_CASE_H
#define TK_TESTS_RNNT_CASE_H

#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "engine/dist.h"
#include "workloads/rnnt/model.h"

typedef struct rnnt_case {
    tk_ctx *c;
    tk_params P;
    tk_arena acts;
    int64_t *step;  // device
    double *acc;    // device (2)
    rnnt_model *m;
    // the batch (host)
    int T, U;
    int *feat_len, *lab_len, *labels;
    float *feat;    // (T, B, I)
} rnnt_case;

// A small model: every size different, so that a mixed-up dimension shows.
static inline rnnt_model_cfg rc_tiny(int b, int max_frames, int max_labels) {
    rnnt_model_cfg c = rnnt_model_cfg_default(b, max_frames, max_labels);
    c.in_feats = 6, c.enc_n_hid = 8, c.enc_pre_rnn_layers = 2, c.enc_post_rnn_layers = 2;
    c.pred_n_hid = 6, c.pred_rnn_layers = 2, c.joint_n_hid = 7, c.n_classes = 5;
    c.seed = 11;
    return c;
}

static inline void rc_free(rnnt_case *k) {
    if (!k) return;
    rnnt_model_destroy(k->m);
    tk_params_release(&k->P);
    tk_arena_release(k->c, &k->acts);
    if (k->step) tk_free(k->c, k->step);
    if (k->acc) tk_free(k->c, k->acc);
    free(k->feat_len), free(k->lab_len), free(k->labels), free(k->feat);
    free(k);
}

// The model of cfg on c, initialized from seed, as rank `rank` of `world` (the model reads only
// the rank and world of its env's dist: no collectives); NULL with e filled.
static inline rnnt_case *rc_make_rank(tk_ctx *c, const rnnt_model_cfg *cfg, uint64_t seed, int rank, int world,
                                      tk_err *e) {
    rnnt_case *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->c = c;
    tk_params_init(&k->P, c, 0);
    tk_wl_env env;
    memset(&env, 0, sizeof env);
    if (tk_malloc(c, (void **)&k->step, 8, e) || tk_malloc(c, (void **)&k->acc, 16, e) ||
        tk_memset0(c, k->step, 8, 0, e) || tk_memset0(c, k->acc, 16, 0, e))
        goto fail;
    env.c = c, env.params = &k->P, env.step = k->step, env.loss_acc = k->acc, env.acts = &k->acts;
    tk_dist dist;
    memset(&dist, 0, sizeof dist);
    dist.c = c, dist.rank = rank, dist.world = world;
    if (world > 1) env.dist = &dist;
    if (rnnt_model_create(cfg, &env, &k->m, e) || rnnt_model_init(k->m, seed, e)) goto fail;
    const int B = cfg->b;
    k->feat_len = calloc((size_t)B, sizeof(int)), k->lab_len = calloc((size_t)B, sizeof(int));
    k->labels = calloc((size_t)B * (cfg->max_labels + 1), sizeof(int));
    k->feat = calloc((size_t)cfg->max_frames * B * cfg->in_feats, sizeof(float));
    if (!k->feat_len || !k->lab_len || !k->labels || !k->feat) goto fail;
    return k;
fail:
    rc_free(k);
    return NULL;
}

// The model of cfg on c (one rank), initialized from seed; NULL with e filled.
static inline rnnt_case *rc_make(tk_ctx *c, const rnnt_model_cfg *cfg, uint64_t seed, tk_err *e) {
    return rc_make_rank(c, cfg, seed, 0, 1, e);
}

// A random batch of T frames and U labels from key (utterance 0 full length, the others random),
// its features uploaded into m->feat.
static inline int rc_batch(rnnt_case *k, int T, int U, uint64_t key, tk_err *e) {
    rnnt_model *m = k->m;
    const int B = m->B, I = m->I;
    k->T = T, k->U = U;
    for (int b = 0; b < B; b++) {
        k->feat_len[b] = b == 0 ? T : 1 + (int)(tk_philox_uniform(key, 1, (uint64_t)b) * T);
        k->lab_len[b] = b == 0 ? U : (int)(tk_philox_uniform(key, 2, (uint64_t)b) * (U + 1));
        for (int u = 0; u < U; u++)
            k->labels[(size_t)b * U + u] =
                u < k->lab_len[b] ? (int)(tk_philox_uniform(key, 3, (uint64_t)(b * U + u)) * (m->V - 1)) : 0;
    }
    for (size_t i = 0; i < (size_t)T * B * I; i++) k->feat[i] = 2 * tk_philox_uniform(key, 4, i) - 1;
    return tk_memcpy_h2d(k->c, m->feat, k->feat, (size_t)T * B * I * 4, 0, e);
}

static inline rnnt_step_batch rc_bt(const rnnt_case *k) {
    rnnt_step_batch bt = {k->T, k->U, k->feat_len, k->lab_len, k->labels};
    return bt;
}

// One step at update counter step; the loss (fp64, the accumulator's) or NAN.
static inline double rc_step(rnnt_case *k, int64_t step, int train, tk_err *e) {
    double acc[2] = {0, 0};
    rnnt_step_batch bt = rc_bt(k);
    if (tk_memcpy_h2d(k->c, k->step, &step, 8, 0, e) || tk_memcpy_h2d(k->c, k->acc, acc, 16, 0, e) ||
        rnnt_model_step(k->m, &bt, 1.0f / (float)k->m->B, train, e) || tk_ctx_sync(k->c, e) ||
        tk_memcpy_d2h(k->c, acc, k->acc, 16, 0, e))
        return NAN;
    return acc[0];
}

// One step of the batch padded by pad (rnnt_plan_fill; pad NULL: its own extents) through its plan
// in the backend's memory (rnnt_model_step_plan), the plan's extents into *s; the loss as rc_step.
static inline double rc_step_plan(rnnt_case *k, int64_t step, int train, const rnnt_plan_pad *pad, rnnt_plan_shape *s,
                                  tk_err *e) {
    double acc[2] = {0, 0}, out = NAN;
    rnnt_step_batch bt = rc_bt(k);
    const size_t n = rnnt_plan_bytes(&k->m->pd);
    void *h = malloc(n), *d = NULL;
    if (h && !rnnt_plan_fill(&k->m->pd, &bt, pad, h, s, e) && !tk_malloc(k->c, &d, n, e) &&
        !tk_memcpy_h2d(k->c, d, h, n, 0, e) && !tk_memcpy_h2d(k->c, k->step, &step, 8, 0, e) &&
        !tk_memcpy_h2d(k->c, k->acc, acc, 16, 0, e) &&
        !rnnt_model_step_plan(k->m, d, s, 1.0f / (float)k->m->B, train, e) && !tk_ctx_sync(k->c, e) &&
        !tk_memcpy_d2h(k->c, acc, k->acc, 16, 0, e))
        out = acc[0];
    if (d) tk_free(k->c, d);
    free(h);
    return out;
}

// The dense span (weights or gradients, alignment gaps included: P.dense_n floats) to the host.
static inline int rc_get(const rnnt_case *k, int grads, float *host, tk_err *e) {
    return tk_ctx_sync(k->c, e) ||
                   tk_memcpy_d2h(k->c, host, grads ? k->P.dense_g : k->P.dense_w, k->P.dense_n * 4, 0, e)
               ? e->code
               : 0;
}

// The decoding tests' model: every tensor redrawn N(0, 1) (key), the blank's output bias + 4. The
// init's small weights give a joint whose argmax hardly moves; these give hypotheses that change
// with the frame and the last label, with wide margins, and frames ended by the blank.
static inline int rc_decode_weights(rnnt_case *k, uint64_t key, tk_err *e) {
    float *w = malloc(k->P.dense_n * 4);
    if (!w) return tk_err_set(e, TK_EINTERNAL, "out of memory");
    memset(w, 0, k->P.dense_n * 4);
    for (int q = 0; q < k->P.ndense; q++) {
        const tk_param *p = &k->P.p[q];
        const size_t o = (size_t)p->off / 4 - (size_t)k->P.p[0].off / 4;
        for (int64_t j = 0; j < tk_param_numel(p); j++)
            w[o + (size_t)j] = (float)tk_philox_normal(key, (uint32_t)q, (uint64_t)j);
        if (q == k->m->p_out_b) w[o + (size_t)k->m->V - 1] += 4;
    }
    int rc =
        tk_memcpy_h2d(k->c, k->P.dense_w, w, k->P.dense_n * 4, 0, e) || tk_params_refresh_copy(&k->P, e) ? e->code : 0;
    free(w);
    return rc;
}

#endif
