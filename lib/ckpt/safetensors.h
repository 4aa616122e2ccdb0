// safetensors files (man/man5/trainkit-checkpoint.5): an 8-byte little-endian header length, a
// JSON header (tensor name -> dtype, shape, data_offsets; "__metadata__" -> string map), then the
// raw little-endian tensor bytes. Writing is streamed (tensors can be staged from device memory a
// chunk at a time) and atomic (tk_afile: temp file, fsync, rename); the writer adds a CRC-32C of
// every tensor's bytes to the metadata ("crc32c.NAME": 8 hex digits). Reading validates the whole
// header before any data is used and reports the byte offset of what is wrong; the checksums are
// checked by whoever reads a whole tensor (tk_st_read_verified). Files of other writers (Hugging
// Face, torchvision exports) have no checksums and read as before.
#ifndef TK_CKPT_SAFETENSORS_H
#define TK_CKPT_SAFETENSORS_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "gpu/gpu.h"

#define TK_ST_MAX_DIMS 5

typedef struct tk_st_tensor {
    char name[128];
    tk_dtype dtype;
    int ndim;
    int64_t shape[TK_ST_MAX_DIMS];
    uint64_t begin, end;        // data_offsets, relative to the data section
    int has_crc;                // reading: the metadata holds its checksum
    uint32_t crc;               // ... and this is it
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
    int ncrc;                     // tensors with a checksum
} tk_st_file;

int tk_st_open(tk_st_file **f, const char *path, tk_err *e);
void tk_st_close(tk_st_file *f);
const tk_st_tensor *tk_st_find(const tk_st_file *f, const char *name);
// The metadata string for key, or NULL.
const char *tk_st_meta(const tk_st_file *f, const char *key);
// Reads bytes [off, off+n) of tensor t into dst.
int tk_st_read(const tk_st_file *f, const tk_st_tensor *t, uint64_t off, void *dst, size_t n,
               tk_err *e);
// TK_EDATA naming the tensor and its offset when crc (the checksum of all its bytes) differs from
// the one in the header; 0 when equal or when the file has none for it.
int tk_st_check(const tk_st_file *f, const tk_st_tensor *t, uint32_t crc, tk_err *e);
// Reads tensor t whole, buf_bytes at a time through buf, handing each chunk to fn (its byte offset
// in the tensor), and checks the checksum at the end (an error from fn stops the read).
typedef int (*tk_st_chunk_fn)(void *arg, uint64_t off, const void *chunk, size_t n, tk_err *e);
int tk_st_read_verified(const tk_st_file *f, const tk_st_tensor *t, tk_st_chunk_fn fn, void *arg, void *buf,
                        size_t buf_bytes, tk_err *e);
// Reads tensor t whole into dst (tk_st_nbytes(t) bytes) and checks its checksum.
int tk_st_read_all(const tk_st_file *f, const tk_st_tensor *t, void *dst, tk_err *e);
// Parses a safetensors dtype name ("F32", ...); -1 if unknown.
int tk_st_dtype_parse(const char *s);
uint64_t tk_st_nbytes(const tk_st_tensor *t);

#endif
