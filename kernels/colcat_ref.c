// CPU reference of kernels/colcat.h: row by row, two memcpy's a row.
#include <string.h>

#include "colcat.h"

int tk_colcat_ref(size_t es, const void *a, int64_t ca, const void *b, int64_t cb, int64_t rows, void *out, tk_err *e) {
    TRY(tk_colcat_check(es, ca, cb, rows, e));
    const size_t na = (size_t)ca * es, nb = (size_t)cb * es;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        char *o = (char *)out + (size_t)r * (na + nb);
        memcpy(o, (const char *)a + (size_t)r * na, na);
        memcpy(o + na, (const char *)b + (size_t)r * nb, nb);
    }
    return 0;
}

int tk_colsplit_ref(size_t es, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b, tk_err *e) {
    TRY(tk_colcat_check(es, ca, cb, rows, e));
    const size_t na = (size_t)ca * es, nb = (size_t)cb * es;
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++) {
        const char *i = (const char *)in + (size_t)r * (na + nb);
        memcpy((char *)a + (size_t)r * na, i, na);
        memcpy((char *)b + (size_t)r * nb, i + na, nb);
    }
    return 0;
}
