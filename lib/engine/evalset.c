// The cached eval set (evalset.h).
#include "engine/evalset.h"

#include <stdlib.h>

#include "auc.h"

void tk_evalset_free(void *model, void *evalset) {
    (void)model;
    tk_evalset *es = evalset;
    if (!es) return;
    for (int f = 0; f < es->nf; f++) tk_free(es->c, es->field[f]);
    tk_free(es->c, es->score);
    tk_free(es->c, es->ws);
    free(es);
}

int64_t tk_evalset_count(const void *es) { return ((const tk_evalset *)es)->n; }

// The n records that rd holds, read by s->fill and copied up.
static int cache(tk_ctx *c, const tk_evalset_spec *s, void *rd, int64_t n, tk_evalset *es, tk_err *e) {
    const int64_t cached = s->batch > 1 ? (n + s->batch - 1) / s->batch * s->batch : n;
    void *host[TK_EVALSET_MAX_FIELDS] = {0};
    int rc = 0;
    es->c = c;
    es->n = n;
    es->cached = cached;
    es->nf = s->nf;
    for (int f = 0; !rc && f < s->nf; f++)
        if (!(host[f] = calloc((size_t)cached * s->bytes[f] + 8, 1)))
            rc = tk_err_set(e, TK_EIO, "out of host memory for the eval set");
    if (!rc) rc = s->fill(s->arg, rd, (int)n, cached, host, e);
    // (8 bytes past each field's end: room for a kernel's vector loads)
    for (int f = 0; !rc && f < s->nf; f++) rc = tk_malloc(c, &es->field[f], (size_t)cached * s->bytes[f] + 8, e);
    if (!rc && s->scores) rc = tk_malloc(c, (void **)&es->score, (size_t)n * 4, e);
    if (!rc && s->scores) rc = tk_malloc(c, &es->ws, tk_auc_ws_bytes(c->backend, n) + 8, e);
    for (int f = 0; !rc && f < s->nf; f++)
        rc = tk_memcpy_h2d(c, es->field[f], host[f], (size_t)cached * s->bytes[f], TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(c, e);
    for (int f = 0; f < s->nf; f++) free(host[f]);
    return rc;
}

int tk_evalset_load(tk_ctx *c, const tk_evalset_spec *s, char *const *paths, int npaths, tk_evalset **out,
                    tk_err *e) {
    *out = NULL;
    if (s->nf < 1 || s->nf > TK_EVALSET_MAX_FIELDS) return tk_err_set(e, TK_EINTERNAL, "eval set of %d fields", s->nf);
    void *rd;
    TRY(s->open(s->cfg, 0, 1, paths, npaths, &rd, e));
    const int64_t n = (int64_t)s->count(rd), max = s->max > 0 && s->max < INT32_MAX ? s->max : INT32_MAX;
    tk_evalset *es = NULL;
    int rc = 0;
    if (n < 1) rc = tk_err_set(e, TK_EDATA, "%s: the eval set is empty", paths[0]);
    else if (n > max)
        rc = tk_err_set(e, TK_EDATA, "%s: the eval set has %lld records, more than %lld", paths[0], (long long)n,
                        (long long)max);
    else if (!(es = calloc(1, sizeof *es))) rc = tk_err_set(e, TK_EIO, "out of host memory for the eval set");
    if (!rc) rc = cache(c, s, rd, n, es, e);
    s->close(rd);
    if (rc) tk_evalset_free(NULL, es);
    else *out = es;
    return rc;
}
