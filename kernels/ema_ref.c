// CPU reference of kernels/ema.h: the specification and the GPU tests' oracle.
#include "ema.h"

int tk_ema_update_ref(float *ema, const float *w, size_t n, double decay, tk_err *e) {
    (void)e;
    float d, c;
    tk_ema_factors(decay, &d, &c);
    // (each product rounded: -std=c11 keeps GCC from contracting to a fused multiply-add)
    for (size_t i = 0; i < n; i++) ema[i] = d * ema[i] + c * w[i];
    return 0;
}

int tk_ema_swap_ref(float *ema, float *w, size_t n, tk_err *e) {
    (void)e;
    for (size_t i = 0; i < n; i++) {
        float t = ema[i];
        ema[i] = w[i];
        w[i] = t;
    }
    return 0;
}
