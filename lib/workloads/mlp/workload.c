// The MLP classifier as a workload of the training engine (lib/engine/workload.h): its table, its
// reader of Criteo-format .tks records (label and dense features, in the dataset's order, frame
// by frame), its evaluation (exact AUC).
#include <stdlib.h>
#include <string.h>

#include "auc.h"
#include "engine/data.h"
#include "engine/evalset.h"
#include "workloads/mlp/mlp.h"

// ---- data: label u8 and dense i32[num_dense] of each record, in order ----

typedef struct reader {
    tk_records *r;
    int num_dense, B;
} reader;

static void reader_close(void *rd) {
    reader *d = rd;
    if (!d) return;
    tk_records_close(d->r);
    free(d);
}

// Every rank reads the whole global batch and trains its rows (a small model: reading is cheap).
static int reader_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **out, tk_err *e) {
    (void)rank, (void)world;
    const tk_mlp_config *c = cfg;
    reader *d = calloc(1, sizeof *d);
    if (!d) return tk_err_set(e, TK_EIO, "out of host memory");
    d->num_dense = c->num_dense;
    d->B = c->batch;
    const tk_record_field f[2] = {{"label", TKS_U8, 0}, {"dense", TKS_I32, c->num_dense}};
    int rc = tk_records_open(&d->r, paths, npaths, f, 2, "a record from prep criteo", e);
    if (rc) free(d);
    else *out = d;
    return rc;
}

static uint64_t reader_count(void *rd) { return tk_records_count(((reader *)rd)->r); }

// n records from the current position (all of them must exist).
static int next(reader *d, int n, uint8_t *label, int32_t *dense, tk_err *e) {
    for (int k = 0; k < n;) {
        const void *col[2];
        size_t take;
        const char *file;
        uint64_t at;
        TRY(tk_records_next(d->r, (size_t)(n - k), col, &take, &file, &at, e));
        if (take == 0) return tk_err_set(e, TK_EINTERNAL, "mlp: the data ended early");
        const uint8_t *l = col[0];
        for (size_t i = 0; i < take; i++)
            if (l[i] > 1) {
                tk_err_set(e, TK_EDATA, "label %d is not 0 or 1", l[i]);
                return tk_err_where(e, "%s: record %llu", file, (unsigned long long)(at + i));
            }
        memcpy(label + k, l, take);
        memcpy(dense + (size_t)k * d->num_dense, col[1], take * d->num_dense * 4);
        k += (int)take;
    }
    return 0;
}

// Batch `step`: the B records at (step % steps_per_epoch) * B, the dataset's order every epoch.
static int read_batch(void *rd, int64_t step, int64_t spe, void *const *f, tk_err *e) {
    reader *d = rd;
    TRY(tk_records_seek(d->r, (uint64_t)((step % spe) * d->B), e));
    return next(d, d->B, f[0], f[1], e);
}

// ---- evaluation: the whole set cached on the device, scored b rows at a time on every rank ----

// (fields: label u8, dense i32 x num_dense)
static int fill(void *arg, void *d, int n, int64_t cached, void *const *host, tk_err *e) {
    (void)arg, (void)cached;
    TRY(tk_records_seek(((reader *)d)->r, 0, e));
    return next(d, n, host[0], host[1], e);
}

static int evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    tk_mlp *m = model;
    const tk_evalset_spec s = {.open = reader_open, .count = reader_count, .close = reader_close, .cfg = &m->cfg,
                               .nf = 2, .bytes = {1, (size_t)m->cfg.num_dense * 4}, .scores = 1, .fill = fill};
    return tk_evalset_load(m->c, &s, paths, npaths, (tk_evalset **)out, e);
}

static int evaluate(void *model, void *p, double *auc, tk_err *e) {
    tk_mlp *m = model;
    tk_evalset *es = p;
    const int32_t *dense = es->field[1];
    for (int64_t off = 0; off < es->n; off += m->b) {
        int n = es->n - off < m->b ? (int)(es->n - off) : m->b;
        TRY(tk_mlp_forward(m, dense + off * m->cfg.num_dense, n, es->score + off, e));
    }
    TRY(tk_auc(m->c, es->score, es->field[0], es->n, es->ws, m->auc, e));
    TRY(tk_memcpy_d2h(m->c, auc, m->auc, sizeof *auc, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(m->c, e);
}

// (config_free is free: a tk_mlp_config is one block)
const tk_workload tk_workload_mlp = {
    .version = TK_WORKLOAD_V6, .name = "mlp", .metric = "auc", .precisions = tk_mlp_precisions,
    .summary = "an MLP click-through classifier on Criteo-format dense features (not an MLPerf benchmark), target AUC",
    .config = tk_mlp_config_parse, .config_free = free,
    .create = tk_mlp_create, .destroy = tk_mlp_destroy, .init_weights = tk_mlp_init_weights,
    .reader_open = reader_open, .reader_close = reader_close, .reader_count = reader_count, .read_batch = read_batch,
    .batch = tk_mlp_batch,
    .step = tk_mlp_step,
    .evalset_load = evalset_load, .evalset_count = tk_evalset_count, .evalset_free = tk_evalset_free,
    .evaluate = evaluate,
    .epoch_fraction = 1, // (as DLRM's)
};
