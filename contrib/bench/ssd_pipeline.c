// SSD300's host input pipeline alone (no training): prep coco records -> ssd_reader_batch (the
// reference's IoU crop, flip, resize to 300x300, colour jitter, normalisation; lib/workloads/ssd
// data.h) -> batches in host memory, timed. Built and run by contrib/bench/ssd_pipeline.sh
// against build/libtrainkit.a.
//   ssd_pipeline [--batch B] [--threads T] [--batches N] [--seed S] [--dct 0|1] [--device-jitter]
//                [--profile] TKS...
// --device-jitter: the loader's share of data.device_jitter (resized bytes and jitter jobs out;
// the jitter and the normalisation left to the device).
// Prints one JSON line: images, seconds (after one untimed warm-up batch), images_per_s,
// cpu_seconds (user + system of the process over the same batches: on a shared machine
// images_per_cpu_s is the per-core rate), and a checksum of the batches (the same for every
// thread count). --profile instead times the stages of one thread's sample, image by image over
// the same draws (the thread's CPU time): the header and crop choice, the JPEG decode of the crop's pixels, the resize
// (+ flip), the colour jitter and the normalisation, as ssd_sample runs them (decode_resize's
// DCT scale included), and prints each stage's microseconds per image.
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "image/codec.h"
#include "img_jitter_px.h"
#include "image/image.h"
#include "img_resize.h"
#include "workloads/ssd/data.h"

static double cpu_now(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec + 1e-6 * u.ru_stime.tv_usec;
}

static double clock_s(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * t.tv_nsec;
}
static double wall_now(void) { return clock_s(CLOCK_MONOTONIC); }
// The profile's clock: this thread's CPU time (on a shared machine the wall clock counts others' work)
static double thread_now(void) { return clock_s(CLOCK_THREAD_CPUTIME_ID); }

static void die(const char *what, const tk_err *e) {
    fprintf(stderr, "ssd_pipeline: %s: %s: %s\n", what, e->where, e->what);
    exit(1);
}

// Stage times of ssd_sample's work, image by image (one thread).
static void profile(const ssd_dataset *d, const ssd_data_opts *o, int n) {
    enum { HDR, DEC, RES, JIT, NORM, NS };
    static const char *name[NS] = {"header_crop", "decode", "resize", "jitter", "normalize"};
    double t[NS] = {0}, jt[4] = {0};
    const int S = o->size;
    uint8_t *img = malloc((size_t)S * S * 3), *px = NULL;
    float *tmp = NULL, *out = malloc((size_t)S * S * 3 * sizeof *out);
    size_t pxcap = 0, tmpcap = 0;
    long long dec_px = 0;
    int scaled = 0;
    tk_err e = {0};
    for (int k = 0; k < n; k++) {
        int64_t rec = k % ssd_dataset_count(d);
        ssd_record R;
        ssd_dataset_record(d, rec, &R);
        double t0 = thread_now();
        tk_jpeg_info info;
        if (tk_jpeg_info_read(R.jpeg, R.jpeg_size, &info, &e)) die("header", &e);
        float nb[4 * 256];
        int nbox = R.nbox < 256 ? R.nbox : 256;
        for (int i = 0; i < 4 * nbox; i++) nb[i] = (float)((double)R.boxes[i] / (i % 2 ? R.height : R.width));
        ssd_rng r;
        ssd_rng_init(&r, o->seed, 0, (uint32_t)rec, 0);
        int flip = ssd_rng_unit(&r) < 0.5;
        tk_img_jitter j;
        ssd_jitter_draw(&r, o, &j);
        ssd_crop c;
        ssd_rng_init(&r, o->seed, 0, (uint32_t)rec, 16);
        ssd_crop_choose(&r, nb, nbox, R.width, R.height, o->crop_tries, &c);
        tk_img_box_plan p;
        if (ssd_decode_plan(&c, info.width, info.height, o, &p, &e)) die("plan", &e);
        double t1 = thread_now();
        size_t stride = (size_t)(p.ax.hi - p.ax.lo) * 3, need = stride * (size_t)(p.ay.hi - p.ay.lo);
        if (need > pxcap) px = realloc(px, pxcap = need);
        need = (size_t)S * (size_t)(p.ax.hi - p.ax.lo) * 3;
        if (need > tmpcap) tmp = realloc(tmp, (tmpcap = need) * sizeof *tmp);
        if (tk_jpeg_decode(R.jpeg, R.jpeg_size, p.num, p.ax.lo, p.ay.lo, p.ax.hi - p.ax.lo, p.ay.hi - p.ay.lo, px,
                           stride, NULL, &e))
            die("decode", &e);
        dec_px += (long long)(p.ax.hi - p.ax.lo) * (p.ay.hi - p.ay.lo);
        scaled += p.num < 8;
        double t2 = thread_now();
        tk_img_rs_out ro = {.out_w = S, .out_h = S, .mean = {0, 0, 0}, .std = {1, 1, 1}, .dtype = TK_IMG_U8};
        tk_img_resample(px, p.ax.lo, p.ay.lo, stride, &p.ax, &p.ay, flip, &ro, tmp, img);
        tk_img_box_plan_free(&p);
        double t3 = thread_now();
        for (int q = 0; q < 4; q++) { // tk_img_jitter_apply, each operation timed
            double u = thread_now();
            switch (j.order[q]) {
            case TK_JITTER_BRIGHTNESS: tk_img_adjust_brightness(img, (size_t)S * S, j.brightness); break;
            case TK_JITTER_CONTRAST: tk_img_adjust_contrast(img, (size_t)S * S, j.contrast); break;
            case TK_JITTER_SATURATION: tk_img_adjust_saturation(img, (size_t)S * S, j.saturation); break;
            default: tk_img_adjust_hue(img, (size_t)S * S, j.hue); break;
            }
            jt[j.order[q]] += thread_now() - u;
        }
        double t4 = thread_now();
        ssd_normalize(img, S, o, out);
        double t5 = thread_now();
        t[HDR] += t1 - t0, t[DEC] += t2 - t1, t[RES] += t3 - t2, t[JIT] += t4 - t3, t[NORM] += t5 - t4;
    }
    double all = 0;
    printf("{\"type\":\"ssd_pipeline_profile\",\"images\":%d,\"dct\":%d,\"scaled_decodes\":%d,\"decoded_mpx_per_image\":%.3f",
           n, o->dct, scaled, dec_px / 1e6 / n);
    for (int i = 0; i < NS; i++) {
        printf(",\"%s_us\":%.1f", name[i], 1e6 * t[i] / n);
        all += t[i];
    }
    static const char *jn[4] = {"brightness", "contrast", "saturation", "hue"};
    for (int i = 0; i < 4; i++) printf(",\"jitter_%s_us\":%.1f", jn[i], 1e6 * jt[i] / n);
    printf(",\"total_us\":%.1f,\"images_per_s\":%.1f}\n", 1e6 * all / n, n / all);
    free(img), free(px), free(tmp), free(out);
}

int main(int argc, char **argv) {
    ssd_data_opts o;
    ssd_data_opts_default(&o);
    o.batch = 114, o.threads = 1, o.seed = 1;
    int batches = 8, prof = 0;
    static const struct option lo[] = {{"batch", 1, 0, 'b'},  {"threads", 1, 0, 't'}, {"batches", 1, 0, 'n'},
                                       {"seed", 1, 0, 's'},   {"dct", 1, 0, 'D'},  {"profile", 0, 0, 'p'},
                                       {"device-jitter", 0, 0, 'J'},
                                       {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'b': o.batch = atoi(optarg); break;
        case 't': o.threads = atoi(optarg); break;
        case 'n': batches = atoi(optarg); break;
        case 's': o.seed = strtoull(optarg, NULL, 10); break;
        case 'D': o.dct = atoi(optarg); break;
        case 'p': prof = 1; break;
        case 'J': o.device_jitter = 1; break;
        default: fprintf(stderr, "usage: ssd_pipeline [--batch B] [--threads T] [--batches N] [--dct 0|1] [--profile] TKS...\n"); return 2;
        }
    }
    if (optind >= argc || o.batch < 1 || batches < 1) {
        fprintf(stderr, "usage: ssd_pipeline [--batch B] [--threads T] [--batches N] [--dct 0|1] [--profile] TKS...\n");
        return 2;
    }
    tk_err e = {0};
    ssd_dataset *d;
    if (ssd_dataset_load(argv + optind, argc - optind, &d, &e)) die("load", &e);
    if (prof) {
        profile(d, &o, batches * o.batch);
        ssd_dataset_free(d);
        return 0;
    }
    ssd_reader *r;
    if (ssd_reader_open(&o, d, 0, 1, &r, &e)) die("reader", &e);
    const int B = o.batch, S = o.size, M = o.max_boxes;
    ssd_batch b = {.image = malloc((size_t)B * S * S * 3 * sizeof(float)),
                   .boxes = malloc((size_t)B * M * 4 * sizeof(float)),
                   .labels = malloc((size_t)B * M * sizeof(int32_t)),
                   .nbox = malloc((size_t)B * sizeof(int32_t)),
                   .image_id = malloc((size_t)B * sizeof(int64_t)),
                   .size = malloc((size_t)B * 2 * sizeof(int32_t))};
    if (o.device_jitter) { // the loader's part of data.device_jitter: bytes and jobs, no jitter
        b.image_u8 = malloc((size_t)B * S * S * 3);
        b.jobs = malloc((size_t)B * sizeof *b.jobs);
    }
    const int64_t spe = ssd_dataset_count(d) / B;
    if (ssd_reader_batch(r, 0, spe, &b, &e)) die("batch", &e); // warm-up (page cache, allocations)
    double sum = 0, w0 = wall_now(), c0 = cpu_now();
    for (int i = 1; i <= batches; i++) {
        if (ssd_reader_batch(r, i, spe, &b, &e)) die("batch", &e);
        for (size_t k = 0; k < (size_t)B * S * S * 3; k += 997) sum += o.device_jitter ? b.image_u8[k] : b.image[k];
    }
    double w = wall_now() - w0, cpu = cpu_now() - c0;
    printf("{\"type\":\"ssd_pipeline\",\"device_jitter\":%d,\"batch\":%d,\"threads\":%d,\"dct\":%d,\"images\":%d,\"seconds\":%.3f,"
           "\"images_per_s\":%.1f,\"cpu_seconds\":%.3f,\"images_per_cpu_s\":%.1f,\"checksum\":%.6e}\n",
           o.device_jitter, B, o.threads, o.dct, batches * B, w, batches * B / w, cpu, batches * B / cpu, sum);
    ssd_reader_close(r);
    ssd_dataset_free(d);
    free(b.image), free(b.image_u8), free(b.jobs), free(b.boxes), free(b.labels), free(b.nbox), free(b.image_id), free(b.size);
    return 0;
}
