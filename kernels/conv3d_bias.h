// The bias of the 3D U-Net's biased convolutions (the transposed 2x2x2 upsampling and the 1x1x1
// output layer; the others have none, as InstanceNorm's beta makes a bias redundant), on their
// channels-last output seen as M = N*Z*P*Q rows of K channels:
//   forward:  y[m,k] += b[k]                       (in place; rounded to t once)
//   backward: db[k] = sum_m dy[m,k]                (overwritten; fp64 sums)
// Types: y, dy (M, K) in t (TK_F32 or TK_BF16); b, db (K) fp32. The CUDA backward adds fp64
// partials over G groups of rows (G a function of M and K) in a fixed order: deterministic.
// ws: tk_conv3d_bias_ws_bytes (the reference needs none).
#ifndef TK_KERNELS_CONV3D_BIAS_H
#define TK_KERNELS_CONV3D_BIAS_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

size_t tk_conv3d_bias_ws_bytes(tk_backend b, int64_t M, int K);
int tk_conv3d_bias_fwd(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, tk_err *e);
int tk_conv3d_bias_bwd(tk_ctx *c, tk_dtype t, const void *dy, int64_t M, int K, float *db, void *ws, tk_err *e);

int tk_conv3d_bias_fwd_ref(tk_dtype t, void *y, int64_t M, int K, const float *b, tk_err *e);
int tk_conv3d_bias_bwd_ref(tk_dtype t, const void *dy, int64_t M, int K, float *db, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_conv3d_bias_ws_bytes_cuda(int64_t M, int K);
int tk_conv3d_bias_fwd_cuda(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, tk_err *e);
int tk_conv3d_bias_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, int64_t M, int K, float *db, void *ws, tk_err *e);
#endif

static inline int tk_conv3d_bias_check(tk_dtype t, int64_t M, int K, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "conv3d bias: tensors in %s", tk_dtype_name(t));
    if (M < 1 || K < 1) return tk_err_set(e, TK_EINTERNAL, "conv3d bias: bad shape M %lld K %d", (long long)M, K);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
