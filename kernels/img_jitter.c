// Dispatch of kernels/img_jitter.h (kernels/dispatch.h): the cpu backend runs the reference
// (img_jitter_ref.c), the cuda backend the kernel (img_jitter.cu).
#include "img_jitter.h"
#include "dispatch.h"

size_t tk_img_jitter_ws_bytes(tk_backend b, int n, int S) {
    (void)n, (void)S; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_img_jitter_ws_bytes_cuda(n, S));
}

int tk_img_jitter_norm(tk_ctx *c, const uint8_t *src, const tk_img_jitter_job *jobs, int n, int S, const float mean[3],
                       const float std[3], float *out, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_img_jitter_norm_ref(src, jobs, n, S, mean, std, out, e),
                       tk_img_jitter_norm_cuda(c, src, jobs, n, S, mean, std, out, ws, e));
}
