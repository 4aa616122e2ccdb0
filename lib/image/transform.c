// Sample geometry (torchvision's RandomResizedCrop and Resize + CenterCrop), Pillow-style
// bilinear resampling, normalization to NHWC fp32/bf16 (transform.h).
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/philox.h"
#include "image/transform.h"

void tk_img_transform_default(tk_img_transform *t, tk_img_mode mode) {
    memset(t, 0, sizeof *t);
    t->mode = mode;
    t->out_w = t->out_h = 224;
    t->resize = 256;
    t->scale_min = 0.08;
    t->scale_max = 1.0;
    t->ratio_min = 3.0 / 4.0;
    t->ratio_max = 4.0 / 3.0;
    t->flip = mode == TK_IMG_TRAIN;
    // ImageNet's channel statistics (torchvision's), in 0..255 pixel units
    const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    for (int c = 0; c < 3; c++) {
        t->mean[c] = mean[c] * 255.0f;
        t->std[c] = std[c] * 255.0f;
    }
    t->dtype = TK_IMG_F32;
    t->dct_scale = mode == TK_IMG_TRAIN;
}

// Random words of one sample: block b of the stream (seed; sample, TK_RNG_AUGMENT, epoch, b).
static tk_philox_ctr draws(const tk_img_transform *t, uint64_t sample, uint32_t block) {
    tk_philox_ctr c = {{(uint32_t)sample, (uint32_t)(sample >> 32), TK_RNG_AUGMENT, (t->epoch << 8) | block}};
    tk_philox_key k = {{(uint32_t)t->seed, (uint32_t)(t->seed >> 32)}};
    return tk_philox4x32(c, k);
}

// Python's round(): halves to even (nearbyint in the default rounding mode).
static int round_even(double x) { return (int)nearbyint(x); }

// torchvision.transforms.RandomResizedCrop.get_params: ten tries of an area fraction and a
// log-uniform aspect ratio; the first crop that fits wins, at a uniform position. Else the whole
// image, clamped to the ratio range, centered. Try a uses blocks 2a (area, ratio: 53-bit
// uniforms) and 2a + 1 (top, left); block 20 the flip.
static void random_resized_crop(const tk_img_transform *t, int W, int H, uint64_t sample, tk_img_geom *g) {
    double area = (double)W * H, lr0 = log(t->ratio_min), lr1 = log(t->ratio_max);
    for (int a = 0; a < 10; a++) {
        tk_philox_ctr r = draws(t, sample, (uint32_t)(2 * a));
        double target = area * (t->scale_min + (t->scale_max - t->scale_min) * tk_u64_to_unit(r.v[0], r.v[1]));
        double ratio = exp(lr0 + (lr1 - lr0) * tk_u64_to_unit(r.v[2], r.v[3]));
        int w = round_even(sqrt(target * ratio)), h = round_even(sqrt(target / ratio));
        if (w > 0 && w <= W && h > 0 && h <= H) {
            tk_philox_ctr p = draws(t, sample, (uint32_t)(2 * a + 1));
            int top = (int)(tk_u64_to_unit(p.v[0], p.v[1]) * (H - h + 1));
            int left = (int)(tk_u64_to_unit(p.v[2], p.v[3]) * (W - w + 1));
            *g = (tk_img_geom){left, top, left + w, top + h, t->out_w, t->out_h, 0, 0, 0, a + 1};
            return;
        }
    }
    double in_ratio = (double)W / H;
    int w = W, h = H;
    if (in_ratio < t->ratio_min) h = round_even(w / t->ratio_min);
    else if (in_ratio > t->ratio_max) w = round_even(h * t->ratio_max);
    int top = (H - h) / 2, left = (W - w) / 2;
    *g = (tk_img_geom){left, top, left + w, top + h, t->out_w, t->out_h, 0, 0, 0, 11};
}

void tk_img_plan(const tk_img_transform *t, int W, int H, uint64_t sample, tk_img_geom *g) {
    if (t->mode == TK_IMG_TRAIN) {
        random_resized_crop(t, W, H, sample, g);
        g->flip = t->flip && !(draws(t, sample, 20).v[0] >> 31);
        return;
    }
    // torchvision Resize(resize): the shorter side becomes resize, the longer int(resize*long/short);
    // CenterCrop: offsets int(round((size - crop) / 2)).
    int rw = W <= H ? t->resize : (int)((long long)t->resize * W / H);
    int rh = W <= H ? (int)((long long)t->resize * H / W) : t->resize;
    *g = (tk_img_geom){0, 0, W, H, rw, rh, round_even((rw - t->out_w) / 2.0), round_even((rh - t->out_h) / 2.0), 0, 0};
}

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
                     const tk_img_axis *ay, int flip, const tk_img_transform *t, float *tmp, void *out) {
    // Vertical pass first, over whole rows of the columns the horizontal pass reads: contiguous
    // multiply-adds the compiler vectorizes (the filters are separable, so the order changes
    // only the float rounding). tmp[j][(x - ax.lo) * 3 + c].
    size_t len = (size_t)(ax->hi - ax->lo) * 3;
    for (int j = 0; j < ay->n; j++) {
        const float *w = ay->w + (size_t)j * ay->maxtaps;
        float *restrict o = tmp + (size_t)j * len;
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
    }
    // Horizontal pass, then normalization, the flip and the output type.
    float scale[3], shift[3];
    for (int c = 0; c < 3; c++) {
        scale[c] = 1.0f / t->std[c];
        shift[c] = -t->mean[c] / t->std[c];
    }
    int nx = ax->n;
    for (int j = 0; j < ay->n; j++) {
        const float *row = tmp + (size_t)j * len;
        for (int i = 0; i < nx; i++) {
            const float *w = ax->w + (size_t)i * ax->maxtaps;
            const float *p = row + (size_t)(ax->first[i] - ax->lo) * 3;
            float v0 = 0, v1 = 0, v2 = 0;
            for (int k = 0; k < ax->count[i]; k++, p += 3) {
                v0 += w[k] * p[0];
                v1 += w[k] * p[1];
                v2 += w[k] * p[2];
            }
            size_t o = ((size_t)j * nx + (size_t)(flip ? nx - 1 - i : i)) * 3;
            float x0 = v0 * scale[0] + shift[0], x1 = v1 * scale[1] + shift[1], x2 = v2 * scale[2] + shift[2];
            if (t->dtype == TK_IMG_BF16) {
                uint16_t *d = (uint16_t *)out + o;
                d[0] = tk_f32_to_bf16(x0);
                d[1] = tk_f32_to_bf16(x1);
                d[2] = tk_f32_to_bf16(x2);
            } else if (t->dtype == TK_IMG_U8) {
                uint8_t *d = (uint8_t *)out + o;
                d[0] = tk_img_f32_to_u8(x0);
                d[1] = tk_img_f32_to_u8(x1);
                d[2] = tk_img_f32_to_u8(x2);
            } else {
                float *d = (float *)out + o;
                d[0] = x0;
                d[1] = x1;
                d[2] = x2;
            }
        }
    }
}
