// Dispatch of kernels/dice_score.h (kernels/dispatch.h): the cpu backend runs the reference
// (dice_score_ref.c), the cuda backend the kernels (dice_score.cu).
#include "dice_score.h"
#include "dispatch.h"

size_t tk_dice_score_ws_bytes(tk_backend b) { return TK_DISPATCH_SIZE(b, 0, tk_dice_score_ws_bytes_cuda()); }

int tk_dice_score(tk_ctx *c, const tk_swin_grid *g, const float *acc, const float *wsum, const uint8_t *label,
                  uint8_t *pred, float *dice, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_dice_score_ref(g, acc, wsum, label, pred, dice, e),
                       tk_dice_score_cuda(c, g, acc, wsum, label, pred, dice, ws, e));
}

int tk_dice_mean(const float *dice, int ncases, int nshards, float out[3], tk_err *e) {
    if (ncases < 1 || nshards < 1 || nshards > ncases)
        return tk_err_set(e, TK_EDATA, "dice mean: %d cases over %d ranks (the reference needs a case on every rank)",
                          ncases, nshards);
    float tot[2] = {0, 0};
    for (int r = 0, c0 = 0; r < nshards; r++) {
        const int n = ncases / nshards + (r < ncases % nshards); // np.array_split's run lengths
        float s[2] = {0, 0};
        for (int i = c0; i < c0 + n; i++) s[0] += dice[2 * i], s[1] += dice[2 * i + 1];
        tot[0] += s[0] / (float)n, tot[1] += s[1] / (float)n;
        c0 += n;
    }
    out[0] = tot[0] / (float)nshards, out[1] = tot[1] / (float)nshards;
    out[2] = (out[1] + out[0]) / 2;
    return 0;
}
