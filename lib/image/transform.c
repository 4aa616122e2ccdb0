// Sample geometry (torchvision's RandomResizedCrop and Resize + CenterCrop) and the output
// description (transform.h); the resampling is kernels/img_resize_ref.c's.
#include <math.h>
#include <string.h>

#include "core/philox.h"
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

tk_img_rs_out tk_img_transform_out(const tk_img_transform *t) {
    tk_img_rs_out o = {.out_w = t->out_w, .out_h = t->out_h, .dtype = t->dtype};
    memcpy(o.mean, t->mean, sizeof o.mean);
    memcpy(o.std, t->std, sizeof o.std);
    return o;
}
