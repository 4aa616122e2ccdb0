// One model of some workload, made and driven the same way by train-step and evaluate: its
// configuration (the engine's sections and the workload's), its flat buffers, the device scalars
// the schedule and the loss use, the optimizer, the ranks' plumbing, and the workload's model
// behind its function table (workload.h).
#ifndef TK_ENGINE_INSTANCE_H
#define TK_ENGINE_INSTANCE_H

#include <jansson.h>

#include "engine/config.h"
#include "engine/dist.h"
#include "engine/optimizer.h"
#include "engine/params.h"
#include "engine/workload.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_instance {
    const tk_workload *wl;
    void *cfg;               // the workload's parsed configuration
    tk_run_cfg run;          // the engine's sections
    json_t *effective;       // the effective configuration (overrides applied, values resolved)
    char path[4096];         // where it came from (for messages)
    uint64_t hash;           // tk_config_hash(effective)
    tk_ctx *c;
    tk_dist dist;
    tk_params P;
    tk_optimizer opt;          // training only (tk_instance_optimizer)
    void *scalars;           // device: lr (f32), step (i64), loss_acc (2 x f64)
    float *lr;
    int64_t *step;
    double *loss_acc;
    void *model;
    tk_arena acts;           // the model's activations (tk_wl_env.acts)
    tk_prof *prof;           // --profile's per-phase timer (tk_instance_profile), or NULL
    size_t bucket;           // floats an all-reduce bucket holds (grads_ready)
    tk_opt_shard shard;      // optimizer.distributed with several ranks: shard.comm set, the
                             // buckets reduce-scattered (engine/optimizer.h)
    int sm_margin;           // SMs the GEMMs leave to the overlapped all-reduce (TK_GEMM_SM_MARGIN)
    size_t reduced_from;     // this step: the dense span's [reduced_from, dense_n) is being reduced
    float *ready_copy;       // TK_CHECK_GRADS_READY (instance.c): the reported gradients' values
    size_t checked_from;     // this step: [checked_from, dense_n) reported final
} tk_instance;

// Reads the configuration: root (a reference is taken) with the overrides "KEY=VALUE" applied,
// the workload its "workload" names (TK_EUSAGE listing the known ones when none), the engine's
// sections, then the workload's, given the training data's schema meta (NULL: none).
int tk_instance_config(tk_instance *I, json_t *root, const char *path, char *const *sets, int nsets,
                       const char *data_meta, tk_err *e);
// Makes the model on c (comm NULL: one rank, unless the workload wants one of world 1 and
// passes it) and its buffers: first the precision's check (the cpu backend refuses bf16: TK_EUSAGE
// "WORKLOAD: precision bf16 needs the cuda backend"), then the workload's create (a failed one's
// model destroyed), then, on cuda, its warm-up step (workload.h warmup). After tk_instance_config.
int tk_instance_create(tk_instance *I, tk_ctx *c, tk_comm *comm, double comm_timeout, tk_err *e);
void tk_instance_destroy(tk_instance *I); // the configuration too; the context and comm are the caller's

// Training: parses the configuration's "optimizer" section (steps_per_epoch converts its keys in
// epochs) and prepares the optimizer over the model's dense span (its state joins the tensors).
int tk_instance_optimizer(tk_instance *I, int64_t steps_per_epoch, tk_err *e);
// One training iteration on the input batch, capturable: the schedule, the workload's forward and
// backward, the gradient all-reduce over the ranks (unless the workload does it), the optimizer,
// the workload's after_update.
int tk_instance_step(tk_instance *I, tk_err *e);
// train-step --profile: starts the per-phase timer the model marks (tk_wl_env.prof), for a workload
// with profile_marks (else nothing).
int tk_instance_profile(tk_instance *I, tk_err *e);
// Host reads and writes at log points.
int tk_instance_read_loss(tk_instance *I, double *mean, int reset, tk_err *e);
int tk_instance_write_step(tk_instance *I, int64_t step, tk_err *e);
// The model's weights from seed (a run that does not resume, tests): the workload's init_weights
// draws them, its weights_loaded (NULL: none) refreshes what derives from them, the step and the
// loss accumulator are zeroed, and the backend synced.
int tk_instance_init_weights(tk_instance *I, uint64_t seed, tk_err *e);
// With the optimizer's "ema" (the weights' moving average, kernels/ema.h): exchanges the model's
// dense weights and the average, refreshes the compute copy and calls the workload's
// weights_loaded. The engine calls it around each in-process evaluation, so evaluation runs on the
// average and training resumes on its own weights bit for bit. Without an average: nothing.
int tk_instance_ema_swap(tk_instance *I, tk_err *e);
// Checkpoints of the model's tensors and the optimizer's state (lib/engine/ckpt.h). Load: every
// tensor this rank holds (TK_CKPT_MODEL_ONLY: not the optimizer's state), then the workload's
// weights_loaded; *verified as tk_ckpt_load.
int tk_instance_save(tk_instance *I, const char *path, const json_t *meta, tk_err *e);
int tk_instance_load(tk_instance *I, const char *path, int flags, json_t **meta, int *verified, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
