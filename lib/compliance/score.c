// Scoring as MLCommons' result_summarizer does (_compute_olympic_average).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compliance/compliance.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void lc_olympic(double *t, int n, int dropped, int max_dropped, lc_score *out) {
    memset(out, 0, sizeof *out);
    out->runs = n + dropped;
    out->dropped = dropped;
    out->max_dropped = max_dropped; // ruleset.json's "drop": 4 for 3D U-Net (40 runs), else 1
    if (dropped > out->max_dropped) return; // "too many non-converging runs": no score
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    // failed runs count as the slowest, so fewer are dropped from the top
    int lo = out->max_dropped, hi = n - (out->max_dropped - dropped);
    if (hi <= lo) return;
    double sum = 0;
    for (int i = lo; i < hi; i++) sum += t[i]; // Python 3.11's sum(): left to right, no compensation
    out->has_score = 1;
    out->score_min = sum * 1.0 / (hi - lo);
}

double lc_round2(double x) {
    // printf rounds the exact binary value to nearest, ties to even: Python's round(x, 2)
    char buf[64];
    if (!isfinite(x)) return x;
    snprintf(buf, sizeof buf, "%.2f", x);
    return strtod(buf, NULL);
}
