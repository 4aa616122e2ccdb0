// The engine's optimizer over a model's flat parameter buffer (params.h): the configuration's
// "optimizer" section (engine/optim_config.h, man/man5/trainkit-optimizer.5), the learning-rate
// schedule computed on the device from the device step counter, and the update of the dense span
// (the tensors flagged TK_PARAM_DENSE, one segment each with its decay and adaptation flags) by
// kernels/optim.h, its state in one more flat buffer of the dense span's layout. Everything here
// is capturable in a CUDA graph.
#ifndef TK_ENGINE_OPTIMIZER_H
#define TK_ENGINE_OPTIMIZER_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "core/mllog.h"
#include "engine/config.h"
#include "engine/optim_config.h"
#include "engine/params.h"
#include "gpu/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

// ---- the distributed optimizer (optimizer.distributed with several ranks; ZeRO-1) ----
// The dense span of n floats is cut into buckets of `bucket` floats from float 0 (bucket k:
// [k * bucket, min((k + 1) * bucket, n))), the buckets the engine's backward hands to the
// exchange (instance.c grads_ready). Both n and bucket are multiples of tk_opt_shard_multiple
// (world), so each bucket splits into world equal shares, 64-float aligned, and rank r owns the
// r-th share of every bucket: the gradients' buckets are reduce-scattered (rank r receives the
// sum of its shares: what NCCL's reduce-scatter gives with equal shares), the update runs on the
// owned floats only (kernels/optim.h tk_optim_step_dist: the norms' partial sums gathered
// between its passes), and the updated weights' shares (and their compute copy's) are
// all-gathered so every rank holds whole weights for the next forward, evaluation, the moving
// average and checkpoints. The optimizer's state stays whole-sized on every rank (no memory is
// saved; each rank keeps only its shares current); tk_optimizer_gather_state makes it whole
// before a checkpoint is written, so checkpoints have the one-rank layout and load in either form.
typedef struct tk_opt_shard {
    tk_comm *comm; // NULL: not distributed
    int rank, world;
    size_t bucket, n;
} tk_opt_shard;
// The multiple that a bucket and the dense span are padded to (floats).
size_t tk_opt_shard_multiple(int world);
// Reduce-scatters the buckets covering g[from, to) (from and to bucket bounds or n) in place, on
// the comm stream (the caller makes it wait for the compute stream first).
int tk_opt_shard_reduce(const tk_opt_shard *s, float *g, size_t from, size_t to, tk_err *e);
// All-gathers every bucket's shares of buf (n elements of t) in place, on the comm stream between
// waits for the compute stream and of the compute stream for it.
int tk_opt_shard_gather(const tk_opt_shard *s, void *buf, tk_dtype t, tk_err *e);

typedef struct tk_optimizer {
    tk_opt_config cfg;
    tk_ctx *c;
    int plain_sgd;           // SGD without momentum, decay, clipping or skipping: tk_sgd_update
    float *state;            // tk_optim_state_floats(kind) * dense_n floats (NULL: none)
    tk_opt_seg *seg_host, *seg_dev;
    int nseg;
    void *ws;
    float *ema;              // cfg.ema > 0: the dense span's moving average (dense_n floats), else NULL
    tk_opt_shard shard;      // shard.comm: the distributed form (segments: this rank's pieces)
    tk_optim_dist dist;
} tk_optimizer;

// The "optimizer" section of root (file names it in errors); steps_per_epoch converts the keys
// given in epochs (0: not known, such keys are refused).
int tk_optimizer_config(json_t *root, const char *file, int64_t steps_per_epoch, tk_opt_config *cfg, tk_err *e);
// The learning rate of 0-based update index step (the host's reading of the schedule).
double tk_optimizer_lr_at(const tk_opt_config *cfg, int64_t step);

// Prepares the update of P's dense span (after tk_params_alloc): its segments, workspace and
// state, the state's tensors added to P as extern views ("optimizer.m.NAME", "optimizer.v.NAME"),
// so checkpoints carry it and --resume is bit-identical. With cfg->ema > 0 also the weights'
// moving average, its tensors "ema.NAME" (set it with tk_optimizer_ema_reset once the weights are).
int tk_optimizer_init(tk_optimizer *o, const tk_opt_config *cfg, tk_params *P, tk_err *e);
// The same, distributed over shard's ranks when shard is not NULL, has a comm and world > 1
// (P's dense span must then be padded: P->dense_multiple = tk_opt_shard_multiple(world)).
int tk_optimizer_init_shard(tk_optimizer *o, const tk_opt_config *cfg, tk_params *P, const tk_opt_shard *shard,
                            tk_err *e);
// The distributed form: every rank's shares of the state gathered, so each rank holds all of it
// (before a checkpoint is written; collective: every rank calls it). Otherwise nothing.
int tk_optimizer_gather_state(tk_optimizer *o, tk_params *P, tk_err *e);
void tk_optimizer_release(tk_optimizer *o);
// The schedule: lr (device f32) for update *step (device i64), which it then increments.
int tk_optimizer_schedule(tk_optimizer *o, int64_t *step, float *lr, tk_err *e);
// One update of P's dense span with its gradients at lr; step counts the updates including this
// one (decremented when a non-finite gradient is skipped). Writes P's compute copy too, then moves
// the moving average (when there is one) towards the new weights: the reference's apply_ema after
// every optimizer step, skipped ones included. Distributed: the update of this rank's shares,
// then the weights and their compute copy all-gathered (the moving average then sees them whole).
int tk_optimizer_update(tk_optimizer *o, tk_params *P, const float *lr, int64_t *step, tk_err *e);
// The moving average := P's dense weights (after an initialization or a load of the weights
// alone; the reference's copy of the model). No average: nothing.
int tk_optimizer_ema_reset(tk_optimizer *o, tk_params *P, tk_err *e);
// Exchanges P's dense weights and the moving average, then refreshes P's compute copy: called
// before an evaluation (it runs on the average) and after it (the trained weights back, bit for
// bit). No average: nothing.
int tk_optimizer_ema_swap(tk_optimizer *o, tk_params *P, tk_err *e);

// ---- the optimizer's MLLOG keys ----
// What a key's value is, read from the parsed "optimizer" section (run->opt): the engine logs what
// the optimizer really runs with, the defaults included.
typedef enum tk_optv {
    TK_OPTV_NAME,          // the optimizer's name ("sgd", "lamb", "lars", ...): a string
    TK_OPTV_BASE_LR,
    TK_OPTV_END_LR,        // the schedule's floor: min_lr (poly, warmup_hold_exp) or end_lr (the others)
    TK_OPTV_POLY_POWER,
    TK_OPTV_WARMUP_STEPS,
    TK_OPTV_WARMUP_EPOCHS, // warmup_epochs as given, else the warm-up steps / steps per epoch
    TK_OPTV_START_WARMUP,  // warmup_poly's start_warmup_step
    TK_OPTV_DECAY_START,   // poly's decay_start_step
    TK_OPTV_DECAY_STEPS,   // poly's decay_steps
    TK_OPTV_TOTAL_STEPS,   // the schedule's total_steps (train.max_steps when it has none)
    TK_OPTV_DECAY_LENGTH,  // the decay's length as the config gives it: total_epochs, else poly's
                           // decay_steps, else total_steps / steps per epoch
    TK_OPTV_WEIGHT_DECAY,
    TK_OPTV_MOMENTUM,
    TK_OPTV_EPS,
    TK_OPTV_BETA1,
    TK_OPTV_BETA2,
    TK_OPTV_ZERO,          // the number 0 (a key the rules want whose value is fixed at 0)
    TK_OPTV_INIT_LR,       // the rate the warm-up starts from (warmup_init_lr)
    TK_OPTV_GAMMA,         // the decay factor gamma of step and warmup_hold_exp (1 for the other
                           // schedules: no decay)
    TK_OPTV_MILESTONE_EPOCHS, // step's milestones in epochs (an array: integers where whole; [] for
                              // the other schedules)
    TK_OPTV_HOLD_EPOCHS,   // warmup_hold_exp's hold_epochs (0 for the other schedules)
    TK_OPTV_MAX_GRAD_NORM, // the gradient clipping norm, max_grad_norm (0: no clipping)
    TK_OPTV_EMA,           // the decay of the weights' moving average, ema (0: none)
} tk_optv;

// One MLLOG key of a benchmark's optimizer (its rules' name for it); a workload lists them in its
// table (workload.h opt_mllog), {NULL} terminated, in the order they are logged.
typedef struct tk_opt_mllog_key {
    const char *key;   // the MLLOG key; "%s" in it is replaced by the optimizer's name
                       // ("%s_opt_base_learning_rate": lars_opt_base_learning_rate)
    tk_optv v;
    char form;         // 'i': an integer, 'r': a real, 'g': as the config wrote it (an integer when
                       // the section gave the key as one, else a real)
    const char *only;  // logged only for this optimizer ("lamb"), or for any but it ("!lars"); NULL: always
} tk_opt_mllog_key;

// Logs keys (NULL: none) for the run's parsed optimizer (run->opt, run->steps_per_epoch).
int tk_optimizer_mllog(tk_mllog *L, const tk_run_cfg *run, const tk_opt_mllog_key *keys, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
