// CUDA side of kernels/stem_s2d.h: the input as one thread per space-to-depth pixel (12 bytes, or
// 12 fp32 values, in; 16 values out as 16-byte stores); the filter maps one thread per element.
#include "cuda_util.cuh"
#include "core/vec.cuh"
#include "stem_s2d.h"

// One input value: an 8-bit pixel normalized (the same fp32 division as the reference), or an
// already normalized fp32 value as it is.
__device__ static inline float s2d_value(const uint8_t *px, int c, const tk_img_norm &n) {
    return __fdiv_rn((float)px[c] - n.mean[c], n.std[c]);
}
__device__ static inline float s2d_value(const float *px, int c, const tk_img_norm &) { return px[c]; }

template <typename T, typename Src>
__global__ static void s2d_input(const Src *__restrict__ src, int N, int S, tk_img_norm n, T *__restrict__ xs) {
    const int Hs = tk_s2d_side(S);
    const int64_t total = (int64_t)N * Hs * Hs;
    constexpr int V = TkVec<T>::N; // values per 16-byte store
    for (int64_t p = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; p < total; p += (int64_t)gridDim.x * blockDim.x) {
        const int j = (int)(p % Hs), i = (int)(p / Hs % Hs);
        const int64_t img = p / ((int64_t)Hs * Hs);
        float v[TK_S2D_C];
#pragma unroll
        for (int blk = 0; blk < 4; blk++) {
            const int y = 2 * (i - 2) + blk / 2, x = 2 * (j - 2) + blk % 2;
            const bool in = y >= 0 && y < S && x >= 0 && x < S;
            const Src *px = src + ((img * S + (in ? y : 0)) * S + (in ? x : 0)) * 3;
#pragma unroll
            for (int c = 0; c < 3; c++) v[blk * 3 + c] = in ? s2d_value(px, c, n) : 0.0f;
        }
#pragma unroll
        for (int ch = 12; ch < TK_S2D_C; ch++) v[ch] = 0.0f;
#pragma unroll
        for (int k = 0; k < TK_S2D_C; k += V) tk_vstore(xs, (size_t)p * TK_S2D_C + k, v + k);
    }
}

template <typename T> __global__ static void s2d_weight(const float *__restrict__ w, int K, T *__restrict__ ws) {
    const int per = 4 * 4 * TK_S2D_C;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < K * per; i += gridDim.x * blockDim.x) {
        const int k = i / per, o = i % per, qq = o / TK_S2D_C, ch = o % TK_S2D_C;
        const int blk = ch / 3, c = ch % 3, r = 2 * (qq / 4) + blk / 2 - 1, s = 2 * (qq % 4) + blk % 2 - 1;
        const bool tap = ch < 12 && r >= 0 && r < 7 && s >= 0 && s < 7;
        ws[i] = tk_to<T>(tap ? w[((k * 7 + r) * 7 + s) * 3 + c] : 0.0f);
    }
}

template <typename T> __global__ static void s2d_wgrad(const T *__restrict__ dws, int K, float *__restrict__ dw) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < K * 147; i += gridDim.x * blockDim.x) {
        const int k = i / 147, o = i % 147, r = o / 21, s = o / 3 % 7, c = o % 3;
        dw[i] = tk_f(dws[k * 4 * 4 * TK_S2D_C + tk_s2d_tap(r, s, c)]);
    }
}

template <typename Src>
static int input_cuda(tk_ctx *c, const Src *src, int N, int S, tk_img_norm n, tk_dtype t, void *xs, tk_err *e) {
    TRY(tk_stem_s2d_check(N, S, 1, t, e));
    const int64_t total = (int64_t)N * tk_s2d_side(S) * tk_s2d_side(S);
    if (total == 0) return 0;
    const unsigned nb = tk_cu_blocks(total, 256);
    if (t == TK_BF16) s2d_input<<<nb, 256, 0, tk_cu_stream(c)>>>(src, N, S, n, (__nv_bfloat16 *)xs);
    else s2d_input<<<nb, 256, 0, tk_cu_stream(c)>>>(src, N, S, n, (float *)xs);
    return tk_cu_check(e, "stem_s2d_input");
}

int tk_stem_s2d_input_cuda(tk_ctx *c, const uint8_t *src, int N, int S, tk_img_norm n, tk_dtype t, void *xs,
                           tk_err *e) {
    return input_cuda(c, src, N, S, n, t, xs, e);
}

int tk_stem_s2d_input_f32_cuda(tk_ctx *c, const float *x, int N, int S, tk_dtype t, void *xs, tk_err *e) {
    const tk_img_norm none = {{0, 0, 0}, {1, 1, 1}};
    return input_cuda(c, x, N, S, none, t, xs, e);
}

int tk_stem_s2d_weight_cuda(tk_ctx *c, const float *w, int K, tk_dtype t, void *ws, tk_err *e) {
    TRY(tk_stem_s2d_check(0, 2, K, t, e));
    const unsigned nb = tk_cu_blocks((int64_t)K * 4 * 4 * TK_S2D_C, 256);
    if (t == TK_BF16) s2d_weight<<<nb, 256, 0, tk_cu_stream(c)>>>(w, K, (__nv_bfloat16 *)ws);
    else s2d_weight<<<nb, 256, 0, tk_cu_stream(c)>>>(w, K, (float *)ws);
    return tk_cu_check(e, "stem_s2d_weight");
}

int tk_stem_s2d_wgrad_cuda(tk_ctx *c, const void *dws, int K, tk_dtype t, float *dw, tk_err *e) {
    TRY(tk_stem_s2d_check(0, 2, K, t, e));
    const unsigned nb = tk_cu_blocks((int64_t)K * 147, 256);
    if (t == TK_BF16) s2d_wgrad<<<nb, 256, 0, tk_cu_stream(c)>>>((const __nv_bfloat16 *)dws, K, dw);
    else s2d_wgrad<<<nb, 256, 0, tk_cu_stream(c)>>>((const float *)dws, K, dw);
    return tk_cu_check(e, "stem_s2d_wgrad");
}
