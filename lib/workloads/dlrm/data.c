// DLRM record reader over .tks shards (data.h), on the engine's record cursor (engine/data.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/fastmod.h"
#include "engine/data.h"
#include "workloads/dlrm/data.h"

struct tk_dlrm_data {
    tk_records *r;
    const tk_dlrm_config *cfg;
};

int tk_dlrm_data_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e) {
    (void)rank, (void)world;
    *rd = NULL;
    tk_dlrm_data *d = calloc(1, sizeof *d);
    if (!d) return tk_err_set(e, TK_EIO, "out of memory");
    d->cfg = cfg;
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

int tk_dlrm_data_next(tk_dlrm_data *d, int n, uint8_t *label, int32_t *dense, int32_t *cat, int *got, tk_err *e) {
    const int nd = d->cfg->num_dense, nc = d->cfg->num_tables;
    const int64_t *rows = d->cfg->table_rows;
    int k = 0;
    uint64_t mod_m[TK_DLRM_MAX_TABLES];
    if (nc > TK_DLRM_MAX_TABLES) return tk_err_set(e, TK_EINTERNAL, "too many categorical features");
    for (int f = 0; f < nc; f++) {
        if (rows[f] < 1 || rows[f] > INT32_MAX) return tk_err_set(e, TK_EINTERNAL, "table of %lld rows", (long long)rows[f]);
        mod_m[f] = tk_fastmod_m((uint32_t)rows[f]);
    }
    while (k < n) {
        const void *col[3];
        size_t take;
        const char *file;
        uint64_t at;
        TRY(tk_records_next(d->r, (size_t)(n - k), col, &take, &file, &at, e));
        if (take == 0) break;
        memcpy(label + k, col[0], take);
        memcpy(dense + (size_t)k * nd, col[1], take * nd * 4);
        const int32_t *src = col[2];
        int32_t *dst = cat + (size_t)k * nc;
        // Folding is the loader's hot loop (1.7 M ids a batch of 65,536): one pass per record
        // and feature with a multiply-shift modulo instead of a division per id (a division
        // per id made decoding a batch take ~35 ms of one core).
        int bad = 0;
        for (size_t i = 0; i < take; i++) {
            const int32_t *s = src + i * (size_t)nc;
            int32_t *o = dst + i * (size_t)nc;
            for (int f = 0; f < nc; f++) {
                int32_t id = s[f];
                bad |= id < 0;
                uint32_t u = (uint32_t)id;
                o[f] = u < (uint32_t)rows[f] ? id : (int32_t)tk_fastmod(u, mod_m[f], (uint32_t)rows[f]);
            }
        }
        if (bad) {
            size_t i = 0;
            while (src[i] >= 0) i++;
            tk_err_set(e, TK_EDATA, "categorical feature %d has a negative id %d", (int)(i % nc), src[i]);
            tk_err_where(e, "%s: record %llu", file, (unsigned long long)(at + i / nc));
            return TK_EDATA;
        }
        for (size_t i = 0; i < take; i++)
            if (label[k + i] > 1) {
                tk_err_set(e, TK_EDATA, "label %d is not 0 or 1", label[k + i]);
                tk_err_where(e, "%s: record %llu", file, (unsigned long long)(at + i));
                return TK_EDATA;
            }
        k += (int)take;
    }
    *got = k;
    return 0;
}

int tk_dlrm_data_batch(void *rd, int64_t step, int64_t steps_per_epoch, void *const *f, tk_err *e) {
    tk_dlrm_data *d = rd;
    const int B = d->cfg->batch;
    int got = 0;
    TRY(tk_dlrm_data_seek(d, (uint64_t)((step % steps_per_epoch) * B), e));
    TRY(tk_dlrm_data_next(d, B, f[0], f[1], f[2], &got, e));
    return got == B ? 0 : tk_err_set(e, TK_EINTERNAL, "the training data ended early");
}
