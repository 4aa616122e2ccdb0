// Colour jitter of 8-bit RGB images with the semantics of torchvision's ColorJitter on a PIL image,
// on the host (the loader threads, and the CPU reference of kernels/img_jitter.h, which is why it
// sits in kernels/: lib/image and the workloads sit above it)
// (torchvision.transforms.ColorJitter, functional_pil's adjust_brightness / adjust_contrast /
// adjust_saturation / adjust_hue, which call Pillow's ImageEnhance and HSV conversion): what the
// MLPerf v1.x SSD reference (single_stage_detector/ssd/utils.py SSDTransformer) applies to its
// resized 300x300 PIL image before ToTensor. Every operation works on bytes as Pillow does, so
// the results are Pillow's to the byte (contrib/peers/ssd_data.py checks them against torchvision):
//   brightness f: Image.blend(black, img, f)           out = f * p
//   contrast f:   Image.blend(gray mean, img, f)       out = m + f * (p - m), m the rounded mean
//                                                      of the image's "L" conversion
//   saturation f: Image.blend(img as "L", img, f)      out = l + f * (p - l), l the pixel's "L"
//   hue h:        RGB -> HSV (Pillow's rgb2hsv), H += trunc(255 h) modulo 256, HSV -> RGB
// Pillow's blend computes in float (the factor rounded to float) and truncates toward zero,
// clamping to 0..255 when the factor is outside [0, 1]. "L" is Pillow's ITU-R 601-2 luma in
// fixed point: (19595 R + 38470 G + 7471 B + 32768) >> 16. The hue round trip is not lossless
// even with h = 0, as in Pillow.
#ifndef TK_KERNELS_IMG_JITTER_PX_H
#define TK_KERNELS_IMG_JITTER_PX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { TK_JITTER_BRIGHTNESS = 0, TK_JITTER_CONTRAST = 1, TK_JITTER_SATURATION = 2, TK_JITTER_HUE = 3 };

// One draw of ColorJitter.get_params: the order of the four operations (a permutation of
// TK_JITTER_*, torchvision's fn_idx) and their factors.
typedef struct {
    int order[4];
    double brightness, contrast, saturation, hue;
} tk_img_jitter;

// px: n RGB pixels (3 n bytes), changed in place.
void tk_img_adjust_brightness(uint8_t *px, size_t n, double f);
void tk_img_adjust_contrast(uint8_t *px, size_t n, double f);
void tk_img_adjust_saturation(uint8_t *px, size_t n, double f);
void tk_img_adjust_hue(uint8_t *px, size_t n, double h); // h in [-0.5, 0.5]
// The hue's byte shift of h (torchvision's uint8 cast of h 255: truncated, modulo 256), and the
// shift itself applied: tk_img_adjust_hue(px, n, h) is tk_img_adjust_hue_by(px, n, tk_img_hue_shift(h)).
uint8_t tk_img_hue_shift(double h);
void tk_img_adjust_hue_by(uint8_t *px, size_t n, uint8_t shift);
// The four operations in j->order.
void tk_img_jitter_apply(uint8_t *px, size_t n, const tk_img_jitter *j);

// Pillow's RGB -> "L" luma of one pixel.
static inline uint8_t tk_img_luma(const uint8_t *p) {
    return (uint8_t)(((uint32_t)p[0] * 19595u + (uint32_t)p[1] * 38470u + (uint32_t)p[2] * 7471u + 0x8000u) >> 16);
}

#ifdef __cplusplus
}
#endif

#endif
