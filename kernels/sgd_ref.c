// CPU reference of kernels/sgd.h.
#include "sgd.h"

int tk_sgd_update_ref(float *w, const float *g, size_t n, const float *lr, void *copy,
                      tk_dtype copy_type, tk_err *e) {
    if (copy && copy_type != TK_BF16)
        return tk_err_set(e, TK_EINTERNAL, "sgd_update: compute copy dtype %s not supported",
                          tk_dtype_name(copy_type));
    float rate = *lr;
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        w[i] -= rate * g[i];
        if (copy) ((uint16_t *)copy)[i] = tk_f32_to_bf16(w[i]);
    }
    return 0;
}
