// CPU reference of kernels/conv3d_bias.h.
#include "act_io.h"
#include "conv3d_bias.h"

int tk_conv3d_bias_fwd_ref(tk_dtype t, void *y, int64_t M, int K, const float *b, tk_err *e) {
    TRY(tk_conv3d_bias_check(t, M, K, e));
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            const size_t i = (size_t)m * K + k;
            tk_act_st(y, t, i, tk_act_ld(y, t, i) + b[k]);
        }
    return 0;
}

int tk_conv3d_bias_bwd_ref(tk_dtype t, const void *dy, int64_t M, int K, float *db, tk_err *e) {
    TRY(tk_conv3d_bias_check(t, M, K, e));
    // 16 channels (a cache line of fp32) at a time, the rows in memory order; each channel's sum
    // runs over the rows in order
#pragma omp parallel for schedule(static)
    for (int k0 = 0; k0 < K; k0 += 16) {
        const int nk = K - k0 < 16 ? K - k0 : 16;
        double s[16] = {0};
        for (int64_t m = 0; m < M; m++)
            for (int k = 0; k < nk; k++) s[k] += tk_act_ld(dy, t, (size_t)m * K + k0 + k);
        for (int k = 0; k < nk; k++) db[k0 + k] = (float)s[k];
    }
    return 0;
}
