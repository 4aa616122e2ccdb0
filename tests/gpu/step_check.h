// The graph-vs-eager run of the whole-step tests (test_resnet_step.c, test_unet3d_step.c,
// test_ssd_step.c): two models made alike (same weights; the caller turns on deterministic
// algorithms before making them), `steps` training iterations each on the same batches
// k0, k0 + 1, ...: model a's eagerly, model b's captured once in a CUDA graph (at its first
// iteration) and replayed for every one. The caller then compares what the iterations left
// (weights, losses): bit for bit, as a replay must do what the eager calls did.
#ifndef TK_GPU_STEP_CHECK_H
#define TK_GPU_STEP_CHECK_H

#include "gpu_test.h"

typedef struct gt_step_pair {
    void *a, *b;                                // a: eager; b: the graph's
    void (*batch)(void *model, uint64_t k);     // batch k into a model's inputs
    int (*iteration)(void *model, tk_err *e);   // one training iteration, capturable
} gt_step_pair;

static inline void gt_graph_vs_eager(int *tk_failed_, const gt_step_pair *p, int steps, uint64_t k0) {
    tk_err e = {0};
    tk_graph g = {0};
    int rc = 0;
    for (int s = 0; s < steps && !rc; s++) {
        p->batch(p->a, k0 + (uint64_t)s), p->batch(p->b, k0 + (uint64_t)s);
        rc = p->iteration(p->a, &e);
        if (!rc && !g.valid && !(rc = tk_graph_begin(gt_ctx_, &e))) {
            tk_err e2 = {0};
            const int r1 = p->iteration(p->b, &e), r2 = tk_graph_end(gt_ctx_, &g, r1 ? &e2 : &e); // (ends the capture)
            rc = r1 ? r1 : r2;
        }
        if (!rc) rc = tk_graph_launch(gt_ctx_, &g, &e);
        if (!rc) rc = gt_sync(&e);
    }
    if (rc) printf("#   graph vs eager: %s\n", e.what);
    CHECK_EQ_INT(rc, 0);
    if (g.valid) tk_graph_destroy(&g);
}

#endif
