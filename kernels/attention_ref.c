// CPU reference of kernels/attention.h's kernels: fp32 values, fp64 sums.
#include <math.h>

#include "attention.h"

static int check(tk_dtype act, const char *op, const tk_dropout *d, tk_err *e) {
    if (act != TK_F32) return tk_err_set(e, TK_EINTERNAL, "%s (cpu): activations in %s, want F32", op, tk_dtype_name(act));
    if (d && d->p > 0 && !d->step) return tk_err_set(e, TK_EINTERNAL, "%s: dropout without a step counter", op);
    return 0;
}

// sequence b's rows start[b] .. start[b] + len[b] - 1 of (rows, parts NH D) <-> (parts, B, NH, L, D);
// the split writes 0 at positions i >= len[b], the merge writes only the sequences' rows.
static void heads(int B, int L, int NH, int D, int parts, const int32_t *start, const int32_t *len, const float *src,
                  float *dst, int split) {
#pragma omp parallel for collapse(2) schedule(static)
    for (int p = 0; p < parts; p++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < NH; h++)
                for (int i = 0; i < L; i++) {
                    size_t t = ((size_t)start[b] + i) * parts * NH * D + ((size_t)p * NH + h) * D;
                    size_t u = ((((size_t)p * B + b) * NH + h) * L + i) * D;
                    int in = i < len[b];
                    for (int d = 0; d < D; d++)
                        if (split) dst[u + d] = in ? src[t + d] : 0.0f;
                        else if (in) dst[t + d] = src[u + d];
                }
}

int tk_attn_heads_split_ref(tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                            const int32_t *len, const void *src, void *dst, tk_err *e) {
    TRY(check(act, "attn_heads_split", NULL, e));
    heads(B, L, NH, D, parts, start, len, src, dst, 1);
    return 0;
}

int tk_attn_heads_merge_ref(tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                            const int32_t *len, const void *src, void *dst, tk_err *e) {
    TRY(check(act, "attn_heads_merge", NULL, e));
    heads(B, L, NH, D, parts, start, len, src, dst, 0);
    return 0;
}

int tk_attn_softmax_fwd_ref(tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                            const tk_dropout *drop, void *P, void *Pd, tk_err *e) {
    TRY(check(act, "attn_softmax_fwd", drop, e));
    const float *s = S;
    float *p = P, *pd = Pd;
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    const int64_t rows = (int64_t)B * NH * L;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        int b = (int)(r / ((int64_t)NH * L)), n = len[b] < L ? len[b] : L;
        size_t o = (size_t)r * L;
        float mx = -INFINITY;
        for (int j = 0; j < n; j++) mx = s[o + j] > mx ? s[o + j] : mx;
        double sum = 0;
        for (int j = 0; j < n; j++) sum += expf(s[o + j] - mx);
        for (int j = 0; j < L; j++) {
            float v = j < n ? (float)(expf(s[o + j] - mx) / sum) : 0.0f;
            p[o + j] = v;
            if (pd) pd[o + j] = v * tk_dropout_factor(drop, th, step, (int64_t)(o + j));
        }
    }
    return 0;
}

int tk_attn_softmax_bwd_ref(tk_dtype act, int B, int NH, int L, const int32_t *len, const void *P, const void *dPd,
                            const tk_dropout *drop, void *dS, tk_err *e) {
    TRY(check(act, "attn_softmax_bwd", drop, e));
    const float *p = P, *g = dPd;
    float *ds = dS;
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    const int64_t rows = (int64_t)B * NH * L;
    (void)len; // P is 0 past each sequence's length, so dS is too
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        size_t o = (size_t)r * L;
        double c = 0;
        for (int j = 0; j < L; j++) c += (double)g[o + j] * tk_dropout_factor(drop, th, step, (int64_t)(o + j)) * p[o + j];
        float cf = (float)c;
        for (int j = 0; j < L; j++) {
            float dp = g[o + j] * tk_dropout_factor(drop, th, step, (int64_t)(o + j));
            ds[o + j] = p[o + j] * (dp - cf);
        }
    }
    return 0;
}

int tk_attn_probs_dropout_ref(tk_dtype act, int B, int NH, int L, const void *P, const tk_dropout *drop, void *Pd,
                              tk_err *e) {
    TRY(check(act, "attn_probs_dropout", drop, e));
    const float *p = P;
    float *pd = Pd;
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    const int64_t n = (int64_t)B * NH * L * L;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) pd[i] = p[i] * tk_dropout_factor(drop, th, step, i);
    return 0;
}
