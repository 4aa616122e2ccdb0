// kernels/img_jitter.h on the device against its reference (kernels/img_jitter_ref.c, which is
// kernels/img_jitter_px.c's Pillow arithmetic and ssd_normalize's formula): SSD's colour jitter and
// normalisation of resized images. The kernel rounds every operation as the host does, so the
// outputs must agree bit for bit, on fresh random images (gray and saturated pixels among them)
// and random jobs (the four operations in random orders, factors inside and outside [0, 1], every
// hue shift), and on a pixel worked out by hand.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_test.h"
#include "img_jitter.h"

static const float kMean[3] = {0.485f, 0.456f, 0.406f}, kStd[3] = {0.229f, 0.224f, 0.225f};

// out (n S S 3 floats) of the kernel on src and jobs (host copies), poisoned first.
static float *run_device(const uint8_t *src, const tk_img_jitter_job *jobs, int n, int S, int *failed_) {
    int *tk_failed_ = failed_;
    const size_t px = (size_t)n * S * S * 3;
    uint8_t *dsrc = gt_dev(px);
    tk_img_jitter_job *djobs = gt_dev((size_t)n * sizeof *djobs);
    float *dout = gt_dev(px * 4);
    void *ws = gt_dev(tk_img_jitter_ws_bytes(TK_BACKEND_CUDA, n, S) + 1);
    gt_up(dsrc, src, px);
    gt_up(djobs, jobs, (size_t)n * sizeof *djobs);
    gt_poison(dout, px * 4, 0xff);
    tk_err e = {0};
    CHECK_EQ_INT(tk_img_jitter_norm(gt_ctx_, dsrc, djobs, n, S, kMean, kStd, dout, ws, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    float *out = gt_host(px * 4);
    gt_down(out, dout, px * 4);
    tk_free(gt_ctx_, dsrc), tk_free(gt_ctx_, djobs), tk_free(gt_ctx_, dout), tk_free(gt_ctx_, ws);
    return out;
}

TK_TEST(jitter_one_pixel_by_hand) {
    // (200, 100, 50): brightness 0.5 -> (100, 50, 25); contrast 1 and saturation 1 keep it; the
    // hue round trip with shift 0: V 100, S byte int(0.75 255) = 191, H byte int(255 (1/3) / 6) =
    // 14; back: sector 0, f = 14 6 / 255 = 0.329, p = round(100 (1 - 191/255)) = 25, t =
    // round(100 (1 - 0.749 (1 - 0.329))) = 50: (V, t, p) = (100, 50, 25)
    const uint8_t src[3] = {200, 100, 50}, want[3] = {100, 50, 25};
    tk_img_jitter_job j = {{TK_JITTER_BRIGHTNESS, TK_JITTER_CONTRAST, TK_JITTER_SATURATION, TK_JITTER_HUE}, 0.5f, 1, 1, 0};
    float *out = run_device(src, &j, 1, 1, tk_failed_);
    for (int c = 0; c < 3; c++) CHECK(out[c] == ((float)want[c] / 255.0f - kMean[c]) / kStd[c]);
    free(out);
}

TK_TEST(jitter_matches_reference) {
    static const int sizes[] = {1, 2, 7, 64, 300};
    uint64_t draw = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        const int S = sizes[si], n = S == 300 ? 8 : 6;
        const size_t px = (size_t)n * S * S * 3;
        uint8_t *src = gt_host(px);
        for (size_t i = 0; i < px; i += 3) {
            uint32_t r = gt_u32(draw++);
            src[i] = (uint8_t)r, src[i + 1] = (uint8_t)(r >> 8), src[i + 2] = (uint8_t)(r >> 16);
            if ((r >> 24) < 16) src[i + 1] = src[i + 2] = src[i];      // gray: the hue leaves it
            else if ((r >> 24) < 32) src[i + 2] = 0, src[i] = 255;     // saturated
            else if ((r >> 24) < 64 && i >= 3) memcpy(src + i, src + i - 3, 3); // smooth runs
        }
        tk_img_jitter_job *jobs = gt_host((size_t)n * sizeof *jobs);
        for (int k = 0; k < n; k++) {
            int o[4] = {0, 1, 2, 3};
            for (int i = 3; i > 0; i--) {
                int m = (int)(gt_u32(draw++) % (uint32_t)(i + 1)), t = o[i];
                o[i] = o[m], o[m] = t;
            }
            memcpy(jobs[k].order, o, sizeof o);
            if (k % 4 == 3) jobs[k].order[gt_u32(draw++) % 4] = -1; // an operation left out
            // ColorJitter's ranges, and every few jobs factors outside them (clamping blends)
            float u[3];
            for (int i = 0; i < 3; i++) u[i] = (float)(gt_u32(draw++) >> 8) / 16777216.0f;
            int wild = k % 3 == 2;
            jobs[k].brightness = wild ? -0.5f + 3 * u[0] : 0.875f + 0.25f * u[0];
            jobs[k].contrast = wild ? 2.5f * u[1] : 0.5f + u[1];
            jobs[k].saturation = wild ? -1 + 4 * u[2] : 0.5f + u[2];
            jobs[k].hue_shift = (int32_t)(gt_u32(draw++) & 255);
        }
        float *ref = gt_host(px * 4);
        tk_err e = {0};
        CHECK_EQ_INT(tk_img_jitter_norm_ref(src, jobs, n, S, kMean, kStd, ref, &e), 0);
        float *out = run_device(src, jobs, n, S, tk_failed_);
        size_t nd = gt_ndiff(out, ref, px);
        if (nd) printf("# S %d: %zu of %zu values differ (max ulps %lld)\n", S, nd, px, (long long)gt_max_ulps(out, ref, px));
        CHECK_EQ_INT((long long)nd, 0);
        free(src), free(jobs), free(ref), free(out);
    }
}

TK_TEST(jitter_none_normalises_only) {
    // no operation: ((p / 255) - mean) / std of the bytes as they are
    const int S = 5;
    uint8_t src[5 * 5 * 3];
    for (int i = 0; i < S * S * 3; i++) src[i] = (uint8_t)(i * 37 + 11);
    tk_img_jitter_job j = TK_IMG_JITTER_NONE;
    float *out = run_device(src, &j, 1, S, tk_failed_);
    int bad = 0;
    for (int i = 0; i < S * S * 3; i++) bad += out[i] != ((float)src[i] / 255.0f - kMean[i % 3]) / kStd[i % 3];
    CHECK_EQ_INT(bad, 0);
    free(out);
}

TK_TEST(jitter_job_of_draw) {
    // the job carries the host's (float) factors and torchvision's byte shift: -0.05 -> int(-12.75)
    // = -12 -> 244 as a uint8
    tk_img_jitter d = {{3, 0, 2, 1}, 1.1, 0.7, 1.3, -0.05};
    tk_img_jitter_job j = tk_img_jitter_job_of(&d);
    CHECK_EQ_INT(j.order[0], 3);
    CHECK_EQ_INT(j.order[3], 1);
    CHECK(j.brightness == (float)1.1 && j.contrast == (float)0.7 && j.saturation == (float)1.3);
    CHECK_EQ_INT(j.hue_shift, 244);
}

// The op's time at NVIDIA's per-GPU batch (114 images of 300 x 300), printed (the step it joins
// takes ~29 ms): nothing asserted.
typedef struct {
    uint8_t *src;
    tk_img_jitter_job *jobs;
    float *out;
    void *ws;
} timed;
static void run_timed(void *p) {
    timed *t = p;
    tk_err e = {0};
    tk_img_jitter_norm(gt_ctx_, t->src, t->jobs, 114, 300, kMean, kStd, t->out, t->ws, &e);
}
TK_TEST(jitter_time_batch_114) {
    const int n = 114, S = 300;
    const size_t px = (size_t)n * S * S * 3;
    timed t = {gt_dev(px), gt_dev((size_t)n * sizeof(tk_img_jitter_job)), gt_dev(px * 4),
               gt_dev(tk_img_jitter_ws_bytes(TK_BACKEND_CUDA, n, S))};
    uint8_t *src = gt_host(px);
    for (size_t i = 0; i < px; i++) src[i] = (uint8_t)gt_u32(i);
    tk_img_jitter_job *jobs = gt_host((size_t)n * sizeof *jobs);
    for (int k = 0; k < n; k++) // contrast second: both passes run
        jobs[k] = (tk_img_jitter_job){{TK_JITTER_HUE, TK_JITTER_CONTRAST, TK_JITTER_SATURATION, TK_JITTER_BRIGHTNESS},
                                      1.05f, 0.8f, 1.2f, k % 256};
    gt_up(t.src, src, px);
    gt_up(t.jobs, jobs, (size_t)n * sizeof *jobs);
    tk_err e = {0};
    CHECK_EQ_INT(gt_sync(&e), 0);
    printf("# img_jitter: 114 x 300 x 300: %.3f ms\n", gt_time_ms(run_timed, &t, 9));
    CHECK_EQ_INT(gt_sync(&e), 0);
    tk_free(gt_ctx_, t.src), tk_free(gt_ctx_, t.jobs), tk_free(gt_ctx_, t.out), tk_free(gt_ctx_, t.ws);
    free(src), free(jobs);
}
