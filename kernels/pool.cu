// CUDA side of kernels/pool.h: one thread per output element (max pooling forward, average
// pooling forward) or per input element (the gathered backwards), channels fastest so warps read
// consecutive channels; the same order of additions as the reference. Max pooling takes 16-byte
// vectors of channels per thread where C and the pointers allow.
#include "cuda_util.cuh"
#include "pool.cuh"
#include "rn_vec.cuh"

namespace {

// N channels per thread (a 16-byte vector of them, or N = 1): thread j of the flat index takes
// vector j % V (V = C / N) of pixel j / V; 32-bit index arithmetic where the count fits.
template <typename I, int N> __device__ __forceinline__ void split(I j, int V, int *c0, I *pix) {
    *pix = j / (I)V;
    *c0 = (int)(j - *pix * (I)V) * N;
}

template <int N> __device__ __forceinline__ void st_idx(uint8_t *p, size_t o, const uint8_t *v) {
    if constexpr (N == 8) *reinterpret_cast<uint2 *>(p + o) = *reinterpret_cast<const uint2 *>(v);
    else if constexpr (N == 4) *reinterpret_cast<uint32_t *>(p + o) = *reinterpret_cast<const uint32_t *>(v);
    else p[o] = v[0];
}
template <typename T, int N> __device__ __forceinline__ void ldv(const T *p, size_t i, float *f) {
    if constexpr (N == 1) f[0] = rn_f(p[i]);
    else rn_vload(p, i, f);
}
template <typename T, int N> __device__ __forceinline__ void stv(T *p, size_t i, const float *f) {
    if constexpr (N == 1) p[i] = rn_to<T>(f[0]);
    else rn_vstore(p, i, f);
}

// BN: x through round_t(relu(x scale + shift)) first (pool.h), scale and shift as kernels/bn.cu's
// stats_final computes them.
template <typename T, int N, typename I, bool BN>
__global__ void maxpool_fwd(const T *__restrict__ x, tk_pool_bn bn, int NB, int H, int W, int C, int R, int stride,
                            int pad, int P, int Q, T *__restrict__ y, uint8_t *__restrict__ idx) {
    const int V = C / N;
    const I total = (I)NB * P * Q * V;
    float sc[N], sh[N];
    int c_last = -1; // the channels sc, sh hold (a thread's channels rarely change between its outputs)
    for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += (I)gridDim.x * blockDim.x) {
        int c0;
        I r0;
        split<I, N>(j, V, &c0, &r0);
        const I pq = (I)P * Q, n = r0 / pq, rem = r0 - n * pq;
        const int p = (int)(rem / (I)Q), q = (int)(rem - (I)p * Q);
        float m[N];
        int best[N];
        if (BN && c0 != c_last) {
#pragma unroll
            for (int k = 0; k < N; k++) {
                sc[k] = __fmul_rn(bn.gamma[c0 + k], bn.invstd[c0 + k]);
                sh[k] = __fsub_rn(bn.beta[c0 + k], __fmul_rn(bn.mean[c0 + k], sc[k]));
            }
            c_last = c0;
        }
#pragma unroll
        for (int k = 0; k < N; k++) m[k] = 0, best[k] = -1;
        for (int r = 0; r < R; r++) {
            int h = p * stride - pad + r;
            if (h < 0 || h >= H) continue;
            for (int s = 0; s < R; s++) {
                int w = q * stride - pad + s;
                if (w < 0 || w >= W) continue;
                float v[N];
                ldv<T, N>(x, (((size_t)n * H + h) * W + w) * C + c0, v);
                if (BN)
#pragma unroll
                    for (int k = 0; k < N; k++) {
                        float o = __fadd_rn(__fmul_rn(v[k], sc[k]), sh[k]);
                        v[k] = rn_round<T>(!(o > 0.0f) && o == o ? 0.0f : o);
                    }
#pragma unroll
                for (int k = 0; k < N; k++)
                    if (best[k] < 0 || v[k] > m[k] || (v[k] != v[k] && m[k] == m[k])) m[k] = v[k], best[k] = r * R + s;
            }
        }
        const size_t o = (size_t)r0 * C + c0;
        uint8_t b[N];
#pragma unroll
        for (int k = 0; k < N; k++) b[k] = (uint8_t)best[k];
        stv<T, N>(y, o, m);
        st_idx<N>(idx, o, b);
    }
}


template <typename T, int N, typename I>
__global__ void maxpool_bwd(const T *__restrict__ dy, const T *__restrict__ dy2, const uint8_t *__restrict__ idx,
                            int NB, int H, int W, int C, int R, int stride, int pad, int P, int Q, T *__restrict__ dx) {
    const int V = C / N;
    const I total = (I)NB * H * W * V;
    for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += (I)gridDim.x * blockDim.x) {
        int c0;
        I r0;
        split<I, N>(j, V, &c0, &r0);
        const I hw = (I)H * W, n = r0 / hw, rem = r0 - n * hw;
        const int h = (int)(rem / (I)W), w = (int)(rem - (I)h * W);
        float acc[N];
        tk_pool_grad<T, N>(dy, dy2, idx, (int64_t)n, h, w, C, c0, R, stride, pad, P, Q, acc);
        stv<T, N>(dx, (size_t)r0 * C + c0, acc);
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

// The vector width (16 bytes of channels when C and the pointers allow) and the index type (32-bit
// when the count of vectors fits) of a pooling launch.
template <typename T, bool BN>
void mp_fwd(cudaStream_t st, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R, int stride, int pad,
            int P, int Q, void *y, uint8_t *idx) {
    constexpr int NV = RnVec<T>::N;
    const bool vec = C % NV == 0 && rn_aligned16(x, y) && ((uintptr_t)idx & (NV - 1)) == 0;
    const int64_t n = (int64_t)N * P * Q * C / (vec ? NV : 1);
    const bool small = n < ((int64_t)1 << 31);
    const unsigned nb = tk_cu_blocks(n, 256);
    const T *X = (const T *)x;
    T *Y = (T *)y;
    if (vec && small)
        maxpool_fwd<T, NV, uint32_t, BN><<<nb, 256, 0, st>>>(X, bn, N, H, W, C, R, stride, pad, P, Q, Y, idx);
    else if (vec) maxpool_fwd<T, NV, uint64_t, BN><<<nb, 256, 0, st>>>(X, bn, N, H, W, C, R, stride, pad, P, Q, Y, idx);
    else if (small) maxpool_fwd<T, 1, uint32_t, BN><<<nb, 256, 0, st>>>(X, bn, N, H, W, C, R, stride, pad, P, Q, Y, idx);
    else maxpool_fwd<T, 1, uint64_t, BN><<<nb, 256, 0, st>>>(X, bn, N, H, W, C, R, stride, pad, P, Q, Y, idx);
}

template <typename T>
void mp_bwd(cudaStream_t st, const void *dy, const void *dy2, const uint8_t *idx, int N, int H, int W, int C, int R,
            int stride, int pad, int P, int Q, void *dx) {
    constexpr int NV = RnVec<T>::N;
    const bool vec = C % NV == 0 && rn_aligned16(dy, dy2, dx) && ((uintptr_t)idx & (NV - 1)) == 0;
    const int64_t n = (int64_t)N * H * W * C / (vec ? NV : 1);
    const bool small = n < ((int64_t)1 << 31);
    const unsigned nb = tk_cu_blocks(n, 256);
    const T *DY = (const T *)dy, *DY2 = (const T *)dy2;
    T *DX = (T *)dx;
    if (vec && small) maxpool_bwd<T, NV, uint32_t><<<nb, 256, 0, st>>>(DY, DY2, idx, N, H, W, C, R, stride, pad, P, Q, DX);
    else if (vec) maxpool_bwd<T, NV, uint64_t><<<nb, 256, 0, st>>>(DY, DY2, idx, N, H, W, C, R, stride, pad, P, Q, DX);
    else if (small) maxpool_bwd<T, 1, uint32_t><<<nb, 256, 0, st>>>(DY, DY2, idx, N, H, W, C, R, stride, pad, P, Q, DX);
    else maxpool_bwd<T, 1, uint64_t><<<nb, 256, 0, st>>>(DY, DY2, idx, N, H, W, C, R, stride, pad, P, Q, DX);
}

} // namespace

#define BF (t == TK_BF16)
typedef __nv_bfloat16 bf;

int tk_maxpool_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad,
                        void *y, uint8_t *idx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    if (BF) mp_fwd<bf, false>(tk_cu_stream(c), x, tk_pool_bn{}, N, H, W, C, R, stride, pad, P, Q, y, idx);
    else mp_fwd<float, false>(tk_cu_stream(c), x, tk_pool_bn{}, N, H, W, C, R, stride, pad, P, Q, y, idx);
    return tk_cu_check(e, "maxpool_fwd");
}

int tk_maxpool_bn_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R,
                           int stride, int pad, void *y, uint8_t *idx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    if (BF) mp_fwd<bf, true>(tk_cu_stream(c), x, bn, N, H, W, C, R, stride, pad, P, Q, y, idx);
    else mp_fwd<float, true>(tk_cu_stream(c), x, bn, N, H, W, C, R, stride, pad, P, Q, y, idx);
    return tk_cu_check(e, "maxpool_bn_fwd");
}

int tk_maxpool_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H,
                        int W, int C, int R, int stride, int pad, void *dx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    if (BF) mp_bwd<bf>(tk_cu_stream(c), dy, dy2, idx, N, H, W, C, R, stride, pad, P, Q, dx);
    else mp_bwd<float>(tk_cu_stream(c), dy, dy2, idx, N, H, W, C, R, stride, pad, P, Q, dx);
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
