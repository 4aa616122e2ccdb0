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
// span. tk_dlrm_train_step is one fixed sequence of ops with no host reads and no allocation:
// the cuda backend captures it in a CUDA graph and replays it.
#ifndef TK_WORKLOADS_DLRM_H
#define TK_WORKLOADS_DLRM_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "gpu/comm.h"
#include "gpu/gpu.h"
#include "lr_schedule.h"

#define TK_DLRM_MAX_TABLES 64
#define TK_DLRM_MAX_LAYERS 8
#define TK_DLRM_MAX_WORLD 1024

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
    int batch;                              // global batch size
    tk_lr_sched lr;
    double target_auc;                      // 0.8025
    int evals_per_epoch;                    // 20 (MLPerf: every 0.05 epoch)
    int max_epochs;                         // 1
    uint64_t seed;
} tk_dlrm_config;

// Reads a config (share/workloads/dlrm/config.json format, see train-step(1)), applies overrides
// "key=value" (value parsed as JSON, else taken as a string; dotted keys reach into objects,
// e.g. "lr.base=2.0"), and fills cfg. Table sizes: "table_sizes" in the config, or, when it is
// "data", the "cardinalities" of the dataset's schema meta (data_meta, may be NULL), capped at
// "max_table_rows". *effective (may be NULL) gets the resulting JSON (for logs and the hash).
int tk_dlrm_config_load(const char *path, char *const *overrides, int noverrides,
                        const char *data_meta, tk_dlrm_config *cfg, json_t **effective, tk_err *e);
// The same from a parsed config (root is modified: overrides applied, table sizes resolved);
// path names it in messages.
int tk_dlrm_config_from_json(json_t *root, const char *path, char *const *overrides,
                             int noverrides, const char *data_meta, tk_dlrm_config *cfg,
                             json_t **effective, tk_err *e);
// FNV-1a 64 of the compact, key-sorted JSON of the config members that determine training.
uint64_t tk_dlrm_config_hash(const json_t *effective);

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
    tk_arena params, grads, acts;
    int nlayers;                     // nbot + ntop: layers [0, nbot) bottom, [nbot, nlayers) top
    tk_dlrm_layer L[2 * TK_DLRM_MAX_LAYERS];
    float *dense_w, *dense_g;        // the flat dense span of params / grads
    size_t dense_n;                  // floats in the span (including alignment gaps, kept 0)
    void *tables;                    // this rank's tables, (sum rows, D) in table_dtype
    int64_t rows_total;              // rows of this rank's tables
    int64_t *row_off;                // (tn+1) device: offsets of the owned tables in `tables`
    int64_t row_off_host[TK_DLRM_MAX_TABLES + 1];
    // Hybrid parallelism over W ranks (tk_dlrm_create_dist; see "Several ranks" below). Without a
    // communicator: comm NULL, world 1, b = batch, t0 = 0, tm = tn = T, and the step is the single-rank one.
    tk_comm *comm;                   // given: the exchange step (any world size, 1 included)
    double comm_timeout;             // seconds: bound of every host wait for the peers
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
    double *acc_all;                 // (W, 2) the ranks' loss accumulators (gathered)
    int64_t *word_all;               // (1 + W) tk_dlrm_gather_word: this rank's word, then all ranks'
    // batch inputs (device): the loader copies each batch here (stable addresses for graphs)
    uint8_t *in_label;               // (B)
    int32_t *in_dense;               // (B, 13) raw counts
    int32_t *in_cat;                 // (B, 26) ids in [0, table_rows)
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
    // several ranks) then hold bf16 values; the MLP reads the bf16
    // copy of the dense parameters (wcopy, same offsets as dense_w, written by the SGD update);
    // layer 0 runs with K padded to 16: x0p (B, 16), W0p (out, 16) bf16, dW0p (out, 16) f32.
    tk_dtype act;
    uint16_t *wcopy, *x0p, *W0p;
    float *dW0p;
    // Two staging slots for the asynchronous input path (tk_dlrm_stage_batch / _use_batch):
    // filled on the copy stream while the compute stream trains on the batch before.
    struct tk_dlrm_stage {
        uint8_t *label;
        int32_t *dense, *cat;
        int n;
        tk_event copied, taken;      // copy done (copy stream); contents taken (compute stream)
    } stage[2];
    // device scalars
    float *lr;
    int64_t *step;
    double *loss_acc;                // [sum of batch losses, batches]
    double *auc;
    struct tk_dlrm_prof *prof;       // per-phase step timing (tk_dlrm_profile_start); NULL: off
    struct tk_dlrm_hybrid *hy;       // the hybrid embedding (tk_dlrm_hybrid_setup); NULL: off
} tk_dlrm;

int tk_dlrm_create(tk_dlrm **m, tk_ctx *c, const tk_dlrm_config *cfg, tk_err *e);
// Several ranks (hybrid parallelism as in NVIDIA's MLPerf DLRM): comm of world W (NULL or W = 1:
// tk_dlrm_create). The global batch B = cfg.batch must be a multiple of W (else TK_EUSAGE);
// b = B / W. The tables are model parallel: with Tm = ceil(T / W), rank r owns the contiguous
// block [r*Tm, min(T, (r+1)*Tm)) and allocates only those (the last ranks own fewer, possibly
// none). The MLPs are data parallel: every rank holds the same dense weights.
// Every rank gets the WHOLE global batch in its input buffers (same data order as one rank):
// rank r trains the MLPs on samples [r*b, (r+1)*b), and looks up its tables for all B samples.
// Forward: lookup -> send buffer [dest rank j][b][Tm][D] (the B samples in order are exactly
// dest-major) -> all-to-all (on the comm stream, overlapping the bottom MLP) -> [src rank i][b]
// [Tm][D], which the interaction reads as it is (kernels/interaction.h's grouped layout with
// G = Tm: rank i's block is table group i, in global table order), and whose backward writes the
// vectors' gradients in the same layout straight into the send buffer. Slots of tables a rank
// does not have (T % W != 0) are zero and never read. The loss gradient is normalized by B (not b), so the
// dense gradients are plain sums over ranks (all-reduced in two spans, the top MLP's while the
// interaction and bottom MLP backward run, then the bottom MLP's) and the looked-up vectors'
// gradients go back by the reverse all-to-all to their table's owner, which applies the fused
// sparse update for its tables over all B samples. The results equal one rank's up to the order
// of fp32 sums (not bitwise). Every function below is then collective: all ranks call it in the
// same order. timeout_s bounds every host wait for the peers. A communicator of world size 1 runs
// this exchange step on one rank (the all-to-alls are copies, the all-reduces identities), for
// checking its code, and the hybrid embedding's, on one device; comm NULL runs the one-rank step.
int tk_dlrm_create_dist(tk_dlrm **m, tk_ctx *c, const tk_dlrm_config *cfg, tk_comm *comm, double timeout_s,
                        tk_err *e);
// The host waits (at most comm_timeout) until the work queued so far is done; a dead or hung
// peer gives TK_EDEVICE instead of a hang. One rank: tk_ctx_sync.
int tk_dlrm_sync(tk_dlrm *m, tk_err *e);
// The same one call behind (tk_comm_wait_lagged): after queuing step n, waits for step n - 1, so
// the host queues step n + 1 while the device runs step n. One rank: nothing to wait for.
int tk_dlrm_sync_lagged(tk_dlrm *m, tk_err *e);
// all (world entries, host) = every rank's `mine`, in rank order: how the ranks agree on a host
// decision (a write's outcome, rank 0's reading of an evaluation result). The host wait is bounded
// by timeout_s (<= 0: the communicator's timeout). One rank: all[0] = mine.
int tk_dlrm_gather_word(tk_dlrm *m, int64_t mine, int64_t *all, double timeout_s, tk_err *e);
void tk_dlrm_destroy(tk_dlrm *m);
// MLPerf reference initialization from Philox(seed): embeddings U(-sqrt(1/rows), sqrt(1/rows));
// weights N(0, sqrt(2/(in+out))); biases N(0, sqrt(1/out)). Zeroes the step counter.
int tk_dlrm_init_weights(tk_dlrm *m, uint64_t seed, tk_err *e);
// Copies n <= batch host records (label u8, dense i32 x13, cat i32 x26) into the input buffers.
int tk_dlrm_set_batch(tk_dlrm *m, const uint8_t *label, const int32_t *dense, const int32_t *cat,
                      int n, tk_err *e);
// The asynchronous input path of the training loop (host-to-device copies overlap compute):
// stage_batch enqueues, on the copy stream, the copy of n records from PINNED host buffers into
// staging slot (0 or 1), after the compute stream has taken what the slot held before, and
// returns once the copy is done (the host buffers may then be reused; the compute stream is
// never waited for). use_batch makes the slot's batch the input of the next step: the compute
// stream waits for that copy and moves the batch into the input buffers (device to device), so
// the step (and its CUDA graph) keeps reading stable addresses. On cpu both are plain copies.
int tk_dlrm_stage_batch(tk_dlrm *m, int slot, const uint8_t *label, const int32_t *dense,
                        const int32_t *cat, int n, tk_err *e);
int tk_dlrm_use_batch(tk_dlrm *m, int slot, tk_err *e);
// One training iteration on the full batch in the input buffers: lr schedule, forward, loss
// (accumulated in m->loss_acc), backward, fused embedding update, SGD. No host reads.
int tk_dlrm_train_step(tk_dlrm *m, tk_err *e);
// Forward only on n <= batch samples of device inputs (dense, cat), logits into out (n) device.
// Several ranks: dense and cat hold all n samples on every rank; rank r computes the MLPs for its
// share [r*bl, (r+1)*bl) with bl = ceil(n / W), and every rank gets all n logits in out.
int tk_dlrm_forward(tk_dlrm *m, const int32_t *dense, const int32_t *cat, int n, float *out,
                    tk_err *e);
// Where the step's time goes: after tk_dlrm_profile_start, every tk_dlrm_train_step run eagerly
// (a step captured into a CUDA graph records nothing) records timed events between its phases on
// the compute stream ("lookup", "bottom_fwd", "wait_a2a_fwd", "interaction_fwd", "top_fwd",
// "top_bwd", "interaction_bwd", "bottom_bwd", "wait_comm", "embedding_bwd_sgd", ...: each the time
// since the mark before it on that stream, so the compute phases add up to the step) and around
// each collective on the comm stream ("a2a_fwd", "allreduce_top", "a2a_bwd", "allreduce_bottom").
// A "wait_*" phase is the compute stream waiting for the comm stream: communication not hidden.
// tk_dlrm_profile_add, once the step has completed (tk_dlrm_sync), adds the step's times to the
// totals when keep is nonzero (0: a warm-up step, dropped); tk_dlrm_profile_json gives
// {"steps": n, "ms": {phase: mean ms per step, ...}} in the order the phases first ran (a new
// reference; NULL when off).
int tk_dlrm_profile_start(tk_dlrm *m, tk_err *e);
int tk_dlrm_profile_add(tk_dlrm *m, int keep, tk_err *e);
json_t *tk_dlrm_profile_json(const tk_dlrm *m);
// The hybrid embedding (several ranks; lib/workloads/dlrm_hybrid.h has the design). Collective:
// every rank passes the same n samples' ids cat (n, T) host, folded into the tables (the first
// batches of the training data), from which the replicated rows are chosen (at most max_rows).
// Refreshes the replica from the tables; tk_dlrm_init_weights and tk_dlrm_load refresh it again.
// capacity: vectors a rank pair of the fixed exchange (clamped to b*tm, the plain exchange's
// block), -1: chosen from those batches' exchange matrices and grown when a batch does not fit,
// 0: every batch exact. From then on
// tk_dlrm_stage_batch / tk_dlrm_set_batch plan each batch's exchange on the device and
// tk_dlrm_train_step uses the plan; a batch whose exchange fits the capacity can be captured in a
// CUDA graph (tk_dlrm_capturable). Evaluation and checkpoints read the tables, whole at every
// step end.
int tk_dlrm_hybrid_setup(tk_dlrm *m, const int32_t *cat, int64_t n, int64_t max_rows, int64_t capacity,
                         tk_err *e);
// Whether the step of the batch in the input buffers (tk_dlrm_use_batch) may be captured in a CUDA
// graph: always without the hybrid embedding; with it, when the batch goes by the fixed exchange.
// Such a graph is the step of that staging slot (the hybrid step reads the slot's plan in place).
int tk_dlrm_capturable(const tk_dlrm *m);
// What such a graph depends on beyond the slot: a graph made for another key must be made again
// (the hybrid embedding's capacity, which may grow; 0 without it).
int64_t tk_dlrm_capture_key(const tk_dlrm *m);
// After queuing a step that tk_dlrm_train_step did not queue itself (a CUDA graph's launch): marks
// the slot's plan free for the batch after next. (tk_dlrm_train_step does it when not capturing.)
int tk_dlrm_step_queued(tk_dlrm *m, tk_err *e);
int tk_dlrm_hybrid_refresh(tk_dlrm *m, tk_err *e);
// Plans the exchange of the global batch cat (B, T) (device) into plan slot (0 or 1) on stream,
// and waits for its counts (the host needs them to queue the exchange).
int tk_dlrm_hybrid_plan(tk_dlrm *m, int slot, const int32_t *cat, int stream, tk_err *e);
void tk_dlrm_hybrid_destroy(tk_dlrm *m);
// {"frequent_rows", "frequent_rows_own", "min_uses_per_batch", "capacity", "capacity_growths", "batches",
// "fixed_batches", "a2a_bytes_per_step",
// "allreduce_bytes_per_step", "plain_a2a_bytes_per_step", "saved_fraction", "plan_ms_per_batch"
// (host time from queuing a batch's plan to having its counts)}: this rank's bytes sent
// per step, averaged over the batches it planned, against the plain exchange's (NULL when off).
json_t *tk_dlrm_hybrid_json(const tk_dlrm *m);

// Host reads (log points only): mean loss since the last reset (several ranks: the global mean,
// the ranks' accumulators gathered and summed in rank order), and the update counter.
int tk_dlrm_read_loss(tk_dlrm *m, double *mean_loss, int reset, tk_err *e);
int tk_dlrm_read_step(tk_dlrm *m, int64_t *step, tk_err *e);
int tk_dlrm_write_step(tk_dlrm *m, int64_t step, tk_err *e);

// Checkpoints (man/man5/trainkit-checkpoint.5). meta: object of strings (borrowed).
// Several ranks: the file is the one-rank file; rank 0 writes it (the other ranks' tables reach it
// through all-gathers of bounded chunks), every rank returns the same status. Loading: every
// rank reads the dense weights and its own tables, so a file loads under any world size.
int tk_dlrm_save(tk_dlrm *m, const char *path, const json_t *meta, tk_err *e);
// Loads weights; *meta (may be NULL) gets a new reference to the file's metadata.
int tk_dlrm_load(tk_dlrm *m, const char *path, json_t **meta, tk_err *e);
// Writes the named tensors of one step for contrib/peers/dlrm.py: the weights BEFORE the step
// (same names as a checkpoint), the batch ("batch.label" U8, "batch.dense" I32, "batch.cat" I32),
// "loss" F32 [1], "grad.<param>" F32 for the dense parameters and "grad.emb_out" F32 (B, T, D)
// (the gradient w.r.t. the looked-up vectors: the tables' gradient is never formed; widened from
// bf16 on the bf16 path, where the model holds it in bf16).
// Runs the step on the batch already in the input buffers (so it updates the model). One rank only.
int tk_dlrm_dump_step(tk_dlrm *m, const char *path, tk_err *e);

// The evaluation set, read once and cached in the backend's memory (MLPerf allows caching it).
typedef struct tk_dlrm_evalset {
    int64_t n;
    uint8_t *label;     // (n) device
    int32_t *dense;     // (n, 13) device
    int32_t *cat;       // (n, 26) device, ids folded into the tables
    float *score;       // (n) device: the logits of the last evaluation
    void *ws;           // AUC workspace
} tk_dlrm_evalset;
int tk_dlrm_evalset_load(tk_dlrm *m, char *const *paths, int npaths, tk_dlrm_evalset **es,
                         tk_err *e);
void tk_dlrm_evalset_free(tk_dlrm *m, tk_dlrm_evalset *es);
// Forward over the whole set in batches of cfg.batch, exact AUC on the device; one host read.
int tk_dlrm_evaluate(tk_dlrm *m, tk_dlrm_evalset *es, double *auc, tk_err *e);
#endif
