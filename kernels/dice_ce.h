// The 3D U-Net's loss, MLPerf's DiceCELoss (mlcommons/training unet3d model/losses.py,
// to_onehot_y, use_softmax, include_background False), its value and its gradient in one op.
// Logits z (N, S, 3) channels last (N samples of S = D*H*W voxels, the 1x1x1 output convolution's
// NDHWC output), labels (N, S) in {0, 1, 2}. Per voxel p = softmax(z) over the 3 classes; per
// sample n and foreground class k in {1, 2} (background excluded), over the S voxels:
//   I = sum p_k [label == k],  P = sum p_k,  T = sum [label == k]
//   dice[n,k] = (2 I + 1e-6) / (T + P + 1e-6)        (smooth_nr = smooth_dr = 1e-6, no squares)
//   dice_loss = mean over (n, k) of (1 - dice[n,k])
//   ce = mean over the N S voxels of -log p_label    (torch.nn.CrossEntropyLoss, unweighted)
//   loss = (dice_loss + ce) / 2
// Gradient: with Den = T + P + 1e-6, per voxel g_0 = 0 and for k in {1, 2}
//   g_k = dloss/dp_k = -(2 [label == k] - dice[n,k]) / (4 N Den)
//   dz_j = p_j (g_j - sum_i p_i g_i) + (p_j - [label == j]) / (2 N S)
// z and dz hold ld >= 3 values a voxel (3: dense; more when the output layer's channels are padded
// for cuDNN): columns 3 .. ld-1 of z are ignored, of dz written 0.
// Types: z and dz (N, S, ld) in t (TK_F32, or TK_BF16: fp32 math, dz rounded once); label u8;
// loss (1) and dice (N, 2) fp32 (dice may be NULL; dz NULL: the value only, as in evaluation).
// Device memory on cuda. The reference computes in fp64. The CUDA side is two passes over z: sums
// per block of voxels (fp32 softmax, fp64 accumulation), the blocks' partials added in fp64 in a
// fixed order by one block that also writes loss and dice, then dz (deterministic, no atomics).
// A label outside {0, 1, 2}: the reference fails (TK_EINTERNAL, naming the voxel); the CUDA
// kernels count it in no class (the readers refuse such labels). ws: tk_dice_ce_ws_bytes.
#ifndef TK_KERNELS_DICE_CE_H
#define TK_KERNELS_DICE_CE_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

#define TK_DICE_CE_CLASSES 3
#define TK_DICE_SMOOTH 1e-6 // the reference's smooth_nr and smooth_dr

size_t tk_dice_ce_ws_bytes(tk_backend b, int N, int64_t S);
int tk_dice_ce(tk_ctx *c, tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float *loss,
               float *dice, void *dz, void *ws, tk_err *e);
int tk_dice_ce_ref(tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float *loss, float *dice,
                   void *dz, tk_err *e);
// The training step's form: the same, with the gradient times scale (the rank's share of the
// global batch, N / global: the ranks' gradients add up to the global mean's) and the loss added
// to the engine's accumulator (lib/engine/workload.h loss_acc): acc[0] += scale loss (fp64, from
// the fp64 value before its rounding to loss), acc[1] += 1. scale 1, acc NULL is tk_dice_ce.
int tk_dice_ce_acc(tk_ctx *c, tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float scale,
                   double *acc, float *loss, float *dice, void *dz, void *ws, tk_err *e);
int tk_dice_ce_acc_ref(tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float scale,
                       double *acc, float *loss, float *dice, void *dz, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_dice_ce_ws_bytes_cuda(int N, int64_t S);
int tk_dice_ce_cuda(tk_ctx *c, tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float *loss,
                    float *dice, void *dz, void *ws, tk_err *e);
int tk_dice_ce_acc_cuda(tk_ctx *c, tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld,
                        float scale, double *acc, float *loss, float *dice, void *dz, void *ws, tk_err *e);
#endif

static inline int tk_dice_ce_check(tk_dtype t, int N, int64_t S, int ld, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "dice_ce: logits in %s", tk_dtype_name(t));
    if (N < 1 || S < 1 || ld < TK_DICE_CE_CLASSES || (double)N * (double)S * ld > 4.0e18)
        return tk_err_set(e, TK_EINTERNAL, "dice_ce: bad shape N %d S %lld ld %d", N, (long long)S, ld);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
