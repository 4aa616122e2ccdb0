// Criteo click logs: the raw TSV day files (plain, gzip or zstd), the MLPerf preprocessed binary,
// the categorical mappings of the MLPerf DLRM reference, and the synthetic generator
// (man/man1/prep.1).
#ifndef TK_CRITEO_H
#define TK_CRITEO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "core/lines.h" // tk_lines: the TSV files are read through it
#include "tks/tks.h"

#define CRITEO_DENSE 13
#define CRITEO_CAT 26
#define CRITEO_FIELDS (1 + CRITEO_DENSE + CRITEO_CAT)
#define CRITEO_DEFAULT_MAX_IND_RANGE 40000000

// One sample as read: dense counts with empty and negative values already 0, categoricals as
// the raw 32-bit value of their hex string (0 when empty).
typedef struct {
    uint8_t label;
    int32_t dense[CRITEO_DENSE];
    uint32_t cat[CRITEO_CAT];
} criteo_row;

// Parse one TSV line (no '\n'). On error fills e->what only (the caller adds "FILE: line N").
// last_line_unterminated turns a field-count error into "truncated line".
int criteo_parse_tsv(const char *s, size_t len, int last_line_unterminated, criteo_row *row,
                     tk_err *e);

// The MLPerf preprocessed binary (FILE_data.bin): little-endian int32 x 40 per sample (label,
// 13 counts, 26 categorical ids). Calls fn(ctx, row) for every sample of every file in order;
// negative counts become 0. TK_EDATA naming FILE: offset N for a label other than 0 or 1, a
// negative categorical or a truncated last sample; TK_EIO when a file cannot be read. An error
// from fn stops the reading and is returned.
typedef int (*criteo_row_fn)(void *ctx, const criteo_row *r, tk_err *e);
int criteo_bin_each(char *const *files, int nfiles, criteo_row_fn fn, void *ctx, tk_err *e);

// ---- categorical mapping ---------------------------------------------------------------------
typedef enum { CRITEO_MODULO = 0, CRITEO_DICTIONARY = 1 } criteo_mapping;

// Per-feature dictionaries: value -> id in order of first appearance.
typedef struct criteo_dict criteo_dict;
criteo_dict *criteo_dict_new(void);
void criteo_dict_free(criteo_dict *d);
// Adds value v of feature f if new. TK_EIO on out of memory.
int criteo_dict_add(criteo_dict *d, int f, uint32_t v, tk_err *e);
// The id of v (which must have been added), or -1.
int64_t criteo_dict_get(const criteo_dict *d, int f, uint32_t v);
uint64_t criteo_dict_size(const criteo_dict *d, int f);

// The .tks schema of prep's output: label u8, dense i32 [13], cat i32 [26], and the meta
// object {"source":"criteo","mapping":...,"max_ind_range":N,"cardinalities":[...]}.
void criteo_schema(tks_schema *s, criteo_mapping m, int64_t max_ind_range, const uint64_t card[CRITEO_CAT]);

// ---- synthetic data --------------------------------------------------------------------------
typedef struct {
    int days;
    int64_t rows_per_day;
    uint64_t seed;
    double signal;        // scales the hidden model's weights (default 1)
    double click_rate;    // target mean label (default 0.03)
    int compress;         // 0 none, 1 gzip, 2 zstd
    int threads;          // generation threads (0 = OpenMP default)
} criteo_synth_opts;

// Per-day results, filled by criteo_synth_write_day.
typedef struct {
    uint64_t rows, clicks;
    double auc;           // AUC of the true probabilities against the drawn labels
} criteo_synth_day;

typedef struct criteo_synth criteo_synth;
// Builds the hidden model and calibrates its bias to opts->click_rate.
int criteo_synth_new(criteo_synth **g, const criteo_synth_opts *o, tk_err *e);
void criteo_synth_free(criteo_synth *g);
// Writes day d as Criteo TSV (compressed as asked) to fp; name is for messages.
int criteo_synth_write_day(criteo_synth *g, int d, FILE *fp, const char *name, criteo_synth_day *out,
                           tk_err *e);
double criteo_synth_bias(const criteo_synth *g);
const int64_t *criteo_synth_vocab(const criteo_synth *g); // CRITEO_CAT vocabulary sizes
int criteo_synth_latent_dim(void);
double criteo_synth_zipf_exponent(void);

// AUC (ties averaged, Mann-Whitney) of scores against 0/1 labels; NaN without both classes.
// Sorts a copy; n may be large.
double criteo_auc(const double *score, const uint8_t *label, size_t n);

#endif
