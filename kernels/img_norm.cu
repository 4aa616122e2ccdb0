// CUDA side of kernels/img_norm.h: one thread per pixel (3 bytes in, cin values out).
#include "cuda_util.cuh"
#include "img_norm.h"
#include "core/vec.cuh"

template <typename T>
__global__ static void img_norm(const uint8_t *src, int64_t npix, tk_img_norm n, T *dst, int cin) {
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < npix; p += (int64_t)gridDim.x * blockDim.x)
        for (int c = 0; c < cin; c++)
            dst[p * cin + c] = tk_to<T>(c < 3 ? __fdiv_rn((float)src[p * 3 + c] - n.mean[c], n.std[c]) : 0.0f);
}

int tk_img_normalize_cuda(tk_ctx *c, const uint8_t *src, int64_t npix, tk_img_norm n, tk_dtype t, void *dst, int cin,
                          tk_err *e) {
    TRY(tk_img_norm_check(npix, t, cin, e));
    if (npix == 0) return 0;
    const unsigned nb = tk_cu_blocks(npix, 256);
    if (t == TK_BF16) img_norm<<<nb, 256, 0, tk_cu_stream(c)>>>(src, npix, n, (__nv_bfloat16 *)dst, cin);
    else img_norm<<<nb, 256, 0, tk_cu_stream(c)>>>(src, npix, n, (float *)dst, cin);
    return tk_cu_check(e, "img_normalize");
}
