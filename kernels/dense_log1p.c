// Dispatch of kernels/dense_log1p.h (kernels/dispatch.h): the cpu backend runs the reference
// (dense_log1p_ref.c), the cuda backend the kernel (dense_log1p.cu).
#include "dense_log1p.h"
#include "dispatch.h"

int tk_dense_log1p(tk_ctx *c, const int32_t *x, int64_t n, float *y, tk_err *e) {
    return TK_DISPATCH(c, tk_dense_log1p_ref(x, n, y, e), tk_dense_log1p_cuda(c, x, n, y, e));
}
