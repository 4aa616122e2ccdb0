// DLRM training/eval records from .tks shards (man/man5/tks.5) written by `prep criteo`:
// fields "label" u8, "dense" i32[13] (raw counts), "cat" i32[26] (ids per feature). Files are read
// in the order given (a directory means its *.tks files in name order), frame by frame, so the
// data order is the dataset's order (as MLPerf DLRM trains) and a position is one record index.
#ifndef TK_WORKLOADS_DLRM_DATA_H
#define TK_WORKLOADS_DLRM_DATA_H

#include <stdint.h>

#include "core/err.h"
#include "workloads/dlrm/types.h"

typedef struct tk_dlrm_data tk_dlrm_data;

// The reader of the training data (the table's reader_open, *rd a tk_dlrm_data) or of the eval set
// for the model of cfg (a tk_dlrm_config, which must outlive the reader: its fields' shapes, the
// tables' rows the ids are folded into, and the global batch of tk_dlrm_data_batch). Rank r of
// world W (W must divide the global batch B: TK_EUSAGE otherwise) decodes only what is its own of
// each global batch, its b = B/W samples [r*b, (r+1)*b), labels, dense features and categorical
// ids alike (so every sample is decoded once a job; the model all-gathers the ids on the device,
// step.h). paths: files or directories.
int tk_dlrm_data_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e);
void tk_dlrm_data_close(void *rd);
uint64_t tk_dlrm_data_count(void *rd);
// Position the reader at global record index rec (0 <= rec <= count).
int tk_dlrm_data_seek(tk_dlrm_data *d, uint64_t rec, tk_err *e);
// Reads up to n records at the current position, all of each whatever the rank (the hybrid
// embedding's statistics, the eval set); *got < n only at the end of the data. Categorical ids
// are folded into the tables: id % rows (ids must be >= 0).
int tk_dlrm_data_next(tk_dlrm_data *d, int n, uint8_t *label, int32_t *dense, int32_t *cat, int *got, tk_err *e);

// Batch `step` of the training loop into fields label (b), dense (b, num_dense), cat (b, T) (the
// model's batch, the table's batch member): of the B records at ((step % steps_per_epoch) * B),
// this rank's b, so every epoch restarts at record 0 and drops the last partial batch (as MLPerf
// DLRM trains, in the dataset's order). The cursor seeks to them: only the frames that hold them
// are decompressed. A bad record stops the rank whose share holds it (the others then stop at
// their next collective, which that rank misses).
int tk_dlrm_data_batch(void *rd, int64_t step, int64_t steps_per_epoch, void *const *fields, tk_err *e);

#endif
