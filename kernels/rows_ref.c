// CPU reference of kernels/rows.h.
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "rows.h"

int tk_rows_copy_ref(const void *src, tk_dtype st, const int32_t *spos, void *dst, tk_dtype dt,
                     const int32_t *dpos, int64_t n, const int64_t *dn, int D, tk_err *e) {
    TRY(tk_rows_copy_check(st, dt, n, D, e));
    n = tk_rows_cap(n, dn);
    size_t ss = tk_dtype_size(st), ds = tk_dtype_size(dt);
#pragma omp parallel for schedule(static)
    for (int64_t k = 0; k < n; k++) {
        int64_t s = (spos ? spos[k] : k) * (int64_t)D, d = (dpos ? dpos[k] : k) * (int64_t)D;
        if (s < 0) { // padding: zeros (all-zero bits in f32 and bf16 alike)
            memset((char *)dst + d * ds, 0, (size_t)D * ds);
            continue;
        }
        if (st == dt) {
            memcpy((char *)dst + d * ds, (const char *)src + s * ss, (size_t)D * ss);
            continue;
        }
        for (int64_t c = 0; c < D; c++)
            if (dt == TK_BF16) ((uint16_t *)dst)[d + c] = tk_f32_to_bf16(((const float *)src)[s + c]);
            else ((float *)dst)[d + c] = tk_bf16_to_f32(((const uint16_t *)src)[s + c]);
    }
    return 0;
}

int tk_rows_segsum_ref(const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                       const int32_t *seg_row, int nseg, const int64_t *dnseg, int64_t nitems, int D, float *dst,
                       tk_err *e) {
    TRY(tk_rows_segsum_check(st, nseg, nitems, D, e));
    nseg = (int)tk_rows_cap(nseg, dnseg);
    if (nseg > 0 && seg_off[nseg] > nitems)
        return tk_err_set(e, TK_EINTERNAL, "rows_segsum: the segments hold %lld items, more than the %lld given",
                          (long long)seg_off[nseg], (long long)nitems);
    // a piece's sums, one row of D per thread
    int nt = omp_get_max_threads();
    float *accs = malloc((size_t)nt * (size_t)D * sizeof *accs);
    if (!accs) return tk_err_set(e, TK_EIO, "rows_segsum: out of host memory");
    // Dynamic: one segment can hold most of the items (a very frequent row).
#pragma omp parallel for schedule(dynamic, 16) num_threads(nt)
    for (int g = 0; g < nseg; g++) {
        float *out = dst + (int64_t)seg_row[g] * D, *acc = accs + (size_t)omp_get_thread_num() * D;
        for (int c = 0; c < D; c++) out[c] = 0.0f;
        // Piece by piece (cut at the multiples of TK_ROWS_PIECE of k); in a piece, items outer and
        // columns inner (a row at a time), which keeps each column's adds in item order. The first
        // piece is summed into out itself (it is the sum so far), the next ones into acc, then added.
        for (int32_t k = seg_off[g], end = seg_off[g + 1]; k < end;) {
            int32_t stop = (int32_t)((k / TK_ROWS_PIECE + 1) * TK_ROWS_PIECE);
            if (stop > end) stop = end;
            float *a = k == seg_off[g] ? out : acc;
            if (a == acc)
                for (int c = 0; c < D; c++) a[c] = 0.0f;
            for (; k < stop; k++) {
                int64_t s = (int64_t)pos[k] * D;
                if (st == TK_F32)
                    for (int c = 0; c < D; c++) a[c] += ((const float *)src)[s + c];
                else
                    for (int c = 0; c < D; c++) a[c] += tk_bf16_to_f32(((const uint16_t *)src)[s + c]);
            }
            if (a == acc)
                for (int c = 0; c < D; c++) out[c] += acc[c];
        }
    }
    free(accs);
    return 0;
}
