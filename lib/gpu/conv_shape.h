// The shape of a 2-D convolution and its three passes (kernels/conv.h gives the layouts and the
// math): shared by the op (kernels/conv.h, conv_ref.c) and the cuDNN wrapper under it
// (cudnn_conv.h), so the wrapper needs nothing from kernels/.
#ifndef TK_GPU_CONV_SHAPE_H
#define TK_GPU_CONV_SHAPE_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_conv_shape {
    int N, H, W, C;   // input
    int K, R, S;      // filters
    int stride, pad;
    int P, Q;         // output: tk_conv_shape_init fills them
} tk_conv_shape;

typedef enum { TK_CONV_FWD = 0, TK_CONV_BWD_DATA = 1, TK_CONV_BWD_FILTER = 2 } tk_conv_pass;

// Elements of x, y and w.
static inline int64_t tk_conv_x_numel(const tk_conv_shape *s) { return (int64_t)s->N * s->H * s->W * s->C; }
static inline int64_t tk_conv_y_numel(const tk_conv_shape *s) { return (int64_t)s->N * s->P * s->Q * s->K; }
static inline int64_t tk_conv_w_numel(const tk_conv_shape *s) { return (int64_t)s->K * s->R * s->S * s->C; }

#ifdef __cplusplus
}
#endif
#endif
