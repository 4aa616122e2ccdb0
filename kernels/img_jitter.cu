// CUDA side of kernels/img_jitter.h: one block an image, one or two passes over it (jitter_norm). Every float and double operation is an explicitly rounded intrinsic
// (__fmul_rn, __dadd_rn, ...: never fused) in the host code's order and types, so the bytes are
// kernels/img_jitter_px.c's and the floats ssd_normalize's.
#include "cuda_util.cuh"
#include "img_jitter.h"

namespace {

constexpr int kT = 1024;

struct Norm {
    float mean[3], std[3];
};

__device__ __forceinline__ int luma(int r, int g, int b) {
    return (int)(((unsigned)r * 19595u + (unsigned)g * 38470u + (unsigned)b * 7471u + 0x8000u) >> 16);
}

// jitter.c's blend(d, p, a): (float)d + a (float)(p - d), truncated; clamped when a is outside [0, 1]
__device__ __forceinline__ uint8_t blend(int d, int p, float a) {
    float v = __fadd_rn((float)d, __fmul_rn(a, (float)(p - d)));
    if (a >= 0.0f && a <= 1.0f) return (uint8_t)(int)v;
    return v <= 0.0f ? 0 : v >= 255.0f ? 255 : (uint8_t)(int)v;
}

__device__ __forceinline__ int round_pos(double x) {
    int k = (int)x;
    return k + (__dsub_rn(x, (double)k) >= 0.5);
}

// jitter.c's hue_pixel: Pillow's rgb2hsv, the shift, Pillow's hsv2rgb
__device__ __forceinline__ void hue_pixel(uint8_t *px, int shift, const uint8_t *sector, const float *frac,
                                          const float *fst) {
    int r = px[0], g = px[1], b = px[2];
    int maxc = r > g ? (r > b ? r : b) : (g > b ? g : b);
    int minc = r < g ? (r < b ? r : b) : (g < b ? g : b);
    if (minc == maxc) return;
    const float cr = (float)(maxc - minc);
    float s = __fdiv_rn(cr, (float)maxc), h;
    if (r == maxc) h = __fsub_rn(__fdiv_rn((float)(maxc - b), cr), __fdiv_rn((float)(maxc - g), cr));
    else if (g == maxc)
        h = (float)__dsub_rn(__dadd_rn(2.0, (double)__fdiv_rn((float)(maxc - r), cr)), (double)__fdiv_rn((float)(maxc - b), cr));
    else h = (float)__dsub_rn(__dadd_rn(4.0, (double)__fdiv_rn((float)(maxc - g), cr)), (double)__fdiv_rn((float)(maxc - r), cr));
    double x = __dadd_rn(__ddiv_rn((double)h, 6.0), 1.0);
    h = (float)(x >= 1.0 ? __dsub_rn(x, 1.0) : x);
    int hb = (uint8_t)((int)__dmul_rn((double)h, 255.0) + shift), sb = (int)__dmul_rn((double)s, 255.0);
    if (sb == 0) {
        px[0] = px[1] = px[2] = (uint8_t)maxc;
        return;
    }
    const float fs = fst[sb], f = frac[hb];
    const double v = (double)(float)maxc;
    uint8_t val[4] = {(uint8_t)maxc, (uint8_t)round_pos(__dmul_rn(v, __dsub_rn(1.0, (double)fs))),
                      (uint8_t)round_pos(__dmul_rn(v, __dsub_rn(1.0, (double)__fmul_rn(fs, f)))),
                      (uint8_t)round_pos(__dmul_rn(v, __dsub_rn(1.0, __dmul_rn((double)fs, __dsub_rn(1.0, (double)f)))))};
    // (V, P, Q, T) of the six sectors
    const int s6 = sector[hb];
    const int k0 = s6 == 0 || s6 == 5 ? 0 : s6 == 1 ? 2 : s6 == 4 ? 3 : 1;
    const int k1 = s6 == 0 ? 3 : s6 == 1 || s6 == 2 ? 0 : s6 == 3 ? 2 : 1;
    const int k2 = s6 == 0 || s6 == 1 ? 1 : s6 == 2 ? 3 : s6 == 5 ? 2 : 0;
    px[0] = val[k0], px[1] = val[k1], px[2] = val[k2];
}

// One operation (TK_JITTER_*; -1 or anything else: none) on one pixel; contrast against mean_l.
__device__ __forceinline__ void apply_op(int op, uint8_t p[3], const tk_img_jitter_job &J, int mean_l,
                                         const uint8_t *sector, const float *frac, const float *fst) {
    switch (op) {
    case TK_JITTER_BRIGHTNESS:
        for (int c = 0; c < 3; c++) p[c] = blend(0, p[c], J.brightness);
        break;
    case TK_JITTER_CONTRAST:
        for (int c = 0; c < 3; c++) p[c] = blend(mean_l, p[c], J.contrast);
        break;
    case TK_JITTER_SATURATION: {
        const int l = luma(p[0], p[1], p[2]);
        for (int c = 0; c < 3; c++) p[c] = blend(l, p[c], J.saturation);
        break;
    }
    case TK_JITTER_HUE: hue_pixel(p, J.hue_shift, sector, frac, fst); break;
    default: break;
    }
}

// Two passes over an image at most: the operations are per pixel except contrast, which needs
// the mean luma of the image as the operations before it left it. With a contrast at position
// cpos: pass 1 applies the operations before it, stores the bytes in ws and sums their luma
// (an exact integer reduction); pass 2 applies contrast and the rest and normalises. Without
// one: a single pass from src to out.
__global__ void __launch_bounds__(kT) jitter_norm(const uint8_t *src, const tk_img_jitter_job *jobs, int64_t npx,
                                                  Norm nm, uint8_t *ws, float *out) {
    __shared__ uint8_t sector[256];
    __shared__ float frac[256], fst[256];
    __shared__ unsigned long long part[kT / 32];
    __shared__ int mean_sh;
    const int k = blockIdx.x, t = threadIdx.x;
    for (int x = t; x < 256; x += kT) { // jitter.c's hsv_terms_make
        double q = __ddiv_rn(__dmul_rn((double)(float)x, 6.0), 255.0);
        int i = (int)floor(q);
        sector[x] = (uint8_t)(i % 6);
        frac[x] = (float)__dsub_rn(q, (double)(float)i);
        fst[x] = (float)__ddiv_rn((double)(float)x, 255.0);
    }
    const tk_img_jitter_job J = jobs[k];
    const uint8_t *s = src + (size_t)k * npx * 3;
    uint8_t *w = ws + (size_t)k * npx * 3;
    int cpos = -1;
    for (int q = 0; q < 4; q++)
        if (J.order[q] == TK_JITTER_CONTRAST) cpos = q;
    __syncthreads();
    int mean_l = 0;
    if (cpos >= 0) {
        unsigned long long sum = 0;
        for (int64_t i = t; i < npx; i += kT) {
            uint8_t p[3] = {s[3 * i], s[3 * i + 1], s[3 * i + 2]};
            for (int q = 0; q < cpos; q++) apply_op(J.order[q], p, J, 0, sector, frac, fst);
            w[3 * i] = p[0], w[3 * i + 1] = p[1], w[3 * i + 2] = p[2];
            sum += (unsigned)luma(p[0], p[1], p[2]);
        }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_down_sync(0xffffffffu, sum, o);
        if ((t & 31) == 0) part[t >> 5] = sum;
        __syncthreads();
        if (t == 0) { // ImageStat's mean of the "L" image, rounded: int(m + 0.5)
            unsigned long long all = 0;
            for (int i = 0; i < kT / 32; i++) all += part[i];
            mean_sh = (int)__dadd_rn(__ddiv_rn((double)all, (double)npx), 0.5);
        }
        __syncthreads();
        mean_l = mean_sh;
    }
    const uint8_t *in = cpos >= 0 ? w : s;
    float *o = out + (size_t)k * npx * 3;
    for (int64_t i = t; i < npx; i += kT) {
        uint8_t p[3] = {in[3 * i], in[3 * i + 1], in[3 * i + 2]};
        for (int q = cpos >= 0 ? cpos : 0; q < 4; q++) apply_op(J.order[q], p, J, mean_l, sector, frac, fst);
        for (int c = 0; c < 3; c++) // ToTensor + Normalize
            o[3 * i + c] = __fdiv_rn(__fsub_rn(__fdiv_rn((float)p[c], 255.0f), nm.mean[c]), nm.std[c]);
    }
}

} // namespace

size_t tk_img_jitter_ws_bytes_cuda(int n, int S) { return (size_t)(n > 0 ? n : 0) * (size_t)S * S * 3; }

int tk_img_jitter_norm_cuda(tk_ctx *c, const uint8_t *src, const tk_img_jitter_job *jobs, int n, int S,
                            const float mean[3], const float std[3], float *out, void *ws, tk_err *e) {
    if (n < 0 || S < 1 || S > 16384) return tk_err_set(e, TK_EINTERNAL, "img_jitter: n %d, S %d", n, S);
    if (n == 0) return 0;
    Norm nm;
    for (int i = 0; i < 3; i++) nm.mean[i] = mean[i], nm.std[i] = std[i];
    jitter_norm<<<n, kT, 0, tk_cu_stream(c)>>>(src, jobs, (int64_t)S * S, nm, (uint8_t *)ws, out);
    return tk_cu_check(e, "img_jitter");
}
