// Batched colour jitter + normalisation of resized RGB images: the half of SSD's training
// augmentation (lib/workloads/ssd/data.h steps 5 and 6) that can run on the device after the host
// has decoded, cropped, flipped and resized each image to S x S bytes. Image k of n:
//   src + k S S 3 bytes (NHWC) -> torchvision's ColorJitter on a PIL image in job k's order
//   (kernels/img_jitter_px.h: Pillow's byte arithmetic: brightness, contrast against the image's
//   rounded mean luma, saturation against each pixel's luma, the hue shift through Pillow's
//   HSV) -> ToTensor + Normalize, ((p / 255) - mean[c]) / std[c] in float32 -> out + k S S 3
//   floats (NHWC).
// The reference (kernels/img_jitter_ref.c) is kernels/img_jitter_px.c's code and ssd_normalize's
// formula: the specification. The kernel (img_jitter.cu, one block an image, two passes at most)
// computes the same bytes and floats: every float and double operation rounded as the host
// rounds it (no fused multiply-adds, IEEE division), so the two agree bit for bit
// (tests/gpu/test_ssd_jitter.c).
// A job: the four operations' order (TK_JITTER_*), the float factors (tk_img_jitter's doubles as
// the host's blends use them, (float)f) and the hue's byte shift (tk_img_hue_shift).
// ws: n S S 3 bytes of device memory (the bytes before a contrast), cuda only
// (tk_img_jitter_ws_bytes).
#ifndef TK_KERNELS_IMG_JITTER_H
#define TK_KERNELS_IMG_JITTER_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "img_jitter_px.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_img_jitter_job {
    int32_t order[4];            // a permutation of TK_JITTER_BRIGHTNESS .. TK_JITTER_HUE; -1: no
                                 // operation there (TK_IMG_JITTER_NONE: none at all)
    float brightness, contrast, saturation;
    int32_t hue_shift;           // 0..255
} tk_img_jitter_job;

// A job that only normalises (the jitter off, or evaluation).
#define TK_IMG_JITTER_NONE ((tk_img_jitter_job){{-1, -1, -1, -1}, 1, 1, 1, 0})

// The job of one draw (tk_img_jitter): its order, (float) factors, the hue's shift.
tk_img_jitter_job tk_img_jitter_job_of(const tk_img_jitter *j);

size_t tk_img_jitter_ws_bytes(tk_backend b, int n, int S);
// jobs: n of them in the backend's memory (device memory on cuda); mean, std: 3 floats (host).
int tk_img_jitter_norm(tk_ctx *c, const uint8_t *src, const tk_img_jitter_job *jobs, int n, int S, const float mean[3],
                       const float std[3], float *out, void *ws, tk_err *e);
int tk_img_jitter_norm_ref(const uint8_t *src, const tk_img_jitter_job *jobs, int n, int S, const float mean[3],
                           const float std[3], float *out, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_img_jitter_ws_bytes_cuda(int n, int S);
int tk_img_jitter_norm_cuda(tk_ctx *c, const uint8_t *src, const tk_img_jitter_job *jobs, int n, int S,
                            const float mean[3], const float std[3], float *out, void *ws, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif

#endif
