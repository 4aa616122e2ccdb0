// Where DLRM's step time goes (train-step --profile): after tk_dlrm_profile_start, every step run
// eagerly (a step captured into a CUDA graph records nothing) records timed events between its
// phases on the compute stream ("lookup", "bottom_fwd", "wait_a2a_fwd", "interaction_fwd",
// "top_fwd", "top_bwd", "interaction_bwd", "bottom_bwd", "wait_comm", "embedding_bwd_sgd",
// "dense_sgd", ...: each the time since the mark before it on that stream, so the compute phases
// add up to the step) and around each collective on the comm stream ("a2a_fwd", "allreduce_top",
// "a2a_bwd", "allreduce_bottom"). A "wait_*" phase is the compute stream waiting for the comm
// stream: communication not hidden. tk_dlrm_profile_add, once the step has completed, adds the
// step's times to the totals when keep is nonzero (0: a warm-up step, dropped);
// tk_dlrm_profile_json gives {"steps": n, "ms": {phase: mean ms per step, ...}} in the order the
// phases first ran (a new reference; NULL when off).
#ifndef TK_WORKLOADS_DLRM_PROFILE_H
#define TK_WORKLOADS_DLRM_PROFILE_H

#include <jansson.h>

#include "workloads/dlrm/types.h"

int tk_dlrm_profile_start(tk_dlrm *m, tk_err *e);
void tk_dlrm_profile_stop(tk_dlrm *m);
int tk_dlrm_profile_add(tk_dlrm *m, int keep, tk_err *e);
json_t *tk_dlrm_profile_json(const tk_dlrm *m);
// Inside the step: begin (1) or end (0) a step's marks; mark the end of phase `name` (NULL: the
// start of the next one) on `stream`.
void tk_dlrm_prof_step(tk_dlrm *m, int begin);
int tk_dlrm_prof_mark(tk_dlrm *m, const char *name, int stream, tk_err *e);

#endif
