// The hybrid embedding (the technique of NVIDIA's MLPerf DLRM submissions), on several ranks or on
// one through a communicator of world size 1 (there it saves the sorted sparse update of the hot
// rows: the replica's per-row sums and dense update are cheaper; contrib/bench/NOTES.md): the
// rows of every table that the data uses most ("frequent" rows) are replicated on every rank and
// trained data parallel, the rest stay model parallel with their owner. A frequent row is looked
// up locally by every rank and its gradient is all-reduced; only infrequent (sample, table) pairs
// cross the all-to-all, packed, with per-peer counts the host knows before the step (every rank
// decodes the whole global batch, so each computes its side of the exchange from the ids).
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

#include "workloads/dlrm.h"

#define TK_HY_MAX_WORLD 64

// One batch's exchange plan (kernels/hybrid_plan.h), per staging slot: the arrays on the device,
// the counts copied back to the host.
typedef struct tk_dlrm_hplan {
    int32_t *d;                  // the plan's regions (tk_hybrid_plan_layout), device
    int64_t *dcounts;            // (2W + 4) device, then the exchange matrix (W*W)
    // host copy: send_cnt[W], recv_cnt[W], n_send, n_recv, n_freq, nseg, then the matrix
    int64_t counts[2 * TK_HY_MAX_WORLD + 4 + TK_HY_MAX_WORLD * TK_HY_MAX_WORLD];
    int32_t *send_pad, *recv_src; // the fixed layout (tk_hybrid_plan_fixed): W*cap, b*T; device
    int fixed;                   // the batch goes by the fixed exchange (its matrix fits cap)
    int64_t cap;                 // the capacity its fixed layout was made for
    tk_event done;               // recorded after the step that read d (compute stream)
    int has_done;                // done has been recorded at least once
} tk_dlrm_hplan;

enum { TK_HP_SEND_ROWS, TK_HP_RECV_POS, TK_HP_FPOS, TK_HP_FROW, TK_HP_SEG_ROW, TK_HP_SEG_OFF, TK_HP_TOTAL };

typedef struct tk_dlrm_hybrid {
    int64_t nf, nf_own;          // replica rows; of them, rows of this rank's tables
    int64_t fbase[TK_DLRM_MAX_TABLES + 1]; // replica rows of table t: [fbase[t], fbase[t+1])
    double min_uses;             // the threshold in uses per global batch
    // The frequent rows' hash sets (kernels/hybrid_plan.h), on the device: hset, hoff (T), hbits
    // (T), fbase (T).
    uint64_t *hset;
    int64_t *hoff, *dfbase;
    int32_t *hbits;
    void *fr;                    // (nf, D) table dtype, device: the replica
    float *dfr;                  // (nf, D) f32: this rank's sums, then all ranks' (all-reduced)
    int64_t *own_off;            // {0, rows_total}: this rank's tables as one
    int32_t *own_f, *own_rows;   // (nf_own): replica rows of this rank's tables, and their table rows
    void *ws_own;                // tk_embedding_bwd_sgd workspace (B*tm x 1)
    void *ws_plan;               // tk_hybrid_plan's workspace (one plan at a time)
    void *ws_seg;                // tk_rows_segsum's workspace (the frequent uses' pieces)
    int64_t cap;                 // vectors a rank pair in the fixed exchange (0: exact only)
    int grow;                    // cap was chosen (auto): it grows to fit a batch that does not
    int64_t cap_max;             // the buffers' capacity (b tm when growing, else cap)
    int64_t growths;             // how many times cap grew
    tk_arena mem, xmem;          // the device allocations: everything else, and the buffers below
                                 // (they depend on cap_max)
    void *pack;                  // (max(b T, W cap_max), D) act: infrequent vectors received (fwd) / sent back (bwd)
    void *gown;                  // (W cap_max, D) act: the fixed backward's gradients for the owned rows
    size_t off[7];               // tk_hybrid_plan_layout of this rank
    tk_dlrm_hplan plan[2];       // per staging slot
    int cur;                     // the slot of the batch in the input buffers (-1: none planned)
    // traffic of this rank, summed over the batches it planned (tk_dlrm_hybrid_json)
    int64_t batches, fixed_batches;
    double a2a_bytes, a2a_bytes_plain, ar_bytes;
    double plan_s;               // host seconds from queuing a plan to having its counts
} tk_dlrm_hybrid;

#endif
