// CPU reference of kernels/xent_smooth.h.
#include <math.h>

#include "act_io.h"
#include "xent_smooth.h"

// Row b's loss (fp64); its gradient into dz when not NULL.
static double row(const float *z, int y, int K, int N, double eps, tk_dtype t, void *dz, size_t off) {
    double mx = -INFINITY, se = 0, sz = 0;
    for (int j = 0; j < K; j++) mx = z[j] > mx ? z[j] : mx;
    for (int j = 0; j < K; j++) se += exp((double)z[j] - mx), sz += z[j];
    double lse = mx + log(se), loss = lse - eps / K * sz - (1.0 - eps) * z[y];
    if (dz)
        for (int j = 0; j < K; j++) {
            double q = eps / K + (j == y ? 1.0 - eps : 0.0);
            tk_act_st(dz, t, off + (size_t)j, (float)((exp((double)z[j] - lse) - q) / N));
        }
    return loss;
}

int tk_xent_smooth_ref(const float *z, const int32_t *label, int B, int K, int N, float eps, tk_dtype t, void *dz,
                       double *acc, tk_err *e) {
    TRY(tk_xent_check(B, K, N, eps, t, e));
    double sum = 0;
    for (int b = 0; b < B; b++) {
        size_t off = (size_t)b * K;
        if (label[b] < 0 || label[b] >= K) {
            if (dz)
                for (int j = 0; j < K; j++) tk_act_st(dz, t, off + (size_t)j, 0.0f);
            continue;
        }
        sum += row(z + off, label[b], K, N, eps, t, dz, off);
    }
    if (acc) {
        acc[0] += sum / N;
        acc[1] += 1;
    }
    return 0;
}

int tk_top1_count_ref(const float *z, const int32_t *label, int B, int K, int64_t *count, tk_err *e) {
    if (B < 0 || K < 1) return tk_err_set(e, TK_EINTERNAL, "top1: bad shape B %d K %d", B, K);
    int64_t n = 0;
    for (int b = 0; b < B; b++) {
        const float *r = z + (size_t)b * K;
        int best = -1;
        for (int j = 0; j < K; j++)
            if (r[j] == r[j] && (best < 0 || r[j] > r[best])) best = j;
        n += best >= 0 && best == label[b];
    }
    *count += n;
    return 0;
}
