// The image transforms of the ResNet input pipeline, decoder-independent: where each sample's
// output comes from (random-resized crop and flip for training, resize + center crop for eval),
// and the output's normalization and type. The bilinear resampling itself is the CPU reference of
// the img_resize op (kernels/img_resize.h), which both decoders run: the CPU decoder its reference,
// the GPU decoder its kernel. A GPU decoder plans with the same tk_img_plan, so both decoders crop
// the same pixels for the same (seed, epoch, sample).
#ifndef TK_IMAGE_TRANSFORM_H
#define TK_IMAGE_TRANSFORM_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"
#include "img_resize.h" // tk_img_dtype, tk_img_rs_out, the resampling (its CPU reference)

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TK_IMG_TRAIN = 0, TK_IMG_EVAL = 1 } tk_img_mode;

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

// The output t asks for (size, mean/std, type), as the resampling takes it (kernels/img_resize.h).
tk_img_rs_out tk_img_transform_out(const tk_img_transform *t);

#ifdef __cplusplus
}
#endif

#endif
