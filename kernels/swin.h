// The 3D U-Net's sliding-window evaluation (MLPerf unet3d, mlcommons/training
// retired_benchmarks/unet3d/pytorch/runtime/inference.py: sliding_window_inference, pad_input,
// gaussian_kernel), less the network: the window grid, the Gaussian importance map, the network
// input of a batch of windows, and the importance-weighted accumulation of their outputs. The
// division, argmax and Dice follow in kernels/dice_score.h.
//
// What the reference does with a volume (1, 1, D, H, W) and roi r, overlap o, per axis of n voxels:
//   stride s = int(r * (1 - o))                                            (inference.py:97)
//   crop: b = n % s, kept only when b < s // 2 (else 0); the image AND the label lose b // 2 voxels
//         at the front and b - b // 2 at the back: c = n - b voxels remain  (:99-108)
//   pad:  p = (s - c % s) % s, plus s when c + p < r; p // 2 in front, the rest behind, with the
//         constant -2.2 (evaluate()'s padding_val)                         (:67-80, :44)
//   windows at 0, s, 2 s, ... while origin + r <= c + p (no window is moved to the end)  (:113, :124)
//   every window's 3 logits times the map added into a fp32 sum, the map into a fp32 weight sum,
//   window by window in raster order (D outer, W inner)                    (:124-141)
//   result = sum / weight sum, cut back to the c voxels between the pads   (:146-153)
// The reference breaks where a crop and a pad meet (its output then has n voxels, its label c) and
// divides 0 by 0 where the windows leave a voxel uncovered (a stride that does not divide
// r - s): tk_swin_grid_init refuses both (TK_EDATA). With roi 128 and overlap 0.5 neither happens.
// Here the sums cover only the c voxels of the output, not the pads: their values are the same.
// The weight sum is accumulated, not taken in closed form, so that its rounding is the reference's.
#ifndef TK_KERNELS_SWIN_H
#define TK_KERNELS_SWIN_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

#define TK_SWIN_ROI 128
#define TK_SWIN_OVERLAP 0.5
#define TK_SWIN_SIGMA 0.125  // the map's standard deviation over the roi (inference.py:119)
#define TK_SWIN_PAD -2.2f    // the image's padding value (inference.py:44)
#define TK_SWIN_CLASSES 3
#define TK_SWIN_MAX_BATCH 64 // windows a call on cuda (their origins travel as kernel arguments)

// The windows over one volume. Coordinates: original (the volume as given), output (after the
// crop: original - crop), padded (output + pad0; window origins are padded coordinates).
typedef struct {
    int roi, stride;
    int64_t shape[3]; // D, H, W as given
    int64_t crop[3];  // voxels cut at the front (b // 2)
    int64_t out[3];   // voxels evaluated (c): the prediction's and the label's extent
    int64_t pad0[3];  // padding in front (p // 2) and behind
    int64_t pad1[3];
    int n[3];      // windows along each axis
    int64_t count; // n[0] n[1] n[2]
} tk_swin_grid;

// The grid of a volume D x H x W for a cubic roi and overlap in [0, 1). TK_EDATA where the reference
// would fail (see above), TK_EINTERNAL for a shape or roi out of range.
int tk_swin_grid_init(tk_swin_grid *g, int64_t D, int64_t H, int64_t W, int roi, double overlap, tk_err *e);
// Window w's origin (padded coordinates), w in [0, count) in raster order (D outer, W inner).
void tk_swin_window(const tk_swin_grid *g, int64_t w, int64_t org[3]);
static inline int64_t tk_swin_out_numel(const tk_swin_grid *g) { return g->out[0] * g->out[1] * g->out[2]; }

// The importance map (roi^3 fp32, (z, y, x) row-major): scipy.signal.windows.gaussian(roi, 0.125 roi)
// g[i] = exp(-(i - (roi-1)/2)^2 / (2 std std)), m = cbrt((g[a] g[b]) g[c]) / max m, computed in
// fp64 in the reference's order of operations and rounded once to fp32 (inference.py:83-90, :119).
void tk_swin_gaussian(int roi, float *map);

// The network input of windows w0 .. w0 + B - 1: x (B, roi, roi, roi, ld) of type t (TK_F32 or
// TK_BF16) from the image (D, H, W) fp32 of the grid's shape; channel 0 the cropped image or
// pad_value outside it, channels 1 .. ld-1 zero.
int tk_swin_gather(tk_ctx *c, tk_dtype t, const float *image, const tk_swin_grid *g, int64_t w0, int B,
                   float pad_value, int ld, void *x, tk_err *e);
int tk_swin_gather_ref(tk_dtype t, const float *image, const tk_swin_grid *g, int64_t w0, int B, float pad_value,
                       int ld, void *x, tk_err *e);

// The outputs y (B, roi, roi, roi, ld) of type t (logits, classes in channels 0..2) of windows
// w0 .. w0 + B - 1 into acc (out voxels, 3) fp32 and wsum (out voxels) fp32, both zeroed by the
// caller before the first batch: per voxel of the output and window, in window order,
//   acc[v][k] = acc[v][k] + fl(y[k] * map)   and   wsum[v] = wsum[v] + map
// (fp32, two roundings, no fused multiply-add: the reference's model(x) * norm_patch then +=).
// Batches passed in increasing window order give the reference's sums bit for bit, on both
// backends (the CUDA kernel loops over the batch's windows per voxel: no atomics). On cuda, the
// gather and the accumulation take at most TK_SWIN_MAX_BATCH windows a call; y, x, image, map,
// acc and wsum are device memory there.
int tk_swin_accumulate(tk_ctx *c, tk_dtype t, const void *y, int ld, const tk_swin_grid *g, int64_t w0, int B,
                       const float *map, float *acc, float *wsum, tk_err *e);
int tk_swin_accumulate_ref(tk_dtype t, const void *y, int ld, const tk_swin_grid *g, int64_t w0, int B,
                           const float *map, float *acc, float *wsum, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_swin_gather_cuda(tk_ctx *c, tk_dtype t, const float *image, const tk_swin_grid *g, int64_t w0, int B,
                        float pad_value, int ld, void *x, tk_err *e);
int tk_swin_accumulate_cuda(tk_ctx *c, tk_dtype t, const void *y, int ld, const tk_swin_grid *g, int64_t w0, int B,
                            const float *map, float *acc, float *wsum, tk_err *e);
#endif

static inline int tk_swin_batch_check(const char *op, tk_dtype t, const tk_swin_grid *g, int64_t w0, int B, int ld,
                                      int min_ld, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "%s: activations in %s", op, tk_dtype_name(t));
    if (B < 1 || w0 < 0 || w0 + B > g->count || ld < min_ld)
        return tk_err_set(e, TK_EINTERNAL, "%s: windows %lld + %d of %lld, ld %d", op, (long long)w0, B,
                          (long long)g->count, ld);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
