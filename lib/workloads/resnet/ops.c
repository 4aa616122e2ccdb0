// Dispatch of ResNet's ops (kernels/{conv,bn,pool,xent_smooth,img_norm,stem_s2d,stem_conv}.h): the cpu backend runs the
// reference, the cuda backend the kernel, or cuDNN for the convolutions (lib/gpu/dispatch.h).
#include "bn.h"
#include "conv.h"
#include "gpu/cudnn_conv.h"
#include "gpu/dispatch.h"
#include "img_norm.h"
#include "pool.h"
#include "stem_conv.h"
#include "stem_s2d.h"
#include "xent_smooth.h"

int tk_conv(tk_ctx *c, struct tk_cudnn *dnn, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, const void *a,
            const void *b, void *out, tk_err *e) {
    (void)dnn;
    return TK_DISPATCH(c, tk_conv_ref(pass, s, t, a, b, out, e), tk_cudnn_conv(dnn, pass, s, t, a, b, out, e));
}

size_t tk_bn_ws_bytes(tk_backend b, int64_t M, int C) {
#ifdef TK_HAVE_CUDA
    if (b == TK_BACKEND_CUDA) return tk_bn_ws_bytes_cuda(M, C);
#endif
    (void)b, (void)M, (void)C;
    return 0;
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

int tk_maxpool_fwd(tk_ctx *c, tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad,
                   void *y, uint8_t *idx, tk_err *e) {
    return TK_DISPATCH(c, tk_maxpool_fwd_ref(t, x, N, H, W, C, R, stride, pad, y, idx, e),
                       tk_maxpool_fwd_cuda(c, t, x, N, H, W, C, R, stride, pad, y, idx, e));
}

int tk_maxpool_bn_fwd(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R,
                      int stride, int pad, void *y, uint8_t *idx, tk_err *e) {
    return TK_DISPATCH(c, tk_maxpool_bn_fwd_ref(t, x, bn, N, H, W, C, R, stride, pad, y, idx, e),
                       tk_maxpool_bn_fwd_cuda(c, t, x, bn, N, H, W, C, R, stride, pad, y, idx, e));
}

int tk_maxpool_bwd(tk_ctx *c, tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H, int W,
                   int C, int R, int stride, int pad, void *dx, tk_err *e) {
    return TK_DISPATCH(c, tk_maxpool_bwd_ref(t, dy, dy2, idx, N, H, W, C, R, stride, pad, dx, e),
                       tk_maxpool_bwd_cuda(c, t, dy, dy2, idx, N, H, W, C, R, stride, pad, dx, e));
}

int tk_avgpool_fwd(tk_ctx *c, tk_dtype t, const void *x, int N, int HW, int C, void *y, tk_err *e) {
    return TK_DISPATCH(c, tk_avgpool_fwd_ref(t, x, N, HW, C, y, e), tk_avgpool_fwd_cuda(c, t, x, N, HW, C, y, e));
}

int tk_avgpool_bwd(tk_ctx *c, tk_dtype t, const void *dy, int N, int HW, int C, void *dx, tk_err *e) {
    return TK_DISPATCH(c, tk_avgpool_bwd_ref(t, dy, N, HW, C, dx, e), tk_avgpool_bwd_cuda(c, t, dy, N, HW, C, dx, e));
}

size_t tk_xent_smooth_ws_bytes(tk_backend b, int B) {
#ifdef TK_HAVE_CUDA
    if (b == TK_BACKEND_CUDA) return tk_xent_smooth_ws_bytes_cuda(B);
#endif
    (void)b, (void)B;
    return 0;
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

int tk_img_normalize(tk_ctx *c, const uint8_t *src, int64_t npix, tk_img_norm n, tk_dtype t, void *dst, int cin,
                     tk_err *e) {
    return TK_DISPATCH(c, tk_img_normalize_ref(src, npix, n, t, dst, cin, e),
                       tk_img_normalize_cuda(c, src, npix, n, t, dst, cin, e));
}

int tk_stem_s2d_input(tk_ctx *c, const uint8_t *src, int N, int S, tk_img_norm n, tk_dtype t, void *xs, tk_err *e) {
    return TK_DISPATCH(c, tk_stem_s2d_input_ref(src, N, S, n, t, xs, e), tk_stem_s2d_input_cuda(c, src, N, S, n, t, xs, e));
}

int tk_stem_s2d_weight(tk_ctx *c, const float *w, int K, tk_dtype t, void *ws, tk_err *e) {
    return TK_DISPATCH(c, tk_stem_s2d_weight_ref(w, K, t, ws, e), tk_stem_s2d_weight_cuda(c, w, K, t, ws, e));
}

int tk_stem_s2d_wgrad(tk_ctx *c, const void *dws, int K, tk_dtype t, float *dw, tk_err *e) {
    return TK_DISPATCH(c, tk_stem_s2d_wgrad_ref(dws, K, t, dw, e), tk_stem_s2d_wgrad_cuda(c, dws, K, t, dw, e));
}

int tk_stem_conv_fwd(tk_ctx *c, const void *xs, int N, int S, const void *ws, int K, tk_dtype t, void *y, tk_err *e) {
    if (c->backend == TK_BACKEND_CUDA && !tk_stem_conv_ok(t, S, K))
        return tk_err_set(e, TK_EINTERNAL, "stem_conv: the kernel does not run %s S %d K %d", tk_dtype_name(t), S, K);
    return TK_DISPATCH(c, tk_stem_conv_fwd_ref(xs, N, S, ws, K, t, y, e), tk_stem_conv_fwd_cuda(c, xs, N, S, ws, K, y, e));
}
