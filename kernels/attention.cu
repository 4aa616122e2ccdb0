// CUDA side of kernels/attention.h's kernels. The softmax kernels take one warp a row of L
// scores, each lane 8 consecutive keys at a time (one Philox call draws their dropout), fp32
// math with the row's max and sum reduced by shuffles in a fixed order; rows of up to 1024 keys
// (a multiple of 8) are held in registers and read once (softmax_*_reg), longer or odd ones
// re-read from memory. The head re-layouts move 16 bytes a thread when D % 8 == 0.
#include "act_types.cuh"
#include "attention.h"
#include "dropout.cuh"

namespace {

constexpr int kWarps = 8;

// u indexes (p, b, h, i, d) of the per-head layout; sequence b's token i is row start[b] + i of
// the rows (positions i >= len[b]: the split writes 0, the merge skips them).
template <typename T>
__global__ void heads(int B, int L, int NH, int D, int parts, const int32_t *start, const int32_t *len, const T *src,
                      T *dst, int split) {
    const size_t n = (size_t)parts * B * NH * L * D;
    for (size_t u = (size_t)blockIdx.x * blockDim.x + threadIdx.x; u < n; u += (size_t)gridDim.x * blockDim.x) {
        size_t x = u;
        int d = (int)(x % D);
        x /= D;
        int i = (int)(x % L);
        x /= L;
        int h = (int)(x % NH);
        x /= NH;
        int b = (int)(x % B);
        int p = (int)(x / B);
        int in = i < len[b];
        size_t t = ((size_t)start[b] + i) * parts * NH * D + ((size_t)p * NH + h) * D + d;
        if (split && in) dst[u] = src[t];
        else if (split) tk_st(dst, u, 0.0f);
        else if (in) dst[t] = src[u];
    }
}

// The same re-layout 8 elements (16 bytes of bf16, 32 of fp32) a thread: D % 8 == 0 and both
// buffers 16-byte aligned. Row r = (p, b, h, i) of the per-head layout; 32-bit index math per
// 8 elements instead of 64-bit divisions per element.
template <typename T>
__global__ void heads_vec(int64_t chunks, int L, int NH, int B, int D, int parts, const int32_t *start,
                          const int32_t *len, const T *src, T *dst, int split) {
    const int cpr = D / 8; // chunks a row
    for (int64_t q = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; q < chunks; q += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = q / cpr;
        int c = (int)(q - r * cpr);
        int64_t x = r;
        int i = (int)(x % L);
        x /= L;
        int h = (int)(x % NH);
        x /= NH;
        int b = (int)(x % B);
        int p = (int)(x / B);
        int in = i < len[b];
        if (!split && !in) continue;
        size_t u = (size_t)r * D + c * 8;
        size_t t = ((size_t)start[b] + i) * parts * NH * D + ((size_t)p * NH + h) * D + c * 8;
        T *to = dst + (split ? u : t);
        if (!in) { // (a split's padding position)
            *(uint4 *)to = make_uint4(0, 0, 0, 0);
            if (sizeof(T) == 4) ((uint4 *)to)[1] = make_uint4(0, 0, 0, 0);
            continue;
        }
        const T *from = src + (split ? t : u);
        if (sizeof(T) == 2) {
            *(uint4 *)to = *(const uint4 *)from;
        } else {
            ((uint4 *)to)[0] = ((const uint4 *)from)[0];
            ((uint4 *)to)[1] = ((const uint4 *)from)[1];
        }
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
    float inv = sum > 0 ? 1.0f / sum : 0.0f; // (len 0: an unused slot, all 0)
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

// The row in registers (L <= 256 C, L % 8 == 0, 16-byte aligned rows): lane l holds keys
// 256 k + 8 l .. 256 k + 8 l + 7 of chunk k < C. S is read once; P and Pd written once. The same
// sums as softmax_fwd, in another order (fp32).
template <typename T, int C>
__global__ void __launch_bounds__(kWarps * 32)
softmax_fwd_reg(int64_t rows, int NHL, int L, const int32_t *len, const T *S, tk_drop_dev drop, T *P, T *Pd) {
    int64_t r = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    int n = min(len[r / NHL], L);
    size_t o = (size_t)r * L;
    const int64_t step = tk_drop_step(drop);
    float v[C][8], mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < C; k++) {
        int j0 = k * 256 + lane * 8;
        if (j0 < L) tk_ld8(S + o + j0, v[k]);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            if (j0 + j >= n) v[k][j] = -INFINITY;
            mx = fmaxf(mx, v[k][j]);
        }
    }
    mx = warp_max(mx);
    float sum = 0;
#pragma unroll
    for (int k = 0; k < C; k++)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            v[k][j] = k * 256 + lane * 8 + j < n ? expf(v[k][j] - mx) : 0.0f;
            sum += v[k][j];
        }
    sum = warp_sum(sum);
    float inv = sum > 0 ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int k = 0; k < C; k++) {
        int j0 = k * 256 + lane * 8;
        if (j0 >= L) continue;
        float f[8], d[8];
        if (Pd) tk_drop8(drop, step, (int64_t)(o + j0), f);
#pragma unroll
        for (int j = 0; j < 8; j++) v[k][j] *= inv;
        tk_st8(P + o + j0, v[k]);
        if (Pd) {
#pragma unroll
            for (int j = 0; j < 8; j++) d[j] = v[k][j] * f[j];
            tk_st8(Pd + o + j0, d);
        }
    }
}

template <typename T, int C>
__global__ void __launch_bounds__(kWarps * 32)
softmax_bwd_reg(int64_t rows, int L, const T *P, const T *dPd, tk_drop_dev drop, T *dS) {
    int64_t r = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    size_t o = (size_t)r * L;
    const int64_t step = tk_drop_step(drop);
    float p[C][8], g[C][8], c = 0;
#pragma unroll
    for (int k = 0; k < C; k++) {
        int j0 = k * 256 + lane * 8;
        if (j0 >= L) {
#pragma unroll
            for (int j = 0; j < 8; j++) p[k][j] = g[k][j] = 0;
            continue;
        }
        float f[8];
        tk_drop8(drop, step, (int64_t)(o + j0), f);
        tk_ld8(P + o + j0, p[k]);
        tk_ld8(dPd + o + j0, g[k]);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            g[k][j] *= f[j];
            c += g[k][j] * p[k][j];
        }
    }
    c = warp_sum(c);
#pragma unroll
    for (int k = 0; k < C; k++) {
        int j0 = k * 256 + lane * 8;
        if (j0 >= L) continue;
        float d[8];
#pragma unroll
        for (int j = 0; j < 8; j++) d[j] = p[k][j] * (g[k][j] - c);
        tk_st8(dS + o + j0, d);
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

// The register kernels take rows of L <= 1024, a multiple of 8, 16-byte aligned.
int reg_chunks(int L, const void *a, const void *b, const void *c2) {
    if (L % 8 != 0 || L > 1024 || !tk_aligned16(a) || !tk_aligned16(b) || (c2 && !tk_aligned16(c2))) return 0;
    return (L + 255) / 256;
}

int heads_launch(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, int split, tk_err *e) {
    size_t n = (size_t)parts * B * NH * L * D;
    if (n == 0) return 0;
    const char *name = split ? "attn_heads_split" : "attn_heads_merge";
    if (D % 8 == 0 && tk_aligned16(src) && tk_aligned16(dst)) {
        int64_t chunks = (int64_t)(n / 8);
        TK_ACT_DISPATCH(act, name, e,
                        heads_vec<T><<<tk_cu_blocks(chunks, 256), 256, 0, tk_cu_stream(c)>>>(
                            chunks, L, NH, B, D, parts, start, len, (const T *)src, (T *)dst, split));
        return tk_cu_check(e, name);
    }
    TK_ACT_DISPATCH(act, name, e,
                    (heads<T><<<tk_cu_blocks((int64_t)n, 256), 256, 0, tk_cu_stream(c)>>>(
                        B, L, NH, D, parts, start, len, (const T *)src, (T *)dst, split)));
    return tk_cu_check(e, name);
}

} // namespace

int tk_attn_heads_split_cuda(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                             const int32_t *len, const void *src, void *dst, tk_err *e) {
    return heads_launch(c, act, B, L, NH, D, parts, start, len, src, dst, 1, e);
}

int tk_attn_heads_merge_cuda(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                             const int32_t *len, const void *src, void *dst, tk_err *e) {
    return heads_launch(c, act, B, L, NH, D, parts, start, len, src, dst, 0, e);
}

int tk_attn_softmax_fwd_cuda(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                             const tk_dropout *drop, void *P, void *Pd, tk_err *e) {
    int64_t rows = (int64_t)B * NH * L;
    if (rows == 0) return 0;
    tk_drop_dev d = tk_drop_dev_of(drop);
    unsigned blocks = (unsigned)((rows + kWarps - 1) / kWarps);
    cudaStream_t st = tk_cu_stream(c);
#define FWD_REG(CC)                                                                                                    \
    TK_ACT_DISPATCH(act, "attn_softmax_fwd", e,                                                                        \
                    softmax_fwd_reg<T, CC><<<blocks, kWarps * 32, 0, st>>>(rows, NH * L, L, len, (const T *)S, d,      \
                                                                           (T *)P, (T *)Pd))
    switch (reg_chunks(L, S, P, Pd)) {
    case 1: FWD_REG(1); return tk_cu_check(e, "attn_softmax_fwd");
    case 2: FWD_REG(2); return tk_cu_check(e, "attn_softmax_fwd");
    case 3: FWD_REG(3); return tk_cu_check(e, "attn_softmax_fwd");
    case 4: FWD_REG(4); return tk_cu_check(e, "attn_softmax_fwd");
    default: break;
    }
#undef FWD_REG
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
    cudaStream_t st = tk_cu_stream(c);
#define BWD_REG(CC)                                                                                                    \
    TK_ACT_DISPATCH(act, "attn_softmax_bwd", e,                                                                        \
                    softmax_bwd_reg<T, CC><<<blocks, kWarps * 32, 0, st>>>(rows, L, (const T *)P, (const T *)dPd, d,   \
                                                                           (T *)dS))
    switch (reg_chunks(L, P, dPd, dS)) {
    case 1: BWD_REG(1); return tk_cu_check(e, "attn_softmax_bwd");
    case 2: BWD_REG(2); return tk_cu_check(e, "attn_softmax_bwd");
    case 3: BWD_REG(3); return tk_cu_check(e, "attn_softmax_bwd");
    case 4: BWD_REG(4); return tk_cu_check(e, "attn_softmax_bwd");
    default: break;
    }
#undef BWD_REG
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
