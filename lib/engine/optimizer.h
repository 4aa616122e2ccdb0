// The engine's optimizer over a model's flat parameter buffer (params.h): the configuration's
// "optimizer" section (engine/optim_config.h, man/man5/trainkit-optimizer.5), the learning-rate
// schedule computed on the device from the device step counter, and the update of the dense span
// (the tensors flagged TK_PARAM_DENSE, one segment each with its decay and adaptation flags) by
// kernels/optim.h, its state in one more flat buffer of the dense span's layout. Everything here
// is capturable in a CUDA graph.
#ifndef TK_ENGINE_OPTIMIZER_H
#define TK_ENGINE_OPTIMIZER_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "engine/optim_config.h"
#include "engine/params.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_optimizer {
    tk_opt_config cfg;
    tk_ctx *c;
    int plain_sgd;           // SGD without momentum, decay, clipping or skipping: tk_sgd_update
    float *state;            // tk_optim_state_floats(kind) * dense_n floats (NULL: none)
    tk_opt_seg *seg_host, *seg_dev;
    int nseg;
    void *ws;
} tk_optimizer;

// The "optimizer" section of root (file names it in errors); steps_per_epoch converts the keys
// given in epochs (0: not known, such keys are refused).
int tk_optimizer_config(json_t *root, const char *file, int64_t steps_per_epoch, tk_opt_config *cfg, tk_err *e);
// The learning rate of 0-based update index step (the host's reading of the schedule).
double tk_optimizer_lr_at(const tk_opt_config *cfg, int64_t step);

// Prepares the update of P's dense span (after tk_params_alloc): its segments, workspace and
// state, the state's tensors added to P as extern views ("optimizer.m.NAME", "optimizer.v.NAME"),
// so checkpoints carry it and --resume is bit-identical.
int tk_optimizer_init(tk_optimizer *o, const tk_opt_config *cfg, tk_params *P, tk_err *e);
void tk_optimizer_release(tk_optimizer *o);
// The schedule: lr (device f32) for update *step (device i64), which it then increments.
int tk_optimizer_schedule(tk_optimizer *o, int64_t *step, float *lr, tk_err *e);
// One update of P's dense span with its gradients at lr; step counts the updates including this
// one (decremented when a non-finite gradient is skipped). Writes P's compute copy too.
int tk_optimizer_update(tk_optimizer *o, tk_params *P, const float *lr, int64_t *step, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
