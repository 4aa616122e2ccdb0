// MLPerf RNN-T's MLLOG keys (closed_rnnt of the training rules 1.0.0 and 1.1.0, share/compliance/
// training-1.{0,1}.0/closed_rnnt.json) and where each value comes from, for the rnnt workload's
// table (workload.h: opt_mllog, mllog_hparams, mllog_weights); and the "eval" section's parser
// (eval_max_prediction_symbols, max_duration); lib/workloads/rnnt/workload.c uses them.
#ifndef TK_WORKLOADS_RNNT_MLLOG_H
#define TK_WORKLOADS_RNNT_MLLOG_H

#include <jansson.h>

#include "engine/optimizer.h"

#ifdef __cplusplus
extern "C" {
#endif

// The optimizer's keys, logged by the engine from the parsed "optimizer" section
// (tk_optimizer_mllog): the workload's opt_mllog.
extern const tk_opt_mllog_key rnnt_opt_mllog[];

// The other keys of the rules and where their values come from (the workload logs them in
// mllog_hparams and mllog_weights; the engine logs those with source "engine").
typedef struct rnnt_mllog_src {
    const char *key;    // the MLLOG key, as the rules spell it ("perturbaton" included)
    const char *source; // "engine", "const: VALUE", or the config's dotted key ("data.max_duration")
} rnnt_mllog_src;
extern const rnnt_mllog_src rnnt_mllog_sources[]; // {NULL} terminated

// closed_rnnt's weights_initialization tensor names (the rules' list; one event each, metadata
// {"tensor": NAME}), NULL terminated.
extern const char *const rnnt_mllog_tensors[];

// The "eval" section: max_symbols, the greedy decoder's labels an utterance at most (MLPerf's
// eval_max_prediction_symbols, which the rules fix at 300; integer in [1, 100000], default 300);
// max_duration, the longest evaluation utterance in seconds that the model's buffers are sized
// for (the evaluation set keeps every utterance, as the reference's input_val: dev-clean's longest
// is 32.6 s; number in [0.1, 100000], default 35).
typedef struct rnnt_eval_cfg {
    int max_symbols;
    double max_duration;
} rnnt_eval_cfg;
// Parses root's "eval" (absent: the defaults); unknown keys and values out of range are
// TK_EDATA "FILE: $.eval.KEY: ...".
int rnnt_eval_cfg_parse(json_t *root, const char *path, rnnt_eval_cfg *c, tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
