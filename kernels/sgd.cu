// CUDA side of kernels/sgd.h: w -= lr * g over the flat fp32 master weights, fused with the
// rounding to the bf16 compute copy. The product and the difference are rounded separately
// (__fmul_rn, __fsub_rn: no FMA contraction), exactly as the C reference computes them.
#include "cuda_util.cuh"
#include "sgd.h"

__global__ static void sgd_kernel(float *w, const float *g, size_t n, const float *lr, __nv_bfloat16 *copy) {
    float rate = *lr;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = __fsub_rn(w[i], __fmul_rn(rate, g[i]));
        w[i] = v;
        if (copy) copy[i] = __float2bfloat16_rn(v);
    }
}

int tk_sgd_update_cuda(tk_ctx *c, float *w, const float *g, size_t n, const float *lr, void *copy,
                       tk_dtype copy_type, tk_err *e) {
    if (copy && copy_type != TK_BF16)
        return tk_err_set(e, TK_EINTERNAL, "sgd_update: compute copy dtype %s not supported",
                          tk_dtype_name(copy_type));
    if (n == 0) return 0;
    sgd_kernel<<<tk_cu_blocks((int64_t)n, 256), 256, 0, tk_cu_stream(c)>>>(w, g, n, lr, (__nv_bfloat16 *)copy);
    return tk_cu_check(e, "sgd_update");
}
