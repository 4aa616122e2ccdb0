// SSD300's input pipeline (lib/workloads/ssd/data.h) and the colour jitter (kernels/img_jitter_px.h):
// the crop's test and box geometry on exact (dyadic) cases, the flip, the normalisation, Pillow's
// blend arithmetic on hand-computed bytes, the crop option statistics against probabilities
// integrated here from the reference's definition (chi-square), the jitter's order and factor
// ranges, and whole samples from .tks records written here: the same key gives the same bytes
// whatever the thread count or the rank split, the flip mirrors, evaluation keeps ids and sizes.
//
// With TK_SSD_DATA_DRIVE in the environment the binary is the C side of
// tests/cli/ssd-data-oracle.bats instead (contrib/peers/ssd_data.py runs the other side), reading
// whitespace-separated integers / numbers on stdin:
//   jitter: "W H o0 o1 o2 o3 brightness contrast saturation hue" then W H 3 bytes (RGB, row
//           major); prints the jittered bytes, one line per row
//   crop:   "N SEED n" then n boxes x1 y1 x2 y2 (in [0, 1]); runs SSDCropping for records
//           0 .. N-1 of epoch 0 and prints per record "option kept rounds w h" (w h of the crop)
//   resize: "W H x0 y0 x1 y1 S" then W H 3 bytes; prints the crop [x0, x1) x [y0, y1) resized to
//           S x S bytes as the pipeline resizes (lib/image's Pillow-style bilinear), a row a line
//   sample: "JPEG_PATH SEED EPOCH TRAIN S W H n" then n boxes x1 y1 x2 y2 in pixels (labels 1..n):
//           the JPEG as the one record of a .tks file, then ssd_sample's result: "crop OPTION x0
//           y0 x1 y1 left top w h", "flip F", "jitter o0 o1 o2 o3 b c s h", "boxes M" and M lines
//           "x1 y1 x2 y2 label", then S S lines of the normalised image's 3 values (NHWC)
// and exits before its TAP tests: 0, or the error's code with a message on stderr.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cocodata/prep.h"
#include "image/codec.h"
#include "img_jitter_px.h"
#include "img_jitter.h"
#include "img_resize.h"
#include "tk_drive.h"
#include "tk_test.h"
#include "tks/tks.h"
#include "workloads/ssd/data.h"

// ---- the crop's geometry ----

TK_TEST(crop_accepts_exact) {
    // the crop [0.25, 0.75]^2
    const float whole[4] = {0.25f, 0.25f, 0.75f, 0.75f}, small[4] = {0.375f, 0.375f, 0.625f, 0.625f};
    const float outside[4] = {0, 0, 0.125f, 0.125f}, edge[4] = {0.125f, 0.375f, 0.375f, 0.625f};
    // IoU 1: passes every bound
    CHECK_EQ_INT(ssd_crop_accepts(whole, 1, 0.9, 0.25, 0.25, 0.5, 0.5), 1);
    // IoU 0.0625 / 0.25 = 0.25: > 0.1, not > 0.3
    CHECK_EQ_INT(ssd_crop_accepts(small, 1, 0.1, 0.25, 0.25, 0.5, 0.5), 1);
    CHECK_EQ_INT(ssd_crop_accepts(small, 1, 0.3, 0.25, 0.25, 0.5, 0.5), 0);
    // an IoU equal to the bound fails (strict): small box against the crop [0.375, 0.625] x
    // [0.375, 0.875]: IoU 0.0625 / 0.125 = 0.5
    CHECK_EQ_INT(ssd_crop_accepts(small, 1, 0.5, 0.375, 0.375, 0.25, 0.5), 0);
    CHECK_EQ_INT(ssd_crop_accepts(small, 1, 0.3, 0.375, 0.375, 0.25, 0.5), 1);
    // no center inside: refused even without an IoU bound
    CHECK_EQ_INT(ssd_crop_accepts(outside, 1, -INFINITY, 0.25, 0.25, 0.5, 0.5), 0);
    // a center on the crop's edge (x = 0.25) is not inside
    CHECK_EQ_INT(ssd_crop_accepts(edge, 1, -INFINITY, 0.25, 0.25, 0.5, 0.5), 0);
    // one box with its center inside is enough, but every box must pass the IoU bound
    float two[8];
    memcpy(two, outside, 16), memcpy(two + 4, small, 16);
    CHECK_EQ_INT(ssd_crop_accepts(two, 2, -INFINITY, 0.25, 0.25, 0.5, 0.5), 1);
    CHECK_EQ_INT(ssd_crop_accepts(two, 2, 0.1, 0.25, 0.25, 0.5, 0.5), 0);
    // no boxes: nothing inside
    CHECK_EQ_INT(ssd_crop_accepts(NULL, 0, -INFINITY, 0.25, 0.25, 0.5, 0.5), 0);
}

TK_TEST(crop_boxes_exact) {
    ssd_crop c = {.option = 3, .left = 0.25, .top = 0.25, .w = 0.5, .h = 0.5, .right = 0.75, .bottom = 0.75};
    const float in[5][4] = {
        {0.375f, 0.375f, 0.625f, 0.625f}, // inside: scaled to [0.25, 0.75]^2
        {0, 0, 0.125f, 0.125f},           // outside: dropped
        {0.125f, 0.375f, 0.5f, 0.875f},   // center (0.3125, 0.625) inside: clipped to [0.25, 0.375, 0.5, 0.75]
        {0.125f, 0.375f, 0.375f, 0.625f}, // center x 0.25 on the edge: dropped
        {0, 0, 1, 1},                     // covers the crop: becomes [0, 1]^2
    };
    const int32_t lab[5] = {7, 8, 9, 10, 11};
    float out[5][4];
    int32_t ol[5];
    CHECK_EQ_INT(ssd_crop_boxes(&c, &in[0][0], lab, 5, &out[0][0], ol), 3);
    const float want[3][4] = {{0.25f, 0.25f, 0.75f, 0.75f}, {0, 0.25f, 0.5f, 1}, {0, 0, 1, 1}};
    CHECK(memcmp(out, want, sizeof want) == 0);
    CHECK(ol[0] == 7 && ol[1] == 9 && ol[2] == 11);
    // in place, as the pipeline calls it
    float io[5][4];
    memcpy(io, in, sizeof io);
    CHECK_EQ_INT(ssd_crop_boxes(&c, &io[0][0], lab, 5, &io[0][0], ol), 3);
    CHECK(memcmp(io, want, sizeof want) == 0);
    // option 0: unchanged
    ssd_crop none = {.option = 0, .right = 1, .bottom = 1, .w = 1, .h = 1};
    CHECK_EQ_INT(ssd_crop_boxes(&none, &in[0][0], lab, 5, &out[0][0], ol), 5);
    CHECK(memcmp(out, in, sizeof in) == 0 && ol[4] == 11);
}

TK_TEST(flip_boxes_exact) {
    float b[2][4] = {{0.125f, 0.25f, 0.375f, 0.5f}, {0, 0, 1, 1}};
    ssd_flip_boxes(&b[0][0], 2);
    const float want[2][4] = {{0.625f, 0.25f, 0.875f, 0.5f}, {0, 0, 1, 1}};
    CHECK(memcmp(b, want, sizeof want) == 0);
}

TK_TEST(normalize_layouts) {
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    for (int c = 0; c < 3; c++) o.mean[c] = 0.5f, o.std[c] = 0.5f; // p 0 -> -1, 255 -> 1 exactly
    const uint8_t px[4 * 3] = {0, 255, 0, 255, 255, 255, 0, 0, 0, 255, 0, 255};
    float nhwc[12], chw[12];
    ssd_normalize(px, 2, &o, nhwc);
    o.chw = 1;
    ssd_normalize(px, 2, &o, chw);
    int bad = 0;
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 3; c++) {
            float want = px[3 * i + c] ? 1.0f : -1.0f;
            bad += nhwc[3 * i + c] != want || chw[c * 4 + i] != want;
        }
    CHECK_EQ_INT(bad, 0);
    // torchvision's ImageNet statistics: (p / 255 - mean) / std
    ssd_data_opts_default(&o);
    const uint8_t g[3] = {128, 17, 250};
    float v[3];
    ssd_normalize(g, 1, &o, v);
    const double mean[3] = {0.485, 0.456, 0.406}, std[3] = {0.229, 0.224, 0.225};
    for (int c = 0; c < 3; c++) CHECK_NEAR(v[c], (g[c] / 255.0 - mean[c]) / std[c], 1e-6);
}

// ---- the decode's plan: full size, or a DCT scale where the crop allows it ----

static int axes_equal(const tk_img_axis *a, const tk_img_axis *b) {
    if (a->n != b->n || a->lo != b->lo || a->hi != b->hi || a->maxtaps != b->maxtaps) return 0;
    for (int i = 0; i < a->n; i++) {
        if (a->first[i] != b->first[i] || a->count[i] != b->count[i]) return 0;
        for (int k = 0; k < a->count[i]; k++)
            if (a->w[(size_t)i * a->maxtaps + k] != b->w[(size_t)i * b->maxtaps + k]) return 0;
    }
    return 1;
}

TK_TEST(decode_plan_dct_scale) {
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    CHECK_EQ_INT(o.dct, 0); // the reference decodes at full size
    tk_err e = {0};
    tk_img_box_plan p;
    tk_img_axis ax, ay;
    // dct off: the crop's own pixels, the axes of [x0, x1) -> 300 reading only them
    ssd_crop c = {.option = 1, .x0 = 37, .y0 = 20, .x1 = 611, .y1 = 455};
    CHECK_EQ_INT(ssd_decode_plan(&c, 640, 480, &o, &p, &e), 0);
    CHECK_EQ_INT(p.num, 8);
    CHECK_EQ_INT(tk_img_axis_plan(&ax, 37, 611, 300, 0, 300, 37, 611, &e), 0);
    CHECK_EQ_INT(tk_img_axis_plan(&ay, 20, 455, 300, 0, 300, 20, 455, &e), 0);
    CHECK(axes_equal(&p.ax, &ax) && axes_equal(&p.ay, &ay));
    tk_img_axis_free(&ax), tk_img_axis_free(&ay), tk_img_box_plan_free(&p);
    o.dct = 1;
    // 574 x 435 stays >= 300 only at full size (x 1/2: 287 x 217.5)
    CHECK_EQ_INT(ssd_decode_plan(&c, 640, 480, &o, &p, &e), 0);
    CHECK_EQ_INT(p.num, 8);
    tk_img_box_plan_free(&p);
    // 640 x 640 of 1000 x 700: 1/2 (320 x 320), not 1/4 (160); the image decodes at 500 x 350 and
    // the box [100, 740) x [30, 670) becomes [50, 370) x [15, 335): the taps stay inside it
    ssd_crop big = {.option = 6, .x0 = 100, .y0 = 30, .x1 = 740, .y1 = 670};
    CHECK_EQ_INT(ssd_decode_plan(&big, 1000, 700, &o, &p, &e), 0);
    CHECK_EQ_INT(p.num, 4);
    CHECK(p.ax.lo >= 50 && p.ax.hi <= 370 && p.ay.lo >= 15 && p.ay.hi <= 335);
    CHECK_EQ_INT(p.ax.n, 300);
    CHECK_EQ_INT(p.ay.n, 300);
    CHECK_EQ_INT(tk_img_axis_plan(&ax, 50, 370, 300, 0, 300, 50, 370, &e), 0);
    CHECK(axes_equal(&p.ax, &ax));
    tk_img_axis_free(&ax), tk_img_box_plan_free(&p);
}

// ---- the colour jitter: Pillow's byte arithmetic ----

TK_TEST(jitter_blend_bytes) {
    // brightness: f p truncated; clamped above 1
    uint8_t p[6] = {255, 100, 3, 250, 1, 0};
    tk_img_adjust_brightness(p, 2, 0.5);
    CHECK(p[0] == 127 && p[1] == 50 && p[2] == 1 && p[3] == 125 && p[4] == 0 && p[5] == 0);
    uint8_t q[6] = {250, 100, 8, 0, 227, 228};
    tk_img_adjust_brightness(q, 2, 1.125); // 281.25 -> 255, 112.5 -> 112, 9, 0, 255.375 -> 255, 256.5 -> 255
    CHECK(q[0] == 255 && q[1] == 112 && q[2] == 9 && q[3] == 0 && q[4] == 255 && q[5] == 255);
    // contrast: gray images stay; a black and a white pixel: L mean 127.5 -> 128 (int(m + 0.5));
    // f 0.5: 128 - 64 = 64 and 128 + 63.5 = 191.5 -> 191
    uint8_t bw[6] = {0, 0, 0, 255, 255, 255};
    tk_img_adjust_contrast(bw, 2, 0.5);
    CHECK(bw[0] == 64 && bw[1] == 64 && bw[2] == 64 && bw[3] == 191 && bw[4] == 191 && bw[5] == 191);
    uint8_t gray[3] = {90, 90, 90};
    tk_img_adjust_contrast(gray, 1, 1.5);
    CHECK(gray[0] == 90 && gray[1] == 90 && gray[2] == 90);
    // saturation 0: each pixel its luma; pure red's is (255 * 19595 + 32768) >> 16 = 76
    uint8_t red[3] = {255, 0, 0};
    tk_img_adjust_saturation(red, 1, 0.0);
    CHECK(red[0] == 76 && red[1] == 76 && red[2] == 76);
    CHECK_EQ_INT(tk_img_luma((const uint8_t[]){255, 255, 255}), 255);
    CHECK_EQ_INT(tk_img_luma((const uint8_t[]){0, 255, 0}), 150); // 9809970 / 65536 = 149.69
    // hue: a third of the circle turns red into green (H 0 -> 85: sector 2, f 0)
    uint8_t r2[3] = {255, 0, 0};
    tk_img_adjust_hue(r2, 1, 1.0 / 3);
    CHECK(r2[0] == 0 && r2[1] == 255 && r2[2] == 0);
    // grays have no hue and survive the round trip
    uint8_t g2[3] = {37, 37, 37};
    tk_img_adjust_hue(g2, 1, 0.05);
    CHECK(g2[0] == 37 && g2[1] == 37 && g2[2] == 37);
}

TK_TEST(jitter_order_followed) {
    enum { N = 64 };
    uint8_t a[N * 3], b[N * 3];
    for (int i = 0; i < N * 3; i++) a[i] = (uint8_t)(i * 37 + 11);
    memcpy(b, a, sizeof a);
    tk_img_jitter j = {{3, 1, 0, 2}, 1.1, 0.6, 1.4, -0.03};
    tk_img_jitter_apply(a, N, &j);
    tk_img_adjust_hue(b, N, -0.03);
    tk_img_adjust_contrast(b, N, 0.6);
    tk_img_adjust_brightness(b, N, 1.1);
    tk_img_adjust_saturation(b, N, 1.4);
    CHECK(memcmp(a, b, sizeof a) == 0);
    // another order gives other bytes (the order matters, so it must be drawn)
    uint8_t c[N * 3];
    for (int i = 0; i < N * 3; i++) c[i] = (uint8_t)(i * 37 + 11);
    tk_img_jitter k = {{0, 1, 2, 3}, 1.1, 0.6, 1.4, -0.03};
    tk_img_jitter_apply(c, N, &k);
    CHECK(memcmp(a, c, sizeof a) != 0);
}

// The device op's reference (kernels/img_jitter.h) is the loader's jitter + normalisation: the
// same floats from a draw's job as from tk_img_jitter_apply then ssd_normalize.
TK_TEST(jitter_op_reference_is_the_loaders) {
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    const int S = 9;
    uint8_t src[9 * 9 * 3], img[9 * 9 * 3];
    float a[9 * 9 * 3], b[9 * 9 * 3];
    tk_err e = {0};
    for (int round = 0; round < 8; round++) {
        for (int i = 0; i < S * S * 3; i++) src[i] = (uint8_t)(i * 53 + round * 101 + (i % 7) * 29);
        ssd_rng r;
        ssd_rng_init(&r, 5, 0, (uint32_t)round, 0);
        tk_img_jitter d;
        ssd_jitter_draw(&r, &o, &d);
        memcpy(img, src, sizeof img);
        tk_img_jitter_apply(img, (size_t)S * S, &d);
        ssd_normalize(img, S, &o, a);
        tk_img_jitter_job j = tk_img_jitter_job_of(&d);
        CHECK_EQ_INT(tk_img_jitter_norm_ref(src, &j, 1, S, o.mean, o.std, b, &e), 0);
        CHECK(memcmp(a, b, sizeof a) == 0);
    }
    // no jitter: the normalisation alone
    tk_img_jitter_job none = TK_IMG_JITTER_NONE;
    ssd_normalize(src, S, &o, a);
    CHECK_EQ_INT(tk_img_jitter_norm_ref(src, &none, 1, S, o.mean, o.std, b, &e), 0);
    CHECK(memcmp(a, b, sizeof a) == 0);
}

TK_TEST(jitter_draw_ranges_and_orders) {
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    enum { N = 24000 };
    int count[24] = {0}, bad = 0;
    double lo[4] = {9, 9, 9, 9}, hi[4] = {-9, -9, -9, -9};
    for (int i = 0; i < N; i++) {
        ssd_rng r;
        ssd_rng_init(&r, 5, 1, (uint32_t)i, 0);
        tk_img_jitter j;
        ssd_jitter_draw(&r, &o, &j);
        int seen = 0, code = 0;
        for (int k = 0; k < 4; k++) seen |= 1 << j.order[k];
        bad += seen != 15;
        // the permutation's rank (Lehmer code)
        for (int k = 0; k < 4; k++) {
            int smaller = 0;
            for (int m = k + 1; m < 4; m++) smaller += j.order[m] < j.order[k];
            code = code * (4 - k) + smaller;
        }
        count[code]++;
        const double f[4] = {j.brightness, j.contrast, j.saturation, j.hue};
        for (int k = 0; k < 4; k++) lo[k] = fmin(lo[k], f[k]), hi[k] = fmax(hi[k], f[k]);
    }
    CHECK_EQ_INT(bad, 0);
    double chi = 0;
    for (int k = 0; k < 24; k++) chi += (count[k] - N / 24.0) * (count[k] - N / 24.0) / (N / 24.0);
    printf("#   orders: chi-square %.1f (23 degrees of freedom)\n", chi);
    CHECK(chi < 60); // p ~ 4e-5 for a uniform permutation
    // the ranges, and nearly filled (N draws leave gaps of about 1/N)
    const double want[4][2] = {{0.875, 1.125}, {0.5, 1.5}, {0.5, 1.5}, {-0.05, 0.05}};
    for (int k = 0; k < 4; k++) {
        double span = want[k][1] - want[k][0];
        CHECK(lo[k] >= want[k][0] && hi[k] < want[k][1]);
        CHECK(lo[k] < want[k][0] + 1e-3 * span && hi[k] > want[k][1] - 1e-3 * span);
    }
}

// ---- the crop's statistics against the reference's definition ----

// P(an attempt of option k is accepted) for one box covering the whole image, integrated from
// SSDCropping's definition: w, h ~ U(0.3, 1) with 0.5 <= w / h <= 2; the IoU is the crop's area
// w h (> t); the box's center (0.5, 0.5) is inside when left < 0.5 < left + w for left ~ U(0,
// 1 - w): probability 1 for w >= 0.5, else w / (1 - w); likewise for h.
static double accept_whole_box(double t) {
    const int G = 1400;
    double sum = 0, d = 0.7 / G;
    for (int i = 0; i < G; i++) {
        double w = 0.3 + (i + 0.5) * d, cw = w >= 0.5 ? 1 : w / (1 - w);
        for (int j = 0; j < G; j++) {
            double h = 0.3 + (j + 0.5) * d, ch = h >= 0.5 ? 1 : h / (1 - h);
            if (w / h < 0.5 || w / h > 2 || !(w * h > t)) continue;
            sum += cw * ch;
        }
    }
    return sum * d * d / 0.49;
}

TK_TEST(crop_option_statistics) {
    // One option is chosen per round, uniformly of 7; "none" always ends, option k with
    // probability a_k, so the final option is k with probability a_k / (1 + sum a) (a_0 = 1).
    double a[SSD_CROP_OPTIONS], tot = 0;
    for (int k = 0; k < SSD_CROP_OPTIONS; k++) tot += a[k] = k ? accept_whole_box(ssd_crop_min_iou(k)) : 1;
    enum { N = 30000 };
    int count[SSD_CROP_OPTIONS] = {0}, bad = 0;
    long rounds = 0;
    const float box[4] = {0, 0, 1, 1};
    for (int i = 0; i < N; i++) {
        ssd_rng r;
        ssd_rng_init(&r, 11, 0, (uint32_t)i, 16);
        ssd_crop c;
        ssd_crop_choose(&r, box, 1, 640, 480, 1, &c);
        count[c.option]++;
        rounds += c.rounds;
        if (c.option) {
            double t = ssd_crop_min_iou(c.option);
            bad += !(c.w * c.h > t) || c.w / c.h < 0.5 || c.w / c.h > 2 || c.w < 0.3 || c.h < 0.3;
            bad += c.x0 != (int)(c.left * 640) || c.x1 != (int)(c.right * 640) || c.y1 != (int)(c.bottom * 480);
        } else {
            bad += c.x0 != 0 || c.y0 != 0 || c.x1 != 640 || c.y1 != 480;
        }
    }
    CHECK_EQ_INT(bad, 0);
    double chi = 0;
    for (int k = 0; k < SSD_CROP_OPTIONS; k++) {
        double want = N * a[k] / tot;
        chi += (count[k] - want) * (count[k] - want) / want;
        printf("#   option %d: %d, expected %.1f\n", k, count[k], want);
    }
    printf("#   chi-square %.2f (6 degrees of freedom)\n", chi);
    CHECK(chi < 30); // p ~ 4e-5
    // rounds are geometric with success probability (1 + sum a) / 7: mean 7 / tot
    CHECK_NEAR((double)rounds / N, 7 / tot, 0.03);
    // without boxes only "none" ends
    ssd_rng r;
    ssd_rng_init(&r, 11, 0, 3, 16);
    ssd_crop c;
    ssd_crop_choose(&r, NULL, 0, 64, 48, 1, &c);
    CHECK(c.option == 0 && c.x1 == 64 && c.y1 == 48 && c.rounds >= 1);
}

// ---- whole samples from records ----

enum { NREC = 12 };

// A test image: smooth colours plus a pattern that the flip must mirror, W x H.
static uint8_t *make_rgb(int W, int H, int seed) {
    uint8_t *p = malloc((size_t)W * H * 3);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            uint8_t *q = p + ((size_t)y * W + x) * 3;
            q[0] = (uint8_t)(x * 255 / (W - 1));
            q[1] = (uint8_t)(y * 255 / (H - 1));
            q[2] = (uint8_t)((x * 7 + y * 3 + seed * 40) % 256);
        }
    return p;
}

// NREC records: record i is (W, H) = (64 + 8 i, 48 + 4 i) (record 0: 64 x 64), i + 1 boxes
// (the last one with label 0 when bad_label), image id 1000 + i. jpeg_of: the record whose JPEG is
// another size (-1 none).
static const char *write_records(const char *name, int bad_label, int jpeg_of) {
    const char *path = tk_test_path("test_ssd_data", name);
    tks_schema s = {0};
    static const struct { const char *n; tks_dtype t; int nd, cols; } f[6] = {
        {"jpeg", TKS_U8, 1, 0}, {"image_id", TKS_I64, 0, 0}, {"height", TKS_I32, 0, 0},
        {"width", TKS_I32, 0, 0}, {"boxes", TKS_F32, 2, 4}, {"labels", TKS_I32, 1, 0}};
    for (int i = 0; i < 6; i++) {
        snprintf(s.f[i].name, sizeof s.f[i].name, "%s", f[i].n);
        s.f[i].dtype = f[i].t, s.f[i].ndim = f[i].nd;
        if (f[i].nd) s.f[i].shape[0] = TKS_RAGGED;
        if (f[i].nd == 2) s.f[i].shape[1] = f[i].cols;
    }
    s.nfields = 6;
    tk_err e = {0};
    tks_writer *w;
    tks_writer_opts wo = {.records_per_frame = 5};
    if (tks_schema_finish(&s, &e) || tks_writer_open(&w, path, &s, &wo, &e)) return NULL;
    for (int i = 0; i < NREC; i++) {
        int W = 64 + 8 * i, H = i ? 48 + 4 * i : 64;
        uint8_t *px = make_rgb(i == jpeg_of ? W + 1 : W, H, i), *jpg;
        size_t nj;
        if (tk_jpeg_encode(px, i == jpeg_of ? W + 1 : W, H, 3, 95, 0, &jpg, &nj, &e)) return NULL;
        free(px);
        int64_t id = 1000 + i;
        int32_t h = H, wd = W;
        float boxes[NREC * 4];
        int32_t labels[NREC];
        for (int k = 0; k <= i; k++) {
            // pixel boxes at quarters and eighths of the image (exactly representable once normalised)
            boxes[4 * k] = (float)(W / 8 * (k % 4)), boxes[4 * k + 1] = (float)(H / 4 * (k % 3));
            boxes[4 * k + 2] = (float)(W / 8 * (k % 4 + 3)), boxes[4 * k + 3] = (float)H;
            labels[k] = 1 + (k * 13) % 80;
        }
        if (bad_label) labels[i] = 0;
        uint64_t oj[2] = {0, nj}, ob[2] = {0, (uint64_t)(i + 1) * 16}, ol[2] = {0, (uint64_t)(i + 1) * 4};
        tks_colref ref[6] = {{jpg, oj}, {&id, NULL}, {&h, NULL}, {&wd, NULL}, {boxes, ob}, {labels, ol}};
        int rc = tks_writer_append_ref(w, ref, 1, &e);
        free(jpg);
        if (rc) return NULL;
    }
    return tks_writer_close(w, &e) ? NULL : path;
}

typedef struct {
    ssd_batch b;
    int n, S, M;
} batch_buf;

static void batch_alloc(batch_buf *bb, int n, int S, int M) {
    *bb = (batch_buf){.n = n, .S = S, .M = M}; // image_u8 NULL: jittered, normalised floats
    bb->b.image = calloc((size_t)n * S * S * 3, sizeof(float));
    bb->b.boxes = calloc((size_t)n * M * 4, sizeof(float));
    bb->b.labels = calloc((size_t)n * M, sizeof(int32_t));
    bb->b.nbox = calloc((size_t)n, sizeof(int32_t));
    bb->b.image_id = calloc((size_t)n, sizeof(int64_t));
    bb->b.size = calloc((size_t)n * 2, sizeof(int32_t));
}

static void batch_free(batch_buf *bb) {
    free(bb->b.image), free(bb->b.boxes), free(bb->b.labels), free(bb->b.nbox), free(bb->b.image_id), free(bb->b.size);
}

// Samples [k0, k0 + n) of a equal to b's [0, n), every field.
static int batch_same(const batch_buf *a, int k0, const batch_buf *b, int n) {
    size_t img = (size_t)a->S * a->S * 3;
    return memcmp(a->b.image + k0 * img, b->b.image, n * img * sizeof(float)) == 0 &&
           memcmp(a->b.boxes + (size_t)k0 * a->M * 4, b->b.boxes, (size_t)n * a->M * 4 * sizeof(float)) == 0 &&
           memcmp(a->b.labels + (size_t)k0 * a->M, b->b.labels, (size_t)n * a->M * 4) == 0 &&
           memcmp(a->b.nbox + k0, b->b.nbox, (size_t)n * 4) == 0 &&
           memcmp(a->b.image_id + k0, b->b.image_id, (size_t)n * 8) == 0 &&
           memcmp(a->b.size + 2 * k0, b->b.size, (size_t)n * 8) == 0;
}

static ssd_dataset *load(const char *path) {
    tk_err e = {0};
    ssd_dataset *d = NULL;
    char *p[1] = {(char *)path};
    if (!path || ssd_dataset_load(p, 1, &d, &e)) return NULL;
    return d;
}

TK_TEST(samples_deterministic_over_threads_and_ranks) {
    if (!tk_img_have_jpeg()) {
        printf("#   built without libjpeg-turbo: skipped\n");
        return;
    }
    ssd_dataset *d = load(write_records("a.tks", 0, -1));
    CHECK(d != NULL);
    if (!d) return;
    CHECK_EQ_INT(ssd_dataset_count(d), NREC);
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    o.seed = 77, o.batch = 8, o.size = 40, o.max_boxes = 16;
    tk_err e = {0};
    batch_buf one, two, half;
    batch_alloc(&one, 8, 40, 16), batch_alloc(&two, 8, 40, 16), batch_alloc(&half, 4, 40, 16);
    // the same batch on 1 and on 3 threads, twice
    ssd_reader *r;
    CHECK_EQ_INT(ssd_reader_open(&o, d, 0, 1, &r, &e), 0);
    CHECK_EQ_INT(ssd_reader_batch(r, 3, 1, &one.b, &e), 0);
    ssd_reader_close(r);
    o.threads = 3;
    CHECK_EQ_INT(ssd_reader_open(&o, d, 0, 1, &r, &e), 0);
    CHECK_EQ_INT(ssd_reader_batch(r, 3, 1, &two.b, &e), 0);
    CHECK(batch_same(&one, 0, &two, 8));
    // another epoch: another order and other draws
    CHECK_EQ_INT(ssd_reader_batch(r, 4, 1, &two.b, &e), 0);
    CHECK(!batch_same(&one, 0, &two, 8));
    ssd_reader_close(r);
    // two ranks: each its half of the global batch, the same bytes
    for (int rank = 0; rank < 2; rank++) {
        o.threads = 2 - rank;
        CHECK_EQ_INT(ssd_reader_open(&o, d, rank, 2, &r, &e), 0);
        CHECK_EQ_INT(ssd_reader_per_rank(r), 4);
        CHECK_EQ_INT(ssd_reader_batch(r, 3, 1, &half.b, &e), 0);
        CHECK(batch_same(&one, 4 * rank, &half, 4));
        ssd_reader_close(r);
    }
    // the layout: boxes in [0, 1], zeros past nbox, labels 1..80 then 0
    int bad = 0;
    for (int k = 0; k < 8; k++) {
        int n = one.b.nbox[k];
        bad += n < 1 || n > 16;
        for (int m = 0; m < 16; m++) {
            const float *b = one.b.boxes + (k * 16 + m) * 4;
            int lab = one.b.labels[k * 16 + m];
            // in [0, 1] up to float32 rounding: (min(x2, right) - left) / w can pass 1 by an ulp, in
            // the reference's float32 tensors too
            const float lo = -1e-6f, hi = 1 + 1e-6f;
            if (m < n) bad += lab < 1 || lab > 80 || b[0] < lo || b[2] > hi || b[1] < lo || b[3] > hi || b[0] > b[2];
            else bad += lab != 0 || b[0] != 0 || b[1] != 0 || b[2] != 0 || b[3] != 0;
        }
        bad += one.b.image_id[k] < 1000 || one.b.image_id[k] >= 1000 + NREC;
    }
    CHECK_EQ_INT(bad, 0);
    batch_free(&one), batch_free(&two), batch_free(&half);
    ssd_dataset_free(d);
}

TK_TEST(sample_flip_mirrors) {
    if (!tk_img_have_jpeg()) return;
    ssd_dataset *d = load(write_records("f.tks", 0, -1));
    CHECK(d != NULL);
    if (!d) return;
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    o.seed = 3, o.size = 32, o.max_boxes = 16, o.jitter = 0;
    batch_buf a, b;
    batch_alloc(&a, 1, 32, 16), batch_alloc(&b, 1, 32, 16);
    ssd_scratch s = {0};
    tk_err e = {0};
    int flipped = 0, bad = 0;
    for (int64_t rec = 1; rec < NREC && flipped < 3; rec++) {
        ssd_sample_info ia, ib;
        o.flip = 1;
        CHECK_EQ_INT(ssd_sample(d, &o, 1, 0, rec, &s, &a.b, 0, &ia, &e), 0);
        if (!ia.flip) continue;
        flipped++;
        o.flip = 0; // the same crop (its draws are its own), not mirrored
        CHECK_EQ_INT(ssd_sample(d, &o, 1, 0, rec, &s, &b.b, 0, &ib, &e), 0);
        bad += ib.flip || ia.crop.x0 != ib.crop.x0 || ia.crop.x1 != ib.crop.x1 || ia.crop.option != ib.crop.option;
        for (int y = 0; y < 32; y++)
            for (int x = 0; x < 32; x++)
                for (int c = 0; c < 3; c++)
                    bad += a.b.image[(y * 32 + x) * 3 + c] != b.b.image[(y * 32 + 31 - x) * 3 + c];
        for (int m = 0; m < a.b.nbox[0]; m++)
            bad += a.b.boxes[4 * m] != 1.0f - b.b.boxes[4 * m + 2] || a.b.boxes[4 * m + 2] != 1.0f - b.b.boxes[4 * m];
    }
    CHECK(flipped > 0);
    CHECK_EQ_INT(bad, 0);
    ssd_scratch_free(&s);
    batch_free(&a), batch_free(&b);
    ssd_dataset_free(d);
}

// data.device_jitter: the batch as resized bytes and jobs; the img_jitter op's reference on them
// gives the host path's floats (the same crop, flip and jitter draws), bit for bit; the boxes are
// the same.
TK_TEST(device_jitter_batch_matches_host) {
    if (!tk_img_have_jpeg()) return;
    ssd_dataset *d = load(write_records("j.tks", 0, -1));
    CHECK(d != NULL);
    if (!d) return;
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    o.seed = 9, o.size = 40, o.max_boxes = 16, o.threads = 2;
    enum { N = 6 };
    const int S = 40;
    int64_t rec[N];
    for (int k = 0; k < N; k++) rec[k] = (k * 5 + 1) % NREC;
    batch_buf host, dev;
    batch_alloc(&host, N, S, 16), batch_alloc(&dev, N, S, 16);
    dev.b.image_u8 = malloc((size_t)N * S * S * 3);
    dev.b.jobs = malloc(N * sizeof *dev.b.jobs);
    float *img = malloc((size_t)N * S * S * 3 * sizeof *img);
    tk_err e = {0};
    for (int jit = 0; jit < 2; jit++) {
        o.jitter = jit;
        CHECK_EQ_INT(ssd_samples(d, &o, 1, 2, rec, N, &host.b, &e), 0);
        o.device_jitter = 1;
        CHECK_EQ_INT(ssd_samples(d, &o, 1, 2, rec, N, &dev.b, &e), 0);
        o.device_jitter = 0;
        CHECK_EQ_INT(tk_img_jitter_norm_ref(dev.b.image_u8, dev.b.jobs, N, S, o.mean, o.std, img, &e), 0);
        CHECK(memcmp(img, host.b.image, (size_t)N * S * S * 3 * sizeof *img) == 0);
        CHECK(memcmp(dev.b.boxes, host.b.boxes, (size_t)N * 16 * 4 * sizeof(float)) == 0);
        CHECK(memcmp(dev.b.nbox, host.b.nbox, N * sizeof(int32_t)) == 0);
        CHECK_EQ_INT(dev.b.jobs[0].order[0] < 0, !jit); // no jitter: the no-op job
    }
    free(img), free(dev.b.image_u8), free(dev.b.jobs);
    batch_free(&host), batch_free(&dev);
    ssd_dataset_free(d);
}

TK_TEST(eval_keeps_ids_sizes_and_pixels) {
    if (!tk_img_have_jpeg()) return;
    const char *path = write_records("e.tks", 0, -1);
    ssd_dataset *d = load(path);
    CHECK(d != NULL);
    if (!d) return;
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    o.size = 64, o.max_boxes = 16, o.threads = 2;
    batch_buf a;
    batch_alloc(&a, 3, 64, 16);
    tk_err e = {0};
    CHECK_EQ_INT(ssd_eval_batch(d, &o, 0, 3, &a.b, &e), 0);
    int bad = 0;
    for (int k = 0; k < 3; k++) {
        int W = 64 + 8 * k, H = k ? 48 + 4 * k : 64;
        bad += a.b.image_id[k] != 1000 + k || a.b.size[2 * k] != H || a.b.size[2 * k + 1] != W;
        bad += a.b.nbox[k] != k + 1;
        for (int m = 0; m <= k; m++) { // the boxes normalised, nothing else
            const float *b = a.b.boxes + (k * 16 + m) * 4;
            bad += b[0] != (float)((double)(W / 8 * (m % 4)) / W) || b[3] != 1.0f;
            bad += b[2] != (float)((double)(W / 8 * (m % 4 + 3)) / W) || a.b.labels[k * 16 + m] != 1 + (m * 13) % 80;
        }
    }
    CHECK_EQ_INT(bad, 0);
    // record 0 is 64 x 64: resizing to 64 x 64 keeps each pixel, so the image is the decoded JPEG
    // normalised
    ssd_record R;
    ssd_dataset_record(d, 0, &R);
    uint8_t *px = malloc(64 * 64 * 3);
    CHECK_EQ_INT(tk_jpeg_decode(R.jpeg, R.jpeg_size, 8, 0, 0, 64, 64, px, 64 * 3, NULL, &e), 0);
    const double mean[3] = {0.485, 0.456, 0.406}, std[3] = {0.229, 0.224, 0.225};
    double worst = 0;
    for (int i = 0; i < 64 * 64 * 3; i++)
        worst = fmax(worst, fabs(a.b.image[i] - (px[i] / 255.0 - mean[i % 3]) / std[i % 3]));
    printf("#   eval pixels: largest difference %.3g\n", worst);
    CHECK(worst < 1e-5);
    free(px);
    batch_free(&a);
    ssd_dataset_free(d);
}

TK_TEST(bad_records_named) {
    if (!tk_img_have_jpeg()) return;
    tk_err e = {0};
    ssd_dataset *d = NULL;
    char *p[1] = {(char *)write_records("l.tks", 1, -1)};
    CHECK_EQ_INT(ssd_dataset_load(p, 1, &d, &e), TK_EDATA);
    char buf[1024];
    tk_err_format(&e, buf, sizeof buf);
    printf("#   %s\n", buf);
    CHECK(strstr(buf, "label below 1") && strstr(buf, "l.tks: record 0"));
    // a JPEG that is not the record's size: named at decode time
    d = load(write_records("j.tks", 0, 2));
    CHECK(d != NULL);
    if (!d) return;
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    o.size = 16, o.max_boxes = 16;
    batch_buf a;
    batch_alloc(&a, 4, 16, 16);
    CHECK_EQ_INT(ssd_eval_batch(d, &o, 0, 4, &a.b, &e), TK_EDATA);
    tk_err_format(&e, buf, sizeof buf);
    printf("#   %s\n", buf);
    CHECK(strstr(buf, "81 x 56 pixels, the record says 80 x 56") && strstr(buf, "record 2 (image 1002)"));
    // more boxes than max_boxes
    e = (tk_err){0};
    o.max_boxes = 2;
    CHECK_EQ_INT(ssd_eval_batch(d, &o, 0, 4, &a.b, &e), TK_EDATA);
    tk_err_format(&e, buf, sizeof buf);
    CHECK(strstr(buf, "image 1002 has 3 boxes, more than max_boxes 2") != NULL);
    batch_free(&a);
    ssd_dataset_free(d);
    // not COCO records
    const char *path = tk_test_path("test_ssd_data", "x.tks");
    tks_schema s = {0};
    snprintf(s.f[0].name, sizeof s.f[0].name, "jpeg");
    s.f[0].dtype = TKS_U8, s.f[0].ndim = 1, s.f[0].shape[0] = TKS_RAGGED, s.nfields = 1;
    tks_writer *w;
    CHECK_EQ_INT(tks_schema_finish(&s, &e) || tks_writer_open(&w, path, &s, NULL, &e) || tks_writer_close(w, &e), 0);
    p[0] = (char *)path;
    CHECK_EQ_INT(ssd_dataset_load(p, 1, &d, &e), TK_EDATA);
    tk_err_format(&e, buf, sizeof buf);
    CHECK(strstr(buf, "not COCO records") && strstr(buf, "(field \"image_id\")"));
}

// prep coco's records (lib/cocodata) are what the loader reads: a two-image COCO set written here,
// converted, loaded, and an eval batch made of it.
TK_TEST(prep_coco_records_load) {
    if (!tk_img_have_jpeg()) return;
    tk_err e = {0};
    const int W[2] = {40, 24}, H[2] = {32, 16};
    char dir[600];
    snprintf(dir, sizeof dir, "%s", tk_test_path("test_ssd_data", "images"));
    CHECK_EQ_INT(mkdir(dir, 0700), 0);
    for (int i = 0; i < 2; i++) {
        uint8_t *px = make_rgb(W[i], H[i], i), *jpg;
        size_t nj;
        CHECK_EQ_INT(tk_jpeg_encode(px, W[i], H[i], 3, 90, 1, &jpg, &nj, &e), 0);
        char name[700];
        snprintf(name, sizeof name, "%s/%012d.jpg", dir, 11 + i);
        FILE *f = fopen(name, "wb");
        CHECK(f && fwrite(jpg, 1, nj, f) == nj);
        if (f) fclose(f);
        free(px), free(jpg);
    }
    // categories out of order: labels are the ranks of the sorted ids (3 -> 1, 7 -> 2, 90 -> 3)
    const char *ann = tk_test_path("test_ssd_data", "ann.json");
    FILE *f = fopen(ann, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("{\"images\": [{\"id\": 11, \"file_name\": \"000000000011.jpg\", \"height\": 32, \"width\": 40},"
          " {\"id\": 12, \"file_name\": \"000000000012.jpg\", \"height\": 16, \"width\": 24}],"
          " \"annotations\": [{\"id\": 1, \"image_id\": 11, \"category_id\": 90, \"bbox\": [10, 8, 20, 16],"
          " \"area\": 320, \"iscrowd\": 0}, {\"id\": 2, \"image_id\": 11, \"category_id\": 3,"
          " \"bbox\": [0, 0, 5, 4], \"area\": 20, \"iscrowd\": 0}, {\"id\": 3, \"image_id\": 12,"
          " \"category_id\": 7, \"bbox\": [6, 4, 12, 8], \"area\": 96, \"iscrowd\": 0}],"
          " \"categories\": [{\"id\": 90, \"name\": \"c\"}, {\"id\": 3, \"name\": \"a\"},"
          " {\"id\": 7, \"name\": \"b\"}]}\n", f);
    fclose(f);
    const char *out = tk_test_path("test_ssd_data", "coco.tks");
    coco_prep_opts po = {.eval = 1};
    coco_prep_stats st;
    CHECK_EQ_INT(coco_prep(ann, dir, out, &po, &st, &e), 0);
    ssd_dataset *d = load(out);
    CHECK(d != NULL);
    if (!d) return;
    CHECK_EQ_INT(ssd_dataset_count(d), 2);
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    o.size = 16, o.max_boxes = 4;
    batch_buf a;
    batch_alloc(&a, 2, 16, 4);
    CHECK_EQ_INT(ssd_eval_batch(d, &o, 0, 2, &a.b, &e), 0);
    CHECK(a.b.image_id[0] == 11 && a.b.image_id[1] == 12);
    CHECK(a.b.size[0] == 32 && a.b.size[1] == 40 && a.b.size[2] == 16 && a.b.size[3] == 24);
    CHECK(a.b.nbox[0] == 2 && a.b.nbox[1] == 1);
    // bbox [l, t, w, h] -> [l / W, t / H, (l + w) / W, (t + h) / H], in the file's order
    const float want0[8] = {0.25f, 0.25f, 0.75f, 0.75f, 0, 0, 0.125f, 0.125f}, want1[4] = {0.25f, 0.25f, 0.75f, 0.75f};
    CHECK(memcmp(a.b.boxes, want0, sizeof want0) == 0 && memcmp(a.b.boxes + 16, want1, sizeof want1) == 0);
    CHECK(a.b.labels[0] == 3 && a.b.labels[1] == 1 && a.b.labels[2] == 0 && a.b.labels[4] == 2);
    batch_free(&a);
    ssd_dataset_free(d);
}

TK_TEST(cleanup) { CHECK_EQ_INT(tk_test_rmdir(), 0); }

// ---- the oracle driver (tests/cli/ssd-data-oracle.bats) ----

static int read_num(double *v, const char *what, tk_err *e) {
    if (scanf("%lf", v) != 1) return tk_err_set(e, TK_EDATA, "%s: a number expected on stdin", what);
    return 0;
}

static int read_bytes(uint8_t *px, size_t n, tk_err *e) {
    for (size_t i = 0; i < n; i++) {
        int v;
        if (scanf("%d", &v) != 1 || v < 0 || v > 255)
            return tk_err_set(e, TK_EDATA, "pixel byte %zu of %zu missing or outside 0..255", i, n);
        px[i] = (uint8_t)v;
    }
    return 0;
}

static void print_rows(const uint8_t *px, int W, int H) {
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W * 3; x++) printf("%d%c", px[(size_t)y * W * 3 + x], x == W * 3 - 1 ? '\n' : ' ');
}

static int drive_jitter(tk_err *e) {
    double v[10];
    for (int i = 0; i < 10; i++) TRY(read_num(&v[i], "W H o0 o1 o2 o3 b c s h", e));
    int W = (int)v[0], H = (int)v[1];
    if (W < 1 || H < 1 || W > 4096 || H > 4096) return tk_err_set(e, TK_EDATA, "W and H in 1..4096");
    tk_img_jitter j = {{(int)v[2], (int)v[3], (int)v[4], (int)v[5]}, v[6], v[7], v[8], v[9]};
    uint8_t *px = malloc((size_t)W * H * 3);
    int rc = px ? read_bytes(px, (size_t)W * H * 3, e) : tk_err_set(e, TK_EIO, "out of memory");
    if (!rc) {
        tk_img_jitter_apply(px, (size_t)W * H, &j);
        print_rows(px, W, H);
    }
    free(px);
    return rc;
}

static int drive_crop(tk_err *e) {
    double v[3];
    for (int i = 0; i < 3; i++) TRY(read_num(&v[i], "N SEED n", e));
    int N = (int)v[0], n = (int)v[2];
    if (N < 1 || n < 0 || n > 1000) return tk_err_set(e, TK_EDATA, "N >= 1, n in 0..1000");
    float *b = malloc((size_t)(n ? n : 1) * 16), *ob = malloc((size_t)(n ? n : 1) * 16);
    int32_t *lab = calloc((size_t)(n ? n : 1), 4), *ol = calloc((size_t)(n ? n : 1), 4);
    int rc = b && ob && lab && ol ? 0 : tk_err_set(e, TK_EIO, "out of memory");
    for (int i = 0; !rc && i < 4 * n; i++) {
        double x;
        if (!(rc = read_num(&x, "box coordinates", e))) b[i] = (float)x;
    }
    for (int i = 0; !rc && i < N; i++) {
        ssd_rng r;
        ssd_rng_init(&r, (uint64_t)v[1], 0, (uint32_t)i, 16);
        ssd_crop c;
        ssd_crop_choose(&r, b, n, 640, 480, 1, &c);
        printf("%d %d %d %.9g %.9g\n", c.option, ssd_crop_boxes(&c, b, lab, n, ob, ol), c.rounds, c.w, c.h);
    }
    free(b), free(ob), free(lab), free(ol);
    return rc;
}

static int drive_resize(tk_err *e) {
    double v[7];
    for (int i = 0; i < 7; i++) TRY(read_num(&v[i], "W H x0 y0 x1 y1 S", e));
    int W = (int)v[0], H = (int)v[1], x0 = (int)v[2], y0 = (int)v[3], x1 = (int)v[4], y1 = (int)v[5], S = (int)v[6];
    if (W < 1 || H < 1 || W > 4096 || H > 4096 || S < 1 || S > 1024 || x0 < 0 || y0 < 0 || x1 > W || y1 > H ||
        x0 >= x1 || y0 >= y1)
        return tk_err_set(e, TK_EDATA, "a crop inside a W x H image of at most 4096 a side, S in 1..1024");
    uint8_t *px = malloc((size_t)W * H * 3), *out = malloc((size_t)S * S * 3);
    float *tmp = malloc((size_t)S * W * 3 * sizeof(float));
    int rc = px && out && tmp ? read_bytes(px, (size_t)W * H * 3, e) : tk_err_set(e, TK_EIO, "out of memory");
    tk_img_axis ax = {0}, ay = {0};
    if (!rc) rc = tk_img_axis_plan(&ax, x0, x1, S, 0, S, x0, x1, e);
    if (!rc) rc = tk_img_axis_plan(&ay, y0, y1, S, 0, S, y0, y1, e);
    if (!rc) {
        tk_img_rs_out ro = {.out_w = S, .out_h = S, .std = {1, 1, 1}, .dtype = TK_IMG_U8};
        tk_img_resample(px, 0, 0, (size_t)W * 3, &ax, &ay, 0, &ro, tmp, out);
        print_rows(out, S, S);
    }
    tk_img_axis_free(&ax), tk_img_axis_free(&ay);
    free(px), free(out), free(tmp);
    return rc;
}

// sample: a JPEG file and its boxes as one record; prints what ssd_sample made of it.
static int drive_sample(tk_err *e) {
    char jpath[4096];
    double v[7];
    if (scanf("%4095s", jpath) != 1) return tk_err_set(e, TK_EDATA, "a JPEG path expected on stdin");
    for (int i = 0; i < 7; i++) TRY(read_num(&v[i], "SEED EPOCH TRAIN S W H n", e));
    int S = (int)v[3], W = (int)v[4], H = (int)v[5], n = (int)v[6];
    if (S < 1 || S > 1024 || n < 0 || n > 200) return tk_err_set(e, TK_EDATA, "S in 1..1024, n in 0..200");
    float boxes[800];
    int32_t labels[200];
    for (int i = 0; i < 4 * n; i++) {
        double x;
        TRY(read_num(&x, "box coordinates (pixels)", e));
        boxes[i] = (float)x;
    }
    for (int i = 0; i < n; i++) labels[i] = 1 + i;
    FILE *f = fopen(jpath, "rb");
    if (!f) return tk_err_set(e, TK_EIO, "%s: cannot open", jpath);
    static uint8_t jpg[1 << 22];
    size_t nj = fread(jpg, 1, sizeof jpg, f);
    fclose(f);
    // one record in a temporary file
    tks_schema sc = {0};
    static const struct { const char *n; tks_dtype t; int nd; } fl[6] = {
        {"jpeg", TKS_U8, 1}, {"image_id", TKS_I64, 0}, {"height", TKS_I32, 0},
        {"width", TKS_I32, 0}, {"boxes", TKS_F32, 2}, {"labels", TKS_I32, 1}};
    for (int i = 0; i < 6; i++) {
        snprintf(sc.f[i].name, sizeof sc.f[i].name, "%s", fl[i].n);
        sc.f[i].dtype = fl[i].t, sc.f[i].ndim = fl[i].nd;
        if (fl[i].nd) sc.f[i].shape[0] = TKS_RAGGED;
        if (fl[i].nd == 2) sc.f[i].shape[1] = 4;
    }
    sc.nfields = 6;
    char tmp[] = "/tmp/test_ssd_data_drive.XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0) return tk_err_set(e, TK_EIO, "cannot make a temporary file");
    close(fd);
    int64_t id = 1;
    int32_t h = H, w = W;
    uint64_t oj[2] = {0, nj}, ob[2] = {0, (uint64_t)n * 16}, ol[2] = {0, (uint64_t)n * 4};
    tks_colref ref[6] = {{jpg, oj}, {&id, NULL}, {&h, NULL}, {&w, NULL}, {boxes, ob}, {labels, ol}};
    tks_writer *tw;
    int rc = tks_schema_finish(&sc, e);
    if (!rc) rc = tks_writer_open(&tw, tmp, &sc, NULL, e);
    if (!rc && (rc = tks_writer_append_ref(tw, ref, 1, e))) tks_writer_abort(tw);
    else if (!rc) rc = tks_writer_close(tw, e);
    ssd_dataset *d = NULL;
    char *paths[1] = {tmp};
    if (!rc) rc = ssd_dataset_load(paths, 1, &d, e);
    unlink(tmp);
    if (rc) return rc;
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    o.seed = (uint64_t)v[0], o.size = S;
    batch_buf bb;
    batch_alloc(&bb, 1, S, 200);
    ssd_scratch s = {0};
    ssd_sample_info in;
    rc = ssd_sample(d, &o, v[2] != 0, (uint32_t)v[1], 0, &s, &bb.b, 0, &in, e);
    if (!rc) {
        const ssd_crop *c = &in.crop;
        printf("crop %d %d %d %d %d %.17g %.17g %.17g %.17g\n", c->option, c->x0, c->y0, c->x1, c->y1, c->left, c->top,
               c->w, c->h);
        const tk_img_jitter *j = &in.jitter;
        printf("flip %d\njitter %d %d %d %d %.17g %.17g %.17g %.17g\n", in.flip, j->order[0], j->order[1], j->order[2],
               j->order[3], j->brightness, j->contrast, j->saturation, j->hue);
        printf("boxes %d\n", bb.b.nbox[0]);
        for (int m = 0; m < bb.b.nbox[0]; m++)
            printf("%.9g %.9g %.9g %.9g %d\n", bb.b.boxes[4 * m], bb.b.boxes[4 * m + 1], bb.b.boxes[4 * m + 2],
                   bb.b.boxes[4 * m + 3], bb.b.labels[m]);
        for (int i = 0; i < S * S; i++)
            printf("%.9g %.9g %.9g\n", bb.b.image[3 * i], bb.b.image[3 * i + 1], bb.b.image[3 * i + 2]);
    }
    ssd_scratch_free(&s);
    batch_free(&bb);
    ssd_dataset_free(d);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    const char *m = getenv("TK_SSD_DATA_DRIVE");
    if (!m) return;
    tk_err e = {0};
    int rc = strcmp(m, "jitter") == 0   ? drive_jitter(&e)
             : strcmp(m, "crop") == 0   ? drive_crop(&e)
             : strcmp(m, "resize") == 0 ? drive_resize(&e)
             : strcmp(m, "sample") == 0 ? drive_sample(&e)
                                        : tk_err_set(&e, TK_EUSAGE, "TK_SSD_DATA_DRIVE must be jitter, crop, resize or sample");
    tk_drive_exit("test_ssd_data", rc, &e);
}
