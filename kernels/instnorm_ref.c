// CPU reference of kernels/instnorm.h: per (sample, channel), two-pass statistics in fp64. The
// loops walk the voxels in memory order for a block of CB channels at a time (one cache line of
// fp32), so each pass reads the tensor once instead of once per channel; every channel's sums
// still run over its voxels in order.
#include <math.h>

#include "act_io.h"
#include "instnorm.h"

enum { CB = 16 };

static inline float round_t(tk_dtype t, float v) { return t == TK_BF16 ? tk_bf16_to_f32(tk_f32_to_bf16(v)) : v; }

int tk_instnorm_fwd_ref(tk_dtype t, const void *x, int N, int64_t S, int C, const float *gamma, const float *beta,
                        int relu, float eps, float *save_mean, float *save_invstd, void *y, tk_err *e) {
    TRY(tk_instnorm_check(t, N, S, C, e));
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int c0 = 0; c0 < C; c0 += CB) {
            const int nc = C - c0 < CB ? C - c0 : CB;
            const size_t base = (size_t)n * S * C + c0;
            double s[CB] = {0}, v[CB] = {0}, mean[CB];
            float scale[CB], shift[CB];
            for (int64_t i = 0; i < S; i++)
                for (int c = 0; c < nc; c++) s[c] += tk_act_ld(x, t, base + (size_t)i * C + c);
            for (int c = 0; c < nc; c++) mean[c] = s[c] / (double)S;
            for (int64_t i = 0; i < S; i++)
                for (int c = 0; c < nc; c++) {
                    const double d = tk_act_ld(x, t, base + (size_t)i * C + c) - mean[c];
                    v[c] += d * d;
                }
            for (int c = 0; c < nc; c++) {
                const float invstd = (float)(1.0 / sqrt(v[c] / (double)S + (double)eps)), fmean = (float)mean[c];
                save_mean[(size_t)n * C + c0 + c] = fmean;
                save_invstd[(size_t)n * C + c0 + c] = invstd;
                scale[c] = gamma[c0 + c] * invstd, shift[c] = beta[c0 + c] - fmean * scale[c];
            }
            for (int64_t i = 0; i < S; i++)
                for (int c = 0; c < nc; c++) {
                    float o = tk_act_ld(x, t, base + (size_t)i * C + c) * scale[c] + shift[c];
                    if (relu && !(o > 0)) o = o != o ? o : 0; // NaN passes (as torch.relu)
                    tk_act_st(y, t, base + (size_t)i * C + c, o);
                }
        }
    return 0;
}

// dz at element i: dy [+ dy2] through the ReLU's mask (y > 0), rounded to t.
static inline float dz_at(tk_dtype t, const void *y, const void *dy, const void *dy2, size_t i) {
    float g = tk_act_ld(dy, t, i);
    if (dy2) g += tk_act_ld(dy2, t, i);
    if (y && !(tk_act_ld(y, t, i) > 0)) g = 0;
    return round_t(t, g);
}

int tk_instnorm_bwd_ref(tk_dtype t, const void *x, const void *y, const void *dy, const void *dy2, int N, int64_t S,
                        int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
                        float *dgamma, float *dbeta, tk_err *e) {
    TRY(tk_instnorm_check(t, N, S, C, e));
#pragma omp parallel for schedule(static)
    for (int c0 = 0; c0 < C; c0 += CB) {
        const int nc = C - c0 < CB ? C - c0 : CB;
        double db[CB] = {0}, dg[CB] = {0};
        for (int n = 0; n < N; n++) {
            const size_t base = (size_t)n * S * C + c0;
            double sb[CB] = {0}, sg[CB] = {0};
            float mean[CB], invstd[CB], a[CB], b[CB], g[CB];
            for (int c = 0; c < nc; c++)
                mean[c] = save_mean[(size_t)n * C + c0 + c], invstd[c] = save_invstd[(size_t)n * C + c0 + c];
            for (int64_t i = 0; i < S; i++)
                for (int c = 0; c < nc; c++) {
                    const size_t k = base + (size_t)i * C + c;
                    const float dz = dz_at(t, y, dy, dy2, k), xhat = (tk_act_ld(x, t, k) - mean[c]) * invstd[c];
                    sb[c] += dz;
                    sg[c] += (double)dz * xhat;
                }
            for (int c = 0; c < nc; c++) {
                db[c] += sb[c], dg[c] += sg[c];
                a[c] = gamma[c0 + c] * invstd[c], b[c] = (float)(sb[c] / (double)S), g[c] = (float)(sg[c] / (double)S);
            }
            for (int64_t i = 0; i < S; i++)
                for (int c = 0; c < nc; c++) {
                    const size_t k = base + (size_t)i * C + c;
                    const float dz = dz_at(t, y, dy, dy2, k), xhat = (tk_act_ld(x, t, k) - mean[c]) * invstd[c];
                    tk_act_st(dx, t, k, a[c] * (dz - b[c] - xhat * g[c]));
                }
        }
        for (int c = 0; c < nc; c++) dbeta[c0 + c] = (float)db[c], dgamma[c0 + c] = (float)dg[c];
    }
    return 0;
}
