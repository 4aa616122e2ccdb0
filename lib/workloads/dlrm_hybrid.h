// The hybrid embedding of several ranks (the technique of NVIDIA's MLPerf DLRM submissions): the
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
// Updates are the tables' own (tk_embedding_bwd_sgd over the replica with the all-reduced sums), so
// the result equals one rank's up to the order of fp32 sums, as the plain exchange does.
#ifndef TK_WORKLOADS_DLRM_HYBRID_H
#define TK_WORKLOADS_DLRM_HYBRID_H

#include "workloads/dlrm.h"

#define TK_HY_MAX_WORLD 64

// One batch's exchange plan: host arrays (pinned) built by tk_dlrm_hybrid_plan, and their device
// copy. Row numbers are int32: positions in the grouped exchange layout ([owner][b][tm] vectors),
// rows of this rank's tables (concatenated), rows of the replica.
typedef struct tk_dlrm_hplan {
    int32_t *h, *d;              // one host and one device allocation holding the arrays below
    size_t cap;                  // int32 entries of each
    size_t used;                 // int32 entries of this plan (copied to d)
    size_t send_cnt[TK_HY_MAX_WORLD]; // vectors this rank sends peer j (fwd; received back in bwd)
    size_t recv_cnt[TK_HY_MAX_WORLD]; // vectors it receives from owner i
    int64_t n_send, n_recv, n_freq;
    int nseg;
    // offsets into h / d of: send_rows (n_send): owned-table rows looked up for peer j's samples,
    // peer-major, then sample, then table; recv_pos (n_recv): where each received vector goes in the
    // grouped layout; fpos / frow (n_freq): this rank's frequent uses sorted by replica row, their
    // positions and replica rows; seg_off (nseg + 1) / seg_row (nseg): the runs of equal replica rows.
    size_t o_send_rows, o_recv_pos, o_fpos, o_frow, o_seg_off, o_seg_row;
    tk_event done;               // recorded after the step that read d (compute stream)
    int has_done;                // done has been recorded at least once
} tk_dlrm_hplan;

typedef struct tk_dlrm_hybrid {
    int64_t nf, nf_own;          // replica rows; of them, rows of this rank's tables
    int64_t fbase[TK_DLRM_MAX_TABLES + 1]; // replica rows of table t: [fbase[t], fbase[t+1])
    uint64_t *hset[TK_DLRM_MAX_TABLES];    // per table: hash set id -> replica row (NULL: none)
    int hbits[TK_DLRM_MAX_TABLES];         // log2 of its slots
    double min_uses;             // the threshold in uses per global batch
    void *fr;                    // (nf, D) table dtype, device: the replica
    float *dfr;                  // (nf, D) f32: this rank's sums, then all ranks' (all-reduced)
    int32_t *fr_ident;           // (nf) 0..nf-1: the replica update's indices
    int64_t *fr_off;             // {0, nf}: the replica as one table
    int64_t *own_off;            // {0, rows_total}: this rank's tables as one table
    int32_t *own_f, *own_rows;   // (nf_own): replica rows of this rank's tables, and their table rows
    void *ws_fr, *ws_own;        // tk_embedding_bwd_sgd workspaces (nf x 1; B*tn x 1)
    void *pack;                  // (b T, D) act: infrequent vectors received (fwd) / sent back (bwd)
    tk_dlrm_hplan plan[2];       // per staging slot
    int32_t *fidx;               // (B, T) host scratch of tk_dlrm_hybrid_plan: replica row or -1
    int32_t *fscratch, *fcount;  // (2 b T) its frequent uses before sorting; (nf + 1) its counts
    int cur;                     // the slot of the batch in the input buffers (-1: none planned)
    // traffic of this rank, summed over the batches it planned (tk_dlrm_hybrid_traffic)
    int64_t batches;
    double a2a_bytes, a2a_bytes_plain, ar_bytes;
    double plan_s;               // host seconds spent planning
} tk_dlrm_hybrid;

#endif
