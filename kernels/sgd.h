// Plain SGD (MLPerf DLRM: no momentum, no weight decay) over a flat fp32 master-weight buffer:
//   w[i] -= lr * g[i],  lr read from ONE f32 device scalar (computed on the device by
// tk_lr_schedule), so a captured graph needs no host value. When copy is not NULL the updated
// weight is also written, rounded to copy_type (TK_BF16/TK_F16), into the compute copy
// (the cuda backend's low-precision weights; the cpu backend passes NULL).
#ifndef TK_KERNELS_SGD_H
#define TK_KERNELS_SGD_H

#ifdef __cplusplus
extern "C" {
#endif
#include "core/bf16.h" // tk_f32_to_bf16, tk_bf16_to_f32 (for the users that round their copies)
#include "gpu/gpu.h"

// w (n) f32; g (n) f32; lr (1) f32 device; copy (n) copy_type or NULL.
int tk_sgd_update(tk_ctx *c, float *w, const float *g, size_t n, const float *lr, void *copy,
                  tk_dtype copy_type, tk_err *e);
int tk_sgd_update_ref(float *w, const float *g, size_t n, const float *lr, void *copy,
                      tk_dtype copy_type, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_sgd_update_cuda(tk_ctx *c, float *w, const float *g, size_t n, const float *lr, void *copy,
                       tk_dtype copy_type, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
