// The ImageNet input pipeline alone (no training): .tks shards -> imagenet_loader -> batches of
// decoded, cropped, flipped, normalized NHWC images, timed. Built and run by
// contrib/bench/imagenet_pipeline.sh against build/libtrainkit.a.
//   imagenet_pipeline [--batch B] [--threads T] [--epochs E] [--eval] [--f32] [--window F]
//                     [--prefetch P] [--decoder cpu|nvjpeg|auto] [--no-dct] [--seed S] [--dump FILE] SHARD...
// Prints one JSON line: images, seconds (the epochs after the first, which warms the caches),
// images_per_s, cpu_seconds (user + system of the whole process over the same epochs: on a
// shared machine images_per_cpu_s says more than the wall clock), and a checksum of all the
// batches (the same for every thread count). A decoder writing device memory (nvjpeg) leaves
// its batches there, as training would use them: the checksum covers each epoch's first batch
// only (copied back: one batch an epoch).
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "core/progress.h"
#include "imagenet/imagenet.h"
#ifdef TK_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static double cpu_now(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)u.ru_utime.tv_sec + 1e-6 * u.ru_utime.tv_usec + (double)u.ru_stime.tv_sec + 1e-6 * u.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
    imagenet_loader_opts o = {.batch = 256, .prefetch = 3};
    int threads = 2, epochs = 2, eval = 0, f32 = 0, nodct = 0;
    uint64_t seed = 1;
    const char *dump = NULL, *decoder = "cpu";
    static const struct option lo[] = {{"batch", 1, 0, 'b'}, {"threads", 1, 0, 't'}, {"epochs", 1, 0, 'e'},
                                       {"eval", 0, 0, 'E'},  {"f32", 0, 0, 'f'},     {"window", 1, 0, 'w'},
                                       {"prefetch", 1, 0, 'p'}, {"decoder", 1, 0, 'd'}, {"no-dct", 0, 0, 'n'},
                                       {"seed", 1, 0, 's'},  {"dump", 1, 0, 'D'},    {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'b': o.batch = atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        case 'e': epochs = atoi(optarg); break;
        case 'E': eval = 1; break;
        case 'f': f32 = 1; break;
        case 'w': o.window_frames = (size_t)atol(optarg); break;
        case 'p': o.prefetch = atoi(optarg); break;
        case 'd': decoder = optarg; break;
        case 'n': nodct = 1; break;
        case 's': seed = strtoull(optarg, NULL, 10); break;
        case 'D': dump = optarg; break;
        default: fprintf(stderr, "usage: see the comment at the top of %s\n", __FILE__); return 2;
        }
    }
    if (optind >= argc || o.batch < 1 || threads < 1 || epochs < 1) {
        fprintf(stderr, "imagenet_pipeline: give shard files (and sane numbers)\n");
        return 2;
    }
    tk_img_transform_default(&o.t, eval ? TK_IMG_EVAL : TK_IMG_TRAIN);
    o.t.dtype = f32 ? TK_IMG_F32 : TK_IMG_BF16;
    o.t.seed = seed;
    if (nodct) o.t.dct_scale = 0;
    o.dopts.threads = threads;
    char note[600];
    if (!(o.decoder = tk_img_decoder_pick(decoder, note, sizeof note))) {
        fprintf(stderr, "imagenet_pipeline: no decoder '%s' (have: %s)\n", decoder, tk_img_decoder_names());
        return 2;
    }
    if (note[0]) fprintf(stderr, "imagenet_pipeline: note: %s\n", note);
    const int on_dev = o.decoder->out_on_device;
    imagenet_loader *L;
    tk_err e = {0};
    if (imagenet_loader_open(&L, argv + optind, argc - optind, &o, &e)) {
        fprintf(stderr, "imagenet_pipeline: %s: %s\n", e.where, e.what);
        return e.code;
    }
    size_t per = (size_t)o.t.out_w * o.t.out_h * 3 * (f32 ? 4 : 2);
    uint8_t *host = on_dev ? malloc(per * (size_t)o.batch) : NULL;
    uint64_t images = 0, sum = 0;
    double t0 = 0, c0 = 0;
    for (int ep = 0; ep < epochs; ep++) {
        if (ep == 1) t0 = tk_now(), c0 = cpu_now(), images = 0;
        if (imagenet_loader_epoch(L, (uint32_t)ep, &e)) break;
        imagenet_batch *b;
        while (imagenet_loader_next(L, &b, &e) == 0 && b) {
            const uint8_t *p = b->images; // a cheap checksum of the bytes
            if (on_dev) {
                p = NULL;
#ifdef TK_HAVE_CUDA
                if (b->index == 0 && host && cudaMemcpy(host, b->images, b->n * per, cudaMemcpyDeviceToHost) == cudaSuccess)
                    p = host;
#endif
            }
            for (size_t i = 0; p && i < b->n * per; i += 61) sum = sum * 31 + p[i];
            for (size_t i = 0; i < b->n; i++) sum = sum * 31 + (uint64_t)b->labels[i];
            if (dump && ep == 0 && b->index == 0 && p) {
                FILE *f = fopen(dump, "wb");
                if (f) {
                    fwrite(p, per, b->n, f);
                    fclose(f);
                }
            }
            images += b->n;
            imagenet_loader_done(L, b);
        }
        if (e.code) break;
    }
    double dt = epochs > 1 ? tk_now() - t0 : 0, dc = epochs > 1 ? cpu_now() - c0 : 0;
    if (e.code) {
        fprintf(stderr, "imagenet_pipeline: %s: %s\n", e.where, e.what);
        imagenet_loader_close(L);
        return e.code;
    }
    printf("{\"type\":\"pipeline\",\"decoder\":\"%s\",\"mode\":\"%s\",\"dtype\":\"%s\",\"threads\":%d,\"batch\":%d,\"records\":%llu,"
           "\"images\":%llu,\"seconds\":%.4f,\"images_per_s\":%.1f,\"cpu_seconds\":%.4f,\"images_per_cpu_s\":%.1f,"
           "\"checksum\":\"%016llx\"}\n",
           o.decoder->name, eval ? "eval" : "train", f32 ? "f32" : "bf16", threads, o.batch, (unsigned long long)imagenet_loader_records(L),
           (unsigned long long)images, dt, dt > 0 ? images / dt : 0.0, dc, dc > 0 ? images / dc : 0.0,
           (unsigned long long)sum);
    imagenet_loader_close(L);
    free(host);
    return 0;
}
