// Exact ROC AUC, sort-based, with ties handled as sklearn's roc_auc_score (which the MLPerf DLRM
// reference calls): samples with equal scores form one step of the ROC curve, i.e. a positive and
// a negative with the same score count 1/2 (the Mann-Whitney U statistic with mid-ranks).
//   AUC = (sum over positives of the number of negatives with a lower score
//          + 1/2 * the number with an equal score) / (P * N)
// Undefined when P = 0 or N = 0: the op then writes NaN (sklearn raises).
#ifndef TK_KERNELS_AUC_H
#define TK_KERNELS_AUC_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

// Workspace bytes for n samples (sort scratch).
size_t tk_auc_ws_bytes(tk_backend b, int64_t n);
// score (n) f32 (logits or probabilities: AUC only depends on their order); label (n) u8;
// ws: tk_auc_ws_bytes bytes of device memory; auc (1) f64 device output.
int tk_auc(tk_ctx *c, const float *score, const uint8_t *label, int64_t n, void *ws, double *auc,
           tk_err *e);
int tk_auc_ref(const float *score, const uint8_t *label, int64_t n, void *ws, double *auc,
               tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_auc_ws_bytes_cuda(int64_t n);
int tk_auc_cuda(tk_ctx *c, const float *score, const uint8_t *label, int64_t n, void *ws,
                double *auc, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
