// CPU reference of kernels/bert_rows.h.
#include <string.h>

#include "bert_rows.h"

static int f32_only(tk_dtype act, const char *op, tk_err *e) {
    if (act != TK_F32) return tk_err_set(e, TK_EINTERNAL, "%s (cpu): activations in %s", op, tk_dtype_name(act));
    return 0;
}

static size_t first_row(const int32_t *start, int b, int L) { return start ? (size_t)start[b] : (size_t)b * L; }

int tk_bert_starts_ref(int B, int L, int packed, const int32_t *len, int32_t *start, tk_err *e) {
    (void)e;
    int32_t s = 0;
    for (int b = 0; b <= B; b++) {
        start[b] = packed ? s : b * L;
        if (b < B) s += len[b];
    }
    return 0;
}

int tk_bert_pack_ref(tk_dtype act, int B, int L, int H, int64_t rows, const int32_t *start, const int32_t *len,
                     const void *src, void *dst, tk_err *e) {
    TRY(f32_only(act, "bert_pack", e));
    const float *s = src;
    float *d = dst;
    for (int b = 0; b < B; b++)
        memcpy(d + (size_t)start[b] * H, s + (size_t)b * L * H, sizeof(float) * (size_t)len[b] * H);
    if (rows > start[B]) memset(d + (size_t)start[B] * H, 0, sizeof(float) * (size_t)(rows - start[B]) * H);
    return 0;
}

int tk_bert_unpack_ref(tk_dtype act, int B, int L, int H, const int32_t *start, const int32_t *len, const void *src,
                       void *dst, tk_err *e) {
    TRY(f32_only(act, "bert_unpack", e));
    const float *s = src;
    float *d = dst;
    for (int b = 0; b < B; b++) {
        memcpy(d + (size_t)b * L * H, s + (size_t)start[b] * H, sizeof(float) * (size_t)len[b] * H);
        memset(d + ((size_t)b * L + len[b]) * H, 0, sizeof(float) * (size_t)(L - len[b]) * H);
    }
    return 0;
}

int tk_bert_gather_ref(tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *start,
                       const int32_t *pos, const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels,
                       tk_err *e) {
    TRY(f32_only(act, "bert_gather", e));
    const float *x = hidden;
    float *o = out;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < P; k++) {
            int valid = pos && k < nmask[b];
            int p = valid ? pos[b * P + k] : 0;
            memcpy(o + ((size_t)b * P + k) * H, x + (first_row(start, b, L) + p) * H, sizeof(float) * (size_t)H);
            if (labels) labels[b * P + k] = valid && ids ? ids[b * P + k] : -1;
        }
    return 0;
}

int tk_bert_scatter_ref(tk_dtype act, int B, int L, int H, int P, int64_t rows, const void *drows,
                        const int32_t *start, const int32_t *pos, const int32_t *nmask, const void *dcls,
                        void *dhidden, tk_err *e) {
    TRY(f32_only(act, "bert_scatter", e));
    const float *g = drows, *gc = dcls;
    float *d = dhidden;
    memset(d, 0, sizeof(float) * (size_t)(rows > 0 ? rows : (int64_t)B * L) * H);
    for (int b = 0; b < B; b++) {
        const size_t r0 = first_row(start, b, L);
        if (gc) memcpy(d + r0 * H, gc + (size_t)b * H, sizeof(float) * (size_t)H);
        for (int k = 0; pos && k < P && k < nmask[b]; k++) {
            float *row = d + (r0 + pos[b * P + k]) * H;
            const float *src = g + ((size_t)b * P + k) * H;
            for (int h = 0; h < H; h++) row[h] += src[h];
        }
    }
    return 0;
}
