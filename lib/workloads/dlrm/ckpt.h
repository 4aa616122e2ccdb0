// DLRM's checkpoints (man/man5/trainkit-checkpoint.5: bot_mlp.L.weight/bias, top_mlp.L.weight/
// bias, emb.T.weight; written and read by the engine) and one training step's dump for
// contrib/peers/dlrm.py.
#ifndef TK_WORKLOADS_DLRM_CKPT_H
#define TK_WORKLOADS_DLRM_CKPT_H

#include <jansson.h>

#include "workloads/dlrm/types.h"

// The table's weights_loaded: after the engine loaded the tensors, the compute copies and the
// hybrid embedding's replica (collective).
int tk_dlrm_weights_loaded(void *model, tk_err *e);
// The table's dump_step: the named tensors of one step for contrib/peers/dlrm.py: the weights
// BEFORE the step (same names as a checkpoint), the batch ("batch.label" U8, "batch.dense" I32,
// "batch.cat" I32), "loss" F32 [1], "grad.<param>" F32 for the dense parameters and "grad.emb_out"
// F32 (B, T, D) (the gradient w.r.t. the looked-up vectors: the tables' gradient is never formed;
// widened from bf16 on the bf16 path, where the model holds it in bf16). Runs the workload's step
// (tk_dlrm_fwd_bwd with its sparse update, tk_dlrm_after_update) on the batch in the input
// buffers; the engine's update of the dense span would change nothing the dump holds (the
// gradients stay, the weights are those before the step). One rank only.
int tk_dlrm_dump_step(void *model, const char *path, tk_err *e);

#endif
