// BERT's functions, by file: config.c (the configuration), model.c (tensors, initialization,
// buffers, the input fields), step.c (forward, backward, the training step), data.c (the .tks
// reader and the eval set), eval.c (masked-LM accuracy), ckpt.c (Hugging Face import, the step
// dump), the engine's profile.h (--profile), workload.c (the engine's table, the staging hooks and
// the MLLOG keys). Its ops, their dispatchers included, are in kernels/.
//
// The functions the table names have the types of its members (engine/workload.h): the model is
// the tk_bert, the configuration the tk_bert_config, the reader the tk_bert_data and the eval set
// the engine's tk_evalset (types.h) that they take as void *.
#ifndef TK_WORKLOADS_BERT_BERT_H
#define TK_WORKLOADS_BERT_BERT_H

#include "engine/config.h"
#include "engine/workload.h"
#include "workloads/bert/types.h"

// The precisions it supports (its table's, model.precision: engine/cfg.h tk_cfg_precision).
extern const char *const tk_bert_precisions[];

// ---- config.c ----
// The "model" and "data" sections into a new tk_bert_config (*cfg).
int tk_bert_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **cfg,
                         tk_err *e);
void tk_bert_config_free(void *cfg);

// ---- model.c ----
int tk_bert_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e);
void tk_bert_destroy(void *model);
int tk_bert_init_weights(void *model, uint64_t seed, tk_err *e);
// The compute copy after the masters changed (a load, an import).
int tk_bert_weights_loaded(void *model, tk_err *e);
// The table's batch: 7 fields (those of tk_bert_data_read) in the model's device buffers.
int tk_bert_batch(const void *model, tk_wl_field *f);

// ---- step.c ----
// Forward and backward of the input batch (this rank's rows), the loss into loss_acc, the dense
// gradients into the params' gradient span. Capturable.
int tk_bert_fwd_bwd(void *model, tk_err *e);
// The layers' rows for a global batch of these lengths (host memory): N, or with model.unpad this
// rank's real tokens rounded up to model.unpad_bucket (at most N). The caller sets m->rows to it
// before the step (the engine's staging hooks do; N at creation).
int64_t tk_bert_rows_for(const tk_bert *m, const int32_t *len);
// Forward of b sequences for evaluation (no dropout): the masked-LM logits of the gathered rows,
// the correct predictions added to m->counts.
int tk_bert_eval_batch(tk_bert *m, const int32_t *ids, const uint8_t *seg, const int32_t *len, const int32_t *pos,
                       const int32_t *mid, const int32_t *nmask, tk_err *e);

// ---- data.c ----
typedef struct tk_bert_data tk_bert_data;
// A reader (*rd, a tk_bert_data) of the .tks files of prep bert (man/man5/trainkit-bert.5), checked
// against the configuration's L, P, vocab and types, that reads global batches of cfg->batch
// (rank and world unused: every rank reads the whole batch).
int tk_bert_data_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e);
void tk_bert_data_close(void *rd);
uint64_t tk_bert_data_count(void *rd);
// n records from record `first` into host arrays of the model's shapes (ids, pos, mid, nmask, len,
// nsp as i32; seg u8; nsp may be NULL); every record checked (TK_EDATA naming the file and record).
int tk_bert_data_read(tk_bert_data *d, uint64_t first, int n, int32_t *ids, uint8_t *seg, int32_t *len, int32_t *pos,
                      int32_t *mid, int32_t *nmask, int32_t *nsp, tk_err *e);
// Global batch `step` into the 7 fields of tk_bert_batch (with model.unpad in the order below).
int tk_bert_read_batch(void *rd, int64_t step, int64_t steps_per_epoch, void *const *fields, tk_err *e);
// The order of a global batch of n sequences of these lengths whose contiguous slices of n / 2^k
// (the ranks' rows) hold nearly equal token counts, the same order for every world size
// (data.c): order[i] = the record at position i; tmp: n ints of scratch.
int tk_bert_balance_order(const int32_t *len, int n, int *order, int *tmp, tk_err *e);
// The eval set (*es, a tk_evalset: types.h; the engine's tk_evalset_count and tk_evalset_free)
// cached in the backend's memory.
int tk_bert_evalset_load(void *model, char *const *paths, int npaths, void **es, tk_err *e);

// ---- eval.c ----
// Masked-LM accuracy over the eval set (collective on several ranks: every rank gets it).
int tk_bert_evaluate(void *model, void *es, double *acc, tk_err *e);

// ---- ckpt.c ----
// Hugging Face BertForPreTraining safetensors (its names; LayerNorm gamma/beta accepted).
int tk_bert_import(void *model, const char *path, tk_err *e);
// The table's dump_describe (lib/engine/workload.h): the model's configuration and dropout in the
// metadata. The step is tk_bert_fwd_bwd.
int tk_bert_dump_describe(void *model, tk_wl_dump *d, tk_err *e);

// ---- per-phase timing (train-step --profile: lib/engine/profile.h) ----
// At most TK_BERT_PROF_MAX marks a step, every one on the compute stream at the step's phase
// boundaries: mark the end of phase `name` (NULL: the step's start); begin (1) or end (0) a step.
#define TK_BERT_PROF_MAX 512
static inline int tk_bert_prof_mark(tk_bert *m, const char *name, tk_err *e) {
    return tk_prof_mark(*m->env.prof, m->c, name, TK_STREAM_COMPUTE, e);
}
static inline void tk_bert_prof_step(tk_bert *m, int begin) { tk_prof_step(*m->env.prof, begin); }

#endif
