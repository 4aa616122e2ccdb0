// CUDA side of kernels/ssd_head.h: one thread an element (grid-stride). The gather and the scatter
// run over the output's elements in its order ((n, a, column), box-major (n, column, a)): the fp32
// side coalesced, the channels-last side strided by the map's nd (box-major: nd) channels.
#include "act_types.cuh"
#include "ssd_head.h"

namespace {

constexpr int kT = 256;

template <typename T> __global__ void __launch_bounds__(kT) bias_relu(T *y, int64_t M, int K, const float *b, int relu) {
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < (size_t)M * K; i += (size_t)gridDim.x * kT) {
        const float v = tk_f(y[i]) + b[i % K];
        y[i] = tk_to<T>(relu && !(v > 0.0f) ? 0.0f : v);
    }
}

template <typename T>
__global__ void __launch_bounds__(kT) relu_bwd(int64_t n, const T *y, const T *dy, const T *dy2, T *dx) {
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * kT) {
        const float g = tk_f(dy[i]) + (dy2 ? tk_f(dy2[i]) : 0.0f);
        dx[i] = tk_to<T>(tk_f(y[i]) > 0.0f ? g : 0.0f);
    }
}

// Element i of the map's block of the output, (n, a, j = d HW + p) or box-major (n, j, a): its
// index in the output and the source's index.
__device__ inline void place(const tk_ssd_map mp, size_t i, size_t *o, size_t *s) {
    const size_t cols = (size_t)mp.nd * mp.HW;
    size_t j;
    int a, n;
    if (mp.box_major) {
        const size_t nj = i / mp.A;
        a = (int)(i % mp.A), j = nj % cols, n = (int)(nj / cols);
        *o = ((size_t)n * (size_t)mp.total + (size_t)mp.off + j) * mp.A + a;
    } else {
        const size_t na = i / cols;
        j = i % cols, a = (int)(na % mp.A), n = (int)(na / mp.A);
        *o = na * (size_t)mp.total + (size_t)mp.off + j;
    }
    const int d = (int)(j / mp.HW), p = (int)(j % mp.HW);
    *s = ((size_t)n * mp.HW + p) * mp.ld + mp.c0 + (size_t)a * mp.nd + d;
}

template <typename T> __global__ void __launch_bounds__(kT) gather(const tk_ssd_map mp, const T *src, float *out) {
    const size_t n = (size_t)mp.N * mp.A * mp.nd * mp.HW;
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < n; i += (size_t)gridDim.x * kT) {
        size_t o, s;
        place(mp, i, &o, &s);
        out[o] = tk_f(src[s]);
    }
}

template <typename T> __global__ void __launch_bounds__(kT) scatter(const tk_ssd_map mp, const float *dout, T *dsrc) {
    const size_t n = (size_t)mp.N * mp.A * mp.nd * mp.HW;
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < n; i += (size_t)gridDim.x * kT) {
        size_t o, s;
        place(mp, i, &o, &s);
        dsrc[s] = tk_to<T>(dout[o]);
    }
}

} // namespace

int tk_ssd_bias_relu_fwd_cuda(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, int relu, tk_err *e) {
    TRY(tk_ssd_type_check(t, e));
    if (M < 0 || K < 1) return tk_err_set(e, TK_EINTERNAL, "ssd head: bad bias shape M %lld K %d", (long long)M, K);
    if (M == 0) return 0;
    TK_ACT_DISPATCH(t, "ssd bias", e,
                    bias_relu<T><<<tk_cu_blocks(M * K, kT), kT, 0, tk_cu_stream(c)>>>((T *)y, M, K, b, relu));
    return tk_cu_check(e, "ssd bias relu fwd");
}

int tk_ssd_relu_bwd_cuda(tk_ctx *c, tk_dtype t, int64_t n, const void *y, const void *dy, const void *dy2, void *dx,
                         tk_err *e) {
    TRY(tk_ssd_type_check(t, e));
    if (n <= 0) return 0;
    TK_ACT_DISPATCH(t, "ssd relu", e,
                    relu_bwd<T><<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>(n, (const T *)y, (const T *)dy,
                                                                          (const T *)dy2, (T *)dx));
    return tk_cu_check(e, "ssd relu bwd");
}

int tk_ssd_head_gather_cuda(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const void *src, float *out, tk_err *e) {
    TRY(tk_ssd_map_check(t, mp, e));
    const int64_t n = (int64_t)mp->N * mp->A * mp->nd * mp->HW;
    TK_ACT_DISPATCH(t, "ssd head", e,
                    gather<T><<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>(*mp, (const T *)src, out));
    return tk_cu_check(e, "ssd head gather");
}

int tk_ssd_head_scatter_cuda(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const float *dout, void *dsrc, tk_err *e) {
    TRY(tk_ssd_map_check(t, mp, e));
    const int64_t n = (int64_t)mp->N * mp->A * mp->nd * mp->HW;
    TK_ACT_DISPATCH(t, "ssd head", e,
                    scatter<T><<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>(*mp, dout, (T *)dsrc));
    return tk_cu_check(e, "ssd head scatter");
}
