// What the ResNet and U-Net tests share (tests/unit/test_resnet.c, test_unet3d_model.c): a
// recorder in place of the engine's grads_ready (the model's tk_blk_grads.ready, which several
// ranks set) that checks a backward's reports: each at a dense tensor's first float, below the one
// before, and every gradient reported final still the same when the backward ends (an all-reduce
// started at the report would have read its final value).
#ifndef TK_TEST_GRADS_CASE_H
#define TK_TEST_GRADS_CASE_H

#include <stdlib.h>
#include <string.h>

#include "blocks/blocks.h"
#include "engine/params.h"

typedef struct gr_rec {
    const tk_params *P;
    float *copy;                 // the reported gradients' values at their report
    size_t from;                 // every gradient from here on reported
    int calls, bad;              // reports; those not at a tensor's start or not below the last
} gr_rec;

static int gr_ready(void *arg, size_t off, tk_err *e) {
    gr_rec *r = arg;
    int start = 0;
    for (int k = 0; k < r->P->ndense; k++) start |= r->P->p[k].g == r->P->dense_g + off;
    if (!start || off >= r->from) r->bad++;
    else memcpy(r->copy + off, r->P->dense_g + off, (r->from - off) * sizeof(float)), r->from = off;
    r->calls++;
    (void)e;
    return 0;
}

// Before a step: g (the model's) reports to r.
static inline void gr_listen(gr_rec *r, const tk_params *P, tk_blk_grads *g) {
    free(r->copy);
    *r = (gr_rec){.P = P, .copy = calloc(P->dense_n + 1, sizeof(float)), .from = P->dense_n};
    g->ready = gr_ready, g->arg = r;
}

// After it: the floats reported final that changed later.
static inline size_t gr_changed(const gr_rec *r) {
    size_t n = 0;
    for (size_t i = r->from; i < r->P->dense_n; i++) n += memcmp(&r->copy[i], &r->P->dense_g[i], sizeof(float)) != 0;
    return n;
}

#endif
