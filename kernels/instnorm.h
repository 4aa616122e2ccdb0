// Instance normalization over channels-last volumes (torch.nn.InstanceNorm3d(C, affine=True), eps
// 1e-5, no running statistics: training and evaluation both normalize by the sample's own
// statistics), with the 3D U-Net block's ReLU fused. x is (N, S, C): N samples of S = D*H*W voxels
// (NDHWC), C channels. Per sample n and channel c over the S voxels:
//   mean = sum x / S,  var = sum (x - mean)^2 / S  (biased),  invstd = 1 / sqrt(var + eps)
//   scale = gamma[c] invstd,  shift = beta[c] - mean scale   (fp32)
//   y = act(x scale + shift)      act: ReLU (relu != 0; NaN passes, as torch.relu) or identity
// Backward, given dy and optionally dy2 added to it (a block output that is also a skip
// connection: its gradient from the next convolution and from the decoder's concatenation), with
// the ReLU's mask from the forward's output y (y > 0; y may be NULL without a ReLU):
//   dz = round_t((dy [+ dy2]) [* (y > 0)]),  xhat = (x - mean) invstd
//   sb[n,c] = sum_s dz,  sg[n,c] = sum_s dz xhat             (fp64 in the reference)
//   dbeta[c] = sum_n sb,  dgamma[c] = sum_n sg               (overwritten)
//   dx = gamma invstd (dz - sb / S - xhat sg / S)
// Types: x, y, dy, dy2, dx (N, S, C) in t (TK_F32, or TK_BF16: fp32 math, outputs rounded once);
// gamma, beta, dgamma, dbeta (C) fp32; save_mean, save_invstd (N, C) fp32, written by the forward
// for the backward. The reference sums in fp64 (two passes). The CUDA side runs kernels/bn.cu's
// training kernels on each sample's (S, C) slice (instnorm.cu): the S voxels split into G groups of
// rows (G a function of S and C only), fp32 partials per group shifted by the channel's first
// voxel against cancellation (var = E[(x - k)^2] - E[x - k]^2), the G partials added in fp64 in a
// fixed order: one read of x for the statistics, one read and one write for y; deterministic (no
// atomics). ws: tk_instnorm_ws_bytes (the reference needs none).
#ifndef TK_KERNELS_INSTNORM_H
#define TK_KERNELS_INSTNORM_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

#define TK_INSTNORM_EPS 1e-5f // torch.nn.InstanceNorm3d's default

size_t tk_instnorm_ws_bytes(tk_backend b, int N, int64_t S, int C);
int tk_instnorm_fwd(tk_ctx *c, tk_dtype t, const void *x, int N, int64_t S, int C, const float *gamma,
                    const float *beta, int relu, float eps, float *save_mean, float *save_invstd, void *y, void *ws,
                    tk_err *e);
// y: the forward's output when it had a ReLU, else NULL; dy2: NULL, or a second gradient of y.
int tk_instnorm_bwd(tk_ctx *c, tk_dtype t, const void *x, const void *y, const void *dy, const void *dy2, int N,
                    int64_t S, int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
                    float *dgamma, float *dbeta, void *ws, tk_err *e);

int tk_instnorm_fwd_ref(tk_dtype t, const void *x, int N, int64_t S, int C, const float *gamma, const float *beta,
                        int relu, float eps, float *save_mean, float *save_invstd, void *y, tk_err *e);
int tk_instnorm_bwd_ref(tk_dtype t, const void *x, const void *y, const void *dy, const void *dy2, int N, int64_t S,
                        int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
                        float *dgamma, float *dbeta, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_instnorm_ws_bytes_cuda(int N, int64_t S, int C);
int tk_instnorm_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int64_t S, int C, const float *gamma,
                         const float *beta, int relu, float eps, float *save_mean, float *save_invstd, void *y,
                         void *ws, tk_err *e);
int tk_instnorm_bwd_cuda(tk_ctx *c, tk_dtype t, const void *x, const void *y, const void *dy, const void *dy2, int N,
                         int64_t S, int C, const float *gamma, const float *save_mean, const float *save_invstd,
                         void *dx, float *dgamma, float *dbeta, void *ws, tk_err *e);
#endif

static inline int tk_instnorm_check(tk_dtype t, int N, int64_t S, int C, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "instnorm: tensors in %s", tk_dtype_name(t));
    if (N < 1 || S < 1 || C < 1 || (double)N * (double)S * (double)C > 9.0e18)
        return tk_err_set(e, TK_EINTERNAL, "instnorm: bad shape N %d S %lld C %d", N, (long long)S, C);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
