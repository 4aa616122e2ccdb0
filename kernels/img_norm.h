// The model's input from 8-bit images (the loader stages bytes: 2x fewer than bf16, 4x fewer than
// fp32 to copy to the device, as NVIDIA's DALI pipeline normalizes on the GPU):
//   dst[p, c] = ((float)src[p, c] - mean[c]) / std[c]   for c < 3 (fp32, then rounded to t)
//   dst[p, c] = 0                                        for 3 <= c < cin (channel padding)
// over npix pixels; src (npix, 3) u8, dst (npix, cin) in t (TK_F32 or TK_BF16), cin >= 3.
#ifndef TK_KERNELS_IMG_NORM_H
#define TK_KERNELS_IMG_NORM_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

typedef struct tk_img_norm {
    float mean[3], std[3];
} tk_img_norm;

int tk_img_normalize(tk_ctx *c, const uint8_t *src, int64_t npix, tk_img_norm n, tk_dtype t, void *dst, int cin,
                     tk_err *e);
int tk_img_normalize_ref(const uint8_t *src, int64_t npix, tk_img_norm n, tk_dtype t, void *dst, int cin, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_img_normalize_cuda(tk_ctx *c, const uint8_t *src, int64_t npix, tk_img_norm n, tk_dtype t, void *dst, int cin,
                          tk_err *e);
#endif

static inline int tk_img_norm_check(int64_t npix, tk_dtype t, int cin, tk_err *e) {
    if (npix < 0 || cin < 3 || cin > 16 || (t != TK_F32 && t != TK_BF16))
        return tk_err_set(e, TK_EINTERNAL, "img_normalize: npix %lld cin %d %s", (long long)npix, cin,
                          tk_dtype_name(t));
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
