// An exponential moving average of the flat fp32 master weights, for evaluation (MLPerf RNN-T's
// "model_eval_ema_factor"): after each optimizer update
//   ema[i] = d * ema[i] + c * w[i],   d = (float)decay, c = (float)(1 - decay)
// with each product and the sum rounded to fp32 (no fused multiply-add). This is the reference's
// apply_ema (mlcommons/training rnn_speech_recognition/pytorch train.py: v.copy_(decay * v +
// (1 - decay) * sd[k]) on fp32 tensors, PyTorch taking the Python scalars as fp32, 1 - decay
// computed in double first), run after every optimizer.step() from the first, with no warm-up of
// the decay; the average starts as a copy of the initial weights (copy.deepcopy of the model).
// The decay is a kernel argument, so the update is capturable in a CUDA graph (no host read).
// tk_ema_swap exchanges the two buffers element by element, so evaluation can run on the average
// and a second swap puts the trained weights back bit for bit.
#ifndef TK_KERNELS_EMA_H
#define TK_KERNELS_EMA_H

#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

// The two fp32 factors every backend uses for decay (in [0, 1]).
static inline void tk_ema_factors(double decay, float *d, float *c) {
    *d = (float)decay;
    *c = (float)(1.0 - decay);
}

// ema, w (n) f32 in the backend's memory; decay in [0, 1].
int tk_ema_update(tk_ctx *c, float *ema, const float *w, size_t n, double decay, tk_err *e);
int tk_ema_update_ref(float *ema, const float *w, size_t n, double decay, tk_err *e);
// ema[i] <-> w[i] for i < n.
int tk_ema_swap(tk_ctx *c, float *ema, float *w, size_t n, tk_err *e);
int tk_ema_swap_ref(float *ema, float *w, size_t n, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_ema_update_cuda(tk_ctx *c, float *ema, const float *w, size_t n, double decay, tk_err *e);
int tk_ema_swap_cuda(tk_ctx *c, float *ema, float *w, size_t n, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
