// Dispatch of kernels/layernorm.h (kernels/dispatch.h): the cpu backend runs the reference
// (layernorm_ref.c), the cuda backend the kernel (layernorm.cu).
#include "dispatch.h"
#include "layernorm.h"

size_t tk_layernorm_bwd_ws_bytes(tk_backend b, int64_t R, int H) {
    (void)R, (void)H; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_layernorm_bwd_ws_bytes_cuda(R, H));
}

int tk_layernorm_fwd(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *x, const void *res,
                     const tk_dropout *drop, int where, const float *gamma, const float *beta, float eps, void *y,
                     void *s, float *mean, float *rstd, tk_err *e) {
    return TK_DISPATCH(
        c, tk_layernorm_fwd_ref(act, R, H, x, res, drop, where, gamma, beta, eps, y, s, mean, rstd, e),
        tk_layernorm_fwd_cuda(c, act, R, H, x, res, drop, where, gamma, beta, eps, y, s, mean, rstd, e));
}

int tk_layernorm_bwd(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *dy, const void *s, const float *mean,
                     const float *rstd, const float *gamma, const tk_dropout *drop, int where, void *ds, void *dx,
                     float *dgamma, float *dbeta, void *ws, tk_err *e) {
    return TK_DISPATCH(
        c, tk_layernorm_bwd_ref(act, R, H, dy, s, mean, rstd, gamma, drop, where, ds, dx, dgamma, dbeta, ws, e),
        tk_layernorm_bwd_cuda(c, act, R, H, dy, s, mean, rstd, gamma, drop, where, ds, dx, dgamma, dbeta, ws, e));
}
