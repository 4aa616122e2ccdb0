// The nvjpeg image decoder (lib/image/nvjpeg.c) against the CPU decoder (lib/image/cpu.c), the
// specification: the same batch through both, the difference measured per image in normalized
// units (1 level of 255 is about 0.017): synthetic JPEGs (smooth pictures with edges: 4:2:0,
// 4:4:4, grayscale, CMYK) and the fixtures of tests/data/image (progressive, restart markers,
// 4:2:2, CMYK, ...). With the CPU decoder at full size (dct_scale off) the two differ only by the
// JPEG decoders (nvJPEG's IDCT, chroma upsampling and color conversion against libjpeg-turbo's);
// the training default (dct_scale on) adds the CPU decoder's reduced-size decode. CMYK goes
// through libjpeg-turbo in both: equal bit for bit. The measured numbers are printed as
// "# table" lines (tests/gpu/RESULTS.md); the bounds below are the documented tolerance
// (trainkit(7)): measured on an H100 with nvJPEG 13.0.4's hardware backend and interpolated chroma
// upsampling, a max of 0.0164 and a mean under 1e-5; without the interpolation (nvJPEG's
// default) the 4:2:0/4:2:2 images differed by up to 1.46 (84 levels) at colour edges, which these
// bounds refuse.
#include <math.h>
#include <string.h>

#include "../unit/test_image.h"
#include "gpu_test.h"
#include "image/image.h"

#define NSYN 6

typedef struct {
    char name[64];
    uint8_t *data;
    size_t size;
} jpeg;

// A smooth picture with hard edges (a disc and stripes), w x h RGB.
static uint8_t *picture(int w, int h, uint32_t salt) {
    uint8_t *p = gt_host((size_t)w * h * 3);
    double cx = w * (0.3 + 0.4 * (salt % 7) / 7.0), cy = h * 0.5, r = 0.3 * (w < h ? w : h);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++) {
                double v = 128 + 90 * sin(x * (0.01 + 0.005 * c) + salt) * cos(y * 0.013 * (c + 1));
                if ((x - cx) * (x - cx) + (y - cy) * (y - cy) < r * r) v = (uint32_t)c == salt % 3 ? 230 : 30;
                if ((x / 16) % 9 == 0) v = 255 - v;
                p[((size_t)y * w + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
    return p;
}

static int load_set(jpeg *j) {
    int n = 0;
    tk_err e = {0};
    for (int k = 0; k < NSYN; k++) {
        int w = 500 - 37 * k, h = 375 + 21 * k;
        uint8_t *px = picture(w, h, (uint32_t)k);
        int rc;
        if (k == 4) {
            for (int i = 0; i < w * h; i++) px[i] = px[i * 3]; // gray
            rc = tk_jpeg_encode(px, w, h, 1, 90, 1, &j[n].data, &j[n].size, &e);
            snprintf(j[n].name, sizeof j[n].name, "synthetic gray %dx%d", w, h);
        } else if (k == 5) {
            rc = tk_jpeg_encode_cmyk(px, w, h, 90, &j[n].data, &j[n].size, &e);
            snprintf(j[n].name, sizeof j[n].name, "synthetic cmyk %dx%d", w, h);
        } else {
            rc = tk_jpeg_encode(px, w, h, 3, 90, k != 3, &j[n].data, &j[n].size, &e);
            snprintf(j[n].name, sizeof j[n].name, "synthetic %s %dx%d", k != 3 ? "4:2:0" : "4:4:4", w, h);
        }
        free(px);
        if (rc) gt_die_("encode", &e);
        n++;
    }
    static const char *fix[] = {"baseline_420", "baseline_422", "baseline_444", "cmyk", "gray", "progressive",
                                "restart", "tiny"};
    for (size_t k = 0; k < sizeof fix / sizeof *fix; k++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/image/%s.jpg", fix[k]);
        j[n].data = slurp(path, &j[n].size);
        if (!j[n].data || !j[n].size) continue;
        snprintf(j[n].name, sizeof j[n].name, "fixture %s", fix[k]);
        n++;
    }
    return n;
}

// Decodes the set as one batch with both decoders (f32), per-image max and mean |diff|.
static void compare(const char *label, int train, int dct, double tol_mean, double tol_max, int *tk_failed_) {
    jpeg set[NSYN + 16];
    int n = load_set(set);
    tk_img_transform t;
    tk_img_transform_default(&t, train ? TK_IMG_TRAIN : TK_IMG_EVAL);
    t.dct_scale = dct;
    t.seed = gt_u32(3);
    t.epoch = 2;
    tk_img_job jobs[NSYN + 16];
    for (int i = 0; i < n; i++) jobs[i] = (tk_img_job){set[i].data, set[i].size, (uint64_t)i * 1000 + 17};
    size_t per = (size_t)t.out_w * t.out_h * 3, bytes = per * (size_t)n * sizeof(float);
    float *a = gt_host(bytes), *b = gt_host(bytes);
    tk_err e = {0};
    tk_img_decoder *cd, *gd;
    tk_img_decoder_opts o = {.threads = 2};
    if (tk_img_decoder_cpu.open(&cd, &o, &e) || tk_img_decoder_cpu.run(cd, &t, jobs, (size_t)n, a, &e)) gt_die_("cpu decoder", &e);
    tk_img_decoder_cpu.close(cd);
    if (tk_img_decoder_nvjpeg.open(&gd, &o, &e)) gt_die_("nvjpeg decoder", &e);
    printf("# %s\n", tk_img_nvjpeg_describe(gd));
    void *dev = tk_img_decoder_nvjpeg.alloc_out(gd, bytes);
    if (!dev) gt_die_("alloc_out", NULL);
    if (tk_img_decoder_nvjpeg.run(gd, &t, jobs, (size_t)n, dev, &e)) gt_die_("nvjpeg run", &e);
    if (cudaMemcpy(b, dev, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) gt_die_("copy back", NULL);
    tk_img_decoder_nvjpeg.free_out(gd, dev);
    tk_img_decoder_nvjpeg.close(gd);
    double all_max = 0, all_sum = 0;
    for (int i = 0; i < n; i++) {
        double mx = 0, sum = 0;
        for (size_t k = 0; k < per; k++) {
            double d = fabs((double)a[i * per + k] - b[i * per + k]);
            if (!(d == d)) d = INFINITY;
            mx = d > mx ? d : mx;
            sum += d;
        }
        printf("# table nvjpeg-vs-cpu %s %-28s max %.4f mean %.2e (levels of 255: max %.1f mean %.2e)\n", label,
               set[i].name, mx, sum / per, mx * 0.226 * 255, sum / per * 0.226 * 255);
        if (!dct && strstr(set[i].name, "cmyk")) CHECK(mx == 0); // libjpeg-turbo on both sides, full size
        all_max = mx > all_max ? mx : all_max;
        all_sum += sum;
    }
    printf("# table nvjpeg-vs-cpu %s all %d images: max %.4f mean %.2e\n", label, n, all_max, all_sum / (per * n));
    CHECK(all_sum / (per * n) <= tol_mean);
    CHECK(all_max <= tol_max);
    for (int i = 0; i < n; i++) free(set[i].data);
    free(a), free(b);
}

static int have_nvjpeg(void) {
    char why[512];
    if (tk_img_decoder_nvjpeg.available(why, sizeof why)) return 1;
    printf("# SKIP nvjpeg not available: %s\n", why);
    return 0;
}

TK_TEST(nvjpeg_matches_cpu_full_size) {
    if (!have_nvjpeg()) return;
    compare("train, cpu at full size", 1, 0, 1e-3, 0.05, tk_failed_);
    compare("eval, cpu at full size", 0, 0, 1e-3, 0.05, tk_failed_);
}

TK_TEST(nvjpeg_against_cpu_dct_scaled) {
    if (!have_nvjpeg()) return;
    compare("train, cpu dct-scaled (default)", 1, 1, 0.05, 1.0, tk_failed_);
}

TK_TEST(nvjpeg_bad_jpeg_is_data_error) {
    if (!have_nvjpeg()) return;
    static const uint8_t junk[] = {0xff, 0xd8, 0xff, 0xe0, 0, 4, 'x', 'y', 0xff, 0xd9};
    tk_img_job j = {junk, sizeof junk, 42};
    tk_img_transform t;
    tk_img_transform_default(&t, TK_IMG_TRAIN);
    tk_img_decoder *d;
    tk_err e = {0};
    tk_img_decoder_opts o = {.threads = 1, .host_out = 1};
    if (tk_img_decoder_nvjpeg.open(&d, &o, &e)) gt_die_("nvjpeg decoder", &e);
    float *out = gt_host((size_t)224 * 224 * 3 * 4);
    CHECK_EQ_INT(tk_img_decoder_nvjpeg.run(d, &t, &j, 1, out, &e), TK_EDATA);
    CHECK(strstr(e.where, "sample 42") != NULL);
    tk_img_decoder_nvjpeg.close(d);
    free(out);
}
