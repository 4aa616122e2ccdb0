// Flat parameter and gradient arenas with named tensor views (params.h).
#include "engine/params.h"

#include "cast2d.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

void tk_params_init(tk_params *P, tk_ctx *c, int rank) {
    memset(P, 0, sizeof *P);
    P->c = c;
    P->rank = rank;
}

int64_t tk_param_numel(const tk_param *t) {
    int64_t n = 1;
    for (int d = 0; d < t->ndim; d++) n *= t->shape[d];
    return n;
}

size_t tk_param_bytes(const tk_param *t) { return (size_t)tk_param_numel(t) * tk_dtype_size(t->dtype); }

int tk_param_held(const tk_params *P, const tk_param *t) { return t->owner < 0 || t->owner == P->rank; }

int tk_params_find(const tk_params *P, const char *name) {
    for (int i = 0; i < P->n; i++)
        if (strcmp(P->p[i].name, name) == 0) return i;
    return -1;
}

int64_t tk_params_numel(const tk_params *P) {
    int64_t n = 0;
    for (int i = 0; i < P->n; i++)
        if (!(P->p[i].flags & TK_PARAM_EXTERN)) n += tk_param_numel(&P->p[i]);
    return n;
}

static int add(tk_params *P, const char *name, tk_dtype dtype, int ndim, const int64_t *shape, int flags, int owner,
               int *idx, tk_err *e) {
    if (strlen(name) >= TK_PARAM_NAME || ndim < 0 || ndim > TK_PARAM_MAX_DIMS)
        return tk_err_set(e, TK_EINTERNAL, "params: bad tensor '%.60s'", name);
    if (tk_params_find(P, name) >= 0) return tk_err_set(e, TK_EINTERNAL, "params: tensor '%s' declared twice", name);
    if (flags & TK_PARAM_DENSE) {
        if (dtype != TK_F32) return tk_err_set(e, TK_EINTERNAL, "params: dense tensor '%s' must be F32", name);
        if (owner >= 0) return tk_err_set(e, TK_EINTERNAL, "params: dense tensor '%s' must be on every rank", name);
        if (P->ndense != P->n)
            return tk_err_set(e, TK_EINTERNAL, "params: dense tensor '%s' after a non-dense one", name);
    }
    if (P->n == P->cap) {
        int cap = P->cap * 2 + 16;
        tk_param *np = realloc(P->p, (size_t)cap * sizeof *np);
        if (!np) return tk_err_set(e, TK_EIO, "out of host memory");
        P->p = np;
        P->cap = cap;
    }
    tk_param *t = &P->p[P->n];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dtype;
    t->ndim = ndim;
    for (int d = 0; d < ndim; d++) t->shape[d] = shape[d];
    t->flags = flags;
    t->owner = owner;
    if (flags & TK_PARAM_DENSE) P->ndense++;
    if (idx) *idx = P->n;
    P->n++;
    return 0;
}

int tk_params_add(tk_params *P, const char *name, tk_dtype dtype, int ndim, const int64_t *shape, int flags,
                  int owner, int *idx, tk_err *e) {
    if (P->allocated) return tk_err_set(e, TK_EINTERNAL, "params: '%s' declared after allocation", name);
    if (flags & TK_PARAM_EXTERN) return tk_err_set(e, TK_EINTERNAL, "params: use tk_params_add_extern");
    return add(P, name, dtype, ndim, shape, flags, owner, idx, e);
}

int tk_params_add_extern(tk_params *P, const char *name, tk_dtype dtype, int ndim, const int64_t *shape,
                         int owner, void *p, tk_err *e) {
    int i;
    TRY(add(P, name, dtype, ndim, shape, TK_PARAM_EXTERN, owner, &i, e));
    P->p[i].w = tk_param_held(P, &P->p[i]) ? p : NULL;
    return 0;
}

int tk_params_alloc(tk_params *P, tk_err *e) {
    if (P->allocated) return tk_err_set(e, TK_EINTERNAL, "params: allocated twice");
    // Layout: offsets of the held tensors (a tensor held elsewhere takes no room here).
    size_t off = 0, goff = 0;
    for (int i = 0; i < P->n; i++) {
        tk_param *t = &P->p[i];
        if (!tk_param_held(P, t)) continue;
        if (!(t->flags & TK_PARAM_PACKED)) off = align256(off);
        t->off = off;
        off += tk_param_bytes(t);
        if (!(t->flags & TK_PARAM_DENSE)) continue;
        if (i == P->ndense - 1 && P->dense_multiple > 1) { // (dense tensors are held, and first)
            size_t m = P->dense_multiple * sizeof(float);
            off = (off + m - 1) / m * m;
        }
        goff = off;
    }
    P->wbytes = align256(off);
    P->gbytes = align256(goff);
    size_t cbytes = P->copy_type != TK_F32 ? align256(goff / 4 * tk_dtype_size(P->copy_type)) : 0;
    // The arenas hand out 256-aligned views in order: take one span each and place the views by offset.
    void *wb = NULL, *gb = NULL;
    TRY(tk_arena_init(P->c, &P->warena, P->wbytes + cbytes + 256, "params", e));
    int rc = tk_arena_init(P->c, &P->garena, P->gbytes + 256, "grads", e);
    if (!rc) rc = tk_arena_take(&P->warena, P->wbytes, &wb, e);
    if (!rc) rc = tk_arena_take(&P->garena, P->gbytes, &gb, e);
    if (!rc && cbytes) rc = tk_arena_take(&P->warena, cbytes, &P->copy, e);
    if (!rc) rc = tk_memset0(P->c, P->warena.base, P->warena.cap, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memset0(P->c, P->garena.base, P->garena.cap, TK_STREAM_COMPUTE, e);
    if (rc) {
        tk_params_release(P);
        return rc;
    }
    for (int i = 0; i < P->n; i++) {
        tk_param *t = &P->p[i];
        if (!tk_param_held(P, t)) continue;
        t->w = (char *)wb + t->off;
        if (t->flags & TK_PARAM_DENSE) t->g = (float *)((char *)gb + t->off);
    }
    P->dense_w = wb;
    P->dense_g = gb;
    P->dense_n = goff / 4;
    P->allocated = 1;
    return 0;
}

const void *tk_params_copy_of(const tk_params *P, const float *w) {
    return P->copy ? (const char *)P->copy + (size_t)(w - P->dense_w) * tk_dtype_size(P->copy_type) : (const void *)w;
}

int tk_params_refresh_copy(tk_params *P, tk_err *e) {
    if (!P->copy) return 0;
    int64_t n = (int64_t)P->dense_n;
    return tk_cast2d(P->c, P->dense_w, TK_F32, n, P->copy, P->copy_type, n, 1, n, e);
}

void tk_params_release(tk_params *P) {
    if (!P->c) return;
    tk_arena_release(P->c, &P->warena);
    tk_arena_release(P->c, &P->garena);
    free(P->p);
    P->p = NULL;
    P->n = P->cap = P->ndense = 0;
    P->copy = NULL;
    P->allocated = 0;
}
