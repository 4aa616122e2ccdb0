// Dispatch of kernels/ema.h (kernels/dispatch.h): the cpu backend runs the reference (ema_ref.c),
// the cuda backend the kernels (ema.cu).
#include "dispatch.h"
#include "ema.h"

int tk_ema_update(tk_ctx *c, float *ema, const float *w, size_t n, double decay, tk_err *e) {
    if (!(decay >= 0 && decay <= 1)) return tk_err_set(e, TK_EINTERNAL, "ema_update: decay %g not in [0, 1]", decay);
    return TK_DISPATCH(c, tk_ema_update_ref(ema, w, n, decay, e), tk_ema_update_cuda(c, ema, w, n, decay, e));
}

int tk_ema_swap(tk_ctx *c, float *ema, float *w, size_t n, tk_err *e) {
    return TK_DISPATCH(c, tk_ema_swap_ref(ema, w, n, e), tk_ema_swap_cuda(c, ema, w, n, e));
}
