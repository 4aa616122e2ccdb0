// JPEG decoding and the transforms against Pillow: the fixtures in tests/data/image were written
// by make_fixtures.py with Pillow, and so were the references (Pillow's decodes and
// crop+resize(BILINEAR) outputs); tests/cli/prep-imagenet-oracle.bats checks that the installed
// Pillow still produces them. Tolerances: full-resolution decodes are exact (the same
// libjpeg-turbo IDCT and upsampling); CMYK within 1 (Pillow rounds its CMYK->RGB, we truncate as
// TensorFlow does); resizes within 1 of Pillow's 8-bit result (Pillow rounds to 8 bits between
// its two passes, we keep floats).
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "image/codec.h"
#include "image/image.h"
#include "img_resize.h"
#include "test_image.h"
#include "tk_test.h"

static const char *fix(const char *name) {
    static char buf[4][512];
    static int k;
    const char *root = getenv("TK_ROOT");
    char *b = buf[k++ % 4];
    snprintf(b, 512, "%s/tests/data/image/%s", root ? root : ".", name);
    return b;
}

// A binary PPM (P6, maxval 255) as written by Pillow.
static uint8_t *read_ppm(const char *path, int *w, int *h) {
    size_t n;
    uint8_t *b = slurp(path, &n);
    if (!b) return NULL;
    int off = 0, maxv = 0;
    if (sscanf((char *)b, "P6 %d %d %d%n", w, h, &maxv, &off) != 3 || maxv != 255) {
        free(b);
        return NULL;
    }
    off++; // the single whitespace after maxval
    uint8_t *px = malloc((size_t)*w * *h * 3);
    memcpy(px, b + off, (size_t)*w * *h * 3);
    free(b);
    return px;
}

// Full decode of a fixture at scale num/8.
static uint8_t *decode_full(const uint8_t *jpg, size_t n, int num, int *w, int *h) {
    tk_jpeg_info info;
    tk_err e;
    if (tk_jpeg_info_read(jpg, n, &info, &e)) {
        printf("# info: %s\n", e.what);
        return NULL;
    }
    *w = tk_jpeg_scaled(info.width, num);
    *h = tk_jpeg_scaled(info.height, num);
    uint8_t *px = malloc((size_t)*w * *h * 3);
    if (tk_jpeg_decode(jpg, n, num, 0, 0, *w, *h, px, (size_t)*w * 3, NULL, &e)) {
        printf("# decode: %s\n", e.what);
        free(px);
        return NULL;
    }
    return px;
}

static int max_diff(const uint8_t *a, const uint8_t *b, size_t n) {
    int m = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)a[i] - (int)b[i]);
        m = d > m ? d : m;
    }
    return m;
}

static const char *const all_fixtures[] = {"baseline_420", "baseline_422", "baseline_444", "progressive",
                                           "gray", "cmyk", "restart", "tiny"};

TK_TEST(full_decode_equals_pillow) {
    NEED_JPEG();
    for (size_t k = 0; k < sizeof all_fixtures / sizeof *all_fixtures; k++) {
        char name[64];
        snprintf(name, sizeof name, "%s.jpg", all_fixtures[k]);
        size_t n;
        uint8_t *jpg = slurp(fix(name), &n);
        snprintf(name, sizeof name, "%s.ppm", all_fixtures[k]);
        int rw, rh, w = 0, h = 0;
        uint8_t *ref = read_ppm(fix(name), &rw, &rh);
        uint8_t *got = jpg ? decode_full(jpg, n, 8, &w, &h) : NULL;
        CHECK(ref && got);
        if (ref && got) {
            CHECK_EQ_INT(w, rw);
            CHECK_EQ_INT(h, rh);
            int d = w == rw && h == rh ? max_diff(got, ref, (size_t)w * h * 3) : 99;
            int tol = strcmp(all_fixtures[k], "cmyk") == 0 ? 1 : 0;
            if (d > tol) printf("#   %s: max difference %d (tolerance %d)\n", all_fixtures[k], d, tol);
            CHECK(d <= tol);
        }
        free(jpg);
        free(ref);
        free(got);
    }
}

TK_TEST(info_reads_header) {
    NEED_JPEG();
    const struct { const char *f; int w, h, comps, color, prog; } want[] = {
        {"baseline_420.jpg", 97, 61, 3, TK_JPEG_YCBCR, 0}, {"progressive.jpg", 120, 80, 3, TK_JPEG_YCBCR, 1},
        {"gray.jpg", 65, 43, 1, TK_JPEG_GRAY, 0},          {"cmyk.jpg", 50, 37, 4, TK_JPEG_CMYK, 0},
        {"tiny.jpg", 1, 1, 3, TK_JPEG_YCBCR, 0}};
    for (size_t k = 0; k < sizeof want / sizeof *want; k++) {
        size_t n;
        uint8_t *jpg = slurp(fix(want[k].f), &n);
        tk_jpeg_info info;
        tk_err e;
        CHECK_EQ_INT(tk_jpeg_info_read(jpg, n, &info, &e), 0);
        CHECK_EQ_INT(info.width, want[k].w);
        CHECK_EQ_INT(info.height, want[k].h);
        CHECK_EQ_INT(info.components, want[k].comps);
        CHECK_EQ_INT(info.color, want[k].color);
        CHECK_EQ_INT(info.progressive, want[k].prog);
        free(jpg);
    }
}

// A region decode (cropped columns, skipped rows) gives the pixels of the full decode, at every
// DCT scale, on a larger image of our own encoding and on the progressive/restart fixtures.
TK_TEST(region_decode_equals_full_decode) {
    NEED_JPEG();
    int W = 501, H = 377;
    uint8_t *px = malloc((size_t)W * H * 3);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            for (int c = 0; c < 3; c++)
                px[((size_t)y * W + x) * 3 + c] = (uint8_t)(128 + 90 * sin(x * (0.05 + 0.02 * c) + y * 0.03) + ((x * 7 + y * 13 + c) % 17));
    uint8_t *jpg[3];
    size_t jn[3];
    tk_err e;
    CHECK_EQ_INT(tk_jpeg_encode(px, W, H, 3, 90, 1, &jpg[0], &jn[0], &e), 0);
    CHECK_EQ_INT(tk_jpeg_encode(px, W, H, 3, 75, 0, &jpg[1], &jn[1], &e), 0);
    jpg[2] = slurp(fix("progressive.jpg"), &jn[2]);
    int bad = 0, cases = 0;
    for (int f = 0; f < 3; f++)
        for (int num = 1; num <= 8; num++) {
            int fw, fh;
            uint8_t *full = decode_full(jpg[f], jn[f], num, &fw, &fh);
            if (!full) {
                bad++;
                continue;
            }
            const int boxes[][4] = {{0, 0, 1, 1}, {fw / 3, fh / 4, fw / 2, fh / 2}, {fw - 7, fh - 5, 7, 5},
                                    {17, 33, fw - 40, 9}, {fw / 2, 0, fw / 2, fh}, {0, fh / 2 + 3, fw, fh / 2 - 3}};
            for (size_t b = 0; b < sizeof boxes / sizeof *boxes; b++) {
                int x0 = boxes[b][0], y0 = boxes[b][1], w = boxes[b][2], h = boxes[b][3];
                if (x0 < 0 || y0 < 0 || w < 1 || h < 1 || x0 + w > fw || y0 + h > fh) continue;
                uint8_t *reg = malloc((size_t)w * h * 3 + 3);
                cases++;
                if (tk_jpeg_decode(jpg[f], jn[f], num, x0, y0, w, h, reg, (size_t)w * 3, NULL, &e)) {
                    printf("#   decode failed: %s\n", e.what);
                    bad++;
                } else {
                    for (int y = 0; y < h; y++)
                        if (memcmp(reg + (size_t)y * w * 3, full + ((size_t)(y0 + y) * fw + x0) * 3, (size_t)w * 3)) {
                            printf("#   image %d scale %d/8 box %d,%d %dx%d: row %d differs\n", f, num, x0, y0, w, h, y);
                            bad++;
                            break;
                        }
                }
                free(reg);
            }
            free(full);
        }
    CHECK_EQ_INT(bad, 0);
    CHECK(cases > 100);
    for (int f = 0; f < 3; f++) free(jpg[f]);
    free(px);
}

// Pillow's img.crop(box).resize(size, BILINEAR) against our resample of the same box (decoded
// at full resolution, mean 0, std 1, fp32).
TK_TEST(crop_resize_within_one_of_pillow) {
    NEED_JPEG();
    const int boxes[3][6] = {{3, 5, 90, 58, 32, 24}, {10, 10, 50, 30, 64, 48}, {0, 0, 97, 61, 13, 11}};
    const char *const names[] = {"baseline_420", "baseline_444", "restart"};
    tk_img_transform t;
    tk_img_transform_default(&t, TK_IMG_EVAL);
    for (int c = 0; c < 3; c++) t.mean[c] = 0, t.std[c] = 1;
    int worst = 0;
    long differ = 0, total = 0;
    for (int f = 0; f < 3; f++) {
        char name[64];
        snprintf(name, sizeof name, "%s.jpg", names[f]);
        size_t n;
        uint8_t *jpg = slurp(fix(name), &n);
        int W, H;
        uint8_t *full = decode_full(jpg, n, 8, &W, &H);
        for (int k = 0; k < 3 && full; k++) {
            const int *b = boxes[k];
            int ow = b[4], oh = b[5], rw, rh;
            snprintf(name, sizeof name, "%s.crop%d.ppm", names[f], k);
            uint8_t *ref = read_ppm(fix(name), &rw, &rh);
            CHECK(ref && rw == ow && rh == oh);
            tk_img_axis ax, ay;
            tk_err e;
            CHECK_EQ_INT(tk_img_axis_plan(&ax, b[0], b[2], ow, 0, ow, b[0], b[2], &e), 0);
            CHECK_EQ_INT(tk_img_axis_plan(&ay, b[1], b[3], oh, 0, oh, b[1], b[3], &e), 0);
            CHECK(ax.lo >= b[0] && ax.hi <= b[2] && ay.lo >= b[1] && ay.hi <= b[3]);
            float *tmp = malloc(sizeof(float) * (size_t)oh * (ax.hi - ax.lo) * 3), *out = malloc(sizeof(float) * ow * oh * 3);
            tk_img_rs_out ro = tk_img_transform_out(&t);
            tk_img_resample(full, 0, 0, (size_t)W * 3, &ax, &ay, 0, &ro, tmp, out);
            for (int i = 0; ref && i < ow * oh * 3; i++) {
                int d = abs((int)lrintf(out[i]) - ref[i]);
                worst = d > worst ? d : worst;
                differ += d != 0;
                total++;
            }
            tk_img_axis_free(&ax);
            tk_img_axis_free(&ay);
            free(tmp);
            free(out);
            free(ref);
        }
        free(full);
        free(jpg);
    }
    printf("#   %ld of %ld values differ from Pillow, by at most %d\n", differ, total, worst);
    CHECK(worst <= 1);
    CHECK(total == 3 * (32 * 24 + 64 * 48 + 13 * 11) * 3);
}

// torchvision's Resize(256) + CenterCrop(224), worked by hand: 500 x 375 -> 341 x 256 (int(256 *
// 500 / 375) = 341), offsets round(58.5) = 58 (half to even) and round(16) = 16.
TK_TEST(eval_geometry_exact) {
    tk_img_transform t;
    tk_img_transform_default(&t, TK_IMG_EVAL);
    tk_img_geom g;
    tk_img_plan(&t, 500, 375, 7, &g);
    CHECK(g.x0 == 0 && g.y0 == 0 && g.x1 == 500 && g.y1 == 375);
    CHECK_EQ_INT(g.rw, 341);
    CHECK_EQ_INT(g.rh, 256);
    CHECK_EQ_INT(g.wx, 58);
    CHECK_EQ_INT(g.wy, 16);
    CHECK_EQ_INT(g.flip, 0);
    tk_img_plan(&t, 333, 500, 7, &g); // portrait: 256 x int(256*500/333) = 256 x 384
    CHECK_EQ_INT(g.rw, 256);
    CHECK_EQ_INT(g.rh, 384);
    CHECK_EQ_INT(g.wx, 16);
    CHECK_EQ_INT(g.wy, 80);
    tk_img_plan(&t, 227, 256, 0, &g); // 256 x int(256*256/227) = 256 x 288: wy = round(32) = 32
    CHECK_EQ_INT(g.rh, 288);
    CHECK_EQ_INT(g.wy, 32);
    tk_img_plan(&t, 1, 1, 0, &g); // 1x1: 256 x 256, offsets 16
    CHECK(g.rw == 256 && g.rh == 256 && g.wx == 16 && g.wy == 16);
    tk_img_plan(&t, 481, 256, 0, &g); // 481 x 256 stays, (481-224)/2 = 128.5 -> 128
    CHECK(g.rw == 481 && g.rh == 256 && g.wx == 128 && g.wy == 16);
}

// The RandomResizedCrop parameters: bounds, the ratio and area ranges (up to the rounding of w and
// h), uniform positions, fair flips, the fallback only when no try fits, reproducible per
// (seed, epoch, sample) and different across epochs.
TK_TEST(random_crop_distribution) {
    tk_img_transform t;
    tk_img_transform_default(&t, TK_IMG_TRAIN);
    t.seed = 42;
    // A square image, so that which crops fit is symmetric in log(ratio).
    int N = 20000, flips = 0, fallback = 0, bad = 0, S = 1000;
    double sum_area = 0, sum_lr = 0, sum_lr2 = 0, sum_pos = 0;
    for (int i = 0; i < N; i++) {
        tk_img_geom g;
        tk_img_plan(&t, S, S, (uint64_t)i, &g);
        int w = g.x1 - g.x0, h = g.y1 - g.y0;
        if (g.x0 < 0 || g.y0 < 0 || g.x1 > S || g.y1 > S || w < 1 || h < 1 || g.rw != 224 || g.rh != 224 ||
            g.tries < 1 || g.tries > 11)
            bad++;
        fallback += g.tries == 11;
        flips += g.flip;
        double a = (double)w * h / ((double)S * S), lr = log((double)w / h);
        // w, h are rounded: allow half a pixel on each side
        if (a < 0.08 * (1 - 2.0 / sqrt(0.08 * S * S)) || a > 1.0 + 1e-9 || lr < log(0.75) - 0.5 / h - 0.5 / w - 1e-9 ||
            lr > log(4.0 / 3.0) + 0.5 / h + 0.5 / w + 1e-9)
            bad++;
        sum_area += a;
        sum_lr += lr;
        sum_lr2 += lr * lr;
        if (w < S) sum_pos += (double)g.x0 / (S - w);
        else sum_pos += 0.5;
    }
    CHECK_EQ_INT(bad, 0);
    // flips: Binomial(N, 1/2), 5 sigma = 354
    CHECK(abs(flips - N / 2) < 354);
    // a square image fits most draws at once (a side only overflows for area * ratio > 1): the
    // fallback needs ten misses in a row
    CHECK(fallback < 5);
    // accepted areas: uniform on [0.08, 1] less the large ones that overflow; the mean is below
    // 0.54 and well above 0.3; log-ratios are centered (the range is symmetric in log) with the
    // spread of a uniform on [-0.2877, 0.2877] (0.1661), slightly less as the extremes fit less
    CHECK(sum_area / N > 0.3 && sum_area / N < 0.54);
    CHECK(fabs(sum_lr / N) < 0.005);
    double sd = sqrt(sum_lr2 / N - (sum_lr / N) * (sum_lr / N));
    CHECK(sd < 0.2877 / sqrt(3.0) + 0.005 && sd > 0.15);
    CHECK(fabs(sum_pos / N - 0.5) < 0.01);
    // reproducible; another epoch or sample gives another crop
    tk_img_geom a, b;
    tk_img_plan(&t, 500, 375, 123, &a);
    tk_img_plan(&t, 500, 375, 123, &b);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    t.epoch = 1;
    tk_img_plan(&t, 500, 375, 123, &b);
    CHECK(memcmp(&a, &b, sizeof a) != 0);
    // a very wide image: no try fits a ratio <= 4/3 crop of it at scale >= 0.08 often; the
    // fallback is the centered 4/3 crop of full height
    t.epoch = 0;
    int fb = 0;
    for (int i = 0; i < 200; i++) {
        tk_img_plan(&t, 2000, 20, (uint64_t)i, &a);
        if (a.tries == 11) {
            fb++;
            CHECK(a.y0 == 0 && a.y1 == 20 && a.x1 - a.x0 == 27 && a.x0 == (2000 - 27) / 2);
        }
    }
    CHECK(fb > 150);
}

// The batch decoder: the same bytes whatever the thread count; bf16 is fp32 rounded to nearest
// even; the DCT-domain downscale stays close to the full-resolution path.
TK_TEST(decoder_threads_dtypes_and_dct_scale) {
    NEED_JPEG();
    const tk_img_decoder_ops *ops = tk_img_decoder_find("cpu");
    CHECK(ops != NULL);
    if (!ops) return;
    const char *names[] = {"baseline_420.jpg", "progressive.jpg", "gray.jpg", "cmyk.jpg", "restart.jpg", "tiny.jpg"};
    tk_img_job jobs[12];
    uint8_t *data[6];
    for (int i = 0; i < 12; i++) {
        size_t n;
        if (i < 6) data[i] = slurp(fix(names[i]), &n), jobs[i].size = n;
        else jobs[i].size = jobs[i - 6].size;
        jobs[i].data = data[i % 6];
        jobs[i].sample = (uint64_t)(i * 31);
    }
    tk_img_transform t;
    tk_img_transform_default(&t, TK_IMG_TRAIN);
    t.seed = 9;
    t.out_w = t.out_h = 64;
    size_t per = 64 * 64 * 3;
    float *a = malloc(12 * per * 4), *b = malloc(12 * per * 4);
    uint16_t *h = malloc(12 * per * 2);
    tk_img_decoder *d1, *d3;
    tk_img_decoder_opts o1 = {.threads = 1}, o3 = {.threads = 3};
    tk_err e;
    CHECK_EQ_INT(ops->open(&d1, &o1, &e), 0);
    CHECK_EQ_INT(ops->open(&d3, &o3, &e), 0);
    CHECK_EQ_INT(ops->run(d1, &t, jobs, 12, a, &e), 0);
    CHECK_EQ_INT(ops->run(d3, &t, jobs, 12, b, &e), 0);
    CHECK(memcmp(a, b, 12 * per * 4) == 0);
    t.dtype = TK_IMG_BF16;
    CHECK_EQ_INT(ops->run(d3, &t, jobs, 12, h, &e), 0);
    int badbf = 0;
    for (size_t i = 0; i < 12 * per; i++) {
        uint32_t u;
        memcpy(&u, &a[i], 4);
        uint32_t r = (u + 0x7fff + ((u >> 16) & 1)) >> 16;
        badbf += h[i] != (uint16_t)r;
    }
    CHECK_EQ_INT(badbf, 0);
    // DCT-domain downscale vs full resolution, eval transform at 224 (a 97x61 image is upscaled,
    // so the DCT path must equal the full path: num is 8), and train at 16x16 (downscaled)
    t.dtype = TK_IMG_F32;
    t.out_w = t.out_h = 16;
    t.dct_scale = 0;
    CHECK_EQ_INT(ops->run(d1, &t, jobs, 12, a, &e), 0);
    t.dct_scale = 1;
    CHECK_EQ_INT(ops->run(d1, &t, jobs, 12, b, &e), 0);
    double mad = 0;
    size_t per16 = 16 * 16 * 3;
    for (size_t i = 0; i < 12 * per16; i++) mad += fabs(a[i] - b[i]);
    mad /= 12.0 * per16;
    printf("#   DCT-scaled vs full-resolution decode at 16x16: mean |difference| %.4f (normalized units)\n", mad);
    CHECK(mad < 0.1); // 0.1 x std (~57/255) = ~6 pixel levels
    // a bad image fails the batch and names its sample
    jobs[4].size = 100;
    CHECK_EQ_INT(ops->run(d3, &t, jobs, 12, a, &e), TK_EDATA);
    CHECK_STR(e.where, "sample 124");
    ops->close(d1);
    ops->close(d3);
    for (int i = 0; i < 6; i++) free(data[i]);
    free(a);
    free(b);
    free(h);
}

TK_TEST(dct_num_choice) {
    CHECK_EQ_INT(tk_img_dct_num(500, 375, 224, 224), 8); // 375 / 2 = 187 < 224
    CHECK_EQ_INT(tk_img_dct_num(1000, 900, 224, 224), 2); // 900 / 4 = 225
    CHECK_EQ_INT(tk_img_dct_num(1000, 890, 224, 224), 4); // 890 / 4 = 222.5
    CHECK_EQ_INT(tk_img_dct_num(4000, 3000, 224, 224), 1);
    CHECK_EQ_INT(tk_img_dct_num(100, 100, 224, 224), 8);
    CHECK_EQ_INT(tk_img_dct_num(448, 448, 224, 224), 4);
    CHECK_EQ_INT(tk_img_dct_num(448, 447, 224, 224), 8);
}

// Bad input: truncated, not a JPEG, a PNG, a 20000 x 20000 header (refused before any image
// buffer exists), and a 1x1 image that decodes through the whole pipeline.
TK_TEST(bad_inputs) {
    NEED_JPEG();
    size_t n;
    uint8_t *jpg = slurp(fix("baseline_420.jpg"), &n);
    tk_jpeg_info info;
    tk_err e;
    uint8_t px[97 * 61 * 3];
    CHECK_EQ_INT(tk_jpeg_decode(jpg, n / 2, 8, 0, 0, 97, 61, px, 97 * 3, NULL, &e), TK_EDATA);
    CHECK(strncmp(e.what, "truncated JPEG data (it ends at about row ", 41) == 0);
    CHECK(strstr(e.what, " of 61)") != NULL);
    CHECK_EQ_INT(tk_jpeg_info_read((const uint8_t *)"hello, world", 12, &info, &e), TK_EDATA);
    CHECK_STR(e.what, "not a JPEG file");
    CHECK_EQ_INT(tk_jpeg_info_read((const uint8_t *)"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", 16, &info, &e), TK_EDATA);
    CHECK_STR(e.what, "a PNG file, not a JPEG");
    CHECK_EQ_INT(tk_jpeg_info_read(jpg, 40, &info, &e), TK_EDATA); // ends inside the header
    CHECK(strncmp(e.what, "truncated JPEG data (it ends before the image data: ", 52) == 0);
    uint8_t *sof3 = malloc(n); // the SOF0 marker made SOF3 (lossless): not a JPEG libjpeg decodes
    memcpy(sof3, jpg, n);
    for (size_t i = 2; i + 1 < n; i++)
        if (sof3[i] == 0xFF && sof3[i + 1] == 0xC0) {
            sof3[i + 1] = 0xC3;
            break;
        }
    CHECK_EQ_INT(tk_jpeg_info_read(sof3, n, &info, &e), TK_EDATA);
    CHECK_STR(e.what, "bad JPEG data: Unsupported JPEG process: SOF type 0xc3");
    free(sof3);
    // SOF0 (FF C0): length (2), precision (1), height (2), width (2): set 20000 x 20000
    uint8_t *big = malloc(n);
    memcpy(big, jpg, n);
    size_t sof = 0;
    for (size_t i = 2; i + 9 < n; i++)
        if (big[i] == 0xFF && big[i + 1] == 0xC0) {
            sof = i;
            break;
        }
    CHECK(sof > 0);
    big[sof + 5] = 20000 >> 8, big[sof + 6] = 20000 & 255, big[sof + 7] = 20000 >> 8, big[sof + 8] = 20000 & 255;
    CHECK_EQ_INT(tk_jpeg_info_read(big, n, &info, &e), TK_EDATA);
    CHECK_STR(e.what, "image is 20000 x 20000 pixels, more than the 178956970 allowed");
    tk_img_transform t;
    tk_img_transform_default(&t, TK_IMG_TRAIN);
    tk_img_scratch s = {0};
    float *out = malloc(224 * 224 * 3 * 4);
    CHECK_EQ_INT(tk_img_decode_one(&t, big, n, 0, &s, out, NULL, NULL, &e), TK_EDATA);
    CHECK(s.px == NULL); // refused before allocating
    free(big);
    free(jpg);
    jpg = slurp(fix("tiny.jpg"), &n);
    tk_img_geom g;
    int num;
    CHECK_EQ_INT(tk_img_decode_one(&t, jpg, n, 5, &s, out, &g, &num, &e), 0);
    CHECK(g.x0 == 0 && g.y0 == 0 && g.x1 == 1 && g.y1 == 1 && num == 8);
    int same = 1; // a constant image, the pixel of tiny.ppm normalized
    int rw, rh;
    uint8_t *ref = read_ppm(fix("tiny.ppm"), &rw, &rh);
    for (int i = 0; ref && i < 224 * 224; i++)
        for (int c = 0; c < 3; c++) same &= fabsf(out[3 * i + c] - (ref[c] - t.mean[c]) / t.std[c]) < 1e-4f;
    CHECK(same);
    free(ref);
    tk_img_scratch_free(&s);
    free(out);
    free(jpg);
}

// TK_IMG_U8 (ResNet's staging type): the float result + 0.5, truncated, clamped to 0..255.
TK_TEST(decoder_u8_output) {
    NEED_JPEG();
    size_t n;
    uint8_t *data = slurp(fix("baseline_420.jpg"), &n);
    tk_img_job jobs[2] = {{data, n, 5}, {data, n, 6}};
    tk_img_transform t;
    tk_img_transform_default(&t, TK_IMG_TRAIN);
    t.out_w = t.out_h = 32;
    for (int c = 0; c < 3; c++) t.mean[c] = -3, t.std[c] = 0.5f; // (v + 3) * 2: some values past 255
    size_t per = 32 * 32 * 3;
    float *f = malloc(2 * per * 4);
    uint8_t *u = malloc(2 * per);
    tk_img_decoder *d;
    tk_img_decoder_opts o = {.threads = 2};
    tk_err e;
    CHECK_EQ_INT(tk_img_decoder_cpu.open(&d, &o, &e), 0);
    CHECK_EQ_INT(tk_img_decoder_cpu.run(d, &t, jobs, 2, f, &e), 0);
    t.dtype = TK_IMG_U8;
    CHECK_EQ_INT(tk_img_decoder_cpu.run(d, &t, jobs, 2, u, &e), 0);
    int bad = 0, clamped = 0;
    for (size_t i = 0; i < 2 * per; i++) {
        double v = floor((double)f[i] + 0.5);
        int want = v < 0 ? 0 : v > 255 ? 255 : (int)v;
        bad += u[i] != want;
        clamped += want == 255;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(clamped > 0);
    tk_img_decoder_cpu.close(d);
    free(data), free(f), free(u);
}

// The decoder list and the fallback: "auto" is nvjpeg where it can open, else cpu with a note
// saying why; a named decoder that cannot open here also falls back (the loader's rule).
TK_TEST(decoder_pick_and_fallback) {
    char note[512], why[512];
    CHECK(strstr(tk_img_decoder_names(), "nvjpeg") != NULL);
    CHECK(tk_img_decoder_find("nvjpeg") == &tk_img_decoder_nvjpeg);
    CHECK(tk_img_decoder_pick("bogus", note, sizeof note) == NULL);
    CHECK(tk_img_decoder_pick("cpu", note, sizeof note) == &tk_img_decoder_cpu);
    CHECK_STR(note, "");
    const tk_img_decoder_ops *a = tk_img_decoder_pick("auto", note, sizeof note);
    if (tk_img_decoder_nvjpeg.available(why, sizeof why)) {
        CHECK(a == &tk_img_decoder_nvjpeg);
        CHECK_STR(note, "");
    } else {
        printf("#   nvjpeg not available here: %s\n", why);
        CHECK(a == &tk_img_decoder_cpu);
        CHECK(strstr(note, "nvjpeg is not available here") != NULL && strstr(note, why) != NULL);
        CHECK(tk_img_decoder_pick("nvjpeg", note, sizeof note) == &tk_img_decoder_cpu);
        tk_img_decoder *d = NULL;
        tk_err e;
        tk_img_decoder_opts o = {.threads = 1};
        int rc = tk_img_decoder_nvjpeg.open(&d, &o, &e);
        CHECK(rc == TK_EDEVICE || rc == TK_EUSAGE);
        CHECK(d == NULL);
        CHECK(strstr(e.what, "nvjpeg") != NULL);
    }
}

// The GPU decoder's resampling kernel's reference on the cpu backend (kernels/img_resize.h), on
// a case worked out by hand: the row 10, 20, 30, 40 halved with Pillow's triangle filter of
// width 2 gives weights (3, 3, 1)/7 and (1, 3, 3)/7: 120/7 and 230/7; mirrored.
TK_TEST(img_resize_reference_by_hand) {
    uint8_t px[12];
    for (int x = 0; x < 4; x++)
        for (int c = 0; c < 3; c++) px[x * 3 + c] = (uint8_t)(10 * (x + 1) + c);
    tk_img_rs_out o = {.out_w = 2, .out_h = 1, .std = {1, 1, 1}, .dtype = TK_IMG_F32};
    tk_img_rs_job j = {.src = 0, .tmp = 0, .bx0 = 0, .bx1 = 4, .by0 = 0, .by1 = 1, .pitch = 12, .rw = 2, .rh = 1,
                       .cx0 = 0, .cx1 = 4, .cy0 = 0, .cy1 = 1, .flip = 1};
    CHECK_EQ_INT(tk_img_rs_maxtaps(&j, 1), 5);
    float tmp[12], out[6];
    tk_ctx *c;
    tk_err e;
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    CHECK_EQ_INT(tk_img_resize(c, px, &j, 1, 5, &o, tmp, NULL, out, &e), 0);
    CHECK_NEAR(out[0], 230.0 / 7, 1e-6); // mirrored: output 1 first
    CHECK_NEAR(out[3], 120.0 / 7, 1e-6);
    CHECK_NEAR(out[4], 127.0 / 7, 1e-6);
    o.dtype = (tk_img_dtype)9;
    CHECK_EQ_INT(tk_img_resize(c, px, &j, 1, 5, &o, tmp, NULL, out, &e), TK_EINTERNAL);
    tk_ctx_destroy(c);
}
