// The engine's optimizer over a model's flat parameter buffer (params.h): the configuration's
// "optimizer" section, the learning-rate schedule computed on the device from the device step
// counter, and the update of the dense span (the tensors flagged TK_PARAM_DENSE) with its state in
// one more flat buffer of the same layout. Everything here is capturable in a CUDA graph.
#ifndef TK_ENGINE_OPTIM_H
#define TK_ENGINE_OPTIM_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "engine/params.h"
#include "lr_schedule.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_optim_cfg {
    char name[16];       // "sgd"
    tk_lr_sched lr;      // the schedule (kernels/lr_schedule.h)
} tk_optim_cfg;

// Parses root's "optimizer" section (file names it in errors). Keys: man/man5/trainkit-config.5.
int tk_optim_config_parse(json_t *root, const char *file, tk_optim_cfg *o, tk_err *e);
// The learning rate of 0-based update index step (the host's reading of the schedule).
double tk_optim_lr_at(const tk_optim_cfg *o, int64_t step);

typedef struct tk_optim {
    tk_optim_cfg cfg;
    tk_ctx *c;
    float *state;        // the optimizer's state (none for plain SGD)
} tk_optim;

// Prepares the update of P's dense span (after tk_params_alloc): its state, if any, becomes extern
// tensors of P ("optimizer.NAME.TENSOR"), so checkpoints carry it.
int tk_optim_init(tk_optim *o, const tk_optim_cfg *cfg, tk_params *P, tk_err *e);
void tk_optim_release(tk_optim *o);
// The schedule: lr (device f32) for update *step (device i64), which it then increments.
int tk_optim_schedule(tk_optim *o, int64_t *step, float *lr, tk_err *e);
// One update of P's dense span with its gradients at lr (device); step (device) counts the updates
// including this one. Writes P's low-precision compute copy too, when it has one.
int tk_optim_update(tk_optim *o, tk_params *P, const float *lr, const int64_t *step, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
