// The stem convolution of ResNet-50 (224 x 224 images) and SSD300 (300 x 300) at the MLPerf
// shapes, as one kernel of our own: the 4x4, stride 1, unpadded convolution over the
// space-to-depth input of kernels/stem_s2d.h (16 channels) into 64 output channels, bf16 in and
// out, fp32 accumulation:
//   y[n, p, q, k] = round_bf16( sum_{qy, qx < 4, c < 16} xs[n, p + qy, q + qx, c] * ws[k, qy, qx, c] )
// for xs (N, Hs, Hs, 16), ws (64, 4, 4, 16), y (N, Hs - 3, Hs - 3, 64), Hs = S/2 + 3 (115 or 153).
// It is conv.h's forward pass of that shape (tk_conv_ref is its reference); cuDNN 9.19 ran it at
// ~0.72 ms at batch 256 on an H100 at 224, 4x the time its 519 MB of input and output take to
// move, so the models run this kernel where tk_stem_conv_ok says it applies (TK_STEM_CONV=cudnn
// keeps cuDNN's).
//
// How: a persistent grid (2 blocks an SM); a block takes output row pairs of one image in turn,
// copies their 5 input rows into shared memory (cp.async, the next pair's while it computes this
// one) beside the whole filter (32 KB, once), and each of its ceil(Q/16) warps (Q = Hs - 3 output
// columns: 7 warps at 112, 10 at 150) computes 2 x 16 output pixels x 64 channels with mma.sync
// m16n8k16 (bf16, fp32 accumulators), the 16 taps as 16 steps of k = 16 channels; the outputs go
// through shared memory to 16-byte stores. Where Q is not a multiple of 16 (150 = 9 x 16 + 6) the
// last warp's 10 pixels past Q compute on zeroed pad columns of the shared input rows (no load
// past the image's Hs columns) and are not stored: nothing past column Q - 1 of a row is written.
#ifndef TK_KERNELS_STEM_CONV_H
#define TK_KERNELS_STEM_CONV_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

// Whether the kernel runs this convolution: bf16, K 64, images of 224 (Hs 115, 112x112 outputs:
// ResNet-50) or 300 (Hs 153, 150x150 outputs: SSD300).
int tk_stem_conv_ok(tk_dtype t, int S, int K);
// The forward of xs (N, S/2 + 3, S/2 + 3, 16) and ws (K, 4, 4, 16) into y (N, S/2, S/2, K), all in
// t: the cpu backend any shape (tk_conv_ref), the cuda backend where tk_stem_conv_ok.
int tk_stem_conv_fwd(tk_ctx *c, const void *xs, int N, int S, const void *ws, int K, tk_dtype t, void *y, tk_err *e);
int tk_stem_conv_fwd_ref(const void *xs, int N, int S, const void *ws, int K, tk_dtype t, void *y, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_stem_conv_fwd_cuda(tk_ctx *c, const void *xs, int N, int S, const void *ws, int K, void *y, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
