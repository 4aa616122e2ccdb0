// CPU reference of kernels/dense_log1p.h.
#include <math.h>

#include "dense_log1p.h"

int tk_dense_log1p_ref(const int32_t *x, int64_t n, float *y, tk_err *e) {
    (void)e;
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = (float)log1p((double)(x[i] > 0 ? x[i] : 0));
    return 0;
}
