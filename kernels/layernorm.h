// LayerNorm over the last dimension, fused with the residual add and the dropout around it, as
// BERT uses it (post-LN: y = LN(x + dropout(sublayer(x))); the embeddings: y = dropout(LN(sum))).
// Rows r < R of H features; activations in act (TK_F32, or TK_BF16 on cuda), gamma, beta, the
// saved statistics and the parameter gradients in fp32. Element (r, h) is dropout element
// drop->offset + r H + h (kernels/dropout.h).
//
// Forward:  s = res + drop(x)       (TK_LN_DROP_PRE; res may be NULL: s = drop(x))
//           s = res + x             (otherwise)
//           y = (s - mean) rstd gamma + beta,  mean and var over h, rstd = 1 / sqrt(var + eps)
//           y = drop(y)             (TK_LN_DROP_POST)
// The reference sums in fp64 (mean first, then the centered squares); the cuda kernel in fp32 with
// the same two passes. s, mean and rstd are saved for the backward (s in act; NULL: not saved).
//
// Backward, from dy (the gradient of the output y, after the post dropout):
//   g = drop(dy) (POST) or dy;  xhat = (s - mean) rstd
//   ds = rstd (g gamma - mean_h(g gamma) - xhat mean_h(g gamma xhat))   (the residual's gradient)
//   dx = drop(ds) (PRE; the gradient of x; may be NULL when x's gradient is not wanted)
//   dgamma = sum_r g xhat,  dbeta = sum_r g   (written, not accumulated; fp64 sums in a fixed order)
// ds may be the same buffer as dy.
#ifndef TK_KERNELS_LAYERNORM_H
#define TK_KERNELS_LAYERNORM_H

#ifdef __cplusplus
extern "C" {
#endif
#include "dropout.h"
#include "gpu/gpu.h"

enum { TK_LN_DROP_NONE = 0, TK_LN_DROP_PRE = 1, TK_LN_DROP_POST = 2 };

// x, res, y, s (R, H) act; gamma, beta (H) f32; mean, rstd (R) f32; drop may be NULL (no dropout).
int tk_layernorm_fwd(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *x, const void *res,
                     const tk_dropout *drop, int where, const float *gamma, const float *beta, float eps, void *y,
                     void *s, float *mean, float *rstd, tk_err *e);
int tk_layernorm_fwd_ref(tk_dtype act, int64_t R, int H, const void *x, const void *res, const tk_dropout *drop,
                         int where, const float *gamma, const float *beta, float eps, void *y, void *s, float *mean,
                         float *rstd, tk_err *e);
// Workspace of the backward (bytes of the backend's memory).
size_t tk_layernorm_bwd_ws_bytes(tk_backend b, int64_t R, int H);
int tk_layernorm_bwd(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *dy, const void *s, const float *mean,
                     const float *rstd, const float *gamma, const tk_dropout *drop, int where, void *ds, void *dx,
                     float *dgamma, float *dbeta, void *ws, tk_err *e);
int tk_layernorm_bwd_ref(tk_dtype act, int64_t R, int H, const void *dy, const void *s, const float *mean,
                         const float *rstd, const float *gamma, const tk_dropout *drop, int where, void *ds, void *dx,
                         float *dgamma, float *dbeta, void *ws, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_layernorm_fwd_cuda(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *x, const void *res,
                          const tk_dropout *drop, int where, const float *gamma, const float *beta, float eps, void *y,
                          void *s, float *mean, float *rstd, tk_err *e);
size_t tk_layernorm_bwd_ws_bytes_cuda(int64_t R, int H);
int tk_layernorm_bwd_cuda(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *dy, const void *s, const float *mean,
                          const float *rstd, const float *gamma, const tk_dropout *drop, int where, void *ds, void *dx,
                          float *dgamma, float *dbeta, void *ws, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
