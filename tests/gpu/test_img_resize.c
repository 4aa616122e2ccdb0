// kernels/img_resize.cu against kernels/img_resize_ref.c (the CPU decoder's resampling): random
// images with the crops tk_img_plan draws (training: random-resized crops and flips; eval:
// resize + center crop), every output type, compared bit for bit (the kernel rounds as the
// reference does); and small cases whose answers are worked out here by hand: an identity resize
// (each output is its pixel), its mirror, a 2x downscale of a known row, a constant image.
#include <math.h>
#include <string.h>

#include "gpu_test.h"
#include "image/transform.h"
#include "img_resize.h"

typedef struct {
    int n, out_w, out_h;
    uint8_t *src;                // host pixels of all images
    size_t src_bytes;
    tk_img_rs_job *jobs;
    size_t tmp_floats;
} batch;

// One job for an image at byte offset off, W x H, from a plan g.
static tk_img_rs_job job_from(const tk_img_geom *g, int W, size_t off, size_t *tmp, int out_h) {
    (void)W;
    tk_img_rs_job j = {.src = (int64_t)off, .tmp = (int64_t)*tmp, .pitch = W * 3, .rw = g->rw, .rh = g->rh,
                       .wx = g->wx, .wy = g->wy, .flip = g->flip};
    j.bx0 = g->x0, j.bx1 = g->x1, j.by0 = g->y0, j.by1 = g->y1;
    j.cx0 = g->x0, j.cx1 = g->x1, j.cy0 = g->y0, j.cy1 = g->y1;
    *tmp += (size_t)out_h * (size_t)(g->x1 - g->x0) * 3;
    return j;
}

// Runs both sides on b; returns the outputs (host) in *ref and *gpu.
static void run_both(const batch *b, const tk_img_rs_out *o, void **ref, void **gpu) {
    size_t per = (size_t)o->out_w * o->out_h * 3 * tk_img_dtype_bytes(o->dtype), out = per * (size_t)b->n;
    int maxtaps = tk_img_rs_maxtaps(b->jobs, b->n);
    size_t wsb = tk_img_rs_ws_bytes(b->n, o, maxtaps);
    tk_err e = {0};
    float *htmp = gt_host(b->tmp_floats * sizeof(float) + 4);
    *ref = gt_host(out), *gpu = gt_host(out);
    memset(*ref, 0x7f, out);
    if (tk_img_resize_ref(b->src, b->jobs, b->n, maxtaps, o, htmp, NULL, *ref, &e)) gt_die_("img_resize ref", &e);
    uint8_t *s = gt_dev(b->src_bytes + 1);
    tk_img_rs_job *j = gt_dev((size_t)b->n * sizeof *j + 1);
    float *t = gt_dev(b->tmp_floats * sizeof(float) + 4);
    void *ws = gt_dev(wsb + 1), *d = gt_dev(out + 1);
    gt_up(s, b->src, b->src_bytes);
    gt_up(j, b->jobs, (size_t)b->n * sizeof *j);
    gt_poison(d, out, 0xff);
    if (tk_img_resize(gt_ctx_, s, j, b->n, maxtaps, o, t, ws, d, &e) || gt_sync(&e)) gt_die_("img_resize cuda", &e);
    gt_down(*gpu, d, out);
    tk_free(gt_ctx_, s), tk_free(gt_ctx_, j), tk_free(gt_ctx_, t), tk_free(gt_ctx_, ws), tk_free(gt_ctx_, d);
    free(htmp);
}

static double as_f(const void *p, tk_img_dtype t, size_t i) {
    if (t == TK_IMG_F32) return ((const float *)p)[i];
    if (t == TK_IMG_BF16) return tk_bf16_to_f32(((const uint16_t *)p)[i]);
    return ((const uint8_t *)p)[i];
}

TK_TEST(img_resize_random_crops_bit_exact) {
    static const char *names[] = {"f32", "bf16", "u8"};
    for (int mode = 0; mode < 2; mode++)
        for (int dt = 0; dt < 3; dt++) {
            batch b = {.n = 7, .out_w = mode ? 56 : 48, .out_h = mode ? 56 : 40};
            int W[7], H[7];
            size_t off[8] = {0};
            for (int k = 0; k < b.n; k++) {
                W[k] = 20 + (int)(gt_u32((uint64_t)k * 2) % 400);
                H[k] = 20 + (int)(gt_u32((uint64_t)k * 2 + 1) % 300);
                off[k + 1] = off[k] + (size_t)W[k] * H[k] * 3 + 64; // odd gaps between images
            }
            b.src_bytes = off[b.n];
            b.src = gt_host(b.src_bytes);
            for (size_t i = 0; i < b.src_bytes; i++) b.src[i] = (uint8_t)gt_u32(1000 + i);
            tk_img_transform t;
            tk_img_transform_default(&t, mode ? TK_IMG_EVAL : TK_IMG_TRAIN);
            t.out_w = b.out_w, t.out_h = b.out_h, t.resize = mode ? 64 : 256;
            t.seed = gt_u32(7);
            b.jobs = gt_host((size_t)b.n * sizeof *b.jobs);
            for (int k = 0; k < b.n; k++) {
                tk_img_geom g;
                tk_img_plan(&t, W[k], H[k], (uint64_t)k, &g);
                b.jobs[k] = job_from(&g, W[k], off[k], &b.tmp_floats, b.out_h);
            }
            tk_img_rs_out o = {.out_w = b.out_w, .out_h = b.out_h, .dtype = (tk_img_dtype)dt};
            memcpy(o.mean, t.mean, sizeof o.mean), memcpy(o.std, t.std, sizeof o.std);
            if (dt == TK_IMG_U8)
                for (int c = 0; c < 3; c++) o.mean[c] = 0, o.std[c] = 1;
            void *ref, *gpu;
            run_both(&b, &o, &ref, &gpu);
            size_t nv = (size_t)b.n * b.out_w * b.out_h * 3, ndiff = 0;
            double maxd = 0;
            for (size_t i = 0; i < nv; i++) {
                double d = fabs(as_f(gpu, o.dtype, i) - as_f(ref, o.dtype, i));
                ndiff += d != 0 || as_f(gpu, o.dtype, i) != as_f(gpu, o.dtype, i);
                maxd = d > maxd ? d : maxd;
            }
            printf("# table img_resize %s %s: %zu values, %zu differ, max |diff| %.3g\n", mode ? "eval" : "train",
                   names[dt], nv, ndiff, maxd);
            CHECK_EQ_INT(ndiff, 0);
            free(ref), free(gpu), free(b.src), free(b.jobs);
        }
}

// Hand-made cases: f32, mean 0, std 1 (the output is the filtered pixel itself).
TK_TEST(img_resize_small_exact_cases) {
    tk_img_rs_out o = {.out_w = 4, .out_h = 2, .std = {1, 1, 1}, .dtype = TK_IMG_F32};
    // a 4 x 2 image, pixel (x, y, c) = 10 (x + 1) + 50 y + c
    uint8_t px[4 * 2 * 3];
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 4; x++)
            for (int c = 0; c < 3; c++) px[(y * 4 + x) * 3 + c] = (uint8_t)(10 * (x + 1) + 50 * y + c);
    // identity (box = image, resized to its own size) and its mirror
    tk_img_rs_job j[2];
    for (int k = 0; k < 2; k++)
        j[k] = (tk_img_rs_job){.src = 0, .tmp = k * 2 * 4 * 3, .bx0 = 0, .bx1 = 4, .by0 = 0, .by1 = 2, .pitch = 12,
                               .rw = 4, .rh = 2, .cx0 = 0, .cx1 = 4, .cy0 = 0, .cy1 = 2, .flip = k};
    batch b = {.n = 2, .out_w = 4, .out_h = 2, .src = px, .src_bytes = sizeof px, .jobs = j, .tmp_floats = 48};
    void *ref, *gpu;
    run_both(&b, &o, &ref, &gpu);
    int bad = 0;
    for (int k = 0; k < 2; k++)
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 4; x++)
                for (int c = 0; c < 3; c++) {
                    int sx = k ? 3 - x : x;
                    float want = (float)(10 * (sx + 1) + 50 * y + c);
                    size_t i = (size_t)k * 24 + (size_t)(y * 4 + x) * 3 + c;
                    bad += ((float *)gpu)[i] != want || ((float *)ref)[i] != want;
                }
    CHECK_EQ_INT(bad, 0);
    free(ref), free(gpu);
    // 2x downscale of the row 10, 20, 30, 40 (one row, one output row): the triangle filter of
    // width 2 around 1.0 and 3.0 gives weights (3, 3, 1)/7 over x = 0..2 and (1, 3, 3)/7 over 1..3
    // (Pillow's), i.e. 120/7 and 230/7.
    o.out_w = 2, o.out_h = 1;
    tk_img_rs_job h = {.src = 0, .tmp = 0, .bx0 = 0, .bx1 = 4, .by0 = 0, .by1 = 1, .pitch = 12, .rw = 2, .rh = 1,
                       .cx0 = 0, .cx1 = 4, .cy0 = 0, .cy1 = 1};
    batch c = {.n = 1, .out_w = 2, .out_h = 1, .src = px, .src_bytes = sizeof px, .jobs = &h, .tmp_floats = 12};
    run_both(&c, &o, &ref, &gpu);
    CHECK_NEAR(((float *)gpu)[0], 120.0 / 7, 1e-6);
    CHECK_NEAR(((float *)gpu)[3], 230.0 / 7, 1e-6);
    CHECK_NEAR(((float *)gpu)[1], 127.0 / 7, 1e-6); // channel 1: every pixel + 1
    free(ref), free(gpu);
    // a constant image stays constant whatever the crop, normalized: (77 - 10) / 4 as bf16
    uint8_t *k = gt_host(300 * 200 * 3);
    memset(k, 77, 300 * 200 * 3);
    o = (tk_img_rs_out){.out_w = 32, .out_h = 16, .mean = {10, 10, 10}, .std = {4, 4, 4}, .dtype = TK_IMG_BF16};
    tk_img_rs_job q = {.src = 0, .tmp = 0, .bx0 = 17, .bx1 = 281, .by0 = 3, .by1 = 150, .pitch = 900, .rw = 32,
                       .rh = 16, .cx0 = 17, .cx1 = 281, .cy0 = 3, .cy1 = 150, .flip = 1};
    batch d = {.n = 1, .out_w = 32, .out_h = 16, .src = k, .src_bytes = 300 * 200 * 3, .jobs = &q,
               .tmp_floats = 16 * 264 * 3};
    run_both(&d, &o, &ref, &gpu);
    bad = 0;
    for (int i = 0; i < 32 * 16 * 3; i++) bad += tk_bf16_to_f32(((uint16_t *)gpu)[i]) != 16.75f;
    CHECK_EQ_INT(bad, 0);
    free(ref), free(gpu), free(k);
}

TK_TEST(img_resize_bad_arguments) {
    tk_err e = {0};
    tk_img_rs_out o = {.out_w = 0, .out_h = 4, .std = {1, 1, 1}};
    CHECK_EQ_INT(tk_img_resize(gt_ctx_, NULL, NULL, 1, 3, &o, NULL, NULL, NULL, &e), TK_EINTERNAL);
    o.out_w = 4, o.dtype = (tk_img_dtype)7;
    CHECK_EQ_INT(tk_img_resize(gt_ctx_, NULL, NULL, 1, 3, &o, NULL, NULL, NULL, &e), TK_EINTERNAL);
}
