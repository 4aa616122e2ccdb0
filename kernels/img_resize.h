// Batched crop + resize + flip + normalize of decoded RGB images into NHWC: the GPU half of the
// nvJPEG decoder (lib/image/nvjpeg.c). Per image it computes exactly what the CPU decoder's
// resampling does (tk_img_axis_plan's Pillow-style triangle filter with the same double-precision
// tap positions and float weights, the vertical pass then the horizontal one in float,
// normalization, the flip, the output type), so the reference is that code: tk_img_resample, in
// kernels/img_resize_ref.c, which the CPU decoder (lib/image/cpu.c) runs too. The kernels avoid
// fused multiply-adds, so the two agree to the last bit (the test measures it).
//
// Image k's output is out + k * out_h * out_w * 3 values of o->dtype: the window
// [wx, wx + out_w) x [wy, wy + out_h) of the box [bx0, bx1) x [by0, by1) (source coordinates)
// resized to rw x rh, with taps only from [cx0, cx1) x [cy0, cy1), mirrored when flip.
#ifndef TK_KERNELS_IMG_RESIZE_H
#define TK_KERNELS_IMG_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

// U8: the normalized value rounded half up and clamped to 0..255 (with mean 0 and std 1: the
// resampled pixel as bytes, what ResNet's loader stages for the device to normalize).
typedef enum { TK_IMG_F32 = 0, TK_IMG_BF16 = 1, TK_IMG_U8 = 2 } tk_img_dtype;

typedef struct tk_img_rs_job {
    int64_t src;                 // byte offset of the image's pixel (0, 0) in src (RGB, interleaved)
    int64_t tmp;                 // float offset of its scratch in tmp: out_h x (cx1 - cx0) x 3
    double bx0, bx1, by0, by1;   // the box, in source pixels
    int32_t pitch;               // bytes from one source row to the next
    int32_t rw, rh, wx, wy;      // the resized size, the output window's offset in it
    int32_t cx0, cx1, cy0, cy1;  // the source pixels taps may read
    int32_t flip;
} tk_img_rs_job;

typedef struct tk_img_rs_out {
    int out_w, out_h;
    float mean[3], std[3];       // out = (v - mean) / std, as 1/std and -mean/std (tk_img_resample)
    tk_img_dtype dtype;
} tk_img_rs_out;

// Bilinear resampling with Pillow's triangle filter (support 1, widened by the downscale factor,
// so downscaling averages like Pillow's Image.resize(BILINEAR) and torchvision's antialias=True):
// per axis, output i is the weighted sum of the source pixels within the filter around
// b0 + (i + 0.5) * (b1 - b0) / r, taken only from [c0, c1) (the crop: no pixel outside it counts).
typedef struct {
    int n;                       // outputs
    int *first, *count;          // per output: first source index and number of taps
    float *w;                    // per output: count weights (normalized), at i * maxtaps
    int maxtaps;
    int lo, hi;                  // the source range [lo, hi) the outputs read
} tk_img_axis;

// Outputs [o0, o0 + n) of an axis resized from the box [b0, b1) (source coordinates) to r
// outputs, reading only [c0, c1). Free with tk_img_axis_free.
int tk_img_axis_plan(tk_img_axis *a, double b0, double b1, int r, int o0, int n, int c0, int c1, tk_err *e);
void tk_img_axis_free(tk_img_axis *a);

// Resamples src (RGB bytes; pixel (x, y) at src + (y - sy) * stride + (x - sx) * 3, covering at
// least [ax.lo, ax.hi) x [ay.lo, ay.hi)) into out (ay.n rows x ax.n pixels x 3, NHWC), mirrored
// when flip, normalized with ro's mean/std, as ro->dtype (its size is the axes'). tmp: ay.n *
// (ax.hi - ax.lo) * 3 floats. The CPU decoder's resampling (lib/image/cpu.c) and, image by image,
// tk_img_resize_ref.
void tk_img_resample(const uint8_t *src, int sx, int sy, size_t stride, const tk_img_axis *ax,
                     const tk_img_axis *ay, int flip, const tk_img_rs_out *ro, float *tmp, void *out);

// fp32 -> byte for TK_IMG_U8: + 0.5, truncated, clamped to 0..255 (NaN: 0).
static inline uint8_t tk_img_f32_to_u8(float f) {
    float v = f + 0.5f;
    return (uint8_t)(v >= 255.0f ? 255 : v > 0.0f ? (int)v : 0);
}

// Bytes per output value of a dtype.
static inline size_t tk_img_dtype_bytes(tk_img_dtype t) { return t == TK_IMG_F32 ? 4 : t == TK_IMG_BF16 ? 2 : 1; }

// The taps an axis needs at most (tk_img_axis_plan's maxtaps): 2 ceil(max(1, (b1 - b0) / r)) + 1.
int tk_img_rs_taps(double b0, double b1, int r);
// The largest of both axes over n host-side jobs.
int tk_img_rs_maxtaps(const tk_img_rs_job *jobs, int n);
// Workspace bytes for n jobs of maxtaps taps (the filter tables of both axes).
size_t tk_img_rs_ws_bytes(int n, const tk_img_rs_out *o, int maxtaps);
// Checks the arguments (TK_EINTERNAL).
int tk_img_rs_check(int n, const tk_img_rs_out *o, int maxtaps, tk_err *e);

// jobs, src, tmp, ws and out in the backend's memory. maxtaps: tk_img_rs_maxtaps of the jobs.
int tk_img_resize(tk_ctx *c, const uint8_t *src, const tk_img_rs_job *jobs, int n, int maxtaps,
                  const tk_img_rs_out *o, float *tmp, void *ws, void *out, tk_err *e);
int tk_img_resize_ref(const uint8_t *src, const tk_img_rs_job *jobs, int n, int maxtaps, const tk_img_rs_out *o,
                      float *tmp, void *ws, void *out, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_img_resize_cuda(tk_ctx *c, const uint8_t *src, const tk_img_rs_job *jobs, int n, int maxtaps,
                       const tk_img_rs_out *o, float *tmp, void *ws, void *out, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
