// --dump-step (run.h): one step's tensors for the workload's PyTorch peer, in the form and order
// lib/engine/workload.h gives (the step dump, version 4): the batch is the table's (its fields as
// read); the workload describes any tensors of its own and fields of another form (dump_describe).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "engine/ckpt.h"
#include "engine/run.h"

#define DUMP_FORMAT "trainkit-step-dump-1"

// The dump's tensors in the order written, and the host copies it owns.
typedef struct dump_list {
    tk_ckpt_entry *ent;
    int n, cap;
    void **own;
    int nown;
} dump_list;

// Appends a tensor (name made of prefix and name) read from src at write time.
static int add(dump_list *D, const char *prefix, const char *name, tk_dtype dt, int ndim, const int64_t *shape,
               const void *src, int dev, tk_err *e) {
    if (D->n == D->cap) return tk_err_set(e, TK_EINTERNAL, "--dump-step: more than %d tensors", D->cap);
    tk_ckpt_entry *en = &D->ent[D->n];
    memset(en, 0, sizeof *en);
    if ((size_t)snprintf(en->t.name, sizeof en->t.name, "%s%s", prefix, name) >= sizeof en->t.name)
        return tk_err_set(e, TK_EINTERNAL, "--dump-step: the tensor name %s%s is too long", prefix, name);
    if (ndim < 0 || ndim > TK_ST_MAX_DIMS)
        return tk_err_set(e, TK_EINTERNAL, "--dump-step: %s has %d dims", name, ndim);
    en->t.dtype = dt;
    en->t.ndim = ndim;
    for (int d = 0; d < ndim; d++) en->t.shape[d] = shape[d];
    en->src = src;
    en->dev = dev;
    D->n++;
    return 0;
}

// The last tensor's values as they are now: a host copy of its device memory (widened from bf16
// to the file's f32 when bf16), owned by D.
static int snapshot(tk_run *r, dump_list *D, int bf16, tk_err *e) {
    tk_ckpt_entry *en = &D->ent[D->n - 1];
    size_t nb = (size_t)tk_st_nbytes(&en->t), ne = nb / 4;
    if (bf16 && en->t.dtype != TK_F32)
        return tk_err_set(e, TK_EINTERNAL, "--dump-step: %s: only an F32 tensor is widened from bf16", en->t.name);
    void *h = malloc(nb + 1);
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory");
    D->own[D->nown++] = h;
    TRY(tk_memcpy_d2h(r->c, h, en->src, bf16 ? ne * 2 : nb, TK_STREAM_COMPUTE, e));
    TRY(tk_ctx_sync(r->c, e));
    for (size_t i = ne; bf16 && i-- > 0;) { // in place from the back: 2 bytes at 2i become 4 at 4i >= 2i
        uint16_t v;
        memcpy(&v, (const char *)h + 2 * i, 2);
        ((float *)h)[i] = tk_bf16_to_f32(v);
    }
    en->src = h;
    en->dev = 0;
    return 0;
}

// A tensor the workload described.
static int add_described(const tk_run *r, dump_list *D, const tk_wl_tensor *t, const void *src, tk_err *e) {
    if (!t->name) return tk_err_set(e, TK_EINTERNAL, "--dump-step: workload %s left a tensor unnamed", r->wl->name);
    return add(D, "", t->name, t->dtype, t->ndim, t->shape, src, 1, e);
}

// Everything before the step: the tensors of P, then the batch.
static int before_step(tk_run *r, dump_list *D, const tk_wl_dump *d, tk_err *e) {
    tk_ckpt_entry *pe = NULL;
    int np = 0;
    TRY(tk_ckpt_entries(&r->I.P, &pe, &np, e));
    int rc = 0;
    for (int i = 0; !rc && i < np; i++) {
        rc = add(D, "", pe[i].t.name, pe[i].t.dtype, pe[i].t.ndim, pe[i].t.shape, pe[i].src, pe[i].dev, e);
        if (!rc) rc = snapshot(r, D, 0, e);
    }
    free(pe);
    for (int f = 0; !rc && f < r->L.nfields; f++) {
        const tk_wl_field *fl = &r->fields[f]; // as read, unless describe gave another form
        tk_wl_tensor read = {.name = fl->name, .dtype = fl->dtype, .ndim = fl->ndim, .src = fl->input};
        memcpy(read.shape, fl->shape, sizeof read.shape);
        const tk_wl_tensor *t = d->batch[f].src ? &d->batch[f] : &read;
        rc = add_described(r, D, t, t->src, e);
        if (!rc) rc = snapshot(r, D, t->bf16, e);
    }
    return rc;
}

// The step (the workload's own: its updates, not the engine's optimizer), then its loss, the
// gradients (and the values after it of what the workload asks for) and its extra tensors.
static int step_and_after(tk_run *r, dump_list *D, const tk_wl_dump *d, float *loss, tk_err *e) {
    const tk_params *P = &r->I.P;
    double acc[2] = {0, 0};
    TRY(tk_memset0(r->c, r->I.loss_acc, 16, TK_STREAM_COMPUTE, e));
    TRY(r->wl->step(r->I.model, e));
    if (r->wl->after_update) TRY(r->wl->after_update(r->I.model, e));
    TRY(tk_memcpy_d2h(r->c, acc, r->I.loss_acc, 16, TK_STREAM_COMPUTE, e));
    TRY(tk_ctx_sync(r->c, e));
    *loss = (float)acc[0];
    TRY(add(D, "", "loss", TK_F32, 1, (const int64_t[]){1}, loss, 0, e));
    for (int i = 0; i < P->n; i++) {
        const tk_param *p = &P->p[i];
        if (!tk_param_held(P, p) || (p->flags & TK_PARAM_EXTERN)) continue;
        if (p->flags & TK_PARAM_DENSE) TRY(add(D, "grad.", p->name, TK_F32, p->ndim, p->shape, p->g, 1, e));
        else if (d->after) TRY(add(D, "after.", p->name, p->dtype, p->ndim, p->shape, p->w, 1, e));
    }
    if (d->nextra < 0 || d->nextra > TK_WL_DUMP_EXTRA)
        return tk_err_set(e, TK_EINTERNAL, "--dump-step: %d extra tensors", d->nextra);
    for (int i = 0; i < d->nextra; i++) {
        TRY(add_described(r, D, &d->extra[i], d->extra[i].src, e));
        if (d->extra[i].bf16) TRY(snapshot(r, D, 1, e));
    }
    return 0;
}

// --dump-step: one step's weights, batch, loss and gradients for the workload's PyTorch peer.
int tk_run_dump_step(tk_run *r, tk_err *e) {
    const tk_workload *wl = r->wl;
    if (wl->version < TK_WORKLOAD_V4 || !wl->dump_describe)
        return tk_err_set(e, TK_EUSAGE, "--dump-step: workload %s has no step dump", wl->name);
    void *bufs[TK_BATCH_MAX_FIELDS] = {0}, *rd = NULL;
    int rc = 0;
    for (int f = 0; !rc && f < r->L.nfields; f++)
        if (!(bufs[f] = malloc(r->L.bytes[f] + 1))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = wl->reader_open(r->I.cfg, r->o->ri.rank, r->o->ri.world, r->o->train, r->o->ntrain, &rd, e);
    if (!rc) rc = wl->read_batch(rd, r->step, r->steps_per_epoch, bufs, e);
    for (int f = 0; !rc && f < r->L.nfields; f++)
        rc = tk_memcpy_h2d(r->c, r->inputs[f], bufs[f], r->L.bytes[f], TK_STREAM_COMPUTE, e);
    if (rd) wl->reader_close(rd);
    for (int f = 0; f < r->L.nfields; f++) free(bufs[f]);

    tk_wl_dump d = {0};
    if (!rc) rc = wl->dump_describe(r->I.model, &d, e);
    dump_list D = {.cap = 2 * r->I.P.n + r->L.nfields + TK_WL_DUMP_EXTRA + 1};
    D.ent = calloc((size_t)D.cap, sizeof *D.ent);
    D.own = calloc((size_t)D.cap, sizeof *D.own);
    float *loss = malloc(sizeof *loss);
    if (!rc && (!D.ent || !D.own || !loss)) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = before_step(r, &D, &d, e);
    if (!rc) rc = step_and_after(r, &D, &d, loss, e);
    json_t *meta = rc ? NULL : json_pack("{s:s, s:s}", "format", DUMP_FORMAT, "workload", wl->name);
    if (!rc && (!meta || (d.meta && json_object_update(meta, d.meta))))
        rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = tk_ckpt_write(r->c, r->o->dump, D.ent, D.n, meta, e);
    json_decref(meta);
    json_decref(d.meta);
    for (int i = 0; i < D.nown; i++) free(D.own[i]);
    free(D.own);
    free(D.ent);
    free(loss);
    if (!rc)
        rc = tk_run_emit(r, json_pack("{s:s, s:s, s:I}", "type", "dump", "path", r->o->dump, "step", (json_int_t)r->step), e);
    return rc;
}
