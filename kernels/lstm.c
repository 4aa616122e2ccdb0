// Dispatch of kernels/lstm.h (kernels/dispatch.h): the cpu backend runs the reference
// (lstm_ref.c), the cuda backend the kernels and cuBLASLt GEMMs of lstm.cu.
#include "lstm.h"
#include "dispatch.h"

size_t tk_lstm_ws_bytes(tk_dtype t, const tk_lstm_shape *s) { return tk_lstm_ws_layout(t, s).bytes; }

int tk_lstm_fwd(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
                const float *h0, const float *c0, const tk_dropout *drop, void *y, float *hn, float *cn, void *ws,
                tk_err *e) {
    return TK_DISPATCH(c, tk_lstm_fwd_ref(t, s, w, len, x, h0, c0, drop, y, hn, cn, ws, e),
                       tk_lstm_fwd_cuda(c, t, s, w, len, x, h0, c0, drop, y, hn, cn, ws, e));
}

int tk_lstm_bwd(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
                const tk_dropout *drop, const void *dy, const float *dhn, const float *dcn, void *dx, float *dh0,
                float *dc0, const tk_lstm_dw *dw, void *ws, tk_err *e) {
    return TK_DISPATCH(c, tk_lstm_bwd_ref(t, s, w, len, x, drop, dy, dhn, dcn, dx, dh0, dc0, dw, ws, e),
                       tk_lstm_bwd_cuda(c, t, s, w, len, x, drop, dy, dhn, dcn, dx, dh0, dc0, dw, ws, e));
}
