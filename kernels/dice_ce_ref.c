// CPU reference of kernels/dice_ce.h: the softmax, the sums and the gradient in fp64.
#include <math.h>

#include "act_io.h"
#include "dice_ce.h"

enum { K = TK_DICE_CE_CLASSES };

// p = softmax(z) of voxel i (fp64); returns log sum exp.
static double softmax3(tk_dtype t, const void *z, size_t i, int ld, double p[K]) {
    double v[K], mx = -INFINITY, s = 0;
    for (int k = 0; k < K; k++) v[k] = tk_act_ld(z, t, i * ld + k), mx = fmax(mx, v[k]);
    for (int k = 0; k < K; k++) s += (p[k] = exp(v[k] - mx));
    for (int k = 0; k < K; k++) p[k] /= s;
    return mx + log(s);
}

int tk_dice_ce_ref(tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float *loss, float *dice,
                   void *dz, tk_err *e) {
    return tk_dice_ce_acc_ref(t, z, label, N, S, ld, 1.0f, NULL, loss, dice, dz, e);
}

int tk_dice_ce_acc_ref(tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float scale,
                       double *acc, float *loss, float *dice, void *dz, tk_err *e) {
    TRY(tk_dice_ce_check(t, N, S, ld, e));
    for (size_t i = 0; i < (size_t)N * S; i++)
        if (label[i] >= K)
            return tk_err_set(e, TK_EINTERNAL, "dice_ce: label %d at voxel %zu of sample %zu (not in 0..2)", label[i],
                              i % (size_t)S, i / (size_t)S);
    double ce = 0, dsum = 0;
    for (int n = 0; n < N; n++) {
        double I[K] = {0}, P[K] = {0}, T[K] = {0}, d[K] = {0}, den[K] = {0};
        for (int64_t s = 0; s < S; s++) {
            const size_t i = (size_t)n * S + s;
            double p[K];
            const double lse = softmax3(t, z, i, ld, p);
            ce += lse - tk_act_ld(z, t, i * ld + label[i]);
            for (int k = 1; k < K; k++) {
                I[k] += label[i] == k ? p[k] : 0;
                P[k] += p[k];
                T[k] += label[i] == k;
            }
        }
        for (int k = 1; k < K; k++) {
            den[k] = T[k] + P[k] + TK_DICE_SMOOTH;
            d[k] = (2 * I[k] + TK_DICE_SMOOTH) / den[k];
            dsum += d[k];
            if (dice) dice[n * (K - 1) + k - 1] = (float)d[k];
        }
        if (!dz) continue;
        for (int64_t s = 0; s < S; s++) {
            const size_t i = (size_t)n * S + s;
            double p[K], g[K] = {0}, pg = 0;
            softmax3(t, z, i, ld, p);
            for (int k = 1; k < K; k++) {
                g[k] = -(2.0 * (label[i] == k) - d[k]) / (4.0 * N * den[k]) * scale;
                pg += p[k] * g[k];
            }
            for (int k = 0; k < K; k++)
                tk_act_st(dz, t, i * ld + k,
                          (float)(p[k] * (g[k] - pg) + (p[k] - (label[i] == k)) * scale / (2.0 * N * (double)S)));
            for (int k = K; k < ld; k++) tk_act_st(dz, t, i * ld + k, 0);
        }
    }
    const double l = (1.0 - dsum / (N * (K - 1.0)) + ce / ((double)N * S)) / 2;
    *loss = (float)l;
    if (acc) acc[0] += (double)scale * l, acc[1] += 1;
    return 0;
}
