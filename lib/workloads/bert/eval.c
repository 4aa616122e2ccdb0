// BERT's evaluation: masked-LM accuracy (correct masked-token predictions / masked tokens) over
// the eval set, as the MLPerf reference computes it, without dropout. Several ranks split the
// batches (rank r takes batches r, r + world, ...) and add their counts.
#include <math.h>

#include "workloads/bert/bert.h"

int tk_bert_evaluate(void *model, void *evalset, double *acc, tk_err *e) {
    tk_bert *m = model;
    const tk_bert_evalset *es = evalset;
    const tk_bert_config *c = &m->cfg;
    const size_t L = (size_t)c->L, P = (size_t)c->P;
    tk_range_push("eval");
    TRY(tk_memset0(m->c, m->counts, 16, TK_STREAM_COMPUTE, e));
    for (int64_t k = m->rank; k < es->nbatches; k += m->world) {
        size_t s0 = (size_t)k * m->b;
        TRY(tk_bert_eval_batch(m, es->ids + s0 * L, es->seg + s0 * L, es->len + s0, es->pos + s0 * P,
                               es->mid + s0 * P, es->nmask + s0, e));
    }
    int64_t counts[2] = {0, 0}, all[TK_MAX_WORLD];
    TRY(tk_dist_sync(m->dist, e));
    TRY(tk_memcpy_d2h(m->c, counts, m->counts, sizeof counts, TK_STREAM_COMPUTE, e));
    TRY(tk_ctx_sync(m->c, e));
    int64_t ok = 0, n = 0;
    TRY(tk_dist_gather_i64(m->dist, counts[0], all, 0, e));
    for (int r = 0; r < m->world; r++) ok += all[r];
    TRY(tk_dist_gather_i64(m->dist, counts[1], all, 0, e));
    for (int r = 0; r < m->world; r++) n += all[r];
    tk_range_pop();
    *acc = n > 0 ? (double)ok / (double)n : NAN; // (no masked token at all: undefined)
    return 0;
}
