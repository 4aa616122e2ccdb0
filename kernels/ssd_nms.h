// SSD300's evaluation post-processing: decode the boxes, softmax the class scores, per-class
// non-maximum suppression and the per-image top detections, batched over images. The semantics
// are those of the MLPerf v1.x reference (mlcommons/training single_stage_detector/ssd, utils.py
// Encoder.scale_back_batch / decode_batch / decode_single, called by train.py coco_eval with
// criteria 0.5, max_output 200, max_num 200, nms_valid_thresh 0.05), with its sorts made stable
// (torch's sort is not, so the reference leaves ties open; the rules below close them).
//
// Inputs per image n (A anchors, C classes with 0 the background; SSD300: A 8732, C 81):
//   loc  (N, A, 4)  encoded offsets (x, y, w, h) of each anchor (the reference's ploc, permuted
//                   to anchors-major), type t (TK_F32 or TK_BF16: read as fp32)
//   conf (N, A, C)  logits (p->softmax 1: softmax over the C classes, the reference's
//                   F.softmax(dim=-1)) or probabilities (p->softmax 0), type t
//   dbox (A, 4)     the default boxes (cx, cy, w, h), fp32 (dboxes300_coco()(order="xywh"); the
//                   op does not build them: kernels/ssd_box's generator or the caller's)
// All arithmetic is fp32, operation by operation as the reference writes it (no contraction):
//   cx = (0.1 x) dw + dcx, cy = (0.1 y) dh + dcy, w = exp(0.2 w') dw, h = exp(0.2 h') dh
//   box = (cx - 0.5 w, cy - 0.5 h, cx + 0.5 w, cy + 0.5 h)  ltrb, NOT clamped to [0, 1] (the
//         reference does not clamp either; coco_eval scales them by the image size as they are)
//   softmax: m = max_k z_k, e_k = exp(z_k - m), s = sum of e_k in class order, p_k = e_k (1/s)
// exp is tk_ssd_expf below (|error| <= 2 ulp against the exact value, the same bits on the CPU
// and the GPU), so the CUDA kernels reproduce the reference op bit for bit.
// Per class k = 1 .. C-1 (the background is skipped):
//   1. candidates: the anchors with p_k > p->score_min (0.05, strict, as `score > 0.05`)
//   2. ordered by score descending, equal scores by anchor index descending (the reference sorts
//      ascending and walks from the end: a stable ascending sort gives this order); the first
//      p->max_num (200) are kept (`score_idx_sorted[-max_num:]`)
//   3. greedy suppression in that order: a candidate is kept unless an already kept box b has
//      !(IoU(candidate, b) < p->iou) (0.5; IoU = inter / (area_c + area_b - inter) with
//      negative widths of the intersection clamped to 0, so IoU >= 0.5 suppresses, and so does a
//      NaN IoU, as `iou_sorted < criteria` is false for it)
// Per image: the kept detections of all classes, concatenated in class order (each class in its
// suppression order), are sorted by score ascending, equal scores in concatenation order (a
// stable sort), and the last p->max_out (200) are the output, in that ascending order: the
// reference's `scores_out.sort(dim=0)` + `max_ids[-max_output:]`, best detection last.
// Outputs: box (N, max_out, 4) ltrb, score (N, max_out), label (N, max_out) the class index
// 1 .. C-1 (the caller maps it to a COCO category id, the reference's inv_map: label k is the
// k-th smallest category id of the annotation file, as lib/cocodata's records number them),
// count (N). Slots count .. max_out-1 are zero. One difference from the reference: an image
// without any candidate has count 0, where the reference's torch.cat of nothing raises and
// coco_eval then drops the whole batch's detections ("No object detected in batch").
// To COCO results (train.py coco_eval; np.array of the rows makes them float64): x = l W,
// y = t H, width = (r - l) W, height = (b - t) H with r - l and b - t in fp32, then times the
// image width W / height H in fp64 (tk_ssd_nms_coco_box); score in fp64. The reference hands
// these rows to pycocotools as a float64 array (loadRes(np.array(rows))), no JSON: in process,
// coco_dt_from_arrays (lib/coco/coco.h) takes the same doubles.
// Device memory on cuda (ws: tk_ssd_nms_ws_bytes; the cpu needs none). CUDA: one thread per
// anchor decodes and softmaxes, one block per (image, class) selects and sorts its candidates and
// suppresses with a bitmask in shared memory, one block per image merges. Deterministic.
#ifndef TK_KERNELS_SSD_NMS_H
#define TK_KERNELS_SSD_NMS_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

#define TK_SSD_NMS_MAX_NUM 256  // per-class candidates (the bitmask's side)
#define TK_SSD_NMS_MAX_OUT 1024 // detections per image
#define TK_SSD_NMS_MAX_C 1024   // classes

typedef struct {
    float iou;       // suppression threshold (criteria): 0.5
    float score_min; // candidates score above this: 0.05
    int max_num;     // candidates per class: 200
    int max_out;     // detections per image: 200
    int softmax;     // 1: conf holds logits; 0: probabilities
} tk_ssd_nms_params;

// The reference's evaluation settings (train.py coco_eval).
static inline tk_ssd_nms_params tk_ssd_nms_defaults(void) {
    tk_ssd_nms_params p = {0.5f, 0.05f, 200, 200, 1};
    return p;
}

size_t tk_ssd_nms_ws_bytes(tk_backend b, int N, int A, int C, const tk_ssd_nms_params *p);
int tk_ssd_nms(tk_ctx *c, tk_dtype t, const void *loc, const void *conf, const float *dbox, int N, int A, int C,
               const tk_ssd_nms_params *p, float *box, float *score, int32_t *label, int32_t *count, void *ws,
               tk_err *e);
int tk_ssd_nms_ref(tk_dtype t, const void *loc, const void *conf, const float *dbox, int N, int A, int C,
                   const tk_ssd_nms_params *p, float *box, float *score, int32_t *label, int32_t *count, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_ssd_nms_ws_bytes_cuda(int N, int A, int C, const tk_ssd_nms_params *p);
int tk_ssd_nms_cuda(tk_ctx *c, tk_dtype t, const void *loc, const void *conf, const float *dbox, int N, int A, int C,
                    const tk_ssd_nms_params *p, float *box, float *score, int32_t *label, int32_t *count, void *ws,
                    tk_err *e);
#endif

static inline int tk_ssd_nms_check(tk_dtype t, int N, int A, int C, const tk_ssd_nms_params *p, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "ssd_nms: inputs in %s", tk_dtype_name(t));
    if (N < 1 || A < 1 || C < 2 || C > TK_SSD_NMS_MAX_C || (double)N * A * C > 4.0e18)
        return tk_err_set(e, TK_EINTERNAL, "ssd_nms: bad shape N %d A %d C %d", N, A, C);
    if (p->max_num < 1 || p->max_num > TK_SSD_NMS_MAX_NUM || p->max_out < 1 || p->max_out > TK_SSD_NMS_MAX_OUT ||
        !(p->score_min >= 0) || !(p->iou >= 0))
        return tk_err_set(e, TK_EINTERNAL, "ssd_nms: bad parameters max_num %d max_out %d score_min %g iou %g",
                          p->max_num, p->max_out, p->score_min, p->iou);
    return 0;
}

// One detection as a COCO result box [x, y, width, height] in pixels of a W x H image, the way
// the reference's coco_eval computes it (float32 ltrb, fp32 differences, fp64 products).
static inline void tk_ssd_nms_coco_box(const float ltrb[4], double W, double H, double xywh[4]) {
    xywh[0] = (double)ltrb[0] * W;
    xywh[1] = (double)ltrb[1] * H;
    xywh[2] = (double)(float)(ltrb[2] - ltrb[0]) * W;
    xywh[3] = (double)(float)(ltrb[3] - ltrb[1]) * H;
}

#ifdef __cplusplus
}
#endif

// ---- the arithmetic both sides share (C and CUDA), each operation rounded once ----
#ifdef __CUDACC__
#define TK_SSD_FN static __device__ __forceinline__
#define TK_SSD_MUL(a, b) __fmul_rn(a, b)
#define TK_SSD_ADD(a, b) __fadd_rn(a, b)
#define TK_SSD_SUB(a, b) __fsub_rn(a, b)
#define TK_SSD_DIV(a, b) __fdiv_rn(a, b)
#define TK_SSD_FMA(a, b, c) __fmaf_rn(a, b, c)
#define TK_SSD_RINT(a) rintf(a)
#else
#include <math.h>
#define TK_SSD_FN static inline
#define TK_SSD_MUL(a, b) ((a) * (b)) // C11 mode: the compiler does not contract (-ffp-contract=off)
#define TK_SSD_ADD(a, b) ((a) + (b))
#define TK_SSD_SUB(a, b) ((a) - (b))
#define TK_SSD_DIV(a, b) ((a) / (b))
#define TK_SSD_FMA(a, b, c) fmaf(a, b, c)
#define TK_SSD_RINT(a) rintf(a)
#endif

TK_SSD_FN float tk_ssd_bits_float(uint32_t u) {
    union { uint32_t u; float f; } v;
    v.u = u;
    return v.f;
}
TK_SSD_FN uint32_t tk_ssd_float_bits(float f) {
    union { float f; uint32_t u; } v;
    v.f = f;
    return v.u;
}

// e^x in fp32 from explicit fused multiply-adds (identical on both sides): x = k ln2 + r with
// |r| <= ln2/2 (ln2 in two parts), e^r by its Taylor series to r^8 (truncation < 1e-9 relative),
// times 2^k. 0 for x < -87.34 (where e^x is about 2^-126), infinite above FLT_MAX; NaN stays NaN.
TK_SSD_FN float tk_ssd_expf(float x) {
    if (x != x) return x;
    if (x > 88.72283935546875f) return tk_ssd_bits_float(0x7f800000u);
    if (x < -87.33654022216797f) return 0.0f;
    const float k = TK_SSD_RINT(TK_SSD_MUL(x, 1.44269502162933349609375f));
    float r = TK_SSD_FMA(-k, 0.693145751953125f, x); // ln2's high part: exact product
    r = TK_SSD_FMA(-k, 1.428606765330187045e-06f, r);
    float q = 2.48015873015873e-05f; // 1/8!
    q = TK_SSD_FMA(q, r, 1.98412698412698e-04f);
    q = TK_SSD_FMA(q, r, 1.38888888888889e-03f);
    q = TK_SSD_FMA(q, r, 8.33333333333333e-03f);
    q = TK_SSD_FMA(q, r, 4.16666666666667e-02f);
    q = TK_SSD_FMA(q, r, 1.66666666666667e-01f);
    q = TK_SSD_FMA(q, r, 0.5f);
    q = TK_SSD_FMA(q, r, 1.0f);
    q = TK_SSD_FMA(q, r, 1.0f);
    int ki = (int)k;
    if (ki > 127) { // x in (88.03, 88.72]: 2^128 q in two steps
        q = TK_SSD_MUL(q, 2.0f);
        ki = 127;
    }
    if (ki < -126) return 0.0f;
    return TK_SSD_MUL(q, tk_ssd_bits_float((uint32_t)(ki + 127) << 23));
}

// Anchor a's box from its offsets l (x, y, w, h) and default box d (cx, cy, w, h): ltrb.
TK_SSD_FN void tk_ssd_decode(const float l[4], const float d[4], float out[4]) {
    const float cx = TK_SSD_ADD(TK_SSD_MUL(TK_SSD_MUL(0.1f, l[0]), d[2]), d[0]);
    const float cy = TK_SSD_ADD(TK_SSD_MUL(TK_SSD_MUL(0.1f, l[1]), d[3]), d[1]);
    const float w = TK_SSD_MUL(tk_ssd_expf(TK_SSD_MUL(0.2f, l[2])), d[2]);
    const float h = TK_SSD_MUL(tk_ssd_expf(TK_SSD_MUL(0.2f, l[3])), d[3]);
    out[0] = TK_SSD_SUB(cx, TK_SSD_MUL(0.5f, w));
    out[1] = TK_SSD_SUB(cy, TK_SSD_MUL(0.5f, h));
    out[2] = TK_SSD_ADD(cx, TK_SSD_MUL(0.5f, w));
    out[3] = TK_SSD_ADD(cy, TK_SSD_MUL(0.5f, h));
}

// calc_iou_tensor(candidate, kept) for one pair (ltrb): symmetric bit for bit.
TK_SSD_FN float tk_ssd_iou(const float a[4], const float b[4]) {
    float dx = TK_SSD_SUB(a[2] < b[2] ? a[2] : b[2], a[0] > b[0] ? a[0] : b[0]);
    float dy = TK_SSD_SUB(a[3] < b[3] ? a[3] : b[3], a[1] > b[1] ? a[1] : b[1]);
    dx = dx < 0 ? 0.0f : dx;
    dy = dy < 0 ? 0.0f : dy;
    const float inter = TK_SSD_MUL(dx, dy);
    const float aa = TK_SSD_MUL(TK_SSD_SUB(a[2], a[0]), TK_SSD_SUB(a[3], a[1]));
    const float ab = TK_SSD_MUL(TK_SSD_SUB(b[2], b[0]), TK_SSD_SUB(b[3], b[1]));
    return TK_SSD_DIV(inter, TK_SSD_SUB(TK_SSD_ADD(aa, ab), inter));
}

// Ordering keys: the score's bits (a positive float orders as its bits) above a 32-bit index.
TK_SSD_FN uint64_t tk_ssd_key(float score, uint32_t idx) {
    return (uint64_t)tk_ssd_float_bits(score) << 32 | idx;
}

#endif
