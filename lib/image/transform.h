// The image transforms of the ResNet input pipeline, decoder-independent: where each sample's
// output comes from (random-resized crop and flip for training, resize + center crop for eval),
// the bilinear resampling, and normalization into NHWC fp32/bf16. A GPU decoder plans with the
// same tk_img_plan, so both decoders crop the same pixels for the same (seed, epoch, sample).
#ifndef TK_IMAGE_TRANSFORM_H
#define TK_IMAGE_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "core/bf16.h" // tk_f32_to_bf16
#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TK_IMG_TRAIN = 0, TK_IMG_EVAL = 1 } tk_img_mode;
// U8: the normalized value rounded half up and clamped to 0..255 (with mean 0 and std 1: the
// resampled pixel as bytes, what ResNet's loader stages for the device to normalize).
typedef enum { TK_IMG_F32 = 0, TK_IMG_BF16 = 1, TK_IMG_U8 = 2 } tk_img_dtype;

// What to make of each image. tk_img_transform_default fills ResNet's values.
typedef struct {
    tk_img_mode mode;
    int out_w, out_h;            // 224 x 224
    int resize;                  // eval: the shorter side is resized to this (256) first
    double scale_min, scale_max; // train: crop area fraction, 0.08 .. 1
    double ratio_min, ratio_max; // train: crop aspect ratio w/h, 3/4 .. 4/3 (drawn log-uniform)
    int flip;                    // train: horizontal flip with probability 1/2
    float mean[3], std[3];       // out = (pixel - mean) / std, pixel in 0..255
    tk_img_dtype dtype;
    int dct_scale;               // allow decoding at num/8 scale when the output stays >= it
    uint64_t seed;               // the run's seed; random draws are keyed (seed, epoch, sample)
    uint32_t epoch;
} tk_img_transform;

void tk_img_transform_default(tk_img_transform *t, tk_img_mode mode);

// One sample's geometry: the output is the window [wx, wx + out_w) x [wy, wy + out_h) of the box
// [x0, x1) x [y0, y1) of the full-size image resized to rw x rh, mirrored when flip.
// Train: the box is the random crop, rw x rh = out_w x out_h, wx = wy = 0. Eval: the box is the
// whole image, rw x rh the size with the shorter side = resize, (wx, wy) the center crop.
typedef struct {
    int x0, y0, x1, y1;
    int rw, rh, wx, wy;
    int flip;
    int tries;                   // train: RandomResizedCrop tries used (11 = the fallback)
} tk_img_geom;

// The geometry for an image of width x height, drawn from Philox (seed, epoch, sample).
void tk_img_plan(const tk_img_transform *t, int width, int height, uint64_t sample, tk_img_geom *g);

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
// when flip, normalized with t's mean/std, as t->dtype. tmp: ay.n * (ax.hi - ax.lo) * 3 floats.
void tk_img_resample(const uint8_t *src, int sx, int sy, size_t stride, const tk_img_axis *ax,
                     const tk_img_axis *ay, int flip, const tk_img_transform *t, float *tmp, void *out);

// fp32 -> byte for TK_IMG_U8: + 0.5, truncated, clamped to 0..255 (NaN: 0).
static inline uint8_t tk_img_f32_to_u8(float f) {
    float v = f + 0.5f;
    return (uint8_t)(v >= 255.0f ? 255 : v > 0.0f ? (int)v : 0);
}

// Bytes per output value of a dtype.
static inline size_t tk_img_dtype_bytes(tk_img_dtype t) { return t == TK_IMG_F32 ? 4 : t == TK_IMG_BF16 ? 2 : 1; }

#ifdef __cplusplus
}
#endif

#endif
