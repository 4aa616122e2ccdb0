// DLRM's evaluation: the eval set read once and cached in the backend's memory (MLPerf allows
// caching it), the forward over it in batches of the global batch size, the exact ROC AUC on the
// device; one host read.
#ifndef TK_WORKLOADS_DLRM_EVAL_H
#define TK_WORKLOADS_DLRM_EVAL_H

#include "workloads/dlrm/types.h"

// The table's evalset_load (*es a tk_dlrm_evalset), evalset_count, evalset_free, evaluate.
int tk_dlrm_evalset_load(void *model, char *const *paths, int npaths, void **es, tk_err *e);
int64_t tk_dlrm_evalset_count(const void *es);
void tk_dlrm_evalset_free(void *model, void *es);
// Several ranks: collective; every rank holds all the scores and labels and gets the same AUC.
int tk_dlrm_evaluate(void *model, void *es, double *auc, tk_err *e);

#endif
