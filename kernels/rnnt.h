// The RNN-T (transducer) joint network's elementwise part and the transducer loss of MLPerf's
// speech benchmark (mlcommons/training rnn_speech_recognition/pytorch: rnnt/model.py RNNT.joint,
// rnnt/loss.py RNNTLoss over warp-transducer), fused the way NVIDIA's v1.x submissions fuse them
// with apex.contrib.transducer (TransducerJoint: packed output, ReLU and dropout in the same pass;
// TransducerLoss: the logits' gradient written in place), so that no fp32 (B, T, U+1, V) tensor
// exists: the caller's GEMM (joint_net's Linear(H, V)) turns h into the logits, this op turns the
// logits into the loss and overwrites them with their gradient, and the GEMM's backward takes it.
//
// Lattice. Utterance b has T_b encoder frames and U_b labels y_b (labels (B, Umax) int32, the first
// U_b used); its lattice is T_b x (U_b + 1) cells (t, u), one row of h and of the logits each.
// Rows: row(b, t, u) = row0[b] + t ld_b + u, with ld_b = U_b + 1 when packed (apex's packed_output:
// no padding rows; row0 the running sum of T_b (U_b + 1)) or Umax + 1 when padded (row0[b] =
// b Tmax (Umax + 1), the reference's (B, Tmax, Umax + 1, V) tensor; padding rows, t >= T_b or
// u > U_b, are written 0 by both ops). tk_rnnt_layout fills row0 from the lengths. Packed, rows
// may exceed row0[B] (a capacity: a step captured in a CUDA graph runs at fixed rows while the
// batch's lengths, in device memory, vary): the rows past row0[B] are padding rows too.
//
// Joint (model.py joint: joint_enc(f) + joint_pred(g) broadcast, joint_net's ReLU then Dropout):
//   h[row(b,t,u), j] = relu(f[b,t,j] + g[b,u,j]) * m[row H + j]           f (B, Tmax, H), g (B, Umax+1, H)
// with m the dropout factor of kernels/dropout.h (0 or 1 / (1 - p); element index row H + j of
// the call, so cpu and cuda drop the same elements), f + g added in fp32 and h rounded once to t.
// Backward: with s = f + g (recomputed; the mask regenerated, nothing stored)
//   df[b,t,j] = sum_{u <= U_b} dh[row, j] m [s > 0]   (0 for t >= T_b)
//   dg[b,u,j] = sum_{t < T_b}  dh[row, j] m [s > 0]   (0 for u > U_b)
// summed in fp64 by the reference, fp32 on cuda, rounded once to t.
//
// Loss (warp-transducer's, on raw logits z (rows, V)): per row lp_v = z_v - logsumexp(z), blank
// = the last index in MLPerf (train.py: blank_idx = tokenizer.num_labels, V = num_labels + 1; a
// parameter here). alpha(0,0) = 0, alpha(t,u) = logaddexp(alpha(t-1,u) + lp_blank(t-1,u),
// alpha(t,u-1) + lp_{y_{u-1}}(t,u-1)); beta(T-1,U) = lp_blank(T-1,U), beta(t,u) =
// logaddexp(beta(t+1,u) + lp_blank(t,u), beta(t,u+1) + lp_{y_u}(t,u)); log P(y|x) = beta(0,0),
// nll_b = -beta(0,0). Reduction: RNNTLoss(blank_idx) keeps warp-transducer's default "mean",
// which sums nll over the batch and divides by the batch size (not by lengths, whatever loss.py's
// docstring says): here loss = scale sum_b nll_b, the reference's scale = 1 / B (a rank's share
// in training: 1 / global batch). Gradient (fused softmax backward), per row of cell (t, u):
//   dz_v = scale (exp(lp_v + alpha + beta - ll) - [v == blank] exp(alpha + lp_blank + beta(t+1,u) - ll)
//                                               - [v == y_u]  exp(alpha + lp_y + beta(t,u+1) - ll))
// with ll = beta(0,0), beta(T,U) = 0 and beta outside the lattice -inf.
// Types: z and dz in t (TK_F32 or TK_BF16: fp32 log-sum-exp, dz rounded once); dz may be z (in
// place: apex's fused backward) or NULL (the value only, as in evaluation); loss (1) and costs (B,
// nll_b; may be NULL) fp32; acc (may be NULL; the engine's loss_acc, lib/engine/workload.h) f64:
// acc[0] += scale sum_b nll_b (before its rounding to loss), acc[1] += 1. Precision: the
// reference computes in fp64; cuda sums each row's exp in fp32 (each lane's share; the lanes'
// sums, the log, alpha and beta in fp64). Every pointer is in the backend's memory (device memory
// on cuda). Shapes: 1 <= T_b <= Tmax, 0 <= U_b <= Umax, labels of the used positions in [0, V)
// and not blank: the reference checks (TK_EINTERNAL naming the utterance); the cuda kernels give a
// label outside [0, V) probability 0 (a loss of +inf) and trust the lengths and row0.
// cuda: the row pass is a warp a row; alpha and beta a block an utterance, over the lattice's
// anti-diagonals (the wavefront: cells t + u = d depend only on diagonal d - 1); the per-utterance
// losses added in order by one thread (deterministic, no atomics). ws: tk_rnnt_loss_ws_bytes.
#ifndef TK_KERNELS_RNNT_H
#define TK_KERNELS_RNNT_H

#ifdef __cplusplus
extern "C" {
#endif
#include "dropout.h"
#include "gpu/gpu.h"

// The lattice rows of a batch (see above). T, U, labels and row0 in the backend's memory.
typedef struct tk_rnnt_lay {
    int B, Tmax, Umax;   // padded extents: f (B, Tmax, H), g (B, Umax + 1, H), labels (B, Umax)
    int packed;          // 1: rows packed (no padding), 0: padded (B, Tmax, Umax + 1)
    int64_t rows;        // rows of h and of the logits (row0[B]; packed: >= row0[B]), a host value
    const int *T, *U;    // (B) frames and labels of each utterance
    const int64_t *row0; // (B + 1) first row of each utterance; row0[B] = rows
} tk_rnnt_lay;

// Host helper: checks the lengths (host arrays) and fills row0 (host, B + 1 values) for the layout;
// returns the rows (>= 1) or -1 with e filled (TK_EINTERNAL naming the utterance).
int64_t tk_rnnt_layout(int B, int Tmax, int Umax, const int *T, const int *U, int packed, int64_t *row0, tk_err *e);

// h (rows, H) in t from f (B, Tmax, H) and g (B, Umax + 1, H) in t; drop NULL or p 0: no dropout.
int tk_rnnt_joint_fwd(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                      const tk_dropout *drop, void *h, tk_err *e);
// df (B, Tmax, H) and dg (B, Umax + 1, H) in t from dh (rows, H) in t (the same f, g and drop).
int tk_rnnt_joint_bwd(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                      const tk_dropout *drop, const void *dh, void *df, void *dg, tk_err *e);
// The loss of the logits z (rows, V) in t; dz (rows, V) in t, z itself, or NULL.
size_t tk_rnnt_loss_ws_bytes(tk_backend b, int B, int64_t rows);
int tk_rnnt_loss(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int V, int blank, const int *labels, const void *z,
                 float scale, double *acc, float *loss, float *costs, void *dz, void *ws, tk_err *e);

int tk_rnnt_joint_fwd_ref(tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                          const tk_dropout *drop, void *h, tk_err *e);
int tk_rnnt_joint_bwd_ref(tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                          const tk_dropout *drop, const void *dh, void *df, void *dg, tk_err *e);
int tk_rnnt_loss_ref(tk_dtype t, const tk_rnnt_lay *L, int V, int blank, const int *labels, const void *z,
                     float scale, double *acc, float *loss, float *costs, void *dz, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_rnnt_loss_ws_bytes_cuda(int B, int64_t rows);
int tk_rnnt_joint_fwd_cuda(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                           const tk_dropout *drop, void *h, tk_err *e);
int tk_rnnt_joint_bwd_cuda(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                           const tk_dropout *drop, const void *dh, void *df, void *dg, tk_err *e);
int tk_rnnt_loss_cuda(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int V, int blank, const int *labels,
                      const void *z, float scale, double *acc, float *loss, float *costs, void *dz, void *ws,
                      tk_err *e);
#endif

// The checks both sides make on the host values.
static inline int tk_rnnt_check(tk_dtype t, const tk_rnnt_lay *L, int width, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "rnnt: activations in %s", tk_dtype_name(t));
    if (!L || L->B < 1 || L->Tmax < 1 || L->Umax < 0 || L->rows < 1 || width < 1 ||
        (double)L->rows * width > 4.0e18 || (double)L->B * L->Tmax * (L->Umax + 1.0) > 4.0e18)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: bad shape");
    if (!L->packed && L->rows != (int64_t)L->B * L->Tmax * (L->Umax + 1))
        return tk_err_set(e, TK_EINTERNAL, "rnnt: %lld rows padded (B Tmax (Umax + 1) = %lld)", (long long)L->rows,
                          (long long)L->B * L->Tmax * (L->Umax + 1));
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
