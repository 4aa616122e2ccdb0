// Dispatch of kernels/colcat.h (kernels/dispatch.h).
#include "colcat.h"
#include "dispatch.h"

int tk_colcat(tk_ctx *c, tk_dtype t, const void *a, int64_t ca, const float *bias, const void *b, int64_t cb,
              int64_t rows, void *out, tk_err *e) {
    return TK_DISPATCH(c, tk_colcat_ref(t, a, ca, bias, b, cb, rows, out, e),
                       tk_colcat_cuda(c, t, a, ca, bias, b, cb, rows, out, e));
}

int tk_colsplit(tk_ctx *c, tk_dtype t, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b,
                tk_err *e) {
    return TK_DISPATCH(c, tk_colsplit_ref(t, in, ca, cb, rows, a, b, e),
                       tk_colsplit_cuda(c, t, in, ca, cb, rows, a, b, e));
}
