// DLRM's model: creation (its tensors in the engine's flat buffers), the reference
// initialization, the low-precision copies, the inputs. The engine makes and drives it through
// tk_workload_dlrm (workload.c), tests through the engine's tk_instance (engine/instance.h).
#ifndef TK_WORKLOADS_DLRM_MODEL_H
#define TK_WORKLOADS_DLRM_MODEL_H

#include "engine/workload.h"
#include "workloads/dlrm/types.h"

// The model inside the engine: its tensors go into env->params, its scalars are the engine's; one
// rank (env->dist->comm NULL) or hybrid parallel over the communicator's ranks (step.h; a world of
// 1 included). The global batch must be a multiple of the world size.
int tk_dlrm_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e);
void tk_dlrm_destroy(void *model);
// MLPerf reference initialization from Philox(seed): embeddings U(-sqrt(1/rows), sqrt(1/rows));
// weights N(0, sqrt(2/(in+out))); biases N(0, sqrt(1/out)).
int tk_dlrm_init_weights(void *model, uint64_t seed, tk_err *e);
// The bf16 path: layer 0's padded bf16 weights from its fp32 master (after every update), and all
// compute copies after anything but the optimizer changed the master weights.
int tk_dlrm_cast_w0p(tk_dlrm *m, tk_err *e);
int tk_dlrm_refresh_copies(tk_dlrm *m, tk_err *e);
// The table's batch: "batch.label" u8 (b), "batch.dense" i32 (b, num_dense), "batch.cat" i32 (b, T),
// this rank's b = B/W samples of the global batch, in the model's device input buffers.
int tk_dlrm_batch(const void *model, tk_wl_field *f);

#endif
