// Dispatch of kernels/xent_smooth.h (kernels/dispatch.h): the cpu backend runs the reference
// (xent_smooth_ref.c), the cuda backend the kernel (xent_smooth.cu).
#include "dispatch.h"
#include "xent_smooth.h"

size_t tk_xent_smooth_ws_bytes(tk_backend b, int B) {
    (void)B; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_xent_smooth_ws_bytes_cuda(B));
}

int tk_xent_smooth(tk_ctx *c, const float *z, const int32_t *label, int B, int K, int N, float eps, tk_dtype t,
                   void *dz, double *acc, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_xent_smooth_ref(z, label, B, K, N, eps, t, dz, acc, e),
                       tk_xent_smooth_cuda(c, z, label, B, K, N, eps, t, dz, acc, ws, e));
}

int tk_top1_count(tk_ctx *c, const float *z, const int32_t *label, int B, int K, int64_t *count, tk_err *e) {
    return TK_DISPATCH(c, tk_top1_count_ref(z, label, B, K, count, e), tk_top1_count_cuda(c, z, label, B, K, count, e));
}
