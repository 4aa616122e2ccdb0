// The cached eval set (evalset.h).
#include "engine/evalset.h"

#include <stdlib.h>

#include "auc.h"

void tk_evalset_free(tk_ctx *c, tk_evalset *es) {
    if (!es) return;
    for (int f = 0; f < es->nf; f++) tk_free(c, es->field[f]);
    tk_free(c, es->score);
    tk_free(c, es->ws);
    free(es);
}

int tk_evalset_cache(tk_ctx *c, int64_t n, int nf, const size_t *bytes, tk_evalset_fill fill, void *arg,
                     tk_evalset **out, tk_err *e) {
    *out = NULL;
    if (n < 1 || n > INT32_MAX || nf < 1 || nf > TK_EVALSET_MAX_FIELDS)
        return tk_err_set(e, TK_EINTERNAL, "eval set of %lld records, %d fields", (long long)n, nf);
    tk_evalset *es = calloc(1, sizeof *es);
    void *host[TK_EVALSET_MAX_FIELDS] = {0};
    int rc = es ? 0 : TK_EIO;
    for (int f = 0; !rc && f < nf; f++)
        if (!(host[f] = malloc((size_t)n * bytes[f] + 8))) rc = TK_EIO;
    if (rc) rc = tk_err_set(e, TK_EIO, "out of host memory for the eval set");
    if (!rc) rc = fill(arg, (int)n, host, e);
    if (!rc) {
        es->n = n;
        es->nf = nf;
        for (int f = 0; !rc && f < nf; f++) rc = tk_malloc(c, &es->field[f], (size_t)n * bytes[f], e);
        if (!rc) rc = tk_malloc(c, (void **)&es->score, (size_t)n * 4, e);
        if (!rc) rc = tk_malloc(c, &es->ws, tk_auc_ws_bytes(c->backend, n) + 8, e);
        for (int f = 0; !rc && f < nf; f++)
            rc = tk_memcpy_h2d(c, es->field[f], host[f], (size_t)n * bytes[f], TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_ctx_sync(c, e);
    }
    for (int f = 0; f < nf; f++) free(host[f]);
    if (rc) {
        if (es) es->nf = nf; // (the fields allocated so far: the others are NULL)
        tk_evalset_free(c, es);
        return rc;
    }
    *out = es;
    return 0;
}
