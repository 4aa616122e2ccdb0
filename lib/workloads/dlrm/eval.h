// DLRM's evaluation: the eval set read once and cached in the backend's memory (MLPerf allows
// caching it), the forward over it in batches of the global batch size, the exact ROC AUC on the
// device; one host read.
#ifndef TK_WORKLOADS_DLRM_EVAL_H
#define TK_WORKLOADS_DLRM_EVAL_H

#include "workloads/dlrm/types.h"

// The table's evalset_load (*es a tk_dlrm_evalset: the engine's tk_evalset_count and
// tk_evalset_free) and evaluate.
int tk_dlrm_evalset_load(void *model, char *const *paths, int npaths, void **es, tk_err *e);
// Several ranks: collective; every rank holds all the scores and labels and gets the same AUC.
int tk_dlrm_evaluate(void *model, void *es, double *auc, tk_err *e);

#endif
