// The .tks record stream / shard format (specified in man/man5/tks.5): a fixed little-endian
// header with the schema as JSON, the payload as independent zstd frames of whole records
// (column-wise inside each frame), and a trailing frame index, so readers can seek, shuffle by
// block and split work across threads and ranks. The same bytes are written to a pipe.
#ifndef TK_TKS_H
#define TK_TKS_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    TKS_U8 = 1,
    TKS_I8,
    TKS_I16,
    TKS_I32,
    TKS_I64,
    TKS_F16,
    TKS_BF16,
    TKS_F32,
    TKS_F64,
} tks_dtype;

#define TKS_MAX_FIELDS 64
#define TKS_MAX_DIMS 4

typedef struct {
    char name[64];
    tks_dtype dtype;
    int ndim;                    // 0 = one scalar per record
    int64_t shape[TKS_MAX_DIMS]; // per-record shape
    size_t bytes;                // bytes per record of this field (derived)
} tks_field;

typedef struct {
    int nfields;
    tks_field f[TKS_MAX_FIELDS];
    size_t record_bytes;         // sum of f[i].bytes (derived)
    char meta_json[2048];        // free-form JSON object text from the producer ("{}" if none)
} tks_schema;

size_t tks_dtype_size(tks_dtype t);
const char *tks_dtype_name(tks_dtype t);
// Fill bytes/record_bytes from dtype and shape; check names are unique. TK_EUSAGE on bad schema.
int tks_schema_finish(tks_schema *s, tk_err *e);
int tks_schema_field(const tks_schema *s, const char *name); // index or -1

typedef struct {
    size_t records_per_frame;    // default 65536 (0 = default)
    int zstd_level;              // default 3
    int threads;                 // compression threads, default 1
} tks_writer_opts;

typedef struct tks_writer tks_writer;
// path: a file (written atomically: temp file, fsync, rename on close) or "-" for stdout.
int tks_writer_open(tks_writer **w, const char *path, const tks_schema *s, const tks_writer_opts *o,
                    tk_err *e);
// Append n records given column-wise: cols[i] points to n * s->f[i].bytes bytes.
int tks_writer_append(tks_writer *w, const void *const *cols, size_t n, tk_err *e);
// Flush the last frame, write the index and trailer, commit. Frees w in all cases.
int tks_writer_close(tks_writer *w, tk_err *e);
// Drop everything written (removes the temporary file). Frees w.
void tks_writer_abort(tks_writer *w);

typedef struct {
    uint64_t offset;             // byte offset of the frame in the file
    uint64_t csize;              // compressed size
    uint64_t first_record;       // index of its first record in the file
    uint32_t nrecords;
} tks_frame_info;

typedef struct tks_reader tks_reader;
// Open a seekable file ("-" or a pipe: frames are read sequentially with tks_reader_next).
int tks_reader_open(tks_reader **r, const char *path, tk_err *e);
const tks_schema *tks_reader_schema(const tks_reader *r);
uint64_t tks_reader_nrecords(const tks_reader *r);   // 0 until known for a stream
size_t tks_reader_nframes(const tks_reader *r);
const tks_frame_info *tks_reader_frame(const tks_reader *r, size_t i);
size_t tks_reader_max_frame_records(const tks_reader *r);
// Decompress frame i into per-field buffers (cols[f] holds >= nrecords * bytes). Thread-safe
// for seekable files (pread, per-call decompression context). *n = records in the frame.
int tks_reader_read_frame(tks_reader *r, size_t i, void *const *cols, size_t *n, tk_err *e);
// Sequential read of the next frame (files and pipes alike); *n = 0 at the end.
int tks_reader_next(tks_reader *r, void *const *cols, size_t *n, tk_err *e);
void tks_reader_close(tks_reader *r);

#ifdef __cplusplus
}
#endif

#endif
