// DLRM record reader over .tks shards (data.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fastmod.h"
#include "engine/data.h"
#include "tks/tks.h"
#include "workloads/dlrm/data.h"

#define TK_DLRM_DATA_MAX_CAT 64

struct tk_dlrm_data {
    int n;
    char **path;
    tks_reader **r;
    uint64_t *first;           // global index of each file's first record; first[n] = total
    int fl[3];                 // label, dense, cat field index per file (checked identical shape)
    int *fidx;                 // per file: 3 field indices
    int num_dense, num_cat;
    // the decompressed current frame
    void **cols;               // per field of the current file
    int ncols;
    size_t cap;                // records the column buffers hold
    int cur;                   // current file
    size_t frame;              // next frame to read in it
    size_t fn, fpos;           // records in the buffered frame, next one to hand out
    uint64_t pos;              // global position
};

static int check_field(const tks_schema *s, const char *path, const char *name, tks_dtype dt,
                       int64_t len, int *idx, tk_err *e) {
    int i = tks_schema_field(s, name);
    int ok = i >= 0 && s->f[i].dtype == dt &&
             (len == 0 ? s->f[i].ndim == 0 : s->f[i].ndim == 1 && s->f[i].shape[0] == len);
    if (!ok) {
        tk_err_set(e, TK_EDATA, "schema: field '%s' must be %s%s%.0lld%s (a DLRM record from prep criteo)",
                   name, tks_dtype_name(dt), len ? "[" : "", (long long)len, len ? "]" : "");
        tk_err_where(e, "%s", path);
        return TK_EDATA;
    }
    *idx = i;
    return 0;
}

int tk_dlrm_data_open(tk_dlrm_data **out, char *const *paths, int npaths, int num_dense,
                      int num_cat, tk_err *e) {
    *out = NULL;
    tk_dlrm_data *d = calloc(1, sizeof *d);
    if (!d) return tk_err_set(e, TK_EIO, "out of memory");
    d->num_dense = num_dense;
    d->num_cat = num_cat;
    int rc = tk_data_paths(paths, npaths, &d->path, &d->n, e);
    if (!rc) {
        d->r = calloc((size_t)d->n, sizeof *d->r);
        d->first = calloc((size_t)d->n + 1, sizeof *d->first);
        d->fidx = calloc((size_t)d->n * 3, sizeof *d->fidx);
        if (!d->r || !d->first || !d->fidx) rc = tk_err_set(e, TK_EIO, "out of memory");
    }
    for (int i = 0; !rc && i < d->n; i++) {
        rc = tks_reader_open(&d->r[i], d->path[i], e);
        if (rc) break;
        const tks_schema *s = tks_reader_schema(d->r[i]);
        rc = check_field(s, d->path[i], "label", TKS_U8, 0, &d->fidx[3 * i], e);
        if (!rc) rc = check_field(s, d->path[i], "dense", TKS_I32, num_dense, &d->fidx[3 * i + 1], e);
        if (!rc) rc = check_field(s, d->path[i], "cat", TKS_I32, num_cat, &d->fidx[3 * i + 2], e);
        if (rc) break;
        d->first[i + 1] = d->first[i] + tks_reader_nrecords(d->r[i]);
        size_t mf = tks_reader_max_frame_records(d->r[i]);
        if (mf > d->cap) d->cap = mf;
        if (s->nfields > d->ncols) d->ncols = s->nfields;
    }
    if (!rc) {
        d->cols = calloc((size_t)d->ncols, sizeof *d->cols);
        if (!d->cols) rc = tk_err_set(e, TK_EIO, "out of memory");
        for (int f = 0; !rc && f < d->ncols; f++) {
            size_t maxb = 0;
            for (int i = 0; i < d->n; i++) {
                const tks_schema *s = tks_reader_schema(d->r[i]);
                if (f < s->nfields && s->f[f].bytes > maxb) maxb = s->f[f].bytes;
            }
            d->cols[f] = malloc(d->cap * maxb + 1);
            if (!d->cols[f]) rc = tk_err_set(e, TK_EIO, "out of memory");
        }
    }
    if (!rc) rc = tk_dlrm_data_seek(d, 0, e);
    if (rc) {
        tk_dlrm_data_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

void tk_dlrm_data_close(tk_dlrm_data *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++)
        if (d->r && d->r[i]) tks_reader_close(d->r[i]);
    tk_data_paths_free(d->path, d->n);
    for (int f = 0; d->cols && f < d->ncols; f++) free(d->cols[f]);
    free(d->cols);
    free(d->r);
    free(d->first);
    free(d->fidx);
    free(d);
}

uint64_t tk_dlrm_data_count(const tk_dlrm_data *d) { return d->first[d->n]; }

const char *tk_dlrm_data_meta(const tk_dlrm_data *d) {
    return tks_reader_schema(d->r[0])->meta_json;
}

static int load_frame(tk_dlrm_data *d, tk_err *e) {
    size_t n = 0;
    TRY(tks_reader_read_frame(d->r[d->cur], d->frame, d->cols, &n, e));
    d->fn = n;
    d->fpos = 0;
    d->frame++;
    return 0;
}

int tk_dlrm_data_seek(tk_dlrm_data *d, uint64_t rec, tk_err *e) {
    if (rec > d->first[d->n]) return tk_err_set(e, TK_EINTERNAL, "seek past the end of the data");
    d->pos = rec;
    int f = 0;
    while (f < d->n - 1 && rec >= d->first[f + 1]) f++;
    // A record of the frame already decompressed (the next batch, mostly): no decompression.
    if (f == d->cur && d->frame > 0 && d->fn > 0) {
        const tks_frame_info *fi = tks_reader_frame(d->r[f], d->frame - 1);
        uint64_t in = rec - d->first[f];
        if (in >= fi->first_record && in < fi->first_record + fi->nrecords) {
            d->fpos = (size_t)(in - fi->first_record);
            return 0;
        }
    }
    d->fn = d->fpos = 0;
    d->cur = f;
    d->frame = 0;
    uint64_t local = rec - d->first[f];
    size_t nf = tks_reader_nframes(d->r[f]);
    for (size_t i = 0; i < nf; i++) {
        const tks_frame_info *fi = tks_reader_frame(d->r[f], i);
        if (local < fi->first_record + fi->nrecords) {
            d->frame = i;
            TRY(load_frame(d, e));
            d->fpos = (size_t)(local - fi->first_record);
            return 0;
        }
    }
    d->frame = nf; // at the end of this file
    return 0;
}

int tk_dlrm_data_next(tk_dlrm_data *d, int n, const int64_t *rows, uint8_t *label,
                      int32_t *dense, int32_t *cat, int *got, tk_err *e) {
    int k = 0;
    uint64_t mod_m[TK_DLRM_DATA_MAX_CAT];
    if (d->num_cat > TK_DLRM_DATA_MAX_CAT) return tk_err_set(e, TK_EINTERNAL, "too many categorical features");
    for (int f = 0; f < d->num_cat; f++) {
        if (rows[f] < 1 || rows[f] > INT32_MAX) return tk_err_set(e, TK_EINTERNAL, "table of %lld rows", (long long)rows[f]);
        mod_m[f] = tk_fastmod_m((uint32_t)rows[f]);
    }
    while (k < n) {
        if (d->fpos == d->fn) {
            while (d->cur < d->n && d->frame >= tks_reader_nframes(d->r[d->cur])) {
                d->cur++;
                d->frame = 0;
            }
            if (d->cur >= d->n) break;
            TRY(load_frame(d, e));
            continue;
        }
        const int *fi = &d->fidx[3 * d->cur];
        size_t take = d->fn - d->fpos;
        if (take > (size_t)(n - k)) take = (size_t)(n - k);
        memcpy(label + k, (uint8_t *)d->cols[fi[0]] + d->fpos, take);
        memcpy(dense + (size_t)k * d->num_dense, (int32_t *)d->cols[fi[1]] + d->fpos * d->num_dense,
               take * d->num_dense * 4);
        const int32_t *src = (int32_t *)d->cols[fi[2]] + d->fpos * d->num_cat;
        int32_t *dst = cat + (size_t)k * d->num_cat;
        // Folding is the loader's hot loop (1.7 M ids a batch of 65,536): one pass per record
        // and feature with a multiply-shift modulo instead of a division per id (a division
        // per id made decoding a batch take ~35 ms of one core).
        int bad = 0;
        for (size_t i = 0; i < take; i++) {
            const int32_t *s = src + i * (size_t)d->num_cat;
            int32_t *o = dst + i * (size_t)d->num_cat;
            for (int f = 0; f < d->num_cat; f++) {
                int32_t id = s[f];
                bad |= id < 0;
                uint32_t u = (uint32_t)id;
                o[f] = u < (uint32_t)rows[f] ? id : (int32_t)tk_fastmod(u, mod_m[f], (uint32_t)rows[f]);
            }
        }
        if (bad) {
            size_t i = 0;
            while (src[i] >= 0) i++;
            tk_err_set(e, TK_EDATA, "categorical feature %d has a negative id %d", (int)(i % d->num_cat), src[i]);
            tk_err_where(e, "%s: record %llu", d->path[d->cur],
                         (unsigned long long)(d->pos + i / d->num_cat - d->first[d->cur]));
            return TK_EDATA;
        }
        for (size_t i = 0; i < take; i++)
            if (label[k + i] > 1) {
                tk_err_set(e, TK_EDATA, "label %d is not 0 or 1", label[k + i]);
                tk_err_where(e, "%s: record %llu", d->path[d->cur],
                             (unsigned long long)(d->pos + i - d->first[d->cur]));
                return TK_EDATA;
            }
        d->fpos += take;
        d->pos += take;
        k += (int)take;
    }
    *got = k;
    return 0;
}

int tk_dlrm_data_batch(tk_dlrm_data *d, int64_t step, int64_t steps_per_epoch, int B, const int64_t *rows,
                       uint8_t *label, int32_t *dense, int32_t *cat, tk_err *e) {
    int got = 0;
    TRY(tk_dlrm_data_seek(d, (uint64_t)((step % steps_per_epoch) * B), e));
    TRY(tk_dlrm_data_next(d, B, rows, label, dense, cat, &got, e));
    return got == B ? 0 : tk_err_set(e, TK_EINTERNAL, "the training data ended early");
}
