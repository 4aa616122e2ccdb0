// The MLLOG of a run before it starts (train-step --mllog). The lines of the initialization
// (cache_clear, init_start, the hyperparameters) are held in an anonymous temporary file and
// appended to the user's file in one write once the run can start: a run that fails before that
// (a bad configuration, data set or checkpoint) leaves the file as it was, and does not create
// it. The lines keep the times at which their events happened.
#ifndef TK_ENGINE_RUNLOG_H
#define TK_ENGINE_RUNLOG_H

#include <stdio.h>

#include "core/err.h"
#include "core/mllog.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_runlog {
    FILE *held;        // the lines so far, or NULL: nothing held
    const char *path;  // where they go (borrowed)
} tk_runlog;

// Opens log for a run whose MLLOG goes to path (NULL: none; "-": standard error), holding its
// lines. An existing file that cannot be appended to, or a missing one whose directory cannot
// take it, fails now (TK_EIO naming it), not once the initialization is done.
int tk_runlog_hold(tk_runlog *h, tk_mllog *log, const char *path, int rank, tk_err *e);
// The run starts: the held lines go to the file (created 0644 if absent) in one write, and log
// writes there from now on.
int tk_runlog_release(tk_runlog *h, tk_mllog *log, tk_err *e);
// The run failed before it started: the held lines are dropped (log must not be used again).
void tk_runlog_discard(tk_runlog *h, tk_mllog *log);

#ifdef __cplusplus
}
#endif

#endif
