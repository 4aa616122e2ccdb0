// CPU reference of kernels/img_resize.h: the Pillow-style resampling the CPU decoder runs
// (lib/image/cpu.c), image by image. Also the shared host-side helpers.
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "img_resize.h"

void tk_img_axis_free(tk_img_axis *a) {
    free(a->first);
    free(a->count);
    free(a->w);
    memset(a, 0, sizeof *a);
}

static double triangle(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

// Pillow's precompute_coeffs (libImaging/Resample.c) for the bilinear filter, with the taps
// clamped to [c0, c1) instead of the whole image.
int tk_img_axis_plan(tk_img_axis *a, double b0, double b1, int r, int o0, int n, int c0, int c1, tk_err *e) {
    memset(a, 0, sizeof *a);
    double scale = (b1 - b0) / r, fs = scale > 1.0 ? scale : 1.0, support = fs;
    a->n = n;
    a->maxtaps = (int)ceil(support) * 2 + 1;
    a->first = malloc((size_t)n * sizeof *a->first);
    a->count = malloc((size_t)n * sizeof *a->count);
    a->w = malloc((size_t)n * (size_t)a->maxtaps * sizeof *a->w);
    if (!a->first || !a->count || !a->w) {
        tk_img_axis_free(a);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    a->lo = c1;
    a->hi = c0;
    for (int i = 0; i < n; i++) {
        double center = b0 + (o0 + i + 0.5) * scale;
        int lo = (int)floor(center - support + 0.5), hi = (int)floor(center + support + 0.5);
        lo = lo < c0 ? c0 : lo;
        hi = hi > c1 ? c1 : hi;
        if (hi <= lo) { // cannot happen for a box inside [c0, c1): the nearest pixel has weight > 0
            lo = center < c0 ? c0 : c1 - 1;
            hi = lo + 1;
        }
        if (hi - lo > a->maxtaps) hi = lo + a->maxtaps;
        double sum = 0;
        int k = hi - lo;
        float *w = a->w + (size_t)i * a->maxtaps;
        for (int j = 0; j < k; j++) sum += triangle((lo + j - center + 0.5) / fs);
        for (int j = 0; j < k; j++) w[j] = (float)(sum != 0 ? triangle((lo + j - center + 0.5) / fs) / sum : 1.0 / k);
        a->first[i] = lo;
        a->count[i] = k;
        a->lo = lo < a->lo ? lo : a->lo;
        a->hi = hi > a->hi ? hi : a->hi;
    }
    return 0;
}

void tk_img_resample(const uint8_t *src, int sx, int sy, size_t stride, const tk_img_axis *ax,
                     const tk_img_axis *ay, int flip, const tk_img_rs_out *ro, float *tmp, void *out) {
    // Per output row: the vertical pass over the whole row of the columns the horizontal pass
    // reads (contiguous multiply-adds the compiler vectorizes; the filters are separable, so the
    // order changes only the float rounding), then the horizontal pass over that row. One row of
    // tmp at a time stays in the cache (a whole image's vertical pass first, as before, wrote
    // megabytes to read them back: the same sums in the same order, so the same bits).
    size_t len = (size_t)(ax->hi - ax->lo) * 3;
    float scale[3], shift[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = 1.0f / ro->std[c];
        shift[c] = -ro->mean[c] / ro->std[c];
    }
    int nx = ax->n;
    for (int j = 0; j < ay->n; j++) {
        const float *w = ay->w + (size_t)j * ay->maxtaps;
        float *restrict o = tmp;
        const uint8_t *restrict p = src + (size_t)(ay->first[j] - sy) * stride + (size_t)(ax->lo - sx) * 3;
        float w0 = w[0];
#pragma omp simd
        for (size_t i = 0; i < len; i++) o[i] = w0 * p[i];
        for (int k = 1; k < ay->count[j]; k++) {
            const uint8_t *restrict q = p + (size_t)k * stride;
            float wk = w[k];
#pragma omp simd
            for (size_t i = 0; i < len; i++) o[i] += wk * q[i];
        }
        // the horizontal pass, then normalization, the flip and the output type
        const float *row = tmp;
        for (int i = 0; i < nx; i++) {
            const float *wx = ax->w + (size_t)i * ax->maxtaps;
            const float *r = row + (size_t)(ax->first[i] - ax->lo) * 3;
            float v0 = 0, v1 = 0, v2 = 0;
            for (int k = 0; k < ax->count[i]; k++, r += 3) {
                v0 += wx[k] * r[0];
                v1 += wx[k] * r[1];
                v2 += wx[k] * r[2];
            }
            size_t oi = ((size_t)j * nx + (size_t)(flip ? nx - 1 - i : i)) * 3;
            float x0 = v0 * scale[0] + shift[0], x1 = v1 * scale[1] + shift[1], x2 = v2 * scale[2] + shift[2];
            if (ro->dtype == TK_IMG_BF16) {
                uint16_t *d = (uint16_t *)out + oi;
                d[0] = tk_f32_to_bf16(x0);
                d[1] = tk_f32_to_bf16(x1);
                d[2] = tk_f32_to_bf16(x2);
            } else if (ro->dtype == TK_IMG_U8) {
                uint8_t *d = (uint8_t *)out + oi;
                d[0] = tk_img_f32_to_u8(x0);
                d[1] = tk_img_f32_to_u8(x1);
                d[2] = tk_img_f32_to_u8(x2);
            } else {
                float *d = (float *)out + oi;
                d[0] = x0;
                d[1] = x1;
                d[2] = x2;
            }
        }
    }
}

int tk_img_rs_taps(double b0, double b1, int r) {
    double scale = (b1 - b0) / r, support = scale > 1.0 ? scale : 1.0;
    return (int)ceil(support) * 2 + 1;
}

int tk_img_rs_maxtaps(const tk_img_rs_job *jobs, int n) {
    int m = 1;
    for (int i = 0; i < n; i++) {
        int a = tk_img_rs_taps(jobs[i].bx0, jobs[i].bx1, jobs[i].rw), b = tk_img_rs_taps(jobs[i].by0, jobs[i].by1, jobs[i].rh);
        m = a > m ? a : m;
        m = b > m ? b : m;
    }
    return m;
}

size_t tk_img_rs_ws_bytes(int n, const tk_img_rs_out *o, int maxtaps) {
    size_t entries = (size_t)n * (size_t)(o->out_w + o->out_h);
    return entries * 2 * sizeof(int32_t) + entries * (size_t)maxtaps * sizeof(float);
}

int tk_img_rs_check(int n, const tk_img_rs_out *o, int maxtaps, tk_err *e) {
    if (n < 0 || o->out_w < 1 || o->out_h < 1 || o->out_w > 16384 || o->out_h > 16384 || maxtaps < 1 ||
        maxtaps > 8191 || (o->dtype != TK_IMG_F32 && o->dtype != TK_IMG_BF16 && o->dtype != TK_IMG_U8))
        return tk_err_set(e, TK_EINTERNAL, "img_resize: n %d, %d x %d, maxtaps %d, dtype %d", n, o->out_w, o->out_h,
                          maxtaps, (int)o->dtype);
    return 0;
}

int tk_img_resize_ref(const uint8_t *src, const tk_img_rs_job *jobs, int n, int maxtaps, const tk_img_rs_out *o,
                      float *tmp, void *ws, void *out, tk_err *e) {
    (void)ws;
    TRY(tk_img_rs_check(n, o, maxtaps, e));
    size_t per = (size_t)o->out_w * o->out_h * 3 * tk_img_dtype_bytes(o->dtype);
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        const tk_img_rs_job *j = &jobs[k];
        tk_img_axis ax, ay;
        TRY(tk_img_axis_plan(&ax, j->bx0, j->bx1, j->rw, j->wx, o->out_w, j->cx0, j->cx1, e));
        rc = tk_img_axis_plan(&ay, j->by0, j->by1, j->rh, j->wy, o->out_h, j->cy0, j->cy1, e);
        if (!rc)
            tk_img_resample(src + j->src, 0, 0, (size_t)j->pitch, &ax, &ay, j->flip, o, tmp + j->tmp,
                            (uint8_t *)out + (size_t)k * per);
        tk_img_axis_free(&ax);
        tk_img_axis_free(&ay);
    }
    return rc;
}
