// The backward of ResNet's stem from the max pool's output gradient to the stem convolution's
// output gradient, in two passes that never write the pool's input gradient: what
//   tk_maxpool_bwd (dy [+ dy2] to the window maxima named by idx, kernels/pool.h), then
//   tk_bn_bwd with the ReLU's mask from x (kernels/bn.h: y NULL, beta given)
// compute, with the backward's statistics taken at the pool's outputs: a pool output's gradient
// reaches exactly one input (its window's maximum), so
//   dbeta  = sum over inputs of dz = sum over pool outputs of dz_w,
//   dgamma = sum over inputs of dz xhat = sum over pool outputs of dz_w xhat(x at the maximum),
//   dz_w = round_t(dy [+ dy2]) where the ReLU passed the maximum (round_t(x scale + shift) > 0), else 0
// (one pass over the pool's outputs, 1/4 of the input's size, gathering x at each maximum), then
// one pass over the inputs: dz gathered from the windows as tk_maxpool_bwd does, masked, and dx as
// tk_bn_bwd's formula (dz - dbeta / M - xhat dgamma / M) gamma invstd, M = N H W. The sums differ
// from the two-op path only in order and in where dz is rounded (per window instead of per input:
// an input that is the maximum of two windows). x: the stem convolution's output (N, H, W, C),
// which tk_maxpool_bn_fwd pooled through bn (its gamma, beta and saved statistics); dy, dy2 (N, P,
// Q, C); idx the forward's; dx (N, H, W, C) in t; dgamma, dbeta (C) fp32, overwritten. ws:
// tk_maxpool_bn_bwd_ws_bytes. The cpu backend runs pool_bn_ref.c: the two ops in sequence.
#ifndef TK_KERNELS_POOL_BN_H
#define TK_KERNELS_POOL_BN_H

#ifdef __cplusplus
extern "C" {
#endif
#include "pool.h"

size_t tk_maxpool_bn_bwd_ws_bytes(tk_backend b, int C);
int tk_maxpool_bn_bwd(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, const void *dy, const void *dy2,
                      const uint8_t *idx, int N, int H, int W, int C, int R, int stride, int pad, void *dx,
                      float *dgamma, float *dbeta, void *ws, tk_err *e);
int tk_maxpool_bn_bwd_ref(tk_dtype t, const void *x, tk_pool_bn bn, const void *dy, const void *dy2,
                          const uint8_t *idx, int N, int H, int W, int C, int R, int stride, int pad, void *dx,
                          float *dgamma, float *dbeta, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_maxpool_bn_bwd_ws_bytes_cuda(int C);
int tk_maxpool_bn_bwd_cuda(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, const void *dy, const void *dy2,
                           const uint8_t *idx, int N, int H, int W, int C, int R, int stride, int pad, void *dx,
                           float *dgamma, float *dbeta, void *ws, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
