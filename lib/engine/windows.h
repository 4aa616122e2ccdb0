// The progress windows' throughputs of a run (each progress line's samples_per_s, in order) and the
// steady state the result line reports: their median after the first window, which holds the
// start-up (graph captures, the loader's first batches). share/scale reads it as the throughput.
#ifndef TK_ENGINE_WINDOWS_H
#define TK_ENGINE_WINDOWS_H

#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// Windows after the first a steady state needs.
#define TK_STEADY_MIN 3

typedef struct tk_windows {
    double *rate;
    int64_t n, cap;
} tk_windows;

int tk_windows_add(tk_windows *w, double samples_per_s, tk_err *e);
// The median of the windows after the first; NaN with fewer than TK_STEADY_MIN of them.
double tk_windows_steady(const tk_windows *w);
// The windows after the first.
static inline int64_t tk_windows_steady_count(const tk_windows *w) { return w->n > 0 ? w->n - 1 : 0; }
void tk_windows_free(tk_windows *w);

#ifdef __cplusplus
}
#endif

#endif
