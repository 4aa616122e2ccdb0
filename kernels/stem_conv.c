// Dispatch of kernels/stem_conv.h (kernels/dispatch.h): the cpu backend runs the reference
// (stem_conv_ref.c), the cuda backend the kernel (stem_conv.cu).
#include "dispatch.h"
#include "stem_conv.h"

int tk_stem_conv_fwd(tk_ctx *c, const void *xs, int N, int S, const void *ws, int K, tk_dtype t, void *y, tk_err *e) {
    if (c->backend == TK_BACKEND_CUDA && !tk_stem_conv_ok(t, S, K))
        return tk_err_set(e, TK_EINTERNAL, "stem_conv: the kernel does not run %s S %d K %d", tk_dtype_name(t), S, K);
    return TK_DISPATCH(c, tk_stem_conv_fwd_ref(xs, N, S, ws, K, t, y, e), tk_stem_conv_fwd_cuda(c, xs, N, S, ws, K, y, e));
}
