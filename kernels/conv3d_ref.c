// CPU reference of kernels/conv3d.h, in two forms chosen per pass and shape (small_path):
// - register blocks (a few voxels by 8 channels of the result) over the taps inside the volume,
//   for many channels; OpenMP over output rows (forward), input rows (backward data, gathered so no
//   two threads write one voxel) or (tap, filters, channels) tiles (backward filter);
// - row kernels for few channels (the 3D U-Net's widths 2-4; "small channel counts" below):
//   planar zero-padded copies of the tensors, vectors along rows, no bounds checks inside;
//   OpenMP over output rows (forward, backward data) or planes of dy (backward filter).
// The forward's and backward data's sums are fp32, taps outer and channels inner (at most T*R*S*C
// or T*R*S*K terms, as cuDNN's fp32 accumulators), term for term the same in both forms (so the same
// bits); the filter gradient, a sum over the whole batch, adds fp32 sums over one row of outputs (Q
// terms; the row kernels: over every eighth voxel of a row) in fp64, a fixed order whatever the
// number of threads. Inputs are read as fp32 (bf16 widened once), outputs rounded to t once.
#include <omp.h>
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
static inline int imax(int a, int b) { return a > b ? a : b; }

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

// ---- small channel counts ----
//
// With few channels a block of 8 channels is mostly waste, so these passes vectorize along rows
// instead: the tensors are first copied into planar rows (one row of W floats per (n, c, d, h)),
// padded with zeros on every side so that no tap needs a bounds check, and along W split into
// `stride` phases (x's padded column w' = w + pad at phase w' % stride, index w' / stride), so a tap
// u of a strided convolution reads a contiguous stretch of a row: output q reads index q + u /
// stride of phase u % stride. A row of outputs is then, per tap, a few input rows times broadcast
// weights (rows_kernel), with the output channels unrolled (1, 2, 3, 4 or 8 at a time: 5..7 run as
// 8, more in groups). The forward's and backward data's sums are those of the blocks above, term
// for term (taps outer in (t, r, s) order, channels inner, fp32), so both paths give the same bits;
// the filter gradient's fp32 sums run over every eighth voxel of a row, added in fp64 (the same bits
// with AVX2 vectors or SSE ones).

enum { VQ = 32 }; // floats: rows are padded to a multiple of the longest stretch a kernel does at
                  // once (4 vectors of 8 floats), so the kernels have no tails
static inline v4f splat(float f) { return (v4f){f, f, f, f}; }

// out[o][j] (NO rows of ldo floats, 0 <= j < n rounded up to the kernel's stretch of 4 V or 8 V
// floats) = sum over the taps i < nt (in order) and channels c < ni (inner) of in[i][c ldc + j] *
// wt[i][c NO + o] (wt: weights broadcast to 4 floats). NO x V vector accumulators. rows_kernel8 is
// the same with vectors of 8 (AVX2, where the CPU has it; each lane's sum is the same, so the bits).
typedef float v8f __attribute__((vector_size(32)));
// (One body for both, by macro: VT the vector of VL floats, WO(wp, o) a weight broadcast to VT.)
#define ROWS_KERNEL(NAME, ATTRS, VT, VL, WO)                                                                   \
    static inline __attribute__((ATTRS)) void NAME(const int NO, const int V, float *out, size_t ldo, int n,  \
                                                   const float *const *in, const v4f *const *wt, int nt,      \
                                                   int ni, size_t ldc) {                                      \
        for (int j = 0; j < n; j += VL * V) {                                                                 \
            VT acc[8][4];                                                                                     \
            _Pragma("GCC unroll 8") for (int o = 0; o < NO; o++)                                              \
                _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) acc[o][v] = (VT){0};                      \
            for (int i = 0; i < nt; i++) {                                                                    \
                const float *p = in[i] + j;                                                                   \
                const v4f *wp = wt[i];                                                                        \
                for (int c = 0; c < ni; c++, p += ldc, wp += NO) {                                            \
                    VT xv[4];                                                                                 \
                    _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) memcpy(&xv[v], p + VL * v, sizeof xv[v]); \
                    _Pragma("GCC unroll 8") for (int o = 0; o < NO; o++) {                                    \
                        const VT wo = WO(wp, o);                                                              \
                        _Pragma("GCC unroll 4") for (int v = 0; v < V; v++) acc[o][v] += xv[v] * wo;          \
                    }                                                                                         \
                }                                                                                             \
            }                                                                                                 \
            _Pragma("GCC unroll 8") for (int o = 0; o < NO; o++)                                              \
                _Pragma("GCC unroll 4") for (int v = 0; v < V; v++)                                           \
                    memcpy(out + o * ldo + j + VL * v, &acc[o][v], sizeof acc[o][v]);                         \
        }                                                                                                     \
    }
#define SSE_ATTRS always_inline
#define AVX2_ATTRS always_inline, target("avx2")
#define WO4(wp, o) (wp)[o]
#define WO8(wp, o) ((v8f){0} + (wp)[o][0])
ROWS_KERNEL(rows_kernel, SSE_ATTRS, v4f, 4, WO4)
ROWS_KERNEL(rows_kernel8, AVX2_ATTRS, v8f, 8, WO8)

// The output channels a kernel does at once for a group of g (1..8): 1..4, or 8.
static inline int group_pad(int g) { return g <= 4 ? g : 8; }

#define ROWS_CASES(KERNEL)                                                                                         \
    switch (nop) {                                                                                                 \
    case 1: KERNEL(1, 4, out, ldo, n, in, wt, nt, ni, ldc); break;                                                 \
    case 2: KERNEL(2, 4, out, ldo, n, in, wt, nt, ni, ldc); break;                                                 \
    case 3: KERNEL(3, 2, out, ldo, n, in, wt, nt, ni, ldc); break;                                                 \
    case 4: KERNEL(4, 2, out, ldo, n, in, wt, nt, ni, ldc); break;                                                 \
    default: KERNEL(8, 1, out, ldo, n, in, wt, nt, ni, ldc); break;                                                \
    }
__attribute__((target("avx2"))) static void run_rows8(int nop, float *out, size_t ldo, int n, const float *const *in,
                                                      const v4f *const *wt, int nt, int ni, size_t ldc) {
    ROWS_CASES(rows_kernel8)
}
static void run_rows(int nop, float *out, size_t ldo, int n, const float *const *in, const v4f *const *wt, int nt,
                     int ni, size_t ldc) {
    if (__builtin_cpu_supports("avx2")) {
        run_rows8(nop, out, ldo, n, in, wt, nt, ni, ldc);
        return;
    }
    ROWS_CASES(rows_kernel)
}

// The padded planar rows of x: (N, C, Ed, Eh, stride, Lx) with Ed = (Z - 1) stride + T (every
// padded row a tap reads; x's rows past it are read by none) and likewise Eh and Ew (the columns),
// Lx floats a phase: x[n, d, h, w, c] at d' = d + pad, h' = h + pad, w' = w + pad, zeros elsewhere.
typedef struct xplan {
    int Ed, Eh, Ew, Lx;
    size_t ldc; // floats a channel
} xplan;

static xplan x_plan(const tk_conv3d_shape *s) {
    xplan g = {.Ed = (s->Z - 1) * s->stride + s->T, .Eh = (s->P - 1) * s->stride + s->R,
               .Ew = (s->Q - 1) * s->stride + s->S};
    // a phase holds the columns the forward reads, q + u / stride for q < up(Q, VQ)
    g.Lx = up(s->Q, VQ) + (s->S - 1) / s->stride;
    g.ldc = (size_t)g.Ed * g.Eh * s->stride * g.Lx;
    return g;
}

static float *x_planar(const tk_conv3d_shape *s, const xplan *g, const float *x) {
    const size_t ldr = (size_t)s->stride * g->Lx; // floats a padded row (its phases)
    float *xp = malloc(((size_t)s->N * s->C * g->ldc + 1) * sizeof(float));
    if (!xp) return NULL;
    // each padded row zeroed and filled in turn (no separate pass over the whole copy)
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s->N; n++)
        for (int dd = 0; dd < g->Ed; dd++)
            for (int hh = 0; hh < g->Eh; hh++) {
                const int d = dd - s->pad, h = hh - s->pad, in = d >= 0 && d < s->D && h >= 0 && h < s->H;
                const float *src = in ? x + (((size_t)n * s->D + d) * s->H + h) * s->W * s->C : NULL;
                float *dst = xp + (size_t)n * s->C * g->ldc + ((size_t)dd * g->Eh + hh) * ldr;
                const int nw = imin(s->W, g->Ew - s->pad);
                for (int c = 0; c < s->C; c++) {
                    float *row = dst + c * g->ldc;
                    memset(row, 0, ldr * sizeof(float));
                    for (int w = 0, ph = s->pad % s->stride, j = s->pad / s->stride; in && w < nw; w++) {
                        row[(size_t)ph * g->Lx + j] = src[(size_t)w * s->C + c];
                        if (++ph == s->stride) ph = 0, j++;
                    }
                }
            }
    return xp;
}

// The planar rows of y-shaped dy: (N, K, Z, P, lead + Ly), each row's Q values after lead zeros
// and zeros after them.
static float *y_planar(const tk_conv3d_shape *s, const float *y, int lead, int Ly) {
    const size_t ldk = (size_t)s->Z * s->P * (lead + Ly);
    float *yp = malloc(((size_t)s->N * s->K * ldk + 1) * sizeof(float));
    if (!yp) return NULL;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < s->N; n++)
        for (int z = 0; z < s->Z; z++)
            for (int p = 0; p < s->P; p++) {
                const float *src = y + (((size_t)n * s->Z + z) * s->P + p) * s->Q * s->K;
                float *dst = yp + (size_t)n * s->K * ldk + ((size_t)z * s->P + p) * (lead + Ly);
                for (int k = 0; k < s->K; k++) {
                    float *row = dst + k * ldk;
                    memset(row, 0, (size_t)(lead + Ly) * sizeof(float));
                    for (int q = 0; q < s->Q; q++) row[lead + q] = src[(size_t)q * s->K + k];
                }
            }
    return yp;
}

// Broadcast weights for the groups of no output channels (rows_kernel's wt): per group, per tap,
// (ni, nop) vectors, zeros past the group; filt(tap, i, o) = w's element for input i, output o.
static v4f *bcast_weights(const tk_conv3d_shape *s, const float *w, int bwd, int *ngroups) {
    const int taps = s->T * s->R * s->S, ni = bwd ? s->K : s->C, no = bwd ? s->C : s->K;
    const int ng = (no + 7) / 8, nop = group_pad(imin(no, 8));
    v4f *wv = calloc((size_t)ng * taps * ni * nop + 1, sizeof(v4f));
    if (!wv) return NULL;
    for (int gi = 0; gi < ng; gi++)
        for (int tap = 0; tap < taps; tap++)
            for (int i = 0; i < ni; i++)
                for (int o = 0; o < nop && gi * 8 + o < no; o++) {
                    const int k = bwd ? i : gi * 8 + o, c = bwd ? gi * 8 + o : i;
                    wv[(((size_t)gi * taps + tap) * ni + i) * nop + o] = splat(w[((size_t)k * taps + tap) * s->C + c]);
                }
    *ngroups = ng;
    return wv;
}

// Per-thread scratch of n floats (NULL: out of memory).
static float *per_thread(size_t n, int *nt) {
    *nt = omp_get_max_threads();
    return malloc((size_t)*nt * n * sizeof(float) + 1);
}

static int fwd_small(const tk_conv3d_shape *s, tk_dtype t, const float *x, const float *w, void *y) {
    const xplan g = x_plan(s);
    const int taps = s->T * s->R * s->S, C = s->C, K = s->K, Lr = up(s->Q, VQ), st = s->stride;
    const int nop = group_pad(imin(K, 8));
    int ng, nth;
    float *xp = x_planar(s, &g, x);
    v4f *wv = bcast_weights(s, w, 0, &ng);
    // per thread: nop output rows, a row of y (Q K), the taps' row pointers and weights (4 floats for
    // the 2 pointers of a tap; every part a multiple of 4 floats, so the pointers are aligned)
    const size_t nbuf = up(s->Q * K, 4), per = (size_t)nop * Lr + nbuf + (size_t)taps * 4;
    float *scr = per_thread(per, &nth);
    int rc = xp && wv && scr ? 0 : TK_EIO;
    if (!rc)
#pragma omp parallel for collapse(3) schedule(static) num_threads(nth)
        for (int n = 0; n < s->N; n++)
            for (int z = 0; z < s->Z; z++)
                for (int p = 0; p < s->P; p++) {
                    float *out = scr + (size_t)omp_get_thread_num() * per, *buf = out + (size_t)nop * Lr;
                    const float **in = (const float **)(buf + nbuf);
                    const size_t off = (((size_t)n * s->Z + z) * s->P + p) * s->Q * K;
                    float *row = t == TK_F32 ? (float *)y + off : buf; // (fp32: in place)
                    const v4f **wt = (const v4f **)(in + taps);
                    for (int a = 0, i = 0; a < s->T; a++)
                        for (int r = 0; r < s->R; r++)
                            for (int u = 0; u < s->S; u++, i++)
                                in[i] = xp + (size_t)n * C * g.ldc +
                                        (((size_t)(z * st + a) * g.Eh + p * st + r) * st + u % st) * g.Lx + u / st;
                    for (int gi = 0; gi < ng; gi++) {
                        for (int i = 0; i < taps; i++) wt[i] = wv + ((size_t)gi * taps + i) * C * nop;
                        run_rows(nop, out, Lr, s->Q, in, wt, taps, C, g.ldc);
                        for (int q = 0; q < s->Q; q++)
                            for (int o = 0; o < nop && gi * 8 + o < K; o++) row[q * K + gi * 8 + o] = out[o * Lr + q];
                    }
                    if (t != TK_F32) tk_act_st_n(y, t, off, row, (size_t)s->Q * K);
                }
    free(xp), free(wv), free(scr);
    return rc;
}

// The backward data pass, gathered: dx's padded column w' = w + pad = q stride + u takes the taps
// u = w' % stride + m stride (m = 0, 1, ...) from dy's column q = w' / stride - m, so each phase
// of a row of dx is a row kernel over dy's rows read m columns back (dy's rows lead (S - 1) /
// stride zeros); along d and h a row takes the taps (a, r) that land on a row of dy.
static int bwd_data_small(const tk_conv3d_shape *s, tk_dtype t, const float *dy, const float *w, void *dx) {
    const int taps = s->T * s->R * s->S, C = s->C, K = s->K, st = s->stride, lead = (s->S - 1) / st;
    // phase ph's columns j0[ph] <= j < j0[ph] + Lo hold dx's w' = j stride + ph in [pad, pad + W)
    int j0[8], nj = 0;
    for (int ph = 0; ph < st && ph < 8; ph++) {
        j0[ph] = ph < s->pad ? (s->pad - ph + st - 1) / st : 0;
        nj = imax(nj, (s->pad + s->W - ph + st - 1) / st - j0[ph]);
    }
    const int Lo = up(nj, VQ);
    const int Ly = imax(s->Q, (s->pad + st - 1) / st + Lo), nop = group_pad(imin(C, 8));
    const size_t ldk = (size_t)s->Z * s->P * (lead + Ly);
    int ng, nth;
    float *yp = y_planar(s, dy, lead, Ly);
    v4f *wv = bcast_weights(s, w, 1, &ng);
    const size_t nbuf = up(s->W * C, 4), per = (size_t)nop * st * Lo + nbuf + (size_t)taps * 4;
    float *scr = per_thread(per, &nth);
    int rc = yp && wv && scr ? 0 : TK_EIO;
    if (!rc)
#pragma omp parallel for collapse(3) schedule(static) num_threads(nth)
        for (int n = 0; n < s->N; n++)
            for (int d = 0; d < s->D; d++)
                for (int h = 0; h < s->H; h++) {
                    float *out = scr + (size_t)omp_get_thread_num() * per, *buf = out + (size_t)nop * st * Lo;
                    const float **in = (const float **)(buf + nbuf);
                    const size_t off = (((size_t)n * s->D + d) * s->H + h) * s->W * C;
                    float *row = t == TK_F32 ? (float *)dx + off : buf;
                    const v4f **wt = (const v4f **)(in + taps);
                    for (int gi = 0; gi < ng; gi++) {
                        for (int ph = 0; ph < st; ph++) {
                            int nt = 0;
                            for (int a = 0; a < s->T; a++) {
                                const int z = along(d, a, st, s->pad, s->Z, 1);
                                for (int r = 0; r < s->R && z >= 0; r++) {
                                    const int p = along(h, r, st, s->pad, s->P, 1);
                                    for (int u = ph; u < s->S && p >= 0; u += st, nt++) {
                                        in[nt] = yp + (size_t)n * K * ldk + ((size_t)z * s->P + p) * (lead + Ly) +
                                                 lead - u / st + j0[ph];
                                        wt[nt] = wv + ((size_t)gi * taps + (a * s->R + r) * s->S + u) * K * nop;
                                    }
                                }
                            }
                            run_rows(nop, out + (size_t)ph * Lo, (size_t)st * Lo, nj, in, wt, nt, K, ldk);
                        }
                        for (int ww = 0, ph = s->pad % st, j = s->pad / st; ww < s->W; ww++) {
                            const float *src = out + (size_t)ph * Lo + j - j0[ph];
                            for (int o = 0; o < nop && gi * 8 + o < C; o++)
                                row[ww * C + gi * 8 + o] = src[(size_t)o * st * Lo];
                            if (++ph == st) ph = 0, j++;
                        }
                    }
                    if (t != TK_F32) tk_act_st_n(dx, t, off, row, (size_t)s->W * C);
                }
    free(yp), free(wv), free(scr);
    return rc;
}

// The fp64 dot products d[i][j] of 2 planes a[i] (dy) and NB planes b[j] (x), each np rows of n
// floats (rows lda, ldb floats apart): per row, fp32 sums of every eighth product (8 lanes), added
// in fp64 over the rows (lanes in pairs), the pairs last. The rows are readable to a multiple of 8;
// x's lanes past n are masked out (a nonfinite x there must not reach dw). dots_full does the 8
// lanes in AVX2 vectors, dots_half lanes 4 h .. 4 h + 3 in SSE ones: the same sums either way.
typedef double v2d __attribute__((vector_size(16)));
typedef int v4i __attribute__((vector_size(16)));
typedef int v8i __attribute__((vector_size(32)));
// (One body for both, by macro: VT/IT the float and int vectors of VL lanes.)
#define DOTS_KERNEL(NAME, ATTRS, VT, IT, VL)                                                                    \
    static inline __attribute__((ATTRS)) void NAME(const int NB, int h, const float *const a[2], size_t lda,  \
                                                   const float *const *b, size_t ldb, int np, int n,          \
                                                   v2d sum[2][4][4]) {                                        \
        const int n8 = n & ~7, m = n - n8 - VL * h; /* lanes of the last stretch inside the row */           \
        IT mask;                                                                                              \
        for (int l = 0; l < VL; l++) mask[l] = l < m ? -1 : 0;                                                \
        for (int p = 0; p < np; p++) {                                                                        \
            const float *a0p = a[0] + p * lda + VL * h, *a1p = a[1] + p * lda + VL * h;                       \
            VT acc[2][4], a0, a1, xv;                                                                         \
            _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++) acc[0][j] = acc[1][j] = (VT){0};             \
            for (int q = 0; q < n8; q += 8) {                                                                 \
                memcpy(&a0, a0p + q, sizeof a0), memcpy(&a1, a1p + q, sizeof a1);                             \
                _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++) {                                        \
                    memcpy(&xv, b[j] + p * ldb + VL * h + q, sizeof xv);                                      \
                    acc[0][j] += a0 * xv, acc[1][j] += a1 * xv;                                               \
                }                                                                                             \
            }                                                                                                 \
            if (m > 0) {                                                                                      \
                memcpy(&a0, a0p + n8, sizeof a0), memcpy(&a1, a1p + n8, sizeof a1);                           \
                _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++) {                                        \
                    memcpy(&xv, b[j] + p * ldb + VL * h + n8, sizeof xv);                                     \
                    xv = (VT)((IT)xv & mask);                                                                 \
                    acc[0][j] += a0 * xv, acc[1][j] += a1 * xv;                                               \
                }                                                                                             \
            }                                                                                                 \
            for (int i = 0; i < 2; i++)                                                                       \
                _Pragma("GCC unroll 4") for (int j = 0; j < NB; j++)                                          \
                    _Pragma("GCC unroll 4") for (int l = 0; l < VL; l += 2)                                   \
                        sum[i][j][(VL * h + l) / 2] += (v2d){acc[i][j][l], acc[i][j][l + 1]};                 \
        }                                                                                                     \
    }
DOTS_KERNEL(dots_half, SSE_ATTRS, v4f, v4i, 4)
DOTS_KERNEL(dots_full, AVX2_ATTRS, v8f, v8i, 8)

__attribute__((target("avx2"))) static void dots_avx2(int NB, const float *const a[2], size_t lda,
                                                      const float *const *b, size_t ldb, int np, int n,
                                                      v2d sum[2][4][4]) {
    if (NB == 3) dots_full(3, 0, a, lda, b, ldb, np, n, sum);
    else dots_full(4, 0, a, lda, b, ldb, np, n, sum);
}

static void dots_kernel(int NB, const float *const a[2], size_t lda, const float *const *b, size_t ldb, int np, int n,
                        double d[2][4]) {
    v2d sum[2][4][4];
    memset(sum, 0, sizeof sum);
    if (__builtin_cpu_supports("avx2")) dots_avx2(NB, a, lda, b, ldb, np, n, sum);
    else
        for (int h = 0; h < 2; h++)
            if (NB == 3) dots_half(3, h, a, lda, b, ldb, np, n, sum);
            else dots_half(4, h, a, lda, b, ldb, np, n, sum);
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < NB; j++) {
            const v2d v = (sum[i][j][0] + sum[i][j][1]) + (sum[i][j][2] + sum[i][j][3]);
            d[i][j] = v[0] + v[1];
        }
}

// dw: each (n, z) plane of dy (or a few, to bound the memory) sums its dot products in fp64 into
// its own partial dw, and the partials are added in order (the same sums on any number of
// threads). Per plane and (t, r): pairs of filters by 3 or 4 of the (s, c) planes of x.
static int bwd_filter_small(const tk_conv3d_shape *s, tk_dtype t, const float *x, const float *dy, void *dw) {
    const xplan g = x_plan(s);
    const int taps = s->T * s->R * s->S, C = s->C, K = s->K, st = s->stride, Q8 = up(s->Q, 8);
    const int nb = s->S * C, NB = nb % 3 ? 4 : 3, nbp = up(nb, NB);
    const size_t nwt = (size_t)K * taps * C, ldk = (size_t)s->Z * s->P * Q8;
    const int planes = s->N * s->Z, per = 1 + (int)((size_t)planes * nwt >> 22), nch = (planes + per - 1) / per;
    float *xp = x_planar(s, &g, x), *yp = y_planar(s, dy, 0, Q8);
    // a zero plane of x's or dy's rows (for the blocks' padding)
    float *zero = calloc((size_t)s->P * imax(st * st * g.Lx, Q8) + 1, sizeof(float));
    float *out = malloc(nwt * sizeof(float) + 1);
    double *part = calloc((size_t)nch * nwt + 1, sizeof(double));
    int rc = xp && yp && zero && out && part ? 0 : TK_EIO;
    if (!rc)
#pragma omp parallel for schedule(dynamic)
        for (int ch = 0; ch < nch; ch++) {
            double *sum = part + (size_t)ch * nwt;
            const float **B = malloc((size_t)nbp * sizeof *B);
            if (!B) {
#pragma omp atomic write
                rc = TK_EIO;
                continue;
            }
            for (int pl = ch * per; pl < imin(planes, (ch + 1) * per); pl++) {
                const int n = pl / s->Z, z = pl % s->Z;
                for (int a = 0; a < s->T; a++)
                    for (int r = 0; r < s->R; r++) {
                        // row p of the plane of x for (t, r) and (s, c): padded row (z st + a, p st + r)
                        const float *xr = xp + (size_t)n * C * g.ldc + ((size_t)(z * st + a) * g.Eh + r) * st * g.Lx;
                        for (int b = 0; b < nbp; b++)
                            B[b] = b < nb ? xr + b % C * g.ldc + (size_t)(b / C % st) * g.Lx + b / C / st : zero;
                        for (int k0 = 0; k0 < K; k0 += 2) {
                            const float *A[2] = {yp + ((size_t)n * K + k0) * ldk + (size_t)z * s->P * Q8,
                                                 k0 + 1 < K ? A[0] + ldk : zero};
                            for (int b0 = 0; b0 < nb; b0 += NB) {
                                double d[2][4];
                                dots_kernel(NB, A, Q8, B + b0, (size_t)st * st * g.Lx, s->P, s->Q, d);
                                for (int i = 0; i < 2 && k0 + i < K; i++)
                                    for (int j = 0; j < NB && b0 + j < nb; j++) {
                                        const int u = (b0 + j) / C, c = (b0 + j) % C;
                                        sum[((size_t)(k0 + i) * taps + (a * s->R + r) * s->S + u) * C + c] += d[i][j];
                                    }
                            }
                        }
                    }
            }
            free(B);
        }
    if (!rc) {
#pragma omp parallel for schedule(static)
        for (size_t i = 0; i < nwt; i++) {
            double v = 0;
            for (int ch = 0; ch < nch; ch++) v += part[(size_t)ch * nwt + i];
            out[i] = (float)v;
        }
        tk_act_st_n(dw, t, 0, out, nwt);
    }
    free(xp), free(yp), free(zero), free(out), free(part);
    return rc;
}

// Whether a pass runs the row kernels (1) or the blocks of 8 channels (0): the row kernels when the
// pass's output channels (K for the forward, C for the backward data) fit one group, or two on
// rows of 16 or more; for the filter gradient with C <= 4, or C <= 8 on rows of 64 or more (the
// faster of the two on the 3D U-Net's layers at widths 2 and 4, contrib/bench/NOTES.md).
static int small_path(tk_conv_pass pass, const tk_conv3d_shape *s) {
    if (s->stride > 8) return 0; // (bwd_data_small's phases)
    return pass == TK_CONV_FWD         ? s->K <= 8 || (s->K <= 16 && s->Q >= 16)
           : pass == TK_CONV_BWD_DATA ? s->C <= 8 || (s->C <= 16 && s->W >= 16)
                                       : s->C <= 4 || (s->C <= 8 && s->Q >= 64);
}

int tk_conv3d_ref(tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a, const void *b, void *out,
                  tk_err *e) {
    typedef int pass_fn(const tk_conv3d_shape *, tk_dtype, const float *, const float *, void *);
    static pass_fn *const run[2][3] = {
        {[TK_CONV_FWD] = fwd, [TK_CONV_BWD_DATA] = bwd_data, [TK_CONV_BWD_FILTER] = bwd_filter},
        {[TK_CONV_FWD] = fwd_small, [TK_CONV_BWD_DATA] = bwd_data_small, [TK_CONV_BWD_FILTER] = bwd_filter_small}};
    if (!tk_act_ok(t) || pass < TK_CONV_FWD || pass > TK_CONV_BWD_FILTER)
        return tk_err_set(e, TK_EINTERNAL, "conv3d: pass %d on tensors in %s", (int)pass, tk_dtype_name(t));
    // a's and b's sizes by pass: (x, w), (dy, w), (x, dy)
    const size_t na = (size_t)(pass == TK_CONV_BWD_DATA ? tk_conv3d_y_numel(s) : tk_conv3d_x_numel(s));
    const size_t nb = (size_t)(pass == TK_CONV_BWD_FILTER ? tk_conv3d_y_numel(s) : tk_conv3d_w_numel(s));
    // (fp32 inputs are read in place)
    float *fa = t == TK_F32 ? NULL : widen(a, t, na), *fb = t == TK_F32 ? NULL : widen(b, t, nb);
    const float *pa = t == TK_F32 ? a : fa, *pb = t == TK_F32 ? b : fb;
    const int rc = pa && pb ? run[small_path(pass, s)][pass](s, t, pa, pb, out) : TK_EIO;
    free(fa);
    free(fb);
    return rc ? tk_err_set(e, TK_EIO, "conv3d: out of host memory") : 0;
}
