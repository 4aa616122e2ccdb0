// 3-D convolution (cross-correlation, as PyTorch's Conv3d and cuDNN compute it), the three passes
// of training. Layouts are channels last, as cuDNN's fast 3-D kernels want: activations x
// (N, D, H, W, C) and y (N, Z, P, Q, K) (NDHWC), filters w (K, T, R, S, C) ("KTRSC": PyTorch's
// (K, C, T, R, S) with C moved last). The same stride and padding (both sides) in the three
// spatial dimensions, dilation 1, one group; with (z, p, q) the output voxel and (d, h, w) =
// (z, p, q) * stride - pad + (t, r, s):
//   y[n,z,p,q,k]  = sum_{t,r,s,c} x[n,d,h,w,c] * w[k,t,r,s,c]
//   dx[n,d,h,w,c] = sum over the (z,p,q,t,r,s) that reach (d,h,w) of sum_k dy[n,z,p,q,k] * w[k,t,r,s,c]
//   dw[k,t,r,s,c] = sum_{n,z,p,q} dy[n,z,p,q,k] * x[n,d,h,w,c]
// (x outside the volume reads as 0.) The 3D U-Net's convolutions: 3x3x3 stride 1 pad 1, 3x3x3
// stride 2 pad 1 (downsampling), 1x1x1 (the output layer), and the 2x2x2 stride 2 transposed
// convolution (upsampling), which is the backward data pass of the stride-2 2x2x2 convolution
// from the upsampled volume (tk_conv3d_shape_transposed): PyTorch's ConvTranspose3d weight
// (Cin, Cout, T, R, S) is w (K = Cin, T, R, S, C = Cout), the same permutation, no flip.
// Every tensor of one call has the type t (TK_F32, or TK_BF16: fp32 accumulation, the result
// rounded once). Outputs are overwritten. No bias: the model adds its own.
// The cpu backend runs the direct loops of conv3d_ref.c (the specification; sums in fp32 over
// taps and channels as cuDNN's fp32 accumulators, the filter gradient's sum over the batch in fp64
// per row of outputs); the cuda backend cuDNN 9's graph API (lib/gpu/cudnn_conv3d.h), which must
// have planned the shape first (tk_cudnn_plan3d).
#ifndef TK_KERNELS_CONV3D_H
#define TK_KERNELS_CONV3D_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/cudnn_conv3d.h" // tk_conv3d_shape, tk_conv_pass
#include "gpu/gpu.h"

// A convolution with a k x k x k filter: fills Z, P, Q; TK_EINTERNAL for a shape with no output or
// a tensor of 2^31 elements or more.
int tk_conv3d_shape_init(tk_conv3d_shape *s, int N, int D, int H, int W, int C, int K, int k, int stride, int pad,
                         tk_err *e);
// The transposed convolution (PyTorch's ConvTranspose3d(Cin, Cout, k, stride, pad)) of an input
// (N, Din, Hin, Win, Cin) as the backward data pass of the convolution it inverts: that
// convolution's x is the transposed one's output (N, (Din - 1) stride - 2 pad + k, ..., Cout), its y
// (Z, P, Q, K) the transposed one's input (Din, Hin, Win, Cin). So the transposed forward is
// tk_conv3d(TK_CONV_BWD_DATA, a = input, b = w, out = output), its input gradient
// TK_CONV_FWD(a = doutput, b = w), and its filter gradient TK_CONV_BWD_FILTER(a = doutput,
// b = input).
int tk_conv3d_shape_transposed(tk_conv3d_shape *s, int N, int Din, int Hin, int Win, int Cin, int Cout, int k,
                               int stride, int pad, tk_err *e);

struct tk_cudnn; // lib/gpu/cudnn_conv.h: cuDNN's handle and the plans (NULL on the cpu backend)

// One pass: FWD (a = x, b = w, out = y), BWD_DATA (a = dy, b = w, out = dx),
// BWD_FILTER (a = x, b = dy, out = dw).
int tk_conv3d(tk_ctx *c, struct tk_cudnn *dnn, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a,
              const void *b, void *out, tk_err *e);
int tk_conv3d_ref(tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a, const void *b, void *out,
                  tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
