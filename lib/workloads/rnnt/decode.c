// The RNN-T's greedy decoder (decode.h).
#include "decode.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lstm.h"
#include "rnnt.h"
#include "rows.h"

static size_t al(size_t x) { return (x + 255) & ~(size_t)255; }

static tk_lstm_shape step_shape(const rnnt_model *m) {
    tk_lstm_shape s = {m->cfg.pred_rnn_layers, 1, m->B, m->P_, m->P_, 0};
    return s;
}

int rnnt_decoder_create(rnnt_model *m, int max_per_step, int cap, int use_graph, rnnt_decoder **out, tk_err *e) {
    *out = NULL;
    if (max_per_step < 1 || cap < 1)
        return tk_err_set(e, TK_EUSAGE, "rnnt decode: %d symbols a frame, %d an utterance (want >= 1)", max_per_step,
                          cap);
    rnnt_decoder *d = calloc(1, sizeof *d);
    if (!d) return tk_err_errno(e, ENOMEM, "rnnt decode: out of memory");
    d->m = m, d->max_per_step = max_per_step, d->cap = cap;
    d->use_graph = use_graph && m->c->backend == TK_BACKEND_CUDA;
    const size_t es = m->t == TK_BF16 ? 2 : 4, B = (size_t)m->B, P = (size_t)m->P_, J = (size_t)m->J,
                 V = (size_t)m->V, L = (size_t)m->cfg.pred_rnn_layers;
    const tk_lstm_shape s = step_shape(m);
    const size_t sz[] = {B * P * es, B * P * es, B * J * es, B * J * es, B * J * es, B * V * es, L * B * P * 4,
                         L * B * P * 4, L * B * P * 4, L * B * P * 4, tk_lstm_ws_bytes(m->t, &s),
                         B * 4, B * 4, B * 4, (B + 1) * 8,
                         B * 4, B * 4, B * 4, B * 4, B * 4, B * (size_t)cap * 4};
    void **const dst[] = {&d->emb, &d->gp, &d->gj, &d->fcur, &d->hj, &d->logits, (void **)&d->h, (void **)&d->c,
                          (void **)&d->hn, (void **)&d->cn, &d->ws, (void **)&d->d_T, (void **)&d->d_one,
                          (void **)&d->d_zero, (void **)&d->d_row0, (void **)&d->st.label, (void **)&d->st.t,
                          (void **)&d->st.sym, (void **)&d->st.n, (void **)&d->st.fidx, (void **)&d->st.hyp};
    const int n = (int)(sizeof sz / sizeof sz[0]);
    size_t total = 0;
    for (int k = 0; k < n; k++) total += al(sz[k]);
    if (tk_malloc(m->c, &d->mem, total, e)) {
        free(d);
        return e->code;
    }
    size_t o = 0;
    for (int k = 0; k < n; k++) *dst[k] = (char *)d->mem + o, o += al(sz[k]);
    d->st.B = m->B, d->st.V = m->V, d->st.blank = m->V - 1, d->st.L = (int)L, d->st.H = m->P_;
    d->st.max_per_step = max_per_step, d->st.cap = cap, d->st.T = d->d_T;
    // the joint's lattice of one cell an utterance
    int32_t *one = malloc(B * 4), *zero = calloc(B, 4);
    int64_t *row0 = malloc((B + 1) * 8);
    int rc = !one || !zero || !row0 ? tk_err_errno(e, ENOMEM, "rnnt decode: out of memory") : 0;
    if (!rc) {
        for (size_t b = 0; b <= B; b++) row0[b] = (int64_t)b;
        for (size_t b = 0; b < B; b++) one[b] = 1;
        rc = tk_memcpy_h2d(m->c, d->d_one, one, B * 4, 0, e) || tk_memcpy_h2d(m->c, d->d_zero, zero, B * 4, 0, e) ||
                     tk_memcpy_h2d(m->c, d->d_row0, row0, (B + 1) * 8, 0, e)
                 ? e->code
                 : 0;
    }
    free(one), free(zero), free(row0);
    if (rc) {
        rnnt_decoder_destroy(d);
        return rc;
    }
    *out = d;
    return 0;
}

void rnnt_decoder_destroy(rnnt_decoder *d) {
    if (!d) return;
    tk_graph_destroy(&d->graph);
    if (d->mem) tk_free(d->m->c, d->mem);
    free(d);
}

// One iteration (decode.h), all of fixed shape.
static int iterate(rnnt_decoder *d, tk_err *e) {
    rnnt_model *m = d->m;
    const tk_dtype t = m->t;
    const int B = m->B, P = m->P_, J = m->J, V = m->V;
    const tk_lstm_shape s = step_shape(m);
    tk_lstm_w w;
    tk_lstm_dw dw;
    rnnt_lstm_of(m, m->p_dec, m->cfg.pred_rnn_layers, &w, &dw);
    tk_rnnt_lay L = {B, 1, 0, 1, B, d->d_one, d->d_zero, d->d_row0};
    if (tk_rows_copy(m->c, rnnt_wf(m, m->p_embed), TK_F32, d->st.label, d->emb, t, NULL, B, NULL, P, e) ||
        tk_lstm_fwd(m->c, t, &s, &w, NULL, d->emb, d->h, d->c, NULL, d->gp, d->hn, d->cn, d->ws, e) ||
        rnnt_mm(m, B, J, P, 0, 1, d->gp, rnnt_wt(m, m->p_jp_w), d->gj, t, TK_EPI_BIAS, rnnt_wt(m, m->p_jp_b), NULL,
                e) ||
        tk_rows_copy(m->c, m->f, t, d->st.fidx, d->fcur, t, NULL, B, NULL, J, e) ||
        tk_rnnt_joint_fwd(m->c, t, &L, J, d->fcur, d->gj, NULL, d->hj, e) ||
        rnnt_mm(m, B, V, J, 0, 1, d->hj, rnnt_wt(m, m->p_out_w), d->logits, t, TK_EPI_BIAS, rnnt_wt(m, m->p_out_b),
                NULL, e) ||
        tk_rnnt_greedy_step(m->c, t, &d->st, d->logits, d->hn, d->cn, d->h, d->c, e))
        return e->code ? e->code : TK_EINTERNAL;
    return 0;
}

int rnnt_decode(rnnt_decoder *d, int T, const int *feat_len, int32_t *hyp, int32_t *n, tk_err *e) {
    rnnt_model *m = d->m;
    const int B = m->B;
    for (int b = 0; b < B; b++)
        if (feat_len[b] < 1 || feat_len[b] > T)
            return tk_err_set(e, TK_EINTERNAL, "rnnt decode: utterance %d of %d frames (1 .. %d)", b, feat_len[b], T);
    int T2;
    TRY(rnnt_model_encode(m, T, &T2, e));
    d->st.T2 = T2;
    // the state: labels -1 (start), frames, symbols and lengths 0, f rows b T2, prediction state 0
    int32_t *init = malloc((size_t)B * 3 * 4);
    if (!init) return tk_err_errno(e, ENOMEM, "rnnt decode: out of memory");
    for (int b = 0; b < B; b++) init[b] = -1, init[B + b] = b * T2, init[2 * B + b] = rnnt_stacked_len(feat_len[b]);
    const size_t LBP = (size_t)m->cfg.pred_rnn_layers * B * m->P_ * 4;
    int rc = tk_memcpy_h2d(m->c, d->st.label, init, (size_t)B * 4, 0, e) ||
             tk_memcpy_h2d(m->c, d->st.fidx, init + B, (size_t)B * 4, 0, e) ||
             tk_memcpy_h2d(m->c, d->d_T, init + 2 * B, (size_t)B * 4, 0, e) ||
             tk_memset0(m->c, d->st.t, (size_t)B * 4, 0, e) || tk_memset0(m->c, d->st.sym, (size_t)B * 4, 0, e) ||
             tk_memset0(m->c, d->st.n, (size_t)B * 4, 0, e) ||
             tk_memset0(m->c, d->st.hyp, (size_t)B * d->cap * 4, 0, e) || tk_memset0(m->c, d->h, LBP, 0, e) ||
             tk_memset0(m->c, d->c, LBP, 0, e);
    free(init);
    if (rc) return e->code ? e->code : TK_EINTERNAL;
    const int iters = T2 + d->cap; // each active iteration advances a frame or a symbol
    if (d->use_graph) {
        tk_graph_destroy(&d->graph);
        memset(&d->graph, 0, sizeof d->graph);
        TRY(tk_graph_begin(m->c, e));
        if (iterate(d, e)) {
            tk_graph g = {0};
            tk_err e2 = {0};
            tk_graph_end(m->c, &g, &e2); // ends the capture; the error is the iteration's
            tk_graph_destroy(&g);
            return e->code;
        }
        TRY(tk_graph_end(m->c, &d->graph, e));
    }
    // RNNT_DECODE_CHECK iterations at a time, then one look at the state (the host's only wait
    // in the loop): done when every utterance is
    int32_t *tn = malloc((size_t)B * 2 * 4);
    if (!tn) return tk_err_errno(e, ENOMEM, "rnnt decode: out of memory");
    for (int i = 0; i < iters && !rc;) {
        for (int j = 0; j < RNNT_DECODE_CHECK && i < iters && !rc; j++, i++)
            rc = d->use_graph ? tk_graph_launch(m->c, &d->graph, e) : iterate(d, e);
        if (rc || i >= iters) break;
        rc = tk_memcpy_d2h(m->c, tn, d->st.t, (size_t)B * 4, 0, e) ||
                     tk_memcpy_d2h(m->c, tn + B, d->st.n, (size_t)B * 4, 0, e)
                 ? e->code
                 : 0;
        int done = 1;
        for (int b = 0; b < B && !rc; b++) done &= tn[b] >= rnnt_stacked_len(feat_len[b]) || tn[B + b] >= d->cap;
        if (done) break;
    }
    free(tn);
    if (rc) return e->code ? e->code : TK_EINTERNAL;
    TRY(tk_ctx_sync(m->c, e));
    TRY(tk_memcpy_d2h(m->c, n, d->st.n, (size_t)B * 4, 0, e));
    TRY(tk_memcpy_d2h(m->c, hyp, d->st.hyp, (size_t)B * d->cap * 4, 0, e));
    return 0;
}
