// Batched crop + resize + flip + normalize of decoded RGB images into NHWC: the GPU half of the
// nvJPEG decoder (lib/image/nvjpeg.c). Per image it computes exactly what the CPU decoder's
// resampling does (lib/image/transform.c: tk_img_axis_plan's Pillow-style triangle filter with
// the same double-precision tap positions and float weights, the vertical pass then the
// horizontal one in float, normalization, the flip, the output type), so the reference is that
// code: kernels/img_resize_ref.c calls it. The kernels avoid fused multiply-adds, so the two agree
// to the last bit (the test measures it).
//
// Image k's output is out + k * out_h * out_w * 3 values of o->dtype: the window
// [wx, wx + out_w) x [wy, wy + out_h) of the box [bx0, bx1) x [by0, by1) (source coordinates)
// resized to rw x rh, with taps only from [cx0, cx1) x [cy0, cy1), mirrored when flip.
#ifndef TK_KERNELS_IMG_RESIZE_H
#define TK_KERNELS_IMG_RESIZE_H

#include <stddef.h>
#include <stdint.h>

#include "gpu/gpu.h"
#include "image/transform.h"

#ifdef __cplusplus
extern "C" {
#endif

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
    float mean[3], std[3];       // out = (v - mean) / std, as 1/std and -mean/std (transform.c)
    tk_img_dtype dtype;
} tk_img_rs_out;

// The taps an axis needs at most (transform.c's maxtaps): 2 ceil(max(1, (b1 - b0) / r)) + 1.
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
