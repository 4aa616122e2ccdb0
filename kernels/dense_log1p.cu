// CUDA side of kernels/dense_log1p.h: y = (float)log1p((double)max(x, 0)), as the reference.
#include "cuda_util.cuh"
#include "dense_log1p.h"

__global__ static void dense_log1p_kernel(const int32_t *x, int64_t n, float *y) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        y[i] = (float)log1p((double)(x[i] > 0 ? x[i] : 0));
}

int tk_dense_log1p_cuda(tk_ctx *c, const int32_t *x, int64_t n, float *y, tk_err *e) {
    if (n <= 0) return 0;
    dense_log1p_kernel<<<tk_cu_blocks(n, 256), 256, 0, tk_cu_stream(c)>>>(x, n, y);
    return tk_cu_check(e, "dense_log1p");
}
