// DLRM record reader over .tks shards (data.h), on the engine's record cursor (engine/data.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fastmod.h"
#include "engine/data.h"
#include "engine/dist.h"
#include "workloads/dlrm/data.h"

struct tk_dlrm_data {
    tk_records *r;
    const tk_dlrm_config *cfg;
    int own0, own_n; // this rank's samples of a global batch: [own0, own0 + own_n)
};

int tk_dlrm_data_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e) {
    *rd = NULL;
    int64_t b;
    TRY(tk_per_rank_batch("dlrm", ((const tk_dlrm_config *)cfg)->batch, world, &b, e));
    tk_dlrm_data *d = calloc(1, sizeof *d);
    if (!d) return tk_err_set(e, TK_EIO, "out of memory");
    d->cfg = cfg;
    d->own0 = rank * (int)b;
    d->own_n = (int)b;
    const tk_record_field f[3] = {
        {"label", TKS_U8, 0}, {"dense", TKS_I32, d->cfg->num_dense}, {"cat", TKS_I32, d->cfg->num_tables}};
    int rc = tk_records_open(&d->r, paths, npaths, f, 3, "a DLRM record from prep criteo", e);
    if (rc) free(d);
    else *rd = d;
    return rc;
}

void tk_dlrm_data_close(void *rd) {
    tk_dlrm_data *d = rd;
    if (!d) return;
    tk_records_close(d->r);
    free(d);
}

uint64_t tk_dlrm_data_count(void *rd) { return tk_records_count(((tk_dlrm_data *)rd)->r); }

int tk_dlrm_data_seek(tk_dlrm_data *d, uint64_t rec, tk_err *e) { return tk_records_seek(d->r, rec, e); }

// The fold (id % rows) of n records' ids src (n, nc) into dst, the loader's hot loop: a
// multiply-shift modulo per id (core/fastmod.h; a division per id made a batch of 65,536 take
// ~35 ms of one core), on every id, branch-free (it is the id itself below the rows), so nothing is
// mispredicted on ids of a wider range: the fold then costs what copying the ids does (26 tables of
// 4M rows, ids up to 40M: 2.0-2.6 -> 0.9-1.6 ns an id; ~0.9 either way on ids below the rows;
// contrib/bench/NOTES.md "DLRM input path per rank"). Returns the OR of the ids: negative if one is.
static int32_t fold(const int32_t *src, int32_t *dst, size_t n, int nc, const uint64_t *mod_m, const uint32_t *rows) {
    int32_t any = 0;
    for (size_t i = 0; i < n; i++) {
        const int32_t *s = src + i * (size_t)nc;
        int32_t *o = dst + i * (size_t)nc;
        for (int f = 0; f < nc; f++) {
            any |= s[f];
            o[f] = (int32_t)tk_fastmod((uint32_t)s[f], mod_m[f], rows[f]);
        }
    }
    return any;
}

// Reads up to n records at the current position into label (n), dense (n, nd) and cat (n, nc),
// the ids folded; every label and id is checked.
static int read_records(tk_dlrm_data *d, int n, uint8_t *label, int32_t *dense, int32_t *cat, int *got, tk_err *e) {
    const int nd = d->cfg->num_dense, nc = d->cfg->num_tables;
    const int64_t *rows = d->cfg->table_rows;
    int k = 0;
    uint64_t mod_m[TK_DLRM_MAX_TABLES];
    uint32_t rows32[TK_DLRM_MAX_TABLES];
    if (nc > TK_DLRM_MAX_TABLES) return tk_err_set(e, TK_EINTERNAL, "too many categorical features");
    for (int f = 0; f < nc; f++) {
        if (rows[f] < 1 || rows[f] > INT32_MAX) return tk_err_set(e, TK_EINTERNAL, "table of %lld rows", (long long)rows[f]);
        rows32[f] = (uint32_t)rows[f];
        mod_m[f] = tk_fastmod_m(rows32[f]);
    }
    while (k < n) {
        const void *col[3];
        size_t take;
        const char *file;
        uint64_t at;
        TRY(tk_records_next(d->r, (size_t)(n - k), col, &take, &file, &at, e));
        if (take == 0) break;
        const uint8_t *lab = col[0];
        const int32_t *src = col[2];
        if (fold(src, cat + (size_t)k * nc, take, nc, mod_m, rows32) < 0) {
            size_t i = 0;
            while (src[i] >= 0) i++;
            tk_err_set(e, TK_EDATA, "categorical feature %d has a negative id %d", (int)(i % nc), src[i]);
            tk_err_where(e, "%s: record %llu", file, (unsigned long long)(at + i / nc));
            return TK_EDATA;
        }
        for (size_t i = 0; i < take; i++)
            if (lab[i] > 1) {
                tk_err_set(e, TK_EDATA, "label %d is not 0 or 1", lab[i]);
                tk_err_where(e, "%s: record %llu", file, (unsigned long long)(at + i));
                return TK_EDATA;
            }
        memcpy(label + k, lab, take);
        memcpy(dense + (size_t)k * nd, col[1], take * (size_t)nd * 4);
        k += (int)take;
    }
    *got = k;
    return 0;
}

int tk_dlrm_data_next(tk_dlrm_data *d, int n, uint8_t *label, int32_t *dense, int32_t *cat, int *got, tk_err *e) {
    return read_records(d, n, label, dense, cat, got, e);
}

int tk_dlrm_data_batch(void *rd, int64_t step, int64_t steps_per_epoch, void *const *f, tk_err *e) {
    tk_dlrm_data *d = rd;
    const int B = d->cfg->batch;
    int got = 0;
    // only this rank's records: the cursor decompresses only the frames that hold them
    TRY(tk_dlrm_data_seek(d, (uint64_t)((step % steps_per_epoch) * B + d->own0), e));
    TRY(read_records(d, d->own_n, f[0], f[1], f[2], &got, e));
    return got == d->own_n ? 0 : tk_err_set(e, TK_EINTERNAL, "the training data ended early");
}
