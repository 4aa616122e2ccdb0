// DLRM evaluation: the eval set cached in the backend's memory, forward in batches, exact AUC
// (eval.h).
#include <stdlib.h>

#include "auc.h"
#include "workloads/dlrm/data.h"
#include "workloads/dlrm/eval.h"
#include "workloads/dlrm/step.h"

static int fill(void *rd, int n, void *const *host, tk_err *e) {
    int got = 0;
    return tk_dlrm_data_next(rd, n, host[0], host[1], host[2], &got, e);
}

int tk_dlrm_evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    *out = NULL;
    tk_dlrm *m = model;
    const tk_dlrm_config *cfg = &m->cfg;
    void *d;
    TRY(tk_dlrm_data_open(cfg, 0, 1, paths, npaths, &d, e));
    int64_t n = (int64_t)tk_dlrm_data_count(d);
    const size_t bytes[3] = {1, (size_t)cfg->num_dense * 4, (size_t)cfg->num_tables * 4};
    tk_evalset *es = NULL;
    int rc = 0;
    if (n == 0) rc = tk_err_set(e, TK_EDATA, "%s: the eval set is empty", paths[0]);
    else if (n > INT32_MAX) rc = tk_err_set(e, TK_EDATA, "%s: eval set too large", paths[0]);
    if (!rc) rc = tk_evalset_cache(m->c, n, 3, bytes, fill, d, &es, e);
    tk_dlrm_data_close(d);
    *out = es;
    return rc;
}

int64_t tk_dlrm_evalset_count(const void *es) { return ((const tk_dlrm_evalset *)es)->n; }

void tk_dlrm_evalset_free(void *model, void *es) { tk_evalset_free(((tk_dlrm *)model)->c, es); }

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
    TRY(tk_dist_sync(m->dist, e)); // bounded wait for the gathers before a blocking copy
    TRY(tk_memcpy_d2h(m->c, auc, m->auc, sizeof *auc, TK_STREAM_COMPUTE, e));
    tk_range_pop();
    return tk_ctx_sync(m->c, e);
}
