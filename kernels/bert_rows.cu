// CUDA side of kernels/bert_rows.h: one block a gathered row; the scatter zeroes the gradient, then
// one block a sequence adds its rows in order of k (deterministic).
#include "act_types.cuh"
#include "bert_rows.h"

namespace {

template <typename T>
__global__ void gather(int L, int H, int P, const T *x, const int32_t *pos, const int32_t *nmask, const int32_t *ids,
                       T *out, int32_t *labels) {
    int r = blockIdx.x, b = r / P, k = r % P;
    int valid = pos && k < nmask[b];
    int p = valid ? pos[r] : 0;
    const T *src = x + ((size_t)b * L + p) * H;
    for (int h = threadIdx.x; h < H; h += blockDim.x) out[(size_t)r * H + h] = src[h];
    if (labels && threadIdx.x == 0) labels[r] = valid && ids ? ids[r] : -1;
}

template <typename T>
__global__ void scatter(int L, int H, int P, const T *g, const int32_t *pos, const int32_t *nmask, const T *gc, T *d) {
    int b = blockIdx.x;
    for (int h = threadIdx.x; h < H; h += blockDim.x) {
        if (gc) d[(size_t)b * L * H + h] = gc[(size_t)b * H + h];
        for (int k = 0; pos && k < P && k < nmask[b]; k++) {
            size_t i = ((size_t)b * L + pos[b * P + k]) * H + h;
            tk_st(d, i, tk_ld(d, i) + tk_ld(g, ((size_t)b * P + k) * H + h));
        }
    }
}

} // namespace

int tk_bert_gather_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *pos,
                        const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels, tk_err *e) {
    if (B * P == 0) return 0;
    TK_ACT_DISPATCH(act, "bert_gather", e,
                    (gather<T><<<B * P, 128, 0, tk_cu_stream(c)>>>(L, H, P, (const T *)hidden, pos, nmask, ids, (T *)out,
                                                                   labels)));
    return tk_cu_check(e, "bert_gather");
}

int tk_bert_scatter_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *drows, const int32_t *pos,
                         const int32_t *nmask, const void *dcls, void *dhidden, tk_err *e) {
    if (B == 0) return 0;
    cudaStream_t s = tk_cu_stream(c);
    TRY(tk_cu_check(e, "bert_scatter", cudaMemsetAsync(dhidden, 0, (size_t)B * L * H * tk_dtype_size(act), s)));
    TK_ACT_DISPATCH(act, "bert_scatter", e,
                    (scatter<T><<<B, 128, 0, s>>>(L, H, P, (const T *)drows, pos, nmask, (const T *)dcls, (T *)dhidden)));
    return tk_cu_check(e, "bert_scatter");
}
