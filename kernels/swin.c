// kernels/swin.h: the window grid and the importance map (host), and the dispatch of the gather
// and the accumulation (kernels/dispatch.h): the cpu backend runs swin_ref.c, cuda swin.cu.
#include <math.h>

#include "dispatch.h"
#include "swin.h"

// One axis of n voxels: the reference's crop (inference.py:99-108), pad (pad_input, :67-80) and
// window count (:113).
static int axis_init(tk_swin_grid *g, int a, int64_t n, tk_err *e) {
    const int64_t s = g->stride, r = g->roi;
    int64_t b = n % s;
    if (b >= s / 2) b = 0;
    const int64_t c = n - b;
    int64_t p = (s - c % s) % s;
    if (c + p < r) p += s;
    if (b > 0 && p > 0)
        return tk_err_set(e, TK_EDATA,
                          "sliding window: axis %d of %lld voxels with roi %d stride %d: the reference crops it to "
                          "%lld and pads that, and its output then no longer matches its label",
                          a, (long long)n, g->roi, g->stride, (long long)c);
    const int64_t padded = c + p;
    const int64_t nw = padded < r ? 0 : (padded - r) / s + 1;
    const int64_t reach = nw ? (nw - 1) * s + r : 0; // the windows cover padded coordinates [0, reach)
    if (reach < p / 2 + c)
        return tk_err_set(e, TK_EDATA,
                          "sliding window: axis %d of %lld voxels with roi %d stride %d: %lld windows leave voxels "
                          "uncovered (the reference divides 0 by 0 there)",
                          a, (long long)n, g->roi, g->stride, (long long)nw);
    if (nw > (1 << 20)) return tk_err_set(e, TK_EINTERNAL, "sliding window: %lld windows on axis %d", (long long)nw, a);
    g->shape[a] = n, g->crop[a] = b / 2, g->out[a] = c, g->pad0[a] = p / 2, g->pad1[a] = p - p / 2;
    g->n[a] = (int)nw;
    return 0;
}

int tk_swin_grid_init(tk_swin_grid *g, int64_t D, int64_t H, int64_t W, int roi, double overlap, tk_err *e) {
    *g = (tk_swin_grid){0};
    if (roi < 1 || roi > 1024 || !(overlap >= 0 && overlap < 1))
        return tk_err_set(e, TK_EINTERNAL, "sliding window: roi %d, overlap %g", roi, overlap);
    // int(roi_shape[i] * (1 - overlap)) in Python floats (inference.py:97)
    const double sd = (double)roi * (1.0 - overlap);
    if (sd < 1) return tk_err_set(e, TK_EINTERNAL, "sliding window: roi %d, overlap %g: stride 0", roi, overlap);
    g->roi = roi, g->stride = (int)sd;
    const int64_t n[3] = {D, H, W};
    for (int a = 0; a < 3; a++) {
        if (n[a] < 1 || n[a] > ((int64_t)1 << 24))
            return tk_err_set(e, TK_EINTERNAL, "sliding window: volume %lld x %lld x %lld", (long long)D,
                              (long long)H, (long long)W);
        TRY(axis_init(g, a, n[a], e));
    }
    g->count = (int64_t)g->n[0] * g->n[1] * g->n[2];
    return 0;
}

void tk_swin_window(const tk_swin_grid *g, int64_t w, int64_t org[3]) {
    org[2] = (w % g->n[2]) * g->stride;
    org[1] = (w / g->n[2] % g->n[1]) * g->stride;
    org[0] = (w / ((int64_t)g->n[2] * g->n[1])) * g->stride;
}

// scipy.signal.windows.gaussian(M, std) is exp(-n ** 2 / sig2), n = arange(M) - (M - 1.0) / 2,
// sig2 = 2 * std * std; gaussian_kernel takes np.outer twice (a 2-D product, then times the third
// factor), np.cbrt, and divides by the maximum, all in fp64; .type(float32) rounds once.
void tk_swin_gaussian(int roi, float *map) {
    const size_t r = (size_t)roi;
    double g[1024];
    const double std = TK_SWIN_SIGMA * roi, sig2 = 2 * std * std;
    for (size_t i = 0; i < r; i++) {
        const double n = (double)i - (roi - 1.0) / 2.0;
        g[i] = exp(-(n * n) / sig2);
    }
    double mx = 0;
    for (size_t a = 0; a < r; a++)
        for (size_t b = 0; b < r; b++)
            for (size_t c = 0; c < r; c++) mx = fmax(mx, cbrt(g[a] * g[b] * g[c]));
    for (size_t a = 0; a < r; a++)
        for (size_t b = 0; b < r; b++)
            for (size_t c = 0; c < r; c++) map[(a * r + b) * r + c] = (float)(cbrt(g[a] * g[b] * g[c]) / mx);
}

int tk_swin_gather(tk_ctx *c, tk_dtype t, const float *image, const tk_swin_grid *g, int64_t w0, int B,
                   float pad_value, int ld, void *x, tk_err *e) {
    return TK_DISPATCH(c, tk_swin_gather_ref(t, image, g, w0, B, pad_value, ld, x, e),
                       tk_swin_gather_cuda(c, t, image, g, w0, B, pad_value, ld, x, e));
}

int tk_swin_accumulate(tk_ctx *c, tk_dtype t, const void *y, int ld, const tk_swin_grid *g, int64_t w0, int B,
                       const float *map, float *acc, float *wsum, tk_err *e) {
    return TK_DISPATCH(c, tk_swin_accumulate_ref(t, y, ld, g, w0, B, map, acc, wsum, e),
                       tk_swin_accumulate_cuda(c, t, y, ld, g, w0, B, map, acc, wsum, e));
}
