// The hybrid embedding (the technique of NVIDIA's MLPerf DLRM submissions), on several ranks or on
// one through a communicator of world size 1 (there it saves the sorted sparse update of the hot
// rows: the replica's per-row sums and dense update are cheaper; contrib/bench/NOTES.md): the
// rows of every table that the data uses most ("frequent" rows) are replicated on every rank and
// trained data parallel, the rest stay model parallel with their owner. A frequent row is looked
// up locally by every rank and its gradient is all-reduced; only infrequent (sample, table) pairs
// cross the all-to-all, packed, with per-peer counts the host knows before the step (every rank
// has every sample's ids, all-gathered from the ranks' shares before the plan, so each computes
// its side of the exchange from them).
//
// Which rows are frequent: their expected uses per global batch u, counted over the first batches
// of the training data (tk_dlrm_hybrid_setup), against the traffic each choice costs a rank per
// step. An infrequent use moves one vector forward and one gradient back, 2 D es bytes, when the
// sample's rank is not the table's owner ((W-1)/W of uses); a frequent row costs its fp32 gradient
// in the all-reduce, 2 (W-1)/W D 4 bytes on a ring. So a row is frequent when u * es >= 4 (bf16
// exchange: 2 uses a batch, fp32: 1), the rows with most uses first, at most max_rows of them.
//
// The replica (fr, in the table dtype) is the truth for its rows during training; after each step's
// update each owner copies its tables' frequent rows back into its tables, so the tables are whole
// at every step boundary: evaluation, checkpoints and the plain exchange read them unchanged.
// Updates are the tables' arithmetic (tk_embedding_dense_sgd over the replica with the all-reduced
// sums: tk_embedding_bwd_sgd's update of a row used once), so the result equals one rank's up to
// the order of fp32 sums, as the plain exchange does.
//
// Two ways to exchange a batch's infrequent vectors. Exact: per-peer counts the host reads back
// from the plan, a variable all-to-all, every kernel sized on the host; no CUDA graph can hold it.
// Fixed: cap vectors for every rank pair, cap chosen from the statistics batches (the largest pair
// count seen, plus 5% and 32) and grown the same way when a batch does not fit (every rank sees
// the same matrix, so all grow alike; the buffers are sized for the plain exchange's b tm, and a
// graph made for another cap is made again), or given; the places past a pair's count are padding
// (index -1: rows_copy sends zeros, the sparse update skips them; kernels/rows.h, embedding.h), and
// every other size is a count the kernels read on the device. A step is fixed when its whole exchange matrix (every
// pair's count, tk_hybrid_exchange_counts, the same on every rank) fits cap, and then it is the
// same sequence of kernels and collectives every time: one CUDA graph per staging slot. Both ways
// add the same gradients in the same order, so they train alike bit for bit; a batch that does not fit a given cap runs exact, eagerly.
#ifndef TK_WORKLOADS_DLRM_HYBRID_H
#define TK_WORKLOADS_DLRM_HYBRID_H

#include <jansson.h>

#include "workloads/dlrm/types.h"

// The table's prepare, with --hybrid-embedding (cfg.hybrid): the replicated rows are chosen from
// the first hybrid_stat_batches batches of the training data of reader rd (a tk_dlrm_data; every
// rank reads the same ones, so every rank chooses the same rows; hybrid.c's hybrid_setup); *line:
// {"type": "hybrid_embedding", "stat_samples", "setup_s", "rows": the statistics of
// tk_dlrm_result_extra}. From then on tk_dlrm_hybrid_stage plans each batch's exchange on the
// device (a staging step later: tk_dlrm_hybrid_depth) and the step uses the plan; a batch whose exchange fits the capacity can be captured in
// a CUDA graph (tk_dlrm_graph_key). Evaluation and checkpoints read the tables, whole at every
// step end.
int tk_dlrm_prepare(void *model, void *rd, int64_t steps_per_epoch, json_t **line, tk_err *e);
// The replica from the tables (collective; nothing when off).
int tk_dlrm_hybrid_refresh(tk_dlrm *m, tk_err *e);
// The table's staged: after the copy of a batch into staging slot `slot` (device fields dev), on
// `stream` (the copy stream): first plans the batch staged before, if not yet planned (waits for
// its ids' all-gather within the timeout, plans its exchange once the step that read that slot's
// previous plan is done, and waits for its counts: the host needs them to queue the exchange);
// then several ranks all-gather this slot's ids dev[2] (this rank's b samples') into cat_all over
// the model's communicator (on the device after the collectives of the step queued before it),
// without waiting for it. Collective on several ranks. Off: nothing. A slot whose batch's step
// has not been queued yet is TK_EINTERNAL.
int tk_dlrm_hybrid_stage(void *model, int slot, void *const *dev, int stream, tk_err *e);
// The table's use: the slot's batch is the input; plans it if staged has not (the engine staged
// nothing after it), and the step (the compute stream) reads the slot's plan once it is made.
int tk_dlrm_hybrid_use(void *model, int slot, tk_err *e);
// The table's stage_depth: 3 with the hybrid embedding (staged then plans each batch a step after
// its all-gather was issued: the all-gather of batch n + 2 goes before step n + 1 is queued, and
// the host waits for it and plans while step n + 1 waits its turn), else 2.
int tk_dlrm_hybrid_depth(const void *model);
void tk_dlrm_hybrid_destroy(tk_dlrm *m);
// The table's result_extra: {"hybrid_embedding": {"frequent_rows", "frequent_rows_own",
// "min_uses_per_batch", "capacity", "capacity_growths", "batches", "fixed_batches",
// "a2a_bytes_per_step", "allreduce_bytes_per_step", "plain_a2a_bytes_per_step", "saved_fraction",
// "plan_ms_per_batch" (host time from queuing a batch's plan to having its counts)}}: this
// rank's bytes sent per step, averaged over the batches it planned, against the plain exchange's
// (NULL when off).
json_t *tk_dlrm_result_extra(const void *model);

#endif
