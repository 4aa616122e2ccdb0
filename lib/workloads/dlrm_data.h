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

// A parallel loader for the training loop: nworkers threads, each with its own reader over the
// same paths, decode batches ahead of the loop into pinned host buffers (tk_host_alloc_pinned of
// ctx c: plain memory on the cpu backend). Batch s (first_step <= s < last_step) is the B records
// at ((s % steps_per_epoch) * B): the loop's order, every epoch restarting at record 0 and
// dropping the last partial batch, so the batches are bit-identical to seek + tk_dlrm_data_next.
// Worker s % nworkers decodes batch s into its own slot; the loop takes batches in order with
// _get (blocks until decoded; an error of the worker comes back here) and hands each slot back
// with _put once its contents are on the device, which lets the worker decode batch s + nworkers.
typedef struct tk_dlrm_loader tk_dlrm_loader;
int tk_dlrm_loader_start(tk_dlrm_loader **l, tk_ctx *c, char *const *paths, int npaths,
                         int num_dense, int num_cat, const int64_t *rows, int B,
                         int64_t steps_per_epoch, int64_t first_step, int64_t last_step,
                         int nworkers, tk_err *e);
int tk_dlrm_loader_get(tk_dlrm_loader *l, int64_t step, uint8_t **label, int32_t **dense,
                       int32_t **cat, tk_err *e);
void tk_dlrm_loader_put(tk_dlrm_loader *l, int64_t step);
// Stops the workers (mid-run is fine) and frees everything; l may be NULL.
void tk_dlrm_loader_stop(tk_dlrm_loader *l);

#endif
