// CPU reference of kernels/stem_s2d.h.
#include <string.h>

#include "act_io.h"
#include "stem_s2d.h"

// The input map from 8-bit pixels (normalized here) or from normalized fp32 values (f32).
static int input_ref(const uint8_t *src, const float *f32, int N, int S, tk_img_norm n, tk_dtype t, void *xs,
                     tk_err *e) {
    TRY(tk_stem_s2d_check(N, S, 1, t, e));
    const int Hs = tk_s2d_side(S);
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < (int64_t)N * Hs * Hs; p++) {
        const int j = (int)(p % Hs), i = (int)(p / Hs % Hs);
        const int64_t img = p / ((int64_t)Hs * Hs);
        for (int ch = 0; ch < TK_S2D_C; ch++) {
            const int blk = ch / 3, c = ch % 3, y = 2 * (i - 2) + blk / 2, x = 2 * (j - 2) + blk % 2;
            float v = 0.0f;
            if (ch < 12 && y >= 0 && y < S && x >= 0 && x < S) {
                const int64_t at = ((img * S + y) * S + x) * 3 + c;
                v = f32 ? f32[at] : ((float)src[at] - n.mean[c]) / n.std[c];
            }
            tk_act_st(xs, t, (size_t)p * TK_S2D_C + ch, v);
        }
    }
    return 0;
}

int tk_stem_s2d_input_ref(const uint8_t *src, int N, int S, tk_img_norm n, tk_dtype t, void *xs, tk_err *e) {
    return input_ref(src, NULL, N, S, n, t, xs, e);
}

int tk_stem_s2d_input_f32_ref(const float *x, int N, int S, tk_dtype t, void *xs, tk_err *e) {
    const tk_img_norm none = {{0, 0, 0}, {1, 1, 1}};
    return input_ref(NULL, x, N, S, none, t, xs, e);
}

int tk_stem_s2d_weight_ref(const float *w, int K, tk_dtype t, void *ws, tk_err *e) {
    TRY(tk_stem_s2d_check(0, 2, K, t, e));
    const int per = 4 * 4 * TK_S2D_C;
    for (int64_t i = 0; i < (int64_t)K * per; i++) tk_act_st(ws, t, (size_t)i, 0.0f);
    for (int k = 0; k < K; k++)
        for (int r = 0; r < 7; r++)
            for (int s = 0; s < 7; s++)
                for (int c = 0; c < 3; c++)
                    tk_act_st(ws, t, (size_t)k * per + tk_s2d_tap(r, s, c), w[((k * 7 + r) * 7 + s) * 3 + c]);
    return 0;
}

int tk_stem_s2d_wgrad_ref(const void *dws, int K, tk_dtype t, float *dw, tk_err *e) {
    TRY(tk_stem_s2d_check(0, 2, K, t, e));
    const int per = 4 * 4 * TK_S2D_C;
    for (int k = 0; k < K; k++)
        for (int r = 0; r < 7; r++)
            for (int s = 0; s < 7; s++)
                for (int c = 0; c < 3; c++)
                    dw[((k * 7 + r) * 7 + s) * 3 + c] = tk_act_ld(dws, t, (size_t)k * per + tk_s2d_tap(r, s, c));
    return 0;
}
