// ResNet's stem convolution (7x7, stride 2, padding 3) as a 4x4, stride 1, unpadded convolution
// over a space-to-depth copy of the input: each 2x2 block of pixels becomes one pixel of 12
// channels (padded to TK_S2D_C = 16), with the padding of the 7x7 convolution made explicit (2
// pixels before, 1 after, in the half-size grid). cuDNN's NHWC kernels run the 4x4 form over 16
// channels ~2.5x faster on an H100 than the 7x7 form over 3 channels padded to 4 (forward 1.83 ->
// 0.73 ms, filter gradient 1.17 -> 0.44 ms at batch 256: contrib/bench/NOTES.md). The same idea
// as the space-to-depth stems of MLPerf's TPU ResNet submissions.
//
// For an image x (N, S, S, 3) (S even), Hs = S / 2 + 3:
//   xs[n, i, j, (py*2 + px)*3 + c] = x[n, 2(i-2) + py, 2(j-2) + px, c]   (0 outside the image),
//   xs[n, i, j, 12..15] = 0,                                              i, j in [0, Hs)
//   ws[k, qy, qx, (py*2 + px)*3 + c] = w[k, 2qy + py - 1, 2qx + px - 1, c] (0 where a tap is -1),
//   ws[k, qy, qx, 12..15] = 0,                                            qy, qx in [0, 4)
// so that conv(xs, ws; 4x4/1, pad 0) = conv(x, w; 7x7/2, pad 3), both (N, S/2, S/2, K): each
// output is the same 147 products (plus zeros) summed in another order. The filter gradient maps
// back the same way: dw[k, r, s, c] = dws[k, (r+1)/2, (s+1)/2, (((r+1)%2)*2 + (s+1)%2)*3 + c]
// (every tap r, s in 0..6 has exactly one place in ws; ws's other entries are the zero taps').
//
//   tk_stem_s2d_input: the batch's 8-bit images normalized ((v - mean[c]) / std[c], in fp32, then
//     rounded to t: kernels/img_norm.h's values) straight into xs (N, Hs, Hs, 16) in t.
//   tk_stem_s2d_input_f32: images already normalized, x (N, S, S, 3) fp32 (SSD's input: its data
//     path normalizes on the host), into xs (N, Hs, Hs, 16) in t, each value rounded once.
//   tk_stem_s2d_weight: w (K, 7, 7, 3) fp32 -> ws (K, 4, 4, 16) in t.
//   tk_stem_s2d_wgrad: dws (K, 4, 4, 16) in t -> dw (K, 7, 7, 3) fp32 (overwritten).
// t is TK_F32 or TK_BF16. The cpu backend runs stem_s2d_ref.c (the specification).
#ifndef TK_KERNELS_STEM_S2D_H
#define TK_KERNELS_STEM_S2D_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"
#include "img_norm.h"

enum { TK_S2D_C = 16 }; // channels of xs and ws (12 used)

#ifdef __CUDACC__
#define TK_S2D_HD __host__ __device__
#else
#define TK_S2D_HD
#endif
static inline TK_S2D_HD int tk_s2d_side(int S) { return S / 2 + 3; }

int tk_stem_s2d_input(tk_ctx *c, const uint8_t *src, int N, int S, tk_img_norm n, tk_dtype t, void *xs, tk_err *e);
int tk_stem_s2d_input_f32(tk_ctx *c, const float *x, int N, int S, tk_dtype t, void *xs, tk_err *e);
int tk_stem_s2d_weight(tk_ctx *c, const float *w, int K, tk_dtype t, void *ws, tk_err *e);
int tk_stem_s2d_wgrad(tk_ctx *c, const void *dws, int K, tk_dtype t, float *dw, tk_err *e);

int tk_stem_s2d_input_ref(const uint8_t *src, int N, int S, tk_img_norm n, tk_dtype t, void *xs, tk_err *e);
int tk_stem_s2d_input_f32_ref(const float *x, int N, int S, tk_dtype t, void *xs, tk_err *e);
int tk_stem_s2d_weight_ref(const float *w, int K, tk_dtype t, void *ws, tk_err *e);
int tk_stem_s2d_wgrad_ref(const void *dws, int K, tk_dtype t, float *dw, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_stem_s2d_input_cuda(tk_ctx *c, const uint8_t *src, int N, int S, tk_img_norm n, tk_dtype t, void *xs,
                           tk_err *e);
int tk_stem_s2d_input_f32_cuda(tk_ctx *c, const float *x, int N, int S, tk_dtype t, void *xs, tk_err *e);
int tk_stem_s2d_weight_cuda(tk_ctx *c, const float *w, int K, tk_dtype t, void *ws, tk_err *e);
int tk_stem_s2d_wgrad_cuda(tk_ctx *c, const void *dws, int K, tk_dtype t, float *dw, tk_err *e);
#endif

static inline int tk_stem_s2d_check(int N, int S, int K, tk_dtype t, tk_err *e) {
    if (N < 0 || S < 2 || S % 2 || K < 1 || (t != TK_F32 && t != TK_BF16))
        return tk_err_set(e, TK_EINTERNAL, "stem_s2d: N %d S %d K %d %s (S even, K >= 1, fp32 or bf16)", N, S, K,
                          tk_dtype_name(t));
    return 0;
}

// Where tap (r, s, c) of the 7x7 filter sits in one filter row of ws (K's stride 4 * 4 * 16).
static inline TK_S2D_HD int tk_s2d_tap(int r, int s, int c) {
    return (((r + 1) / 2) * 4 + (s + 1) / 2) * TK_S2D_C + (((r + 1) % 2) * 2 + (s + 1) % 2) * 3 + c;
}

#ifdef __cplusplus
}
#endif
#endif
