// Pointwise activations of BERT: GELU (the exact, erf form: Hugging Face's "gelu", the MLPerf
// reference's) and tanh (the pooler), forward and backward, over n elements of act (TK_F32, or
// TK_BF16 on cuda; math in fp32, rounded once on store). The GELU math is also the GEMM's
// GELU epilogues' (lib/gpu/gpu.h TK_EPI_GELU_BIAS, TK_EPI_DGELU*), from the inline functions
// of lib/core/gelu.h, so the fused and the unfused forms agree.
#ifndef TK_KERNELS_ACTIVATION_H
#define TK_KERNELS_ACTIVATION_H

#include <math.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core/gelu.h" // tk_gelu_f, tk_dgelu_f
#include "gpu/gpu.h"

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
