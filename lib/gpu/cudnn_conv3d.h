// 3-D convolutions on the cuda backend through cuDNN 9's graph API: forward, backward data and
// backward filter of kernels/conv3d.h (NDHWC activations, KTRSC filters, fp32 or bf16 with fp32
// accumulation). They share the 2-D convolutions' handle, plan cache, autotuning and workspace
// (cudnn_conv.h; lib/gpu/cudnn_conv.cu builds 5-D tensor descriptors and a convolution of three
// spatial dimensions for these shapes): tk_cudnn_plan3d makes each (pass, shape, type) plan once,
// before any capture, and tk_cudnn_conv3d runs it on the compute stream (no allocation, no sync:
// capturable). The transposed convolution (the 3D U-Net's 2x2x2 upsampling) is the backward data
// pass of the strided convolution it inverts (tk_conv3d_shape_transposed, kernels/conv3d.h).
#ifndef TK_GPU_CUDNN_CONV3D_H
#define TK_GPU_CUDNN_CONV3D_H

#include <stdint.h>

#include "gpu/conv_shape.h" // tk_conv_pass
#include "gpu/cudnn_conv.h"

#ifdef __cplusplus
extern "C" {
#endif

// A 3-D convolution: input x (N, D, H, W, C), filters w (K, T, R, S, C), output y (N, Z, P, Q, K);
// the same stride and padding in the three spatial dimensions, dilation 1, one group.
// tk_conv3d_shape_init (kernels/conv3d.h) fills Z, P, Q.
typedef struct tk_conv3d_shape {
    int N, D, H, W, C; // input
    int K, T, R, S;    // filters
    int stride, pad;
    int Z, P, Q; // output
} tk_conv3d_shape;

// Elements of x, y and w.
static inline int64_t tk_conv3d_x_numel(const tk_conv3d_shape *s) { return (int64_t)s->N * s->D * s->H * s->W * s->C; }
static inline int64_t tk_conv3d_y_numel(const tk_conv3d_shape *s) { return (int64_t)s->N * s->Z * s->P * s->Q * s->K; }
static inline int64_t tk_conv3d_w_numel(const tk_conv3d_shape *s) { return (int64_t)s->K * s->T * s->R * s->S * s->C; }

#ifdef TK_HAVE_CUDA // (lib/gpu/cudnn_conv.cu; without CUDA the stubs below)
// Makes (or finds) the plan of a pass for a shape and type (not while capturing); then runs it:
// kernels/conv3d.h's a, b, out (TK_EINTERNAL when the shape was not planned). Plan time, engine
// and workspace: tk_cudnn_nplans / tk_cudnn_plan_desc, tk_cudnn_ws_bytes as for the 2-D passes.
int tk_cudnn_plan3d(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, tk_err *e);
int tk_cudnn_conv3d(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a, const void *b,
                    void *out, tk_err *e);
// The autotuning's time (ms) of a planned pass, or -1 when it was not timed or not planned.
float tk_cudnn_plan3d_ms(const tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t);
#else
static inline int tk_cudnn_plan3d(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, tk_err *e) {
    (void)h, (void)pass, (void)s, (void)t;
    return tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
}
static inline int tk_cudnn_conv3d(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a,
                                  const void *b, void *out, tk_err *e) {
    (void)h, (void)pass, (void)s, (void)t, (void)a, (void)b, (void)out;
    return tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
}
static inline float tk_cudnn_plan3d_ms(const tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t) {
    return (void)h, (void)pass, (void)s, (void)t, -1.0f;
}
#endif

#ifdef __cplusplus
}
#endif
#endif
