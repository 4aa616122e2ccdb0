// The image stem's convolution as a shared block: torchvision's ResNet conv1 (7x7, stride 2,
// padding 3, 3 -> K channels), which ResNet-50 and SSD300's ResNet-34 trunk both start with, in
// the form that runs fastest where it runs (contrib/bench/NOTES.md, "the stem as a space-to-depth
// 4x4 convolution"):
// - s2d: the 4x4, stride 1, unpadded convolution over the space-to-depth input of
//   kernels/stem_s2d.h (16 channels at half the side, S even): the same 147 products per output
//   summed in another order; on cuda its forward by kernels/stem_conv.h where tk_stem_conv_ok
//   (ResNet-50's 224 x 224 and SSD300's 300 x 300, K 64, bf16; TK_STEM_CONV=cudnn in the
//   environment keeps cuDNN's);
// - direct: the 7x7 convolution, the 3 image channels zero-padded to 4 (or 8) on cuda where
//   cuDNN's NHWC kernels want a channel count their vectors divide (NVIDIA's MLPerf layout); the
//   padding's weights zero, their gradients dropped (tk_blk_conv.cw).
// Whichever form runs, the master weight is the reference's (K, 7, 7, 3) fp32 (checkpoints and
// imports see the 7x7 filter; tk_blk_stem_wshape): the compute weight wp is derived from it
// (tk_blk_stem_weight) and the filter gradient mapped back into its (K, 7, 7, 3) dw.
//
// Use (the owner's steps, as the other blocks: it owns no memory and knows no workload):
//   tk_blk_stem_pick (the form; cuda plans it) -> tk_blk_stem_init (the unit's shapes) -> declare
//   the unit's tensors with tk_blk_stem_wshape -> point u->c.w, dw, the norm's at them -> place
//   x (tk_blk_stem_x_numel in t), wp (tk_blk_stem_wp_numel in t) and env->wbuf (the stem's
//   tk_blk_conv_w_numel at least where tk_blk_stem_wbuf) -> tk_blk_stem_plan (cuda) ->
//   tk_blk_stem_bind; each step: tk_blk_stem_input_* (x from the images), tk_blk_stem_fwd (or
//   tk_blk_stem_conv_fwd and the owner's own use of the norm: ResNet applies it inside its max
//   pool), and in the backward tk_blk_stem_bwd (or tk_blk_stem_wgrad from the norm's input
//   gradient); tk_blk_stem_weight after every change of the master weight (update, load).
#ifndef TK_BLOCKS_STEM_H
#define TK_BLOCKS_STEM_H

#include "blocks/blocks.h"
#include "img_norm.h"

#ifdef __cplusplus
extern "C" {
#endif

// model.stem (man5 trainkit-config, resnet and ssd): auto = s2d on cuda where cuDNN plans it (S
// even), else direct; s2d on the cpu backend runs the same computation's references (tests).
typedef enum { TK_BLK_STEM_AUTO = 0, TK_BLK_STEM_S2D = 1, TK_BLK_STEM_DIRECT = 2 } tk_blk_stem_form;

typedef struct tk_blk_stem {
    tk_blk_unit *u;              // the owner's unit: the convolution (shaped by tk_blk_stem_init), its
                                 // norm and ReLU
    int N, S, K;                 // images (N, S, S, 3), filters
    int s2d;                     // the convolution is the 4x4 one over the space-to-depth input
    int cin;                     // channels of the compute input: 3, 4 or 8 (direct), TK_S2D_C (s2d)
    int own;                     // its forward runs kernels/stem_conv.h, not cuDNN (cuda, s2d)
    void *x;                     // the compute input (N, S, S, cin) or (N, S/2+3, S/2+3, 16) in t (the owner's)
    void *wp;                    // cin != 3: the compute weight in t, padded or mapped (the owner's); else NULL
} tk_blk_stem;

// The form for N images of S x S into K channels (st's other members cleared): on cuda (env->dnn)
// s2d where form allows and cuDNN plans its forward and filter gradient (form s2d: its error
// otherwise, with a hint), else the first of 4, 8, 3 input channels whose 7x7 passes plan; on the
// cpu s2d exactly where form is s2d. S odd with form s2d: TK_EUSAGE.
int tk_blk_stem_pick(const tk_blk_env *env, tk_blk_stem *st, int N, int S, int K, tk_blk_stem_form form, tk_err *e);
// The unit u (its convolution in the picked form, a batch norm, a ReLU).
int tk_blk_stem_init(tk_blk_stem *st, tk_blk_unit *u, double eps, double momentum, tk_err *e);
// The master weight's shape (K, 7, 7, 3): returns 4.
int tk_blk_stem_wshape(const tk_blk_stem *st, int64_t *shape);
static inline int64_t tk_blk_stem_x_numel(const tk_blk_stem *st) { return tk_blk_conv_x_numel(&st->u->c); }
static inline int64_t tk_blk_stem_wp_numel(const tk_blk_stem *st) {
    return st->cin != 3 ? tk_blk_conv_w_numel(&st->u->c) : 0;
}
// Whether its filter gradient goes through env->wbuf whatever the precision (cin != 3).
static inline int tk_blk_stem_wbuf(const tk_blk_stem *st) { return st->cin != 3; }
// cuda: cuDNN's plans of its passes (no input gradient; the forward fused with the norm's
// statistics where the blocks choose it, never with the own kernel).
int tk_blk_stem_plan(const tk_blk_env *env, tk_blk_stem *st, tk_err *e);
// After the owner placed x and wp: the convolution reads wp where there is one.
void tk_blk_stem_bind(tk_blk_stem *st);
// x from the batch's 8-bit images (N, S, S, 3), normalized ((v - mean) / std: kernels/img_norm.h)
// into the form's layout (ResNet's input).
int tk_blk_stem_input_u8(const tk_blk_env *env, const tk_blk_stem *st, const uint8_t *img, tk_img_norm nrm,
                         tk_err *e);
// x from images already normalized, (N, S, S, 3) fp32 (SSD's input).
int tk_blk_stem_input_f32(const tk_blk_env *env, const tk_blk_stem *st, const float *img, tk_err *e);
// wp from the master weight (nothing without wp).
int tk_blk_stem_weight(const tk_blk_env *env, const tk_blk_stem *st, tk_err *e);
// y = conv(x) (x: st->x, or another input of its layout; y: the unit's y or another of its size);
// train: with the norm's statistics into the convolution's sums where fused.
int tk_blk_stem_conv_fwd(const tk_blk_env *env, const tk_blk_stem *st, const void *x, void *y, int train, tk_err *e);
// The master weight's gradient dw (K, 7, 7, 3) fp32 from dy, the gradient of the convolution's
// output, and x (the input gradient is never made).
int tk_blk_stem_wgrad(const tk_blk_env *env, const tk_blk_stem *st, const void *dy, tk_err *e);
// The whole unit as tk_blk_unit_fwd runs one: z = ReLU(norm(conv(x))) through y.
int tk_blk_stem_fwd(const tk_blk_env *env, const tk_blk_stem *st, int train, tk_err *e);
// Its backward from dz, the gradient of z: the norm's into dn (scratch of y's size), then the
// filter gradient (tk_blk_stem_wgrad).
int tk_blk_stem_bwd(const tk_blk_env *env, const tk_blk_stem *st, const void *dz, void *dn, tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
