// The "optimizer" section of a workload configuration (man/man5/trainkit-optimizer.5): which
// optimizer (kernels/optim.h) with which hyperparameters, and which learning-rate schedule
// (kernels/lr_schedule.h), as one flat JSON object. Today's DLRM section
//   {"name": "sgd", "base_lr", "warmup_steps", "decay_start_step", "decay_steps", "poly_power", "min_lr"}
// is the "sgd" optimizer with the default "poly" schedule.
#ifndef TK_ENGINE_OPTIM_CONFIG_H
#define TK_ENGINE_OPTIM_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "lr_schedule.h"
#include "optim.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_opt_config {
    tk_opt_hp hp;
    tk_lr_sched lr;
    const char *name;      // "sgd", "adam", "adamw", "lamb", "lars" (static strings)
    const char *schedule;  // "poly", "warmup_poly", "lars_poly", "step", "cosine",
                           // "warmup_hold_exp"
    double warmup_epochs;  // as given in the config, or -1 when given in steps (for MLLOG)
    double total_epochs;   // likewise
    double ema;            // the decay of the weights' moving average evaluation runs on
                           // (kernels/ema.h), in [0, 1); 0: none
    int distributed;       // the update on each rank's share of the dense span, the norms' partial sums
                           // gathered, the weights all-gathered (engine/optimizer.h tk_opt_shard);
                           // with one rank it changes nothing. Not with lars.
    uint32_t given_int;    // bit i: key i of the section's key table was written as a JSON integer
                           // (tk_opt_config_given_int: MLLOG keeps the config's form, 37 not 37.0)
} tk_opt_config;

// Whether the section gave key as a JSON integer (an absent key, or a real: 0).
int tk_opt_config_given_int(const tk_opt_config *cfg, const char *key);

// Parses and checks obj, the optimizer object of the config file `file` at JSON path jpath
// (e.g. "optimizer"; errors then name "FILE: $.optimizer.beta1"). steps_per_epoch: optimizer
// updates per epoch, which the keys given in epochs need (0 when unknown: those keys are then
// refused). Unknown keys, keys of another optimizer or schedule, wrong types and values out of
// range give TK_EDATA. Absent optional keys take the defaults the man page lists.
int tk_opt_config_parse(const json_t *obj, const char *file, const char *jpath, int64_t steps_per_epoch,
                        tk_opt_config *cfg, tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
