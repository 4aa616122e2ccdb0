// A workload's eval set read once through its reader and cached in the backend's memory (MLPerf
// allows caching it), field by field: DLRM's and the MLP's (scored by AUC over the whole set, with
// room for the scores and tk_auc's workspace), BERT's (padded to whole batches).
#ifndef TK_ENGINE_EVALSET_H
#define TK_ENGINE_EVALSET_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_EVALSET_MAX_FIELDS 8

typedef struct tk_evalset {
    tk_ctx *c;
    int64_t n;                            // records
    int64_t cached;                       // records cached: n, or padded to whole batches (below)
    int nf;
    void *field[TK_EVALSET_MAX_FIELDS];   // device: field f of every cached record, cached * bytes[f]
    float *score;                         // (n) device: the scores of the last evaluation (scores)
    void *ws;                             // tk_auc's workspace (scores)
} tk_evalset;

// Reads the n records of the set from reader rd into the host arrays host[f], each of `cached`
// records of bytes[f] (zeroed: the records past n, the padding, stay 0 unless fill writes them).
// arg: the spec's.
typedef int (*tk_evalset_fill)(void *arg, void *rd, int n, int64_t cached, void *const *host, tk_err *e);

// What a workload's eval set is: its reader (the table's reader_open, reader_count and
// reader_close, opened over cfg as rank 0 of 1), a record's fields, and how fill reads them.
typedef struct tk_evalset_spec {
    int (*open)(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e);
    uint64_t (*count)(void *rd);
    void (*close)(void *rd);
    const void *cfg;
    int nf;                               // fields, 1 .. TK_EVALSET_MAX_FIELDS
    size_t bytes[TK_EVALSET_MAX_FIELDS];  // a record's bytes of field f
    int64_t max;                          // the most records (0: INT32_MAX)
    int64_t batch;                        // > 1: cache n rounded up to a multiple of it (padding)
    int scores;                           // room for a score a record and tk_auc's workspace
    tk_evalset_fill fill;
    void *arg;
} tk_evalset_spec;

// *out = the eval set in paths as s says, copied into the backend's memory (waits for the copies).
// An empty set, or one of more than s->max records, is TK_EDATA naming paths[0].
int tk_evalset_load(tk_ctx *c, const tk_evalset_spec *s, char *const *paths, int npaths, tk_evalset **out,
                    tk_err *e);
// The table's evalset_count and evalset_free for a tk_evalset (es; model unused).
int64_t tk_evalset_count(const void *es);
void tk_evalset_free(void *model, void *es);

#ifdef __cplusplus
}
#endif

#endif
