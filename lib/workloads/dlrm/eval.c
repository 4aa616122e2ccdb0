// DLRM evaluation: the eval set cached in the backend's memory, forward in batches, exact AUC
// (eval.h).
#include <stdlib.h>

#include "auc.h"
#include "workloads/dlrm/data.h"
#include "workloads/dlrm/eval.h"
#include "workloads/dlrm/step.h"

static int fill(void *arg, void *rd, int n, int64_t cached, void *const *host, tk_err *e) {
    (void)arg, (void)cached;
    int got = 0;
    return tk_dlrm_data_next(rd, n, host[0], host[1], host[2], &got, e);
}

int tk_dlrm_evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    tk_dlrm *m = model;
    const tk_evalset_spec s = {.open = tk_dlrm_data_open, .count = tk_dlrm_data_count, .close = tk_dlrm_data_close,
                               .cfg = &m->cfg, .nf = 3,
                               .bytes = {1, (size_t)m->cfg.num_dense * 4, (size_t)m->cfg.num_tables * 4},
                               .scores = 1, .fill = fill};
    return tk_evalset_load(m->c, &s, paths, npaths, (tk_evalset **)out, e);
}


int tk_dlrm_evaluate(void *model, void *set, double *auc, tk_err *e) {
    tk_dlrm *m = model;
    const tk_dlrm_evalset *es = set;
    const tk_dlrm_config *cfg = &m->cfg;
    const uint8_t *label = es->field[0];
    const int32_t *dense = es->field[1], *cat = es->field[2];
    tk_range_push("eval");
    for (int64_t off = 0; off < es->n; off += cfg->batch) {
        int n = es->n - off < cfg->batch ? (int)(es->n - off) : cfg->batch;
        TRY(tk_dlrm_forward(m, dense + off * cfg->num_dense, cat + off * cfg->num_tables, n, es->score + off, e));
    }
    // Several ranks: every rank holds all the scores (tk_dlrm_forward gathers them) and all the
    // labels, so every rank computes the same exact AUC.
    TRY(tk_auc(m->c, es->score, label, es->n, es->ws, m->auc, e));
    TRY(tk_dist_sync(m->env.dist, e)); // bounded wait for the gathers before a blocking copy
    TRY(tk_memcpy_d2h(m->c, auc, m->auc, sizeof *auc, TK_STREAM_COMPUTE, e));
    tk_range_pop();
    return tk_ctx_sync(m->c, e);
}
