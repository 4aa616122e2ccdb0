// Optimizers over ONE flat fp32 master-weight buffer (the engine's parameters, gradients and
// optimizer state each live in one flat allocation): SGD (with momentum, dampening, Nesterov and
// L2 weight decay), Adam, AdamW, LAMB and LARS, one update per call, with the learning rate read
// from ONE f32 device scalar and the update count from ONE i64 device counter (both written by
// tk_lr_schedule just before), so nothing here needs a host value or a sync: the calls can be
// captured in a CUDA graph. Per-tensor behaviour comes from segments: tensor k is the floats
// [seg[k].off, seg[k].off + seg[k].n) of the buffers, with flags TK_SEG_NO_DECAY (no weight decay:
// biases, LayerNorm / BatchNorm parameters) and TK_SEG_NO_ADAPT (LAMB / LARS: trust ratio 1).
// Segments are sorted by offset and do not overlap; floats in no segment (alignment padding) are
// left untouched. The optimizer state (kernels/optim_math.h names it m and v) is state[0 .. n) and,
// for two-moment optimizers, state[n .. 2n), at the parameters' offsets.
//
// The formulas, per element of a segment with weight decay wd_s (0 under TK_SEG_NO_DECAY), in
// fp32 with each operation rounded (no fused multiply-add), per-step scalars in fp64 rounded to
// fp32 once, and norms accumulated in fp64. g is the gradient times the clip factor (below); t is
// *step, the number of updates including this one; lr is *lr.
//
// TK_OPT_SGD, TK_OPT_MOMENTUM (torch.optim.SGD; SGD is the momentum = 0 case, with no state):
//   d = g + wd_s * w
//   momentum: b = d if t == 1 else momentum * b + (1 - dampening) * d   (state m)
//             d = d + momentum * b if nesterov else b
//   w = w - lr * d
// TK_OPT_ADAM, TK_OPT_ADAMW (torch.optim.Adam / AdamW; AdamW's decay is decoupled):
//   ADAM: d = g + wd_s * w     ADAMW: d = g, w = w * (1 - lr * wd_s)
//   m = beta1 * m + (1 - beta1) * d;  v = beta2 * v + (1 - beta2) * d * d
//   w = w - (lr / bc1) * (m / (sqrt(v) / sqrt(bc2) + eps))
//   bc1 = 1 - beta1^t, bc2 = 1 - beta2^t (1 and 1 when bias_correction is off)
// TK_OPT_LAMB (MLPerf BERT; see below for the choice of variant):
//   m = beta1 * m + (1 - beta1) * g;  v = beta2 * v + (1 - beta2) * g * g
//   u = (m / bc1) / (sqrt(v / bc2) + eps) + wd_s * w
//   r = ||w|| / ||u|| over the segment, or 1 when either norm is 0 or under TK_SEG_NO_ADAPT
//   w = w - (lr * r) * u                        (||w|| is the norm before the update)
// TK_OPT_LARS (MLPerf ResNet-50; see below):
//   d = g + wd_s * w
//   r = trust_coef * ||w|| / (||g|| + wd_s * ||w|| + eps) over the segment, or 1 when either
//       norm is 0 or under TK_SEG_NO_ADAPT
//   b = momentum * b + (lr * r) * d             (momentum after the scaling by the local rate)
//   w = w - b, or with nesterov w = w - (momentum * b + (lr * r) * d)
// Gradient clipping, any kind, when max_grad_norm > 0 (torch.nn.utils.clip_grad_norm_ and apex's
// LAMB kernels use this formula): N = ||gradient|| over ALL segments, c = max_grad_norm /
// (N + 1e-6), g = gradient * c when c < 1. LARS's ||g|| is then c times the raw norm.
// Non-finite gradients: with skip_nonfinite, when N is not finite (a NaN or Inf anywhere in the
// segments) nothing is written (weights, state, copy) and *step is decremented, so the counter
// keeps counting applied updates and the next schedule call repeats this rate (NVIDIA's
// DistributedFusedLAMB: _step += is_finite). Without it NaN/Inf flow into the weights, for the
// engine's NaN check to see.
//
// Which LAMB. MLPerf BERT's reference (mlcommons/training language_model/tensorflow/bert,
// optimization.py + lamb_optimizer_v1.py) and NVIDIA's v1.1 submission (apex
// DistributedFusedLAMB, multi_tensor_distopt_lamb_kernel.cu) agree on the update above: clip the
// gradient to global norm 1.0 before the moments, Adam moments with bias correction, decoupled
// decay 0.01 added to the update (not to the gradient), per-tensor trust ratio ||w|| / ||u|| with
// 1 when either norm is 0, and biases / LayerNorm excluded from decay and from adaptation. They
// differ in details we choose as follows: the clip factor is apex's max / (N + 1e-6) rather than
// TF's max / max(N, max) (the two differ by 1e-6 relative, only when clipping); the gradient
// norm is that of the reduced gradient, the reference's "all gradients" (NVIDIA's
// clip_after_ar=False clips each rank's gradient by its own norm before the all-reduce, a speed
// trick that changes the math); adaptation follows TK_SEG_NO_ADAPT (TF's
// exclude_from_layer_adaptation, which defaults to the decay exclusions) rather than apex's
// use_nvlamb=False rule "adapt iff weight decay != 0" (the same tensors for BERT, whose decay is
// 0.01 on every non-excluded tensor). Bias corrections are computed in fp64 then rounded (apex
// uses fp32 pow).
// Which LARS. The reference (mlcommons/training resnet-tf2 lars_optimizer.py) and NVIDIA's v1.1
// MXNet (SGDwLARS / SGDwFASTLARSV2, MXNet's multi_lars + lars_multi_sgd_mom_update) agree on r
// and b above with eta = 0.001 and BatchNorm / bias excluded from both decay and adaptation.
// eps is 0 as MLPerf requires (lars_epsilon == 0; the TF reference replaces 0 by Keras' 1e-7,
// a quirk we do not copy). NVIDIA's V2 also rescales the momentum by lr_t / lr_(t-1) each step;
// that is not done here.
#ifndef TK_KERNELS_OPTIM_H
#define TK_KERNELS_OPTIM_H

#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TK_OPT_SGD, TK_OPT_MOMENTUM, TK_OPT_LAMB, TK_OPT_LARS, TK_OPT_ADAM, TK_OPT_ADAMW } tk_opt_kind;

// One tensor of the flat buffer: floats [off, off + n). Offsets that are multiples of 4 (16
// bytes) let the cuda kernels use 16-byte accesses; others take a scalar path.
typedef struct tk_opt_seg {
    int64_t off, n;
    int32_t flags;
    int32_t slot; // tk_optim_step_dist: the tensor (slot of the norm sums) it is part of; else unused
} tk_opt_seg;
#define TK_SEG_NO_DECAY 1 // no weight decay (biases, LayerNorm / BatchNorm parameters)
#define TK_SEG_NO_ADAPT 2 // LAMB / LARS: trust ratio 1 (excluded from layer-wise adaptation)

typedef struct tk_opt_hp {
    tk_opt_kind kind;
    double momentum, dampening; // SGD family (SGD: momentum 0), LARS (momentum only)
    int nesterov;               // SGD family (needs momentum > 0, dampening 0), LARS
    double beta1, beta2, eps;   // Adam, AdamW, LAMB; eps is also LARS's trust-ratio epsilon
    double weight_decay;        // every kind; per segment 0 under TK_SEG_NO_DECAY
    int bias_correction;        // Adam, AdamW, LAMB
    double max_grad_norm;       // every kind: clip to this global norm (0 = no clipping)
    double trust_coef;          // LARS eta
    int skip_nonfinite;         // every kind: skip the update when the gradient norm is NaN/Inf
} tk_opt_hp;

const char *tk_opt_kind_name(tk_opt_kind k); // "sgd", "momentum", "lamb", "lars", "adam", "adamw"
// State floats per parameter: 0 (SGD), 1 (momentum, LARS) or 2 (Adam, AdamW, LAMB).
size_t tk_optim_state_floats(tk_opt_kind k);
// Workspace bytes tk_optim_step needs for nseg segments over n floats (0 on cpu).
size_t tk_optim_ws_bytes(tk_backend b, int nseg, size_t n);
// The argument checks both sides share (host only, no device access): TK_EINTERNAL for a
// hyperparameter out of range, segments unsorted / overlapping / outside [0, n), an unsupported
// copy type. A config is checked for the user by lib/engine/optim_config.c first.
int tk_optim_check(const tk_opt_hp *hp, size_t n, const tk_opt_seg *seg, int nseg, tk_dtype copy_type,
                   tk_err *e);

// w, g (n) f32; state (tk_optim_state_floats * n) f32 or NULL when 0; seg_dev / seg_host: the
// same nseg segments in the backend's memory and in host memory (on cpu the same pointer may be
// passed twice); lr (1) f32 and step (1) i64 device scalars (step: the count including this
// update, decremented when a non-finite gradient is skipped); copy (n) in copy_type (TK_BF16 or
// TK_F16) or NULL: the updated weights rounded to nearest even, at the same offsets (the
// low-precision compute copy); ws: tk_optim_ws_bytes(backend, nseg, n) bytes of device memory.
int tk_optim_step(tk_ctx *c, const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                  const tk_opt_seg *seg_dev, const tk_opt_seg *seg_host, int nseg, const float *lr,
                  int64_t *step, void *copy, tk_dtype copy_type, void *ws, tk_err *e);
int tk_optim_step_ref(const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                      const tk_opt_seg *seg, int nseg, const float *lr, int64_t *step, void *copy,
                      tk_dtype copy_type, tk_err *e);

// ---- the distributed form (ZeRO-1: each rank updates its share of the flat buffer) ----
// Each of `world` ranks runs the update on the floats it owns only: its segments are the pieces
// of the tensors that fall in its share, several pieces of one tensor carrying that tensor's slot
// (0 <= slot < nslot; a tensor with no piece on this rank still has its slot). The norms the
// formulas need over a whole tensor or over all tensors (the clip norm N; LAMB's ||w||, ||u||)
// are this rank's partial fp64 sums, handed to `gather`, which must fill all[r * count + i] with
// rank r's mine[i] for every rank (an all-gather, ordered after the work queued so far on the
// compute stream, and the compute stream's next work after it); every rank then adds the ranks'
// partials in rank order, so all ranks get the same bits, and the update equals the one-rank
// update over all segments up to the order of the fp64 sums. mine and all are device memory
// (cpu: host memory) inside the workspace. Two gathers a LAMB update (N, then the 2 x nslot
// tensor sums), one for the others when they need N; LARS (per-tensor norms before the update)
// is not supported (TK_EINTERNAL). The caller gathers the updated weights afterwards.
typedef int (*tk_optim_gather_fn)(void *arg, const double *mine, double *all, size_t count, tk_err *e);
typedef struct tk_optim_dist {
    int world;  // ranks (the gathers' length)
    int nslot;  // tensors
    tk_optim_gather_fn gather;
    void *arg;
} tk_optim_dist;
// Workspace bytes of the distributed form (cuda; 0 on cpu).
size_t tk_optim_ws_bytes_dist(tk_backend b, int nseg, size_t n, const tk_optim_dist *d);
// tk_optim_step with d (NULL: tk_optim_step itself). ws: tk_optim_ws_bytes_dist bytes.
int tk_optim_step_dist(tk_ctx *c, const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                       const tk_opt_seg *seg_dev, const tk_opt_seg *seg_host, int nseg, const tk_optim_dist *d,
                       const float *lr, int64_t *step, void *copy, tk_dtype copy_type, void *ws, tk_err *e);
int tk_optim_step_dist_ref(const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                           const tk_opt_seg *seg, int nseg, const tk_optim_dist *d, const float *lr, int64_t *step,
                           void *copy, tk_dtype copy_type, tk_err *e);
// The checks of tk_optim_check plus the distributed form's: slots in [0, nslot), non-decreasing
// (a tensor's pieces are consecutive), world >= 1, a gather, and no LARS.
int tk_optim_check_dist(const tk_opt_hp *hp, size_t n, const tk_opt_seg *seg, int nseg, const tk_optim_dist *d,
                        tk_dtype copy_type, tk_err *e);

#ifdef TK_HAVE_CUDA
size_t tk_optim_ws_bytes_cuda(int nseg, size_t n, const tk_optim_dist *d);
int tk_optim_step_cuda(tk_ctx *c, const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                       const tk_opt_seg *seg_dev, const tk_opt_seg *seg_host, int nseg, const tk_optim_dist *d,
                       const float *lr, int64_t *step, void *copy, tk_dtype copy_type, void *ws, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
