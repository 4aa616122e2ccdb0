// Dispatch of kernels/sgd.h (kernels/dispatch.h): the cpu backend runs the reference
// (sgd_ref.c), the cuda backend the kernel (sgd.cu).
#include "dispatch.h"
#include "sgd.h"

int tk_sgd_update(tk_ctx *c, float *w, const float *g, size_t n, const float *lr, void *copy,
                  tk_dtype copy_type, tk_err *e) {
    return TK_DISPATCH(c, tk_sgd_update_ref(w, g, n, lr, copy, copy_type, e),
                       tk_sgd_update_cuda(c, w, g, n, lr, copy, copy_type, e));
}
