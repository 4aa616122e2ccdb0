// 2-D convolution (cross-correlation, as PyTorch and cuDNN compute it), the three passes of
// training. Layouts are cuDNN's NHWC ones: activations x (N, H, W, C) and y (N, P, Q, K), filters
// w (K, R, S, C) ("KRSC"; PyTorch's (K, C, R, S) with C moved last). Square stride and padding on
// both sides, dilation 1, one group:
//   y[n,p,q,k]  = sum_{r,s,c} x[n, p*stride - pad + r, q*stride - pad + s, c] * w[k,r,s,c]
//   dx[n,h,w,c] = sum over (p,q,r,s) with h = p*stride - pad + r, w = q*stride - pad + s of
//                 sum_k dy[n,p,q,k] * w[k,r,s,c]
//   dw[k,r,s,c] = sum_{n,p,q} dy[n,p,q,k] * x[n, p*stride - pad + r, q*stride - pad + s, c]
// (x outside the image reads as 0.) Every tensor of one call has the type t (TK_F32, or TK_BF16
// on the cuda backend: fp32 accumulation, the result rounded to bf16). Outputs are overwritten.
// The cpu backend runs the direct loops of conv_ref.c (the specification); the cuda backend runs
// cuDNN 9 through its graph API (lib/gpu/cudnn_conv.h), which must have planned the shape first.
#ifndef TK_KERNELS_CONV_H
#define TK_KERNELS_CONV_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/conv_shape.h" // tk_conv_shape, tk_conv_pass
#include "gpu/gpu.h"

// Fills P and Q; TK_EINTERNAL for a shape with no output or out of int range.
int tk_conv_shape_init(tk_conv_shape *s, int N, int H, int W, int C, int K, int R, int S, int stride, int pad,
                       tk_err *e);

struct tk_cudnn; // lib/gpu/cudnn_conv.h: cuDNN's handle and the plans (NULL on the cpu backend)

// One pass: FWD (a = x, b = w, out = y), BWD_DATA (a = dy, b = w, out = dx),
// BWD_FILTER (a = x, b = dy, out = dw).
int tk_conv(tk_ctx *c, struct tk_cudnn *dnn, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, const void *a,
            const void *b, void *out, tk_err *e);
int tk_conv_ref(tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, const void *a, const void *b, void *out,
                tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
