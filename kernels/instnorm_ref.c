// CPU reference of kernels/instnorm.h: per (sample, channel), two-pass statistics in fp64.
#include <math.h>

#include "act_io.h"
#include "instnorm.h"

int tk_instnorm_fwd_ref(tk_dtype t, const void *x, int N, int64_t S, int C, const float *gamma, const float *beta,
                        int relu, float eps, float *save_mean, float *save_invstd, void *y, tk_err *e) {
    TRY(tk_instnorm_check(t, N, S, C, e));
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            const size_t base = (size_t)n * S * C + c;
            double s = 0, v = 0;
            for (int64_t i = 0; i < S; i++) s += tk_act_ld(x, t, base + (size_t)i * C);
            const double mean = s / (double)S;
            for (int64_t i = 0; i < S; i++) {
                double d = tk_act_ld(x, t, base + (size_t)i * C) - mean;
                v += d * d;
            }
            const float invstd = (float)(1.0 / sqrt(v / (double)S + (double)eps)), fmean = (float)mean;
            save_mean[(size_t)n * C + c] = fmean;
            save_invstd[(size_t)n * C + c] = invstd;
            const float scale = gamma[c] * invstd, shift = beta[c] - fmean * scale;
            for (int64_t i = 0; i < S; i++) {
                float o = tk_act_ld(x, t, base + (size_t)i * C) * scale + shift;
                if (relu && !(o > 0)) o = o != o ? o : 0; // NaN passes (as torch.relu)
                tk_act_st(y, t, base + (size_t)i * C, o);
            }
        }
    return 0;
}

static inline float round_t(tk_dtype t, float v) { return t == TK_BF16 ? tk_bf16_to_f32(tk_f32_to_bf16(v)) : v; }

// dz at element i: dy through the ReLU's mask (y > 0), rounded to t.
static inline float dz_at(tk_dtype t, const void *y, const void *dy, size_t i) {
    float g = tk_act_ld(dy, t, i);
    if (y && !(tk_act_ld(y, t, i) > 0)) g = 0;
    return round_t(t, g);
}

int tk_instnorm_bwd_ref(tk_dtype t, const void *x, const void *y, const void *dy, int N, int64_t S, int C,
                        const float *gamma, const float *save_mean, const float *save_invstd, void *dx, float *dgamma,
                        float *dbeta, tk_err *e) {
    TRY(tk_instnorm_check(t, N, S, C, e));
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double db = 0, dg = 0;
        for (int n = 0; n < N; n++) {
            const size_t base = (size_t)n * S * C + c;
            const float mean = save_mean[(size_t)n * C + c], invstd = save_invstd[(size_t)n * C + c];
            double sb = 0, sg = 0;
            for (int64_t i = 0; i < S; i++) {
                const size_t k = base + (size_t)i * C;
                const float dz = dz_at(t, y, dy, k), xhat = (tk_act_ld(x, t, k) - mean) * invstd;
                sb += dz;
                sg += (double)dz * xhat;
            }
            db += sb, dg += sg;
            const float a = gamma[c] * invstd, b = (float)(sb / (double)S), g = (float)(sg / (double)S);
            for (int64_t i = 0; i < S; i++) {
                const size_t k = base + (size_t)i * C;
                const float dz = dz_at(t, y, dy, k), xhat = (tk_act_ld(x, t, k) - mean) * invstd;
                tk_act_st(dx, t, k, a * (dz - b - xhat * g));
            }
        }
        dbeta[c] = (float)db;
        dgamma[c] = (float)dg;
    }
    return 0;
}
