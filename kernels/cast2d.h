// Strided 2-D copy with a type conversion and zero padding, for the bf16 compute path's copies:
//   dst[r * dld + k] = convert(src[r * sld + k])  for k < cols
//   dst[r * dld + k] = 0                           for cols <= k < dld
// over rows r < rows. Types TK_F32 and TK_BF16 (to bf16: round to nearest even, as
// tk_f32_to_bf16). Used to pad the 13 dense features (and the first layer's weights) to K = 16
// for the bf16 GEMM, to drop the pad columns of that layer's weight gradient, to refresh the bf16
// weight copies after a load, and to widen bf16 logits to fp32 scores.
#ifndef TK_KERNELS_CAST2D_H
#define TK_KERNELS_CAST2D_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

// src (rows, sld) in st; dst (rows, dld) in dt; cols <= sld, cols <= dld. src and dst must not overlap.
int tk_cast2d(tk_ctx *c, const void *src, tk_dtype st, int64_t sld, void *dst, tk_dtype dt, int64_t dld,
              int64_t rows, int64_t cols, tk_err *e);
int tk_cast2d_ref(const void *src, tk_dtype st, int64_t sld, void *dst, tk_dtype dt, int64_t dld,
                  int64_t rows, int64_t cols, tk_err *e);
// The argument checks shared by both sides.
static inline int tk_cast2d_check(tk_dtype st, int64_t sld, tk_dtype dt, int64_t dld, int64_t rows, int64_t cols,
                                  tk_err *e) {
    if ((st != TK_F32 && st != TK_BF16) || (dt != TK_F32 && dt != TK_BF16))
        return tk_err_set(e, TK_EINTERNAL, "cast2d: unsupported types %s -> %s", tk_dtype_name(st), tk_dtype_name(dt));
    if (rows < 0 || cols < 0 || cols > sld || cols > dld)
        return tk_err_set(e, TK_EINTERNAL, "cast2d: bad shape rows %lld cols %lld sld %lld dld %lld", (long long)rows,
                          (long long)cols, (long long)sld, (long long)dld);
    return 0;
}
// Many 1-D conversions in one launch (ResNet's bf16 weight gradients into their fp32 spans, once
// a step instead of a launch each): dst_i[k] = convert(src_i[k]) for k < n_i, i < count, count at
// most TK_CAST_MANY; st -> dt as tk_cast2d's. The spans must not overlap.
enum { TK_CAST_MANY = 64 };
typedef struct tk_cast_span {
    const void *src;
    void *dst;
    int64_t n;
} tk_cast_span;
int tk_cast_many(tk_ctx *c, const tk_cast_span *spans, int count, tk_dtype st, tk_dtype dt, tk_err *e);
int tk_cast_many_ref(const tk_cast_span *spans, int count, tk_dtype st, tk_dtype dt, tk_err *e);
static inline int tk_cast_many_check(int count, tk_dtype st, tk_dtype dt, tk_err *e) {
    if (count < 0 || count > TK_CAST_MANY) return tk_err_set(e, TK_EINTERNAL, "cast_many: %d spans", count);
    return tk_cast2d_check(st, 0, dt, 0, 0, 0, e);
}
#ifdef TK_HAVE_CUDA
int tk_cast_many_cuda(tk_ctx *c, const tk_cast_span *spans, int count, tk_dtype st, tk_dtype dt, tk_err *e);
int tk_cast2d_cuda(tk_ctx *c, const void *src, tk_dtype st, int64_t sld, void *dst, tk_dtype dt, int64_t dld,
                   int64_t rows, int64_t cols, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
