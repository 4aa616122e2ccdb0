// The MLPerf DLRM dense-feature transform: y = log(x + 1) of the raw integer counts (the
// reference does torch.log(X_int + 1); negative counts were already clamped to 0 by prep, and
// are clamped here again so the op is total).
#ifndef TK_KERNELS_DENSE_LOG1P_H
#define TK_KERNELS_DENSE_LOG1P_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

// x (n) i32 device; y (n) f32 device: y[i] = logf(max(x[i], 0) + 1) (computed as log1p in fp64).
int tk_dense_log1p(tk_ctx *c, const int32_t *x, int64_t n, float *y, tk_err *e);
int tk_dense_log1p_ref(const int32_t *x, int64_t n, float *y, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_dense_log1p_cuda(tk_ctx *c, const int32_t *x, int64_t n, float *y, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
