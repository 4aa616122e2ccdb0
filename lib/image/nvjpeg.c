// The nvJPEG image decoder (image.h): a batch's JPEGs decoded on the GPU by nvJPEG's batched
// decoder (the hardware JPEG engines of an A100/H100 where nvjpegCreateEx gives the hardware
// backend, else its default GPU-assisted backend), then cropped, resized, flipped and normalized
// by our kernel (kernels/img_resize.h) into NHWC device memory.
//
// Specification: the CPU decoder (cpu.c) with the same plan (tk_img_plan: the same crop and flip
// for the same (seed, epoch, sample)) and the same resampling, bit for bit, from the full-size
// image. Two differences remain, documented in man/man7/trainkit.7 and measured by
// tests/gpu/test_nvjpeg.c: nvJPEG's decode differs from libjpeg-turbo's by under one level of 255
// on chroma-subsampled images (with interpolated chroma upsampling, asked for below; 84 levels
// at colour edges without it), and the CPU decoder decodes training crops at a DCT scale (1/2,
// 1/4, 1/8) where the crop allows, which the GPU does not (it decodes at full size).
// Images the GPU path does not take go through libjpeg-turbo on the CPU (the region the crop
// reads, at full size) and are uploaded: CMYK/YCCK (the CPU decoder's TensorFlow conversion),
// and with the hardware backend what nvjpegDecodeBatchedSupported refuses (progressive, ...).
//
// libnvjpeg is opened at run time (dlopen $TK_NVJPEG_LIB, else libnvjpeg.so.13, .so.12 or .so on
// the library path, else /usr/local/cuda/lib64/libnvjpeg.so.13), so binaries built with the
// headers run where it is absent: the decoder then says it is not available and
// tk_img_decoder_pick falls back to the CPU decoder.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "image/codec.h"
#include "image/image.h"

#if defined(TK_HAVE_CUDA) && defined(TK_HAVE_NVJPEG)

#include <dlfcn.h>
#include <errno.h>
#include <omp.h>
#include <pthread.h>

#include <cuda_runtime_api.h>
#include <library_types.h>
#include TK_NVJPEG_H

#include "gpu/gpu.h"
#include "img_resize.h"

typedef struct {
    nvjpegStatus_t (*CreateEx)(nvjpegBackend_t, nvjpegDevAllocator_t *, nvjpegPinnedAllocator_t *, unsigned int,
                               nvjpegHandle_t *);
    nvjpegStatus_t (*CreateExV2)(nvjpegBackend_t, nvjpegDevAllocatorV2_t *, nvjpegPinnedAllocatorV2_t *, unsigned int,
                                 nvjpegHandle_t *); // NULL in libraries before it
    nvjpegStatus_t (*Destroy)(nvjpegHandle_t);
    nvjpegStatus_t (*GetProperty)(libraryPropertyType, int *);
    nvjpegStatus_t (*JpegStateCreate)(nvjpegHandle_t, nvjpegJpegState_t *);
    nvjpegStatus_t (*JpegStateDestroy)(nvjpegJpegState_t);
    nvjpegStatus_t (*DecodeBatchedInitialize)(nvjpegHandle_t, nvjpegJpegState_t, int, int, nvjpegOutputFormat_t);
    nvjpegStatus_t (*DecodeBatched)(nvjpegHandle_t, nvjpegJpegState_t, const unsigned char *const *, const size_t *,
                                    nvjpegImage_t *, cudaStream_t);
    nvjpegStatus_t (*JpegStreamCreate)(nvjpegHandle_t, nvjpegJpegStream_t *);
    nvjpegStatus_t (*JpegStreamDestroy)(nvjpegJpegStream_t);
    nvjpegStatus_t (*JpegStreamParse)(nvjpegHandle_t, const unsigned char *, size_t, int, int, nvjpegJpegStream_t);
    nvjpegStatus_t (*DecodeBatchedSupported)(nvjpegHandle_t, nvjpegJpegStream_t, int *);
    nvjpegStatus_t (*DecodeBatchedPreAllocate)(nvjpegHandle_t, nvjpegJpegState_t, int, int, int,
                                               nvjpegChromaSubsampling_t, nvjpegOutputFormat_t); // NULL before it
    nvjpegStatus_t (*JpegStreamGetChromaSubsampling)(nvjpegJpegStream_t, nvjpegChromaSubsampling_t *); // or NULL
} nj_api;

static nj_api api;
static int api_ok;
static char load_msg[512];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
    const char *names[] = {getenv("TK_NVJPEG_LIB"), "libnvjpeg.so.13", "libnvjpeg.so.12", "libnvjpeg.so",
                           "/usr/local/cuda/lib64/libnvjpeg.so.13"}; // the toolkit's, off the library path
    void *l = NULL;
    const char *used = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !l; i++)
        if (names[i] && *names[i] && (l = dlopen(names[i], RTLD_NOW | RTLD_LOCAL))) used = names[i];
    if (!l) {
        snprintf(load_msg, sizeof load_msg, "libnvjpeg.so.13 not found: %s", dlerror());
        return;
    }
    nj_api a;
#define SYM(field, name)                                                                                    \
    if (!(*(void **)&a.field = dlsym(l, name))) {                                                          \
        snprintf(load_msg, sizeof load_msg, "%s lacks %s", used, name);                                     \
        return;                                                                                             \
    }
    SYM(CreateEx, "nvjpegCreateEx");
    SYM(Destroy, "nvjpegDestroy");
    SYM(GetProperty, "nvjpegGetProperty");
    SYM(JpegStateCreate, "nvjpegJpegStateCreate");
    SYM(JpegStateDestroy, "nvjpegJpegStateDestroy");
    SYM(DecodeBatchedInitialize, "nvjpegDecodeBatchedInitialize");
    SYM(DecodeBatched, "nvjpegDecodeBatched");
    SYM(JpegStreamCreate, "nvjpegJpegStreamCreate");
    SYM(JpegStreamDestroy, "nvjpegJpegStreamDestroy");
    SYM(JpegStreamParse, "nvjpegJpegStreamParse");
    SYM(DecodeBatchedSupported, "nvjpegDecodeBatchedSupported");
#undef SYM
    *(void **)&a.CreateExV2 = dlsym(l, "nvjpegCreateExV2");
    *(void **)&a.DecodeBatchedPreAllocate = dlsym(l, "nvjpegDecodeBatchedPreAllocate");
    *(void **)&a.JpegStreamGetChromaSubsampling = dlsym(l, "nvjpegJpegStreamGetChromaSubsampling");
    int maj = 0, min = 0, pat = 0;
    a.GetProperty(MAJOR_VERSION, &maj);
    a.GetProperty(MINOR_VERSION, &min);
    a.GetProperty(PATCH_LEVEL, &pat);
    snprintf(load_msg, sizeof load_msg, "nvJPEG %d.%d.%d (%s)", maj, min, pat, used);
    api = a;
    api_ok = 1;
}

static int nj_available(char *why, size_t n) {
    if (!tk_img_have_jpeg()) {
        snprintf(why, n, "built without libjpeg-turbo, which reads the headers");
        return 0;
    }
    if (tk_cuda_device_count() < 1) {
        snprintf(why, n, "no CUDA device");
        return 0;
    }
    pthread_once(&load_once, load);
    if (!api_ok) snprintf(why, n, "%s", load_msg);
    return api_ok;
}

static const char *nj_status(nvjpegStatus_t s) {
    static const char *const names[] = {"success", "not initialized", "invalid parameter", "bad JPEG",
                                        "JPEG not supported", "allocator failure", "execution failed",
                                        "architecture mismatch", "internal error", "implementation not supported",
                                        "incomplete bitstream"};
    return (unsigned)s < sizeof names / sizeof *names ? names[s] : "unknown status";
}

static int nj_fail(tk_err *e, nvjpegStatus_t s, const char *what) {
    tk_err_set(e, TK_EDEVICE, "nvJPEG: %s: %s (status %d)", what, nj_status(s), (int)s);
    return tk_err_lib(e, "nvjpeg", (int)s);
}

static int cu_fail(tk_err *e, cudaError_t s, const char *what) {
    tk_err_set(e, TK_EDEVICE, "nvjpeg decoder: %s: %s", what, cudaGetErrorString(s));
    return tk_err_lib(e, "cuda", (int)s);
}
#define CU(call, what)                                                                                      \
    do {                                                                                                    \
        cudaError_t st_ = (call);                                                                           \
        if (st_ != cudaSuccess) return cu_fail(e, st_, what);                                               \
    } while (0)

// One nvJPEG state per kind of image (its chroma subsampling: nvJPEG's 8, and unknown), each
// given its own sub-batch: with one state for all, nvJPEG 13's hardware path reallocates its
// colour-conversion buffers (4 cuMemFree calls, each waiting for the whole device) whenever an
// image of another kind (grayscale, 4:4:4 among 4:2:0 ones) takes a slot of its pipeline, and
// again when the slot returns to the usual kind (contrib/bench/NOTES.md, the CUPTI traces).
#define NJ_KINDS 9
typedef struct {
    nvjpegJpegState_t st;
    int init_n;              // the batch size nvjpegDecodeBatchedInitialize was given
    int pre_n, pre_w, pre_h; // what nvjpegDecodeBatchedPreAllocate was given (0: not called)
} nj_state;

struct tk_img_decoder {
    tk_ctx *ctx;
    int device, threads, host_out, hw;
    int prio;                    // the stream has the device's greatest priority
    int async;                   // stream-ordered device allocations (nvjpegCreateExV2)
    unsigned long long n_alloc, n_free; // nvJPEG's device allocations and frees (async)
    unsigned long long n_pin_alloc, n_pin_free; // its pinned host ones (cudaFreeHost synchronizes)
    tk_img_decoder_stats stats;  // run()'s phases
    cudaEvent_t ev[3];           // timed: before nvJPEG's decode, before the resize, after it
    cudaEvent_t done;            // the batch's end, waited for without spinning (blocking sync)
    nvjpegHandle_t h;
    nj_state ks[NJ_KINDS];       // per kind of image (ks[0] for all where kinds is 1)
    int kinds;                   // NJ_KINDS, or 1 (TK_NVJPEG_KINDS=0, no hardware backend)
    nvjpegJpegStream_t *js;      // one per thread
    size_t ncap;                 // per-image host arrays below, for ncap images
    tk_jpeg_info *info;
    tk_img_geom *geom;
    int *gpu;                    // 1: decoded by nvJPEG, else by libjpeg-turbo
    size_t *off;                 // its pixels' byte offset in px (CPU images: in stage too)
    const unsigned char **data;
    size_t *len;
    nvjpegImage_t *dst;
    tk_img_rs_job *rs;
    uint8_t *kind;               // its nj_state
    uint64_t *ord;               // nvJPEG's batch: kind << 32 | the image's index
    // device (and pinned) buffers, grown as needed
    uint8_t *px;
    size_t px_cap;
    uint8_t *stage;
    size_t stage_cap;
    float *tmp;
    size_t tmp_cap;
    void *ws;
    size_t ws_cap;
    tk_img_rs_job *rs_d;
    size_t rs_cap;
    void *out;                   // host_out: the device output
    size_t out_cap;
};

// nvJPEG's device memory, stream-ordered (cudaMallocAsync / cudaFreeAsync on the stream nvJPEG
// names): buffers it grows while a training step runs on the device cost no device-wide
// synchronization, as cudaFree (the default allocator) does. Counted, for the describe line.
static int dev_malloc_async(void *ctx, void **p, size_t n, cudaStream_t s) {
    tk_img_decoder *d = ctx;
    d->n_alloc++;
    return cudaMallocAsync(p, n ? n : 1, s) == cudaSuccess ? 0 : 1;
}

static int dev_free_async(void *ctx, void *p, size_t n, cudaStream_t s) {
    tk_img_decoder *d = ctx;
    (void)n;
    d->n_free++;
    return p && cudaFreeAsync(p, s) != cudaSuccess;
}

static int pinned_malloc(void *ctx, void **p, size_t n, cudaStream_t s) {
    tk_img_decoder *d = ctx;
    (void)s;
    d->n_pin_alloc++;
    return cudaMallocHost(p, n ? n : 1) == cudaSuccess ? 0 : 1;
}

static int pinned_free(void *ctx, void *p, size_t n, cudaStream_t s) {
    tk_img_decoder *d = ctx;
    (void)n;
    if (!p) return 0;
    d->n_pin_free++;
    if (cudaStreamSynchronize(s) != cudaSuccess) return 1; // its last use is queued on s
    return cudaFreeHost(p) != cudaSuccess;
}

static nvjpegStatus_t create(tk_img_decoder *d, nvjpegBackend_t b, unsigned flags) {
    if (!d->async) return api.CreateEx(b, NULL, NULL, flags, &d->h);
    nvjpegDevAllocatorV2_t da = {.dev_malloc = dev_malloc_async, .dev_free = dev_free_async, .dev_ctx = d};
    nvjpegPinnedAllocatorV2_t pa = {.pinned_malloc = pinned_malloc, .pinned_free = pinned_free, .pinned_ctx = d};
    return api.CreateExV2(b, &da, &pa, flags, &d->h);
}

// The decoder's kernels (nvJPEG's and the resize) on a stream of the device's greatest priority:
// a batch decoded beside a training step gets SMs as the step's blocks retire, not after its
// kernels. TK_NVJPEG_PRIORITY=0 keeps the default (least) priority.
static int priority_stream(tk_img_decoder *d, tk_err *e) {
    const char *v = getenv("TK_NVJPEG_PRIORITY");
    if (v && strcmp(v, "0") == 0) return 0;
    int least = 0, greatest = 0;
    cudaStream_t s;
    CU(cudaDeviceGetStreamPriorityRange(&least, &greatest), "cannot read the stream priorities");
    CU(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest), "cannot create a stream");
    cudaStreamDestroy((cudaStream_t)d->ctx->stream[TK_STREAM_COMPUTE]);
    d->ctx->stream[TK_STREAM_COMPUTE] = s;
    d->prio = 1;
    return 0;
}

static void nj_close(tk_img_decoder *d) {
    if (!d) return;
    if (d->ctx) cudaSetDevice(d->device);
    if (d->ctx && d->ctx->stream[TK_STREAM_COMPUTE]) cudaStreamSynchronize((cudaStream_t)d->ctx->stream[TK_STREAM_COMPUTE]);
    for (int i = 0; i < 3; i++)
        if (d->ev[i]) cudaEventDestroy(d->ev[i]);
    if (d->done) cudaEventDestroy(d->done);
    for (int i = 0; d->js && i < d->threads; i++)
        if (d->js[i]) api.JpegStreamDestroy(d->js[i]);
    free(d->js);
    for (int k = 0; k < NJ_KINDS; k++)
        if (d->ks[k].st) api.JpegStateDestroy(d->ks[k].st);
    if (d->h) api.Destroy(d->h);
    cudaFree(d->px);
    cudaFreeHost(d->stage);
    cudaFree(d->tmp);
    cudaFree(d->ws);
    cudaFree(d->rs_d);
    cudaFree(d->out); // (cudaFree takes stream-ordered allocations too, after the synchronization above)
    free(d->info), free(d->geom), free(d->gpu), free(d->off), free(d->data), free(d->len), free(d->dst), free(d->rs), free(d->ord), free(d->kind);
    tk_ctx_destroy(d->ctx);
    free(d);
}

static int nj_open(tk_img_decoder **dp, const tk_img_decoder_opts *o, tk_err *e) {
    *dp = NULL;
    char why[512];
    if (!nj_available(why, sizeof why)) {
        tk_err_set(e, TK_EDEVICE, "the nvjpeg image decoder is not available: %s", why);
        if (strstr(why, "libnvjpeg"))
            return tk_err_hint(e, "install the nvidia-nvjpeg wheel (contrib/setup-deps.sh) or put libnvjpeg.so.13 on "
                                  "LD_LIBRARY_PATH (or name it in TK_NVJPEG_LIB); data.decoder \"auto\" falls back to "
                                  "the cpu decoder");
        return tk_err_hint(e, "data.decoder \"auto\" falls back to the cpu decoder");
    }
    tk_img_decoder *d = calloc(1, sizeof *d);
    if (!d) return tk_err_errno(e, ENOMEM, "out of memory");
    d->device = o ? o->device : 0;
    d->threads = o && o->threads > 0 ? o->threads : 1;
    d->host_out = o ? o->host_out : 0;
    int rc = tk_ctx_create(&d->ctx, TK_BACKEND_CUDA, d->device, e);
    if (!rc) rc = priority_stream(d, e);
    for (int i = 0; !rc && i < 3; i++)
        if (cudaEventCreate(&d->ev[i]) != cudaSuccess) d->ev[i] = NULL, rc = tk_err_set(e, TK_EDEVICE, "cannot create an event");
    if (!rc && cudaEventCreateWithFlags(&d->done, cudaEventBlockingSync | cudaEventDisableTiming) != cudaSuccess)
        d->done = NULL, rc = tk_err_set(e, TK_EDEVICE, "cannot create an event");
    // Stream-ordered allocations where the library has nvjpegCreateExV2, unless
    // TK_NVJPEG_ALLOC=default (nvJPEG's own cudaMalloc / cudaFree).
    const char *al = getenv("TK_NVJPEG_ALLOC");
    d->async = api.CreateExV2 != NULL && !(al && strcmp(al, "default") == 0);
    if (!rc && d->async) { // the device's pool keeps freed memory for the next batches
        cudaMemPool_t pool;
        uint64_t keep = UINT64_MAX;
        if (cudaDeviceGetDefaultMemPool(&pool, d->device) == cudaSuccess)
            cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    nvjpegStatus_t s = NVJPEG_STATUS_SUCCESS;
    if (!rc) {
        // The hardware engines where there are some; else the default backend (GPU-assisted
        // Huffman decoding for batches); both asked for interpolated chroma upsampling (closer
        // to libjpeg-turbo's "fancy" upsampling than replication), the hardware one without it
        // where it refuses the flag; each with stream-ordered allocations first, then without.
        const unsigned interp = NVJPEG_FLAGS_UPSAMPLING_WITH_INTERPOLATION;
        const struct { nvjpegBackend_t b; unsigned flags; } tries[] = {
            {NVJPEG_BACKEND_HARDWARE, interp}, {NVJPEG_BACKEND_HARDWARE, NVJPEG_FLAGS_DEFAULT},
            {NVJPEG_BACKEND_DEFAULT, interp}};
        const int async = d->async;
        s = NVJPEG_STATUS_NOT_INITIALIZED;
        for (size_t i = 0; i < sizeof tries / sizeof *tries && s != NVJPEG_STATUS_SUCCESS; i++) {
            d->hw = tries[i].b == NVJPEG_BACKEND_HARDWARE;
            for (d->async = async; d->async >= 0 && s != NVJPEG_STATUS_SUCCESS; d->async--)
                s = create(d, tries[i].b, tries[i].flags);
            d->async++; // the one that worked
        }
        if (s != NVJPEG_STATUS_SUCCESS) d->h = NULL, d->hw = 0, rc = nj_fail(e, s, "cannot create a handle");
    }
    if (!rc && (s = api.JpegStateCreate(d->h, &d->ks[0].st)) != NVJPEG_STATUS_SUCCESS)
        d->ks[0].st = NULL, rc = nj_fail(e, s, "cannot create a state");
    const char *kv = getenv("TK_NVJPEG_KINDS"); // 0: one state for all kinds of image
    d->kinds = d->hw && api.JpegStreamGetChromaSubsampling && !(kv && strcmp(kv, "0") == 0) ? NJ_KINDS : 1;
    if (!rc && !(d->js = calloc((size_t)d->threads, sizeof *d->js))) rc = tk_err_errno(e, ENOMEM, "out of memory");
    for (int i = 0; !rc && i < d->threads; i++)
        if ((s = api.JpegStreamCreate(d->h, &d->js[i])) != NVJPEG_STATUS_SUCCESS) rc = nj_fail(e, s, "cannot create a stream");
    if (rc) {
        nj_close(d);
        return rc;
    }
    *dp = d;
    return 0;
}

// Grows a device (kind 0) or pinned host (kind 1) buffer to at least need bytes. Device buffers
// are stream-ordered on the decoder's stream s (no device-wide synchronization when a batch needs
// more while a training step runs).
static int grow_dev(void **p, size_t *cap, size_t need, int pinned, cudaStream_t s, tk_err *e) {
    if (need <= *cap) return 0;
    size_t n = need + need / 4 + 4096;
    if (pinned) cudaFreeHost(*p);
    else if (*p) cudaFreeAsync(*p, s);
    *p = NULL;
    *cap = 0;
    cudaError_t st = pinned ? cudaMallocHost(p, n) : cudaMallocAsync(p, n, s);
    if (st != cudaSuccess) {
        *p = NULL;
        return cu_fail(e, st, pinned ? "out of pinned host memory" : "out of device memory");
    }
    *cap = n;
    return 0;
}

static int grow_host(tk_img_decoder *d, size_t n, tk_err *e) {
    if (n <= d->ncap) return 0;
#define G(f) if (!(d->f = realloc(d->f, n * sizeof *d->f))) return tk_err_errno(e, ENOMEM, "out of memory")
    G(info);
    G(geom);
    G(gpu);
    G(off);
    G(data);
    G(len);
    G(dst);
    G(rs);
    G(ord);
    G(kind);
#undef G
    d->ncap = n;
    return 0;
}

// The hardware backend's own buffers, allocated once per state for cnt images (a whole batch)
// (nvjpegDecodeBatchedPreAllocate, the largest image of the first sub-batch of its kind). Without
// it nvJPEG 13 grows them while decoding and frees the old ones with cuMemFree, which waits for
// all the work on the device (a training step's kernels too) and blocks every other thread's
// CUDA calls meanwhile (CUPTI traces, contrib/bench/NOTES.md: ~90 frees in a decoder's first
// batch of 256, each 1-6 ms beside a busy GPU). TK_NVJPEG_PREALLOC=0 skips it.
static int preallocate(tk_img_decoder *d, nj_state *ks, int kind, size_t k0, size_t k1, int cnt,
                       nvjpegOutputFormat_t fmt, tk_err *e) {
    if (!d->hw || !api.DecodeBatchedPreAllocate || cnt <= ks->pre_n) return 0;
    const char *v = getenv("TK_NVJPEG_PREALLOC");
    if (v && strcmp(v, "0") == 0) return 0;
    int w = ks->pre_w, h = ks->pre_h;
    for (size_t k = k0; k < k1; k++) {
        const size_t i = (size_t)(d->ord[k] & 0xffffffff);
        if (d->info[i].width > w) w = d->info[i].width;
        if (d->info[i].height > h) h = d->info[i].height;
    }
    const nvjpegChromaSubsampling_t css = d->kinds > 1 && kind < 8 ? (nvjpegChromaSubsampling_t)kind : NVJPEG_CSS_444;
    nvjpegStatus_t s = api.DecodeBatchedPreAllocate(d->h, ks->st, cnt, w, h, css, fmt);
    if (s != NVJPEG_STATUS_SUCCESS) return nj_fail(e, s, "cannot pre-allocate the hardware decoder's buffers");
    ks->pre_n = cnt, ks->pre_w = w, ks->pre_h = h;
    ks->init_n = 0; // initialize the batch again after it
    return 0;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static int sample_err(tk_err *e, const tk_img_job *j) { return tk_err_where(e, "sample %llu", (unsigned long long)j->sample); }

static int nj_run(tk_img_decoder *d, const tk_img_transform *t, const tk_img_job *jobs, size_t n, void *out,
                  tk_err *e) {
    if (n == 0) return 0;
    if (n > 65535) return tk_err_set(e, TK_EINTERNAL, "nvjpeg decoder: batches of at most 65535 images");
    TRY(grow_host(d, n, e));
    CU(cudaSetDevice(d->device), "cannot select the device");
    cudaStream_t stream = (cudaStream_t)d->ctx->stream[TK_STREAM_COMPUTE];
    const double t0 = tk_now();
    // Headers (our reader, as the CPU decoder), plans, and which images nvJPEG takes, over the
    // threads (one nvJPEG stream parser each); the first bad image names the error.
    long long bad = -1;
#pragma omp parallel for num_threads(d->threads) schedule(dynamic, 8)
    for (long long i = 0; i < (long long)n; i++) {
        tk_err te;
        if (tk_jpeg_info_read(jobs[i].data, jobs[i].size, &d->info[i], &te)) {
#pragma omp critical(tk_img_nvjpeg_err)
            if (bad < 0 || i < bad) bad = i;
            continue;
        }
        tk_img_plan(t, d->info[i].width, d->info[i].height, jobs[i].sample, &d->geom[i]);
        int ok = d->info[i].components != 4;
        if (ok && d->hw) {
            nvjpegJpegStream_t js = d->js[omp_get_thread_num()];
            nvjpegStatus_t s = api.JpegStreamParse(d->h, jobs[i].data, jobs[i].size, 0, 0, js);
            int unsupported = 1;
            if (s == NVJPEG_STATUS_SUCCESS) s = api.DecodeBatchedSupported(d->h, js, &unsupported);
            ok = s == NVJPEG_STATUS_SUCCESS && unsupported == 0;
            nvjpegChromaSubsampling_t css = NVJPEG_CSS_UNKNOWN;
            if (ok && d->kinds > 1 && api.JpegStreamGetChromaSubsampling(js, &css) != NVJPEG_STATUS_SUCCESS)
                css = NVJPEG_CSS_UNKNOWN;
            d->kind[i] = d->kinds == 1 ? 0 : css >= 0 && css < 8 ? (uint8_t)css : 8;
        } else
            d->kind[i] = 0;
        d->gpu[i] = ok;
    }
    if (bad >= 0) {
        tk_jpeg_info_read(jobs[bad].data, jobs[bad].size, &d->info[bad], e); // its message again
        return sample_err(e, &jobs[bad]);
    }
    const double t1 = tk_now();
    // Layout: the nvJPEG images at full size, then the CPU ones (only their crop's region).
    size_t px = 0, ngpu = 0, tmp = 0, gpu_bytes = 0;
    for (int pass = 1; pass >= 0; pass--) {
        for (size_t i = 0; i < n; i++) {
            if (d->gpu[i] != pass) continue;
            const tk_img_geom *g = &d->geom[i];
            int W = pass ? d->info[i].width : g->x1 - g->x0, H = pass ? d->info[i].height : g->y1 - g->y0;
            int dx = pass ? 0 : g->x0, dy = pass ? 0 : g->y0; // the buffer's origin in the image
            d->off[i] = px;
            tk_img_rs_job *r = &d->rs[i];
            *r = (tk_img_rs_job){.src = (int64_t)px, .tmp = (int64_t)tmp, .pitch = W * 3, .flip = g->flip,
                                 .rw = g->rw, .rh = g->rh, .wx = g->wx, .wy = g->wy};
            r->bx0 = g->x0 - dx, r->bx1 = g->x1 - dx, r->by0 = g->y0 - dy, r->by1 = g->y1 - dy;
            r->cx0 = g->x0 - dx, r->cx1 = g->x1 - dx, r->cy0 = g->y0 - dy, r->cy1 = g->y1 - dy;
            px += ((size_t)W * H * 3 + 255) & ~(size_t)255;
            tmp += (size_t)t->out_h * (size_t)(r->cx1 - r->cx0) * 3;
            if (pass) {
                d->ord[ngpu++] = ((uint64_t)d->kind[i] << 32) | i;
            }
        }
        if (pass) gpu_bytes = px;
    }
    size_t cpu_bytes = px - gpu_bytes;
    tk_img_rs_out ro = tk_img_transform_out(t);
    int maxtaps = tk_img_rs_maxtaps(d->rs, (int)n);
    TRY(tk_img_rs_check((int)n, &ro, maxtaps, e));
    size_t out_bytes = n * (size_t)t->out_w * t->out_h * 3 * tk_img_dtype_bytes(t->dtype);
    TRY(grow_dev((void **)&d->px, &d->px_cap, px, 0, stream, e));
    TRY(grow_dev((void **)&d->stage, &d->stage_cap, cpu_bytes, 1, stream, e));
    TRY(grow_dev((void **)&d->tmp, &d->tmp_cap, tmp * sizeof(float), 0, stream, e));
    TRY(grow_dev(&d->ws, &d->ws_cap, tk_img_rs_ws_bytes((int)n, &ro, maxtaps), 0, stream, e));
    TRY(grow_dev((void **)&d->rs_d, &d->rs_cap, n * sizeof *d->rs, 0, stream, e));
    if (d->host_out) TRY(grow_dev(&d->out, &d->out_cap, out_bytes, 0, stream, e));
    // nvJPEG's batch, on the stream
    CU(cudaEventRecord(d->ev[0], stream), "event");
    if (ngpu) {
        // nvJPEG's batch by kind (a sub-batch and state each), within a kind in the images' order
        if (d->kinds > 1) qsort(d->ord, ngpu, sizeof *d->ord, cmp_u64);
        for (size_t k = 0; k < ngpu; k++) {
            const size_t i = (size_t)(d->ord[k] & 0xffffffff);
            d->data[k] = jobs[i].data;
            d->len[k] = jobs[i].size;
            memset(&d->dst[k], 0, sizeof d->dst[k]);
            d->dst[k].channel[0] = d->px + d->off[i];
            d->dst[k].pitch[0] = (size_t)d->info[i].width * 3;
        }
        const nvjpegOutputFormat_t fmt = NVJPEG_OUTPUT_RGBI;
        for (size_t k0 = 0, k1; k0 < ngpu; k0 = k1) {
            const int kd = (int)(d->ord[k0] >> 32);
            for (k1 = k0; k1 < ngpu && (int)(d->ord[k1] >> 32) == kd;) k1++;
            nj_state *ks = &d->ks[kd];
            nvjpegStatus_t s = NVJPEG_STATUS_SUCCESS;
            if (!ks->st && (s = api.JpegStateCreate(d->h, &ks->st)) != NVJPEG_STATUS_SUCCESS) {
                ks->st = NULL;
                return nj_fail(e, s, "cannot create a state");
            }
            TRY(preallocate(d, ks, kd, k0, k1, (int)ngpu, fmt, e)); // room for a whole batch of its kind
            if ((int)(k1 - k0) != ks->init_n) {
                s = api.DecodeBatchedInitialize(d->h, ks->st, (int)(k1 - k0), d->threads, fmt);
                if (s != NVJPEG_STATUS_SUCCESS) return nj_fail(e, s, "cannot set up a batch");
                ks->init_n = (int)(k1 - k0);
            }
            s = api.DecodeBatched(d->h, ks->st, d->data + k0, d->len + k0, d->dst + k0, stream);
            if (s != NVJPEG_STATUS_SUCCESS) {
                ks->init_n = 0; // start the next batch afresh
                nj_fail(e, s, "batched decode failed");
                tk_err_set(e, s == NVJPEG_STATUS_BAD_JPEG || s == NVJPEG_STATUS_INCOMPLETE_BITSTREAM ? TK_EDATA : TK_EDEVICE,
                           "nvJPEG: batched decode of %zu images failed: %s (status %d)", k1 - k0, nj_status(s), (int)s);
                return tk_err_where(e, "samples %llu..", (unsigned long long)jobs[0].sample);
            }
        }
    }
    // The others with libjpeg-turbo, meanwhile, into pinned memory, then one upload
    if (cpu_bytes) {
        bad = -1;
        tk_err first;
        tk_err_clear(&first);
#pragma omp parallel for num_threads(d->threads) schedule(dynamic, 1)
        for (long long i = 0; i < (long long)n; i++) {
            if (d->gpu[i]) continue;
            const tk_img_geom *g = &d->geom[i];
            int w = g->x1 - g->x0, h = g->y1 - g->y0;
            tk_err te;
            tk_err_clear(&te);
            if (tk_jpeg_decode(jobs[i].data, jobs[i].size, 8, g->x0, g->y0, w, h, d->stage + (d->off[i] - gpu_bytes),
                               (size_t)w * 3, NULL, &te)) {
#pragma omp critical(tk_img_nvjpeg_err)
                if (bad < 0 || i < bad) {
                    bad = i;
                    first = te;
                }
            }
        }
        if (bad >= 0) {
            cudaStreamSynchronize(stream);
            *e = first;
            return sample_err(e, &jobs[bad]);
        }
        CU(cudaMemcpyAsync(d->px + gpu_bytes, d->stage, cpu_bytes, cudaMemcpyHostToDevice, stream), "upload");
    }
    CU(cudaMemcpyAsync(d->rs_d, d->rs, n * sizeof *d->rs, cudaMemcpyHostToDevice, stream), "upload");
    void *dst = d->host_out ? d->out : out;
    CU(cudaEventRecord(d->ev[1], stream), "event");
    TRY(tk_img_resize(d->ctx, d->px, d->rs_d, (int)n, maxtaps, &ro, d->tmp, d->ws, dst, e));
    CU(cudaEventRecord(d->ev[2], stream), "event");
    if (d->host_out) CU(cudaMemcpyAsync(out, d->out, out_bytes, cudaMemcpyDeviceToHost, stream), "download");
    const double t2 = tk_now();
    // The loader thread sleeps until the batch is done (a spinning wait would take a CPU from the
    // other loader threads' parsing for as long as the GPU takes).
    CU(cudaEventRecord(d->done, stream), "event");
    CU(cudaEventSynchronize(d->done), "decoding a batch");
    float ms0 = 0, ms1 = 0;
    if (cudaEventElapsedTime(&ms0, d->ev[0], d->ev[1]) == cudaSuccess) d->stats.decode_gpu_s += ms0 * 1e-3;
    if (cudaEventElapsedTime(&ms1, d->ev[1], d->ev[2]) == cudaSuccess) d->stats.resize_gpu_s += ms1 * 1e-3;
    d->stats.batches++;
    d->stats.images += n;
    d->stats.parse_s += t1 - t0;
    d->stats.submit_s += t2 - t1;
    d->stats.wait_s += tk_now() - t2;
    return 0;
}

static void *nj_alloc_out(tk_img_decoder *d, size_t bytes) {
    void *p = NULL;
    if (d->host_out) return malloc(bytes ? bytes : 1);
    cudaSetDevice(d->device);
    return cudaMalloc(&p, bytes ? bytes : 1) == cudaSuccess ? p : NULL;
}

static void nj_free_out(tk_img_decoder *d, void *p) {
    if (d->host_out) free(p);
    else cudaFree(p);
}

void tk_img_nvjpeg_stats(const tk_img_decoder *d, tk_img_decoder_stats *st) {
    if (d) {
        *st = d->stats;
        st->pinned_allocs = d->n_pin_alloc, st->pinned_frees = d->n_pin_free;
    } else
        memset(st, 0, sizeof *st);
}

const char *tk_img_nvjpeg_describe(const tk_img_decoder *d) {
    static _Thread_local char buf[700];
    int n = snprintf(buf, sizeof buf, "%s, %s backend", load_msg, d && d->hw ? "hardware" : "default");
    int used = 0, pre = 0;
    for (int k = 0; d && k < NJ_KINDS; k++) used += d->ks[k].st != NULL, pre += d->ks[k].pre_n > 0;
    if (d && n > 0 && (size_t)n < sizeof buf)
        snprintf(buf + n, sizeof buf - (size_t)n, ", %s priority stream, %s, %s (%d used, %d pre-allocated) (%llu batches; nvJPEG's allocations %llu, frees %llu; pinned %llu, %llu)",
                 d->prio ? "greatest" : "default", d->async ? "stream-ordered allocations" : "nvJPEG's allocator",
                 d->kinds > 1 ? "a state per chroma subsampling" : "one state", used, pre,
                 (unsigned long long)d->stats.batches, d->n_alloc, d->n_free, d->n_pin_alloc, d->n_pin_free);
    return buf;
}

#else // built without CUDA or the nvJPEG headers

static int nj_available(char *why, size_t n) {
#ifndef TK_HAVE_CUDA
    snprintf(why, n, "this trainkit was built without CUDA");
#else
    snprintf(why, n, "this trainkit was built without the nvJPEG headers");
#endif
    return 0;
}

static int nj_open(tk_img_decoder **dp, const tk_img_decoder_opts *o, tk_err *e) {
    (void)o;
    *dp = NULL;
    char why[128];
    nj_available(why, sizeof why);
    tk_err_set(e, TK_EUSAGE, "the nvjpeg image decoder: %s", why);
    return tk_err_hint(e, "install the nvidia-nvjpeg wheel (contrib/setup-deps.sh) and rebuild with nvcc; "
                          "data.decoder \"auto\" falls back to the cpu decoder");
}

static int nj_run(tk_img_decoder *d, const tk_img_transform *t, const tk_img_job *jobs, size_t n, void *out,
                  tk_err *e) {
    (void)d, (void)t, (void)jobs, (void)n, (void)out;
    return tk_err_set(e, TK_EINTERNAL, "nvjpeg decoder: run without open");
}

static void nj_close(tk_img_decoder *d) { (void)d; }
static void *nj_alloc_out(tk_img_decoder *d, size_t bytes) {
    (void)d;
    return malloc(bytes ? bytes : 1);
}
static void nj_free_out(tk_img_decoder *d, void *p) {
    (void)d;
    free(p);
}
const char *tk_img_nvjpeg_describe(const tk_img_decoder *d) {
    (void)d;
    return "not built";
}
void tk_img_nvjpeg_stats(const tk_img_decoder *d, tk_img_decoder_stats *st) {
    (void)d;
    memset(st, 0, sizeof *st);
}

#endif

const tk_img_decoder_ops tk_img_decoder_nvjpeg = {
    .version = 2,
    .name = "nvjpeg",
    .out_on_device = 1,
    .open = nj_open,
    .run = nj_run,
    .close = nj_close,
    .available = nj_available,
    .alloc_out = nj_alloc_out,
    .free_out = nj_free_out,
};
