// CUDA side of kernels/attention.h's kernels. The softmax kernels take one warp a row of L
// scores, each lane 8 consecutive keys at a time (one Philox call draws their dropout), fp32
// math with the row's max and sum reduced by shuffles in a fixed order.
#include "act_types.cuh"
#include "attention.h"
#include "dropout.cuh"

namespace {

constexpr int kWarps = 8;

template <typename T>
__global__ void heads(int B, int L, int NH, int D, int parts, const T *src, T *dst, int split) {
    const size_t n = (size_t)parts * B * NH * L * D;
    for (size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x; u < n; u += (size_t)gridDim.x * blockDim.x) {
        // u indexes (p, b, h, i, d) of the per-head layout
        size_t x = u;
        int d = (int)(x % D);
        x /= D;
        int i = (int)(x % L);
        x /= L;
        int h = (int)(x % NH);
        x /= NH;
        int b = (int)(x % B);
        int p = (int)(x / B);
        size_t t = ((size_t)b * L + i) * parts * NH * D + ((size_t)p * NH + h) * D + d;
        if (split) dst[u] = src[t];
        else dst[t] = src[u];
    }
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
softmax_fwd(int64_t rows, int NHL, int L, const int32_t *len, const T *S, tk_drop_dev drop, T *P, T *Pd) {
    int64_t r = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    int b = (int)(r / NHL), n = min(len[b], L);
    size_t o = (size_t)r * L;
    const int64_t step = tk_drop_step(drop);
    float mx = -INFINITY;
    for (int j = lane; j < n; j += 32) mx = fmaxf(mx, tk_ld(S, o + j));
    mx = warp_max(mx);
    float sum = 0;
    for (int j = lane; j < n; j += 32) sum += expf(tk_ld(S, o + j) - mx);
    sum = warp_sum(sum);
    float inv = 1.0f / sum;
    for (int j0 = lane * 8; j0 < L; j0 += 256) {
        float f[8];
        if (Pd) tk_drop8(drop, step, (int64_t)(o + j0), f);
        for (int k = 0; k < 8 && j0 + k < L; k++) {
            int j = j0 + k;
            float v = j < n ? expf(tk_ld(S, o + j) - mx) * inv : 0.0f;
            tk_st(P, o + j, v);
            if (Pd) tk_st(Pd, o + j, v * f[k]);
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(kWarps * 32)
softmax_bwd(int64_t rows, int L, const T *P, const T *dPd, tk_drop_dev drop, T *dS) {
    int64_t r = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    size_t o = (size_t)r * L;
    const int64_t step = tk_drop_step(drop);
    float c = 0;
    for (int j0 = lane * 8; j0 < L; j0 += 256) {
        float f[8];
        tk_drop8(drop, step, (int64_t)(o + j0), f);
        for (int k = 0; k < 8 && j0 + k < L; k++) c += tk_ld(dPd, o + j0 + k) * f[k] * tk_ld(P, o + j0 + k);
    }
    c = warp_sum(c);
    for (int j0 = lane * 8; j0 < L; j0 += 256) {
        float f[8];
        tk_drop8(drop, step, (int64_t)(o + j0), f);
        for (int k = 0; k < 8 && j0 + k < L; k++) {
            size_t i = o + j0 + k;
            float p = tk_ld(P, i);
            tk_st(dS, i, p * (tk_ld(dPd, i) * f[k] - c));
        }
    }
}

template <typename T>
__global__ void probs_dropout(int64_t n, const T *P, tk_drop_dev drop, T *Pd) {
    const int64_t step = tk_drop_step(drop);
    for (int64_t i0 = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) * 8; i0 < n;
         i0 += (int64_t)gridDim.x * blockDim.x * 8) {
        float f[8];
        tk_drop8(drop, step, i0, f);
        for (int k = 0; k < 8 && i0 + k < n; k++) tk_st(Pd, i0 + k, tk_ld(P, i0 + k) * f[k]);
    }
}

int heads_launch(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const void *src, void *dst, int split,
                 tk_err *e) {
    size_t n = (size_t)parts * B * NH * L * D;
    if (n == 0) return 0;
    const char *name = split ? "attn_heads_split" : "attn_heads_merge";
    TK_ACT_DISPATCH(act, name, e,
                    (heads<T><<<tk_cu_blocks((int64_t)n, 256), 256, 0, tk_cu_stream(c)>>>(B, L, NH, D, parts,
                                                                                          (const T *)src, (T *)dst,
                                                                                          split)));
    return tk_cu_check(e, name);
}

} // namespace

int tk_attn_heads_split_cuda(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const void *src,
                             void *dst, tk_err *e) {
    return heads_launch(c, act, B, L, NH, D, parts, src, dst, 1, e);
}

int tk_attn_heads_merge_cuda(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const void *src,
                             void *dst, tk_err *e) {
    return heads_launch(c, act, B, L, NH, D, parts, src, dst, 0, e);
}

int tk_attn_softmax_fwd_cuda(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                             const tk_dropout *drop, void *P, void *Pd, tk_err *e) {
    int64_t rows = (int64_t)B * NH * L;
    if (rows == 0) return 0;
    tk_drop_dev d = tk_drop_dev_of(drop);
    unsigned blocks = (unsigned)((rows + kWarps - 1) / kWarps);
    TK_ACT_DISPATCH(act, "attn_softmax_fwd", e,
                    (softmax_fwd<T><<<blocks, kWarps * 32, 0, tk_cu_stream(c)>>>(rows, NH * L, L, len, (const T *)S, d,
                                                                                 (T *)P, (T *)Pd)));
    return tk_cu_check(e, "attn_softmax_fwd");
}

int tk_attn_softmax_bwd_cuda(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *P,
                             const void *dPd, const tk_dropout *drop, void *dS, tk_err *e) {
    (void)len;
    int64_t rows = (int64_t)B * NH * L;
    if (rows == 0) return 0;
    tk_drop_dev d = tk_drop_dev_of(drop);
    unsigned blocks = (unsigned)((rows + kWarps - 1) / kWarps);
    TK_ACT_DISPATCH(act, "attn_softmax_bwd", e,
                    (softmax_bwd<T><<<blocks, kWarps * 32, 0, tk_cu_stream(c)>>>(rows, L, (const T *)P, (const T *)dPd,
                                                                                 d, (T *)dS)));
    return tk_cu_check(e, "attn_softmax_bwd");
}

int tk_attn_probs_dropout_cuda(tk_ctx *c, tk_dtype act, int B, int NH, int L, const void *P, const tk_dropout *drop,
                               void *Pd, tk_err *e) {
    int64_t n = (int64_t)B * NH * L * L;
    if (n == 0) return 0;
    tk_drop_dev d = tk_drop_dev_of(drop);
    TK_ACT_DISPATCH(act, "attn_probs_dropout", e,
                    (probs_dropout<T><<<tk_cu_blocks((n + 7) / 8, 256), 256, 0, tk_cu_stream(c)>>>(n, (const T *)P, d,
                                                                                                  (T *)Pd)));
    return tk_cu_check(e, "attn_probs_dropout");
}
