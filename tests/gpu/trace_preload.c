// A CUPTI trace of any trainkit program, ranks included (a diagnostic, not part of trainkit):
//
//   LD_PRELOAD=build/tests/gpu/trace_preload.so TK_TRACE=/tmp/t.%r train-step ...
//
// writes cupti_trace.h's records (kernels, copies, memsets, synchronizations; no API calls unless
// TK_TRACE_API=1: a training run makes millions) from the program's start to its exit, "%r" in
// the name replaced by the rank (RANK, as share/launch sets it; 0 without). TK_TRACE_PROG=NAME
// traces only the programs of that name (a launcher's shells and tools run with LD_PRELOAD too). The kernels of CUDA
// graph replays are recorded one by one. contrib/bench/rank_steps.py summarizes such files.
// Built by `make trace-preload` (not by default: it is only for the device).
#define GT_TRACE_NO_CUDART
#include <stdio.h>
#define GT_TRACE_SAY(...) fprintf(stderr, __VA_ARGS__)
#include "cupti_trace.h"

#if __has_include(<cupti.h>)
static void tp_fini(void) { gt_trace_stop(); }

__attribute__((constructor)) static void tp_init(void) {
    const char *t = getenv("TK_TRACE"), *r = getenv("RANK"), *prog = getenv("TK_TRACE_PROG");
    if (!t || !*t) return;
    extern char *program_invocation_short_name;
    if (prog && *prog && strcmp(prog, program_invocation_short_name) != 0) return;
    char path[4096];
    size_t n = 0;
    for (const char *p = t; *p && n + 16 < sizeof path; p++)
        if (p[0] == '%' && p[1] == 'r')
            n += (size_t)snprintf(path + n, sizeof path - n, "%s", r && *r ? r : "0"), p++;
        else
            path[n++] = *p;
    path[n] = 0;
    setenv("TK_TRACE", path, 1);
    if (!gt_trace_start()) return;
    const char *api = getenv("TK_TRACE_API");
    if (!api || strcmp(api, "1") != 0)
        gt_tr_.Disable(CUPTI_ACTIVITY_KIND_RUNTIME), gt_tr_.Disable(CUPTI_ACTIVITY_KIND_DRIVER);
    // at exit: registered before the program's own handlers (CUDA's among them), so it runs after
    // them; CUPTI hands over what it holds of a context when that context is destroyed too
    atexit(tp_fini);
}
#endif
