// Dispatch of kernels/xent.h (kernels/dispatch.h): the cpu backend runs the reference
// (xent_ref.c), the cuda backend the kernel (xent.cu).
#include "dispatch.h"
#include "xent.h"

size_t tk_xent_ws_bytes(tk_backend b, int R) {
    return TK_DISPATCH_SIZE(b, (size_t)(R > 0 ? R : 1) * sizeof(double), tk_xent_ws_bytes_cuda(R));
}

int tk_xent_fwd_bwd(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                    float scale, double *acc, int bump, void *dlogits, void *ws, tk_err *e) {
    return TK_DISPATCH(c, tk_xent_fwd_bwd_ref(act, R, C, ld, logits, labels, scale, acc, bump, dlogits, ws, e),
                       tk_xent_fwd_bwd_cuda(c, act, R, C, ld, logits, labels, scale, acc, bump, dlogits, ws, e));
}

int tk_xent_correct(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                    int64_t *counts, tk_err *e) {
    return TK_DISPATCH(c, tk_xent_correct_ref(act, R, C, ld, logits, labels, counts, e),
                       tk_xent_correct_cuda(c, act, R, C, ld, logits, labels, counts, e));
}
