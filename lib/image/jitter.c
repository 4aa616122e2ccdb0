// Colour jitter on RGB bytes (jitter.h): Pillow's ImageEnhance blends and its HSV conversions
// (libImaging Blend.c, Convert.c rgb2hsv / hsv2rgb), operation by operation, with Pillow's mix of
// float and double arithmetic kept, so that the bytes are Pillow's.
#include <math.h>

#include "image/jitter.h"

// Image.blend(degenerate, image, f) of one value: float arithmetic, truncated toward zero;
// clamped only when f is outside [0, 1] (inside, the result cannot leave 0..255).
static inline uint8_t blend(int d, int p, float a) {
    float v = (float)d + a * (float)(p - d);
    if (a >= 0.0f && a <= 1.0f) return (uint8_t)v;
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)v;
}

// The blend against a constant d of every byte value: brightness and contrast are lookups.
static void blend_table(int d, float a, uint8_t t[256]) {
    for (int p = 0; p < 256; p++) t[p] = blend(d, p, a);
}

static void lookup(uint8_t *px, size_t n, const uint8_t t[256]) {
    for (size_t i = 0; i < 3 * n; i++) px[i] = t[px[i]];
}

void tk_img_adjust_brightness(uint8_t *px, size_t n, double f) {
    uint8_t t[256];
    blend_table(0, (float)f, t);
    lookup(px, n, t);
}

void tk_img_adjust_contrast(uint8_t *px, size_t n, double f) {
    if (!n) return;
    // ImageStat's mean of the "L" image (a double over its histogram), rounded with int(m + 0.5)
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) sum += tk_img_luma(px + 3 * i);
    uint8_t t[256];
    blend_table((int)((double)sum / (double)n + 0.5), (float)f, t);
    lookup(px, n, t);
}

void tk_img_adjust_saturation(uint8_t *px, size_t n, double f) {
    float a = (float)f;
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = px + 3 * i;
        int l = tk_img_luma(p);
        for (int c = 0; c < 3; c++) p[c] = blend(l, p[c], a);
    }
}

static inline uint8_t clip8(int v) { return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); }

// Pillow's rgb2hsv (after Python's colorsys), bytes in and out.
static void rgb2hsv(const uint8_t *in, uint8_t *out) {
    int r = in[0], g = in[1], b = in[2];
    int maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
    int minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
    out[2] = (uint8_t)maxc;
    if (minc == maxc) {
        out[0] = out[1] = 0;
        return;
    }
    float cr = (float)(maxc - minc);
    float s = cr / (float)maxc;
    float rc = (float)(maxc - r) / cr, gc = (float)(maxc - g) / cr, bc = (float)(maxc - b) / cr;
    float h;
    if (r == maxc) h = bc - gc;
    else if (g == maxc) h = (float)(2.0 + rc - bc);
    else h = (float)(4.0 + gc - rc);
    // fmod(h / 6 + 1, 1) (h in [-1, 5]: x in [5/6, 11/6), where x - 1 is exact)
    double x = h / 6.0 + 1.0;
    h = (float)(x >= 1.0 ? x - 1.0 : x);
    out[0] = clip8((int)(h * 255.0));
    out[1] = clip8((int)(s * 255.0));
}

// Pillow's hsv2rgb.
static void hsv2rgb(const uint8_t *in, uint8_t *out) {
    int h = in[0], s = in[1], v = in[2];
    if (s == 0) {
        out[0] = out[1] = out[2] = (uint8_t)v;
        return;
    }
    int i = (int)floor((float)h * 6.0 / 255.0);
    float f = (float)((float)h * 6.0 / 255.0 - (float)i);
    float fs = (float)((float)s / 255.0);
    uint8_t p = clip8((int)round((float)v * (1.0 - fs)));
    uint8_t q = clip8((int)round((float)v * (1.0 - fs * f)));
    uint8_t t = clip8((int)round((float)v * (1.0 - fs * (1.0 - f))));
    uint8_t V = (uint8_t)v;
    switch (i % 6) {
    case 0: out[0] = V, out[1] = t, out[2] = p; break;
    case 1: out[0] = q, out[1] = V, out[2] = p; break;
    case 2: out[0] = p, out[1] = V, out[2] = t; break;
    case 3: out[0] = p, out[1] = q, out[2] = V; break;
    case 4: out[0] = t, out[1] = p, out[2] = V; break;
    default: out[0] = V, out[1] = p, out[2] = q; break;
    }
}

void tk_img_adjust_hue(uint8_t *px, size_t n, double h) {
    // torchvision: np_h += np.array(hue_factor * 255).astype(np.uint8), a C cast of the double:
    // truncated toward zero, then taken modulo 256 (as uint8 wraps)
    uint8_t shift = (uint8_t)(int)(h * 255.0);
    for (size_t i = 0; i < n; i++) {
        uint8_t hsv[3];
        rgb2hsv(px + 3 * i, hsv);
        hsv[0] = (uint8_t)(hsv[0] + shift);
        hsv2rgb(hsv, px + 3 * i);
    }
}

void tk_img_jitter_apply(uint8_t *px, size_t n, const tk_img_jitter *j) {
    for (int k = 0; k < 4; k++) {
        switch (j->order[k]) {
        case TK_JITTER_BRIGHTNESS: tk_img_adjust_brightness(px, n, j->brightness); break;
        case TK_JITTER_CONTRAST: tk_img_adjust_contrast(px, n, j->contrast); break;
        case TK_JITTER_SATURATION: tk_img_adjust_saturation(px, n, j->saturation); break;
        case TK_JITTER_HUE: tk_img_adjust_hue(px, n, j->hue); break;
        default: break;
        }
    }
}
