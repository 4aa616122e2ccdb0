// The MLLOG preamble of a run, between init_start and init_stop: what MLPerf's rules require of
// every submission (its benchmark, org, division, status, platform), the run's seed and batch, the
// workload's hyperparameters, the training and evaluation sample counts, the workload's
// weight-initialization lines.
#ifndef TK_ENGINE_PREAMBLE_H
#define TK_ENGINE_PREAMBLE_H

#include <stdint.h>

#include "core/err.h"
#include "core/mllog.h"
#include "engine/instance.h"

#ifdef __cplusplus
extern "C" {
#endif

// eval_samples < 0: no in-process evaluation set (the evaluator's first result gives the count).
int tk_engine_preamble(tk_mllog *L, const tk_instance *I, const char *org, const char *platform, int64_t train_samples,
                       int64_t eval_samples, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
