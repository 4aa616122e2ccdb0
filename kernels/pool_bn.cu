// CUDA side of kernels/pool_bn.h. Three kernels: (1) partial sums over row groups of the pool's
// outputs (a block of 256 threads covers 256 / V rows of V vectors of N channels; each block a
// fixed group of rows; its row lanes added in a fixed order), gathering x at each window's maximum;
// (2) a block per 8 channels adds the groups' partials in fp64, 32 lanes in a fixed order, and
// writes dbeta, dgamma and the dx coefficients; (3) one thread per input vector: the gradient
// gathered from the windows (kernels/pool.cuh), the mask, dx. No atomics: the same bits on every
// run and every graph replay.
#include "cuda_util.cuh"
#include "pool.cuh"
#include "pool_bn.h"
#include "rn_vec.cuh"

namespace {

constexpr int kThreads = 256, kGroups = 1024, kFinC = 8, kFinLanes = 32;

template <typename T, int N> __device__ __forceinline__ void ldv(const T *p, size_t i, float *f) {
    if constexpr (N == 1) f[0] = rn_f(p[i]);
    else rn_vload(p, i, f);
}

// scale = gamma invstd, shift = beta - mean scale (as kernels/bn.cu's statistics make them)
__device__ __forceinline__ void scale_shift(tk_pool_bn bn, int c, float *sc, float *sh) {
    *sc = __fmul_rn(bn.gamma[c], bn.invstd[c]);
    *sh = __fsub_rn(bn.beta[c], __fmul_rn(bn.mean[c], *sc));
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    pool_partial(const T *__restrict__ x, tk_pool_bn bn, const T *__restrict__ dy, const T *__restrict__ dy2,
                 const uint8_t *__restrict__ idx, int H, int W, int C, int R, int stride, int pad, int P, int Q,
                 uint32_t rows, uint32_t per_group, float *__restrict__ part) {
    __shared__ float ss[kThreads * N], sq[kThreads * N];
    const int V = C / N, RL = kThreads / V, lane = threadIdx.x / V, c0 = (threadIdx.x % V) * N;
    float s[N], q[N], sc[N], sh[N], mu[N], is[N];
#pragma unroll
    for (int k = 0; k < N; k++) s[k] = q[k] = 0.0f;
    if (lane < RL) {
#pragma unroll
        for (int k = 0; k < N; k++) {
            scale_shift(bn, c0 + k, &sc[k], &sh[k]);
            mu[k] = bn.mean[c0 + k], is[k] = bn.invstd[c0 + k];
        }
        const uint32_t lo = blockIdx.x * per_group, hi = lo + per_group < rows ? lo + per_group : rows;
        for (uint32_t j = lo + lane; j < hi; j += RL) {
            const uint32_t n = j / (uint32_t)(P * Q), pq = j - n * (uint32_t)(P * Q), p = pq / Q, qq = pq - p * Q;
            const size_t o = (size_t)j * C + c0;
            uint8_t b[N];
            float g[N], g2[N];
            tk_pool_ld_idx<N>(idx, o, b);
            ldv<T, N>(dy, o, g);
            if (dy2) ldv<T, N>(dy2, o, g2);
#pragma unroll
            for (int k = 0; k < N; k++) {
                const int h = (int)p * stride - pad + b[k] / R, w = (int)qq * stride - pad + b[k] % R;
                const float xa = rn_f(x[(((size_t)n * H + h) * W + w) * C + c0 + k]);
                const bool on = rn_round<T>(__fadd_rn(__fmul_rn(xa, sc[k]), sh[k])) > 0.0f;
                const float dz = on ? rn_round<T>(dy2 ? g[k] + g2[k] : g[k]) : 0.0f;
                s[k] += dz;
                q[k] += dz * __fmul_rn(__fsub_rn(xa, mu[k]), is[k]);
            }
        }
    }
#pragma unroll
    for (int k = 0; k < N; k++) ss[threadIdx.x * N + k] = s[k], sq[threadIdx.x * N + k] = q[k];
    __syncthreads();
    if (lane != 0) return;
    for (int r = 1; r < RL; r++) // the row lanes in order
#pragma unroll
        for (int k = 0; k < N; k++) s[k] += ss[(r * V + threadIdx.x) * N + k], q[k] += sq[(r * V + threadIdx.x) * N + k];
#pragma unroll
    for (int k = 0; k < N; k++) {
        part[(size_t)blockIdx.x * 2 * C + c0 + k] = s[k];
        part[(size_t)blockIdx.x * 2 * C + C + c0 + k] = q[k];
    }
}

// dbeta, dgamma, and coef = (gamma invstd, dbeta / M, dgamma / M) per channel.
__global__ void __launch_bounds__(kFinC *kFinLanes)
    pool_final(const float *__restrict__ part, int G, int C, int64_t M, tk_pool_bn bn, float *__restrict__ dgamma,
               float *__restrict__ dbeta, float *__restrict__ coef) {
    __shared__ double sb_[kFinLanes][kFinC], sg_[kFinLanes][kFinC];
    const int cl = threadIdx.x % kFinC, lane = threadIdx.x / kFinC, c = blockIdx.x * kFinC + cl;
    double sb = 0, sg = 0;
    if (c < C)
        for (int g = lane; g < G; g += kFinLanes) sb += part[(size_t)g * 2 * C + c], sg += part[(size_t)g * 2 * C + C + c];
    sb_[lane][cl] = sb, sg_[lane][cl] = sg;
    __syncthreads();
    if (lane != 0 || c >= C) return;
    for (int l = 1; l < kFinLanes; l++) sb += sb_[l][cl], sg += sg_[l][cl];
    dbeta[c] = (float)sb;
    dgamma[c] = (float)sg;
    coef[c] = __fmul_rn(bn.gamma[c], bn.invstd[c]);
    coef[C + c] = (float)(sb / (double)M);
    coef[2 * C + c] = (float)(sg / (double)M);
}

template <typename T, int N>
__global__ void __launch_bounds__(kThreads)
    pool_dx(const T *__restrict__ x, tk_pool_bn bn, const T *__restrict__ dy, const T *__restrict__ dy2,
            const uint8_t *__restrict__ idx, const float *__restrict__ coef, int NB, int H, int W, int C, int R,
            int stride, int pad, int P, int Q, T *__restrict__ dx) {
    const int V = C / N;
    const uint32_t total = (uint32_t)NB * H * W * V;
    float sc[N], sh[N], mu[N], is[N], ca[N], cb[N], cg[N];
    int c_last = -1;
    for (uint32_t j = blockIdx.x * blockDim.x + threadIdx.x; j < total; j += gridDim.x * blockDim.x) {
        const uint32_t pix = j / V, n = pix / (uint32_t)(H * W), hw = pix - n * (uint32_t)(H * W);
        const int c0 = (int)(j - pix * V) * N, h = (int)(hw / W), w = (int)(hw - h * W);
        if (c0 != c_last) {
#pragma unroll
            for (int k = 0; k < N; k++) {
                scale_shift(bn, c0 + k, &sc[k], &sh[k]);
                mu[k] = bn.mean[c0 + k], is[k] = bn.invstd[c0 + k];
                ca[k] = coef[c0 + k], cb[k] = coef[C + c0 + k], cg[k] = coef[2 * C + c0 + k];
            }
            c_last = c0;
        }
        float acc[N], xv[N], o[N];
        tk_pool_grad<T, N>(dy, dy2, idx, (int64_t)n, h, w, C, c0, R, stride, pad, P, Q, acc);
        ldv<T, N>(x, (size_t)pix * C + c0, xv);
#pragma unroll
        for (int k = 0; k < N; k++) {
            const bool on = rn_round<T>(__fadd_rn(__fmul_rn(xv[k], sc[k]), sh[k])) > 0.0f;
            const float dz = on ? rn_round<T>(acc[k]) : 0.0f;
            const float xhat = __fmul_rn(__fsub_rn(xv[k], mu[k]), is[k]);
            o[k] = __fmul_rn(ca[k], __fsub_rn(__fsub_rn(dz, cb[k]), __fmul_rn(xhat, cg[k])));
        }
        if constexpr (N == 1) dx[(size_t)pix * C + c0] = rn_to<T>(o[0]);
        else rn_vstore(dx, (size_t)pix * C + c0, o);
    }
}

template <typename T>
int run(cudaStream_t st, const void *x, tk_pool_bn bn, const void *dy, const void *dy2, const uint8_t *idx, int N,
        int H, int W, int C, int R, int stride, int pad, void *dx, float *dgamma, float *dbeta, void *ws, tk_err *e) {
    constexpr int NV = RnVec<T>::N;
    const bool vec = C % NV == 0 && rn_aligned16(x, dy, dy2, dx) && ((uintptr_t)idx & (NV - 1)) == 0;
    const int Nv = vec ? NV : 1, V = C / Nv;
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    const int64_t rows = (int64_t)N * P * Q, M = (int64_t)N * H * W;
    if (V > kThreads || M * V >= ((int64_t)1 << 31))
        return tk_err_set(e, TK_EINTERNAL, "maxpool_bn_bwd: C %d, %lld rows: too large for its kernels", C, (long long)M);
    const uint32_t per = (uint32_t)((rows + kGroups - 1) / kGroups), G = (uint32_t)((rows + per - 1) / per);
    float *part = (float *)ws, *coef = (float *)((char *)ws + tk_cu_align((size_t)kGroups * C * 2 * sizeof(float)));
    const T *X = (const T *)x, *DY = (const T *)dy, *DY2 = (const T *)dy2;
    if (vec) pool_partial<T, NV><<<G, kThreads, 0, st>>>(X, bn, DY, DY2, idx, H, W, C, R, stride, pad, P, Q, (uint32_t)rows, per, part);
    else pool_partial<T, 1><<<G, kThreads, 0, st>>>(X, bn, DY, DY2, idx, H, W, C, R, stride, pad, P, Q, (uint32_t)rows, per, part);
    pool_final<<<(C + kFinC - 1) / kFinC, kFinC * kFinLanes, 0, st>>>(part, (int)G, C, M, bn, dgamma, dbeta, coef);
    const unsigned nb = tk_cu_blocks(M * V, kThreads);
    if (vec) pool_dx<T, NV><<<nb, kThreads, 0, st>>>(X, bn, DY, DY2, idx, coef, N, H, W, C, R, stride, pad, P, Q, (T *)dx);
    else pool_dx<T, 1><<<nb, kThreads, 0, st>>>(X, bn, DY, DY2, idx, coef, N, H, W, C, R, stride, pad, P, Q, (T *)dx);
    return 0;
}

} // namespace

size_t tk_maxpool_bn_bwd_ws_bytes_cuda(int C) {
    return tk_cu_align((size_t)kGroups * C * 2 * sizeof(float)) + (size_t)3 * C * sizeof(float);
}

int tk_maxpool_bn_bwd_cuda(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, const void *dy, const void *dy2,
                           const uint8_t *idx, int N, int H, int W, int C, int R, int stride, int pad, void *dx,
                           float *dgamma, float *dbeta, void *ws, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    if (t == TK_BF16)
        TRY(run<__nv_bfloat16>(tk_cu_stream(c), x, bn, dy, dy2, idx, N, H, W, C, R, stride, pad, dx, dgamma, dbeta, ws, e));
    else TRY(run<float>(tk_cu_stream(c), x, bn, dy, dy2, idx, N, H, W, C, R, stride, pad, dx, dgamma, dbeta, ws, e));
    return tk_cu_check(e, "maxpool_bn_bwd");
}
