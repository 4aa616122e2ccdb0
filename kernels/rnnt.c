// Dispatch of kernels/rnnt.h (kernels/dispatch.h): the cpu backend runs the reference
// (rnnt_ref.c), the cuda backend the kernels (rnnt.cu).
#include "rnnt.h"
#include "dispatch.h"

size_t tk_rnnt_loss_ws_bytes(tk_backend b, int B, int64_t rows) {
    (void)B, (void)rows; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_rnnt_loss_ws_bytes_cuda(B, rows));
}

int tk_rnnt_joint_fwd(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                      const tk_dropout *drop, void *h, tk_err *e) {
    return TK_DISPATCH(c, tk_rnnt_joint_fwd_ref(t, L, H, f, g, drop, h, e),
                       tk_rnnt_joint_fwd_cuda(c, t, L, H, f, g, drop, h, e));
}

int tk_rnnt_joint_bwd(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                      const tk_dropout *drop, const void *dh, void *df, void *dg, tk_err *e) {
    return TK_DISPATCH(c, tk_rnnt_joint_bwd_ref(t, L, H, f, g, drop, dh, df, dg, e),
                       tk_rnnt_joint_bwd_cuda(c, t, L, H, f, g, drop, dh, df, dg, e));
}

int tk_rnnt_loss(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int V, int blank, const int *labels, const void *z,
                 float scale, double *acc, float *loss, float *costs, void *dz, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_rnnt_loss_ref(t, L, V, blank, labels, z, scale, acc, loss, costs, dz, e),
                       tk_rnnt_loss_cuda(c, t, L, V, blank, labels, z, scale, acc, loss, costs, dz, ws, e));
}
