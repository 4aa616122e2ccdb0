// safetensors files (man/man5/trainkit-checkpoint.5): an 8-byte little-endian header length, a
// JSON header (tensor name -> dtype, shape, data_offsets; "__metadata__" -> string map), then the
// raw little-endian tensor bytes. Writing is streamed (tensors can be staged from device memory a
// chunk at a time) and atomic (tk_afile: temp file, fsync, rename). Reading validates the whole
// header before any data is used and reports the byte offset of what is wrong.
#ifndef TK_CKPT_SAFETENSORS_H
#define TK_CKPT_SAFETENSORS_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "gpu/gpu.h"

#define TK_ST_MAX_DIMS 4

typedef struct tk_st_tensor {
    char name[128];
    tk_dtype dtype;
    int ndim;
    int64_t shape[TK_ST_MAX_DIMS];
    uint64_t begin, end;        // data_offsets, relative to the data section
} tk_st_tensor;

// ---- writing ----
typedef struct tk_st_writer tk_st_writer;
// Opens path atomically and writes the header for n tensors (begin/end are computed here, in
// order, contiguous). meta: a JSON object of strings, or NULL (borrowed).
int tk_st_writer_open(tk_st_writer **w, const char *path, const tk_st_tensor *t, int n,
                      const json_t *meta, tk_err *e);
// Appends the next bytes of tensor data (any chunking; tensors in the order given to open).
int tk_st_writer_put(tk_st_writer *w, const void *data, size_t bytes, tk_err *e);
// Checks every tensor byte was written, fsyncs and renames. Frees w in all cases.
int tk_st_writer_commit(tk_st_writer *w, tk_err *e);
// Removes the temporary file. Frees w.
void tk_st_writer_abort(tk_st_writer *w);

// ---- reading ----
typedef struct tk_st_file {
    int fd;
    char path[4096];
    uint64_t file_size, data_off; // data_off = 8 + header length
    int n;
    tk_st_tensor *t;
    json_t *meta;                 // "__metadata__" object (may be an empty object)
} tk_st_file;

int tk_st_open(tk_st_file **f, const char *path, tk_err *e);
void tk_st_close(tk_st_file *f);
const tk_st_tensor *tk_st_find(const tk_st_file *f, const char *name);
// The metadata string for key, or NULL.
const char *tk_st_meta(const tk_st_file *f, const char *key);
// Reads bytes [off, off+n) of tensor t into dst.
int tk_st_read(const tk_st_file *f, const tk_st_tensor *t, uint64_t off, void *dst, size_t n,
               tk_err *e);
// Parses a safetensors dtype name ("F32", ...); -1 if unknown.
int tk_st_dtype_parse(const char *s);
uint64_t tk_st_nbytes(const tk_st_tensor *t);

#endif
