// The hybrid embedding's per-batch exchange plan (lib/workloads/dlrm_hybrid.h), for rank `rank` of
// W: which uses of its tables it sends to which peer, where the vectors it receives go, and its
// samples' uses of the replicated (frequent) rows grouped by row. A pure function of the batch's
// ids and the frequent-row hash sets, computed on the device (cuda) or the host (the reference),
// so the host only reads back the counts.
//
// Shapes: B samples, T tables, b = B / W samples a rank, tm = ceil(T / W) table slots a rank;
// rank i owns tables [i*tm, min(T, (i+1)*tm)) (tn_i of them). A use is (sample s, table t); its
// position in the grouped exchange layout of the rank holding sample s is (i*b + s % b)*tm + t - i*tm
// for the table's owner i. A use is frequent when its id is in table t's hash set.
//
// Outputs, in out (int32, regions at the fixed offsets of tk_hybrid_plan_layout):
//   send_rows  the infrequent uses of this rank's tables, peer-major (peer j's samples
//              [j*b, (j+1)*b)), then sample, then table: own_off[t - t0] + id (rows of the owned
//              tables concatenated); counts[j] = how many go to peer j.
//   recv_pos   this rank's infrequent uses in the order they arrive: owner-major, then sample, then
//              table: their positions; counts[W + i] = how many come from owner i.
//   fpos, frow this rank's frequent uses sorted by replica row (fbase[t] + the set's local row),
//              stable (ties in owner-major, sample, table order): positions and replica rows.
//   seg_row    the distinct replica rows of frow, ascending; seg_off (nseg + 1) where each run
//              starts in fpos/frow, then n_freq.
//   counts[2W .. 2W+3] = n_send, n_recv, n_freq, nseg (int64).
#ifndef TK_KERNELS_HYBRID_PLAN_H
#define TK_KERNELS_HYBRID_PLAN_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

#ifdef __CUDACC__
#define TK_HP_HD __host__ __device__
#else
#define TK_HP_HD
#endif

// The hash sets: table t's set is hset[hoff[t] .. hoff[t] + 2^hbits[t]) (hbits[t] = 0: no frequent
// rows), open addressing with linear probing from tk_hset_slot; an entry is
// (uint64)(id + 1) << 32 | local row, 0 = empty.
static inline TK_HP_HD uint32_t tk_hset_slot(int32_t id, int bits) { return (uint32_t)id * 0x9E3779B1u >> (32 - bits); }

// The replica row of id in table t, or -1.
static inline TK_HP_HD int32_t tk_hset_find(const uint64_t *hset, const int64_t *hoff, const int32_t *hbits,
                                         const int64_t *fbase, int t, int32_t id) {
    int bits = hbits[t];
    if (bits == 0) return -1;
    const uint64_t *hs = hset + hoff[t];
    const uint32_t mask = ((uint32_t)1 << bits) - 1;
    const uint64_t key = (uint64_t)(uint32_t)(id + 1) << 32;
    for (uint32_t i = tk_hset_slot(id, bits);; i = (i + 1) & mask) {
        uint64_t v = hs[i];
        if (!v) return -1;
        if ((v & ~(uint64_t)0xffffffffu) == key) return (int32_t)(fbase[t] + (uint32_t)v);
    }
}

typedef struct tk_hybrid_plan_args {
    int B, T, W, rank, tm;
    const int32_t *cat;      // (B, T) ids, in range (the loader folded them)
    const uint64_t *hset;    // the hash sets (above)
    const int64_t *hoff;     // (T)
    const int32_t *hbits;    // (T)
    const int64_t *fbase;    // (T) first replica row of each table
    const int64_t *own_off;  // (tn + 1) row offsets of the owned tables (concatenated)
    int64_t nf;              // replica rows (frow < nf)
    int32_t *out;            // tk_hybrid_plan_layout(...)[6] entries
    int64_t *counts;         // (2W + 4)
    void *ws;                // tk_hybrid_plan_ws_bytes bytes
    int stream;              // the context's stream the work is queued on (cuda)
} tk_hybrid_plan_args;

// Offsets (int32 entries) of send_rows, recv_pos, fpos, frow, seg_row, seg_off in out, and [6] the
// total: B*tn, then b*T each, seg_off b*T + 1.
void tk_hybrid_plan_layout(int B, int T, int W, int rank, int tm, size_t off[7]);
size_t tk_hybrid_plan_ws_bytes(tk_backend be, int B, int T, int W, int64_t nf);
int tk_hybrid_plan(tk_ctx *c, const tk_hybrid_plan_args *a, tk_err *e);
int tk_hybrid_plan_ref(const tk_hybrid_plan_args *a, tk_err *e);
// The exchange matrix of the whole batch, the same on every rank: mat[i*W + j] = the infrequent
// uses of owner i's tables by rank j's samples = the vectors i sends j forward (and j returns in
// the backward); rank r's plan has send_cnt[j] = mat[r*W + j] and recv_cnt[i] = mat[i*W + r].
// Reads a's shape, cat and hash sets (rank, own_off, out, counts, ws unused). mat: W*W int64,
// device (host on cpu); on a->stream (cuda).
int tk_hybrid_exchange_counts(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t *mat, tk_err *e);
int tk_hybrid_exchange_counts_ref(const tk_hybrid_plan_args *a, int64_t *mat, tk_err *e);

// A finished plan (a->out, a->counts, as tk_hybrid_plan left them) laid out for the fixed-size
// exchange of cap vectors per rank pair, on a->stream: send_pad (W*cap): block j holds
// send_rows' part for peer j, then pad_row up to cap; recv_src (b*T, the first n_recv written):
// where the k-th received vector (recv_pos order) sits in the fixed receive buffer, i*cap + its
// place in owner i's part. Meant for plans whose counts are all <= cap; a longer part is cut at
// cap (send_pad) and its places past cap are -1 (recv_src). Counts are read where they lie
// (device on cuda).
int tk_hybrid_plan_fixed(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t cap, int32_t pad_row, int32_t *send_pad,
                         int32_t *recv_src, tk_err *e);
int tk_hybrid_plan_fixed_ref(const tk_hybrid_plan_args *a, int64_t cap, int32_t pad_row, int32_t *send_pad,
                             int32_t *recv_src, tk_err *e);

// The argument checks shared by both sides; *tn gets the number of owned tables.
int tk_hybrid_plan_check(const tk_hybrid_plan_args *a, int *tn, tk_err *e);
int tk_hybrid_plan_fixed_check(const tk_hybrid_plan_args *a, int64_t cap, tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_hybrid_plan_ws_bytes_cuda(int B, int T, int W, int64_t nf);
int tk_hybrid_plan_cuda(tk_ctx *c, const tk_hybrid_plan_args *a, tk_err *e);
int tk_hybrid_exchange_counts_cuda(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t *mat, tk_err *e);
int tk_hybrid_plan_fixed_cuda(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t cap, int32_t pad_row,
                              int32_t *send_pad, int32_t *recv_src, tk_err *e);
#endif

#undef TK_HP_HD

#ifdef __cplusplus
}
#endif
#endif
