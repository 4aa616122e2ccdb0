// Colour jitter on RGB bytes (jitter.h): Pillow's ImageEnhance blends and its HSV conversions
// (libImaging Blend.c, Convert.c rgb2hsv / hsv2rgb), operation by operation, with Pillow's mix of
// float and double arithmetic kept, so that the bytes are Pillow's.
#include <math.h>
#include <pthread.h>

#include "img_jitter_px.h"

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
    // blend(l, p, a) without its branches (the loop is the jitter's second costliest): clamping
    // to 0..255 before the truncation changes nothing for a in [0, 1], where v stays between l
    // and p, and is blend's clamp outside
    const float a = (float)f;
    for (size_t i = 0; i < n; i++) {
        uint8_t *p = px + 3 * i;
        float l = (float)tk_img_luma(p);
        for (int c = 0; c < 3; c++) {
            float v = l + a * ((float)p[c] - l);
            v = v < 0.0f ? 0.0f : v;
            v = v > 255.0f ? 255.0f : v;
            p[c] = (uint8_t)(int)v;
        }
    }
}

// C's round() of x >= 0 (half away from zero) without the library call: x - trunc(x) is exact.
static inline int round_pos(double x) {
    int k = (int)x;
    return k + (x - (double)k >= 0.5);
}

// Pillow's hsv2rgb's terms that depend on the hue byte alone: the sector floor(h 6 / 255) mod 6
// and the fraction h 6 / 255 - sector (in float, as Pillow), and on the saturation byte alone:
// s / 255 in float.
typedef struct {
    uint8_t sector[256];
    float frac[256], fs[256];
} hsv_terms;

static void hsv_terms_make(hsv_terms *t) {
    for (int x = 0; x < 256; x++) {
        int i = (int)floor((float)x * 6.0 / 255.0);
        t->sector[x] = (uint8_t)(i % 6);
        t->frac[x] = (float)((float)x * 6.0 / 255.0 - (float)i);
        t->fs[x] = (float)((float)x / 255.0);
    }
}

// The float quotients a / d (a 0..255, d 1..255) rgb2hsv divides by: exact (float division
// rounds correctly), so a lookup gives its bytes; 256 KiB, made once.
static float quot[256][256];
static pthread_once_t quot_once = PTHREAD_ONCE_INIT;

static void quot_make(void) {
    for (int d = 1; d < 256; d++)
        for (int a = 0; a < 256; a++) quot[d][a] = (float)a / (float)d;
}

// One pixel's hue shift: Pillow's rgb2hsv (after Python's colorsys), H += shift modulo 256, then
// Pillow's hsv2rgb, bytes in and out, with Pillow's mix of float and double kept (only the two
// quotients the pixel's case reads, looked up; round() as round_pos).
static inline void hue_pixel(uint8_t *px, uint8_t shift, const hsv_terms *T) {
    int r = px[0], g = px[1], b = px[2];
    int maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
    int minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
    if (minc == maxc) return; // H = S = 0: hsv2rgb gives back (V, V, V), the pixel
    const float *q = quot[maxc - minc]; // x / cr
    float s = quot[maxc][maxc - minc], h;
    if (r == maxc) h = q[maxc - b] - q[maxc - g];
    else if (g == maxc) h = (float)(2.0 + q[maxc - r] - q[maxc - b]);
    else h = (float)(4.0 + q[maxc - g] - q[maxc - r]);
    // fmod(h / 6 + 1, 1) (h in [-1, 5]: x in [5/6, 11/6), where x - 1 is exact)
    double x = h / 6.0 + 1.0;
    h = (float)(x >= 1.0 ? x - 1.0 : x);
    int hb = (uint8_t)((int)(h * 255.0) + shift), sb = (int)(s * 255.0); // both in 0..255 before the shift
    if (sb == 0) {
        px[0] = px[1] = px[2] = (uint8_t)maxc;
        return;
    }
    float fs = T->fs[sb], f = T->frac[hb], v = (float)maxc;
    // (V, P, Q, T) of Pillow's six sectors, picked by index rather than a switch (the sector
    // changes from pixel to pixel: a branch there mispredicts)
    static const uint8_t pick[6][3] = {{0, 3, 1}, {2, 0, 1}, {1, 0, 3}, {1, 2, 0}, {3, 1, 0}, {0, 1, 2}};
    uint8_t val[4] = {(uint8_t)maxc, (uint8_t)round_pos(v * (1.0 - fs)), (uint8_t)round_pos(v * (1.0 - fs * f)),
                      (uint8_t)round_pos(v * (1.0 - fs * (1.0 - f)))};
    const uint8_t *k = pick[T->sector[hb]];
    px[0] = val[k[0]], px[1] = val[k[1]], px[2] = val[k[2]];
}

uint8_t tk_img_hue_shift(double h) {
    // torchvision: np_h += np.array(hue_factor * 255).astype(np.uint8), a C cast of the double:
    // truncated toward zero, then taken modulo 256 (as uint8 wraps)
    return (uint8_t)(int)(h * 255.0);
}

void tk_img_adjust_hue_by(uint8_t *px, size_t n, uint8_t shift) {
    hsv_terms T;
    hsv_terms_make(&T);
    pthread_once(&quot_once, quot_make);
    for (size_t i = 0; i < n; i++) hue_pixel(px + 3 * i, shift, &T);
}

void tk_img_adjust_hue(uint8_t *px, size_t n, double h) { tk_img_adjust_hue_by(px, n, tk_img_hue_shift(h)); }

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
