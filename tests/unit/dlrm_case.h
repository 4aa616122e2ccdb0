// What the DLRM tests share (tests/unit/test_dlrm*.c, tests/gpu/test_dlrm_step.c): the model made
// and trained through the engine's instance (engine/instance.h), as train-step makes it, and the
// host's side of its input buffers and step counter.
#ifndef TK_TEST_DLRM_CASE_H
#define TK_TEST_DLRM_CASE_H

#include <jansson.h>

#include "engine/instance.h"
#include "workloads/dlrm/dlrm.h"

// *I from the config text with the overrides "KEY=VALUE" ("cfg" in messages), on c (comm: several
// ranks, or one through a communicator of world 1; NULL: one rank, the plain step), with its
// optimizer and the initial weights of the config's train.seed. tk_instance_destroy(I) after any
// outcome.
static inline int dlrm_make(tk_instance *I, const char *text, char *const *sets, int nsets, tk_ctx *c,
                            tk_comm *comm, double timeout, tk_err *e) {
    json_t *root = json_loads(text, 0, NULL);
    int rc = tk_instance_config(I, root, "cfg", sets, nsets, NULL, e);
    json_decref(root);
    if (!rc) rc = tk_instance_create(I, c, comm, timeout, e);
    if (!rc) rc = tk_instance_optimizer(I, 1, e);
    if (!rc) rc = tk_instance_init_weights(I, I->run.seed, e);
    return rc;
}

// Of the global batch in host arrays label (n), dense (n, num_dense), cat (n, T): what the
// training reader gives this rank (workloads/dlrm/data.h), its samples (rows [rank*b, rank*b + b)
// of the n: labels, dense features and ids), into the model's input buffers (the table's batch),
// on the compute stream.
static inline int dlrm_put(tk_instance *I, const uint8_t *label, const int32_t *dense, const int32_t *cat, int n,
                           tk_err *e) {
    const tk_dlrm *m = I->model;
    const int nd = m->cfg.num_dense, T = m->cfg.num_tables, r0 = m->rank * m->b;
    const int nr = n - r0 < 0 ? 0 : n - r0 < m->b ? n - r0 : m->b;
    tk_wl_field f[TK_BATCH_MAX_FIELDS];
    if (I->wl->batch(I->model, f) != 3) return tk_err_set(e, TK_EINTERNAL, "dlrm: not a batch of 3 fields");
    if (f[2].shape[0] != m->b) return tk_err_set(e, TK_EINTERNAL, "dlrm: batch.cat is not this rank's share");
    if (nr <= 0) return 0;
    TRY(tk_memcpy_h2d(I->c, f[0].input, label + r0, (size_t)nr, TK_STREAM_COMPUTE, e));
    TRY(tk_memcpy_h2d(I->c, f[1].input, dense + (size_t)r0 * nd, (size_t)nr * nd * 4, TK_STREAM_COMPUTE, e));
    return tk_memcpy_h2d(I->c, f[2].input, cat + (size_t)r0 * T, (size_t)nr * T * 4, TK_STREAM_COMPUTE, e);
}

// The update counter (after the queued work).
static inline int dlrm_read_step(tk_instance *I, int64_t *step, tk_err *e) {
    TRY(tk_dist_sync(&I->dist, e));
    TRY(tk_memcpy_d2h(I->c, step, I->step, 8, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(I->c, e);
}

#endif
