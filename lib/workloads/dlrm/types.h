// DLRM's types (the model, its configuration, the hybrid embedding's state, the evaluation set),
// shared by the files of lib/workloads/dlrm/; the functions are declared per concern in
// config.h, model.h, step.h, hybrid.h, ckpt.h, eval.h, data.h, profile.h (dlrm.h includes all).
//
// The MLPerf v1.x DLRM (Naumov et al. 2019; mlcommons/training recommendation/dlrm):
//   dense (13 raw counts) -> log(x+1) -> bottom MLP 13-512-256-128 (ReLU on every layer)
//   26 categorical ids    -> 26 embedding lookups of dim 128
//   dot interaction over the 27 vectors -> 128 + 351 = 479 features
//   top MLP 479-1024-1024-512-256-1 (ReLU on all but the last) -> logit -> BCE with logits.
// Trained with plain SGD and the MLPerf warm-up / poly(2) decay schedule.
//
// Written once against libgpu: every tensor lives in the context's memory (host for cpu, device
// for cuda); parameters are views into ONE flat arena (dense fp32 weights first, then the
// tables), dense gradients into ONE flat arena with the same offsets, so SGD is one op over one
// span. The training step is one fixed sequence of ops with no host reads and no allocation:
// the cuda backend captures it in a CUDA graph and replays it.
#ifndef TK_WORKLOADS_DLRM_TYPES_H
#define TK_WORKLOADS_DLRM_TYPES_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "engine/dist.h"
#include "engine/evalset.h"
#include "engine/params.h"
#include "engine/profile.h"
#include "engine/workload.h"
#include "gpu/comm.h"
#include "gpu/gpu.h"

#define TK_DLRM_MAX_TABLES 64
#define TK_DLRM_MAX_LAYERS 8
#define TK_DLRM_MAX_WORLD TK_MAX_WORLD
#define TK_HY_MAX_WORLD 64

typedef struct tk_dlrm_config {
    int num_dense;                          // 13
    int num_tables;                         // 26
    int emb_dim;                            // 128 (== the bottom MLP's last width)
    int nbot, bot[TK_DLRM_MAX_LAYERS];      // bottom MLP widths after the input (512, 256, 128)
    int ntop, top[TK_DLRM_MAX_LAYERS];      // top MLP widths (1024, 1024, 512, 256, 1)
    int interaction_width;                  // top MLP input: D + T(T+1)/2, or more (padding)
    int64_t table_rows[TK_DLRM_MAX_TABLES]; // rows per table; ids >= rows are folded (id % rows)
    tk_dtype table_dtype;                   // TK_F32 (cpu) or TK_BF16
    int tf32;                               // "precision": "tf32": the cuda backend's fp32 GEMMs
                                            // run on the tensor cores in TF32 (fp32 in/out)
    int bf16;                               // "precision": "bf16" (cuda backend only): bf16
                                            // activations and weight copies for the MLPs, the
                                            // interaction, the looked-up vectors and their
                                            // gradients (also in the all-to-all) and the loss
                                            // input (fp32 accumulation, fp32 master weights and
                                            // dense gradients)
    int batch;                              // global batch size (the engine's train.global_batch_size)
    // "parallel" (config.h): the hybrid embedding (hybrid.h) with its settings, and the exchange
    // step on one rank (a communicator of world 1)
    int hybrid, force_exchange;
    int64_t hybrid_max_rows, hybrid_stat_batches, hybrid_capacity; // capacity -1: auto
} tk_dlrm_config;

typedef struct tk_dlrm_layer {
    int in, out, relu;
    float *W, *b;        // W (out, in) row-major as torch.nn.Linear: y = x @ W^T + b
    float *dW, *db;
    float *x;            // input activation (B, in) (aliases the previous layer's output)
    float *y;            // output (B, out)
    void *aux;           // relu mask (tk_gemm_aux_bytes)
} tk_dlrm_layer;

typedef struct tk_dlrm {
    tk_ctx *c;
    tk_dlrm_config cfg;
    // What the engine handed create, kept whole: the ranks (env.dist, bounded waits), the device
    // scalars of the step (env.lr, env.step, env.loss_acc: [sum of batch losses / B, batches]), the
    // per-phase step timer (*env.prof; NULL: off) and the tensors, env.params (lib/engine/params.h):
    // the dense MLP weights (TK_PARAM_DENSE, trained by the optimizer over the flat span), then
    // this rank's tables (packed into one array indexed by row_off, each held by its owner rank,
    // updated by the fused sparse SGD).
    tk_wl_env env;
    int nlayers;                     // nbot + ntop: layers [0, nbot) bottom, [nbot, nlayers) top
    tk_dlrm_layer L[2 * TK_DLRM_MAX_LAYERS];
    int pidx[4 * TK_DLRM_MAX_LAYERS];  // each layer's weight and bias in P
    float *dense_w, *dense_g;        // the flat dense span of params / grads
    size_t dense_n;                  // floats in the span (including alignment gaps, kept 0)
    void *tables;                    // this rank's tables, (sum rows, D) in table_dtype
    int64_t rows_total;              // rows of this rank's tables
    int64_t *row_off;                // (tn+1) device: offsets of the owned tables in `tables`
    int64_t row_off_host[TK_DLRM_MAX_TABLES + 1];
    // Hybrid parallelism over W ranks (the engine's communicator; step.h). Without a communicator:
    // comm NULL, world 1, b = batch, t0 = 0, tm = tn = T, and the step is the single-rank one.
    tk_comm *comm;                   // given: the exchange step (any world size, 1 included)
    int rank, world;
    int b;                           // rows of the dense part on this rank: batch / world
    int t0, tm, tn;                  // owned tables [t0, t0 + tn); tm = ceil(T / W) slots a rank
    int32_t *cat_own;                // (B, tn) the ids of the owned tables for all B samples
    // The exchange buffers hold values of type act (f32, or bf16 on the bf16 path), as emb/demb.
    void *emb_own;                   // (B, tn, D) when tn < tm (else a2a_send is used directly)
    void *a2a_send, *a2a_recv;       // (W, b, tm, D): [peer][sample][table slot][D]; the interaction
                                     // reads recv as emb and writes demb to send (G = tm grouping)
    int32_t *ev_dense;               // (b, num_dense) this rank's share of an eval batch
    float *ev_logit, *ev_score;      // (b) this rank's eval logits; (B) all ranks' (gathered)
    // batch inputs (device): each batch is copied here (stable addresses for graphs)
    uint8_t *in_label;               // (b) this rank's samples of the global batch
    int32_t *in_dense;               // (b, 13) raw counts, this rank's samples
    int32_t *in_cat;                 // (b, 26) ids in [0, table_rows), this rank's samples
    int32_t *cat_all;                // (B, 26) every sample's ids: several ranks, all-gathered
                                     // from the ranks' in_cat (step.h); one rank: in_cat itself
    // activations and gradients (device)
    float *x0;                       // (B, 13) log1p(dense)
    void *emb;                       // (B, T, D) in act (the lookup output); one rank only (else NULL)
    float *inter;                    // (B, W)
    float *logit, *dlogit;           // (B)
    float *dy[2];                    // ping-pong (B, max width) for the MLP backward
    float *dinter, *dbot;
    void *demb;                      // (B, T, D) in act; one rank only (else NULL)
    void *emb_ws;
    // The bf16 compute path (cfg.bf16; act = TK_BF16, else TK_F32): the activation buffers above
    // (x, y, emb, inter, logit, dlogit, dy, dinter, dbot, demb, and the exchange buffers of
    // several ranks) then hold bf16 values; the MLP reads the bf16 copy of the dense parameters
    // (the tk_params compute copy, written by the optimizer's update); layer 0 runs with K
    // padded to 16: x0p (B, 16), W0p (out, 16) bf16, dW0p (out, 16) f32.
    tk_dtype act;
    uint16_t *x0p, *W0p;
    float *dW0p;
    double *auc;                     // device, in its activation arena
    struct tk_dlrm_hybrid *hy;       // the hybrid embedding (hybrid.h); NULL: off
} tk_dlrm;

// The evaluation set, read once and cached in the backend's memory (lib/engine/evalset.h): fields
// label u8 (n), dense i32 (n, num_dense), cat i32 (n, T) with the ids folded into the tables;
// score: the logits of the last evaluation.
typedef tk_evalset tk_dlrm_evalset;

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
    tk_event ready;              // recorded after the plan (copy stream); the step waits for it
    int state;                   // TK_HPS_*: where the slot's batch is
    const int32_t *cat;          // TK_HPS_STAGED: the global batch's ids to plan from (device)
} tk_dlrm_hplan;

// A plan slot's batch: none (or its step queued: the slot is free for the next batch, the device
// waiting for `done` before the plan is written), staged (its ids all-gathered or gathering, the
// plan to make), planned, the input (use: its step reads the plan).
enum { TK_HPS_FREE, TK_HPS_STAGED, TK_HPS_PLANNED, TK_HPS_INPUT };
enum { TK_DLRM_PLAN_SLOTS = TK_STAGE_MAX_SLOTS }; // one per staging slot

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
    tk_dlrm_hplan plan[TK_DLRM_PLAN_SLOTS]; // per staging slot
    int cur;                     // the slot of the batch in the input buffers (-1: none planned)
    int pending;                 // the slot of the batch staged but not yet planned (-1: none)
    // traffic of this rank, summed over the batches it planned (tk_dlrm_hybrid_json)
    int64_t batches, fixed_batches;
    double a2a_bytes, a2a_bytes_plain, ar_bytes;
    double plan_s;               // host seconds from queuing a plan to having its counts
} tk_dlrm_hybrid;

// The bf16 path's first GEMM: the dense features padded to a multiple of 8 (13 -> 16), so rows
// are 16-byte aligned for the tensor cores.
static inline int tk_dlrm_kpad(int k) { return (k + 7) / 8 * 8; }
static inline size_t tk_dlrm_align256(size_t n) { return (n + 255) & ~(size_t)255; }

// n device buffers carved from one new arena a: *dst[k] gets sz[k] bytes, 256-byte aligned.
static inline int tk_dlrm_carve(tk_dlrm *m, tk_arena *a, const char *name, const size_t *sz, void **const *dst, int n,
                                tk_err *e) {
    size_t total = 0;
    for (int k = 0; k < n; k++) total += tk_dlrm_align256(sz[k]);
    TRY(tk_arena_init(m->c, a, total, name, e));
    for (int k = 0; k < n; k++) TRY(tk_arena_take(a, sz[k], dst[k], e));
    return 0;
}

#endif
