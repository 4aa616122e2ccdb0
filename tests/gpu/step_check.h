// The graph-vs-eager run of the whole-step tests (test_resnet_step.c, test_unet3d_step.c,
// test_ssd_step.c; gt_tensors_differ also test_rnnt_step.c): two models made alike (same
// weights; the caller turns on deterministic algorithms before making them), `steps` training
// iterations each on the same batches
// k0, k0 + 1, ...: model a's eagerly, model b's captured once in a CUDA graph (at its first
// iteration) and replayed for every one. The caller then compares what the iterations left
// (weights, losses): bit for bit, as a replay must do what the eager calls did.
#ifndef TK_GPU_STEP_CHECK_H
#define TK_GPU_STEP_CHECK_H

#include "engine/instance.h"
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

// How many of two instances' tensors (all of them: weights, running statistics, the optimizer's
// state) differ, bit for bit; the first three named on "#" lines.
static inline int gt_tensors_differ(const tk_instance *a, const tk_instance *b) {
    int bad = 0;
    for (int i = 0; i < a->P.n; i++) {
        const tk_param *pa = &a->P.p[i], *pb = &b->P.p[i];
        if (!pa->w || !pb->w) continue;
        const size_t n = tk_param_bytes(pa);
        void *ha = gt_host(n), *hb = gt_host(n);
        gt_down(ha, pa->w, n), gt_down(hb, pb->w, n);
        if (memcmp(ha, hb, n) && bad++ < 3) printf("#   %s differs\n", pa->name);
        free(ha), free(hb);
    }
    return bad;
}

#endif
