// Softmax cross-entropy with label smoothing (torch.nn.CrossEntropyLoss(label_smoothing=eps)), one
// op for the loss and its gradient, and top-1 accuracy for evaluation. Per row b of logits z (K
// classes) with label y:
//   q_j = eps / K + (1 - eps) [j == y]                    the smoothed target
//   lse = log sum_j exp z_j,  loss_b = lse - sum_j q_j z_j  (= -sum_j q_j log softmax_j)
//   dz_j = (softmax_j - q_j) / N                           (N: the global batch; several ranks' B
//                                                           rows each add up to the whole batch's)
//   acc[0] += (sum_b loss_b) / N,  acc[1] += 1             (device accumulator, read at log points)
// A row whose label is outside [0, K) (eval padding: -1) adds no loss and gets dz = 0.
// Math in fp64; z (B, K) fp32; labels (B) i32; dz (B, K) in t (TK_F32, or TK_BF16 for the bf16
// GEMM that reads it). ws: tk_xent_smooth_ws_bytes (the CUDA side's per-row losses, added in a fixed
// order: deterministic).
// Top-1: *count += the rows whose label is the index of their largest logit (the first one on
// ties; NaN never wins); count is a device i64.
#ifndef TK_KERNELS_XENT_SMOOTH_H
#define TK_KERNELS_XENT_SMOOTH_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

size_t tk_xent_smooth_ws_bytes(tk_backend b, int B);
int tk_xent_smooth(tk_ctx *c, const float *z, const int32_t *label, int B, int K, int N, float eps, tk_dtype t,
                   void *dz, double *acc, void *ws, tk_err *e);
int tk_top1_count(tk_ctx *c, const float *z, const int32_t *label, int B, int K, int64_t *count, tk_err *e);

int tk_xent_smooth_ref(const float *z, const int32_t *label, int B, int K, int N, float eps, tk_dtype t, void *dz,
                       double *acc, tk_err *e);
int tk_top1_count_ref(const float *z, const int32_t *label, int B, int K, int64_t *count, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_xent_smooth_ws_bytes_cuda(int B);
int tk_xent_smooth_cuda(tk_ctx *c, const float *z, const int32_t *label, int B, int K, int N, float eps, tk_dtype t,
                        void *dz, double *acc, void *ws, tk_err *e);
int tk_top1_count_cuda(tk_ctx *c, const float *z, const int32_t *label, int B, int K, int64_t *count, tk_err *e);
#endif

static inline int tk_xent_check(int B, int K, int N, float eps, tk_dtype t, tk_err *e) {
    if (B < 0 || K < 1 || N < B || N < 1 || !(eps >= 0 && eps <= 1) || (t != TK_F32 && t != TK_BF16))
        return tk_err_set(e, TK_EINTERNAL, "xent_smooth: bad arguments B %d K %d N %d eps %g %s", B, K, N, eps,
                          tk_dtype_name(t));
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
