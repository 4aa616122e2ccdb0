// Shared model blocks (DESIGN.md section 3a: the layer between kernels/ and the engine): the
// convolution, normalization, pooling and residual-unit machinery that ResNet-50 runs, for the
// workloads that build from the same parts (SSD's ResNet-34 trunk, Mask R-CNN's ResNet-50-FPN,
// 3D U-Net's convolution + instance norm + ReLU blocks) without including another workload's files.
// A block is a struct of shapes and pointers plus the functions that run its passes; it owns no
// memory and knows no workload.
//
// Design:
// - The environment (tk_blk_env) is what every call runs on: the backend context, cuDNN's handle
//   (cuda; NULL on cpu), the activation type t, and the scratch the passes share. Activations and
//   compute copies are in t (TK_F32; TK_BF16 on cuda); master weights, gradients and the norms'
//   parameters and statistics fp32. Layouts are channels last (NHWC, weights KRSC: kernels/conv.h).
// - Tensors: the blocks sit below the engine, so they never see tk_params. The owner (a workload)
//   declares each block's tensors into its parameter buffers in its own order and names (their
//   shapes: tk_blk_conv_wshape, the norm's C), then points the block's members at them (w, dw, wc;
//   gamma, beta, dgamma, dbeta, running_*), and places the activations and statistics in its own
//   arena (the sizes: *_numel, tk_blk_norm_stat_bytes, *_ws_bytes). pidx is the owner's handle of
//   a block's first tensor; the blocks do not read it.
// - Spatial rank is a member of the convolution (tk_blk_conv.rank): 2 (s, a tk_conv_shape with
//   its P x Q output: ResNet) or 3 (s3, a tk_conv3d_shape: kernels/conv3d.h, the U-Net's NDHWC
//   volumes, KTRSC filters). The numel and rows helpers and the passes branch on it; the 2-D
//   callers go through tk_blk_conv_init2d and the same functions. A rank-3 convolution may be
//   transposed (tk_blk_conv_init3d_transposed: PyTorch's ConvTranspose3d): s3 is then the
//   convolution it inverts, whose x is its output and y its input, so its forward is s3's backward
//   data pass, its input gradient s3's forward and its weight gradient s3's backward filter with
//   the operands swapped. The norm and the pool see activations as N samples of `spatial`
//   positions of C channels, whatever the rank.
// - The normalization's kind is a member (tk_blk_norm.kind): TK_BLK_BATCH_NORM (statistics per
//   channel over all N x spatial rows, running statistics for eval) or TK_BLK_INSTANCE_NORM
//   (kernels/instnorm.h: statistics per sample and channel over its spatial positions, in training
//   and evaluation alike; no running statistics, no residual, no mask: its backward reads the
//   ReLU's sign from the forward's output), behind the same tk_blk_norm_fwd / tk_blk_norm_bwd, its
//   saved statistics N C values each (tk_blk_norm_stat_bytes).
// - A unit (tk_blk_unit) is a convolution, its norm and an optional ReLU, with the convolution's
//   output y and the unit's output z. Residual units are what a workload makes of units: the
//   last unit's norm takes the shortcut as res (added before its ReLU), a projection shortcut
//   is another unit whose norm can be applied inside the last one's pass
//   (tk_blk_norm_fwd_res_norm), and the norm's backward hands back the shortcut's gradient (dz).
// - The fusions ResNet uses are the blocks' choices, each the same kernels in the same order as
//   before: the norm's statistics from cuDNN's forward epilogue (tk_blk_conv.fused: its sums), the
//   ReLU's mask as bits for the backward (tk_blk_unit.mask), the stem norm's apply inside the max
//   pool (tk_blk_maxpool_fwd with a norm), and the bf16 weight gradients cast into their fp32 spans
//   together at the backward's end (tk_blk_cast_wgrads), or, on several ranks, those of each
//   block as the backward reports the block's gradients final for their all-reduce (tk_blk_grads).
#ifndef TK_BLOCKS_BLOCKS_H
#define TK_BLOCKS_BLOCKS_H

#include <stddef.h>
#include <stdint.h>

#include "bn.h"
#include "cast2d.h"
#include "conv.h"
#include "conv3d.h"
#include "core/err.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_blk_env {
    tk_ctx *c;
    struct tk_cudnn *dnn;        // cuda: cuDNN with every pass of the model's convolutions planned
    tk_dtype t;                  // activations and compute copies
    void *norm_ws;               // the largest tk_blk_norm_ws_bytes of the model's norms
    void *wbuf;                  // the largest tk_blk_conv_w_numel in t: a weight gradient before its
                                 // cast into fp32 (bf16 without dwt, or a padded-channel convolution);
                                 // NULL where no convolution needs it (fp32, unpadded)
} tk_blk_env;

// ---- convolution ----

typedef struct tk_blk_conv {
    int rank;                    // spatial dimensions: 2 (s) or 3 (s3)
    tk_conv_shape s;             // rank 2: the shape at the per-rank batch (gpu/conv_shape.h)
    tk_conv3d_shape s3;          // rank 3: the shape (transposed: the convolution it inverts)
    int transposed;              // rank 3: a transposed convolution (above)
    int cw;                      // the master weight's input channels where the compute shape pads
                                 // them with zero channels (cuDNN's vector kernels): s.C > cw, their
                                 // gradient dropped; 0: s.C
    int kw;                      // rank 3: the same for the filters (s3.K > kw: the U-Net's 3-class
                                 // output layer, its padded outputs' gradient 0); 0: s3.K
    int pidx;                    // the owner's
    float *w, *dw;               // master weight (K, R, S, C) fp32 and its gradient (the owner's)
    const void *wc;              // the compute copy in t that the forward and the backward data read
    int fused;                   // cuda: the training forward also makes its norm's statistics
                                 // (cuDNN's genstats epilogue, gpu/cudnn_conv.h) into sums
    float *sums;                 // (2 K) fp32: sum, then sum of squares of y per channel
    void *dwt;                   // its weight gradient in t (bf16), cast into dw later with others
                                 // (tk_blk_grads); NULL: written into dw
} tk_blk_conv;

// A 2-D convolution of N H x W x C inputs, K R x S filters (cw: see above).
int tk_blk_conv_init2d(tk_blk_conv *cv, int N, int H, int W, int C, int K, int R, int S, int stride, int pad,
                       tk_err *e);
// A 3-D convolution of N D x H x W x C inputs, K k x k x k filters.
int tk_blk_conv_init3d(tk_blk_conv *cv, int N, int D, int H, int W, int C, int K, int k, int stride, int pad,
                       tk_err *e);
// A transposed one (ConvTranspose3d(Cin, Cout, k, stride, pad)) of N Din x Hin x Win x Cin inputs:
// its output ((Din - 1) stride - 2 pad + k, ..., Cout), its weight (Cin, k, k, k, Cout).
int tk_blk_conv_init3d_transposed(tk_blk_conv *cv, int N, int Din, int Hin, int Win, int Cin, int Cout, int k,
                                  int stride, int pad, tk_err *e);
// Elements of x, y (the block's input and output, whichever way it runs) and the compute shape's
// w; rows: the output positions N x spatial; out: the output's channels.
static inline int64_t tk_blk_conv_x_numel(const tk_blk_conv *cv) {
    if (cv->rank == 3) return cv->transposed ? tk_conv3d_y_numel(&cv->s3) : tk_conv3d_x_numel(&cv->s3);
    return tk_conv_x_numel(&cv->s);
}
static inline int64_t tk_blk_conv_y_numel(const tk_blk_conv *cv) {
    if (cv->rank == 3) return cv->transposed ? tk_conv3d_x_numel(&cv->s3) : tk_conv3d_y_numel(&cv->s3);
    return tk_conv_y_numel(&cv->s);
}
static inline int64_t tk_blk_conv_w_numel(const tk_blk_conv *cv) {
    return cv->rank == 3 ? tk_conv3d_w_numel(&cv->s3) : tk_conv_w_numel(&cv->s);
}
static inline int tk_blk_conv_out(const tk_blk_conv *cv) {
    return cv->rank == 3 ? (cv->transposed ? cv->s3.C : cv->s3.K) : cv->s.K;
}
static inline int64_t tk_blk_conv_rows(const tk_blk_conv *cv) { return tk_blk_conv_y_numel(cv) / tk_blk_conv_out(cv); }
// The master weight's shape (K, R, S, C; rank 3: K, T, R, S, C; with C = cw, K = kw where padded):
// its dimensions, returns ndim.
int tk_blk_conv_wshape(const tk_blk_conv *cv, int64_t *shape);
// cuda: cuDNN's plans of the forward, the backward data (dgrad: 0 for a convolution of the input,
// whose gradient nobody reads) and the backward filter; fused set where fuse allows it and the
// fused forward is planned and not slower (never with ctx->deterministic; never at rank 3). Before
// the workspace is sized (tk_cudnn_ws_bytes).
int tk_blk_conv_plan(const tk_blk_env *env, tk_blk_conv *cv, int dgrad, int fuse, tk_err *e);
// y = conv(x); train: with the norm's statistics into sums where fused.
int tk_blk_conv_fwd(const tk_blk_env *env, const tk_blk_conv *cv, const void *x, void *y, int train, tk_err *e);
// The statistics the training forward made for the norm after it (NULL: none, the norm makes them).
static inline const float *tk_blk_conv_sums(const tk_blk_conv *cv) { return cv->fused ? cv->sums : NULL; }
int tk_blk_conv_dgrad(const tk_blk_env *env, const tk_blk_conv *cv, const void *dy, void *dx, tk_err *e);
// The weight gradient into dw: directly in fp32; into dwt (cast later); or through env->wbuf, cast
// into dw (bf16, padded channels and filters dropped).
int tk_blk_conv_wgrad(const tk_blk_env *env, const tk_blk_conv *cv, const void *x, const void *dy, tk_err *e);
// dgrad (dx NULL: none), then wgrad.
int tk_blk_conv_bwd(const tk_blk_env *env, const tk_blk_conv *cv, const void *x, const void *dy, void *dx, tk_err *e);
// Its dwt's span (returns 1), or 0 without one.
int tk_blk_conv_cast_span(const tk_blk_conv *cv, tk_cast_span *span);
// The n spans' bf16 gradients into fp32, at most TK_CAST_MANY a launch.
int tk_blk_cast_wgrads(const tk_blk_env *env, const tk_cast_span *spans, int n, tk_err *e);

// ---- normalization ----

typedef enum { TK_BLK_BATCH_NORM = 0, TK_BLK_INSTANCE_NORM = 1 } tk_blk_norm_kind;

typedef struct tk_blk_norm {
    tk_blk_norm_kind kind;
    int C;
    int N;                       // samples, and the positions of each it sees
    int64_t spatial;
    float eps, momentum;         // momentum: the running statistics' update (batch norm)
    int pidx;                    // the owner's
    float *gamma, *beta, *dgamma, *dbeta; // (C) fp32, the owner's
    float *rmean, *rvar;         // the running statistics (C), the owner's (batch norm)
    float *smean, *sinvstd;      // the last training forward's statistics (tk_blk_norm_stat_bytes;
                                 // instance norm: every forward's, N x C)
} tk_blk_norm;

void tk_blk_norm_init(tk_blk_norm *n, tk_blk_norm_kind kind, int C, int N, int64_t spatial, double eps,
                      double momentum);
// Bytes of each of smean and sinvstd; the workspace its passes need (env->norm_ws).
size_t tk_blk_norm_stat_bytes(const tk_blk_norm *n);
size_t tk_blk_norm_ws_bytes(tk_backend b, const tk_blk_norm *n);
// The running statistics reset (mean 0, variance 1) through host scratch h of 2 C floats (an
// instance norm has none: nothing to do).
int tk_blk_norm_reset(tk_ctx *c, const tk_blk_norm *n, float *h, tk_err *e);
// Its parameters and saved statistics, for a kernel that applies it itself.
static inline tk_bn_saved tk_blk_norm_saved(const tk_blk_norm *n) {
    return (tk_bn_saved){n->gamma, n->beta, n->smean, n->sinvstd};
}
// y = act(norm(x) [+ res]) (act: ReLU where relu). train: batch statistics (from sums where the
// convolution made them: tk_blk_conv_sums, else computed), the running update, smean/sinvstd, and
// the ReLU's mask bits where mask (not with sums); else the running statistics. y NULL (training,
// no sums): the statistics alone, for a consumer that applies it (tk_blk_maxpool_fwd,
// tk_blk_norm_fwd_res_norm). Instance norm: the sample's statistics into smean/sinvstd whatever
// train is; no sums, res or mask (TK_EINTERNAL), y required.
int tk_blk_norm_fwd(const tk_blk_env *env, tk_blk_norm *n, const float *sums, const void *x, const void *res,
                    int relu, void *y, uint8_t *mask, int train, tk_err *e);
// Training: y = act(norm(x) + rn(res)) with rn's statistics made before (tk_blk_norm_fwd, y NULL),
// so rn's output is never written.
int tk_blk_norm_fwd_res_norm(const tk_blk_env *env, tk_blk_norm *n, const void *x, const void *res,
                             const tk_blk_norm *rn, int relu, void *y, uint8_t *mask, tk_err *e);
// The backward of the last training forward: dx, dgamma, dbeta from dy (+ dy2); dz (not NULL):
// the gradient at the residual add too. relu: the forward had a ReLU, its mask from mask, or from
// y (a forward with a residual), or recomputed from x (y NULL). Instance norm: from y (required
// with relu), no mask or dz.
int tk_blk_norm_bwd(const tk_blk_env *env, const tk_blk_norm *n, const void *x, const void *y, const uint8_t *mask,
                    int relu, const void *dy, const void *dy2, void *dx, void *dz, tk_err *e);

// ---- units: convolution, norm, ReLU ----

typedef struct tk_blk_unit {
    tk_blk_conv c;
    tk_blk_norm n;
    int relu;
    void *y, *z;                 // the convolution's output, the unit's (the owner's)
    uint8_t *mask;               // the ReLU's mask bits (kernels/bn.h), where the owner keeps them
                                 // (tk_bn_mask_ok) for a backward that would otherwise read z; else NULL
} tk_blk_unit;

// A 2-D unit: its convolution (tk_blk_conv_init2d) and a norm of kind over its K output channels.
int tk_blk_unit_init2d(tk_blk_unit *u, int N, int H, int W, int C, int K, int R, int stride, int pad, int relu,
                       tk_blk_norm_kind kind, double eps, double momentum, tk_err *e);
// A 3-D unit: tk_blk_conv_init3d (k x k x k) and a norm of kind over its K output channels.
int tk_blk_unit_init3d(tk_blk_unit *u, int N, int D, int H, int W, int C, int K, int k, int stride, int pad, int relu,
                       tk_blk_norm_kind kind, double eps, double momentum, tk_err *e);
// The mask the training forward writes and the backward reads: none with fused statistics (the
// statistics' entry writes none).
static inline uint8_t *tk_blk_unit_mask(const tk_blk_unit *u) { return u->c.fused ? NULL : u->mask; }
// z = act(norm(conv(x)) [+ res]) through y.
int tk_blk_unit_fwd(const tk_blk_env *env, tk_blk_unit *u, const void *x, const void *res, int train, tk_err *e);
// The backward from dz (+ dz2, a residual's other path): the norm's into dn (scratch of y's size;
// dres: the residual's gradient too, where it had one), then the convolution's: dx (NULL: none)
// and its weight gradient.
int tk_blk_unit_bwd(const tk_blk_env *env, const tk_blk_unit *u, const void *x, const void *dz, const void *dz2,
                    void *dn, void *dres, void *dx, tk_err *e);

// ---- max pooling ----

typedef struct tk_blk_pool {
    int N, H, W, C;              // input
    int R, stride, pad;          // R x R windows
    int P, Q;                    // output
} tk_blk_pool;

int tk_blk_pool_init2d(tk_blk_pool *p, int N, int H, int W, int C, int R, int stride, int pad, tk_err *e);
static inline int64_t tk_blk_pool_y_numel(const tk_blk_pool *p) { return (int64_t)p->N * p->P * p->Q * p->C; }
// y, idx (the window position of each maximum) = maxpool(x), or with norm (not NULL: its training
// statistics made, its output not written) and a ReLU applied to x inside.
int tk_blk_maxpool_fwd(const tk_blk_env *env, const tk_blk_pool *p, const void *x, const tk_blk_norm *norm, void *y,
                       uint8_t *idx, tk_err *e);
int tk_blk_maxpool_bwd(const tk_blk_env *env, const tk_blk_pool *p, const void *dy, const void *dy2,
                       const uint8_t *idx, void *dx, tk_err *e);

// ---- the backward's scratch ----

// n (<= 32) buffers of the owner's (each the largest activation a backward needs), handed out and
// back: a backward that runs from the last block to the first holds a few of them at a time.
typedef struct tk_blk_scratch {
    void *const *buf;
    int n;
    unsigned busy;
} tk_blk_scratch;
// A free buffer (NULL when all n are taken: a bug of the owner's count).
void *tk_blk_scratch_take(tk_blk_scratch *p);
// buf (NULL, or one of the n) free again.
void tk_blk_scratch_put(tk_blk_scratch *p, const void *buf);

// ---- weight gradients handed on as the backward completes them ----

// A backward that runs from the last layer to the first over tensors declared in forward order
// tells whoever all-reduces the gradients (the engine's grads_ready, lib/engine/workload.h: on
// several ranks) which are final, so that their all-reduce overlaps the rest of the backward. A
// weight gradient in bf16 (tk_blk_conv.dwt) is final only once cast into its fp32 span: each report
// casts the spans it covers first (a launch a report); with no one to report to, all of them at
// the end (one launch).
typedef struct tk_blk_grads {
    int (*ready)(void *arg, size_t off, tk_err *e); // the owner's (the engine's grads_ready), or NULL
    void *arg;
    // this backward's (tk_blk_grads_begin)
    const float *base, *done;    // the gradient span the offsets count from; every gradient from
                                 // done to the span's end reported
    const tk_cast_span *casts;   // the model's weight-gradient casts (tk_blk_conv_cast_span), dst in
    int ncasts;                  // the span, in any order
} tk_blk_grads;

// Before a backward: the span (n floats at base) and its casts, nothing reported yet.
void tk_blk_grads_begin(tk_blk_grads *g, const float *base, size_t n, const tk_cast_span *casts, int ncasts);
// Every gradient from `from` (in the span) to its end is final but for the casts: those of the
// spans not cast yet that start at or after from are cast, then from's offset reported. Nothing
// while ready is NULL.
int tk_blk_grads_ready(const tk_blk_env *env, tk_blk_grads *g, const float *from, tk_err *e);
// The backward's end: the casts left, the whole span reported (ready NULL: every cast, at once).
int tk_blk_grads_end(const tk_blk_env *env, tk_blk_grads *g, tk_err *e);

// ---- initialization ----

// n values at h from (seed, stream) (core/philox.h): normal(0, sd), uniform(-a, a).
void tk_blk_fill_normal(float *h, size_t n, double sd, uint64_t seed, uint32_t stream);
void tk_blk_fill_uniform(float *h, size_t n, double a, uint64_t seed, uint32_t stream);

#ifdef __cplusplus
}
#endif
#endif
