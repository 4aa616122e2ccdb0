// CPU reference of kernels/interaction.h (dot interaction, strictly lower triangle).
#include <stdlib.h>
#include <string.h>

#include "cast2d.h"
#include "core/bf16.h"
#include "interaction.h"

static int check_args(int T, int G, int D, int W, const char *op, tk_err *e) {
    if (G < 1 || G > T) return tk_err_set(e, TK_EINTERNAL, "%s: group of %d tables, not in [1, %d]", op, G, T);
    if (W >= tk_interaction_width(T, D)) return 0;
    return tk_err_set(e, TK_EINTERNAL, "%s: output width %d < %d features", op, W,
                      tk_interaction_width(T, D));
}

// Element offset of the vector of (sample b, table t) in the grouped layout (interaction.h).
static inline size_t emb_at(int b, int t, int B, int G, int D) {
    return (((size_t)(t / G) * (size_t)B + (size_t)b) * (size_t)G + (size_t)(t % G)) * (size_t)D;
}

// Vector i of sample b: 0 = the bottom-MLP output, 1..T = the embeddings.
static inline const float *vec(const float *bot, const float *emb, int b, int i, int B, int G, int D) {
    return i == 0 ? bot + (size_t)b * D : emb + emb_at(b, i - 1, B, G, D);
}

static int fwd_ref(const float *bot, const float *emb, int B, int T, int G, int D, int W, float *out,
                   tk_err *e) {
    TRY(check_args(T, G, D, W, "interaction_fwd", e));
    int F = T + 1, width = tk_interaction_width(T, D);
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        float *o = out + (size_t)b * W;
        memcpy(o, bot + (size_t)b * D, (size_t)D * sizeof(float));
        int p = D;
        for (int i = 0; i < F; i++) {
            const float *vi = vec(bot, emb, b, i, B, G, D);
            for (int j = 0; j < i; j++) {
                const float *vj = vec(bot, emb, b, j, B, G, D);
                double s = 0;
                for (int d = 0; d < D; d++) s += (double)vi[d] * vj[d];
                o[p++] = (float)s;
            }
        }
        for (int k = width; k < W; k++) o[k] = 0;
    }
    return 0;
}

static int bwd_ref(const float *bot, const float *emb, const float *dout, int B, int T, int G, int D, int W,
                   int bot_relu, float *dbot, float *demb, tk_err *e) {
    TRY(check_args(T, G, D, W, "interaction_bwd", e));
    int F = T + 1;
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++) {
        const float *g = dout + (size_t)b * W;
        double acc[F][D]; // d loss / d v_i, accumulated in fp64
        memset(acc, 0, sizeof acc);
        for (int d = 0; d < D; d++) acc[0][d] = g[d]; // v_0 is also copied to the output
        int p = D;
        for (int i = 0; i < F; i++) {
            const float *vi = vec(bot, emb, b, i, B, G, D);
            for (int j = 0; j < i; j++) {
                const float *vj = vec(bot, emb, b, j, B, G, D);
                double gz = g[p++];
                for (int d = 0; d < D; d++) {
                    acc[i][d] += gz * vj[d];
                    acc[j][d] += gz * vi[d];
                }
            }
        }
        for (int d = 0; d < D; d++) {
            float v = (float)acc[0][d];
            dbot[(size_t)b * D + d] = bot_relu && bot[(size_t)b * D + d] <= 0 ? 0.0f : v;
        }
        for (int i = 1; i < F; i++) {
            float *o = demb + emb_at(b, i - 1, B, G, D);
            for (int d = 0; d < D; d++) o[d] = (float)acc[i][d];
        }
    }
    return 0;
}

int tk_interaction_fwd_ref(const float *bot, const float *emb, int B, int T, int D, int W,
                           float *out, tk_err *e) {
    return fwd_ref(bot, emb, B, T, T, D, W, out, e);
}

int tk_interaction_bwd_ref(const float *bot, const float *emb, const float *dout, int B, int T,
                           int D, int W, int bot_relu, float *dbot, float *demb,
                           tk_err *e) {
    return bwd_ref(bot, emb, dout, B, T, T, D, W, bot_relu, dbot, demb, e);
}

// bf16 (rows, cols) -> a new f32 array (NULL when out of memory).
static float *widen(const void *x, int64_t rows, int64_t cols) {
    float *f = malloc((size_t)(rows * cols) * sizeof(float) + 1);
    if (f) tk_cast2d_ref(x, TK_BF16, cols, f, TK_F32, cols, rows, cols, NULL);
    return f;
}

// bf16 <-> f32 of the valid slots of an emb / demb in the grouped layout (the unused slots of the
// last group are neither read nor written), rounding as tk_cast2d_ref.
static void cast_grouped(const void *src, tk_dtype st, void *dst, int B, int T, int G, int D) {
#pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++) {
            size_t o = emb_at(b, t, B, G, D);
            for (size_t k = o; k < o + (size_t)D; k++) {
                if (st == TK_BF16) ((float *)dst)[k] = tk_bf16_to_f32(((const uint16_t *)src)[k]);
                else ((uint16_t *)dst)[k] = tk_f32_to_bf16(((const float *)src)[k]);
            }
        }
}

int tk_interaction_fwd_act_ref(tk_dtype act, const void *bot, const void *emb, int B, int T, int G, int D,
                               int W, void *out, tk_err *e) {
    if (act == TK_F32) return fwd_ref(bot, emb, B, T, G, D, W, out, e);
    if (act != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "interaction_fwd: activations in %s", tk_dtype_name(act));
    TRY(check_args(T, G, D, W, "interaction_fwd", e));
    float *fb = widen(bot, B, D), *fo = malloc((size_t)B * W * sizeof(float) + 1);
    float *fe = malloc(tk_interaction_emb_elems(B, T, G, D) * sizeof(float) + 1);
    int rc = !fb || !fe || !fo ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
    if (!rc) cast_grouped(emb, TK_BF16, fe, B, T, G, D);
    if (!rc) rc = fwd_ref(fb, fe, B, T, G, D, W, fo, e);
    if (!rc) rc = tk_cast2d_ref(fo, TK_F32, W, out, TK_BF16, W, B, W, e);
    free(fb);
    free(fe);
    free(fo);
    return rc;
}

int tk_interaction_bwd_act_ref(tk_dtype act, const void *bot, const void *emb, const void *dout, int B,
                               int T, int G, int D, int W, int bot_relu, void *dbot, void *demb,
                               tk_err *e) {
    if (act == TK_F32) return bwd_ref(bot, emb, dout, B, T, G, D, W, bot_relu, dbot, demb, e);
    if (act != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "interaction_bwd: activations in %s", tk_dtype_name(act));
    TRY(check_args(T, G, D, W, "interaction_bwd", e));
    size_t ne = tk_interaction_emb_elems(B, T, G, D);
    float *fb = widen(bot, B, D), *fg = widen(dout, B, W), *fe = malloc(ne * sizeof(float) + 1);
    float *fd = malloc((size_t)B * D * sizeof(float) + 1), *fde = malloc(ne * sizeof(float) + 1);
    int rc = !fb || !fe || !fg || !fd || !fde ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
    if (!rc) cast_grouped(emb, TK_BF16, fe, B, T, G, D);
    if (!rc) rc = bwd_ref(fb, fe, fg, B, T, G, D, W, bot_relu, fd, fde, e);
    if (!rc) rc = tk_cast2d_ref(fd, TK_F32, D, dbot, TK_BF16, D, B, D, e);
    if (!rc) cast_grouped(fde, TK_F32, demb, B, T, G, D);
    free(fb);
    free(fe);
    free(fg);
    free(fd);
    free(fde);
    return rc;
}
