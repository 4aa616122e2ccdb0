// CPU reference of kernels/layernorm.h: fp32 values, fp64 sums.
#include <math.h>
#include <stdlib.h>

#include "layernorm.h"

static int check(tk_dtype act, const char *op, int H, const tk_dropout *d, tk_err *e) {
    if (act != TK_F32) return tk_err_set(e, TK_EINTERNAL, "%s (cpu): activations in %s, want F32", op, tk_dtype_name(act));
    if (H < 1) return tk_err_set(e, TK_EINTERNAL, "%s: H = %d", op, H);
    if (d && d->p > 0 && !d->step) return tk_err_set(e, TK_EINTERNAL, "%s: dropout without a step counter", op);
    return 0;
}

int tk_layernorm_fwd_ref(tk_dtype act, int64_t R, int H, const void *x, const void *res, const tk_dropout *drop,
                         int where, const float *gamma, const float *beta, float eps, void *y, void *s, float *mean,
                         float *rstd, tk_err *e) {
    TRY(check(act, "layernorm_fwd", H, drop, e));
    const float *xf = x, *rf = res;
    float *yf = y, *sf = s;
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    const tk_dropout *pre = where == TK_LN_DROP_PRE ? drop : NULL, *post = where == TK_LN_DROP_POST ? drop : NULL;
    int bad = 0;
#pragma omp parallel
    {
        float *row = malloc(sizeof(float) * (size_t)H);
        if (!row) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < R; r++) {
            if (!row) continue;
            size_t o = (size_t)r * H;
            double sum = 0;
            for (int h = 0; h < H; h++) {
                float v = xf[o + h] * tk_dropout_factor(pre, th, step, (int64_t)o + h);
                if (rf) v += rf[o + h];
                row[h] = v;
                sum += v;
            }
            double mu = sum / H, sq = 0;
            for (int h = 0; h < H; h++) sq += ((double)row[h] - mu) * ((double)row[h] - mu);
            float m = (float)mu, rs = (float)(1.0 / sqrt(sq / H + (double)eps));
            if (mean) mean[r] = m;
            if (rstd) rstd[r] = rs;
            for (int h = 0; h < H; h++) {
                float v = (row[h] - m) * rs * gamma[h] + beta[h];
                yf[o + h] = v * tk_dropout_factor(post, th, step, (int64_t)o + h);
                if (sf) sf[o + h] = row[h];
            }
        }
        free(row);
    }
    return bad ? tk_err_set(e, TK_EIO, "layernorm: out of host memory") : 0;
}

int tk_layernorm_bwd_ref(tk_dtype act, int64_t R, int H, const void *dy, const void *s, const float *mean,
                         const float *rstd, const float *gamma, const tk_dropout *drop, int where, void *ds, void *dx,
                         float *dgamma, float *dbeta, void *ws, tk_err *e) {
    (void)ws;
    TRY(check(act, "layernorm_bwd", H, drop, e));
    const float *dyf = dy, *sf = s;
    float *dsf = ds, *dxf = dx;
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    const tk_dropout *pre = where == TK_LN_DROP_PRE ? drop : NULL, *post = where == TK_LN_DROP_POST ? drop : NULL;
    // The parameter gradients first: ds may overwrite dy.
#pragma omp parallel for schedule(static)
    for (int h = 0; h < H; h++) {
        double sg = 0, sb = 0;
        for (int64_t r = 0; r < R; r++) {
            size_t i = (size_t)r * H + h;
            float g = dyf[i] * tk_dropout_factor(post, th, step, (int64_t)i);
            float xh = (sf[i] - mean[r]) * rstd[r];
            sg += (double)g * xh;
            sb += g;
        }
        dgamma[h] = (float)sg;
        dbeta[h] = (float)sb;
    }
    int bad = 0;
#pragma omp parallel
    {
        float *row = malloc(sizeof(float) * 2 * (size_t)H);
        if (!row) {
#pragma omp atomic write
            bad = 1;
        }
#pragma omp for schedule(static)
        for (int64_t r = 0; r < R; r++) {
            if (!row) continue;
            size_t o = (size_t)r * H;
            float *gg = row, *xh = row + H;
            double a = 0, b = 0;
            for (int h = 0; h < H; h++) {
                gg[h] = dyf[o + h] * tk_dropout_factor(post, th, step, (int64_t)o + h) * gamma[h];
                xh[h] = (sf[o + h] - mean[r]) * rstd[r];
                a += gg[h];
                b += (double)gg[h] * xh[h];
            }
            float ma = (float)(a / H), mb = (float)(b / H);
            for (int h = 0; h < H; h++) {
                float d = rstd[r] * (gg[h] - ma - xh[h] * mb);
                dsf[o + h] = d;
                if (dxf) dxf[o + h] = d * tk_dropout_factor(pre, th, step, (int64_t)o + h);
            }
        }
        free(row);
    }
    return bad ? tk_err_set(e, TK_EIO, "layernorm: out of host memory") : 0;
}
