// Dispatch of kernels/dice_ce.h (kernels/dispatch.h): the cpu backend runs the reference
// (dice_ce_ref.c), the cuda backend the kernels (dice_ce.cu).
#include "dice_ce.h"
#include "dispatch.h"

size_t tk_dice_ce_ws_bytes(tk_backend b, int N, int64_t S) {
    (void)N, (void)S; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_dice_ce_ws_bytes_cuda(N, S));
}

int tk_dice_ce(tk_ctx *c, tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float *loss,
               float *dice, void *dz, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_dice_ce_ref(t, z, label, N, S, ld, loss, dice, dz, e),
                       tk_dice_ce_cuda(c, t, z, label, N, S, ld, loss, dice, dz, ws, e));
}

int tk_dice_ce_acc(tk_ctx *c, tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float scale,
                   double *acc, float *loss, float *dice, void *dz, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_dice_ce_acc_ref(t, z, label, N, S, ld, scale, acc, loss, dice, dz, e),
                       tk_dice_ce_acc_cuda(c, t, z, label, N, S, ld, scale, acc, loss, dice, dz, ws, e));
}
