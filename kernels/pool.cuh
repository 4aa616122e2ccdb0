// Device helpers of max pooling's backward (kernels/pool.cu): the gradient gather of one input
// pixel, for a kernel that needs it without the pool's input gradient in memory.
#ifndef TK_KERNELS_POOL_CUH
#define TK_KERNELS_POOL_CUH

#include <stdint.h>

#include "pool.h"
#include "core/vec.cuh"

// idx's N bytes at o (an aligned group of N when N > 1).
template <int N> __device__ __forceinline__ void tk_pool_ld_idx(const uint8_t *p, size_t o, uint8_t *v) {
    if constexpr (N == 8) *reinterpret_cast<uint2 *>(v) = *reinterpret_cast<const uint2 *>(p + o);
    else if constexpr (N == 4) *reinterpret_cast<uint32_t *>(v) = *reinterpret_cast<const uint32_t *>(p + o);
    else v[0] = p[o];
}

// The gradient at input pixel (n, h, w), channels c0 .. c0 + N - 1, in fp32 (pool.h): the windows
// that hold it in (p, q) order, each whose idx names it adding dy [+ dy2] (N, P, Q, C).
template <typename T, int N>
__device__ __forceinline__ void tk_pool_grad(const T *__restrict__ dy, const T *__restrict__ dy2,
                                             const uint8_t *__restrict__ idx, int64_t n, int h, int w, int C, int c0,
                                             int R, int stride, int pad, int P, int Q, float *acc) {
    int p0, p1, q0, q1;
    tk_pool_windows(h, R, stride, pad, P, &p0, &p1);
    tk_pool_windows(w, R, stride, pad, Q, &q0, &q1);
#pragma unroll
    for (int k = 0; k < N; k++) acc[k] = 0;
    for (int p = p0; p <= p1; p++)
        for (int q = q0; q <= q1; q++) {
            const size_t o = (((size_t)n * P + p) * Q + q) * C + c0;
            const int want = (h - p * stride + pad) * R + (w - q * stride + pad);
            uint8_t b[N];
            tk_pool_ld_idx<N>(idx, o, b);
            bool any = false;
#pragma unroll
            for (int k = 0; k < N; k++) any |= b[k] == want;
            if (!any) continue;
            float g[N], g2[N];
            if constexpr (N == 1) g[0] = tk_f(dy[o]);
            else tk_vload(dy, o, g);
            if (dy2) {
                if constexpr (N == 1) g2[0] = tk_f(dy2[o]);
                else tk_vload(dy2, o, g2);
            }
#pragma unroll
            for (int k = 0; k < N; k++)
                if (b[k] == want) acc[k] += dy2 ? g[k] + g2[k] : g[k];
        }
}

#endif
