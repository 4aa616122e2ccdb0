// Batch normalization over channels-last activations (NHWC seen as M = N*H*W rows of C channels),
// as torch.nn.BatchNorm2d computes it, with the residual add and the ReLU of a ResNet block fused:
//
// Training forward, per channel c over the M rows (batch statistics):
//   mean = sum x / M,  var = sum (x - mean)^2 / M  (biased),  invstd = 1 / sqrt(var + eps)
//   running_mean = (1 - momentum) running_mean + momentum mean
//   running_var  = (1 - momentum) running_var  + momentum var M / (M - 1)   (unbiased; M = 1: var)
//   scale = gamma invstd,  shift = beta - mean scale   (fp32)
//   y = act(x scale + shift [+ res])     act: ReLU or identity
// Eval forward: the same y with the running statistics (nothing updated).
// Backward (training statistics), given the output's gradient dy and, optionally, dy2 added to it
// (the block's shortcut gradient), and, when the forward had a ReLU, its mask: from its output y,
// or, for a forward without a residual, recomputed from x (y NULL, beta given): the training
// forward's own fp32 scale = gamma invstd and shift = beta - mean scale (save_mean, save_invstd),
// so round_t(x scale + shift) > 0 is exactly y > 0, and y need not be read:
//   dz = round_t((dy [+ dy2]) [* mask])              the gradient at x scale + shift (+ res)
//   xhat = (x - mean) invstd
//   dbeta = sum dz,  dgamma = sum dz xhat           (fp64 sums)
//   dx = gamma invstd (dz - dbeta / M - xhat dgamma / M)
// dz is also the residual input's gradient: written out when dz_out is not NULL.
// Types: x, y, res, dy, dy2, dx, dz_out (M, C) in t (TK_F32; TK_BF16 on cuda: fp32 math, outputs
// rounded); gamma, beta, running and saved statistics, dgamma, dbeta (C) fp32. The statistics'
// sums are fp64 in the reference; the CUDA kernels add fp32 partial sums of rows (shifted by each
// channel's first value, against cancellation) in a fixed order and finish in fp64, so results are
// deterministic. ws: tk_bn_ws_bytes (the reference needs none).
#ifndef TK_KERNELS_BN_H
#define TK_KERNELS_BN_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

size_t tk_bn_ws_bytes(tk_backend b, int64_t M, int C);

// A BN's parameters and its training forward's saved statistics (C each, fp32; device memory on
// cuda), for a kernel that applies it itself: round_t(x scale + shift), scale = gamma invstd,
// shift = beta - mean scale (fp32, as the training forward computes them).
typedef struct tk_bn_saved {
    const float *gamma, *beta, *mean, *invstd;
} tk_bn_saved;

// save_mean, save_invstd (C): the batch statistics the backward needs. y NULL: the statistics and
// the running update only (a consumer applies BN itself: kernels/pool.h tk_maxpool_bn_fwd).
int tk_bn_fwd_train(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                    const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                    float *save_mean, float *save_invstd, void *y, void *ws, tk_err *e);
int tk_bn_fwd_eval(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                   const void *res, int relu, float eps, const float *run_mean, const float *run_var, void *y,
                   tk_err *e);
// The training forward from per-channel sums made elsewhere (the convolution's epilogue:
// lib/gpu/cudnn_conv.h tk_cudnn_conv_fwd_stats): sum[c] = sum over the rows of x, sqsum[c] = of x^2
// (fp32, C each; device memory on cuda). mean = sum / M, var = max(sqsum / M - mean^2, 0) in fp64
// from the fp32 sums, then the running update, save_*, and y as tk_bn_fwd_train. One pass over x
// instead of two; the variance is the one-pass formula's, so it loses precision when a channel's
// |mean| is large against its standard deviation (not so for convolution outputs; NVIDIA's MLPerf
// ResNet computes it the same way).
int tk_bn_fwd_train_sums(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *sum, const float *sqsum,
                         const float *gamma, const float *beta, const void *res, int relu, float eps, float momentum,
                         float *run_mean, float *run_var, float *save_mean, float *save_invstd, void *y, void *ws,
                         tk_err *e);
// The residual as another BN's output that was never written (ResNet's projection shortcut): the
// forward of tk_bn_fwd_train_mask with res replaced by round_t(res scale_r + shift_r) from res_bn
// (that BN's statistics alone made by tk_bn_fwd_train with y NULL), so its output need not be
// written or read: y = act(x scale + shift + round_t(res scale_r + shift_r)).
int tk_bn_fwd_train_res_bn(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma,
                           const float *beta, const void *res, tk_bn_saved res_bn, int relu, float eps, float momentum,
                           float *run_mean, float *run_var, float *save_mean, float *save_invstd, void *y,
                           uint8_t *mask, void *ws, tk_err *e);
int tk_bn_fwd_train_res_bn_ref(tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                               const void *res, tk_bn_saved res_bn, int relu, float eps, float momentum,
                               float *run_mean, float *run_var, float *save_mean, float *save_invstd, void *y,
                               uint8_t *mask, tk_err *e);
// The ReLU's mask as bits, for a backward that would otherwise read y (a ReLU after a residual add):
// tk_bn_fwd_train_mask also writes mask (M C / 8 bytes): bit i % 8 of byte i / 8 set where
// y[i] > 0 (i = m C + c), and tk_bn_bwd_mask reads it instead of y: 1/16 of y's bytes in bf16.
// The cuda kernels write it for bf16 with C % 8 == 0 (tk_bn_mask_ok; TK_EINTERNAL otherwise).
int tk_bn_mask_ok(tk_backend b, tk_dtype t, int C);
int tk_bn_fwd_train_mask(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                         const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                         float *save_mean, float *save_invstd, void *y, uint8_t *mask, void *ws, tk_err *e);
int tk_bn_bwd_mask(tk_ctx *c, tk_dtype t, const void *x, const uint8_t *mask, const void *dy, const void *dy2, int64_t M,
                   int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx, void *dz_out,
                   float *dgamma, float *dbeta, void *ws, tk_err *e);
// y: the forward's output when it had a ReLU, else NULL; beta: non-NULL (with y NULL) when the
// forward had a ReLU and no residual (the mask from x). dgamma, dbeta are overwritten.
int tk_bn_bwd(tk_ctx *c, tk_dtype t, const void *x, const void *y, const float *beta, const void *dy, const void *dy2,
              int64_t M, int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
              void *dz_out, float *dgamma, float *dbeta, void *ws, tk_err *e);

int tk_bn_fwd_train_ref(tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                        const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                        float *save_mean, float *save_invstd, void *y, tk_err *e);
int tk_bn_fwd_train_sums_ref(tk_dtype t, const void *x, int64_t M, int C, const float *sum, const float *sqsum,
                             const float *gamma, const float *beta, const void *res, int relu, float eps,
                             float momentum, float *run_mean, float *run_var, float *save_mean, float *save_invstd,
                             void *y, tk_err *e);
int tk_bn_fwd_train_mask_ref(tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                             const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                             float *save_mean, float *save_invstd, void *y, uint8_t *mask, tk_err *e);
int tk_bn_bwd_mask_ref(tk_dtype t, const void *x, const uint8_t *mask, const void *dy, const void *dy2, int64_t M,
                       int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
                       void *dz_out, float *dgamma, float *dbeta, tk_err *e);
int tk_bn_fwd_eval_ref(tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                       const void *res, int relu, float eps, const float *run_mean, const float *run_var, void *y,
                       tk_err *e);
int tk_bn_bwd_ref(tk_dtype t, const void *x, const void *y, const float *beta, const void *dy, const void *dy2,
                  int64_t M, int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
                  void *dz_out, float *dgamma, float *dbeta, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_bn_ws_bytes_cuda(int64_t M, int C);
int tk_bn_fwd_train_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                         const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                         float *save_mean, float *save_invstd, void *y, uint8_t *mask, void *ws, tk_err *e);
int tk_bn_fwd_train_res_bn_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma,
                                const float *beta, const void *res, tk_bn_saved res_bn, int relu, float eps,
                                float momentum, float *run_mean, float *run_var, float *save_mean, float *save_invstd,
                                void *y, uint8_t *mask, void *ws, tk_err *e);
int tk_bn_mask_ok_cuda(tk_dtype t, int C);
int tk_bn_fwd_train_sums_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *sum,
                              const float *sqsum, const float *gamma, const float *beta, const void *res, int relu,
                              float eps, float momentum, float *run_mean, float *run_var, float *save_mean,
                              float *save_invstd, void *y, void *ws, tk_err *e);
int tk_bn_fwd_eval_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                        const void *res, int relu, float eps, const float *run_mean, const float *run_var, void *y,
                        tk_err *e);
int tk_bn_bwd_cuda(tk_ctx *c, tk_dtype t, const void *x, const void *y, const uint8_t *mask, const float *beta,
                   const void *dy, const void *dy2, int64_t M, int C, const float *gamma, const float *save_mean,
                   const float *save_invstd, void *dx, void *dz_out, float *dgamma, float *dbeta, void *ws, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
