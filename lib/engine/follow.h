// Evaluation out of the training process (man/man1/evaluate.1), both halves of the directory
// protocol. The evaluator: a checkpoint is evaluated by a model made from the configuration in its
// own metadata, so one evaluator serves every workload; with --follow DIR (beside train-step
// --eval-dir DIR, possibly on a dedicated GPU) it evaluates each new DIR/NAME.safetensors and
// writes DIR/NAME.eval.json atomically; DIR/STOP ends it. The trainer (tk_eval_dir): writes
// DIR/step-S.safetensors, reads DIR/step-S.eval.json in step order, writes DIR/STOP at its end.
#ifndef TK_ENGINE_FOLLOW_H
#define TK_ENGINE_FOLLOW_H

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_evaluator tk_evaluator;

// Which weights a checkpoint is evaluated with.
typedef enum tk_eval_weights {
    TK_EVAL_WEIGHTS_AUTO, // what training evaluated in process: the moving average (the ema.NAME
                          // tensors) when the checkpoint's configuration has optimizer.ema > 0,
                          // else the trained weights
    TK_EVAL_WEIGHTS_RAW,  // the trained weights
    TK_EVAL_WEIGHTS_EMA,  // the moving average (TK_EDATA for a checkpoint without one)
} tk_eval_weights;

typedef struct tk_eval_opts {
    char *const *eval;      // the evaluation data (files or directories)
    int neval;
    int has_target;         // report "target" and "reached" against target
    double target;
    tk_eval_weights weights;
    void (*note)(void *arg, const char *msg); // a message for people (stderr), or NULL
    void *note_arg;
} tk_eval_opts;

int tk_evaluator_create(tk_evaluator **ev, tk_ctx *c, const tk_eval_opts *o, tk_err *e);
void tk_evaluator_destroy(tk_evaluator *ev);
// Evaluates the checkpoint at path (name: how the result line names it): *res gets
// {"type":"eval","metric":M,"checkpoint":name,"step":S,"samples":N,M:value,"eval_samples":K,"batch":B,
// "weights":W,"eval_s":T} (W "ema" or "raw": which weights o->weights chose) plus "target" and
// "reached" when o->has_target. The model is one rank holding one
// training rank's batch B (the global batch / the metadata's world_size; the global batch without
// one). It is made again only when the checkpoint's configuration or world_size differs from the
// previous one's.
int tk_evaluator_run(tk_evaluator *ev, const char *path, const char *name, json_t **res, tk_err *e);
// --follow: evaluates the checkpoints of dir without a result, oldest step first, polling every
// poll seconds, printing each result line on out; ends when dir/STOP exists and nothing is left
// (0), or after timeout seconds without a new checkpoint (timeout > 0; TK_NO).
int tk_follow(tk_evaluator *ev, const char *dir, double poll, double timeout, FILE *out, tk_err *e);
// The file that ends a follower: dir/STOP, written atomically.
int tk_follow_stop(const char *dir, tk_err *e);

// ---- the trainer's half ----

// The checkpoints a run wrote to dir for evaluation whose result it has not read, oldest first.
typedef struct tk_eval_dir {
    const char *dir;
    const char *metric;     // the number each result must hold (the workload's metric)
    int64_t *pend;
    int npend, cap;
} tk_eval_dir;
// After dir/step-S.safetensors was written: its result is awaited.
int tk_eval_dir_push(tk_eval_dir *d, int64_t step, tk_err *e);
// The result of the oldest pending checkpoint, dir/step-S.eval.json: *res (a new reference, its
// metric a number, else TK_EDATA naming the file) and *step, no longer pending. *res NULL: nothing
// pending, or (wait_s <= 0) its result is not there yet. wait_s > 0: waits up to that long for it,
// then TK_EIO.
int tk_eval_dir_next(tk_eval_dir *d, double wait_s, int64_t *step, json_t **res, tk_err *e);
void tk_eval_dir_free(tk_eval_dir *d);

#ifdef __cplusplus
}
#endif

#endif
