// Dispatch of kernels/ssd_nms.h (kernels/dispatch.h): the cpu backend runs the reference
// (ssd_nms_ref.c), the cuda backend the kernels (ssd_nms.cu).
#include "dispatch.h"
#include "ssd_nms.h"

size_t tk_ssd_nms_ws_bytes(tk_backend b, int N, int A, int C, const tk_ssd_nms_params *p) {
    (void)N, (void)A, (void)C, (void)p; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_ssd_nms_ws_bytes_cuda(N, A, C, p));
}

int tk_ssd_nms(tk_ctx *c, tk_dtype t, const void *loc, const void *conf, const float *dbox, int N, int A, int C,
               const tk_ssd_nms_params *p, float *box, float *score, int32_t *label, int32_t *count, void *ws,
               tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_ssd_nms_ref(t, loc, conf, dbox, N, A, C, p, box, score, label, count, e),
                       tk_ssd_nms_cuda(c, t, loc, conf, dbox, N, A, C, p, box, score, label, count, ws, e));
}
