// CPU reference of kernels/bert_rows.h.
#include <string.h>

#include "bert_rows.h"

int tk_bert_gather_ref(tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *pos,
                       const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels, tk_err *e) {
    if (act != TK_F32) return tk_err_set(e, TK_EINTERNAL, "bert_gather (cpu): activations in %s", tk_dtype_name(act));
    const float *x = hidden;
    float *o = out;
    for (int b = 0; b < B; b++)
        for (int k = 0; k < P; k++) {
            int valid = pos && k < nmask[b];
            int p = valid ? pos[b * P + k] : 0;
            memcpy(o + ((size_t)b * P + k) * H, x + ((size_t)b * L + p) * H, sizeof(float) * (size_t)H);
            if (labels) labels[b * P + k] = valid && ids ? ids[b * P + k] : -1;
        }
    return 0;
}

int tk_bert_scatter_ref(tk_dtype act, int B, int L, int H, int P, const void *drows, const int32_t *pos,
                        const int32_t *nmask, const void *dcls, void *dhidden, tk_err *e) {
    if (act != TK_F32) return tk_err_set(e, TK_EINTERNAL, "bert_scatter (cpu): activations in %s", tk_dtype_name(act));
    const float *g = drows, *gc = dcls;
    float *d = dhidden;
    memset(d, 0, sizeof(float) * (size_t)B * L * H);
    for (int b = 0; b < B; b++) {
        if (gc) memcpy(d + (size_t)b * L * H, gc + (size_t)b * H, sizeof(float) * (size_t)H);
        for (int k = 0; pos && k < P && k < nmask[b]; k++) {
            float *row = d + ((size_t)b * L + pos[b * P + k]) * H;
            const float *src = g + ((size_t)b * P + k) * H;
            for (int h = 0; h < H; h++) row[h] += src[h];
        }
    }
    return 0;
}
