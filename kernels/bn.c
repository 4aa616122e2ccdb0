// Dispatch of kernels/bn.h (kernels/dispatch.h): the cpu backend runs the reference
// (bn_ref.c), the cuda backend the kernel (bn.cu).
#include "bn.h"
#include "dispatch.h"

size_t tk_bn_ws_bytes(tk_backend b, int64_t M, int C) {
    (void)M, (void)C; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_bn_ws_bytes_cuda(M, C));
}

int tk_bn_fwd_train_mask(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                         const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                         float *save_mean, float *save_invstd, void *y, uint8_t *mask, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c,
                       tk_bn_fwd_train_mask_ref(t, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var,
                                                save_mean, save_invstd, y, mask, e),
                       tk_bn_fwd_train_cuda(c, t, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var,
                                            save_mean, save_invstd, y, mask, ws, e));
}

int tk_bn_fwd_train_res_bn(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma,
                           const float *beta, const void *res, tk_bn_saved res_bn, int relu, float eps, float momentum,
                           float *run_mean, float *run_var, float *save_mean, float *save_invstd, void *y,
                           uint8_t *mask, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c,
                       tk_bn_fwd_train_res_bn_ref(t, x, M, C, gamma, beta, res, res_bn, relu, eps, momentum, run_mean,
                                                  run_var, save_mean, save_invstd, y, mask, e),
                       tk_bn_fwd_train_res_bn_cuda(c, t, x, M, C, gamma, beta, res, res_bn, relu, eps, momentum,
                                                   run_mean, run_var, save_mean, save_invstd, y, mask, ws, e));
}

int tk_bn_fwd_train(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                    const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                    float *save_mean, float *save_invstd, void *y, void *ws, tk_err *e) {
    return tk_bn_fwd_train_mask(c, t, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var, save_mean,
                                save_invstd, y, NULL, ws, e);
}

int tk_bn_mask_ok(tk_backend b, tk_dtype t, int C) {
#ifdef TK_HAVE_CUDA
    if (b == TK_BACKEND_CUDA) return tk_bn_mask_ok_cuda(t, C);
#endif
    (void)t, (void)C;
    return b == TK_BACKEND_CPU;
}

int tk_bn_fwd_train_sums(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *sum, const float *sqsum,
                         const float *gamma, const float *beta, const void *res, int relu, float eps, float momentum,
                         float *run_mean, float *run_var, float *save_mean, float *save_invstd, void *y, void *ws,
                         tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c,
                       tk_bn_fwd_train_sums_ref(t, x, M, C, sum, sqsum, gamma, beta, res, relu, eps, momentum, run_mean,
                                                run_var, save_mean, save_invstd, y, e),
                       tk_bn_fwd_train_sums_cuda(c, t, x, M, C, sum, sqsum, gamma, beta, res, relu, eps, momentum,
                                                 run_mean, run_var, save_mean, save_invstd, y, ws, e));
}

int tk_bn_fwd_eval(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                   const void *res, int relu, float eps, const float *run_mean, const float *run_var, void *y,
                   tk_err *e) {
    return TK_DISPATCH(c, tk_bn_fwd_eval_ref(t, x, M, C, gamma, beta, res, relu, eps, run_mean, run_var, y, e),
                       tk_bn_fwd_eval_cuda(c, t, x, M, C, gamma, beta, res, relu, eps, run_mean, run_var, y, e));
}

int tk_bn_bwd(tk_ctx *c, tk_dtype t, const void *x, const void *y, const float *beta, const void *dy, const void *dy2,
              int64_t M, int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
              void *dz_out, float *dgamma, float *dbeta, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c,
                       tk_bn_bwd_ref(t, x, y, beta, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out, dgamma,
                                     dbeta, e),
                       tk_bn_bwd_cuda(c, t, x, y, NULL, beta, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out,
                                      dgamma, dbeta, ws, e));
}

int tk_bn_bwd_mask(tk_ctx *c, tk_dtype t, const void *x, const uint8_t *mask, const void *dy, const void *dy2, int64_t M,
                   int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx, void *dz_out,
                   float *dgamma, float *dbeta, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c,
                       tk_bn_bwd_mask_ref(t, x, mask, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out, dgamma,
                                          dbeta, e),
                       tk_bn_bwd_cuda(c, t, x, NULL, mask, NULL, dy, dy2, M, C, gamma, save_mean, save_invstd, dx,
                                      dz_out, dgamma, dbeta, ws, e));
}
