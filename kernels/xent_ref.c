// CPU reference of kernels/xent.h: fp32 values, fp64 sums.
#include <math.h>
#include <stdlib.h>

#include "xent.h"

static int check(tk_dtype act, const char *op, int C, int ld, tk_err *e) {
    if (act != TK_F32) return tk_err_set(e, TK_EINTERNAL, "%s (cpu): activations in %s, want F32", op, tk_dtype_name(act));
    if (C < 1 || ld < C) return tk_err_set(e, TK_EINTERNAL, "%s: C %d ld %d", op, C, ld);
    return 0;
}

int tk_xent_fwd_bwd_ref(tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels, float scale,
                        double *acc, int bump, void *dlogits, void *ws, tk_err *e) {
    TRY(check(act, "xent", C, ld, e));
    const float *x = logits;
    float *dx = dlogits;
    double *loss = ws;
    int64_t n = 0;
    for (int r = 0; r < R; r++) n += labels[r] >= 0;
    const double w = n > 0 ? (double)scale / (double)n : 0.0;
    const float wf = (float)w;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < R; r++) {
        size_t o = (size_t)r * ld;
        int y = labels[r];
        loss[r] = 0;
        if (y < 0 || y >= C) {
            if (dx)
                for (int j = 0; j < ld; j++) dx[o + j] = 0;
            continue;
        }
        float mx = x[o];
        for (int j = 1; j < C; j++) mx = x[o + j] > mx ? x[o + j] : mx;
        double sum = 0;
        for (int j = 0; j < C; j++) sum += exp((double)x[o + j] - mx);
        loss[r] = log(sum) + mx - x[o + y];
        if (dx) {
            float xy = x[o + y]; // read before dx (which may be x) is written
            for (int j = 0; j < ld; j++) {
                float p = j < C ? (float)(exp((double)(j == y ? xy : x[o + j]) - mx) / sum) : 0.0f;
                dx[o + j] = j < C ? wf * (p - (j == y ? 1.0f : 0.0f)) : 0.0f;
            }
        }
    }
    double s = 0;
    for (int r = 0; r < R; r++) s += loss[r];
    if (acc) {
        acc[0] += w * s;
        if (bump) acc[1] += 1;
    }
    return 0;
}

int tk_xent_correct_ref(tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels, int64_t *counts,
                        tk_err *e) {
    TRY(check(act, "xent_correct", C, ld, e));
    const float *x = logits;
    int64_t ok = 0, n = 0;
    for (int r = 0; r < R; r++) {
        int y = labels[r];
        if (y < 0 || y >= C) continue;
        const float *row = x + (size_t)r * ld;
        int best = 0;
        for (int j = 1; j < C; j++)
            if (row[j] > row[best]) best = j;
        ok += best == y;
        n++;
    }
    counts[0] += ok;
    counts[1] += n;
    return 0;
}
