// Dispatch of kernels/stem_s2d.h (kernels/dispatch.h): the cpu backend runs the reference
// (stem_s2d_ref.c), the cuda backend the kernel (stem_s2d.cu).
#include "dispatch.h"
#include "stem_s2d.h"

int tk_stem_s2d_input(tk_ctx *c, const uint8_t *src, int N, int S, tk_img_norm n, tk_dtype t, void *xs, tk_err *e) {
    return TK_DISPATCH(c, tk_stem_s2d_input_ref(src, N, S, n, t, xs, e), tk_stem_s2d_input_cuda(c, src, N, S, n, t, xs, e));
}

int tk_stem_s2d_input_f32(tk_ctx *c, const float *x, int N, int S, tk_dtype t, void *xs, tk_err *e) {
    return TK_DISPATCH(c, tk_stem_s2d_input_f32_ref(x, N, S, t, xs, e), tk_stem_s2d_input_f32_cuda(c, x, N, S, t, xs, e));
}

int tk_stem_s2d_weight(tk_ctx *c, const float *w, int K, tk_dtype t, void *ws, tk_err *e) {
    return TK_DISPATCH(c, tk_stem_s2d_weight_ref(w, K, t, ws, e), tk_stem_s2d_weight_cuda(c, w, K, t, ws, e));
}

int tk_stem_s2d_wgrad(tk_ctx *c, const void *dws, int K, tk_dtype t, float *dw, tk_err *e) {
    return TK_DISPATCH(c, tk_stem_s2d_wgrad_ref(dws, K, t, dw, e), tk_stem_s2d_wgrad_cuda(c, dws, K, t, dw, e));
}
