// The eval set of a model scored by AUC over its whole set (DLRM, the MLP): the records read once
// and cached in the backend's memory (MLPerf allows caching it), field by field, with room for
// the scores of an evaluation and tk_auc's workspace.
#ifndef TK_ENGINE_EVALSET_H
#define TK_ENGINE_EVALSET_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_EVALSET_MAX_FIELDS 4

typedef struct tk_evalset {
    int64_t n;                            // records
    int nf;
    void *field[TK_EVALSET_MAX_FIELDS];   // device: field f of every record, n * bytes[f]
    float *score;                         // (n) device: the scores of the last evaluation
    void *ws;                             // tk_auc's workspace
} tk_evalset;

// Reads the n records into the host arrays host[f] (n * bytes[f] each).
typedef int (*tk_evalset_fill)(void *arg, int n, void *const *host, tk_err *e);

// *out = the n (1 .. INT32_MAX) records that fill reads, their nf fields of bytes[f] bytes a
// record copied into the backend's memory (waits for the copies).
int tk_evalset_cache(tk_ctx *c, int64_t n, int nf, const size_t *bytes, tk_evalset_fill fill, void *arg,
                     tk_evalset **out, tk_err *e);
void tk_evalset_free(tk_ctx *c, tk_evalset *es);

#ifdef __cplusplus
}
#endif

#endif
