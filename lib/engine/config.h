// Workload configuration files (share/workloads/NAME/*.json, man/man5/trainkit-config.5): JSON
// with a "workload" name, the workload's own sections ("model", "data", ...) and the sections
// the engine reads for every workload: "train" (batch, epochs, seed, evaluation cadence),
// "optimizer" (optimizer and learning-rate schedule) and "target" (metric and value). Values can
// be overridden from the command line ("--set KEY=VALUE", dotted keys). Unknown keys are errors.
// The helpers below are also what workloads parse their sections with, so every config error
// reads the same: "FILE: $.model.embedding_dim: expected an integer in [1, 4096]".
#ifndef TK_ENGINE_CONFIG_H
#define TK_ENGINE_CONFIG_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "engine/cfg.h"
#include "engine/optim_config.h"

#ifdef __cplusplus
extern "C" {
#endif

// The sections every workload shares, parsed by the engine.
typedef struct tk_run_cfg {
    int64_t batch;              // train.global_batch_size
    int max_epochs;             // train.max_epochs
    int64_t max_steps;          // train.max_steps (0: no limit beyond the epochs)
    uint64_t seed;              // train.seed
    int evals_per_epoch;        // train.evals_per_epoch (0: by eval_every_samples)
    int64_t eval_every_samples; // train.eval_every_samples (0: by evals_per_epoch)
    int64_t eval_offset_samples;// train.eval_offset_samples: the first evaluation's point, after
                                // which they come every eval_every_samples (0: at eval_every_samples)
    char metric[32];            // target.metric
    double target;              // target.<metric>
    int64_t steps_per_epoch;    // training: the data's records / global batch (0 until known)
    tk_opt_config opt;          // "optimizer": parsed once the steps per epoch are known
                                // (tk_instance_optimizer); zero until then
} tk_run_cfg;

// Reads a JSON config file (TK_EIO when unreadable, TK_EDATA with the line when not JSON).
int tk_config_load(const char *path, json_t **root, tk_err *e);
// Applies "KEY=VALUE" (VALUE parsed as JSON, else taken as a string). The key must exist, except
// under the top-level sections named in creatable (NULL terminated, may be NULL), where it is
// added (the workload's parser then checks it).
int tk_config_override(json_t *root, const char *kv, const char *const *creatable, tk_err *e);
// Parses "train" and "target" (metric must be the workload's; "optimizer" is parsed later, by
// tk_optimizer_config, when the steps per epoch are known), and checks the top
// level holds nothing but "workload", "name", "description", "model", "data", "synthetic", those
// three and the workload's extra sections (NULL terminated, may be NULL).
int tk_run_config_parse(json_t *root, const char *path, const char *workload, const char *metric,
                        const char *const *sections, tk_run_cfg *run, tk_err *e);
// FNV-1a 64 of the compact, key-sorted JSON of what determines the training trajectory: "model",
// "optimizer", the global batch size and the seed (not epochs, evaluation cadence or the
// workload's execution sections, which a resumed run may change).
uint64_t tk_config_hash(const json_t *effective);

#ifdef __cplusplus
}
#endif

#endif
