// Where DLRM's step time goes (train-step --profile; the timer is lib/engine/profile.h's, at most
// TK_DLRM_PROF_MAX marks a step): once --profile started it, every step run
// eagerly (a step captured into a CUDA graph records nothing) records timed events between its
// phases on the compute stream ("lookup", "bottom_fwd", "wait_a2a_fwd", "interaction_fwd",
// "top_fwd", "top_bwd", "interaction_bwd", "bottom_bwd", "wait_comm", "embedding_bwd_sgd",
// "dense_sgd", ...: each the time since the mark before it on that stream, so the compute phases
// add up to the step) and around each collective on the comm stream ("a2a_fwd", "allreduce_top",
// "a2a_bwd", "allreduce_bottom"; the plain exchange's "all_gather_ids" first, "wait_ids" on the
// compute stream after it). A "wait_*" phase is the compute stream waiting for the comm
// stream: communication not hidden.
#ifndef TK_WORKLOADS_DLRM_PROFILE_H
#define TK_WORKLOADS_DLRM_PROFILE_H

#include <jansson.h>

#include "workloads/dlrm/types.h"

#define TK_DLRM_PROF_MAX 40


// Inside the step: begin (1) or end (0) a step's marks; mark the end of phase `name` (NULL: the
// start of the next one) on `stream`.
static inline void tk_dlrm_prof_step(tk_dlrm *m, int begin) { tk_prof_step(*m->env.prof, begin); }
static inline int tk_dlrm_prof_mark(tk_dlrm *m, const char *name, int stream, tk_err *e) {
    return tk_prof_mark(*m->env.prof, m->c, name, stream, e);
}

#endif
