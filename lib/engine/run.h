// One training run's state, shared by the engine's own files (not an interface): engine.c (the
// loop, evaluations, the end), setup.c (everything before run_start), dump.c (--dump-step).
#ifndef TK_ENGINE_RUN_H
#define TK_ENGINE_RUN_H

#include <jansson.h>
#include <stdint.h>

#include "core/jsonl.h"
#include "core/mllog.h"
#include "engine/engine.h"
#include "engine/follow.h"
#include "engine/graphs.h"
#include "engine/instance.h"
#include "engine/loader.h"
#include "engine/runlog.h"
#include "engine/windows.h"
#include "gpu/comm.h"

typedef struct tk_run {
    const tk_train_opts *o;
    const tk_workload *wl;
    tk_ctx *c;
    tk_comm *comm;
    tk_instance I;
    int made;
    void *es;                // the in-process eval set
    tk_mllog log;
    tk_runlog held;          // its lines until the run can start
    int64_t B, count, steps_per_epoch, epoch_samples, total_steps, eval_every_steps, eval_first_step;
    int64_t step;            // updates applied
    double t_begin;          // tk_engine_train's start (monotonic)
    double t_run0;           // run_start
    double t_first;          // the first step of this process done (0: not yet)
    double eval_s, ckpt_s;   // seconds in evaluations (or their checkpoints) and --ckpt-every saves
    tk_windows win;          // the progress windows' samples/s (steady_samples_per_s)
    double last, best;       // the metric: last and best evaluation
    int reached, eval_samples_logged;
    tk_eval_dir ed;          // --eval-dir: the checkpoints awaiting an external result
    tk_graph_cache graphs;   // the step's CUDA graphs
    double wait_loader, wait_copy; // seconds the loop waited for decoded batches / their copies
    int device_loaders;      // loader threads whose reader writes device memory (device batches)
    tk_stager st;
    tk_wl_field fields[TK_BATCH_MAX_FIELDS]; // the table's batch
    void *inputs[TK_BATCH_MAX_FIELDS];       // what derives from it: the fields' input buffers
    tk_batch_layout L;                       // and byte sizes
} tk_run;

static inline int tk_run_rank0(const tk_run *r) { return r->o->ri.rank == 0; }

// A JSON Lines object on the run's output (rank 0; o is taken).
static inline int tk_run_emit(const tk_run *r, json_t *o, tk_err *e) {
    if (!tk_run_rank0(r) || !r->o->out) {
        json_decref(o);
        return 0;
    }
    return tk_jsonl_emit(r->o->out, o, e);
}

// A message for people (rank 0).
static inline void tk_run_note(const tk_run *r, const char *msg) {
    if (tk_run_rank0(r) && r->o->note) r->o->note(r->o->note_arg, msg);
}

// setup.c: configuration, data, model, evaluation set (everything before run_start); then the
// checkpoint and evaluation directories; the "config" line.
int tk_run_init(tk_run *r, tk_backend be, tk_err *e);
int tk_run_make_dirs(tk_run *r, tk_err *e);
int tk_run_config_line(tk_run *r, tk_backend be, tk_err *e);
// dump.c: --dump-step.
int tk_run_dump_step(tk_run *r, tk_err *e);

#endif
