// The RNN-T workload (workload.c) as the device tests and benchmarks drive it outside the engine's
// loop: its captured step's padding, and a batch made the step's input the way the engine's loader,
// staging and use make it.
#ifndef TK_WORKLOADS_RNNT_WORKLOAD_H
#define TK_WORKLOADS_RNNT_WORKLOAD_H

#include "core/err.h"

// The training step's plan pads a batch to multiples of RNNT_PAD_FRAMES output frames (30 ms each)
// and RNNT_PAD_LABELS labels, the joint's rows to one of RNNT_ROW_LEVELS steps of the padded
// lattice (model.h rnnt_plan_pad): one CUDA graph per (frames, labels, level).
#define RNNT_PAD_FRAMES 16
#define RNNT_PAD_LABELS 8
#define RNNT_ROW_LEVELS 16

// Batch `fields` (host arrays in data.h's RNNT_F_* order, as the training reader writes them: B
// utterances of at most the config's max_duration, its token width) made the input of model (the
// workload's, from tk_workload_rnnt's create): its plan built here as a loader thread builds it,
// every field and the plan copied into the input buffers (synchronous copies), its extents the
// step's (graph_key). The fields' and plan's errors as the reader's.
int rnnt_wl_input(void *model, void *const *fields, tk_err *e);

#endif
