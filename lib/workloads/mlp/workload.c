// The MLP classifier as a workload of the training engine (lib/engine/workload.h): its table, its
// reader of Criteo-format .tks records (label and dense features, in the dataset's order, frame
// by frame), its evaluation (exact AUC).
#include <stdlib.h>
#include <string.h>

#include "auc.h"
#include "engine/data.h"
#include "tks/tks.h"
#include "workloads/mlp/mlp.h"

// ---- configuration and model ----

static int wl_config(json_t *root, const char *path, const tk_run_cfg *run, const char *meta, void **out, tk_err *e) {
    (void)meta;
    tk_mlp_config *c = calloc(1, sizeof *c);
    if (!c) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = tk_mlp_config_parse(root, path, run, c, e);
    if (rc) free(c);
    else *out = c;
    return rc;
}

static void wl_config_free(void *c) { free(c); }

static int wl_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e) {
    return tk_mlp_create((tk_mlp **)model, cfg, env, e);
}

static void wl_destroy(void *m) { tk_mlp_destroy(m); }
static int wl_init(void *m, uint64_t seed, tk_err *e) { return tk_mlp_init_weights(m, seed, e); }
static int wl_step(void *m, tk_err *e) { return tk_mlp_step(m, e); }

// ---- data: label u8 and dense i32[num_dense] of each record, in order ----

typedef struct reader {
    char **path;
    int n, num_dense, B;
    tks_reader **r;
    uint64_t *first;        // each file's first record; first[n] = total
    int *fl, *fd;           // per file: the label and dense field indices
    void **cols;            // the current frame's columns
    int ncols;
    size_t cap, fn, fpos;   // records the columns hold; in the buffered frame; next one
    int cur;                // current file
    size_t frame;           // next frame in it (the buffered one is frame - 1)
} reader;

static void reader_close(void *rd) {
    reader *d = rd;
    if (!d) return;
    for (int i = 0; i < d->n; i++)
        if (d->r && d->r[i]) tks_reader_close(d->r[i]);
    for (int f = 0; d->cols && f < d->ncols; f++) free(d->cols[f]);
    tk_data_paths_free(d->path, d->n);
    free(d->cols);
    free(d->r);
    free(d->first);
    free(d->fl);
    free(d->fd);
    free(d);
}

static int field(const tks_schema *s, const char *path, const char *name, tks_dtype dt, int64_t len, int *idx, tk_err *e) {
    int i = tks_schema_field(s, name);
    if (i < 0 || s->f[i].dtype != dt || (len ? s->f[i].ndim != 1 || s->f[i].shape[0] != len : s->f[i].ndim != 0)) {
        tk_err_set(e, TK_EDATA, "schema: field '%s' must be %s%s (a record from prep criteo)", name, tks_dtype_name(dt),
                   len ? "[num_dense]" : "");
        tk_err_where(e, "%s", path);
        return TK_EDATA;
    }
    *idx = i;
    return 0;
}

static int reader_open(const void *cfg, char *const *paths, int npaths, void **out, tk_err *e) {
    const tk_mlp_config *c = cfg;
    reader *d = calloc(1, sizeof *d);
    if (!d) return tk_err_set(e, TK_EIO, "out of host memory");
    d->num_dense = c->num_dense;
    d->B = c->batch;
    int rc = tk_data_paths(paths, npaths, &d->path, &d->n, e);
    if (!rc) {
        d->r = calloc((size_t)d->n, sizeof *d->r);
        d->first = calloc((size_t)d->n + 1, sizeof *d->first);
        d->fl = calloc((size_t)d->n, sizeof *d->fl);
        d->fd = calloc((size_t)d->n, sizeof *d->fd);
        if (!d->r || !d->first || !d->fl || !d->fd) rc = tk_err_set(e, TK_EIO, "out of host memory");
    }
    for (int i = 0; !rc && i < d->n; i++) {
        if ((rc = tks_reader_open(&d->r[i], d->path[i], e))) break;
        const tks_schema *s = tks_reader_schema(d->r[i]);
        if ((rc = field(s, d->path[i], "label", TKS_U8, 0, &d->fl[i], e))) break;
        if ((rc = field(s, d->path[i], "dense", TKS_I32, c->num_dense, &d->fd[i], e))) break;
        d->first[i + 1] = d->first[i] + tks_reader_nrecords(d->r[i]);
        if (tks_reader_max_frame_records(d->r[i]) > d->cap) d->cap = tks_reader_max_frame_records(d->r[i]);
        if (s->nfields > d->ncols) d->ncols = s->nfields;
    }
    if (!rc && !(d->cols = calloc((size_t)d->ncols, sizeof *d->cols))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    for (int f = 0; !rc && f < d->ncols; f++) {
        size_t maxb = 0;
        for (int i = 0; i < d->n; i++) {
            const tks_schema *s = tks_reader_schema(d->r[i]);
            if (f < s->nfields && s->f[f].bytes > maxb) maxb = s->f[f].bytes;
        }
        if (!(d->cols[f] = malloc(d->cap * maxb + 1))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    }
    if (rc) {
        reader_close(d);
        return rc;
    }
    *out = d;
    return 0;
}

static uint64_t reader_count(void *rd) { return ((reader *)rd)->first[((reader *)rd)->n]; }

// Positions the reader at record rec (a record of the buffered frame: no decompression).
static int seek(reader *d, uint64_t rec, tk_err *e) {
    int f = 0;
    while (f < d->n - 1 && rec >= d->first[f + 1]) f++;
    if (f == d->cur && d->frame > 0 && d->fn > 0) {
        const tks_frame_info *fi = tks_reader_frame(d->r[f], d->frame - 1);
        uint64_t local = rec - d->first[f];
        if (local >= fi->first_record && local < fi->first_record + fi->nrecords) {
            d->fpos = (size_t)(local - fi->first_record);
            return 0;
        }
    }
    d->cur = f;
    d->fn = d->fpos = 0;
    uint64_t local = rec - d->first[f];
    size_t nf = tks_reader_nframes(d->r[f]);
    for (size_t i = 0; i < nf; i++) {
        const tks_frame_info *fi = tks_reader_frame(d->r[f], i);
        if (local < fi->first_record + fi->nrecords) {
            TRY(tks_reader_read_frame(d->r[f], i, d->cols, &d->fn, e));
            d->frame = i + 1;
            d->fpos = (size_t)(local - fi->first_record);
            return 0;
        }
    }
    d->frame = nf;
    return 0;
}

// n records from the current position (all of them must exist).
static int next(reader *d, int n, uint8_t *label, int32_t *dense, tk_err *e) {
    for (int k = 0; k < n;) {
        if (d->fpos == d->fn) {
            while (d->cur < d->n && d->frame >= tks_reader_nframes(d->r[d->cur])) d->cur++, d->frame = 0;
            if (d->cur >= d->n) return tk_err_set(e, TK_EINTERNAL, "mlp: the data ended early");
            TRY(tks_reader_read_frame(d->r[d->cur], d->frame++, d->cols, &d->fn, e));
            d->fpos = 0;
            continue;
        }
        size_t take = d->fn - d->fpos < (size_t)(n - k) ? d->fn - d->fpos : (size_t)(n - k);
        const uint8_t *l = (const uint8_t *)d->cols[d->fl[d->cur]] + d->fpos;
        for (size_t i = 0; i < take; i++)
            if (l[i] > 1) {
                tk_err_set(e, TK_EDATA, "label %d is not 0 or 1", l[i]);
                return tk_err_where(e, "%s: record %llu", d->path[d->cur],
                                    (unsigned long long)(d->frame ? tks_reader_frame(d->r[d->cur], d->frame - 1)->first_record + d->fpos + i : 0));
            }
        memcpy(label + k, l, take);
        memcpy(dense + (size_t)k * d->num_dense, (const int32_t *)d->cols[d->fd[d->cur]] + d->fpos * d->num_dense,
               take * d->num_dense * 4);
        d->fpos += take;
        k += (int)take;
    }
    return 0;
}

// Batch `step`: the B records at (step % steps_per_epoch) * B, the dataset's order every epoch.
static int read_batch(void *rd, int64_t step, int64_t spe, void *const *f, tk_err *e) {
    reader *d = rd;
    TRY(seek(d, (uint64_t)((step % spe) * d->B), e));
    return next(d, d->B, f[0], f[1], e);
}

static void layout(const void *model, tk_batch_layout *L) {
    const tk_mlp *m = model;
    const size_t B = (size_t)m->cfg.batch;
    *L = (tk_batch_layout){.nfields = 2, .bytes = {B, B * m->cfg.num_dense * 4}};
}

static void inputs(void *model, void **f) {
    tk_mlp *m = model;
    f[0] = m->in_label;
    f[1] = m->in_dense;
}

// ---- evaluation: the whole set cached on the device, scored b rows at a time on every rank ----

typedef struct evalset {
    int64_t n;
    uint8_t *label;
    int32_t *dense;
    float *score;
    void *ws;
} evalset;

static void evalset_free(void *model, void *p) {
    tk_mlp *m = model;
    evalset *es = p;
    if (!es) return;
    tk_free(m->c, es->label);
    tk_free(m->c, es->dense);
    tk_free(m->c, es->score);
    tk_free(m->c, es->ws);
    free(es);
}

static int evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    tk_mlp *m = model;
    tk_mlp_config c = m->cfg;
    reader *d;
    TRY(reader_open(&c, paths, npaths, (void **)&d, e));
    evalset *es = calloc(1, sizeof *es);
    int64_t n = (int64_t)reader_count(d);
    uint8_t *hl = malloc((size_t)n + 1);
    int32_t *hd = malloc(((size_t)n * c.num_dense + 1) * 4);
    int rc = !es || !hl || !hd ? tk_err_set(e, TK_EIO, "out of host memory for the eval set") : 0;
    if (!rc && (n == 0 || n > INT32_MAX)) rc = tk_err_set(e, TK_EDATA, "%s: the eval set has %lld records", paths[0], (long long)n);
    if (!rc) rc = seek(d, 0, e);
    if (!rc) rc = next(d, (int)n, hl, hd, e);
    if (!rc) {
        es->n = n;
        rc = tk_malloc(m->c, (void **)&es->label, (size_t)n, e);
        if (!rc) rc = tk_malloc(m->c, (void **)&es->dense, (size_t)n * c.num_dense * 4, e);
        if (!rc) rc = tk_malloc(m->c, (void **)&es->score, (size_t)n * 4, e);
        if (!rc) rc = tk_malloc(m->c, &es->ws, tk_auc_ws_bytes(m->c->backend, n) + 8, e);
        if (!rc) rc = tk_memcpy_h2d(m->c, es->label, hl, (size_t)n, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_memcpy_h2d(m->c, es->dense, hd, (size_t)n * c.num_dense * 4, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_ctx_sync(m->c, e);
    }
    free(hl);
    free(hd);
    reader_close(d);
    if (rc) {
        evalset_free(m, es);
        return rc;
    }
    *out = es;
    return 0;
}

static int64_t evalset_count(const void *es) { return ((const evalset *)es)->n; }

static int evaluate(void *model, void *p, double *auc, tk_err *e) {
    tk_mlp *m = model;
    evalset *es = p;
    for (int64_t off = 0; off < es->n; off += m->b) {
        int n = es->n - off < m->b ? (int)(es->n - off) : m->b;
        TRY(tk_mlp_forward(m, es->dense + off * m->cfg.num_dense, n, es->score + off, e));
    }
    TRY(tk_auc(m->c, es->score, es->label, es->n, es->ws, m->auc, e));
    TRY(tk_memcpy_d2h(m->c, auc, m->auc, sizeof *auc, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(m->c, e);
}

const tk_workload tk_workload_mlp = {
    .version = TK_WORKLOAD_V1,
    .name = "mlp",
    .summary = "an MLP click-through classifier on Criteo-format dense features (not an MLPerf benchmark), target AUC",
    .metric = "auc",
    .config = wl_config,
    .config_free = wl_config_free,
    .create = wl_create,
    .destroy = wl_destroy,
    .init_weights = wl_init,
    .reader_open = reader_open,
    .reader_close = reader_close,
    .reader_count = reader_count,
    .read_batch = read_batch,
    .batch_layout = layout,
    .inputs = inputs,
    .step = wl_step,
    .evalset_load = evalset_load,
    .evalset_count = evalset_count,
    .evalset_free = evalset_free,
    .evaluate = evaluate,
};
