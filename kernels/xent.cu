// CUDA side of kernels/xent.h: the labeled rows counted by one block, one block of 256 threads a
// row (max, sum of exponentials, the gradient), the rows' losses summed by one block in a fixed
// tree order (fp64): the same result on every run and graph replay.
#include "act_types.cuh"
#include "xent.h"

namespace {

constexpr int kThreads = 256, kSumThreads = 1024;

struct Ws {
    int64_t *n;
    double *loss;
};
Ws layout(void *p, int R) { return Ws{(int64_t *)p, (double *)((char *)p + 256)}; }

__global__ void count_labels(int R, const int32_t *labels, int64_t *n) {
    __shared__ int64_t part[kSumThreads];
    int64_t k = 0;
    for (int r = threadIdx.x; r < R; r += kSumThreads) k += labels[r] >= 0;
    part[threadIdx.x] = k;
    __syncthreads();
    for (int s = kSumThreads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) *n = part[0];
}

__device__ __forceinline__ float block_reduce(float v, float *red, bool is_max) {
    for (int o = 16; o > 0; o >>= 1) {
        float u = __shfl_xor_sync(0xffffffffu, v, o);
        v = is_max ? fmaxf(v, u) : v + u;
    }
    __syncthreads();
    if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = v;
    __syncthreads();
    float t = red[0];
    for (int i = 1; i < kThreads / 32; i++) t = is_max ? fmaxf(t, red[i]) : t + red[i];
    return t;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
xent_rows(int C, int ld, const T *x, const int32_t *labels, float scale, const int64_t *n, double *loss, T *dx) {
    __shared__ float red[kThreads / 32];
    const int r = blockIdx.x, y = labels[r];
    const size_t o = (size_t)r * ld;
    const float w = *n > 0 ? (float)((double)scale / (double)*n) : 0.0f;
    if (y < 0 || y >= C) {
        if (threadIdx.x == 0) loss[r] = 0;
        if (dx)
            for (int j = threadIdx.x; j < ld; j += kThreads) tk_st(dx, o + j, 0.0f);
        return;
    }
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < C; j += kThreads) mx = fmaxf(mx, tk_ld(x, o + j));
    mx = block_reduce(mx, red, true);
    float sum = 0;
    for (int j = threadIdx.x; j < C; j += kThreads) sum += expf(tk_ld(x, o + j) - mx);
    sum = block_reduce(sum, red, false);
    float xy = tk_ld(x, o + y);
    __syncthreads(); // everyone has read x[o + y] before dx (maybe x) is written
    if (threadIdx.x == 0) loss[r] = (double)logf(sum) + mx - xy;
    if (dx) {
        float inv = 1.0f / sum;
        for (int j = threadIdx.x; j < ld; j += kThreads) {
            float v = j < C ? w * (expf((j == y ? xy : tk_ld(x, o + j)) - mx) * inv - (j == y ? 1.0f : 0.0f)) : 0.0f;
            tk_st(dx, o + j, v);
        }
    }
}

__global__ void sum_losses(int R, const double *loss, float scale, const int64_t *n, double *acc, int bump) {
    __shared__ double part[kSumThreads];
    double s = 0;
    for (int r = threadIdx.x; r < R; r += kSumThreads) s += loss[r];
    part[threadIdx.x] = s;
    __syncthreads();
    for (int k = kSumThreads / 2; k > 0; k >>= 1) {
        if ((int)threadIdx.x < k) part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        double w = *n > 0 ? (double)scale / (double)*n : 0.0;
        acc[0] += w * part[0];
        if (bump) acc[1] += 1;
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
correct_rows(int C, int ld, const T *x, const int32_t *labels, int64_t *counts) {
    __shared__ float bv[kThreads];
    __shared__ int bi[kThreads];
    const int r = blockIdx.x, y = labels[r];
    if (y < 0 || y >= C) return;
    const size_t o = (size_t)r * ld;
    float v = -INFINITY;
    int idx = C; // the first maximum of this thread's columns
    for (int j = threadIdx.x; j < C; j += kThreads) {
        float u = tk_ld(x, o + j);
        if (u > v) v = u, idx = j;
    }
    bv[threadIdx.x] = v, bi[threadIdx.x] = idx;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float u = bv[threadIdx.x + s];
            int k = bi[threadIdx.x + s];
            if (u > bv[threadIdx.x] || (u == bv[threadIdx.x] && k < bi[threadIdx.x])) bv[threadIdx.x] = u, bi[threadIdx.x] = k;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        atomicAdd((unsigned long long *)&counts[0], (unsigned long long)(bi[0] == y));
        atomicAdd((unsigned long long *)&counts[1], 1ull);
    }
}

} // namespace

size_t tk_xent_ws_bytes_cuda(int R) { return 256 + (size_t)(R > 0 ? R : 1) * 8; }

int tk_xent_fwd_bwd_cuda(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                         float scale, double *acc, int bump, void *dlogits, void *ws, tk_err *e) {
    if (C < 1 || ld < C) return tk_err_set(e, TK_EINTERNAL, "xent: C %d ld %d", C, ld);
    cudaStream_t s = tk_cu_stream(c);
    Ws l = layout(ws, R);
    count_labels<<<1, kSumThreads, 0, s>>>(R, labels, l.n);
    if (R > 0)
        TK_ACT_DISPATCH(act, "xent", e,
                        (xent_rows<T><<<R, kThreads, 0, s>>>(C, ld, (const T *)logits, labels, scale, l.n, l.loss,
                                                              (T *)dlogits)));
    if (acc) sum_losses<<<1, kSumThreads, 0, s>>>(R, l.loss, scale, l.n, acc, bump);
    return tk_cu_check(e, "xent");
}

int tk_xent_correct_cuda(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                         int64_t *counts, tk_err *e) {
    if (C < 1 || ld < C) return tk_err_set(e, TK_EINTERNAL, "xent_correct: C %d ld %d", C, ld);
    if (R <= 0) return 0;
    TK_ACT_DISPATCH(act, "xent_correct", e,
                    (correct_rows<T><<<R, kThreads, 0, tk_cu_stream(c)>>>(C, ld, (const T *)logits, labels, counts)));
    return tk_cu_check(e, "xent_correct");
}
