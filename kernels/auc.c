// Dispatch of kernels/auc.h (kernels/dispatch.h): the cpu backend runs the reference
// (auc_ref.c), the cuda backend the kernel (auc.cu).
#include "auc.h"
#include "dispatch.h"

size_t tk_auc_ws_bytes(tk_backend b, int64_t n) {
    return TK_DISPATCH_SIZE(b, (size_t)n * 8, tk_auc_ws_bytes_cuda(n));
}

int tk_auc(tk_ctx *c, const float *score, const uint8_t *label, int64_t n, void *ws, double *auc,
           tk_err *e) {
    return TK_DISPATCH(c, tk_auc_ref(score, label, n, ws, auc, e),
                       tk_auc_cuda(c, score, label, n, ws, auc, e));
}
