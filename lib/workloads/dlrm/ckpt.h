// DLRM's checkpoints (man/man5/trainkit-checkpoint.5: bot_mlp.L.weight/bias, top_mlp.L.weight/
// bias, emb.T.weight) and one training step's dump for contrib/peers/dlrm.py.
#ifndef TK_WORKLOADS_DLRM_CKPT_H
#define TK_WORKLOADS_DLRM_CKPT_H

#include <jansson.h>

#include "workloads/dlrm/types.h"

// meta: object of strings (borrowed). Several ranks: the file is the one-rank file; rank 0 writes
// it, every rank returns the same status. Loading: every rank reads the dense weights and its own
// tables, so a file loads under any world size; *meta (may be NULL) gets a new reference to the
// file's metadata.
int tk_dlrm_save(tk_dlrm *m, const char *path, const json_t *meta, tk_err *e);
int tk_dlrm_load(tk_dlrm *m, const char *path, json_t **meta, tk_err *e);
// After the tensors were loaded: the compute copies and the hybrid embedding's replica.
int tk_dlrm_weights_loaded(tk_dlrm *m, tk_err *e);
// Writes the named tensors of one step for contrib/peers/dlrm.py: the weights BEFORE the step
// (same names as a checkpoint), the batch ("batch.label" U8, "batch.dense" I32, "batch.cat" I32),
// "loss" F32 [1], "grad.<param>" F32 for the dense parameters and "grad.emb_out" F32 (B, T, D)
// (the gradient w.r.t. the looked-up vectors: the tables' gradient is never formed; widened from
// bf16 on the bf16 path, where the model holds it in bf16).
// Runs the whole step (tk_dlrm_train_step) on the batch in the input buffers. One rank only.
int tk_dlrm_dump_step(tk_dlrm *m, const char *path, tk_err *e);

#endif
