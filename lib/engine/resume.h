// A run's checkpoints (man/man5/trainkit-checkpoint.5): the file a run writes with its metadata,
// and the two ways a run starts from one: --resume (the whole state, same configuration) and
// --init-checkpoint (the model's weights only).
#ifndef TK_ENGINE_RESUME_H
#define TK_ENGINE_RESUME_H

#include <stdint.h>

#include "core/err.h"
#include "engine/instance.h"

#ifdef __cplusplus
extern "C" {
#endif

// Writes I's tensors and the metadata of a run at step (of batch samples each, steps_per_epoch to
// an epoch) to path. Collective, as tk_ckpt_save.
int tk_resume_save(tk_instance *I, const char *path, int64_t step, int64_t batch, int64_t steps_per_epoch,
                   tk_err *e);
// --resume: loads every tensor (the optimizer's state too) of a checkpoint of I's configuration
// (another config_hash is TK_EUSAGE) and sets I's step to its step (*step). *verified: 0 when the
// file has no checksums (written by an older trainkit).
int tk_resume_load(tk_instance *I, const char *path, int64_t *step, int *verified, tk_err *e);
// --init-checkpoint: the weights to start from (MLPerf BERT's phase 2 starts from a converted
// phase-1 checkpoint): a foreign file through the workload's importer, else a checkpoint of the
// same workload by tensor name (not its optimizer state or step). *verified: 0 when the file has
// no checksums (a file of another writer).
int tk_resume_init(tk_instance *I, const char *path, int *verified, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
