// DLRM's configuration (share/workloads/dlrm/*.json, train-step(1)): the "model" and "data"
// sections, and "parallel" (how the ranks split the work: the hybrid embedding, the exchange
// step on one rank; not part of the config hash, a resumed run may change it). "train",
// "optimizer" and "target" are the engine's (lib/engine/config.h).
#ifndef TK_WORKLOADS_DLRM_CONFIG_H
#define TK_WORKLOADS_DLRM_CONFIG_H

#include <jansson.h>

#include "core/err.h"
#include "engine/config.h"
#include "workloads/dlrm/types.h"

// The precisions it supports (its table's, model.precision: engine/cfg.h tk_cfg_precision).
extern const char *const tk_dlrm_precisions[];

// The table's config: the workload's sections of root (overrides applied) into a new
// tk_dlrm_config *cfg (tk_dlrm_config_free), given the engine's parsed run config (the global
// batch is copied from it). Table sizes: "table_sizes" in the config, or, when it is "data", the
// "cardinalities" of the dataset's schema meta (data_meta, may be NULL), capped at
// "max_table_rows"; the resolved sizes are written back into root.
int tk_dlrm_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **cfg,
                         tk_err *e);
void tk_dlrm_config_free(void *cfg);
// The table's wants_comm: with the hybrid embedding or --force-exchange, the exchange step over a
// communicator even on one rank.
int tk_dlrm_wants_comm(const void *cfg);

extern const char *const tk_dlrm_sections[]; // {"parallel", NULL}

#endif
