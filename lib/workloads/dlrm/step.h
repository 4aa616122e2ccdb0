// DLRM's training step and forward.
//
// Several ranks (hybrid parallelism as in NVIDIA's MLPerf DLRM, the engine's communicator): the
// tables are model parallel: with Tm = ceil(T / W), rank r owns the contiguous block [r*Tm, min(T,
// (r+1)*Tm)) and allocates only those (the last ranks own fewer, possibly none). The MLPs are data
// parallel: every rank holds the same dense weights. Rank r's input buffers get its samples [r*b,
// (r+1)*b) of the global batch, b = B / W (the same data order as one rank), on which it trains the
// MLPs; it looks up its tables for all B samples, whose ids the ranks all-gather into cat_all over
// the same communicator (the plain exchange at the start of its step, on the comm stream; the
// hybrid embedding before planning the batch, hybrid.h), so every sample is decoded once a job.
// Forward: lookup -> send buffer [dest rank j][b][Tm][D] (the B samples in order are exactly
// dest-major) -> all-to-all (on the comm stream, overlapping the bottom MLP) -> [src rank
// i][b][Tm][D], which the interaction reads as it is (kernels/interaction.h's grouped layout with G
// = Tm: rank i's block is table group i, in global table order), and whose backward writes the
// vectors' gradients in the same layout straight into the send buffer. Slots of tables a rank does
// not have (T % W != 0) are zero and never read. The loss gradient is normalized by B (not b), so
// the dense gradients are plain sums over ranks (all-reduced in two spans, the top MLP's while the
// interaction and bottom MLP backward run, then the bottom MLP's) and the looked-up vectors'
// gradients go back by the reverse all-to-all to their table's owner, which applies the fused
// sparse update for its tables over all B samples. The results equal one rank's up to the order of
// fp32 sums (not bitwise). Every function below is then collective: all ranks call it in the same
// order. A communicator of world size 1 runs this exchange step on one rank (the all-to-alls are
// copies, the all-reduces identities), for checking its code, and the hybrid embedding's
// (hybrid.h), on one device.
#ifndef TK_WORKLOADS_DLRM_STEP_H
#define TK_WORKLOADS_DLRM_STEP_H

#include "workloads/dlrm/types.h"

// The engine's step: forward, loss (accumulated in m->env.loss_acc), backward (the dense gradients,
// all-reduced over the ranks inside), the fused sparse update of the tables at *m->env.lr. No host
// reads; the engine's schedule and optimizer run around it, then tk_dlrm_after_update.
int tk_dlrm_fwd_bwd(void *model, tk_err *e);
// After the optimizer's update of the dense span (which wrote the bf16 copy): layer 0's padded copy.
int tk_dlrm_after_update(void *model, tk_err *e);
// Forward only on n <= batch samples of device inputs (dense, cat), logits into out (n) device.
// Several ranks: dense and cat hold all n samples on every rank; rank r computes the MLPs for its
// share [r*bl, (r+1)*bl) with bl = ceil(n / W), and every rank gets all n logits in out.
int tk_dlrm_forward(tk_dlrm *m, const int32_t *dense, const int32_t *cat, int n, float *out, tk_err *e);
// The CUDA-graph key of the step of the batch in the input buffers: 0 without the hybrid
// embedding; with it, the capacity of the fixed exchange when the batch goes by it (a graph made
// for another capacity, which may grow, is made again), else -1 (eager). Such a graph is the step
// of that staging slot (tk_dlrm_graph_per_slot: the hybrid step reads the slot's plan in place).
int64_t tk_dlrm_graph_key(void *model);
int tk_dlrm_graph_per_slot(const void *model);
// After queuing a step that tk_dlrm_fwd_bwd did not queue itself (a CUDA graph's launch): marks
// the slot's plan free for the batch after next (the step does it when not capturing).
int tk_dlrm_step_queued(void *model, tk_err *e);

#endif
