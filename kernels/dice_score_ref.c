// CPU reference of kernels/dice_score.h: one pass over the output voxels, counts in int64.
#include <math.h>

#include "dice_score.h"

int tk_dice_score_ref(const tk_swin_grid *g, const float *acc, const float *wsum, const uint8_t *label, uint8_t *pred,
                      float *dice, tk_err *e) {
    int64_t I[3] = {0}, T[3] = {0}, P[3] = {0};
    size_t v = 0;
    for (int64_t i = 0; i < g->out[0]; i++)
        for (int64_t j = 0; j < g->out[1]; j++)
            for (int64_t k = 0; k < g->out[2]; k++, v++) {
                const size_t li = ((size_t)(i + g->crop[0]) * g->shape[1] + j + g->crop[1]) * g->shape[2] + k + g->crop[2];
                const int y = label[li];
                if (y >= TK_SWIN_CLASSES)
                    return tk_err_set(e, TK_EINTERNAL, "dice_score: label %d at voxel (%lld, %lld, %lld) (not in 0..2)",
                                      y, (long long)(i + g->crop[0]), (long long)(j + g->crop[1]),
                                      (long long)(k + g->crop[2]));
                // torch.argmax: the first maximum; a NaN counts as the largest value
                int best = 0;
                float bv = acc[v * 3] / wsum[v];
                for (int c = 1; c < TK_SWIN_CLASSES; c++) {
                    const float x = acc[v * 3 + c] / wsum[v];
                    if (!isnan(bv) && (isnan(x) || x > bv)) best = c, bv = x;
                }
                if (pred) pred[v] = (uint8_t)best;
                P[best]++, T[y]++, I[y] += best == y;
            }
    for (int c = 1; c < TK_SWIN_CLASSES; c++) dice[c - 1] = tk_dice_of_counts(I[c], T[c], P[c]);
    return 0;
}
