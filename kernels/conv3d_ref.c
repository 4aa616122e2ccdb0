// CPU reference of kernels/conv3d.h: direct loops over each voxel's taps inside the volume (found
// once per voxel), OpenMP over output rows (forward), input rows (backward data, gathered so no
// two threads write one voxel) or filters (backward filter). The
// forward's and backward data's sums are fp32 (at most T*R*S*C or K*T*R*S terms, as cuDNN's fp32
// accumulators); the filter gradient, a sum over the whole batch, adds fp32 sums over one row of
// outputs (Q terms) in fp64. Inputs are widened to fp32 once, outputs rounded to t once.
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "act_io.h"
#include "conv3d.h"

int tk_conv3d_shape_init(tk_conv3d_shape *s, int N, int D, int H, int W, int C, int K, int k, int stride, int pad,
                         tk_err *e) {
    *s = (tk_conv3d_shape){.N = N, .D = D, .H = H, .W = W, .C = C, .K = K, .T = k, .R = k, .S = k, .stride = stride,
                           .pad = pad};
    if (N < 1 || D < 1 || H < 1 || W < 1 || C < 1 || K < 1 || k < 1 || stride < 1 || pad < 0 || D + 2 * pad < k ||
        H + 2 * pad < k || W + 2 * pad < k)
        return tk_err_set(e, TK_EINTERNAL, "conv3d: bad shape N %d %dx%dx%dx%d K %d %dx%dx%d stride %d pad %d", N, D, H,
                          W, C, K, k, k, k, stride, pad);
    s->Z = (D + 2 * pad - k) / stride + 1;
    s->P = (H + 2 * pad - k) / stride + 1;
    s->Q = (W + 2 * pad - k) / stride + 1;
    if (tk_conv3d_x_numel(s) > INT32_MAX || tk_conv3d_y_numel(s) > INT32_MAX || tk_conv3d_w_numel(s) > INT32_MAX)
        return tk_err_set(e, TK_EINTERNAL, "conv3d: a tensor of 2^31 elements or more");
    return 0;
}

int tk_conv3d_shape_transposed(tk_conv3d_shape *s, int N, int Din, int Hin, int Win, int Cin, int Cout, int k,
                               int stride, int pad, tk_err *e) {
    const int64_t D = ((int64_t)Din - 1) * stride - 2 * pad + k, H = ((int64_t)Hin - 1) * stride - 2 * pad + k,
                  W = ((int64_t)Win - 1) * stride - 2 * pad + k;
    if (Din < 1 || Hin < 1 || Win < 1 || stride < 1 || D < 1 || H < 1 || W < 1 || D > INT32_MAX || H > INT32_MAX ||
        W > INT32_MAX)
        return tk_err_set(e, TK_EINTERNAL, "conv3d: bad transposed shape %dx%dx%d k %d stride %d pad %d", Din, Hin,
                          Win, k, stride, pad);
    TRY(tk_conv3d_shape_init(s, N, (int)D, (int)H, (int)W, Cout, Cin, k, stride, pad, e));
    if (s->Z != Din || s->P != Hin || s->Q != Win) // (cannot happen: the output size formula inverted)
        return tk_err_set(e, TK_EINTERNAL, "conv3d: transposed shape does not invert");
    return 0;
}

// A tensor of n elements of type t as a new fp32 array (NULL: out of memory).
static float *widen(const void *p, tk_dtype t, size_t n) {
    float *f = malloc(n * sizeof(float) + 1);
    if (f) tk_act_ld_n(p, t, 0, f, n);
    return f;
}

// The taps that connect one voxel to the other side, found once per voxel: tap[i] the filter tap
// (a R + r) S + u, vox[i] the other side's voxel (its index in (N, spatial)). A forward voxel
// (n, z, p, q) of y reads x at (z, p, q) * stride - pad + (a, r, u) (the taps inside the volume);
// a backward voxel (n, d, h, w) of x is read by the y voxels (d, h, w) + pad - (a, r, u) that are
// multiples of the stride and inside y.
typedef struct {
    int n;
    int tap[512];
    size_t vox[512];
} taps;

// The input index of output coordinate o under tap j (fwd), or the output index reaching input
// coordinate o under tap j (bwd); -1 when there is none.
static inline int along(int o, int j, int stride, int pad, int n, int bwd) {
    if (!bwd) {
        const int i = o * stride - pad + j;
        return i >= 0 && i < n ? i : -1;
    }
    const int i = o + pad - j;
    return i >= 0 && i % stride == 0 && i / stride < n ? i / stride : -1;
}

static void taps_of(const tk_conv3d_shape *s, int bwd, int n, int i0, int i1, int i2, taps *tp) {
    const int e0 = bwd ? s->Z : s->D, e1 = bwd ? s->P : s->H, e2 = bwd ? s->Q : s->W;
    tp->n = 0;
    for (int a = 0; a < s->T; a++) {
        const int j0 = along(i0, a, s->stride, s->pad, e0, bwd);
        for (int r = 0; r < s->R && j0 >= 0; r++) {
            const int j1 = along(i1, r, s->stride, s->pad, e1, bwd);
            for (int u = 0; u < s->S && j1 >= 0; u++) {
                const int j2 = along(i2, u, s->stride, s->pad, e2, bwd);
                if (j2 < 0) continue;
                tp->tap[tp->n] = (a * s->R + r) * s->S + u;
                tp->vox[tp->n++] = (((size_t)n * e0 + j0) * e1 + j1) * e2 + j2;
            }
        }
    }
}

// Per-thread scratch of `per` floats: thread i's at scratch + i per (NULL: out of memory).
static float *scratch(size_t per) { return malloc((size_t)omp_get_max_threads() * per * sizeof(float) + 1); }

// y: per output voxel, the taps' x rows times the filters as (taps, C, K), k innermost.
static int fwd(const tk_conv3d_shape *s, tk_dtype t, const float *x, const float *w, void *y) {
    const int C = s->C, K = s->K;
    const size_t trsc = (size_t)s->T * s->R * s->S * C;
    float *wt = malloc(trsc * K * sizeof(float) + 1), *acc0 = scratch(K);
    if (!wt || !acc0 || s->T * s->R * s->S > 512) return free(wt), free(acc0), TK_EIO;
    for (int k = 0; k < K; k++)
        for (size_t j = 0; j < trsc; j++) wt[j * K + k] = w[(size_t)k * trsc + j];
#pragma omp parallel for collapse(3) schedule(static)
    for (int n = 0; n < s->N; n++)
        for (int z = 0; z < s->Z; z++)
            for (int p = 0; p < s->P; p++) {
                float *acc = acc0 + (size_t)omp_get_thread_num() * K;
                taps tp;
                for (int q = 0; q < s->Q; q++) {
                    taps_of(s, 0, n, z, p, q, &tp);
                    memset(acc, 0, (size_t)K * sizeof(float));
                    for (int i = 0; i < tp.n; i++)
                        for (int c = 0; c < C; c++) {
                            const float xv = x[tp.vox[i] * C + c], *wk = wt + ((size_t)tp.tap[i] * C + c) * K;
#pragma omp simd
                            for (int k = 0; k < K; k++) acc[k] += xv * wk[k];
                        }
                    tk_act_st_n(y, t, ((((size_t)n * s->Z + z) * s->P + p) * s->Q + q) * K, acc, (size_t)K);
                }
            }
    free(wt);
    free(acc0);
    return 0;
}

// dx: per input voxel, gathered from the y voxels that read it (no two threads write one voxel).
static int bwd_data(const tk_conv3d_shape *s, tk_dtype t, const float *dy, const float *w, void *dx) {
    const int C = s->C, K = s->K;
    const size_t trsc = (size_t)s->T * s->R * s->S * C;
    float *acc0 = scratch(C);
    if (!acc0 || s->T * s->R * s->S > 512) return free(acc0), TK_EIO;
#pragma omp parallel for collapse(3) schedule(static)
    for (int n = 0; n < s->N; n++)
        for (int d = 0; d < s->D; d++)
            for (int h = 0; h < s->H; h++) {
                float *acc = acc0 + (size_t)omp_get_thread_num() * C;
                taps tp;
                for (int ww = 0; ww < s->W; ww++) {
                    taps_of(s, 1, n, d, h, ww, &tp);
                    memset(acc, 0, (size_t)C * sizeof(float));
                    for (int i = 0; i < tp.n; i++)
                        for (int k = 0; k < K; k++) {
                            const float dv = dy[tp.vox[i] * K + k], *wc = w + (size_t)k * trsc + (size_t)tp.tap[i] * C;
#pragma omp simd
                            for (int c = 0; c < C; c++) acc[c] += dv * wc[c];
                        }
                    tk_act_st_n(dx, t, ((((size_t)n * s->D + d) * s->H + h) * s->W + ww) * C, acc, (size_t)C);
                }
            }
    free(acc0);
    return 0;
}

// dw: per filter k, fp32 sums over one row of y voxels (Q), added in fp64 (2 trsc scratch a thread).
static int bwd_filter(const tk_conv3d_shape *s, tk_dtype t, const float *x, const float *dy, void *dw) {
    const int C = s->C, K = s->K;
    const size_t trsc = (size_t)s->T * s->R * s->S * C;
    float *sc = scratch(3 * trsc); // per thread: fp64 sums (2 trsc floats' room), then the row's fp32 sums
    if (!sc || s->T * s->R * s->S > 512) return free(sc), TK_EIO;
#pragma omp parallel for schedule(static)
    for (int k = 0; k < K; k++) {
        float *mine = sc + (size_t)omp_get_thread_num() * 3 * trsc, *row = mine + 2 * trsc;
        double *acc = (double *)mine;
        taps tp;
        memset(acc, 0, trsc * sizeof(double));
        for (int n = 0; n < s->N; n++)
            for (int z = 0; z < s->Z; z++)
                for (int p = 0; p < s->P; p++) {
                    memset(row, 0, trsc * sizeof(float));
                    for (int q = 0; q < s->Q; q++) {
                        const float dv = dy[((((size_t)n * s->Z + z) * s->P + p) * s->Q + q) * K + k];
                        taps_of(s, 0, n, z, p, q, &tp);
                        for (int i = 0; i < tp.n; i++) {
                            const float *xp = x + tp.vox[i] * C;
                            float *o = row + (size_t)tp.tap[i] * C;
#pragma omp simd
                            for (int c = 0; c < C; c++) o[c] += dv * xp[c];
                        }
                    }
                    for (size_t j = 0; j < trsc; j++) acc[j] += row[j];
                }
        for (size_t j = 0; j < trsc; j++) row[j] = (float)acc[j];
        tk_act_st_n(dw, t, (size_t)k * trsc, row, trsc);
    }
    free(sc);
    return 0;
}

int tk_conv3d_ref(tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a, const void *b, void *out,
                  tk_err *e) {
    static int (*const run[3])(const tk_conv3d_shape *, tk_dtype, const float *, const float *, void *) = {
        [TK_CONV_FWD] = fwd, [TK_CONV_BWD_DATA] = bwd_data, [TK_CONV_BWD_FILTER] = bwd_filter};
    if (!tk_act_ok(t) || pass < TK_CONV_FWD || pass > TK_CONV_BWD_FILTER)
        return tk_err_set(e, TK_EINTERNAL, "conv3d: pass %d on tensors in %s", (int)pass, tk_dtype_name(t));
    // a's and b's sizes by pass: (x, w), (dy, w), (x, dy)
    const size_t na = (size_t)(pass == TK_CONV_BWD_DATA ? tk_conv3d_y_numel(s) : tk_conv3d_x_numel(s));
    const size_t nb = (size_t)(pass == TK_CONV_BWD_FILTER ? tk_conv3d_y_numel(s) : tk_conv3d_w_numel(s));
    float *fa = widen(a, t, na), *fb = widen(b, t, nb);
    const int rc = fa && fb ? run[pass](s, t, fa, fb, out) : TK_EIO;
    free(fa);
    free(fb);
    return rc ? tk_err_set(e, TK_EIO, "conv3d: out of host memory (or a filter of more than 512 taps)") : 0;
}
