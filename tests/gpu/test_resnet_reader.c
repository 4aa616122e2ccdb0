// ResNet's reader (lib/workloads/resnet/data.c) through both of the engine's input paths: host
// batches (the nvjpeg decoder copies its output back to the host) and device batches
// (rn_reader_device, workload.h reader_device: the images stay in device memory, the labels stay
// host bytes). The same decoder and kernels write both, so the batches must be equal bit for bit,
// for every step of two epochs (other orders, other crops); a reader that cannot write device
// memory (the cpu decoder, decoded records) says so and keeps writing host bytes.
#include <pthread.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/imagenet_prep.h"
#include "../unit/resnet_synth.h"
#include "core/progress.h"
#include "gpu_test.h"
#include "cupti_trace.h"
#include "cast2d.h"
#include "image/image.h"
#include "workloads/resnet/resnet.h"

static const char *tpath(const char *name) { return tk_test_path("test_resnet_reader", name); }

// 6 classes x 8 JPEGs of about 120 x 90 (a few grayscale, CMYK and PNG files among them, which
// prep converts), as prep imagenet writes them.
static const char *jpeg_shard(void) {
    static char out[512];
    if (out[0]) return out;
    const char *dir = tpath("syn");
    imagenet_synth_opts o = {.classes = 6, .train_per_class = 8, .val_per_class = 1, .width = 120, .height = 90,
                             .quality = 90, .seed = 11, .odd_fraction = 0.1, .threads = 2};
    imagenet_synth_stats st;
    imagenet_prep_stats ps;
    imagenet_scan_opts so = {0};
    tk_err e = {0};
    char train[600];
    snprintf(train, sizeof train, "%s/train", dir);
    snprintf(out, sizeof out, "%s", tpath("train.tks"));
    if (imagenet_synth(dir, &o, &st, NULL, NULL, &e) || imagenet_test_prep(train, &so, out, 2, NULL, &ps, &e))
        gt_die_("making the JPEG shard", &e);
    return out;
}

static rn_reader *open_reader(rn_config *cfg, const char *path, const char *decoder, int64_t B, int S) {
    char json[300];
    snprintf(json, sizeof json, "{\"model\": {\"layers\": [1], \"width\": 4, \"image_size\": %d, \"classes\": %d}, "
                                "\"data\": {\"decoder\": \"%s\"}}", S, S == 224 ? 1000 : 6, decoder);
    json_error_t je;
    json_t *root = json_loads(json, 0, &je);
    tk_run_cfg run = {.batch = B, .seed = 7};
    tk_err e = {0};
    if (!root || rn_config_parse(root, "cfg.json", &run, cfg, &e)) gt_die_("config", &e);
    json_decref(root);
    char *paths[1] = {(char *)path};
    void *r = NULL;
    if (rn_reader_open(cfg, 0, 1, paths, 1, &r, &e)) gt_die_("rn_reader_open", &e);
    return r;
}

static int have_nvjpeg(void) {
    char why[512];
    if (tk_img_decoder_nvjpeg.available(why, sizeof why)) return 1;
    printf("# SKIP nvjpeg not available: %s\n", why);
    return 0;
}

TK_TEST(device_batches_equal_host_batches) {
    if (!have_nvjpeg()) return;
    const char *path = jpeg_shard();
    const int64_t B = 16;
    const int S = 64;
    const size_t img_bytes = (size_t)B * S * S * 3;
    rn_config ch, cd;
    rn_reader *host = open_reader(&ch, path, "nvjpeg", B, S), *dev = open_reader(&cd, path, "nvjpeg", B, S);
    CHECK_EQ_INT(rn_reader_device(dev, 0), 1); // field 0, the images
    CHECK_EQ_INT(rn_reader_count(dev), 48);
    const int64_t spe = 48 / B;
    uint8_t *a = gt_host(img_bytes), *b = gt_host(img_bytes), *d_img;
    int32_t la[16], lb[16];
    if (cudaMalloc((void **)&d_img, img_bytes) != cudaSuccess) gt_die_("cudaMalloc", NULL);
    tk_err e = {0};
    int differ = 0, steps = 0;
    uint64_t sum = 0;
    for (int64_t step = 0; step < 2 * spe; step++, steps++) {
        memset(a, 0x5a, img_bytes);
        CHECK_EQ_INT(cudaMemset(d_img, 0xa5, img_bytes), cudaSuccess);
        CHECK_EQ_INT(rn_reader_batch(host, step, spe, (void *[]){a, la}, &e), 0);
        CHECK_EQ_INT(rn_reader_batch(dev, step, spe, (void *[]){d_img, lb}, &e), 0);
        CHECK_EQ_INT(cudaMemcpy(b, d_img, img_bytes, cudaMemcpyDeviceToHost), cudaSuccess);
        if (memcmp(a, b, img_bytes) != 0 || memcmp(la, lb, sizeof la) != 0) differ++;
        for (size_t i = 0; i < img_bytes; i++) sum += a[i];
    }
    printf("# table resnet-reader nvjpeg host vs device batches: %d steps of %lld images %dx%d, %d differ "
           "(pixel sum %llu)\n", steps, (long long)B, S, S, differ, (unsigned long long)sum);
    CHECK_EQ_INT(differ, 0);
    CHECK(sum > img_bytes); // images, not the fill patterns or zeros
    cudaFree(d_img);
    free(a), free(b);
    rn_reader_close(host), rn_reader_close(dev);
    rn_config_release(&ch), rn_config_release(&cd);
}

// The nvjpeg decoder gives each kind of image (chroma subsampling: grayscale and 4:4:4 ones
// among the 4:2:0 ones here) a sub-batch and nvJPEG state of its own; the bytes must be those of
// one state for all (TK_NVJPEG_KINDS=0), for every step of two epochs.
static uint8_t *decode_all(const char *path, int64_t B, int S, int64_t steps, const char *kinds) {
    const size_t img_bytes = (size_t)B * S * S * 3;
    uint8_t *all = gt_host(img_bytes * (size_t)steps);
    int32_t lab[16];
    tk_err e = {0};
    if (kinds) setenv("TK_NVJPEG_KINDS", kinds, 1); // read when the decoder opens (the first batch)
    rn_config c;
    rn_reader *r = open_reader(&c, path, "nvjpeg", B, S);
    for (int64_t step = 0; step < steps; step++)
        if (rn_reader_batch(r, step, steps / 2, (void *[]){all + img_bytes * (size_t)step, lab}, &e)) gt_die_("rn_reader_batch", &e);
    rn_reader_close(r);
    rn_config_release(&c);
    unsetenv("TK_NVJPEG_KINDS");
    return all;
}

TK_TEST(sub_batches_per_kind_equal_one_batch) {
    if (!have_nvjpeg()) return;
    const char *path = jpeg_shard();
    const int64_t B = 16, steps = 2 * 48 / 16;
    const int S = 64;
    const size_t bytes = (size_t)B * S * S * 3 * (size_t)steps;
    uint8_t *one = decode_all(path, B, S, steps, "0"), *per = decode_all(path, B, S, steps, NULL);
    size_t differ = 0;
    uint64_t sum = 0;
    for (size_t i = 0; i < bytes; i++) differ += one[i] != per[i], sum += per[i];
    printf("# table resnet-reader nvjpeg sub-batches per kind vs one batch: %lld steps, %zu bytes differ (pixel sum %llu)\n",
           (long long)steps, differ, (unsigned long long)sum);
    CHECK_EQ_INT((int)(differ > 0), 0);
    CHECK(sum > bytes); // images, not zeros
    free(one), free(per);
}

// The cpu decoder and decoded records write host bytes whatever the engine asks.
TK_TEST(host_only_readers_say_no) {
    const char *path = jpeg_shard();
    rn_config c1, c2;
    rn_reader *r = open_reader(&c1, path, "cpu", 8, 32);
    CHECK_EQ_INT(rn_reader_device(r, 0), 0);
    rn_reader_close(r);
    rn_config_release(&c1);
    tk_err e = {0};
    const char *dec = tpath("decoded.tks");
    if (rn_synth_write(dec, 0, 16, 40, 40, 6, 1, &e)) gt_die_("rn_synth_write", &e);
    r = open_reader(&c2, dec, "nvjpeg", 8, 32);
    CHECK_EQ_INT(rn_reader_device(r, 0), 0);
    rn_reader_close(r);
    rn_config_release(&c2);
}

// ---- the benchmark (TK_BENCH_SHARD=FILE, a prep imagenet shard): the loader threads' work alone ----
// T threads (TK_BENCH_THREADS, default "1 8"), each its own reader as the engine's loader threads
// have, decoding batches of 256 (224x224) into device memory, no training beside them: images/s
// over all, and each reader's time per batch by phase (tk_img_nvjpeg_stats), and without each
// reader's first and last batch. TK_TRACE=FILE also writes a CUPTI trace of the runs (cupti_trace.h;
// contrib/bench/cupti_summary.py FILE summarizes it per batch).
typedef struct {
    rn_config *cfg;
    const char *path;
    int w, nthreads, batches;
    int64_t spe;
    int rc;
    double ms[32]; // each batch's time in rn_reader_batch (the first holds nvJPEG's start-up)
} bench_arg;

static void *bench_thread(void *p) {
    bench_arg *a = p;
    char *paths[1] = {(char *)a->path};
    void *r = NULL;
    tk_err e = {0};
    uint8_t *img = NULL;
    int32_t lab[256];
    a->rc = rn_reader_open(a->cfg, 0, 1, paths, 1, &r, &e);
    if (!a->rc && rn_reader_device(r, 0) != 1) a->rc = -1;
    if (!a->rc && cudaMalloc((void **)&img, (size_t)256 * 224 * 224 * 3) != cudaSuccess) a->rc = -2;
    for (int i = 0; !a->rc && i < a->batches; i++) {
        char m[32];
        snprintf(m, sizeof m, "B %d %d", a->w, i);
        gt_trace_mark(m);
        const double t0 = tk_now();
        a->rc = rn_reader_batch(r, a->w + (int64_t)i * a->nthreads, a->spe, (void *[]){img, lab}, &e);
        if (i < 32) a->ms[i] = (tk_now() - t0) * 1e3;
        m[0] = 'E';
        gt_trace_mark(m);
    }
    if (a->rc > 0) printf("# thread %d: %s\n", a->w, e.what);
    cudaFree(img);
    rn_reader_close(r);
    return NULL;
}

// A load beside the readers (TK_BENCH_BUSY), to tell what slows nvJPEG beside a training step:
// "cast" keeps every SM and the memory busy with our own elementwise kernel (fp32 -> bf16 over
// 1 GiB, as the BN passes do), "spin" every SM with little memory traffic (a 4096^2 bf16 copy
// repeated: L2-resident), "castN" the cast over N MiB of fp32 (kernels of other lengths), all on a
// least-priority stream of their own context; "" none.
typedef struct {
    const char *mode;
    volatile int stop;
    unsigned long long calls;
} busy_arg;

static void *busy_thread(void *p) {
    busy_arg *b = p;
    tk_ctx *c = NULL;
    tk_err e = {0};
    void *src = NULL, *dst = NULL;
    int64_t rows = strcmp(b->mode, "spin") ? 1 << 18 : 1 << 12, cols = strcmp(b->mode, "spin") ? 1024 : 4096;
    if (strncmp(b->mode, "cast", 4) == 0 && atoi(b->mode + 4) > 0) rows = (int64_t)atoi(b->mode + 4) << 8; // castN: N MiB
    if (tk_ctx_create(&c, TK_BACKEND_CUDA, 0, &e) || tk_malloc(c, &src, (size_t)(rows * cols * 4), &e) ||
        tk_malloc(c, &dst, (size_t)(rows * cols * 2), &e)) {
        printf("# busy: %s\n", e.what);
        return NULL;
    }
    cudaMemset(src, 0, (size_t)(rows * cols * 4));
    gt_trace_mark("busy");
    while (!b->stop) {
        for (int i = 0; i < 8 && !tk_cast2d(c, src, TK_F32, cols, dst, TK_BF16, cols, rows, cols, &e); i++) b->calls++;
        if (tk_ctx_sync(c, &e)) break;
    }
    tk_free(c, src), tk_free(c, dst);
    tk_ctx_destroy(c);
    return NULL;
}

TK_TEST(bench_readers_alone) {
    const char *path = getenv("TK_BENCH_SHARD");
    if (!path || !*path) {
        printf("# TK_BENCH_SHARD=FILE (a prep imagenet shard) runs this benchmark\n");
        return;
    }
    if (!have_nvjpeg()) return;
    gt_trace_start(); // TK_TRACE=FILE: a CUPTI trace of the runs (cupti_trace.h)
    const char *tl = getenv("TK_BENCH_THREADS");
    char list[64];
    snprintf(list, sizeof list, "%s", tl && *tl ? tl : "1 8");
    for (char *tok = strtok(list, " "); tok; tok = strtok(NULL, " ")) {
        int T = atoi(tok), per = T == 1 ? 24 : T <= 4 ? 8 : T <= 8 ? 6 : 4;
        if (T < 1 || T > 32) continue;
        rn_config cfg;
        rn_reader *probe = open_reader(&cfg, path, "nvjpeg", 256, 224); // loads the shard once
        int64_t spe = (int64_t)rn_reader_count(probe) / 256;
        rn_reader_close(probe);
        pthread_t th[32], bt;
        bench_arg a[32];
        const char *bm = getenv("TK_BENCH_BUSY");
        busy_arg load = {.mode = bm && *bm ? bm : NULL};
        char m[64];
        snprintf(m, sizeof m, "run %d %s", T, load.mode ? load.mode : "nothing");
        gt_trace_mark(m);
        if (load.mode) pthread_create(&bt, NULL, busy_thread, &load), usleep(200000);
        double t0 = tk_now();
        for (int w = 0; w < T; w++) {
            a[w] = (bench_arg){.cfg = &cfg, .path = path, .w = w, .nthreads = T, .batches = per, .spe = spe};
            pthread_create(&th[w], NULL, bench_thread, &a[w]);
        }
        int bad = 0;
        for (int w = 0; w < T; w++) pthread_join(th[w], NULL), bad += a[w].rc != 0;
        double dt = tk_now() - t0;
        if (load.mode) load.stop = 1, pthread_join(bt, NULL);
        CHECK_EQ_INT(bad, 0);
        const rn_shared *sh = cfg.sh;
        double k = sh->dec_batches ? 1e3 / (double)sh->dec_batches : 0;
        // images/s: on the wall clock (decoders' start-up included), and from the readers' own
        // time in run() (per thread: the sum over the threads / T)
        double busy = (sh->dec_parse_s + sh->dec_submit_s + sh->dec_wait_s) / T;
        printf("# table resnet-reader bench: %2d readers, beside %s (%llu calls), pinned allocations %llu frees %llu\n", T,
               load.mode ? load.mode : "nothing", load.calls, (unsigned long long)sh->dec_pinned_allocs,
               (unsigned long long)sh->dec_pinned_frees);
        printf("# table resnet-reader bench: %2d readers, %3llu batches of 256: %6.0f images/s (wall), %6.0f "
               "(in run); per batch: parse %.1f ms, submit %.1f ms, wait %.1f ms; GPU spans: decode %.1f ms, "
               "resize %.1f ms\n", T, (unsigned long long)sh->dec_batches, (double)sh->dec_images / dt,
               busy > 0 ? (double)sh->dec_images / busy : 0.0, sh->dec_parse_s * k, sh->dec_submit_s * k,
               sh->dec_wait_s * k, sh->dec_decode_gpu_s * k, sh->dec_resize_gpu_s * k);
        // the steady state: neither a reader's first batch (nvJPEG's start-up, ~1-2 s beside a
        // busy GPU, which the averages above include) nor its last (which may overlap another
        // reader's close, whose frees wait for the device)
        double later[32 * 32], sum = 0;
        int nl = 0;
        for (int w = 0; w < T; w++)
            for (int i = 1; i < a[w].batches - 1 && i < 32; i++) later[nl++] = a[w].ms[i], sum += a[w].ms[i];
        for (int i = 1; i < nl; i++) // insertion sort, for the median
            for (int j = i; j > 0 && later[j - 1] > later[j]; j--) {
                double x = later[j];
                later[j] = later[j - 1], later[j - 1] = x;
            }
        if (nl)
            printf("# table resnet-reader bench: %2d readers, beside %s: each reader's batches but the first and last, %d: "
                   "mean %.1f ms, median %.1f ms per batch (in rn_reader_batch)\n",
                   T, load.mode ? load.mode : "nothing", nl, sum / nl, (later[(nl - 1) / 2] + later[nl / 2]) / 2);
        rn_config_release(&cfg);
        gt_trace_mark("end");
    }
    gt_trace_stop();
}

TK_TEST(zz_cleanup) { CHECK_EQ_INT(tk_test_rmdir(), 0); }
