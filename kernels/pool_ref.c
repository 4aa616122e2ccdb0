// CPU reference of kernels/pool.h.
#include "act_io.h"
#include "pool.h"

// Max pooling, of round_t(relu(x scale + shift)) when bn is given (pool.h).
static int maxpool_fwd(tk_dtype t, const void *x, const tk_pool_bn *bn, int N, int H, int W, int C, int R, int stride,
                       int pad, void *y, uint8_t *idx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int p = 0; p < P; p++)
            for (int q = 0; q < Q; q++)
                for (int c = 0; c < C; c++) {
                    float m = 0, scale = 0, shift = 0;
                    int best = -1;
                    if (bn) scale = bn->gamma[c] * bn->invstd[c], shift = bn->beta[c] - bn->mean[c] * scale;
                    for (int r = 0; r < R; r++) {
                        int h = p * stride - pad + r;
                        if (h < 0 || h >= H) continue;
                        for (int s = 0; s < R; s++) {
                            int w = q * stride - pad + s;
                            if (w < 0 || w >= W) continue;
                            float v = tk_act_ld(x, t, (((size_t)n * H + h) * W + w) * C + c);
                            if (bn) { // BN's apply and ReLU, rounded as its output would be
                                v = v * scale + shift;
                                v = !(v > 0) && v == v ? 0 : v;
                                if (t == TK_BF16) v = tk_bf16_to_f32(tk_f32_to_bf16(v));
                            }
                            if (best < 0 || v > m || (v != v && m == m)) m = v, best = r * R + s;
                        }
                    }
                    size_t o = (((size_t)n * P + p) * Q + q) * C + c;
                    tk_act_st(y, t, o, m);
                    idx[o] = (uint8_t)best;
                }
    return 0;
}

int tk_maxpool_fwd_ref(tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad, void *y,
                       uint8_t *idx, tk_err *e) {
    return maxpool_fwd(t, x, NULL, N, H, W, C, R, stride, pad, y, idx, e);
}

int tk_maxpool_bn_fwd_ref(tk_dtype t, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R, int stride,
                          int pad, void *y, uint8_t *idx, tk_err *e) {
    return maxpool_fwd(t, x, &bn, N, H, W, C, R, stride, pad, y, idx, e);
}


int tk_maxpool_bwd_ref(tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H, int W, int C,
                       int R, int stride, int pad, void *dx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int h = 0; h < H; h++) {
            int p0, p1;
            tk_pool_windows(h, R, stride, pad, P, &p0, &p1);
            for (int w = 0; w < W; w++) {
                int q0, q1;
                tk_pool_windows(w, R, stride, pad, Q, &q0, &q1);
                for (int c = 0; c < C; c++) {
                    float acc = 0;
                    for (int p = p0; p <= p1; p++)
                        for (int q = q0; q <= q1; q++) {
                            size_t o = (((size_t)n * P + p) * Q + q) * C + c;
                            if (idx[o] != (h - p * stride + pad) * R + (w - q * stride + pad)) continue;
                            float g = tk_act_ld(dy, t, o);
                            if (dy2) g += tk_act_ld(dy2, t, o);
                            acc += g;
                        }
                    tk_act_st(dx, t, (((size_t)n * H + h) * W + w) * C + c, acc);
                }
            }
        }
    return 0;
}

int tk_avgpool_fwd_ref(tk_dtype t, const void *x, int N, int HW, int C, void *y, tk_err *e) {
    TRY(tk_pool_check(t, N, HW, 1, C, 1, 1, 0, e));
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int c = 0; c < C; c++) {
            float s = 0;
            for (int i = 0; i < HW; i++) s += tk_act_ld(x, t, ((size_t)n * HW + i) * C + c);
            tk_act_st(y, t, (size_t)n * C + c, s / (float)HW);
        }
    return 0;
}

int tk_avgpool_bwd_ref(tk_dtype t, const void *dy, int N, int HW, int C, void *dx, tk_err *e) {
    TRY(tk_pool_check(t, N, HW, 1, C, 1, 1, 0, e));
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < N; n++)
        for (int i = 0; i < HW; i++)
            for (int c = 0; c < C; c++)
                tk_act_st(dx, t, ((size_t)n * HW + i) * C + c, tk_act_ld(dy, t, (size_t)n * C + c) / (float)HW);
    return 0;
}
