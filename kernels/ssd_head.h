// The SSD300 network's pointwise and layout ops around its convolutions (lib/workloads/ssd):
// the additional layers' and the heads' conv biases (with the additional layers' ReLU), and the
// heads' outputs gathered from channels last into the reference's box layout.
//
//   bias_relu_fwd:  y[m,k] = act(y[m,k] + b[k])        (in place, M rows of K channels; act: ReLU
//                                                       where relu, else identity; rounded to t once)
//   relu_bwd:       dx[i] = y[i] > 0 ? dy[i] + dy2[i] : 0   (n elements; y the forward's output;
//                                                       dy2 NULL: none; dx may be dy or dy2; the sum
//                                                       in fp32, rounded to t once)
//   (the bias's gradient of either: kernels/conv3d_bias.h tk_conv3d_bias_bwd, rows summed)
//
// The heads. A head's output is channels last, (N, HW, ld) (HW positions of its feature map); its
// channels c0 .. c0 + nd A - 1 are nd default boxes a position of A values a box (4 for loc, the
// classes for conf: the model runs a map's loc and conf convolutions as one, so ld = nd (4 +
// classes), loc at c0 = 0 and conf after it). The v1.x MLPerf
// reference (ssd300.py bbox_view) views PyTorch's (N, nd A, H, W) output as (N, A, nd HW) and
// concatenates the six maps along the last dimension, so channel ch = a nd + d at position p goes
// to row a, column d HW + p of the map's block (the channel's *major* part is the value a, its
// minor part the box d: the reference's ordering, followed as it is):
//   gather:  out[n, a, off + d HW + p] = src[n, p, c0 + a nd + d]   (out (N, A, total) fp32)
//   scatter: dsrc[n, p, c0 + a nd + d] = dout[n, a, off + d HW + p] (every one of those written)
// box_major: out and dout are box-major instead, (N, total, A): the same numbers transposed, the
// layout of kernels/ssd_box.h's loss and kernels/ssd_nms.h (the training step and the evaluation
// gather straight into it: no transposes between the network and the loss):
//   gather:  out[n, off + d HW + p, a] = src[n, p, c0 + a nd + d]
//   scatter: dsrc[n, p, c0 + a nd + d] = dout[n, off + d HW + p, a]
// src, dsrc in t (TK_F32 or TK_BF16); out, dout fp32 (the loss reads and writes fp32). off + nd HW
// <= total.
//
// Many heads at once (the training step's six maps, each with its loc and conf parts: one launch
// forward, one backward): head h's output src (N, HW, ld) with its parts part[0 .. nparts-1]
// (the same N, HW and ld; channel ranges c0 .. c0 + nd A - 1 that do not overlap), part j
// between src and out[j] as one map above:
//   gather_many:  every part's gather
//   scatter_many: every part's scatter, and every channel of src that no part covers written 0
//                 (a padded convolution's extra filters: their output's gradient), so that each
//                 head's whole (N, HW, ld) is written
// The heads' outputs may not overlap each other nor the parts' out; on cuda ld <= 12288.
#ifndef TK_KERNELS_SSD_HEAD_H
#define TK_KERNELS_SSD_HEAD_H
#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

typedef struct tk_ssd_map {
    int N, HW, nd, A;            // samples, positions, boxes a position, values a box
    int ld, c0;                  // the source's channels a position, this part's first
    int64_t total, off;          // the output's columns (boxes), this map's first
    int box_major;               // out, dout (N, total, A) (else the reference's (N, A, total))
} tk_ssd_map;

#define TK_SSD_HEAD_PARTS 2
#define TK_SSD_MAX_HEADS 8
typedef struct tk_ssd_head {
    void *src;                            // (N, HW, ld) in t: the gather's input, the scatter's output
    int nparts;                           // 1 .. TK_SSD_HEAD_PARTS
    tk_ssd_map part[TK_SSD_HEAD_PARTS];   // its parts (loc, conf)
    float *out[TK_SSD_HEAD_PARTS];        // part j's out (the gather's), dout (the scatter's)
} tk_ssd_head;

int tk_ssd_bias_relu_fwd(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, int relu, tk_err *e);
int tk_ssd_relu_bwd(tk_ctx *c, tk_dtype t, int64_t n, const void *y, const void *dy, const void *dy2, void *dx,
                    tk_err *e);
int tk_ssd_head_gather(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const void *src, float *out, tk_err *e);
int tk_ssd_head_scatter(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const float *dout, void *dsrc, tk_err *e);
int tk_ssd_head_gather_many(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e);
int tk_ssd_head_scatter_many(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e);

int tk_ssd_bias_relu_fwd_ref(tk_dtype t, void *y, int64_t M, int K, const float *b, int relu, tk_err *e);
int tk_ssd_relu_bwd_ref(tk_dtype t, int64_t n, const void *y, const void *dy, const void *dy2, void *dx,
                    tk_err *e);
int tk_ssd_head_gather_ref(tk_dtype t, const tk_ssd_map *mp, const void *src, float *out, tk_err *e);
int tk_ssd_head_scatter_ref(tk_dtype t, const tk_ssd_map *mp, const float *dout, void *dsrc, tk_err *e);
int tk_ssd_head_gather_many_ref(tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e);
int tk_ssd_head_scatter_many_ref(tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_ssd_bias_relu_fwd_cuda(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, int relu, tk_err *e);
int tk_ssd_relu_bwd_cuda(tk_ctx *c, tk_dtype t, int64_t n, const void *y, const void *dy, const void *dy2, void *dx,
                    tk_err *e);
int tk_ssd_head_gather_cuda(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const void *src, float *out, tk_err *e);
int tk_ssd_head_scatter_cuda(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const float *dout, void *dsrc, tk_err *e);
int tk_ssd_head_gather_many_cuda(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e);
int tk_ssd_head_scatter_many_cuda(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e);
#endif

static inline int tk_ssd_type_check(tk_dtype t, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "ssd head: tensors in %s", tk_dtype_name(t));
    return 0;
}
static inline int tk_ssd_map_check(tk_dtype t, const tk_ssd_map *mp, tk_err *e) {
    TRY(tk_ssd_type_check(t, e));
    if (mp->N < 1 || mp->HW < 1 || mp->nd < 1 || mp->A < 1 || mp->off < 0 ||
        mp->off + (int64_t)mp->nd * mp->HW > mp->total || mp->c0 < 0 || mp->c0 + mp->nd * mp->A > mp->ld)
        return tk_err_set(e, TK_EINTERNAL, "ssd head: bad map N %d HW %d nd %d A %d (channels %d at %d of %d) at %lld of %lld",
                          mp->N, mp->HW, mp->nd, mp->A, mp->nd * mp->A, mp->c0, mp->ld, (long long)mp->off, (long long)mp->total);
    return 0;
}
static inline int tk_ssd_heads_check(tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e) {
    if (nh < 1 || nh > TK_SSD_MAX_HEADS) return tk_err_set(e, TK_EINTERNAL, "ssd head: %d heads (1 to %d)", nh, TK_SSD_MAX_HEADS);
    for (int i = 0; i < nh; i++) {
        if (h[i].nparts < 1 || h[i].nparts > TK_SSD_HEAD_PARTS)
            return tk_err_set(e, TK_EINTERNAL, "ssd head %d: %d parts (1 to %d)", i, h[i].nparts, TK_SSD_HEAD_PARTS);
        const tk_ssd_map *a = &h[i].part[0];
        for (int j = 0; j < h[i].nparts; j++) {
            const tk_ssd_map *b = &h[i].part[j];
            TRY(tk_ssd_map_check(t, b, e));
            if (b->N != a->N || b->HW != a->HW || b->ld != a->ld)
                return tk_err_set(e, TK_EINTERNAL, "ssd head %d: part %d of N %d HW %d ld %d, part 0's %d %d %d", i, j,
                                  b->N, b->HW, b->ld, a->N, a->HW, a->ld);
            for (int k = 0; k < j; k++) {
                const tk_ssd_map *o = &h[i].part[k];
                if (b->c0 < o->c0 + o->nd * o->A && o->c0 < b->c0 + b->nd * b->A)
                    return tk_err_set(e, TK_EINTERNAL, "ssd head %d: parts %d and %d share channels", i, k, j);
            }
        }
    }
    return 0;
}
#ifdef __cplusplus
}
#endif
#endif
