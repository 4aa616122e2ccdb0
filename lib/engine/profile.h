// Per-phase step timing for train-step --profile (the engine starts it for a workload with
// profile_marks and hands it over as tk_wl_env.prof): a workload records timed events at the boundaries of its step's phases, each mark
// naming the phase it ends; the time of a phase is the time since the mark before it on the same
// stream, summed per phase name over the kept steps. Marks inside a CUDA-graph capture record
// nothing (the engine runs --profile eagerly). One of these per model, NULL when off: every
// function below is then a no-op.
#ifndef TK_ENGINE_PROFILE_H
#define TK_ENGINE_PROFILE_H

#include <jansson.h>

#include "core/err.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_prof tk_prof;

// *P (when NULL) = a timer of at most max_marks marks a step (and as many phase names), its
// events made on c; who names the workload in an error. *P already set: nothing.
int tk_prof_start(tk_ctx *c, int max_marks, const char *who, tk_prof **P, tk_err *e);
void tk_prof_stop(tk_prof **P);
// Begin (1) or end (0) a step's marks.
void tk_prof_step(tk_prof *P, int begin);
// Marks the end of phase `name` (NULL: a mark that only starts the next one) on `stream`.
int tk_prof_mark(tk_prof *P, tk_ctx *c, const char *name, int stream, tk_err *e);
// Once the step has completed: adds its phases' times to the totals when keep is nonzero (0: a
// warm-up step, dropped), and forgets the step's marks.
int tk_prof_add(tk_prof *P, tk_ctx *c, int keep, tk_err *e);
// {"steps": n, "ms": {phase: mean ms per step, ...}} in the order the phases first ran (a new
// reference; NULL when P is NULL).
json_t *tk_prof_json(const tk_prof *P);

#ifdef __cplusplus
}
#endif

#endif
