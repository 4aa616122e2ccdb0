// CUDA side of kernels/pool.h: one thread per output element (max pooling forward, average
// pooling forward) or per input element (the gathered backwards), channels fastest so warps read
// consecutive channels; the same order of additions as the reference.
#include "cuda_util.cuh"
#include "pool.h"
#include "rn_vec.cuh"

namespace {

template <typename T>
__global__ void maxpool_fwd(const T *x, int N, int H, int W, int C, int R, int stride, int pad, int P, int Q, T *y,
                            uint8_t *idx) {
    const size_t total = (size_t)N * P * Q * C;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(o % C);
        size_t r0 = o / C;
        const int q = (int)(r0 % Q), p = (int)(r0 / Q % P), n = (int)(r0 / Q / P);
        float m = 0;
        int best = -1;
        for (int r = 0; r < R; r++) {
            int h = p * stride - pad + r;
            if (h < 0 || h >= H) continue;
            for (int s = 0; s < R; s++) {
                int w = q * stride - pad + s;
                if (w < 0 || w >= W) continue;
                float v = rn_f(x[(((size_t)n * H + h) * W + w) * C + c]);
                if (best < 0 || v > m || (v != v && m == m)) m = v, best = r * R + s;
            }
        }
        y[o] = rn_to<T>(m);
        idx[o] = (uint8_t)best;
    }
}

__device__ __forceinline__ void windows(int h, int R, int stride, int pad, int P, int *lo, int *hi) {
    int a = h + pad - R + 1;
    *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
    *hi = (h + pad) / stride;
    if (*hi > P - 1) *hi = P - 1;
}

template <typename T>
__global__ void maxpool_bwd(const T *dy, const T *dy2, const uint8_t *idx, int N, int H, int W, int C, int R,
                            int stride, int pad, int P, int Q, T *dx) {
    const size_t total = (size_t)N * H * W * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int c = (int)(i % C);
        size_t r0 = i / C;
        const int w = (int)(r0 % W), h = (int)(r0 / W % H), n = (int)(r0 / W / H);
        int p0, p1, q0, q1;
        windows(h, R, stride, pad, P, &p0, &p1);
        windows(w, R, stride, pad, Q, &q0, &q1);
        float acc = 0;
        for (int p = p0; p <= p1; p++)
            for (int q = q0; q <= q1; q++) {
                size_t o = (((size_t)n * P + p) * Q + q) * C + c;
                if (idx[o] != (h - p * stride + pad) * R + (w - q * stride + pad)) continue;
                float g = rn_f(dy[o]);
                if (dy2) g += rn_f(dy2[o]);
                acc += g;
            }
        dx[i] = rn_to<T>(acc);
    }
}

template <typename T> __global__ void avgpool_fwd(const T *x, int N, int HW, int C, T *y) {
    const size_t total = (size_t)N * C;
    for (size_t o = (size_t)blockIdx.x * blockDim.x + threadIdx.x; o < total; o += (size_t)gridDim.x * blockDim.x) {
        const size_t n = o / C, c = o % C;
        float s = 0;
        for (int i = 0; i < HW; i++) s += rn_f(x[(n * HW + i) * C + c]);
        y[o] = rn_to<T>(s / (float)HW);
    }
}

template <typename T> __global__ void avgpool_bwd(const T *dy, int N, int HW, int C, T *dx) {
    const size_t total = (size_t)N * HW * C;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const size_t c = i % C, n = i / C / HW;
        dx[i] = rn_to<T>(rn_f(dy[n * C + c]) / (float)HW);
    }
}

} // namespace

#define BF (t == TK_BF16)
typedef __nv_bfloat16 bf;

int tk_maxpool_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad,
                        void *y, uint8_t *idx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    const unsigned nb = tk_cu_blocks((int64_t)N * P * Q * C, 256);
    if (BF) maxpool_fwd<<<nb, 256, 0, tk_cu_stream(c)>>>((const bf *)x, N, H, W, C, R, stride, pad, P, Q, (bf *)y, idx);
    else maxpool_fwd<<<nb, 256, 0, tk_cu_stream(c)>>>((const float *)x, N, H, W, C, R, stride, pad, P, Q, (float *)y, idx);
    return tk_cu_check(e, "maxpool_fwd");
}

int tk_maxpool_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H,
                        int W, int C, int R, int stride, int pad, void *dx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    const unsigned nb = tk_cu_blocks((int64_t)N * H * W * C, 256);
    if (BF)
        maxpool_bwd<<<nb, 256, 0, tk_cu_stream(c)>>>((const bf *)dy, (const bf *)dy2, idx, N, H, W, C, R, stride, pad,
                                                     P, Q, (bf *)dx);
    else
        maxpool_bwd<<<nb, 256, 0, tk_cu_stream(c)>>>((const float *)dy, (const float *)dy2, idx, N, H, W, C, R, stride,
                                                     pad, P, Q, (float *)dx);
    return tk_cu_check(e, "maxpool_bwd");
}

int tk_avgpool_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int HW, int C, void *y, tk_err *e) {
    TRY(tk_pool_check(t, N, HW, 1, C, 1, 1, 0, e));
    const unsigned nb = tk_cu_blocks((int64_t)N * C, 256);
    if (BF) avgpool_fwd<<<nb, 256, 0, tk_cu_stream(c)>>>((const bf *)x, N, HW, C, (bf *)y);
    else avgpool_fwd<<<nb, 256, 0, tk_cu_stream(c)>>>((const float *)x, N, HW, C, (float *)y);
    return tk_cu_check(e, "avgpool_fwd");
}

int tk_avgpool_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, int N, int HW, int C, void *dx, tk_err *e) {
    TRY(tk_pool_check(t, N, HW, 1, C, 1, 1, 0, e));
    const unsigned nb = tk_cu_blocks((int64_t)N * HW * C, 256);
    if (BF) avgpool_bwd<<<nb, 256, 0, tk_cu_stream(c)>>>((const bf *)dy, N, HW, C, (bf *)dx);
    else avgpool_bwd<<<nb, 256, 0, tk_cu_stream(c)>>>((const float *)dy, N, HW, C, (float *)dx);
    return tk_cu_check(e, "avgpool_bwd");
}
