// CUDA side of kernels/cast2d.h: a grid-stride loop over the rows x dld destination elements.
#include "cast2d.h"
#include "core/vec.cuh"
#include "cuda_util.cuh"


template <typename S, typename D>
__global__ static void cast2d_kernel(const S *src, int64_t sld, D *dst, int64_t dld, int64_t rows, int64_t cols) {
    int64_t n = rows * dld;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / dld, k = i % dld;
        tk_st(dst, i, k < cols ? tk_ld(src, r * sld + k) : 0.0f);
    }
}

template <typename S>
static void launch(const S *src, int64_t sld, void *dst, tk_dtype dt, int64_t dld, int64_t rows, int64_t cols,
                   cudaStream_t s) {
    unsigned blocks = tk_cu_blocks(rows * dld, 256);
    if (dt == TK_F32) cast2d_kernel<<<blocks, 256, 0, s>>>(src, sld, (float *)dst, dld, rows, cols);
    else cast2d_kernel<<<blocks, 256, 0, s>>>(src, sld, (__nv_bfloat16 *)dst, dld, rows, cols);
}

int tk_cast2d_cuda(tk_ctx *c, const void *src, tk_dtype st, int64_t sld, void *dst, tk_dtype dt, int64_t dld,
                   int64_t rows, int64_t cols, tk_err *e) {
    TRY(tk_cast2d_check(st, sld, dt, dld, rows, cols, e));
    if (rows * dld == 0) return 0;
    if (st == TK_F32) launch((const float *)src, sld, dst, dt, dld, rows, cols, tk_cu_stream(c));
    else launch((const __nv_bfloat16 *)src, sld, dst, dt, dld, rows, cols, tk_cu_stream(c));
    return tk_cu_check(e, "cast2d");
}

struct CastSpans {
    tk_cast_span s[TK_CAST_MANY];
};

// blockIdx.y: the span; a grid-stride loop over its elements.
template <typename S, typename D> __global__ static void cast_many_kernel(const CastSpans sp) {
    const tk_cast_span &t = sp.s[blockIdx.y];
    const S *src = (const S *)t.src;
    D *dst = (D *)t.dst;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < t.n; i += (int64_t)gridDim.x * blockDim.x)
        tk_st(dst + i, 0, tk_ld(src + i, 0));
}

int tk_cast_many_cuda(tk_ctx *c, const tk_cast_span *spans, int count, tk_dtype st, tk_dtype dt, tk_err *e) {
    TRY(tk_cast_many_check(count, st, dt, e));
    if (count == 0) return 0;
    CastSpans sp = {};
    int64_t most = 0;
    for (int i = 0; i < count; i++) sp.s[i] = spans[i], most = spans[i].n > most ? spans[i].n : most;
    const dim3 grid(tk_cu_blocks(most, 256) < 64 ? tk_cu_blocks(most, 256) : 64, (unsigned)count);
    cudaStream_t s = tk_cu_stream(c);
    if (st == TK_BF16 && dt == TK_F32) cast_many_kernel<__nv_bfloat16, float><<<grid, 256, 0, s>>>(sp);
    else if (st == TK_F32 && dt == TK_BF16) cast_many_kernel<float, __nv_bfloat16><<<grid, 256, 0, s>>>(sp);
    else if (st == TK_F32) cast_many_kernel<float, float><<<grid, 256, 0, s>>>(sp);
    else cast_many_kernel<__nv_bfloat16, __nv_bfloat16><<<grid, 256, 0, s>>>(sp);
    return tk_cu_check(e, "cast_many");
}
