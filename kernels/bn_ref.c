// CPU reference of kernels/bn.h: per channel, two-pass statistics in fp64.
#include <math.h>
#include <stdlib.h>

#include "act_io.h"
#include "bn.h"

static int check(tk_dtype t, int64_t M, int C, tk_err *e) {
    if (!tk_act_ok(t)) return tk_err_set(e, TK_EINTERNAL, "bn: tensors in %s", tk_dtype_name(t));
    if (M < 1 || C < 1) return tk_err_set(e, TK_EINTERNAL, "bn: bad shape M %lld C %d", (long long)M, C);
    return 0;
}

// y = act(x scale + shift [+ res]) for channel c.
static void apply(tk_dtype t, const void *x, int64_t M, int C, int c, float scale, float shift, const void *res,
                  int relu, void *y) {
    for (int64_t m = 0; m < M; m++) {
        size_t i = (size_t)m * C + c;
        float v = tk_act_ld(x, t, i) * scale + shift;
        if (res) v += tk_act_ld(res, t, i);
        if (relu && !(v > 0)) v = v != v ? v : 0; // NaN passes (as torch.relu)
        tk_act_st(y, t, i, v);
    }
}

// The statistics' updates and y for channel c, given its mean and biased variance (fp64).
static void finish(tk_dtype t, const void *x, int64_t M, int C, int c, double mean, double var, const float *gamma,
                   const float *beta, const void *res, int relu, float eps, float momentum, float *run_mean,
                   float *run_var, float *save_mean, float *save_invstd, void *y) {
    double unbiased = M > 1 ? var * (double)M / (double)(M - 1) : var;
    float invstd = (float)(1.0 / sqrt(var + (double)eps)), fmean = (float)mean;
    save_mean[c] = fmean;
    save_invstd[c] = invstd;
    run_mean[c] = (float)((1.0 - momentum) * run_mean[c] + momentum * mean);
    run_var[c] = (float)((1.0 - momentum) * run_var[c] + momentum * unbiased);
    float scale = gamma[c] * invstd, shift = beta[c] - fmean * scale;
    if (y) apply(t, x, M, C, c, scale, shift, res, relu, y);
}

int tk_bn_fwd_train_sums_ref(tk_dtype t, const void *x, int64_t M, int C, const float *sum, const float *sqsum,
                             const float *gamma, const float *beta, const void *res, int relu, float eps,
                             float momentum, float *run_mean, float *run_var, float *save_mean, float *save_invstd,
                             void *y, tk_err *e) {
    TRY(check(t, M, C, e));
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double mean = (double)sum[c] / (double)M, var = (double)sqsum[c] / (double)M - mean * mean;
        finish(t, x, M, C, c, mean, var < 0 ? 0 : var, gamma, beta, res, relu, eps, momentum, run_mean, run_var,
               save_mean, save_invstd, y);
    }
    return 0;
}

int tk_bn_fwd_train_ref(tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                        const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                        float *save_mean, float *save_invstd, void *y, tk_err *e) {
    return tk_bn_fwd_train_mask_ref(t, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var, save_mean,
                                    save_invstd, y, NULL, e);
}

int tk_bn_fwd_train_mask_ref(tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                             const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                             float *save_mean, float *save_invstd, void *y, uint8_t *mask, tk_err *e) {
    TRY(check(t, M, C, e));
    if (mask && !y) return tk_err_set(e, TK_EINTERNAL, "bn: mask bits without y");
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        double s = 0, v = 0;
        for (int64_t m = 0; m < M; m++) s += tk_act_ld(x, t, (size_t)m * C + c);
        double mean = s / (double)M;
        for (int64_t m = 0; m < M; m++) {
            double d = tk_act_ld(x, t, (size_t)m * C + c) - mean;
            v += d * d;
        }
        finish(t, x, M, C, c, mean, v / (double)M, gamma, beta, res, relu, eps, momentum, run_mean, run_var, save_mean,
               save_invstd, y);
    }
    if (mask) // (after the channels' loop: a byte holds 8 channels' bits)
        for (size_t i = 0; i < (size_t)M * C; i += 8) {
            unsigned b = 0;
            for (size_t k = 0; k < 8 && i + k < (size_t)M * C; k++) b |= (tk_act_ld(y, t, i + k) > 0 ? 1u : 0u) << k;
            mask[i / 8] = (uint8_t)b;
        }
    return 0;
}

int tk_bn_fwd_eval_ref(tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                       const void *res, int relu, float eps, const float *run_mean, const float *run_var, void *y,
                       tk_err *e) {
    TRY(check(t, M, C, e));
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float invstd = (float)(1.0 / sqrt((double)run_var[c] + (double)eps));
        float scale = gamma[c] * invstd, shift = beta[c] - run_mean[c] * scale;
        apply(t, x, M, C, c, scale, shift, res, relu, y);
    }
    return 0;
}

// dz of row m, channel c (bn.h), rounded to t; the mask from y, or from x with the forward's scale
// and shift (mx).
static inline float round_t(tk_dtype t, float v) { return t == TK_BF16 ? tk_bf16_to_f32(tk_f32_to_bf16(v)) : v; }

typedef struct {
    int on;
    float scale, shift;
} xmask;

static inline float dz_at(tk_dtype t, const void *x, const void *y, const uint8_t *bits, xmask mx, const void *dy,
                          const void *dy2, size_t i) {
    float g = tk_act_ld(dy, t, i);
    if (dy2) g += tk_act_ld(dy2, t, i);
    if (y && !(tk_act_ld(y, t, i) > 0)) g = 0;
    if (bits && !(bits[i / 8] >> (i % 8) & 1)) g = 0;
    if (mx.on && !(round_t(t, tk_act_ld(x, t, i) * mx.scale + mx.shift) > 0)) g = 0;
    return round_t(t, g);
}

// The backward, the ReLU's mask from y, the mask bits or x (bn.h).
static int bwd(tk_dtype t, const void *x, const void *y, const uint8_t *bits, const float *beta, const void *dy,
               const void *dy2, int64_t M, int C, const float *gamma, const float *save_mean, const float *save_invstd,
               void *dx, void *dz_out, float *dgamma, float *dbeta, tk_err *e) {
    TRY(check(t, M, C, e));
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        xmask mx = {!y && !bits && beta, 0, 0};
        if (mx.on) mx.scale = gamma[c] * invstd, mx.shift = beta[c] - mean * mx.scale; // as the forward
        double sb = 0, sg = 0;
        for (int64_t m = 0; m < M; m++) {
            size_t i = (size_t)m * C + c;
            float dz = dz_at(t, x, y, bits, mx, dy, dy2, i), xhat = (tk_act_ld(x, t, i) - mean) * invstd;
            sb += dz;
            sg += (double)dz * xhat;
            if (dz_out) tk_act_st(dz_out, t, i, dz);
        }
        dbeta[c] = (float)sb;
        dgamma[c] = (float)sg;
        const float a = gamma[c] * invstd, b = (float)(sb / (double)M), g = (float)(sg / (double)M);
        for (int64_t m = 0; m < M; m++) {
            size_t i = (size_t)m * C + c;
            float dz = dz_at(t, x, y, bits, mx, dy, dy2, i), xhat = (tk_act_ld(x, t, i) - mean) * invstd;
            tk_act_st(dx, t, i, a * (dz - b - xhat * g));
        }
    }
    return 0;
}

int tk_bn_bwd_ref(tk_dtype t, const void *x, const void *y, const float *beta, const void *dy, const void *dy2,
                  int64_t M, int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
                  void *dz_out, float *dgamma, float *dbeta, tk_err *e) {
    return bwd(t, x, y, NULL, beta, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out, dgamma, dbeta, e);
}

int tk_bn_bwd_mask_ref(tk_dtype t, const void *x, const uint8_t *mask, const void *dy, const void *dy2, int64_t M,
                       int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx,
                       void *dz_out, float *dgamma, float *dbeta, tk_err *e) {
    return bwd(t, x, NULL, mask, NULL, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out, dgamma, dbeta, e);
}

int tk_bn_fwd_train_res_bn_ref(tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                               const void *res, tk_bn_saved res_bn, int relu, float eps, float momentum,
                               float *run_mean, float *run_var, float *save_mean, float *save_invstd, void *y,
                               uint8_t *mask, tk_err *e) {
    TRY(check(t, M, C, e));
    if (!res) return tk_err_set(e, TK_EINTERNAL, "bn: a residual BN without its residual");
    void *r = malloc((size_t)M * C * (t == TK_BF16 ? 2 : 4)); // the residual BN's output, as it would store it
    if (!r) return tk_err_set(e, TK_EIO, "bn: out of host memory");
#pragma omp parallel for schedule(static)
    for (int c = 0; c < C; c++) {
        float scale = res_bn.gamma[c] * res_bn.invstd[c], shift = res_bn.beta[c] - res_bn.mean[c] * scale;
        apply(t, res, M, C, c, scale, shift, NULL, 0, r);
    }
    int rc = tk_bn_fwd_train_mask_ref(t, x, M, C, gamma, beta, r, relu, eps, momentum, run_mean, run_var, save_mean,
                                      save_invstd, y, mask, e);
    free(r);
    return rc;
}
