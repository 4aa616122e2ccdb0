// The workload interface (DESIGN.md section 3a, man/man7/trainkit-workload.7): what a model
// gives the training engine. One const table of functions per workload, listed in one place
// (registry.c), in the manner of FFmpeg's AVCodec or SQLite's sqlite3_io_methods: the engine, and
// with it train-step and evaluate, never names a workload. The engine owns the loop, the input
// path (loader threads, pinned buffers, staging slots on the copy stream), CUDA-graph capture and
// replay, the learning-rate schedule and the optimizer over the flat parameter buffer, gradient
// all-reduce over the ranks, evaluation cadence and the stop at the target, checkpoints, resume
// and out-of-process evaluation, MLLOG framing and the JSON Lines output. A workload owns its
// configuration section, its tensors (declared into the engine's tk_params), its data format and
// record order, forward and backward, its eval metric and its MLLOG hyperparameter keys.
//
// Adding a workload: lib/workloads/NAME/ (its files), one `extern const tk_workload` line and one
// table entry in registry.c, share/workloads/NAME/. Nothing in cmd/ or the engine changes.
//
// The table may grow: `version` says which members a workload fills (members added later are
// NULL in older tables, and the engine checks version before reading them; version 5 replaced
// two members, and the engine takes no older table). Optional members may be NULL. Every model
// function gets the `void *model` its create returned; "device" means the backend's memory (host
// memory on the cpu backend). Everything that runs inside the training step (step, after_update)
// must be capturable in a CUDA graph: no host sync, no allocation.
#ifndef TK_ENGINE_WORKLOAD_H
#define TK_ENGINE_WORKLOAD_H

#include <jansson.h>
#include <stdint.h>

#include "core/err.h"
#include "core/mllog.h"
#include "engine/config.h"
#include "engine/dist.h"
#include "engine/loader.h"
#include "engine/optimizer.h"
#include "engine/params.h"
#include "engine/profile.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_WORKLOAD_V1 1
#define TK_WORKLOAD_V2 2 // + reader_device
#define TK_WORKLOAD_V3 3 // + opt_mllog
#define TK_WORKLOAD_V4 4 // + dump_describe (the engine writes the step dump; dump_step is gone)
#define TK_WORKLOAD_V5 5 // batch for batch_layout, inputs and dump_describe's batch (the engine
                         // derives them); the engine takes no table of an older version
#define TK_WORKLOAD_V6 6 // + epoch_fraction, warmup
#define TK_WORKLOAD_V7 7 // + stage_depth

// What the engine hands a model at creation. Everything it points at lives until after destroy: a
// model keeps a copy of the whole env (m->env = *env, as mlp, dlrm and bert do) rather than
// copies of its members.
typedef struct tk_wl_env {
    tk_ctx *c;
    tk_dist *dist;      // ranks: dist->comm NULL for one rank without collectives
    tk_params *params;  // declare the model's tensors here, then tk_params_alloc (create does both)
    float *lr;          // device f32: this step's learning rate, written by the engine's schedule
                        // before each step (a workload's own fused updates read it)
    int64_t *step;      // device i64: updates so far (the schedule increments it before the step)
    double *loss_acc;   // device f64[2]: each step adds [its samples' loss sum / global batch, 1];
                        // the engine reads the global mean loss from the ranks' sums at log points
    // Several ranks, the engine reducing the gradients (own_grad_reduce 0): the backward may call
    // grads_ready(grads_arg, off, e) once every dense gradient at float offset >= off of the dense
    // span is final (a backward that runs from the last layer to the first, over tensors declared
    // in forward order, can say so after each layer; lib/blocks' tk_blk_grads does for a backward
    // of blocks, casting bf16 weight gradients first); the engine then all-reduces the completed
    // buckets on the comm stream while the backward goes on (capturable; no call: one all-reduce
    // after the step). NULL when there is nothing to overlap (one rank). TK_CHECK_GRADS_READY=1
    // (cpu backend) fails a step that writes a gradient after reporting it (instance.c).
    int (*grads_ready)(void *grads_arg, size_t off, tk_err *e);
    void *grads_arg;
    // train-step --profile: *prof is the engine's per-phase timer (engine/profile.h) once it started
    // it (for a workload with profile_marks), else NULL: the step marks its phases with
    // tk_prof_mark(*prof, ...) (a no-op on NULL).
    tk_prof *const *prof;
    // The model's activations, inputs and workspaces: one device arena the engine owns (the
    // instance's; released after destroy, so a workload's destroy leaves it). create fills it once
    // with tk_wl_acts.
    tk_arena *acts;
} tk_wl_env;

// In create: n device buffers from one allocation into env->acts, *dst[k] getting sz[k] bytes
// (256-byte aligned, stable addresses; 0 bytes get 1, so that every buffer has its own address),
// all zeroed (the call waits for the zeroing). Once per model.
int tk_wl_acts(const tk_wl_env *env, const size_t *sz, void **const *dst, int n, tk_err *e);

// An option of train-step that a workload adds: "--NAME [ARG]" is the same as
// "--set KEY=VALUE", with VALUE = value when the option takes no argument, else its argument,
// which train-step checks first (a usage error names the option): an integer in [lo, hi], or
// the word `word` when one is given.
typedef struct tk_wl_option {
    const char *name;   // long option name, without the dashes
    int has_arg;        // 0: a flag; 1: an integer argument
    const char *key;    // the config key it sets
    const char *value;  // has_arg == 0: the value it sets
    int64_t lo, hi;     // has_arg == 1: the integer's range
    const char *word;   // has_arg == 1: a word accepted too (e.g. "auto"), or NULL
    const char *arg;    // the argument's name in --help ("N", "auto|N")
    const char *help;   // for --help
} tk_wl_option;

// ---- the batch (version 5) ----
// A batch is a few fields, each an array that the reader writes and the model reads in the same
// form; the workload describes each once (the table's batch), and the engine derives from that the
// fields' byte sizes (its loader's and stager's tk_batch_layout), the copy into the model's input
// buffers and the batch in the step dump.
typedef struct tk_wl_field {
    const char *name;                 // the peer's name, e.g. "batch.label" (the step dump's tensor)
    tk_dtype dtype;                   // as read
    int ndim;
    int64_t shape[TK_PARAM_MAX_DIMS]; // as this rank's reader writes it (the whole global batch for
                                      // a reader that decodes every rank's share)
    void *input;                      // the model's device input buffer (a stable address: graphs
                                      // read it)
} tk_wl_field;

// The bytes of a field: its dtype's size times the product of its shape.
static inline size_t tk_wl_field_bytes(const tk_wl_field *f) {
    size_t n = tk_dtype_size(f->dtype);
    for (int d = 0; d < f->ndim; d++) n *= (size_t)f->shape[d];
    return n;
}

// ---- the step dump (version 4) ----
// train-step --dump-step FILE: the engine (lib/engine/dump.c) runs one step on the batch in the
// inputs and writes, for the workload's PyTorch peer (contrib/peers/NAME.py), one safetensors file
// of, in this order: every tensor of tk_params this rank holds as it was BEFORE the step (a
// checkpoint's names, the optimizer's state included), the batch (tk_wl_dump.batch, as it was
// before the step), "loss" F32 [1] (the step's loss_acc), "grad.NAME" F32 of every dense tensor,
// with tk_wl_dump.after "after.NAME" of every other held tensor that is not extern (its values
// after the step: BatchNorm's running statistics), then tk_wl_dump.extra (read after the step);
// metadata "format" ("trainkit-step-dump-1"), "workload", then tk_wl_dump.meta's keys. The batch
// is the table's batch: each field as read, under its name, or in the form tk_wl_dump.batch gives.
// The step is the table's step and after_update (its own updates included, as DLRM's sparse one:
// the weights in the file are those before it); the engine's optimizer does not run. One rank.
#define TK_WL_DUMP_EXTRA 8

// A tensor of a step dump that the workload describes: its name and form in the file, and where
// its values are (the backend's memory; still valid when the dump reads it).
typedef struct tk_wl_tensor {
    const char *name;                 // e.g. "batch.label" (the peer's name); copied
    tk_dtype dtype;                   // in the file
    int ndim;
    int64_t shape[TK_PARAM_MAX_DIMS];
    const void *src;
    int bf16;                         // an F32 tensor that src holds in bf16 (widened exactly)
} tk_wl_tensor;

// What a step dump holds of the workload's own (dump_describe fills it; zeroed before).
typedef struct tk_wl_dump {
    // Field f of the table's batch in another form than read, one that describe put in the model's
    // memory (ResNet's normalized images): src set, the tensor written for the field. src NULL
    // (left zero): the field as read.
    tk_wl_tensor batch[TK_BATCH_MAX_FIELDS];
    tk_wl_tensor extra[TK_WL_DUMP_EXTRA]; // more tensors after the step (DLRM's grad.emb_out)
    int nextra;
    int after;                        // write after.NAME (above)
    json_t *meta;                     // metadata of its own: an object of strings (the dump takes
                                      // the reference; NULL: none)
} tk_wl_dump;

typedef struct tk_workload {
    int version;                      // TK_WORKLOAD_V7 (V2 added reader_device, V3 opt_mllog, V4
                                      // dump_describe, V5 batch for batch_layout and inputs, V6
                                      // epoch_fraction and warmup, V7 stage_depth); V6 tables are
                                      // taken as before
    const char *name;                 // the config's "workload" and MLLOG submission_benchmark
    const char *summary;              // one line for --help
    const char *metric;               // its eval metric: the config's target.metric and the key of
                                      // the value in eval and result lines ("auc", "mlm_accuracy", "top1")
    int lower_is_better;              // the target is reached at or below it (a word error rate)
    const tk_wl_option *options;      // extra train-step options, {NULL} terminated (may be NULL)
    const char *const *sections;      // top-level config keys it owns besides "model" and "data",
                                      // NULL terminated (may be NULL); not part of the config hash
    const char *const *precisions;    // the compute precisions it supports, of tk_precision_names
                                      // (engine/cfg.h), NULL terminated, fp32 first: its config reads
                                      // model.precision with tk_cfg_precision over this list

    // ---- configuration ----
    // Parses and checks the workload's sections of root (overrides already applied; unknown keys
    // are TK_EUSAGE naming the file and JSON path), given the engine's parsed common sections (run)
    // and the training data's schema meta JSON (NULL in evaluate, where the config is the
    // checkpoint's effective one). May write resolved values back into root (e.g. table sizes read
    // from the data): root is then the effective config, hashed and stored in checkpoints.
    int (*config)(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **cfg,
                  tk_err *e);
    void (*config_free)(void *cfg);
    // Whether the model wants a communicator even on one rank (a several-ranks code path run over a
    // world of 1). NULL: only with several ranks.
    int (*wants_comm)(const void *cfg);

    // ---- model ----
    // create sets *model as soon as it has one: when it fails, the engine destroys what *model
    // holds (not NULL), so destroy takes a model at any point of its creation.
    int (*create)(const void *cfg, const tk_wl_env *env, void **model, tk_err *e);
    void (*destroy)(void *model);
    // The reference initialization from seed (every rank the same values for the same tensor):
    // draws the tensors (and sets what else of the model's own starts anew: running statistics).
    // The engine then calls weights_loaded, zeroes the step and the loss accumulator and syncs
    // (tk_instance_init_weights).
    int (*init_weights)(void *model, uint64_t seed, tk_err *e);
    // After the engine set the tensors (init_weights, a checkpoint's load): refresh what derives
    // from them (low-precision copies, replicas). Collective on several ranks. May be NULL.
    int (*weights_loaded)(void *model, tk_err *e);

    // ---- data ----
    // A reader of the training data; the engine opens one per loader thread. rank and world: this
    // process's place among the ranks, for a reader that decodes only its share of each global
    // batch (batch then gives the share's shapes).
    int (*reader_open)(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e);
    void (*reader_close)(void *rd);
    uint64_t (*reader_count)(void *rd);             // records
    // Batch `step` (0-based over the run; steps_per_epoch = count / global batch) into host fields
    // of the forms batch describes. The order of records is the workload's (the dataset's order,
    // or a shuffle keyed by seed and epoch); it depends on step only.
    int (*read_batch)(void *rd, int64_t step, int64_t steps_per_epoch, void *const *fields, tk_err *e);
    // The batch's fields (version 5, above): fills f[0 .. n-1] and returns n (1 to
    // TK_BATCH_MAX_FIELDS). The engine asks once, after create.
    int (*batch)(const void *model, tk_wl_field *f);
    // After a batch's copy into staging slot `slot` (device fields), on `stream` (the copy
    // stream): more per-batch work that may overlap the step before (DLRM's exchange plan); the
    // engine does not wait for it, the step's compute stream does. NULL: none.
    int (*staged)(void *model, int slot, void *const *dev, int stream, tk_err *e);
    // The slot's batch is now the input (after the copy into the inputs; outside any capture).
    // NULL: nothing to do.
    int (*use)(void *model, int slot, tk_err *e);
    // A decoded batch on the host, before its copy into staging slot `slot`: its host fields
    // (read only, valid during the call), for what the step's shapes depend on (BERT's packed rows:
    // its graph_key). NULL: nothing.
    void (*host_batch)(void *model, int slot, void *const *fields);
    // Once before training, with a reader at the start of the data: statistics the model needs
    // (DLRM's hybrid embedding chooses its replicated rows). *line (may stay NULL) gets a JSON
    // object that the engine prints as a line (with a "type"). NULL: nothing.
    int (*prepare)(void *model, void *rd, int64_t steps_per_epoch, json_t **line, tk_err *e);

    // ---- training step ----
    // Forward and backward of the input batch: the dense gradients into the tk_params gradient
    // span, the loss into env->loss_acc; the workload's own updates (tensors it declared without
    // TK_PARAM_DENSE) with env->lr. The engine then all-reduces the dense gradients over the ranks
    // (unless own_grad_reduce), runs the optimizer, then after_update.
    int (*step)(void *model, tk_err *e);
    int own_grad_reduce;              // the step reduces the dense gradients itself (overlapped with its
                                      // backward, as DLRM does); they are sums over the ranks afterwards
    int (*after_update)(void *model, tk_err *e);    // in the step's graph; NULL: nothing
    // Whether the step of the current input may be captured in a CUDA graph: < 0 no (run it
    // eagerly), else a key; the engine keeps the graphs of the 64 (TK_GRAPH_CACHE, graphs.h) most
    // recently used keys (a slot's, with graph_per_slot), made again when evicted. NULL: always,
    // key 0.
    int64_t (*graph_key)(void *model);
    int (*graph_per_slot)(const void *model); // one graph per staging slot (the step reads the slot's
                                               // per-batch state in place). NULL: one graph
    // After the engine queued a step that step() did not queue itself (a graph launch). NULL: nothing.
    int (*step_queued)(void *model, tk_err *e);

    // ---- evaluation ----
    // The eval set, read once and cached in the backend's memory (MLPerf allows caching it).
    int (*evalset_load)(void *model, char *const *paths, int npaths, void **es, tk_err *e);
    int64_t (*evalset_count)(const void *es);
    void (*evalset_free)(void *model, void *es);
    // The metric over the whole set; collective on several ranks (every rank gets the value).
    int (*evaluate)(void *model, void *es, double *metric, tk_err *e);

    // ---- MLLOG ----
    // The benchmark's hyperparameter keys (optimizer, schedule, model), logged between the engine's
    // common keys (submission_*, seed, global_batch_size, ...) and train_samples. run is complete
    // by then: run->steps_per_epoch is the training data's (for keys given in epochs).
    int (*mllog_hparams)(void *model, const tk_run_cfg *run, tk_mllog *log, tk_err *e);
    // weights_initialization events for the tensors the benchmark's rules name.
    int (*mllog_weights)(void *model, tk_mllog *log, tk_err *e);

    // ---- importing ----
    // train-step --init-checkpoint FILE: the weights of a checkpoint of another writer (Hugging
    // Face, torchvision: their tensor names and layouts), after init_weights; what the file lacks
    // keeps its initialization. Use lib/engine/ckpt.h's readers (checksums verified when present).
    // NULL: only trainkit checkpoints of this workload (loaded by name, the optimizer state left).
    int (*import)(void *model, const char *path, tk_err *e);

    // ---- optional extras ----
    // Per-phase step timing (train-step --profile): the most marks the step makes (tk_wl_env.prof);
    // the engine keeps the timer and prints the phases. 0: the engine times whole steps only.
    int profile_marks;
    // Members added to the run's result line (a new object or NULL).
    json_t *(*result_extra)(const void *model);

    // ---- device batches (version 2) ----
    // Which fields reader rd can write straight into memory of CUDA device `device` (a GPU image
    // decoder's images, which would otherwise come back to the host only to be copied up again):
    // a mask, bit f for field f of batch, from now on written there; 0: it goes on writing
    // host memory. The engine asks each loader thread's reader once, after reader_open, on the
    // cuda backend (not under train-step --host-batches); read_batch then gets device buffers for
    // those fields and pinned host ones for the others (one set per loader thread; the engine
    // moves each batch into a staging slot on the copy stream, device to device for the device
    // fields) and returns only once the batch is complete in them (it may wait for its own stream:
    // that blocks its loader thread, never the loop). host_batch is not called for batches with
    // device fields, so a workload whose graph_key needs the host fields answers 0. NULL: host.
    unsigned (*reader_device)(void *rd, int device);

    // ---- the optimizer's MLLOG keys (version 3) ----
    // The benchmark's names for the optimizer's and schedule's hyperparameters, {NULL} terminated:
    // the engine logs them (engine/optimizer.h tk_optimizer_mllog) from the parsed "optimizer"
    // section, after its common keys and before mllog_hparams. NULL: none.
    const tk_opt_mllog_key *opt_mllog;

    // ---- the step dump (version 4) ----
    // train-step --dump-step (above): what the dump holds of the workload's own beside the batch
    // as read, before the step (d zeroed; the batch is in the inputs). It may queue work that puts
    // a field in another form (d->batch[f]; into a buffer the step may overwrite: the engine reads
    // the batch before the step). NULL: no dump (--dump-step is a usage error).
    int (*dump_describe)(void *model, tk_wl_dump *d, tk_err *e);

    // ---- MLLOG's epoch of an evaluation, the warm-up step (version 6) ----
    // The epoch_num of eval_start, eval_accuracy and eval_stop, as the benchmark's logs write it.
    // 0: the epoch, counted from 1, that the evaluated model's last training step belongs to (an
    // integer: ResNet's and the 3D U-Net's evaluation after epoch 4 says 4; BERT, shorter than its
    // data's epoch, says 1). 1: 1 + the epochs trained, a fraction (DLRM's evaluations every 0.05
    // epoch say 1.05, 1.1, ...; NVIDIA's HugeCTR logs).
    int epoch_fraction;
    // 1: on the cuda backend the engine runs one step eagerly right after create (the model's
    // buffers as create left them, zeroed), before anything is captured in a CUDA graph: cuDNN's
    // convolutions plan their engines and workspaces and load their kernels on the first run,
    // which a capture cannot do. No optimizer runs (the weights stay as create left them); the
    // loss accumulator is zeroed after it, and init_weights or a checkpoint's load sets what else
    // the step wrote (gradients, BatchNorm's running statistics). 0: none (a step that needs a
    // staged batch's per-batch state, or collectives, cannot run on zeroed buffers).
    int warmup;

    // ---- staging further ahead (version 7) ----
    // How many staging slots the model wants, 2 or 3 (TK_STAGE_MAX_SLOTS), asked once after
    // prepare. 2 (and NULL): batch n + 1 is staged (copied, staged) right after step n is queued,
    // and used next. 3: batch n + 2 is staged right after step n is queued (batches 0 and 1
    // before step 0), so staged's work for a batch may start one step earlier and finish later:
    // DLRM's hybrid embedding all-gathers batch n + 2's ids before step n + 1 is queued and plans
    // that batch in the staged call of batch n + 3, or in use at the latest (staged may leave work
    // pending; use must complete it). Slots are step % depth; staged, use, host_batch and the
    // graphs of graph_per_slot get that slot. The environment's TK_STAGE_DEPTH=2 caps it (for
    // tests and benchmarks: the same results, staged one step later).
    int (*stage_depth)(const void *model);
} tk_workload;

// Whether metric value v reaches target: at or above it, or at or below it when lower is better
// (NaN, an undefined metric, never does). The one test of train-step's stop and evaluate's verdict.
static inline int tk_wl_reaches(const tk_workload *wl, double v, double target) {
    return wl->lower_is_better ? v <= target : v >= target;
}

#ifdef __cplusplus
}
#endif

#endif
