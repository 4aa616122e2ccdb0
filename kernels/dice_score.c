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
