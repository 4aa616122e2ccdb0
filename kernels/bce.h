// Binary cross-entropy with logits, forward and backward in one op, mean over the batch:
//   loss = mean_b [ max(z,0) - z*y + log(1 + exp(-|z|)) ]      (the numerically stable form)
//   dz_b = (sigmoid(z_b) - y_b) / B
// The batch loss is ADDED to a device-side accumulator so the training loop never reads it:
//   acc[0] += loss (fp64), acc[1] += 1.  The host reads acc only at log points, then zeroes it.
// A NaN/Inf logit makes acc[0] NaN/Inf, which is how train-step detects numerical failure.
#ifndef TK_KERNELS_BCE_H
#define TK_KERNELS_BCE_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

// logit (B) f32; label (B) u8 (0 or 1); dlogit (B) f32 out (may be NULL: loss only);
// acc (2) f64 device accumulator (may be NULL: gradient only).
int tk_bce_logits(tk_ctx *c, const float *logit, const uint8_t *label, int B, float *dlogit,
                  double *acc, tk_err *e);
int tk_bce_logits_ref(const float *logit, const uint8_t *label, int B, float *dlogit, double *acc,
                      tk_err *e);
// The same with logit and dlogit in lt (TK_F32 or TK_BF16: the cuda backend's bf16 compute
// path); the loss and the math stay fp64 as above, dlogit is rounded to lt. The reference
// widens bf16 logits to f32, runs the f32 reference and rounds dlogit.
int tk_bce_logits_act(tk_ctx *c, tk_dtype lt, const void *logit, const uint8_t *label, int B, void *dlogit,
                      double *acc, tk_err *e);
int tk_bce_logits_act_ref(tk_dtype lt, const void *logit, const uint8_t *label, int B, void *dlogit,
                          double *acc, tk_err *e);
// The same over B samples that are this rank's share of a global batch of N >= B samples (data
// parallel training): dz_b = (sigmoid(z_b) - y_b) / N and acc[0] += (sum of the B losses) / N,
// so the gradients of the ranks add up (a plain sum) to those of the whole batch, and so do
// their acc[0]. N == B is tk_bce_logits_act.
int tk_bce_logits_act_n(tk_ctx *c, tk_dtype lt, const void *logit, const uint8_t *label, int B, int N,
                        void *dlogit, double *acc, tk_err *e);
int tk_bce_logits_act_n_ref(tk_dtype lt, const void *logit, const uint8_t *label, int B, int N, void *dlogit,
                            double *acc, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_bce_logits_act_n_cuda(tk_ctx *c, tk_dtype lt, const void *logit, const uint8_t *label, int B, int N,
                             void *dlogit, double *acc, tk_err *e);
int tk_bce_logits_act_cuda(tk_ctx *c, tk_dtype lt, const void *logit, const uint8_t *label, int B,
                           void *dlogit, double *acc, tk_err *e);
int tk_bce_logits_cuda(tk_ctx *c, const float *logit, const uint8_t *label, int B, float *dlogit,
                       double *acc, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
