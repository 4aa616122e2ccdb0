// The training engine: one loop for every workload (DESIGN.md section 3a). train-step is its
// command line; evaluate's out-of-process evaluation is follow.h. Machine output is JSON Lines
// (one object per line with a "type") on `out` (rank 0 only); MLLOG lines go to the MLLOG file;
// notes for people go through the caller's note function. man/man1/train-step.1 has the lines.
#ifndef TK_ENGINE_ENGINE_H
#define TK_ENGINE_ENGINE_H

#include <stdint.h>
#include <stdio.h>

#include "core/err.h"
#include "dist/dist.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_train_opts {
    const char *config;            // the workload's config file
    const char *workload;          // --workload: must be the config's (NULL: any)
    char *const *sets;             // "KEY=VALUE" overrides, in order
    int nsets;
    char *const *train;            // training data (files or directories)
    int ntrain;
    char *const *eval;             // in-process evaluation data (or eval_dir)
    int neval;
    const char *eval_dir;          // out-of-process evaluation through a directory (follow.h)
    double eval_wait;              // seconds to wait at the end for pending results
    int64_t eval_every;            // evaluate every N samples (0: the config's cadence)
    const char *backend;           // "cpu", "cuda", "auto"
    const char *mllog;             // MLLOG file (appended), or NULL
    const char *ckpt_dir;          // checkpoints DIR/step-N.safetensors, or NULL
    int64_t ckpt_every;            // ... every N steps (0: at the end only)
    const char *resume;            // continue from a checkpoint
    const char *init_ckpt;         // start from these weights (a foreign checkpoint: the workload's import)
    int64_t max_steps;             // stop after N updates in total (0: the config's)
    int64_t log_every;             // a progress line every N steps (0: at evaluations only)
    int no_eval;                   // train without evaluating (throughput runs: share/scale --steps);
                                   // the run then ends "trained" with exit 0 after its steps
    int no_graphs, profile, progress;
    int64_t threads;               // cpu backend threads (0: default)
    int64_t loader_threads;        // 0: default
    int host_batches;              // every batch through pinned host memory, even from a reader
                                   // that can write device memory (workload.h reader_device)
    const char *dump;              // --dump-step FILE
    const char *org, *platform;    // MLLOG submission_org, submission_platform
    const char *rendezvous;        // several ranks: how they meet
    double comm_timeout;
    tk_rank_info ri;               // this process's rank
    FILE *out;                     // JSON Lines (rank 0)
    void (*note)(void *arg, const char *msg); // a message for people (stderr), or NULL
    void *note_arg;
} tk_train_opts;

// Runs the whole training: 0 when the target was reached (with no_eval: when every step ran),
// TK_NO when not, else an error code (e filled). A NaN/Inf loss is TK_ENUMERIC after the run's closing lines were written.
int tk_engine_train(const tk_train_opts *o, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
