// What the ResNet and U-Net tests share (tests/unit/test_resnet.c, test_unet3d_model.c, and on
// the cuda backend tests/gpu/test_resnet_step.c, test_unet3d_step.c): a recorder in place of the
// engine's grads_ready (the model's tk_blk_grads.ready, which several ranks set) that checks a
// backward's reports: each at a dense tensor's first float, below the one before, and every
// gradient reported final still the same when the backward ends. At each report it copies the
// newly reported gradients on the compute stream, where the engine's all-reduce would start
// (capturable: inside a CUDA graph the copies are the graph's), so what it kept is what an
// all-reduce started there would have read.
#ifndef TK_TEST_GRADS_CASE_H
#define TK_TEST_GRADS_CASE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "blocks/blocks.h"
#include "engine/params.h"

typedef struct gr_rec {
    const tk_params *P;
    float *copy;                 // (backend memory) the reported gradients as at their report
    size_t from;                 // every gradient from here on reported
    int calls, bad;              // reports; those not at a tensor's start or not below the last
} gr_rec;

static int gr_ready(void *arg, size_t off, tk_err *e) {
    gr_rec *r = arg;
    int start = 0;
    for (int k = 0; k < r->P->ndense; k++) start |= r->P->p[k].g == r->P->dense_g + off;
    r->calls++;
    if (!start || off >= r->from) return r->bad++, 0;
    TRY(tk_memcpy_d2d(r->P->c, r->copy + off, r->P->dense_g + off, (r->from - off) * sizeof(float),
                      TK_STREAM_COMPUTE, e));
    r->from = off;
    return 0;
}

// Before a step (r zeroed the first time): g (the model's) reports to r; the gradients zeroed, so
// that one reported before it is written shows, whatever the step before left. 0 or the error's
// code.
static inline int gr_listen(gr_rec *r, const tk_params *P, tk_blk_grads *g, tk_err *e) {
    if (r->copy) tk_free(r->P->c, r->copy);
    *r = (gr_rec){.P = P, .from = P->dense_n};
    g->ready = gr_ready, g->arg = r;
    TRY(tk_memset0(P->c, P->dense_g, P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e));
    return tk_malloc(P->c, (void **)&r->copy, P->dense_n * sizeof(float) + 4, e);
}

// After it (once the backend is done): the floats reported final that changed later (-1: an error).
static inline long gr_changed(const gr_rec *r) {
    const size_t n = r->P->dense_n - r->from;
    float *a = malloc(n * sizeof(float) + 4), *b = malloc(n * sizeof(float) + 4);
    tk_err e = {0};
    long d = a && b ? 0 : -1;
    if (!d && (tk_ctx_sync(r->P->c, &e) ||
               tk_memcpy_d2h(r->P->c, a, r->copy + r->from, n * sizeof(float), TK_STREAM_COMPUTE, &e) ||
               tk_memcpy_d2h(r->P->c, b, r->P->dense_g + r->from, n * sizeof(float), TK_STREAM_COMPUTE, &e) ||
               tk_ctx_sync(r->P->c, &e)))
        d = -1;
    for (size_t i = 0; d >= 0 && i < n; i++) d += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    free(a), free(b);
    return d;
}

// One step (step on model) with r listening to g (the model's, whose tensors P holds): eager,
// or (graph, cuda) captured in a CUDA graph and replayed once. Whether it ran and its reports were
// right: want of them, at tensors' starts, descending to 0, and no gradient reported final changed
// after; else a line "# ..." says what was wrong.
static inline int gr_step_ok(gr_rec *r, const tk_params *P, tk_blk_grads *g, int (*step)(void *, tk_err *),
                             void *model, int graph, int want) {
    tk_err e = {0};
    tk_graph G = {0};
    int rc = gr_listen(r, P, g, &e);
    if (!rc && !graph) rc = step(model, &e);
    if (!rc && graph) {
        rc = tk_graph_begin(P->c, &e);
        if (!rc) rc = step(model, &e);
        tk_err e2 = {0};
        const int rc2 = tk_graph_end(P->c, &G, &e2); // (the capture ends whatever happened)
        if (!rc && rc2) rc = rc2, e = e2;
        if (!rc) rc = tk_graph_launch(P->c, &G, &e);
        if (G.valid) tk_graph_destroy(&G);
    }
    const long changed = rc ? -1 : gr_changed(r);
    const int ok = !rc && r->calls == want && !r->bad && r->from == 0 && changed == 0;
    if (!ok) {
        char msg[512] = "";
        if (rc) tk_err_format(&e, msg, sizeof msg);
        printf("# grads_ready%s: %d reports of %d wanted, %d misplaced, reported down to %zu, %ld changed after %s\n",
               graph ? " (graph)" : "", r->calls, want, r->bad, r->from, changed, msg);
    }
    return ok;
}

static inline void gr_release(gr_rec *r) {
    if (r->copy) tk_free(r->P->c, r->copy);
    r->copy = NULL;
}

#endif
