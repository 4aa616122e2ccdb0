// ResNet's evaluation (resnet.h): each rank decodes its share of the eval set once, keeps it in the
// backend's memory (MLPerf allows caching the eval set), and counts its top-1 hits with the
// running statistics; the counts are summed over the ranks.
#include <stdlib.h>
#include <string.h>

#include "workloads/resnet/resnet.h"
#include "xent_smooth.h"

int rn_evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    rn_model *m = model;
    *out = NULL;
    rn_evalset *es = calloc(1, sizeof *es);
    if (!es) return tk_err_set(e, TK_EIO, "out of host memory");
    uint8_t *img = NULL;
    int32_t *label = NULL;
    int rc = rn_decode_eval(&m->cfg, paths, npaths, &es->n, m->dist->rank, m->dist->world, &img, &label, &es->lo,
                            &es->hi, e);
    if (!rc && es->n == 0) rc = tk_err_set(e, TK_EDATA, "%s: the eval set is empty", paths[0]);
    // whole batches of the per-rank size: the last one padded with label -1 (not counted)
    const int64_t n = es->hi - es->lo;
    const size_t per = (size_t)m->S * m->S * 3;
    es->nb = (n + m->b - 1) / m->b;
    const int64_t np = es->nb * m->b;
    int32_t *lab = NULL;
    if (!rc && !(lab = malloc((size_t)np * 4 + 4))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) {
        memcpy(lab, label, (size_t)n * 4);
        for (int64_t i = n; i < np; i++) lab[i] = -1;
        rc = tk_malloc(m->c, (void **)&es->img, (size_t)np * per + 1, e);
    }
    if (!rc) rc = tk_malloc(m->c, (void **)&es->label, (size_t)np * 4 + 4, e);
    if (!rc) rc = tk_memset0(m->c, es->img, (size_t)np * per + 1, TK_STREAM_COMPUTE, e);
    if (!rc && n > 0) rc = tk_memcpy_h2d(m->c, es->img, img, (size_t)n * per, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, es->label, lab, (size_t)np * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    free(img);
    free(label);
    free(lab);
    if (rc) {
        rn_evalset_free(m, es);
        return rc;
    }
    *out = es;
    return 0;
}

int64_t rn_evalset_count(const void *es) { return ((const rn_evalset *)es)->n; }

void rn_evalset_free(void *model, void *set) {
    rn_model *m = model;
    rn_evalset *es = set;
    if (!es) return;
    if (es->img) tk_free(m->c, es->img);
    if (es->label) tk_free(m->c, es->label);
    free(es);
}

int rn_evaluate(void *model, void *set, double *top1, tk_err *e) {
    rn_model *m = model;
    const rn_evalset *es = set;
    const size_t per = (size_t)m->S * m->S * 3;
    tk_range_push("eval");
    TRY(tk_memset0(m->c, m->top1, 8, TK_STREAM_COMPUTE, e));
    for (int64_t i = 0; i < es->nb; i++) {
        TRY(rn_forward(m, es->img + (size_t)i * m->b * per, 0, e));
        TRY(tk_top1_count(m->c, m->logits, es->label + i * m->b, m->b, m->cfg.classes, m->top1, e));
    }
    int64_t mine = 0, all[TK_MAX_WORLD];
    TRY(tk_dist_sync(m->dist, e));
    TRY(tk_memcpy_d2h(m->c, &mine, m->top1, 8, TK_STREAM_COMPUTE, e));
    TRY(tk_ctx_sync(m->c, e));
    TRY(tk_dist_gather_i64(m->dist, mine, all, 0, e));
    int64_t hits = 0;
    for (int r = 0; r < m->dist->world; r++) hits += all[r];
    *top1 = (double)hits / (double)es->n;
    tk_range_pop();
    return 0;
}
