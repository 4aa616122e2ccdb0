// NVIDIA's MLPerf BERT HDF5 files, read into BERT records (record.h). Two layouts:
//   fixed (create_pretraining_data.py's HDF5 output, chop_hdf5_files.py, pick_eval_samples.py):
//     input_ids, input_mask, segment_ids (N, L); masked_lm_positions, masked_lm_ids (N, P);
//     next_sentence_labels (N) — any integer types (the scripts write i4/i2 and i1);
//     seq_len = sum(input_mask), num_masked = the count of nonzero masked_lm_positions;
//   variable (convert_fixed2variable.py, pick_eval_samples_varlength.py): input_ids (vlen int16),
//     segment_ids (vlen int8), masked_lm_positions, masked_lm_ids (vlen int16), each (N);
//     next_sentence_labels (N) int8.
// Built only with libhdf5 (TK_HAVE_HDF5); without it bert_h5_open fails with TK_EUSAGE.
// libhdf5 1.10 crashes, spins or allocates without bound on crafted files, so it runs only in a
// child process of each open file, limited in CPU time and memory (core/sandbox.h; the limits:
// 10 s + 1 s per MiB of the file, 512 MiB + 8 x its size, or TK_HDF5_CPU_SECONDS and
// TK_HDF5_MEMORY_MIB), which sends the records back; every record it sends is checked again.
// A child that crashes, runs out of its limits or stops answering is TK_EDATA "FILE: libhdf5
// crashed (signal N, ...) reading the file; the file is malformed".
#ifndef TK_BERT_HDF5_H
#define TK_BERT_HDF5_H

#include <stddef.h>
#include <stdint.h>

#include "bert/record.h"
#include "core/err.h"

enum { BERT_H5_FIXED = 1, BERT_H5_VARLEN = 2 };

typedef struct bert_h5 bert_h5;
int bert_h5_available(void);
// Opens a file and checks its datasets (TK_EDATA naming the file and the missing or malformed key).
// HDF5 never prints: its error stack is turned off, the child's stderr is /dev/null.
int bert_h5_open(bert_h5 **h, const char *path, tk_err *e);
int bert_h5_layout(const bert_h5 *h);
uint64_t bert_h5_count(const bert_h5 *h);
// Reads records [first, first+n) into b's records 0..n-1 (b->cap >= n) and checks each against
// b's L and P and vocab_size: TK_EDATA "FILE: record R: what".
int bert_h5_read(bert_h5 *h, uint64_t first, size_t n, bert_records *b, int32_t vocab_size, tk_err *e);
void bert_h5_close(bert_h5 *h);

#endif
