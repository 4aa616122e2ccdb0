// CPU reference of kernels/activation.h: fp32 only (the cpu backend is the fp32 reference).
#include "activation.h"

enum { GELU_F, GELU_B, TANH_F, TANH_B };

// out = f(x) (forwards) or dy * f'(from x, or from y for tanh) (backwards).
static int pointwise(tk_dtype act, int op, int64_t n, const float *x, const float *dy, float *out, tk_err *e) {
    static const char *const names[] = {"gelu_fwd", "gelu_bwd", "tanh_fwd", "tanh_bwd"};
    if (act != TK_F32)
        return tk_err_set(e, TK_EINTERNAL, "%s (cpu): activations in %s, want F32", names[op], tk_dtype_name(act));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++)
        out[i] = op == GELU_F ? tk_gelu_f(x[i])
                 : op == GELU_B ? dy[i] * tk_dgelu_f(x[i])
                 : op == TANH_F ? tanhf(x[i])
                                : dy[i] * (1.0f - x[i] * x[i]);
    return 0;
}

int tk_gelu_fwd_ref(tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    return pointwise(act, GELU_F, n, x, NULL, y, e);
}
int tk_gelu_bwd_ref(tk_dtype act, int64_t n, const void *x, const void *dy, void *dx, tk_err *e) {
    return pointwise(act, GELU_B, n, x, dy, dx, e);
}
int tk_tanh_fwd_ref(tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    return pointwise(act, TANH_F, n, x, NULL, y, e);
}
int tk_tanh_bwd_ref(tk_dtype act, int64_t n, const void *y, const void *dy, void *dx, tk_err *e) {
    return pointwise(act, TANH_B, n, y, dy, dx, e);
}
