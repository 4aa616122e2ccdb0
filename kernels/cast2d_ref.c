// CPU reference of kernels/cast2d.h.
#include "cast2d.h"
#include "core/bf16.h"

int tk_cast2d_ref(const void *src, tk_dtype st, int64_t sld, void *dst, tk_dtype dt, int64_t dld,
                  int64_t rows, int64_t cols, tk_err *e) {
    TRY(tk_cast2d_check(st, sld, dt, dld, rows, cols, e));
#pragma omp parallel for schedule(static)
    for (int64_t r = 0; r < rows; r++)
        for (int64_t k = 0; k < dld; k++) {
            float v = 0;
            if (k < cols)
                v = st == TK_F32 ? ((const float *)src)[r * sld + k]
                                 : tk_bf16_to_f32(((const uint16_t *)src)[r * sld + k]);
            if (dt == TK_F32) ((float *)dst)[r * dld + k] = v;
            else ((uint16_t *)dst)[r * dld + k] = tk_f32_to_bf16(v);
        }
    return 0;
}

int tk_cast_many_ref(const tk_cast_span *spans, int count, tk_dtype st, tk_dtype dt, tk_err *e) {
    TRY(tk_cast_many_check(count, st, dt, e));
    for (int i = 0; i < count; i++) TRY(tk_cast2d_ref(spans[i].src, st, spans[i].n, spans[i].dst, dt, spans[i].n, 1, spans[i].n, e));
    return 0;
}
