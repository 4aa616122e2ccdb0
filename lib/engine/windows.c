// The progress windows and the steady state (windows.h).
#include "engine/windows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int tk_windows_add(tk_windows *w, double samples_per_s, tk_err *e) {
    if (w->n == w->cap) {
        int64_t cap = w->cap ? 2 * w->cap : 64;
        double *r = realloc(w->rate, (size_t)cap * sizeof *r);
        if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
        w->rate = r, w->cap = cap;
    }
    w->rate[w->n++] = samples_per_s;
    return 0;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double tk_windows_steady(const tk_windows *w) {
    int64_t n = tk_windows_steady_count(w);
    if (n < TK_STEADY_MIN) return NAN;
    double *s = malloc((size_t)n * sizeof *s);
    if (!s) return NAN;
    memcpy(s, w->rate + 1, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    double m = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    free(s);
    return m;
}

void tk_windows_free(tk_windows *w) {
    free(w->rate);
    memset(w, 0, sizeof *w);
}
