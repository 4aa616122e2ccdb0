// SSD300's box math (MLPerf Training v1.x single_stage_detector/ssd, the SSD300-ResNet34
// reference of mlcommons/training before its RetinaNet rewrite, commit b06269d9: utils.py
// DefaultBoxes, dboxes300_coco, calc_iou_tensor, Encoder.encode; base_model.py Loss): the default
// boxes, the matching of an image's ground truth to them, and the loss with hard-negative mining,
// forward and backward. Not the network.
//
// Default boxes (host only, computed once and uploaded): per feature map k (size f, step s) and
// per size in the reference's order, (s_k, s_k), (s', s') with s' = sqrt(s_k s_k+1), then for each
// aspect ratio a the pair (s_k sqrt a, s_k / sqrt a), (s_k / sqrt a, s_k sqrt a); for each size the
// cells row by row: cx = (j + 0.5) / (fig / s), cy = (i + 0.5) / (fig / s) (fp64, as numpy), then
// rounded to fp32 (torch.tensor(dtype=float)) and each of cx, cy, w, h clamped to [0, 1] in fp32;
// ltrb = (cx - 0.5 w, cy - 0.5 h, cx + 0.5 w, cy + 0.5 h) in fp32. dboxes300_coco gives 8732.
//
// Matching (Encoder.encode, one image, batched over images): IoU (fp32, each operation rounded as
// torch's elementwise ops: inter = max(min(r) - max(l), 0) * max(min(b) - max(t), 0),
// iou = inter / ((area_gt + area_db) - inter)) of every ground truth with every default box; each
// default box takes its best ground truth (the first on ties, as torch's max(dim=0)); each ground
// truth's best default box (the first on ties, max(dim=1)) gets IoU 2.0 and that ground truth (in
// ground-truth order, so when two ground truths share a best default box the later one wins: the
// reference's index assignment on the CPU, where its data loader runs it); a default box whose IoU
// is > thresh (0.5) takes the ground truth's label and box, any other label 0 (background) and its
// own ltrb box; the boxes then go to xywh in fp32: (0.5 (l + r), 0.5 (t + b), r - l, b - t).
// An image without ground truth (the reference fails on it: max over an empty dimension): every
// default box background with its own box. Boxes are ltrb in [0, 1] with r >= l, b >= t (the
// readers' boxes); NaN is not handled.
//
// Loss (Loss.forward with scale_xy 0.1, scale_wh 0.2; N images, D default boxes, C classes):
//   pos = label > 0, P_n = number of positives of image n
//   g = (10 (gx - ax) / aw, 10 (gy - ay) / ah, 5 log(gw / aw), 5 log(gh / ah))   (_loc_vec; a the default box xywh)
//   sl1_n = sum over positives d and k < 4 of SmoothL1(ploc[n,d,k] - g[k]) (beta 1)
//   con[n,d] = logsumexp(pconf[n,d,:]) - pconf[n,d,label]              (CrossEntropyLoss, per box)
//   hard negatives: key[n,d] = 0 for a positive (and for a NaN con, as NVIDIA's PyTorch OptLoss does
//   with masked_fill; the reference's sort would rank a NaN first),
//   else con; the boxes ranked by key descending, ties by index ascending (a stable sort; the
//   reference's unstable sort leaves ties unspecified); neg[n,d] = rank < min(3 P_n, D). A
//   positive can be ranked in too (when 3 P_n exceeds the boxes with key > 0): its weight is then 2.
//   w[n,d] = pos + neg;  closs_n = sum over d of w con
//   loss = mean over n of (P_n > 0 ? (sl1_n + closs_n) / P_n : 0)   (pos_num.clamp(min=1e-6), num_mask)
// Gradient (the mining's selection is piecewise constant: nothing flows through it), with
// q_n = (P_n > 0 ? 1 / (N P_n) : 0):
//   dploc[n,d,k] = q_n pos clamp(ploc - g, -1, 1);   dpconf[n,d,c] = q_n w (softmax_c - [c == label])
// Layouts (box-major; the reference's are channel-major, ploc N x 4 x D and plabel N x C x D: the
// same numbers transposed): ploc, dploc (N, D, 4); pconf, dpconf (N, D, C); gbox (N, D, 4) xywh
// fp32 and label (N, D) int32 in [0, C) as tk_ssd_match writes them; dbox (D, 4) xywh fp32. Any
// order of the D default boxes works as long as all inputs use the same one (the reference's is the
// head's (size, row, column) order, per feature map). ploc, pconf and the gradients in t (TK_F32
// or TK_BF16: fp32 math, gradients rounded once). sel (may be NULL): w as uint8 (N, D).
// The reference computes the loss side in fp64 (IoU and boxes in fp32 as above); the CUDA kernels
// compute per box in fp32 and add in fp64 in a fixed order (deterministic, no atomics). A label
// outside [0, C): the reference fails (TK_EINTERNAL, naming it); the CUDA kernels take it as 0.
// Device memory on cuda (gt_off too); ws: the *_ws_bytes of the backend.
#ifndef TK_KERNELS_SSD_BOX_H
#define TK_KERNELS_SSD_BOX_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

#define TK_SSD_MATCH_IOU 0.5f // Encoder.encode's criteria
#define TK_SSD_NEG_RATIO 3    // negatives per positive in the hard-negative mining
#define TK_SSD_SCALE_XY 0.1   // DefaultBoxes' scale_xy and scale_wh (the loss divides by them)
#define TK_SSD_SCALE_WH 0.2
#define TK_SSD_MAX_MAPS 8

// A default-box layout (DefaultBoxes' arguments): nmap feature maps, scale has nmap + 1 entries,
// ar[k][0 .. nar[k]-1] the aspect ratios of map k (besides 1).
typedef struct {
    int fig, nmap;
    int feat[TK_SSD_MAX_MAPS], step[TK_SSD_MAX_MAPS], scale[TK_SSD_MAX_MAPS + 1];
    int nar[TK_SSD_MAX_MAPS], ar[TK_SSD_MAX_MAPS][4];
} tk_ssd_dbox_cfg;

// dboxes300_coco: 300, maps 38 19 10 5 3 1, steps 8 16 32 64 100 300, scales 21 45 99 153 207 261
// 315, ratios [2] [2 3] [2 3] [2 3] [2] [2]: 8732 boxes.
extern const tk_ssd_dbox_cfg tk_ssd300_coco;
#define TK_SSD300_BOXES 8732

// Number of default boxes of g (-1 when g is malformed).
int tk_ssd_dbox_count(const tk_ssd_dbox_cfg *g);
// The default boxes, host memory: xywh and ltrb (D, 4) fp32 each (either may be NULL).
int tk_ssd_dboxes(const tk_ssd_dbox_cfg *g, float *xywh, float *ltrb, tk_err *e);

// gt (ngt, 4) ltrb fp32 and gt_label (ngt) int32 of all images, image n's at rows gt_off[n] ..
// gt_off[n+1]-1 (gt_off (N + 1), gt_off[0] = 0, ngt = gt_off[N]); dbox_ltrb (D, 4). Writes
// box (N, D, 4) xywh fp32 and label (N, D) int32.
size_t tk_ssd_match_ws_bytes(tk_backend b, int64_t ngt);
int tk_ssd_match(tk_ctx *c, const float *gt, const int32_t *gt_label, const int32_t *gt_off, int N, int64_t ngt,
                 const float *dbox_ltrb, int D, float thresh, float *box, int32_t *label, void *ws, tk_err *e);
int tk_ssd_match_ref(const float *gt, const int32_t *gt_label, const int32_t *gt_off, int N, int64_t ngt,
                     const float *dbox_ltrb, int D, float thresh, float *box, int32_t *label, tk_err *e);

// The loss (1 fp32) and, when dploc / dpconf are not NULL, the gradients (see above).
size_t tk_ssd_loss_ws_bytes(tk_backend b, int N, int D);
int tk_ssd_loss(tk_ctx *c, tk_dtype t, const void *ploc, const void *pconf, const float *gbox, const int32_t *label,
                const float *dbox, int N, int D, int C, float *loss, void *dploc, void *dpconf, uint8_t *sel, void *ws,
                tk_err *e);
int tk_ssd_loss_ref(tk_dtype t, const void *ploc, const void *pconf, const float *gbox, const int32_t *label,
                    const float *dbox, int N, int D, int C, float *loss, void *dploc, void *dpconf, uint8_t *sel,
                    tk_err *e);
// The training step's form (as kernels/dice_ce.h's): the gradients times scale (the rank's share of
// the global batch) and the loss added to the engine's accumulator (lib/engine/workload.h
// loss_acc; device memory on cuda): acc[0] += scale loss (fp64, before the rounding to loss),
// acc[1] += 1. scale 1, acc NULL is tk_ssd_loss.
int tk_ssd_loss_acc(tk_ctx *c, tk_dtype t, const void *ploc, const void *pconf, const float *gbox,
                    const int32_t *label, const float *dbox, int N, int D, int C, float scale, double *acc,
                    float *loss, void *dploc, void *dpconf, uint8_t *sel, void *ws, tk_err *e);
int tk_ssd_loss_acc_ref(tk_dtype t, const void *ploc, const void *pconf, const float *gbox, const int32_t *label,
                        const float *dbox, int N, int D, int C, float scale, double *acc, float *loss, void *dploc,
                        void *dpconf, uint8_t *sel, tk_err *e);

#ifdef TK_HAVE_CUDA
size_t tk_ssd_match_ws_bytes_cuda(int64_t ngt);
int tk_ssd_match_cuda(tk_ctx *c, const float *gt, const int32_t *gt_label, const int32_t *gt_off, int N, int64_t ngt,
                      const float *dbox_ltrb, int D, float thresh, float *box, int32_t *label, void *ws, tk_err *e);
size_t tk_ssd_loss_ws_bytes_cuda(int N, int D);
int tk_ssd_loss_cuda(tk_ctx *c, tk_dtype t, const void *ploc, const void *pconf, const float *gbox,
                     const int32_t *label, const float *dbox, int N, int D, int C, float *loss, void *dploc,
                     void *dpconf, uint8_t *sel, void *ws, tk_err *e);
int tk_ssd_loss_acc_cuda(tk_ctx *c, tk_dtype t, const void *ploc, const void *pconf, const float *gbox,
                         const int32_t *label, const float *dbox, int N, int D, int C, float scale, double *acc,
                         float *loss, void *dploc, void *dpconf, uint8_t *sel, void *ws, tk_err *e);
#endif

static inline int tk_ssd_match_check(int N, int64_t ngt, int D, tk_err *e) {
    if (N < 1 || ngt < 0 || ngt > INT32_MAX || D < 1)
        return tk_err_set(e, TK_EINTERNAL, "ssd_match: bad shape N %d ngt %lld D %d", N, (long long)ngt, D);
    return 0;
}
static inline int tk_ssd_loss_check(tk_dtype t, int N, int D, int C, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "ssd_loss: activations in %s", tk_dtype_name(t));
    if (N < 1 || D < 1 || C < 2 || (double)N * D * C > 4.0e18)
        return tk_err_set(e, TK_EINTERNAL, "ssd_loss: bad shape N %d D %d C %d", N, D, C);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
