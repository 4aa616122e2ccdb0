// CPU reference of kernels/colcat.h: row by row, two memcpy's a row (a's side element by element
// with a bias).
#include <string.h>

#include "act_io.h"
#include "colcat.h"

int tk_colcat_ref(tk_dtype t, const void *a, int64_t ca, const float *bias, const void *b, int64_t cb, int64_t rows,
                  void *out, tk_err *e) {
    TRY(tk_colcat_check(t, ca, cb, rows, e));
    const size_t es = tk_dtype_size(t), na = (size_t)ca * es, nb = (size_t)cb * es;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        char *o = (char *)out + (size_t)r * (na + nb);
        if (bias)
            for (int64_t k = 0; k < ca; k++) tk_act_st(o, t, (size_t)k, tk_act_ld(a, t, (size_t)(r * ca + k)) + bias[k]);
        else
            memcpy(o, (const char *)a + (size_t)r * na, na);
        memcpy(o + na, (const char *)b + (size_t)r * nb, nb);
    }
    return 0;
}

int tk_colsplit_ref(tk_dtype t, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b, tk_err *e) {
    TRY(tk_colcat_check(t, ca, cb, rows, e));
    const size_t es = tk_dtype_size(t), na = (size_t)ca * es, nb = (size_t)cb * es;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const char *i = (const char *)in + (size_t)r * (na + nb);
        memcpy((char *)a + (size_t)r * na, i, na);
        memcpy((char *)b + (size_t)r * nb, i + na, nb);
    }
    return 0;
}
