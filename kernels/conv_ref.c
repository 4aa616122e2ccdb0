// CPU reference of kernels/conv.h: direct loops, OpenMP over output pixels (forward), images
// (backward data) or filters (backward filter). Sums of the forward and backward-data passes are
// fp32 (at most R*S*C or K*R*S terms, as cuDNN's fp32 accumulators); the filter gradient, a sum
// over the whole batch, is accumulated in fp64. bf16 inputs are widened once and outputs rounded.
#include <stdlib.h>
#include <string.h>

#include "act_io.h"
#include "conv.h"

int tk_conv_shape_init(tk_conv_shape *s, int N, int H, int W, int C, int K, int R, int S, int stride, int pad,
                       tk_err *e) {
    *s = (tk_conv_shape){.N = N, .H = H, .W = W, .C = C, .K = K, .R = R, .S = S, .stride = stride, .pad = pad};
    if (N < 1 || H < 1 || W < 1 || C < 1 || K < 1 || R < 1 || S < 1 || stride < 1 || pad < 0 || H + 2 * pad < R ||
        W + 2 * pad < S)
        return tk_err_set(e, TK_EINTERNAL, "conv: bad shape N %d H %d W %d C %d K %d R %d S %d stride %d pad %d", N, H,
                          W, C, K, R, S, stride, pad);
    s->P = (H + 2 * pad - R) / stride + 1;
    s->Q = (W + 2 * pad - S) / stride + 1;
    if ((int64_t)N * H * W * C > INT32_MAX || (int64_t)N * s->P * s->Q * K > INT32_MAX ||
        (int64_t)K * R * S * C > INT32_MAX)
        return tk_err_set(e, TK_EINTERNAL, "conv: a tensor of more than 2^31 elements");
    return 0;
}

// Input pixel (*h, *w) under tap (r, u) of output pixel (p, q); 0 when it falls in the padding.
static inline int tap(const tk_conv_shape *s, int p, int q, int r, int u, int *h, int *w) {
    *h = p * s->stride - s->pad + r;
    *w = q * s->stride - s->pad + u;
    return *h >= 0 && *h < s->H && *w >= 0 && *w < s->W;
}

// p as fp32: p itself, or a widened copy in *own (freed by the caller).
static const float *as_f32(const void *p, tk_dtype t, size_t n, float **own) {
    *own = NULL;
    if (t == TK_F32) return p;
    if (!(*own = malloc(n * sizeof(float) + 1))) return NULL;
    tk_act_ld_n(p, t, 0, *own, n);
    return *own;
}

static int fwd(const tk_conv_shape *s, tk_dtype t, const float *x, const float *w, void *y) {
    const int H = s->H, W = s->W, C = s->C, K = s->K, R = s->R, S = s->S, P = s->P, Q = s->Q;
    // the filters as (R, S, C, K): the innermost loop runs over k, contiguous in both
    float *wt = malloc((size_t)R * S * C * K * sizeof(float) + 1);
    if (!wt) return TK_EIO;
    for (int k = 0; k < K; k++)
        for (int rsc = 0; rsc < R * S * C; rsc++) wt[(size_t)rsc * K + k] = w[(size_t)k * R * S * C + rsc];
    int fail = 0;
#pragma omp parallel
    {
        float *acc = malloc((size_t)K * sizeof(float) + 1);
        if (!acc) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for collapse(2) schedule(static)
        for (int n = 0; n < s->N; n++)
            for (int p = 0; p < P; p++) {
                if (!acc) continue;
                for (int q = 0; q < Q; q++) {
                    memset(acc, 0, (size_t)K * sizeof(float));
                    for (int r = 0; r < R; r++)
                        for (int u = 0, h, ww; u < S; u++) {
                            if (!tap(s, p, q, r, u, &h, &ww)) continue;
                            const float *xp = x + (((size_t)n * H + h) * W + ww) * C;
                            const float *wrs = wt + ((size_t)r * S + u) * C * K;
                            for (int c = 0; c < C; c++) {
                                const float xv = xp[c], *wk = wrs + (size_t)c * K;
#pragma omp simd
                                for (int k = 0; k < K; k++) acc[k] += xv * wk[k];
                            }
                        }
                    tk_act_st_n(y, t, (((size_t)n * P + p) * Q + q) * K, acc, (size_t)K);
                }
            }
        free(acc);
    }
    free(wt);
    return fail ? TK_EIO : 0;
}

static int bwd_data(const tk_conv_shape *s, tk_dtype t, const float *dy, const float *w, void *dx) {
    const int H = s->H, W = s->W, C = s->C, K = s->K, R = s->R, S = s->S, P = s->P, Q = s->Q;
    int fail = 0;
    // One image per thread: its (p, q) scatter into overlapping windows of dx.
#pragma omp parallel
    {
        float *acc = malloc((size_t)H * W * C * sizeof(float) + 1);
        if (!acc) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(static)
        for (int n = 0; n < s->N; n++) {
            if (!acc) continue;
            memset(acc, 0, (size_t)H * W * C * sizeof(float));
            for (int p = 0; p < P; p++)
                for (int q = 0; q < Q; q++) {
                    const float *dyp = dy + (((size_t)n * P + p) * Q + q) * K;
                    for (int r = 0; r < R; r++)
                        for (int u = 0, h, ww; u < S; u++) {
                            if (!tap(s, p, q, r, u, &h, &ww)) continue;
                            float *xp = acc + ((size_t)h * W + ww) * C;
                            for (int k = 0; k < K; k++) {
                                const float dv = dyp[k], *wc = w + (((size_t)k * R + r) * S + u) * C;
#pragma omp simd
                                for (int c = 0; c < C; c++) xp[c] += dv * wc[c];
                            }
                        }
                }
            tk_act_st_n(dx, t, (size_t)n * H * W * C, acc, (size_t)H * W * C);
        }
        free(acc);
    }
    return fail ? TK_EIO : 0;
}

static int bwd_filter(const tk_conv_shape *s, tk_dtype t, const float *x, const float *dy, void *dw) {
    const int H = s->H, W = s->W, C = s->C, K = s->K, R = s->R, S = s->S, P = s->P, Q = s->Q;
    const size_t rsc = (size_t)R * S * C;
    int fail = 0;
#pragma omp parallel
    {
        double *acc = malloc(rsc * sizeof(double) + 1);
        float *out = malloc(rsc * sizeof(float) + 1);
        if (!acc || !out) {
#pragma omp atomic write
            fail = 1;
        }
#pragma omp for schedule(static)
        for (int k = 0; k < K; k++) {
            if (!acc || !out) continue;
            memset(acc, 0, rsc * sizeof(double));
            for (int n = 0; n < s->N; n++)
                for (int p = 0; p < P; p++)
                    for (int q = 0; q < Q; q++) {
                        const double dv = dy[(((size_t)n * P + p) * Q + q) * K + k];
                        for (int r = 0; r < R; r++)
                            for (int u = 0, h, ww; u < S; u++) {
                                if (!tap(s, p, q, r, u, &h, &ww)) continue;
                                const float *xp = x + (((size_t)n * H + h) * W + ww) * C;
                                double *a = acc + ((size_t)r * S + u) * C;
#pragma omp simd
                                for (int c = 0; c < C; c++) a[c] += dv * xp[c];
                            }
                    }
            for (size_t j = 0; j < rsc; j++) out[j] = (float)acc[j];
            tk_act_st_n(dw, t, (size_t)k * rsc, out, rsc);
        }
        free(acc);
        free(out);
    }
    return fail ? TK_EIO : 0;
}

int tk_conv_ref(tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, const void *a, const void *b, void *out,
                tk_err *e) {
    if (!tk_act_ok(t)) return tk_err_set(e, TK_EINTERNAL, "conv: tensors in %s", tk_dtype_name(t));
    size_t nx = (size_t)tk_conv_x_numel(s), ny = (size_t)tk_conv_y_numel(s), nw = (size_t)tk_conv_w_numel(s);
    size_t na = pass == TK_CONV_BWD_DATA ? ny : nx, nb = pass == TK_CONV_BWD_FILTER ? ny : nw;
    float *oa, *ob;
    const float *fa = as_f32(a, t, na, &oa), *fb = as_f32(b, t, nb, &ob);
    int rc = !fa || !fb ? TK_EIO
             : pass == TK_CONV_FWD      ? fwd(s, t, fa, fb, out)
             : pass == TK_CONV_BWD_DATA ? bwd_data(s, t, fa, fb, out)
                                        : bwd_filter(s, t, fa, fb, out);
    free(oa);
    free(ob);
    return rc ? tk_err_set(e, TK_EIO, "conv: out of host memory") : 0;
}
