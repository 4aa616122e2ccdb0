// DLRM's checkpoints (man/man5/trainkit-checkpoint.5: bot_mlp.L.weight/bias, top_mlp.L.weight/
// bias, emb.T.weight; written and read by the engine) and what one training step's dump for
// contrib/peers/dlrm.py holds of DLRM's own.
#ifndef TK_WORKLOADS_DLRM_CKPT_H
#define TK_WORKLOADS_DLRM_CKPT_H

#include <jansson.h>

#include "engine/workload.h"
#include "workloads/dlrm/types.h"

// The table's weights_loaded: after the engine loaded the tensors, the compute copies and the
// hybrid embedding's replica (collective).
int tk_dlrm_weights_loaded(void *model, tk_err *e);
// The table's dump_describe (the engine writes the dump, the batch as read included,
// lib/engine/workload.h): "grad.emb_out" F32 (B, T, D), the gradient w.r.t. the looked-up vectors
// (the tables' gradient is never formed; widened from bf16 on the bf16 path, where the model holds
// it in bf16). The step is tk_dlrm_fwd_bwd with its sparse update, then tk_dlrm_after_update; the
// dump's weights are those before it. The plain one-rank step: the engine makes no communicator
// for a dump.
int tk_dlrm_dump_describe(void *model, tk_wl_dump *d, tk_err *e);

#endif
