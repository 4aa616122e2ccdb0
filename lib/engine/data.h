// Datasets on disk as the engine and every workload see them: .tks files, given as files or
// directories (a directory means its *.tks files in name order), read in the order given.
#ifndef TK_ENGINE_DATA_H
#define TK_ENGINE_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "tks/tks.h"

#ifdef __cplusplus
extern "C" {
#endif

// *out (n_out strings, free with tk_data_paths_free) = the files of paths, directories expanded.
// TK_EIO for a path that cannot be opened, TK_EDATA for a directory without .tks files, TK_EUSAGE
// for no files at all.
int tk_data_paths(char *const *paths, int npaths, char ***out, int *nout, tk_err *e);
void tk_data_paths_free(char **list, int n);
// The schema meta JSON text of the first file (malloc'ed, "{}" when it has none).
int tk_data_meta(char *const *paths, int npaths, char **meta, tk_err *e);

// A cursor over the records of those files, in order, for fixed-size fields: the fields a workload
// reads (checked in every file's schema: name, dtype and per-record length), frame by frame, a
// position being a record index over all the files. Frames are decompressed into the cursor's
// buffers; the records come back as pointers into them (column-wise, valid until the next call).
typedef struct tk_record_field {
    const char *name;
    tks_dtype dtype;
    int64_t len;           // elements a record (a 1-D field), 0 for a scalar, or as below
} tk_record_field;
#define TK_RECORDS_MAX_FIELDS 16
// len: a 1-D field of any length >= 1, each file's own (tk_records_len); or one as long as field
// k's (an earlier field of the same open) in every file.
#define TK_RECORDS_ANY ((int64_t)-1)
#define TK_RECORDS_AS(k) ((int64_t)-2 - (k))

typedef struct tk_records tk_records;
// what: the records these are, for the schema error ("a DLRM record from prep criteo").
int tk_records_open(tk_records **r, char *const *paths, int npaths, const tk_record_field *fields, int nfields,
                    const char *what, tk_err *e);
void tk_records_close(tk_records *r);
uint64_t tk_records_count(const tk_records *r);
// The schema meta JSON of the first file ("{}" if none).
const char *tk_records_meta(const tk_records *r);
// Positions the cursor at record rec (0 <= rec <= count); a record of the frame already
// decompressed costs no decompression (consecutive batches).
int tk_records_seek(tk_records *r, uint64_t rec, tk_err *e);
// Up to max records from the position: cols[f] points at the first one's field f (fields in the
// order given to open), *n of them (0 only at the end). *file and *rec_in_file (may be NULL) name
// the file and the first record's index in it, for messages.
int tk_records_next(tk_records *r, size_t max, const void **cols, size_t *n, const char **file,
                    uint64_t *rec_in_file, tk_err *e);
// Elements a record of field f (1 for a scalar) in the file of the records that tk_records_next
// returned last (after one that returned some).
int64_t tk_records_len(const tk_records *r, int f);

#ifdef __cplusplus
}
#endif

#endif
