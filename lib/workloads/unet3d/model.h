// The 3D U-Net's network (model.c, step.c): the u3_model behind unet3d.h's "model.c, step.c"
// functions, private to those two files and the tests. The layers are lib/blocks' rank-3 units
// (Conv3d 3x3x3 + InstanceNorm3d + ReLU) and transposed convolutions, the biases kernels/conv3d_bias.h,
// the loss kernels/dice_ce.h.
//
// Buffers (the backend's memory, one arena): every unit's convolution output y and unit output z
// (the next layer's input and the norm's backward reads both: its x and the ReLU's sign), each
// upsampling's transposed output ty (without its bias) and the concatenation cat = [ty + bias,
// skip] (channels last: kernels/colcat.h, the bias added as it copies), the logits (b, S, ld). The backward runs on scratch
// buffers of the largest activation (U3_NBUF) and accumulates a skip's two gradients in the
// instance norm's dy + dy2.
//
// cuda: cuDNN plans every pass at create. A channel count cuDNN has no engine for at the model's
// ends is padded (the input block's 1 input channel to cin, the output layer's 3 classes to ld:
// zero channels, zero filters; their compute copies are refreshed from the master weights at
// the step's start, and their gradients of the padding dropped).
#ifndef TK_WORKLOADS_UNET3D_MODEL_H
#define TK_WORKLOADS_UNET3D_MODEL_H

#include "blocks/blocks.h"
#include "workloads/unet3d/unet3d.h"

#define U3_ENC 12                 // encoder units: input block 2, downsample 4 x 2, bottleneck 2
#define U3_UP 5
#define U3_NTENSORS 78            // parameter tensors (the reference's state dict)
#define U3_NBUF 3                 // backward scratch buffers

typedef struct u3_up {
    tk_blk_conv tc;               // ConvTranspose3d 2x2x2 stride 2 (its bias: b, db)
    int pb;                       // the bias's tensor
    float *b, *db;
    void *ty, *cat;               // its output (rows, cout) without the bias; [ty + b, skip] (rows, 2 cout)
    const void *skip, *in;        // the encoder's output at this level; this block's input
    tk_blk_unit u1, u2;
    int cout;
    int64_t rows;                 // b x voxels at this level
} u3_up;

struct u3_model {
    u3_config cfg;
    tk_ctx *c;
    tk_params *P;
    tk_dist *dist;
    struct tk_cudnn *dnn;         // cuda only
    tk_dtype t;
    int b;
    int64_t S;                    // voxels of a crop
    int cin, ld;                  // the first convolution's input channels (1, or padded), the
                                  // logits' (3, or padded)
    float *lr;
    int64_t *step;
    double *loss_acc;
    tk_blk_env env;
    tk_blk_unit enc[U3_ENC];      // in forward order; enc[2 i + 1].z is skip i (i = 0..4), enc[11].z
                                  // the bottleneck's output
    u3_up up[U3_UP];
    tk_blk_conv oc;               // the 1x1x1 output convolution (bias ob)
    int pob;
    float *ob, *dob;
    float *obp, *dobp;            // ld > 3: the padded bias and its gradient (ld floats)
    void *w0p, *wop;              // cin > 1 / ld > 3: the padded compute weights (t)
    // buffers
    float *in_img;                // (b, S) f32: the batch's images
    uint8_t *in_label;            // (b, S)
    void *x0;                     // (b, S, cin) in t: the image cast (the step's first op)
    void *logits;                 // (b, S, ld) in t
    float *loss, *dice;           // (1), (b, 2)
    void *dice_ws, *bias_ws;
    void *g[U3_NBUF];             // backward scratch, each the largest activation
    tk_cast_span casts[U3_NTENSORS];
    int ncasts;
    tk_blk_grads grads;           // the engine's grads_ready (several ranks): each block's gradients
                                  // reported (their casts first) as the backward completes them
    char mlname[U3_NTENSORS][32]; // the MLLOG names of the dense tensors, by index
};

// The forward of the images in x0 into the logits (training and evaluation alike: instance norm
// has no running statistics), the padded compute copies refreshed first.
int u3_forward(u3_model *m, tk_err *e);
// The filters of level l (W, 2W, 4W, 8W, 10W).
static inline int u3_filters(int width, int l) { return l < 4 ? width << l : 10 * width; }

#endif
