// CUDA side of kernels/ema.h: one grid-stride pass over the flat buffer; the products and the sum
// rounded separately (__fmul_rn, __fadd_rn) as the C reference computes them.
#include "cuda_util.cuh"
#include "ema.h"

__global__ static void ema_kernel(float *ema, const float *w, size_t n, float d, float c) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        ema[i] = __fadd_rn(__fmul_rn(d, ema[i]), __fmul_rn(c, w[i]));
}

__global__ static void swap_kernel(float *ema, float *w, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float t = ema[i];
        ema[i] = w[i];
        w[i] = t;
    }
}

int tk_ema_update_cuda(tk_ctx *c, float *ema, const float *w, size_t n, double decay, tk_err *e) {
    if (n == 0) return 0;
    float d, k;
    tk_ema_factors(decay, &d, &k);
    ema_kernel<<<tk_cu_blocks((int64_t)n, 256), 256, 0, tk_cu_stream(c)>>>(ema, w, n, d, k);
    return tk_cu_check(e, "ema_update");
}

int tk_ema_swap_cuda(tk_ctx *c, float *ema, float *w, size_t n, tk_err *e) {
    if (n == 0) return 0;
    swap_kernel<<<tk_cu_blocks((int64_t)n, 256), 256, 0, tk_cu_stream(c)>>>(ema, w, n);
    return tk_cu_check(e, "ema_swap");
}
