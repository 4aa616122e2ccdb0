// BERT's records in .tks files (prep bert; man/man5/trainkit-bert.5): the reader and the eval set.
// A record's fields, by name: input_ids i16[Lf], segment_ids u8[Lf], seq_len i16,
// masked_lm_positions i16[Pf], masked_lm_ids i16[Pf], num_masked i16, next_sentence_labels u8,
// padded with 0. A file's Lf and Pf may exceed the model's L and P (a shard made for 512 tokens
// feeds a 128-token model) as long as no record is longer: every record is checked, and a bad one
// is TK_EDATA naming the file and the record.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/data.h"
#include "engine/evalset.h"
#include "tks/tks.h"
#include "workloads/bert/bert.h"

enum { F_IDS, F_SEG, F_LEN, F_POS, F_MID, F_NMASK, F_NSP, NF };
static const char *const fname[NF] = {"input_ids", "segment_ids", "seq_len", "masked_lm_positions",
                                      "masked_lm_ids", "num_masked", "next_sentence_labels"};
static const tks_dtype ftype[NF] = {TKS_I16, TKS_U8, TKS_I16, TKS_I16, TKS_I16, TKS_I16, TKS_U8};

typedef struct {
    tks_reader *r;
    int f[NF];       // field index
    int Lf, Pf;      // the file's lengths
} bfile;

struct tk_bert_data {
    int n;
    char **path;
    bfile *fl;
    uint64_t *first; // global index of each file's first record; first[n] = total
    int L, P, vocab, types;
    int B;           // the global batch (read_batch)
    void **cols;     // the decompressed frame, per field of the schema (the widest over the files)
    int ncols;
    size_t cap;      // records the column buffers hold
    int cur;         // file of the buffered frame (-1: none)
    size_t frame;    // ... its index
    uint64_t f0, fn; // its first record (in the file) and record count
};

static int open_file(tk_bert_data *d, int i, tk_err *e) {
    bfile *b = &d->fl[i];
    TRY(tks_reader_open(&b->r, d->path[i], e));
    const tks_schema *s = tks_reader_schema(b->r);
    for (int k = 0; k < NF; k++) {
        int j = tks_schema_field(s, fname[k]);
        int vec = k == F_IDS || k == F_SEG || k == F_POS || k == F_MID;
        if (j < 0 || s->f[j].dtype != ftype[k] || s->f[j].ndim != vec || (vec && s->f[j].shape[0] < 1)) {
            tk_err_set(e, TK_EDATA, "schema: field '%s' must be %s%s (a BERT record from prep bert)", fname[k],
                       tks_dtype_name(ftype[k]), vec ? "[N]" : "");
            tk_err_where(e, "%s", d->path[i]);
            return TK_EDATA;
        }
        b->f[k] = j;
    }
    b->Lf = (int)s->f[b->f[F_IDS]].shape[0];
    b->Pf = (int)s->f[b->f[F_POS]].shape[0];
    if (s->f[b->f[F_SEG]].shape[0] != b->Lf || s->f[b->f[F_MID]].shape[0] != b->Pf) {
        tk_err_set(e, TK_EDATA, "schema: segment_ids and input_ids, masked_lm_ids and masked_lm_positions differ in length");
        tk_err_where(e, "%s", d->path[i]);
        return TK_EDATA;
    }
    return 0;
}

// Every rank reads the whole global batch and trains its rows.
int tk_bert_data_open(const void *config, int rank, int world, char *const *paths, int npaths, void **out, tk_err *e) {
    (void)rank, (void)world;
    const tk_bert_config *c = config;
    *out = NULL;
    tk_bert_data *d = calloc(1, sizeof *d);
    if (!d) return tk_err_set(e, TK_EIO, "out of host memory");
    d->L = c->L, d->P = c->P, d->vocab = c->vocab, d->types = c->types, d->B = c->batch, d->cur = -1;
    int rc = tk_data_paths(paths, npaths, &d->path, &d->n, e);
    if (!rc) {
        d->fl = calloc((size_t)d->n, sizeof *d->fl);
        d->first = calloc((size_t)d->n + 1, sizeof *d->first);
        if (!d->fl || !d->first) rc = tk_err_set(e, TK_EIO, "out of host memory");
    }
    for (int i = 0; !rc && i < d->n; i++) {
        if ((rc = open_file(d, i, e))) break;
        d->first[i + 1] = d->first[i] + tks_reader_nrecords(d->fl[i].r);
        size_t mf = tks_reader_max_frame_records(d->fl[i].r);
        d->cap = mf > d->cap ? mf : d->cap;
        int nf = tks_reader_schema(d->fl[i].r)->nfields;
        d->ncols = nf > d->ncols ? nf : d->ncols;
    }
    if (!rc && !(d->cols = calloc((size_t)d->ncols, sizeof *d->cols))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    for (int f = 0; !rc && f < d->ncols; f++) {
        size_t maxb = 0;
        for (int i = 0; i < d->n; i++) {
            const tks_schema *s = tks_reader_schema(d->fl[i].r);
            if (f < s->nfields && s->f[f].bytes > maxb) maxb = s->f[f].bytes;
        }
        if (!(d->cols[f] = malloc(d->cap * maxb + 1))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    }
    if (rc) tk_bert_data_close(d);
    else *out = d;
    return rc;
}

void tk_bert_data_close(void *rd) {
    tk_bert_data *d = rd;
    if (!d) return;
    for (int i = 0; d->fl && i < d->n; i++)
        if (d->fl[i].r) tks_reader_close(d->fl[i].r);
    tk_data_paths_free(d->path, d->n);
    for (int f = 0; d->cols && f < d->ncols; f++) free(d->cols[f]);
    free(d->cols);
    free(d->fl);
    free(d->first);
    free(d);
}

uint64_t tk_bert_data_count(void *rd) {
    const tk_bert_data *d = rd;
    return d->first[d->n];
}

// Makes record `local` of file i the buffered frame's.
static int load(tk_bert_data *d, int i, uint64_t local, tk_err *e) {
    if (d->cur == i && local >= d->f0 && local < d->f0 + d->fn) return 0;
    tks_reader *r = d->fl[i].r;
    size_t nf = tks_reader_nframes(r);
    for (size_t k = 0; k < nf; k++) {
        const tks_frame_info *fi = tks_reader_frame(r, k);
        if (local < fi->first_record + fi->nrecords) {
            size_t n = 0;
            d->cur = -1;
            TRY(tks_reader_read_frame(r, k, d->cols, &n, e));
            d->cur = i, d->frame = k, d->f0 = fi->first_record, d->fn = n;
            return 0;
        }
    }
    return tk_err_set(e, TK_EINTERNAL, "record %llu past the end of %s", (unsigned long long)local, d->path[i]);
}

static int bad(const tk_bert_data *d, int i, uint64_t rec, tk_err *e, const char *fmt, int a, int b) {
    tk_err_set(e, TK_EDATA, fmt, a, b);
    tk_err_where(e, "%s: record %llu", d->path[i], (unsigned long long)rec);
    return TK_EDATA;
}

// Record `local` of file i (buffered) into slot o of the output arrays, checked.
static int take(const tk_bert_data *d, int i, uint64_t local, size_t o, int32_t *ids, uint8_t *seg, int32_t *len,
                int32_t *pos, int32_t *mid, int32_t *nmask, int32_t *nsp, tk_err *e) {
    const bfile *b = &d->fl[i];
    const size_t j = (size_t)(local - d->f0);
    const int L = d->L, P = d->P, Lf = b->Lf, Pf = b->Pf;
    const int16_t *fi = (const int16_t *)d->cols[b->f[F_IDS]] + j * Lf;
    const uint8_t *fs = (const uint8_t *)d->cols[b->f[F_SEG]] + j * Lf;
    const int16_t *fp = (const int16_t *)d->cols[b->f[F_POS]] + j * Pf;
    const int16_t *fm = (const int16_t *)d->cols[b->f[F_MID]] + j * Pf;
    int n = ((const int16_t *)d->cols[b->f[F_LEN]])[j], k = ((const int16_t *)d->cols[b->f[F_NMASK]])[j];
    int y = ((const uint8_t *)d->cols[b->f[F_NSP]])[j];
    if (n < 1 || n > Lf) return bad(d, i, local, e, "seq_len %d is outside [1, %d]", n, Lf);
    if (n > L) return bad(d, i, local, e, "a sequence of %d tokens is longer than model.max_seq_length %d", n, L);
    if (k < 0 || k > Pf) return bad(d, i, local, e, "num_masked %d is outside [0, %d]", k, Pf);
    if (k > P) return bad(d, i, local, e, "%d masked positions, more than model.max_predictions_per_seq %d", k, P);
    if (y > 1) return bad(d, i, local, e, "next_sentence_labels %d is not 0 or 1%.0d", y, 0);
    for (int t = 0; t < n; t++) {
        if (fi[t] < 0 || fi[t] >= d->vocab)
            return bad(d, i, local, e, "input_ids[%d] = %d is not a token id of the model's vocabulary", t, fi[t]);
        if (fs[t] >= d->types) return bad(d, i, local, e, "segment_ids[%d] = %d is not a token type", t, fs[t]);
    }
    for (int q = 0; q < k; q++) {
        if (fp[q] < 0 || fp[q] >= n)
            return bad(d, i, local, e, "masked_lm_positions[%d] = %d is outside the sequence", q, fp[q]);
        if (fm[q] < 0 || fm[q] >= d->vocab)
            return bad(d, i, local, e, "masked_lm_ids[%d] = %d is not a token id of the model's vocabulary", q, fm[q]);
    }
    for (int t = 0; t < L; t++) {
        ids[o * L + t] = t < n ? fi[t] : 0;
        seg[o * L + t] = t < n ? fs[t] : 0;
    }
    for (int q = 0; q < P; q++) {
        pos[o * P + q] = q < k ? fp[q] : 0;
        mid[o * P + q] = q < k ? fm[q] : 0;
    }
    len[o] = n, nmask[o] = k;
    if (nsp) nsp[o] = y;
    return 0;
}

int tk_bert_data_read(tk_bert_data *d, uint64_t first, int n, int32_t *ids, uint8_t *seg, int32_t *len, int32_t *pos,
                      int32_t *mid, int32_t *nmask, int32_t *nsp, tk_err *e) {
    if (first + (uint64_t)n > d->first[d->n]) return tk_err_set(e, TK_EINTERNAL, "bert: read past the end of the data");
    int i = 0;
    for (int r = 0; r < n; r++) {
        uint64_t g = first + (uint64_t)r;
        while (g >= d->first[i + 1]) i++;
        uint64_t local = g - d->first[i];
        TRY(load(d, i, local, e));
        TRY(take(d, i, local, (size_t)r, ids, seg, len, pos, mid, nmask, nsp, e));
    }
    return 0;
}

// Batch `step` is the global batch of records [s B, s B + B) of the data, s = step within the
// epoch, in the dataset's order (prep bert shuffles the examples it writes, as the reference's
// create_pretraining_data); every rank reads all of it and trains on its own rows.
int tk_bert_read_batch(void *rd, int64_t step, int64_t steps_per_epoch, void *const *f, tk_err *e) {
    tk_bert_data *d = rd;
    uint64_t first = (uint64_t)(step % steps_per_epoch) * (uint64_t)d->B;
    return tk_bert_data_read(d, first, d->B, f[0], f[1], f[2], f[3], f[4], f[5], f[6], e);
}

// ---- the eval set ----

// The records into the eval set's fields (types.h), the padding sequences of length 1.
static int fill(void *arg, void *rd, int n, int64_t cached, void *const *host, tk_err *e) {
    (void)arg;
    int32_t *len = host[2];
    for (int64_t i = n; i < cached; i++) len[i] = 1;
    return tk_bert_data_read(rd, 0, n, host[0], host[1], len, host[3], host[4], host[5], NULL, e);
}

int tk_bert_evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    tk_bert *m = model;
    const size_t L = (size_t)m->cfg.L, P = (size_t)m->cfg.P;
    const tk_evalset_spec s = {.open = tk_bert_data_open, .count = tk_bert_data_count, .close = tk_bert_data_close,
                               .cfg = &m->cfg, .nf = 6, .bytes = {L * 4, L, 4, P * 4, P * 4, 4},
                               .max = INT32_MAX / 1024, .batch = m->b, .fill = fill};
    return tk_evalset_load(m->c, &s, paths, npaths, (tk_evalset **)out, e);
}
