// BERT's evaluation: masked-LM accuracy (correct masked-token predictions / masked tokens) over
// the eval set, as the MLPerf reference computes it, without dropout. Several ranks split the
// batches (rank r takes batches r, r + world, ...) and add their counts.
#include <math.h>

#include "engine/evalset.h"
#include "workloads/bert/bert.h"

int tk_bert_evaluate(void *model, void *evalset, double *acc, tk_err *e) {
    tk_bert *m = model;
    const tk_evalset *es = evalset; // (its fields: types.h)
    const tk_bert_config *c = &m->cfg;
    const size_t L = (size_t)c->L, P = (size_t)c->P;
    const int32_t *ids = es->field[0], *len = es->field[2], *pos = es->field[3], *mid = es->field[4];
    const int32_t *nmask = es->field[5];
    const uint8_t *seg = es->field[1];
    tk_range_push("eval");
    TRY(tk_memset0(m->c, m->counts, 16, TK_STREAM_COMPUTE, e));
    for (int64_t k = m->rank; k < es->cached / m->b; k += m->world) {
        size_t s0 = (size_t)k * m->b;
        TRY(tk_bert_eval_batch(m, ids + s0 * L, seg + s0 * L, len + s0, pos + s0 * P, mid + s0 * P, nmask + s0, e));
    }
    int64_t counts[2] = {0, 0}, all[TK_MAX_WORLD];
    TRY(tk_dist_sync(m->env.dist, e));
    TRY(tk_memcpy_d2h(m->c, counts, m->counts, sizeof counts, TK_STREAM_COMPUTE, e));
    TRY(tk_ctx_sync(m->c, e));
    int64_t ok = 0, n = 0;
    TRY(tk_dist_gather_i64(m->env.dist, counts[0], all, 0, e));
    for (int r = 0; r < m->world; r++) ok += all[r];
    TRY(tk_dist_gather_i64(m->env.dist, counts[1], all, 0, e));
    for (int r = 0; r < m->world; r++) n += all[r];
    tk_range_pop();
    *acc = n > 0 ? (double)ok / (double)n : NAN; // (no masked token at all: undefined)
    return 0;
}
