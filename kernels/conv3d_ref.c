// CPU reference of kernels/conv3d.h: direct loops over the taps inside the volume, in register
// blocks (a few voxels by 8 channels of the result) so the CPU backend trains small U-Nets at a
// usable rate; OpenMP over output rows (forward), input rows (backward data, gathered so no two
// threads write one voxel) or (tap, filters, channels) tiles (backward filter). The forward's and
// backward data's sums are fp32, taps outer and channels inner (at most T*R*S*C or T*R*S*K terms,
// as cuDNN's fp32 accumulators); the filter gradient, a sum over the whole batch, adds fp32 sums
// over one row of outputs (Q terms) in fp64. Inputs are widened to fp32 once, outputs rounded to t
// once.
#include <stdlib.h>
#include <string.h>

#include "act_io.h"
#include "conv3d.h"

int tk_conv3d_shape_init(tk_conv3d_shape *s, int N, int D, int H, int W, int C, int K, int k, int stride, int pad,
                         tk_err *e) {
    *s = (tk_conv3d_shape){
        .N = N, .D = D, .H = H, .W = W, .C = C, .K = K, .T = k, .R = k, .S = k, .stride = stride, .pad = pad};
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
        return tk_err_set(e, TK_EINTERNAL, "conv3d: bad transposed shape %dx%dx%d k %d stride %d pad %d", Din, Hin, Win,
                          k, stride, pad);
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

// Register blocks: QB voxels along a row (wgrad: QB filters) by VB channels, 8 vector registers of
// accumulators (block_dot).
enum { QB = 4, VB = 8 };
static inline int up(int v, int m) { return (v + m - 1) / m * m; }
static inline int imin(int a, int b) { return a < b ? a : b; }

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

// The (a, b) matrix src copied into rows of ld >= b floats (zeros after b), or, with transpose,
// its transpose into rows of ld >= a floats (zeros after a): padded rows load as whole vectors.
static float *relayout(const float *src, int a, int b, int ld, int transpose) {
    float *d = calloc((size_t)(transpose ? b : a) * ld + 1, sizeof(float));
    if (!d) return NULL;
    for (int j = 0; j < a; j++)
        for (int k = 0; k < b; k++) {
            const float v = src[(size_t)j * b + k];
            if (transpose)
                d[(size_t)k * ld + j] = v;
            else
                d[(size_t)j * ld + k] = v;
        }
    return d;
}

// Four floats in one vector register (GCC's and Clang's vector extension: the accumulators of a
// register block stay in registers, which plain arrays did not, at -O2 without -march).
typedef float v4f __attribute__((vector_size(16)));
static inline v4f ld4(const float *p) {
    v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline void st4(float *p, v4f v) { memcpy(p, &v, sizeof v); }

// A register block of 4 rows of 8 floats: acc[v][0..8) += a[v] * w[0..8) for each inner index i,
// a[v] = src[v][i lds] and w = wgt + i ldw. (y, dx: 4 voxels' rows of the other tensor under one
// tap, and that tap's filters for 8 output channels, over the channels i; dw: 4 filters' dy and
// 8 channels of x, over a row of y voxels i.)
static inline void block_dot(float acc[QB][VB], const float *const src[QB], int lds, const float *wgt, int ni,
                             int ldw) {
    v4f a0 = ld4(acc[0]), b0 = ld4(acc[0] + 4), a1 = ld4(acc[1]), b1 = ld4(acc[1] + 4), a2 = ld4(acc[2]),
        b2 = ld4(acc[2] + 4), a3 = ld4(acc[3]), b3 = ld4(acc[3] + 4);
    for (int i = 0; i < ni; i++) {
        const v4f w0 = ld4(wgt + (size_t)i * ldw), w1 = ld4(wgt + (size_t)i * ldw + 4);
        const size_t j = (size_t)i * lds;
        const float x0 = src[0][j], x1 = src[1][j], x2 = src[2][j], x3 = src[3][j];
        a0 += x0 * w0, b0 += x0 * w1, a1 += x1 * w0, b1 += x1 * w1;
        a2 += x2 * w0, b2 += x2 * w1, a3 += x3 * w0, b3 += x3 * w1;
    }
    st4(acc[0], a0), st4(acc[0] + 4, b0), st4(acc[1], a1), st4(acc[1] + 4, b1);
    st4(acc[2], a2), st4(acc[2] + 4, b2), st4(acc[3], a3), st4(acc[3] + 4, b3);
}

// The forward (bwd 0: out = y from src = x, the filters as (taps, C, K8)) or the backward data
// pass (bwd 1: out = dx from src = dy, the filters as (taps, K, C8)): per row of out (n, i0, i1),
// QB voxels by VB channels at a time, over the taps that connect them to src (e: out's extents,
// f: src's; ni: src's channels, no: out's) and src's channels; a voxel without the tap reads zero.
static int rows_pass(const tk_conv3d_shape *s, tk_dtype t, int bwd, const float *src, const float *wgt, int ldw,
                     const float *zero, void *out) {
    const int e0 = bwd ? s->D : s->Z, e1 = bwd ? s->H : s->P, e2 = bwd ? s->W : s->Q;
    const int f0 = bwd ? s->Z : s->D, f1 = bwd ? s->P : s->H, f2 = bwd ? s->Q : s->W;
    const int ni = bwd ? s->K : s->C, no = bwd ? s->C : s->K;
#pragma omp parallel for collapse(3) schedule(static)
    for (int n = 0; n < s->N; n++)
        for (int i0 = 0; i0 < e0; i0++)
            for (int i1 = 0; i1 < e1; i1++)
                for (int q0 = 0; q0 < e2; q0 += QB)
                    for (int j0 = 0; j0 < no; j0 += VB) {
                        float acc[QB][VB] = {{0}};
                        for (int a = 0; a < s->T; a++) {
                            const int j = along(i0, a, s->stride, s->pad, f0, bwd);
                            for (int r = 0; r < s->R && j >= 0; r++) {
                                const int k = along(i1, r, s->stride, s->pad, f1, bwd);
                                for (int u = 0; u < s->S && k >= 0; u++) {
                                    const float *row[QB];
                                    int any = 0;
                                    for (int v = 0; v < QB; v++) {
                                        const int l = q0 + v < e2 ? along(q0 + v, u, s->stride, s->pad, f2, bwd) : -1;
                                        row[v] = l < 0 ? zero : src + ((((size_t)n * f0 + j) * f1 + k) * f2 + l) * ni;
                                        any |= l >= 0;
                                    }
                                    if (any)
                                        block_dot(acc, row, 1,
                                                  wgt + ((size_t)(a * s->R + r) * s->S + u) * ni * ldw + j0, ni, ldw);
                                }
                            }
                        }
                        for (int v = 0; v < QB && q0 + v < e2; v++)
                            tk_act_st_n(out, t, ((((size_t)n * e0 + i0) * e1 + i1) * e2 + q0 + v) * no + j0, acc[v],
                                        (size_t)imin(VB, no - j0));
                    }
    return 0;
}

static int fwd(const tk_conv3d_shape *s, tk_dtype t, const float *x, const float *w, void *y) {
    const int taps = s->T * s->R * s->S, K8 = up(s->K, VB);
    // w (K, taps, C) -> (taps, C, K8): one block of (K, taps * C) transposed, then rows of K8
    float *wt = relayout(w, s->K, taps * s->C, K8, 1), *zero = calloc((size_t)s->C + 1, sizeof(float));
    const int rc = wt && zero ? rows_pass(s, t, 0, x, wt, K8, zero, y) : TK_EIO;
    free(wt);
    free(zero);
    return rc;
}

static int bwd_data(const tk_conv3d_shape *s, tk_dtype t, const float *dy, const float *w, void *dx) {
    const int taps = s->T * s->R * s->S, C8 = up(s->C, VB);
    // w (K, taps, C) -> (taps, K, C8): K blocks of (taps, C) moved under the taps, rows of C8
    float *wd = calloc((size_t)taps * s->K * C8 + 1, sizeof(float)), *zero = calloc((size_t)s->K + 1, sizeof(float));
    if (wd)
        for (int k = 0; k < s->K; k++)
            for (int j = 0; j < taps; j++)
                memcpy(wd + ((size_t)j * s->K + k) * C8, w + ((size_t)k * taps + j) * s->C,
                       (size_t)s->C * sizeof(float));
    const int rc = wd && zero ? rows_pass(s, t, 1, dy, wd, C8, zero, dx) : TK_EIO;
    free(wd);
    free(zero);
    return rc;
}

// dw: tiles of (tap, QB filters, VB channels), each a sum over every y voxel: fp32 over a row of
// outputs (Q voxels), the rows added in fp64. x as rows of C8 channels, dy of K4 filters (zeros
// after C, K), so a tile's loads are whole vectors.
static int bwd_filter(const tk_conv3d_shape *s, tk_dtype t, const float *x, const float *dy, void *dw) {
    const int C = s->C, K = s->K, taps = s->T * s->R * s->S, C8 = up(C, VB), K4 = up(K, QB);
    const size_t nvx = (size_t)tk_conv3d_x_numel(s) / C, nvy = (size_t)tk_conv3d_y_numel(s) / K;
    float *xp = relayout(x, (int)nvx, C, C8, 0), *dyp = relayout(dy, (int)nvy, K, K4, 0);
    float *out = malloc((size_t)K * taps * C * sizeof(float) + 1);
    if (!xp || !dyp || !out) return free(xp), free(dyp), free(out), TK_EIO;
    const int nk = K4 / QB, nc = C8 / VB;
#pragma omp parallel for schedule(dynamic)
    for (int tile = 0; tile < taps * nk * nc; tile++) {
        const int tap = tile / (nk * nc), k0 = tile / nc % nk * QB, c0 = tile % nc * VB;
        const int a = tap / (s->R * s->S), r = tap / s->S % s->R, u = tap % s->S;
        double sum[QB][VB] = {{0}};
        for (int n = 0; n < s->N; n++)
            for (int z = 0; z < s->Z; z++) {
                const int d = along(z, a, s->stride, s->pad, s->D, 0);
                for (int p = 0; p < s->P && d >= 0; p++) {
                    const int h = along(p, r, s->stride, s->pad, s->H, 0);
                    if (h < 0) continue;
                    // the y voxels q0 <= q < q1 of this row whose tap u lands inside x: consecutive
                    int q0 = 0, q1 = s->Q;
                    while (q0 < q1 && along(q0, u, s->stride, s->pad, s->W, 0) < 0) q0++;
                    while (q1 > q0 && along(q1 - 1, u, s->stride, s->pad, s->W, 0) < 0) q1--;
                    if (q0 == q1) continue;
                    float acc[QB][VB] = {{0}};
                    const float *d4 = dyp + ((((size_t)n * s->Z + z) * s->P + p) * s->Q + q0) * K4 + k0;
                    const float *row[QB] = {d4, d4 + 1, d4 + 2, d4 + 3};
                    const int w0 = along(q0, u, s->stride, s->pad, s->W, 0);
                    block_dot(acc, row, K4, xp + ((((size_t)n * s->D + d) * s->H + h) * s->W + w0) * C8 + c0, q1 - q0,
                              s->stride * C8);
                    for (int kk = 0; kk < QB; kk++)
                        for (int j = 0; j < VB; j++) sum[kk][j] += acc[kk][j];
                }
            }
        for (int kk = 0; kk < QB && k0 + kk < K; kk++)
            for (int j = 0; j < VB && c0 + j < C; j++)
                out[((size_t)(k0 + kk) * taps + tap) * C + c0 + j] = (float)sum[kk][j];
    }
    tk_act_st_n(dw, t, 0, out, (size_t)K * taps * C);
    free(xp), free(dyp), free(out);
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
    return rc ? tk_err_set(e, TK_EIO, "conv3d: out of host memory") : 0;
}
