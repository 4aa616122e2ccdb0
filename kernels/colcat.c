// Dispatch of kernels/colcat.h (kernels/dispatch.h).
#include "colcat.h"
#include "dispatch.h"

int tk_colcat(tk_ctx *c, size_t es, const void *a, int64_t ca, const void *b, int64_t cb, int64_t rows, void *out,
              tk_err *e) {
    return TK_DISPATCH(c, tk_colcat_ref(es, a, ca, b, cb, rows, out, e), tk_colcat_cuda(c, es, a, ca, b, cb, rows, out, e));
}

int tk_colsplit(tk_ctx *c, size_t es, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b,
                tk_err *e) {
    return TK_DISPATCH(c, tk_colsplit_ref(es, in, ca, cb, rows, a, b, e),
                       tk_colsplit_cuda(c, es, in, ca, cb, rows, a, b, e));
}
