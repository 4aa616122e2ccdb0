// The end of the 3D U-Net's sliding-window evaluation (kernels/swin.h): the weighted sums divided,
// the argmax over the classes, and MLPerf's DiceScore of one case (mlcommons/training
// retired_benchmarks/unet3d/pytorch/model/losses.py:85-92 over Dice :6-60: to_onehot_y,
// use_argmax, to_onehot_x, include_background False; smooth_nr = smooth_dr = 1e-6).
// Per output voxel v of the grid (its cropped region, g->out):
//   pred[v] = argmax_k fl(acc[v][k] / wsum[v])   (fp32 division, inference.py:146; the first of
//             equal maxima, as torch.argmax)
// and per class k in {1, 2}, with the label read at the crop (the reference crops it with the image):
//   I = #(pred == k and label == k),  T = #(label == k),  P = #(pred == k)
//   dice[k - 1] = fl(fl(2 I) + 1e-6f) / fl(fl(T + P) + 1e-6f)      (fp32, as torch computes it)
// So an empty label and an empty prediction give 1, an empty label with a prediction about
// 1e-6 / P, a label with no prediction about 1e-6 / T. The counts are exact integers (torch sums
// fp32 one-hots: the same values while counts stay below 2^24 voxels). The mean over the cases:
// tk_dice_mean.
// acc (out voxels, 3) fp32, wsum (out voxels) fp32, label (D, H, W) u8 of the grid's shape as given,
// pred (out voxels) u8 or NULL, dice (2) fp32: device memory on cuda. A label outside {0, 1, 2}:
// the reference fails (TK_EINTERNAL, naming the voxel); the CUDA kernel counts it in no class.
// ws: tk_dice_score_ws_bytes (the CUDA kernel's integer counts; deterministic).
#ifndef TK_KERNELS_DICE_SCORE_H
#define TK_KERNELS_DICE_SCORE_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"
#include "swin.h"

size_t tk_dice_score_ws_bytes(tk_backend b);
int tk_dice_score(tk_ctx *c, const tk_swin_grid *g, const float *acc, const float *wsum, const uint8_t *label,
                  uint8_t *pred, float *dice, void *ws, tk_err *e);
int tk_dice_score_ref(const tk_swin_grid *g, const float *acc, const float *wsum, const uint8_t *label, uint8_t *pred,
                      float *dice, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_dice_score_ws_bytes_cuda(void);
int tk_dice_score_cuda(tk_ctx *c, const tk_swin_grid *g, const float *acc, const float *wsum, const uint8_t *label,
                       uint8_t *pred, float *dice, void *ws, tk_err *e);
#endif

// The evaluation's score from the cases' Dice (ncases, 2) in the order of their file names, as the
// reference reduces them over nshards ranks (inference.py:52-61, data_loader.py:31-34, 54,
// distributed_utils.py:97-105): np.array_split gives rank r a contiguous run of the cases (the
// first ncases % nshards ranks one more), each rank takes the mean of its own cases, the
// all-reduce the mean of the ranks' means -- not the mean of all the cases when the runs differ in
// length (42 cases on 8 ranks: 6, 6, 5, 5, 5, 5, 5, 5). out: kidney, tumor, and
// mean_dice = (kidney + tumor) / 2, all fp32 sums in order (the reference's GPU and NCCL orders
// may differ in the last place). More ranks than cases: the reference fails (TK_EDATA).
int tk_dice_mean(const float *dice, int ncases, int nshards, float out[3], tk_err *e);

// The Dice of one class from its counts, in the reference's fp32 operations.
#ifdef __CUDACC__
__host__ __device__
#endif
static inline float tk_dice_of_counts(int64_t I, int64_t T, int64_t P) {
    const float smooth = 1e-6f; // Python's 1e-6 as torch applies it to a fp32 tensor
#ifdef __CUDA_ARCH__ // each operation rounded, none fused (as torch's separate ops)
    return __fdiv_rn(__fadd_rn(__fmul_rn(2.0f, (float)I), smooth), __fadd_rn(__fadd_rn((float)T, (float)P), smooth));
#else // (ISO C contracts nothing)
    return (2.0f * (float)I + smooth) / ((float)T + (float)P + smooth);
#endif
}

#ifdef __cplusplus
}
#endif
#endif
