// CUDA side of kernels/bert_rows.h: one block a row (gather, pack, unpack); the scatter zeroes the
// gradient, then one block a sequence adds its rows in order of k (deterministic); the starts are
// one thread's prefix sum (B is a rank's sequences: tens to hundreds).
#include "act_types.cuh"
#include "bert_rows.h"

namespace {

__device__ __forceinline__ size_t row0(const int32_t *start, int b, int L) {
    return start ? (size_t)start[b] : (size_t)b * L;
}

__global__ void starts(int B, int L, int packed, const int32_t *len, int32_t *start) {
    int32_t s = 0;
    for (int b = 0; b <= B; b++) {
        start[b] = packed ? s : b * L;
        if (b < B) s += len[b];
    }
}

template <typename T>
__global__ void pack(int B, int L, int H, int64_t rows, const int32_t *start, const int32_t *len, const T *src,
                     T *dst) {
    const int64_t r = blockIdx.x;
    if (r < (int64_t)B * L) {
        int b = (int)(r / L), i = (int)(r % L);
        if (i < len[b]) {
            const T *s = src + (size_t)r * H;
            T *d = dst + ((size_t)start[b] + i) * H;
            for (int h = threadIdx.x; h < H; h += blockDim.x) d[h] = s[h];
        }
    }
    if (r >= start[B] && r < rows)
        for (int h = threadIdx.x; h < H; h += blockDim.x) tk_st(dst, (size_t)r * H + h, 0.0f);
}

template <typename T>
__global__ void unpack(int L, int H, const int32_t *start, const int32_t *len, const T *src, T *dst) {
    const int64_t r = blockIdx.x;
    int b = (int)(r / L), i = (int)(r % L);
    T *d = dst + (size_t)r * H;
    if (i < len[b]) {
        const T *s = src + ((size_t)start[b] + i) * H;
        for (int h = threadIdx.x; h < H; h += blockDim.x) d[h] = s[h];
    } else {
        for (int h = threadIdx.x; h < H; h += blockDim.x) tk_st(d, h, 0.0f);
    }
}

template <typename T>
__global__ void gather(int L, int H, int P, const T *x, const int32_t *start, const int32_t *pos, const int32_t *nmask,
                       const int32_t *ids, T *out, int32_t *labels) {
    int r = blockIdx.x, b = r / P, k = r % P;
    int valid = pos && k < nmask[b];
    int p = valid ? pos[r] : 0;
    const T *src = x + (row0(start, b, L) + p) * H;
    for (int h = threadIdx.x; h < H; h += blockDim.x) out[(size_t)r * H + h] = src[h];
    if (labels && threadIdx.x == 0) labels[r] = valid && ids ? ids[r] : -1;
}

template <typename T>
__global__ void scatter(int L, int H, int P, const T *g, const int32_t *start, const int32_t *pos,
                        const int32_t *nmask, const T *gc, T *d) {
    int b = blockIdx.x;
    const size_t r0 = row0(start, b, L);
    for (int h = threadIdx.x; h < H; h += blockDim.x) {
        if (gc) d[r0 * H + h] = gc[(size_t)b * H + h];
        for (int k = 0; pos && k < P && k < nmask[b]; k++) {
            size_t i = (r0 + pos[b * P + k]) * H + h;
            tk_st(d, i, tk_ld(d, i) + tk_ld(g, ((size_t)b * P + k) * H + h));
        }
    }
}

} // namespace

int tk_bert_starts_cuda(tk_ctx *c, int B, int L, int packed, const int32_t *len, int32_t *start, tk_err *e) {
    starts<<<1, 1, 0, tk_cu_stream(c)>>>(B, L, packed, len, start);
    return tk_cu_check(e, "bert_starts");
}

int tk_bert_pack_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int64_t rows, const int32_t *start,
                      const int32_t *len, const void *src, void *dst, tk_err *e) {
    int64_t n = (int64_t)B * L > rows ? (int64_t)B * L : rows;
    if (n == 0) return 0;
    TK_ACT_DISPATCH(act, "bert_pack", e,
                    (pack<T><<<(unsigned)n, 256, 0, tk_cu_stream(c)>>>(B, L, H, rows, start, len, (const T *)src,
                                                                        (T *)dst)));
    return tk_cu_check(e, "bert_pack");
}

int tk_bert_unpack_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, const int32_t *start, const int32_t *len,
                        const void *src, void *dst, tk_err *e) {
    int64_t n = (int64_t)B * L;
    if (n == 0) return 0;
    TK_ACT_DISPATCH(act, "bert_unpack", e,
                    (unpack<T><<<(unsigned)n, 256, 0, tk_cu_stream(c)>>>(L, H, start, len, (const T *)src, (T *)dst)));
    return tk_cu_check(e, "bert_unpack");
}

int tk_bert_gather_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *start,
                        const int32_t *pos, const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels,
                        tk_err *e) {
    if (B * P == 0) return 0;
    TK_ACT_DISPATCH(act, "bert_gather", e,
                    (gather<T><<<B * P, 128, 0, tk_cu_stream(c)>>>(L, H, P, (const T *)hidden, start, pos, nmask, ids,
                                                                   (T *)out, labels)));
    return tk_cu_check(e, "bert_gather");
}

int tk_bert_scatter_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, int64_t rows, const void *drows,
                         const int32_t *start, const int32_t *pos, const int32_t *nmask, const void *dcls,
                         void *dhidden, tk_err *e) {
    if (B == 0) return 0;
    cudaStream_t s = tk_cu_stream(c);
    size_t n = (size_t)(rows > 0 ? rows : (int64_t)B * L) * H * tk_dtype_size(act);
    TRY(tk_cu_check(e, "bert_scatter", cudaMemsetAsync(dhidden, 0, n, s)));
    TK_ACT_DISPATCH(act, "bert_scatter", e,
                    (scatter<T><<<B, 128, 0, s>>>(L, H, P, (const T *)drows, start, pos, nmask, (const T *)dcls,
                                                  (T *)dhidden)));
    return tk_cu_check(e, "bert_scatter");
}
