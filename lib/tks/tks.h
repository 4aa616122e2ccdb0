// The .tks record stream / shard format (specified in man/man5/tks.5): a fixed little-endian
// header with the schema as JSON, the payload as independent zstd frames of whole records
// (column-wise inside each frame), and a trailing frame index, so readers can seek, shuffle by
// block and split work across threads and ranks. The same bytes are written to a pipe.
// Fields are fixed (f->bytes per record) or ragged (first dimension -1: a variable number of
// rows per record, e.g. a JPEG file's bytes). Schemas with fixed fields only can use the
// column-pointer calls (tks_writer_append, tks_reader_read_frame, tks_reader_next); every schema
// can use the tks_colref / tks_frame calls.
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

#define TKS_RAGGED (-1)          // shape[0] of a ragged field

typedef struct {
    char name[64];
    tks_dtype dtype;
    int ndim;                    // 0 = one scalar per record
    int64_t shape[TKS_MAX_DIMS]; // per-record shape; shape[0] == TKS_RAGGED for a ragged field
    size_t bytes;                // bytes per record of this field (derived; 0 for a ragged field)
    int ragged;                  // derived: shape[0] == TKS_RAGGED
    size_t row_bytes;            // derived, ragged fields: bytes of one row (shape[1..])
} tks_field;

typedef struct {
    int nfields;
    tks_field f[TKS_MAX_FIELDS];
    size_t record_bytes;         // sum of f[i].bytes over the fixed fields (derived)
    int nragged;                 // number of ragged fields (derived)
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
    size_t frame_bytes;          // schemas with ragged fields: close a frame once its content
                                 // reaches this many bytes (0 = 64 MiB)
} tks_writer_opts;

// One column of n records for tks_writer_append_ref. Fixed field: data holds n * bytes bytes.
// Ragged field: record j's value is the bytes data[off[j]] .. data[off[j+1]] (n + 1 offsets, not
// necessarily starting at 0, so a slice of a tks_frame column can be passed as is); each value is
// a whole number of rows.
typedef struct {
    const void *data;
    const uint64_t *off;         // ragged fields only; NULL for fixed fields
} tks_colref;

typedef struct tks_writer tks_writer;
// path: a file (written atomically: temp file, fsync, rename on close) or "-" for stdout.
int tks_writer_open(tks_writer **w, const char *path, const tks_schema *s, const tks_writer_opts *o,
                    tk_err *e);
// Append n records given column-wise: cols[i] points to n * s->f[i].bytes bytes. Fixed fields
// only (TK_EUSAGE for a schema with a ragged field).
int tks_writer_append(tks_writer *w, const void *const *cols, size_t n, tk_err *e);
// Append n records, any schema. A record larger than 64 MiB is TK_EDATA.
int tks_writer_append_ref(tks_writer *w, const tks_colref *cols, size_t n, tk_err *e);
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

// A decoded frame whose buffers belong to it and grow as needed (zero-initialize, reuse for
// many frames, tks_frame_free at the end). Column f of record j: fixed fields at
// col[f].data + j * bytes; ragged fields the bytes col[f].data + off[j] .. off[j+1] (off[0] = 0).
typedef struct {
    void *data;
    size_t cap;
    uint64_t *off;               // ragged fields: n + 1 offsets; NULL for fixed fields
    size_t offcap;
} tks_column;

typedef struct {
    size_t n;                    // records
    tks_column col[TKS_MAX_FIELDS];
} tks_frame;

void tks_frame_free(tks_frame *fr);

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
// Fixed fields only (TK_EUSAGE for a schema with a ragged field).
int tks_reader_read_frame(tks_reader *r, size_t i, void *const *cols, size_t *n, tk_err *e);
// Sequential read of the next frame (files and pipes alike); *n = 0 at the end. Fixed fields only.
int tks_reader_next(tks_reader *r, void *const *cols, size_t *n, tk_err *e);
// The same for any schema, into fr's own buffers: frame i (thread-safe for seekable files when
// each thread has its own fr), or the next frame (fr->n = 0 at the end).
int tks_reader_read(tks_reader *r, size_t i, tks_frame *fr, tk_err *e);
int tks_reader_next_frame(tks_reader *r, tks_frame *fr, tk_err *e);
void tks_reader_close(tks_reader *r);

#ifdef __cplusplus
}
#endif

#endif
