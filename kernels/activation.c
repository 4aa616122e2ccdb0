// Dispatch of kernels/activation.h (kernels/dispatch.h): the cpu backend runs the reference
// (activation_ref.c), the cuda backend the kernel (activation.cu).
#include "activation.h"
#include "dispatch.h"

int tk_gelu_fwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    return TK_DISPATCH(c, tk_gelu_fwd_ref(act, n, x, y, e), tk_gelu_fwd_cuda(c, act, n, x, y, e));
}

int tk_gelu_bwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, const void *dy, void *dx, tk_err *e) {
    return TK_DISPATCH(c, tk_gelu_bwd_ref(act, n, x, dy, dx, e), tk_gelu_bwd_cuda(c, act, n, x, dy, dx, e));
}

int tk_tanh_fwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    return TK_DISPATCH(c, tk_tanh_fwd_ref(act, n, x, y, e), tk_tanh_fwd_cuda(c, act, n, x, y, e));
}

int tk_tanh_bwd(tk_ctx *c, tk_dtype act, int64_t n, const void *y, const void *dy, void *dx, tk_err *e) {
    return TK_DISPATCH(c, tk_tanh_bwd_ref(act, n, y, dy, dx, e), tk_tanh_bwd_cuda(c, act, n, y, dy, dx, e));
}
