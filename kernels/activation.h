// Pointwise activations of BERT: GELU (the exact, erf form: Hugging Face's "gelu", the MLPerf
// reference's) and tanh (the pooler), forward and backward, over n elements of act (TK_F32, or
// TK_BF16 on cuda; math in fp32, rounded once on store). The GELU math is also the GEMM's
// GELU epilogues' (lib/gpu/gpu.h TK_EPI_GELU_BIAS, TK_EPI_DGELU*), from the inline functions
// below, so the fused and the unfused forms agree.
#ifndef TK_KERNELS_ACTIVATION_H
#define TK_KERNELS_ACTIVATION_H

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

#ifdef __CUDACC__
#define TK_ACT_HD __host__ __device__ __forceinline__
#else
#define TK_ACT_HD static inline
#endif

// gelu(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
TK_ACT_HD float tk_gelu_f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
// gelu'(x) = Phi(x) + x phi(x)
TK_ACT_HD float tk_dgelu_f(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * expf(-0.5f * x * x);
}

#undef TK_ACT_HD

// y = gelu(x); x, y (n) act; y may be x.
int tk_gelu_fwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e);
int tk_gelu_fwd_ref(tk_dtype act, int64_t n, const void *x, void *y, tk_err *e);
// dx = dy * gelu'(x); dx may be dy.
int tk_gelu_bwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, const void *dy, void *dx, tk_err *e);
int tk_gelu_bwd_ref(tk_dtype act, int64_t n, const void *x, const void *dy, void *dx, tk_err *e);
// y = tanh(x); y may be x.
int tk_tanh_fwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e);
int tk_tanh_fwd_ref(tk_dtype act, int64_t n, const void *x, void *y, tk_err *e);
// dx = dy * (1 - y^2) with y = tanh(x) (the forward's output); dx may be dy.
int tk_tanh_bwd(tk_ctx *c, tk_dtype act, int64_t n, const void *y, const void *dy, void *dx, tk_err *e);
int tk_tanh_bwd_ref(tk_dtype act, int64_t n, const void *y, const void *dy, void *dx, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_gelu_fwd_cuda(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e);
int tk_gelu_bwd_cuda(tk_ctx *c, tk_dtype act, int64_t n, const void *x, const void *dy, void *dx, tk_err *e);
int tk_tanh_fwd_cuda(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e);
int tk_tanh_bwd_cuda(tk_ctx *c, tk_dtype act, int64_t n, const void *y, const void *dy, void *dx, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
