// CPU reference of kernels/activation.h: fp32 only (the cpu backend is the fp32 reference).
#include "activation.h"

static int check(tk_dtype act, const char *op, tk_err *e) {
    return act == TK_F32 ? 0 : tk_err_set(e, TK_EINTERNAL, "%s (cpu): activations in %s, want F32", op, tk_dtype_name(act));
}

int tk_gelu_fwd_ref(tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    TRY(check(act, "gelu_fwd", e));
    const float *a = x;
    float *b = y;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) b[i] = tk_gelu_f(a[i]);
    return 0;
}

int tk_gelu_bwd_ref(tk_dtype act, int64_t n, const void *x, const void *dy, void *dx, tk_err *e) {
    TRY(check(act, "gelu_bwd", e));
    const float *a = x, *g = dy;
    float *o = dx;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) o[i] = g[i] * tk_dgelu_f(a[i]);
    return 0;
}

int tk_tanh_fwd_ref(tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    TRY(check(act, "tanh_fwd", e));
    const float *a = x;
    float *b = y;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) b[i] = tanhf(a[i]);
    return 0;
}

int tk_tanh_bwd_ref(tk_dtype act, int64_t n, const void *y, const void *dy, void *dx, tk_err *e) {
    TRY(check(act, "tanh_bwd", e));
    const float *a = y, *g = dy;
    float *o = dx;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) o[i] = g[i] * (1.0f - a[i] * a[i]);
    return 0;
}
