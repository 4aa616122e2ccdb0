// DLRM training/eval records from .tks shards (man/man5/tks.5) written by `prep criteo`:
// fields "label" u8, "dense" i32[13] (raw counts), "cat" i32[26] (ids per feature). Files are read
// in the order given (a directory means its *.tks files in name order), frame by frame, so the
// data order is the dataset's order (as MLPerf DLRM trains) and a position is one record index.
#ifndef TK_WORKLOADS_DLRM_DATA_H
#define TK_WORKLOADS_DLRM_DATA_H

#include <stdint.h>

#include "core/err.h"
#include "gpu/gpu.h"

typedef struct tk_dlrm_data tk_dlrm_data;

// paths: files or directories. num_dense/num_cat: the shapes the model expects.
int tk_dlrm_data_open(tk_dlrm_data **d, char *const *paths, int npaths, int num_dense,
                      int num_cat, tk_err *e);
void tk_dlrm_data_close(tk_dlrm_data *d);
uint64_t tk_dlrm_data_count(const tk_dlrm_data *d);
// The schema meta JSON of the first file ("{}" if none).
const char *tk_dlrm_data_meta(const tk_dlrm_data *d);
// Position the reader at global record index rec (0 <= rec <= count).
int tk_dlrm_data_seek(tk_dlrm_data *d, uint64_t rec, tk_err *e);
// Reads up to n records at the current position; *got < n only at the end of the data.
// Categorical ids are folded into the tables: id % rows[f] (ids must be >= 0).
int tk_dlrm_data_next(tk_dlrm_data *d, int n, const int64_t *rows, uint8_t *label,
                      int32_t *dense, int32_t *cat, int *got, tk_err *e);

// Batch `step` of the training loop: the B records at ((step % steps_per_epoch) * B), so every
// epoch restarts at record 0 and drops the last partial batch (as MLPerf DLRM trains, in the
// dataset's order).
int tk_dlrm_data_batch(tk_dlrm_data *d, int64_t step, int64_t steps_per_epoch, int B, const int64_t *rows,
                       uint8_t *label, int32_t *dense, int32_t *cat, tk_err *e);

#endif
