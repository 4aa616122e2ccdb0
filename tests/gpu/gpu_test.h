// Shared helpers of the device tests (tests/gpu/test_*.c): one cuda context per binary, fresh
// random inputs every run (the seed is printed; TK_SEED=N repeats a run), device buffers that
// are poisoned before each op so unwritten outputs show, and error measures. A binary built here
// prints "1..0 # SKIP no CUDA device" and exits 0 where there is no GPU.
#ifndef TK_GPU_TEST_H
#define TK_GPU_TEST_H

#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "../unit/tk_test.h"
#include "core/philox.h"
#include "gpu/gpu.h"
#include "sgd.h" // tk_f32_to_bf16, tk_bf16_to_f32

static tk_ctx *gt_ctx_;
static uint64_t gt_seed_;
static uint32_t gt_draws_; // each fill draws from a new Philox stream

__attribute__((constructor(101))) static void gt_init_(void) {
    if (tk_cuda_device_count() == 0) {
        printf("1..0 # SKIP no CUDA device\n");
        exit(0);
    }
    const char *s = getenv("TK_SEED");
    gt_seed_ = s && *s ? strtoull(s, NULL, 10) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    printf("# seed %llu (TK_SEED=%llu repeats this run)\n", (unsigned long long)gt_seed_,
           (unsigned long long)gt_seed_);
    tk_err e = {0};
    if (tk_ctx_create(&gt_ctx_, TK_BACKEND_CUDA, 0, &e)) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("Bail out! cannot create a cuda context: %s\n", buf);
        exit(1);
    }
    printf("# device %s\n", tk_ctx_describe(gt_ctx_));
}

__attribute__((destructor)) static void gt_fini_(void) { tk_ctx_destroy(gt_ctx_); }

// A failure of the test machinery itself (not of the op under test): stop the binary.
static inline void gt_die_(const char *what, const tk_err *e) {
    char buf[1024] = "";
    if (e) tk_err_format(e, buf, sizeof buf);
    printf("Bail out! %s: %s\n", what, buf);
    exit(1);
}

static inline void *gt_dev(size_t bytes) {
    void *p;
    tk_err e = {0};
    if (tk_malloc(gt_ctx_, &p, bytes, &e)) gt_die_("tk_malloc", &e);
    return p;
}
static inline void gt_up(void *dst, const void *src, size_t bytes) {
    tk_err e = {0};
    if (tk_memcpy_h2d(gt_ctx_, dst, src, bytes, TK_STREAM_COMPUTE, &e)) gt_die_("h2d copy", &e);
}
static inline void gt_down(void *dst, const void *src, size_t bytes) {
    tk_err e = {0};
    if (tk_ctx_sync(gt_ctx_, &e)) gt_die_("sync before d2h copy", &e);
    if (tk_memcpy_d2h(gt_ctx_, dst, src, bytes, TK_STREAM_COMPUTE, &e)) gt_die_("d2h copy", &e);
}
// Fill device memory with a byte pattern (0xff: NaN in every float type).
static inline void gt_poison(void *p, size_t bytes, int byte) {
    if (cudaMemset(p, byte, bytes) != cudaSuccess || cudaDeviceSynchronize() != cudaSuccess)
        gt_die_("cudaMemset", NULL);
}
static inline int gt_sync(tk_err *e) { return tk_ctx_sync(gt_ctx_, e); }
static inline void *gt_host(size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) gt_die_("out of host memory", NULL);
    return p;
}

// Uniform in [lo, hi), or (ints) whole numbers in [lo, hi]; a new random stream per call.
static inline void gt_fill(float *x, size_t n, float lo, float hi, int ints) {
    uint32_t st = ++gt_draws_;
    for (size_t i = 0; i < n; i++) {
        float u = tk_philox_uniform(gt_seed_, st, i);
        x[i] = ints ? (float)((int)lo + (int)(u * (hi - lo + 1))) : lo + (hi - lo) * u;
    }
}
static inline uint32_t gt_u32(uint64_t i) {
    return tk_philox_draw(gt_seed_, 0x7fffffffu - gt_draws_, i).v[0];
}

// fp16 <-> fp32 (round to nearest even), for host-side inputs and results.
static inline uint16_t gt_f32_to_f16(float f) {
    union { float f; uint32_t u; } v = {f};
    uint32_t sign = (v.u >> 16) & 0x8000u, a = v.u & 0x7fffffffu;
    if (a > 0x7f800000u) return (uint16_t)(sign | 0x7e00u);
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); // rounds to >= 65520: inf
    if (a < 0x38800000u) { // subnormal or zero in fp16
        if (a < 0x33000000u) return (uint16_t)sign;
        uint32_t m = (a & 0x7fffffu) | 0x800000u;
        int shift = 126 - (int)(a >> 23); // to units of 2^-24
        uint32_t q = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return (uint16_t)(sign | q);
    }
    uint32_t r = a - 0x38000000u; // rebias the exponent (127 -> 15)
    uint32_t q = r >> 13, rem = r & 0x1fffu;
    if (rem > 0x1000u || (rem == 0x1000u && (q & 1))) q++;
    return (uint16_t)(sign | q);
}
static inline float gt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1f, m = h & 0x3ffu;
    float f;
    if (ex == 0) f = (float)m * (1.0f / 16777216.0f);
    else if (ex == 31) f = m ? NAN : INFINITY;
    else f = ldexpf((float)(m | 0x400u), (int)ex - 25);
    union { float f; uint32_t u; } v = {f};
    v.u |= sign;
    return v.f;
}

// x rounded to type t (as the device will see it), in place.
static inline void gt_round(float *x, size_t n, tk_dtype t) {
    for (size_t i = 0; i < n; i++)
        if (t == TK_BF16) x[i] = tk_bf16_to_f32(tk_f32_to_bf16(x[i]));
        else if (t == TK_F16) x[i] = gt_f16_to_f32(gt_f32_to_f16(x[i]));
}
// fp32 host array -> device array of type t.
static inline void gt_up_as(void *dst, const float *x, size_t n, tk_dtype t) {
    if (t == TK_F32) {
        gt_up(dst, x, n * 4);
        return;
    }
    uint16_t *h = (uint16_t *)gt_host(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = t == TK_BF16 ? tk_f32_to_bf16(x[i]) : gt_f32_to_f16(x[i]);
    gt_up(dst, h, n * 2);
    free(h);
}
// device array of type t -> fp32 host array.
static inline void gt_down_as(float *x, const void *src, size_t n, tk_dtype t) {
    if (t == TK_F32) {
        gt_down(x, src, n * 4);
        return;
    }
    uint16_t *h = (uint16_t *)gt_host(n * 2);
    gt_down(h, src, n * 2);
    for (size_t i = 0; i < n; i++) x[i] = t == TK_BF16 ? tk_bf16_to_f32(h[i]) : gt_f16_to_f32(h[i]);
    free(h);
}
// A new device copy of x (n values) in type t; x itself is rounded to t first (both sides see it).
static inline void *gt_dev_from(float *x, size_t n, tk_dtype t) {
    gt_round(x, n, t);
    void *d = gt_dev(n * tk_dtype_size(t) + 16);
    gt_up_as(d, x, n, t);
    return d;
}
// A new fp32 host copy of a device array of type t (n values).
static inline float *gt_host_from(const void *d, size_t n, tk_dtype t) {
    float *x = (float *)gt_host(n * 4);
    gt_down_as(x, d, n, t);
    return x;
}

// ||x - ref|| / ||ref|| (absolute when ref is all zero); NaN anywhere gives +inf.
static inline double gt_relerr(const float *x, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        if (x[i] != x[i] || ref[i] != ref[i]) return INFINITY;
        double d = (double)x[i] - ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}
// Number of elements that differ bit for bit (as floats; -0 == 0).
static inline size_t gt_ndiff(const float *x, const float *ref, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += !(x[i] == ref[i]);
    return d;
}

// Distance in units in the last place between two floats (0 = identical; NaN vs non-NaN: huge).
static inline int64_t gt_ulps(float a, float b) {
    if (a != a || b != b) return (a != a && b != b) ? 0 : INT64_MAX;
    union { float f; int32_t i; } x = {a}, y = {b};
    int64_t ia = x.i < 0 ? (int64_t)INT32_MIN - x.i : x.i, ib = y.i < 0 ? (int64_t)INT32_MIN - y.i : y.i;
    return ia > ib ? ia - ib : ib - ia;
}
static inline int64_t gt_max_ulps(const float *x, const float *ref, size_t n) {
    int64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int64_t u = gt_ulps(x[i], ref[i]);
        m = u > m ? u : m;
    }
    return m;
}

// Median of a few timed runs of fn(arg) on the compute stream, in milliseconds (benchmarks).
static inline double gt_time_ms(void (*fn)(void *), void *arg, int iters) {
    cudaStream_t s = (cudaStream_t)gt_ctx_->stream[TK_STREAM_COMPUTE];
    cudaEvent_t a, b;
    cudaEventCreate(&a), cudaEventCreate(&b);
    fn(arg); // warm-up
    float ms[32];
    if (iters > 32) iters = 32;
    for (int i = 0; i < iters; i++) {
        cudaEventRecord(a, s);
        fn(arg);
        cudaEventRecord(b, s);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms[i], a, b);
    }
    cudaEventDestroy(a), cudaEventDestroy(b);
    for (int i = 1; i < iters; i++)
        for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) {
            float t = ms[j];
            ms[j] = ms[j - 1], ms[j - 1] = t;
        }
    return ms[iters / 2];
}

#endif
