// Dispatch of kernels/conv3d_bias.h (kernels/dispatch.h): the cpu backend runs the reference
// (conv3d_bias_ref.c), the cuda backend the kernels (conv3d_bias.cu).
#include "conv3d_bias.h"
#include "dispatch.h"

size_t tk_conv3d_bias_ws_bytes(tk_backend b, int64_t M, int K) {
    (void)M, (void)K; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_conv3d_bias_ws_bytes_cuda(M, K));
}

int tk_conv3d_bias_fwd(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, tk_err *e) {
    return TK_DISPATCH(c, tk_conv3d_bias_fwd_ref(t, y, M, K, b, e), tk_conv3d_bias_fwd_cuda(c, t, y, M, K, b, e));
}

int tk_conv3d_bias_bwd(tk_ctx *c, tk_dtype t, const void *dy, int64_t M, int K, float *db, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_conv3d_bias_bwd_ref(t, dy, M, K, db, e),
                       tk_conv3d_bias_bwd_cuda(c, t, dy, M, K, db, ws, e));
}
