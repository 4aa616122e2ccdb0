// DLRM's configuration (share/workloads/dlrm/*.json, train-step(1)): the "model" and "data"
// sections, and "parallel" (how the ranks split the work: the hybrid embedding, the exchange
// step on one rank; not part of the config hash, a resumed run may change it). "train",
// "optimizer" and "target" are the engine's (lib/engine/config.h).
#ifndef TK_WORKLOADS_DLRM_CONFIG_H
#define TK_WORKLOADS_DLRM_CONFIG_H

#include <jansson.h>

#include "core/err.h"
#include "engine/config.h"
#include "engine/optimizer.h"
#include "workloads/dlrm/types.h"

// The precisions it supports (its table's, model.precision: engine/cfg.h tk_cfg_precision).
extern const char *const tk_dlrm_precisions[];

// The workload's sections of root (overrides applied), given the engine's parsed run config (its
// values are copied into cfg). Table sizes: "table_sizes" in the config, or, when it is "data",
// the "cardinalities" of the dataset's schema meta (data_meta, may be NULL), capped at
// "max_table_rows"; the resolved sizes are written back into root.
int tk_dlrm_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta,
                         tk_dlrm_config *cfg, tk_err *e);
// A whole config for the model on its own (tests, tools): applies overrides "key=value" (value
// parsed as JSON, else taken as a string; dotted keys reach into objects, e.g. "lr.base=2.0"), the
// engine's sections, then the workload's. *effective (may be NULL) gets the resulting JSON.
int tk_dlrm_config_from_json(json_t *root, const char *path, char *const *overrides, int noverrides,
                             const char *data_meta, tk_dlrm_config *cfg, json_t **effective, tk_err *e);
int tk_dlrm_config_load(const char *path, char *const *overrides, int noverrides, const char *data_meta,
                        tk_dlrm_config *cfg, json_t **effective, tk_err *e);
// The engine's trajectory hash (tk_config_hash).
uint64_t tk_dlrm_config_hash(const json_t *effective);

extern const char *const tk_dlrm_sections[]; // {"parallel", NULL}

#endif
