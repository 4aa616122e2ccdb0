// DLRM's model: creation (its tensors in the engine's flat buffers), the reference
// initialization, the low-precision copies, the inputs, and the host reads of the loss and the
// step counter. The model runs alone too (tests, tools): tk_dlrm_create* then make what the
// engine would give (flat buffers, device scalars, a tk_dist).
#ifndef TK_WORKLOADS_DLRM_MODEL_H
#define TK_WORKLOADS_DLRM_MODEL_H

#include "engine/workload.h"
#include "workloads/dlrm/types.h"

// The model inside the engine: its tensors go into env->params, its scalars are the engine's.
int tk_dlrm_create_env(tk_dlrm **m, const tk_dlrm_config *cfg, const tk_wl_env *env, tk_err *e);
// On its own, one rank (comm NULL) or hybrid parallel over comm's ranks (tk_dlrm_create_dist: see
// step.h for the several-ranks step). The global batch must be a multiple of the world size.
int tk_dlrm_create(tk_dlrm **m, tk_ctx *c, const tk_dlrm_config *cfg, tk_err *e);
int tk_dlrm_create_dist(tk_dlrm **m, tk_ctx *c, const tk_dlrm_config *cfg, tk_comm *comm, double timeout_s,
                        tk_err *e);
void tk_dlrm_destroy(tk_dlrm *m);
// MLPerf reference initialization from Philox(seed): embeddings U(-sqrt(1/rows), sqrt(1/rows));
// weights N(0, sqrt(2/(in+out))); biases N(0, sqrt(1/out)). Zeroes the step counter.
int tk_dlrm_init_weights(tk_dlrm *m, uint64_t seed, tk_err *e);
// The bf16 path: layer 0's padded bf16 weights from its fp32 master (after every update), and all
// compute copies after anything but the optimizer changed the master weights.
int tk_dlrm_cast_w0p(tk_dlrm *m, tk_err *e);
int tk_dlrm_refresh_copies(tk_dlrm *m, tk_err *e);
// Copies n <= batch host records (label u8, dense i32 x num_dense, cat i32 x T) into the input
// buffers (and plans the hybrid exchange of the batch, when on).
int tk_dlrm_set_batch(tk_dlrm *m, const uint8_t *label, const int32_t *dense, const int32_t *cat, int n,
                      tk_err *e);
// Host reads (log points only): mean loss since the last reset (several ranks: the global mean,
// the ranks' accumulators gathered and summed in rank order), and the update counter.
int tk_dlrm_read_loss(tk_dlrm *m, double *mean_loss, int reset, tk_err *e);
int tk_dlrm_read_step(tk_dlrm *m, int64_t *step, tk_err *e);
int tk_dlrm_write_step(tk_dlrm *m, int64_t step, tk_err *e);
// A bounded wait for the queued work (lib/engine/dist.h).
int tk_dlrm_sync(tk_dlrm *m, tk_err *e);

#endif
