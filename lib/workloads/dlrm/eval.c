// DLRM evaluation: the eval set cached in the backend's memory, forward in batches, exact AUC
// (eval.h).
#include <stdlib.h>

#include "auc.h"
#include "workloads/dlrm/data.h"
#include "workloads/dlrm/eval.h"
#include "workloads/dlrm/model.h"
#include "workloads/dlrm/step.h"

int tk_dlrm_evalset_load(tk_dlrm *m, char *const *paths, int npaths, tk_dlrm_evalset **out,
                         tk_err *e) {
    *out = NULL;
    const tk_dlrm_config *cfg = &m->cfg;
    tk_dlrm_data *d;
    TRY(tk_dlrm_data_open(&d, paths, npaths, cfg->num_dense, cfg->num_tables, e));
    tk_dlrm_evalset *es = calloc(1, sizeof *es);
    int64_t n = (int64_t)tk_dlrm_data_count(d);
    uint8_t *hl = malloc((size_t)n + 1);
    int32_t *hd = malloc(((size_t)n * cfg->num_dense + 1) * 4);
    int32_t *hc = malloc(((size_t)n * cfg->num_tables + 1) * 4);
    int rc = 0, got = 0;
    if (!es || !hl || !hd || !hc) rc = tk_err_set(e, TK_EIO, "out of host memory for the eval set");
    if (!rc && n == 0) rc = tk_err_set(e, TK_EDATA, "%s: the eval set is empty", paths[0]);
    if (!rc && n > INT32_MAX) rc = tk_err_set(e, TK_EDATA, "%s: eval set too large", paths[0]);
    if (!rc) rc = tk_dlrm_data_next(d, (int)n, cfg->table_rows, hl, hd, hc, &got, e);
    if (!rc) {
        es->n = n;
        rc = tk_malloc(m->c, (void **)&es->label, (size_t)n, e);
        if (!rc) rc = tk_malloc(m->c, (void **)&es->dense, (size_t)n * cfg->num_dense * 4, e);
        if (!rc) rc = tk_malloc(m->c, (void **)&es->cat, (size_t)n * cfg->num_tables * 4, e);
        if (!rc) rc = tk_malloc(m->c, (void **)&es->score, (size_t)n * 4, e);
        if (!rc) rc = tk_malloc(m->c, &es->ws, tk_auc_ws_bytes(m->c->backend, n) + 8, e);
        if (!rc) rc = tk_memcpy_h2d(m->c, es->label, hl, (size_t)n, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_memcpy_h2d(m->c, es->dense, hd, (size_t)n * cfg->num_dense * 4, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_memcpy_h2d(m->c, es->cat, hc, (size_t)n * cfg->num_tables * 4, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_ctx_sync(m->c, e);
    }
    free(hl);
    free(hd);
    free(hc);
    tk_dlrm_data_close(d);
    if (rc) {
        tk_dlrm_evalset_free(m, es);
        return rc;
    }
    *out = es;
    return 0;
}

void tk_dlrm_evalset_free(tk_dlrm *m, tk_dlrm_evalset *es) {
    if (!es) return;
    tk_free(m->c, es->label);
    tk_free(m->c, es->dense);
    tk_free(m->c, es->cat);
    tk_free(m->c, es->score);
    tk_free(m->c, es->ws);
    free(es);
}

int tk_dlrm_evaluate(tk_dlrm *m, tk_dlrm_evalset *es, double *auc, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    tk_range_push("eval");
    for (int64_t off = 0; off < es->n; off += cfg->batch) {
        int n = es->n - off < cfg->batch ? (int)(es->n - off) : cfg->batch;
        TRY(tk_dlrm_forward(m, es->dense + off * cfg->num_dense, es->cat + off * cfg->num_tables, n,
                            es->score + off, e));
    }
    // Several ranks: every rank holds all the scores (tk_dlrm_forward gathers them) and all the
    // labels, so every rank computes the same exact AUC.
    TRY(tk_auc(m->c, es->score, es->label, es->n, es->ws, m->auc, e));
    TRY(tk_dlrm_sync(m, e)); // bounded wait for the gathers before a blocking copy
    TRY(tk_memcpy_d2h(m->c, auc, m->auc, sizeof *auc, TK_STREAM_COMPUTE, e));
    tk_range_pop();
    return tk_ctx_sync(m->c, e);
}
