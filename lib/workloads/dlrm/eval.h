// DLRM's evaluation: the eval set read once and cached in the backend's memory (MLPerf allows
// caching it), the forward over it in batches of the global batch size, the exact ROC AUC on the
// device; one host read.
#ifndef TK_WORKLOADS_DLRM_EVAL_H
#define TK_WORKLOADS_DLRM_EVAL_H

#include "workloads/dlrm/types.h"

int tk_dlrm_evalset_load(tk_dlrm *m, char *const *paths, int npaths, tk_dlrm_evalset **es, tk_err *e);
void tk_dlrm_evalset_free(tk_dlrm *m, tk_dlrm_evalset *es);
// Several ranks: collective; every rank holds all the scores and labels and gets the same AUC.
int tk_dlrm_evaluate(tk_dlrm *m, tk_dlrm_evalset *es, double *auc, tk_err *e);

#endif
