// Dispatch of kernels/cast2d.h (kernels/dispatch.h): the cpu backend runs the reference
// (cast2d_ref.c), the cuda backend the kernel (cast2d.cu).
#include "cast2d.h"
#include "dispatch.h"

int tk_cast2d(tk_ctx *c, const void *src, tk_dtype st, int64_t sld, void *dst, tk_dtype dt, int64_t dld,
              int64_t rows, int64_t cols, tk_err *e) {
    return TK_DISPATCH(c, tk_cast2d_ref(src, st, sld, dst, dt, dld, rows, cols, e),
                       tk_cast2d_cuda(c, src, st, sld, dst, dt, dld, rows, cols, e));
}

int tk_cast_many(tk_ctx *c, const tk_cast_span *spans, int count, tk_dtype st, tk_dtype dt, tk_err *e) {
    return TK_DISPATCH(c, tk_cast_many_ref(spans, count, st, dt, e), tk_cast_many_cuda(c, spans, count, st, dt, e));
}
