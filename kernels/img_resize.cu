// CUDA side of kernels/img_resize.h. Three launches on the compute stream:
//   plan:       per image and output index of both axes, the first tap, the tap count and the
//               normalized weights: img_resize_ref.c's tk_img_axis_plan, in the same double
//               arithmetic (explicitly rounded: no contraction into fused multiply-adds);
//   vertical:   one block per (image, output row): the weighted sum of the source rows over the
//               columns [cx0, cx1), into the float scratch (coalesced byte reads);
//   horizontal: one block per (image, output row): the weighted sum along the row, then
//               normalization, the flip and the output type.
// Float sums accumulate in the reference's order with __fmul_rn/__fadd_rn, so the results are
// the reference's bit for bit.
#include "cuda_util.cuh"
#include "img_resize.h"

namespace {

struct Tables {
    int32_t *first, *count; // [n][out_w + out_h]: the x axis first, then y
    float *w;               // [n][out_w + out_h][maxtaps]
};

__device__ inline Tables tables(void *ws, int n, int per, int maxtaps) {
    Tables t;
    size_t entries = (size_t)n * per;
    t.first = (int32_t *)ws;
    t.count = t.first + entries;
    t.w = (float *)(t.count + entries);
    return t;
}

__device__ inline double triangle(double x) {
    x = fabs(x);
    return x < 1.0 ? 1.0 - x : 0.0;
}

// img_resize_ref.c's tk_img_axis_plan for output i (o0 + i of the resized axis).
__device__ void axis_entry(double b0, double b1, int r, int o0, int i, int c0, int c1, int32_t *first, int32_t *count,
                           float *w) {
    double scale = __ddiv_rn(__dsub_rn(b1, b0), (double)r), fs = scale > 1.0 ? scale : 1.0, support = fs;
    int axis_taps = (int)ceil(support) * 2 + 1;
    double center = __dadd_rn(b0, __dmul_rn(__dadd_rn((double)(o0 + i), 0.5), scale));
    int lo = (int)floor(__dadd_rn(__dsub_rn(center, support), 0.5));
    int hi = (int)floor(__dadd_rn(__dadd_rn(center, support), 0.5));
    lo = lo < c0 ? c0 : lo;
    hi = hi > c1 ? c1 : hi;
    if (hi <= lo) {
        lo = center < c0 ? c0 : c1 - 1;
        hi = lo + 1;
    }
    if (hi - lo > axis_taps) hi = lo + axis_taps;
    int k = hi - lo;
    double sum = 0;
    for (int j = 0; j < k; j++) sum = __dadd_rn(sum, triangle(__ddiv_rn(__dadd_rn(__dsub_rn((double)(lo + j), center), 0.5), fs)));
    for (int j = 0; j < k; j++)
        w[j] = (float)(sum != 0 ? __ddiv_rn(triangle(__ddiv_rn(__dadd_rn(__dsub_rn((double)(lo + j), center), 0.5), fs)), sum)
                                : __ddiv_rn(1.0, (double)k));
    *first = lo;
    *count = k;
}

__global__ void plan(const tk_img_rs_job *jobs, int n, int out_w, int out_h, int maxtaps, void *ws) {
    const int per = out_w + out_h, img = blockIdx.x;
    Tables t = tables(ws, n, per, maxtaps);
    const tk_img_rs_job j = jobs[img];
    for (int i = threadIdx.x; i < per; i += blockDim.x) {
        size_t at = (size_t)img * per + i;
        if (i < out_w) axis_entry(j.bx0, j.bx1, j.rw, j.wx, i, j.cx0, j.cx1, &t.first[at], &t.count[at], t.w + at * maxtaps);
        else axis_entry(j.by0, j.by1, j.rh, j.wy, i - out_w, j.cy0, j.cy1, &t.first[at], &t.count[at], t.w + at * maxtaps);
    }
}

__global__ void vertical(const uint8_t *src, const tk_img_rs_job *jobs, int n, int out_w, int out_h, int maxtaps,
                         const void *ws, float *tmp) {
    const int per = out_w + out_h, img = blockIdx.y, row = blockIdx.x;
    Tables t = tables(const_cast<void *>(ws), n, per, maxtaps);
    const tk_img_rs_job &j = jobs[img];
    const size_t at = (size_t)img * per + out_w + row;
    const int first = t.first[at], count = t.count[at];
    const float *w = t.w + at * maxtaps;
    const int64_t len = (int64_t)(j.cx1 - j.cx0) * 3;
    const uint8_t *p = src + j.src + (int64_t)first * j.pitch + (int64_t)j.cx0 * 3;
    float *o = tmp + j.tmp + (int64_t)row * len;
    for (int64_t x = threadIdx.x; x < len; x += blockDim.x) {
        float acc = __fmul_rn(w[0], (float)p[x]);
        for (int k = 1; k < count; k++) acc = __fadd_rn(acc, __fmul_rn(w[k], (float)p[(int64_t)k * j.pitch + x]));
        o[x] = acc;
    }
}

template <typename T> __device__ inline void store(T *d, float v);
template <> __device__ inline void store<float>(float *d, float v) { *d = v; }
template <> __device__ inline void store<__nv_bfloat16>(__nv_bfloat16 *d, float v) { *d = __float2bfloat16_rn(v); }
template <> __device__ inline void store<uint8_t>(uint8_t *d, float v) {
    float u = __fadd_rn(v, 0.5f);
    *d = (uint8_t)(u >= 255.0f ? 255 : u > 0.0f ? (int)u : 0);
}

struct Norm {
    float scale[3], shift[3];
};

template <typename T>
__global__ void horizontal(const tk_img_rs_job *jobs, int n, int out_w, int out_h, int maxtaps, const void *ws,
                           const float *tmp, Norm nm, T *out) {
    const int per = out_w + out_h, img = blockIdx.y, row = blockIdx.x;
    Tables t = tables(const_cast<void *>(ws), n, per, maxtaps);
    const tk_img_rs_job &j = jobs[img];
    const int64_t len = (int64_t)(j.cx1 - j.cx0) * 3;
    const float *r = tmp + j.tmp + (int64_t)row * len;
    T *o = out + ((size_t)img * out_h + row) * (size_t)out_w * 3;
    for (int i = threadIdx.x; i < out_w; i += blockDim.x) {
        const size_t at = (size_t)img * per + i;
        const int count = t.count[at];
        const float *w = t.w + at * maxtaps, *p = r + (int64_t)(t.first[at] - j.cx0) * 3;
        float v0 = 0, v1 = 0, v2 = 0;
        for (int k = 0; k < count; k++, p += 3) {
            v0 = __fadd_rn(v0, __fmul_rn(w[k], p[0]));
            v1 = __fadd_rn(v1, __fmul_rn(w[k], p[1]));
            v2 = __fadd_rn(v2, __fmul_rn(w[k], p[2]));
        }
        T *d = o + (size_t)(j.flip ? out_w - 1 - i : i) * 3;
        store<T>(d + 0, __fadd_rn(__fmul_rn(v0, nm.scale[0]), nm.shift[0]));
        store<T>(d + 1, __fadd_rn(__fmul_rn(v1, nm.scale[1]), nm.shift[1]));
        store<T>(d + 2, __fadd_rn(__fmul_rn(v2, nm.scale[2]), nm.shift[2]));
    }
}

} // namespace

int tk_img_resize_cuda(tk_ctx *c, const uint8_t *src, const tk_img_rs_job *jobs, int n, int maxtaps,
                       const tk_img_rs_out *o, float *tmp, void *ws, void *out, tk_err *e) {
    TRY(tk_img_rs_check(n, o, maxtaps, e));
    if (n == 0) return 0;
    cudaStream_t s = tk_cu_stream(c);
    Norm nm;
    for (int k = 0; k < 3; k++) { // as tk_img_resample: 1/std and -mean/std in float
        nm.scale[k] = 1.0f / o->std[k];
        nm.shift[k] = -o->mean[k] / o->std[k];
    }
    plan<<<n, 256, 0, s>>>(jobs, n, o->out_w, o->out_h, maxtaps, ws);
    dim3 g((unsigned)o->out_h, (unsigned)n);
    vertical<<<g, 256, 0, s>>>(src, jobs, n, o->out_w, o->out_h, maxtaps, ws, tmp);
    if (o->dtype == TK_IMG_BF16)
        horizontal<<<g, 128, 0, s>>>(jobs, n, o->out_w, o->out_h, maxtaps, ws, tmp, nm, (__nv_bfloat16 *)out);
    else if (o->dtype == TK_IMG_U8)
        horizontal<<<g, 128, 0, s>>>(jobs, n, o->out_w, o->out_h, maxtaps, ws, tmp, nm, (uint8_t *)out);
    else
        horizontal<<<g, 128, 0, s>>>(jobs, n, o->out_w, o->out_h, maxtaps, ws, tmp, nm, (float *)out);
    return tk_cu_check(e, "img_resize");
}
