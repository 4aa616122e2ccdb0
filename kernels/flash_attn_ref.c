// CPU reference of kernels/flash_attn.h: the definitions written out row by row (fp64 sums of
// the activations' values, fp32 or bf16 storage), one OpenMP task per (sequence, head, row), so
// every output element is written once and nothing is allocated.
#include <math.h>

#include "core/bf16.h"
#include "flash_attn.h"

static inline float ld(tk_dtype t, const void *p, size_t i) {
    return t == TK_F32 ? ((const float *)p)[i] : tk_bf16_to_f32(((const uint16_t *)p)[i]);
}
static inline void st(tk_dtype t, void *p, size_t i, float v) {
    if (t == TK_F32) ((float *)p)[i] = v;
    else ((uint16_t *)p)[i] = tk_f32_to_bf16(v);
}

static int check(tk_dtype act, const char *op, int nseq, int NH, int D, int Lstride, const int32_t *len,
                 const tk_dropout *d, tk_err *e) {
    if (act != TK_F32 && act != TK_BF16)
        return tk_err_set(e, TK_EINTERNAL, "%s (cpu): activations in %s, want F32 or BF16", op, tk_dtype_name(act));
    if (nseq < 0 || NH < 1 || D < 1 || Lstride < 1)
        return tk_err_set(e, TK_EINTERNAL, "%s: bad shape nseq %d NH %d D %d Lstride %d", op, nseq, NH, D, Lstride);
    if (d && d->p > 0 && !d->step) return tk_err_set(e, TK_EINTERNAL, "%s: dropout without a step counter", op);
    for (int s = 0; s < nseq; s++)
        if (len[s] < 0 || len[s] > Lstride)
            return tk_err_set(e, TK_EINTERNAL, "%s: sequence %d has length %d, outside [0, %d]", op, s, len[s], Lstride);
    return 0;
}

// The score q_i . k_j / sqrt(D) of rows ri (query) and rj (key), head h.
static double score(tk_dtype act, const void *qkv, size_t ld3, int NH, int D, int h, size_t ri, size_t rj,
                    double scale) {
    double a = 0;
    for (int d = 0; d < D; d++)
        a += (double)ld(act, qkv, ri * ld3 + (size_t)h * D + d) * ld(act, qkv, rj * ld3 + ((size_t)NH + h) * D + d);
    return a * scale;
}

int tk_flash_attn_fwd_ref(tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start, const int32_t *len,
                          const void *qkv, const tk_dropout *drop, void *ctx, float *lse, tk_err *e) {
    TRY(check(act, "flash_attn_fwd", nseq, NH, D, Lstride, len, drop, e));
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    const size_t ld3 = (size_t)3 * NH * D, ldo = (size_t)NH * D;
    const double scale = 1.0 / sqrt((double)D);
#pragma omp parallel for collapse(3) schedule(dynamic, 4)
    for (int s = 0; s < nseq; s++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < Lstride; i++) {
                const int n = len[s];
                if (i >= n) continue;
                const size_t r0 = (size_t)start[s], ri = r0 + i;
                double mx = -INFINITY, sum = 0, acc[D];
                for (int j = 0; j < n; j++) {
                    double v = score(act, qkv, ld3, NH, D, h, ri, r0 + j, scale);
                    mx = v > mx ? v : mx;
                }
                for (int j = 0; j < n; j++) sum += exp(score(act, qkv, ld3, NH, D, h, ri, r0 + j, scale) - mx);
                for (int d = 0; d < D; d++) acc[d] = 0;
                const int64_t drow = (((int64_t)s * NH + h) * Lstride + i) * Lstride;
                for (int j = 0; j < n; j++) {
                    double p = exp(score(act, qkv, ld3, NH, D, h, ri, r0 + j, scale) - mx) / sum;
                    p *= tk_dropout_factor(drop, th, step, drow + j);
                    for (int d = 0; d < D; d++) acc[d] += p * ld(act, qkv, (r0 + j) * ld3 + ((size_t)2 * NH + h) * D + d);
                }
                for (int d = 0; d < D; d++) st(act, ctx, ri * ldo + (size_t)h * D + d, (float)acc[d]);
                lse[((size_t)s * NH + h) * Lstride + i] = (float)(mx + log(sum));
            }
    return 0;
}

size_t tk_flash_attn_bwd_ws_bytes(int rows, int nseq, int NH, int D, int Lstride) {
    (void)rows, (void)D;
    const size_t words = (size_t)(Lstride + 63) / 64;
    return tk_flash_attn_delta_bytes_(nseq, NH, Lstride) + (size_t)nseq * NH * Lstride * words * 8;
}

int tk_flash_attn_bwd_ref(tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start, const int32_t *len,
                          const void *qkv, const void *ctx, const float *lse, const void *dctx, const tk_dropout *drop,
                          void *ws, void *dqkv, tk_err *e) {
    TRY(check(act, "flash_attn_bwd", nseq, NH, D, Lstride, len, drop, e));
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    const size_t ld3 = (size_t)3 * NH * D, ldo = (size_t)NH * D;
    const double scale = 1.0 / sqrt((double)D);
    float *delta = ws; // D_i = dctx_i . ctx_i, (nseq, NH, Lstride)
#pragma omp parallel for collapse(3) schedule(static)
    for (int s = 0; s < nseq; s++)
        for (int h = 0; h < NH; h++)
            for (int i = 0; i < Lstride; i++) {
                if (i >= len[s]) continue;
                const size_t o = ((size_t)start[s] + i) * ldo + (size_t)h * D;
                double a = 0;
                for (int d = 0; d < D; d++) a += (double)ld(act, dctx, o + d) * ld(act, ctx, o + d);
                delta[((size_t)s * NH + h) * Lstride + i] = (float)a;
            }
    // Task (s, h, x): query x's dq, and key x's dk and dv.
#pragma omp parallel for collapse(3) schedule(dynamic, 4)
    for (int s = 0; s < nseq; s++)
        for (int h = 0; h < NH; h++)
            for (int x = 0; x < Lstride; x++) {
                const int n = len[s];
                if (x >= n) continue;
                const size_t r0 = (size_t)start[s], lrow = ((size_t)s * NH + h) * Lstride;
                const int64_t dbase = (int64_t)lrow * Lstride;
                const size_t qo = (size_t)h * D, ko = ((size_t)NH + h) * D, vo = ((size_t)2 * NH + h) * D;
                double gq[D], gk[D], gv[D];
                for (int d = 0; d < D; d++) gq[d] = gk[d] = gv[d] = 0;
                // P_ij, its dropout factor, dS_ij of query i and key j
#define TK_FA_TERMS(i, j)                                                                                              \
    const double p = exp(score(act, qkv, ld3, NH, D, h, r0 + (i), r0 + (j), scale) - lse[lrow + (i)]);                 \
    const double m = tk_dropout_factor(drop, th, step, dbase + (int64_t)(i) * Lstride + (j));                          \
    double dpd = 0;                                                                                                    \
    for (int d = 0; d < D; d++)                                                                                        \
        dpd += (double)ld(act, dctx, (r0 + (i)) * ldo + qo + d) * ld(act, qkv, (r0 + (j)) * ld3 + vo + d);             \
    const double ds = p * (dpd * m - delta[lrow + (i)]);
                for (int j = 0; j < n; j++) { // x is the query
                    TK_FA_TERMS(x, j)
                    for (int d = 0; d < D; d++) gq[d] += ds * ld(act, qkv, (r0 + j) * ld3 + ko + d);
                }
                for (int i = 0; i < n; i++) { // x is the key
                    TK_FA_TERMS(i, x)
                    for (int d = 0; d < D; d++) {
                        gk[d] += ds * ld(act, qkv, (r0 + i) * ld3 + qo + d);
                        gv[d] += p * m * ld(act, dctx, (r0 + i) * ldo + qo + d);
                    }
                }
#undef TK_FA_TERMS
                for (int d = 0; d < D; d++) {
                    st(act, dqkv, (r0 + x) * ld3 + qo + d, (float)(gq[d] * scale));
                    st(act, dqkv, (r0 + x) * ld3 + ko + d, (float)(gk[d] * scale));
                    st(act, dqkv, (r0 + x) * ld3 + vo + d, (float)gv[d]);
                }
            }
    return 0;
}
