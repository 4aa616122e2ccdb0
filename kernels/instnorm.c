// Dispatch of kernels/instnorm.h (kernels/dispatch.h): the cpu backend runs the reference
// (instnorm_ref.c), the cuda backend the kernels (instnorm.cu).
#include "dispatch.h"
#include "instnorm.h"

size_t tk_instnorm_ws_bytes(tk_backend b, int N, int64_t S, int C) {
    (void)N, (void)S, (void)C; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_instnorm_ws_bytes_cuda(N, S, C));
}

int tk_instnorm_fwd(tk_ctx *c, tk_dtype t, const void *x, int N, int64_t S, int C, const float *gamma,
                    const float *beta, int relu, float eps, float *save_mean, float *save_invstd, void *y, void *ws,
                    tk_err *e) {
    (void)ws;
    return TK_DISPATCH(
        c, tk_instnorm_fwd_ref(t, x, N, S, C, gamma, beta, relu, eps, save_mean, save_invstd, y, e),
        tk_instnorm_fwd_cuda(c, t, x, N, S, C, gamma, beta, relu, eps, save_mean, save_invstd, y, ws, e));
}

int tk_instnorm_bwd(tk_ctx *c, tk_dtype t, const void *x, const void *y, const void *dy, const void *dy2, int N,
                    int64_t S, int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
                    float *dgamma, float *dbeta, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(
        c, tk_instnorm_bwd_ref(t, x, y, dy, dy2, N, S, C, gamma, save_mean, save_invstd, dx, dgamma, dbeta, e),
        tk_instnorm_bwd_cuda(c, t, x, y, dy, dy2, N, S, C, gamma, save_mean, save_invstd, dx, dgamma, dbeta, ws, e));
}
