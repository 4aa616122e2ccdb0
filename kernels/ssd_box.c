// Dispatch of kernels/ssd_box.h (kernels/dispatch.h): the cpu backend runs the references
// (ssd_box_ref.c), the cuda backend the kernels (ssd_box.cu). The default boxes are host-only.
#include "ssd_box.h"
#include "dispatch.h"

size_t tk_ssd_match_ws_bytes(tk_backend b, int64_t ngt) {
    (void)ngt; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_ssd_match_ws_bytes_cuda(ngt));
}

int tk_ssd_match(tk_ctx *c, const float *gt, const int32_t *gt_label, const int32_t *gt_off, int N, int64_t ngt,
                 const float *dbox_ltrb, int D, float thresh, float *box, int32_t *label, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_ssd_match_ref(gt, gt_label, gt_off, N, ngt, dbox_ltrb, D, thresh, box, label, e),
                       tk_ssd_match_cuda(c, gt, gt_label, gt_off, N, ngt, dbox_ltrb, D, thresh, box, label, ws, e));
}

size_t tk_ssd_loss_ws_bytes(tk_backend b, int N, int D) {
    (void)N, (void)D; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_ssd_loss_ws_bytes_cuda(N, D));
}

int tk_ssd_loss(tk_ctx *c, tk_dtype t, const void *ploc, const void *pconf, const float *gbox, const int32_t *label,
                const float *dbox, int N, int D, int C, float *loss, void *dploc, void *dpconf, uint8_t *sel, void *ws,
                tk_err *e) {
    (void)ws;
    return TK_DISPATCH(
        c, tk_ssd_loss_ref(t, ploc, pconf, gbox, label, dbox, N, D, C, loss, dploc, dpconf, sel, e),
        tk_ssd_loss_cuda(c, t, ploc, pconf, gbox, label, dbox, N, D, C, loss, dploc, dpconf, sel, ws, e));
}

int tk_ssd_loss_acc(tk_ctx *c, tk_dtype t, const void *ploc, const void *pconf, const float *gbox,
                    const int32_t *label, const float *dbox, int N, int D, int C, float scale, double *acc,
                    float *loss, void *dploc, void *dpconf, uint8_t *sel, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c,
                       tk_ssd_loss_acc_ref(t, ploc, pconf, gbox, label, dbox, N, D, C, scale, acc, loss, dploc, dpconf,
                                           sel, e),
                       tk_ssd_loss_acc_cuda(c, t, ploc, pconf, gbox, label, dbox, N, D, C, scale, acc, loss, dploc,
                                            dpconf, sel, ws, e));
}
