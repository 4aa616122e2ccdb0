// Row gather/scatter and segmented row sums, for the hybrid embedding: the frequent rows are
// replicated on every rank, the rest travel by all-to-all, so rows are packed into send buffers,
// unpacked from receive buffers and their gradients summed per distinct row.
//
// tk_rows_copy, rows of D elements, k < n, c < D:
//   dst[(dpos ? dpos[k] : k) * D + c] = convert(src[(spos ? spos[k] : k) * D + c])
// st, dt each TK_F32 or TK_BF16: to bf16 rounds to nearest even (as tk_f32_to_bf16), bf16 -> f32
// is exact, and a same-type copy moves the bits (NaN payloads included). spos, dpos: int32 row
// numbers (device memory on cuda; NULL = identity); offsets are int64 (row * D may pass 2^31).
// dpos entries must be distinct; src and dst must not overlap. n == 0 is a no-op.
// dn: NULL, or one int64 in device memory (host memory on cpu) read when the op runs: then only
// k < min(n, max(*dn, 0)) are moved. A CUDA graph then launches the op at capacity n and each
// replay moves the rows its plan counted (the hybrid embedding's fixed-size exchange).
//
// tk_rows_segsum, g < nseg, c < D:
//   dst[seg_row[g] * D + c] = sum over k in [seg_off[g], seg_off[g+1]) of src[pos[k] * D + c]
// src in st (TK_F32 or TK_BF16, widened exactly), dst fp32. Each sum is `acc += v` in item order
// from acc = 0.0f in a float (adds only, so no FMA contraction): both backends add in the same
// order and agree bit for bit (a NaN's payload aside), and a run repeats exactly. seg_off (nseg + 1) ascending, seg_row
// distinct; an empty segment writes zeros; rows of dst not named in seg_row are left untouched.
// src and dst must not overlap. dnseg: NULL, or a count read when the op runs, as dn above: only
// segments g < min(nseg, max(*dnseg, 0)) are summed (seg_off then needs that many + 1 entries).
#ifndef TK_KERNELS_ROWS_H
#define TK_KERNELS_ROWS_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

int tk_rows_copy(tk_ctx *c, const void *src, tk_dtype st, const int32_t *spos, void *dst, tk_dtype dt,
                 const int32_t *dpos, int64_t n, const int64_t *dn, int D, tk_err *e);
int tk_rows_copy_ref(const void *src, tk_dtype st, const int32_t *spos, void *dst, tk_dtype dt,
                     const int32_t *dpos, int64_t n, const int64_t *dn, int D, tk_err *e);
int tk_rows_segsum(tk_ctx *c, const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                   const int32_t *seg_row, int nseg, const int64_t *dnseg, int D, float *dst, tk_err *e);
int tk_rows_segsum_ref(const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                       const int32_t *seg_row, int nseg, const int64_t *dnseg, int D, float *dst, tk_err *e);

// min(n, max(*dn, 0)), or n without dn (both sides; the cuda kernels read *dn on the device).
#ifdef __CUDACC__
__host__ __device__
#endif
static inline int64_t tk_rows_cap(int64_t n, const int64_t *dn) {
    if (!dn) return n;
    int64_t v = *dn;
    return v < 0 ? 0 : v < n ? v : n;
}

// The argument checks shared by both sides.
static inline int tk_rows_copy_check(tk_dtype st, tk_dtype dt, int64_t n, int D, tk_err *e) {
    if ((st != TK_F32 && st != TK_BF16) || (dt != TK_F32 && dt != TK_BF16))
        return tk_err_set(e, TK_EINTERNAL, "rows_copy: unsupported types %s -> %s", tk_dtype_name(st),
                          tk_dtype_name(dt));
    if (n < 0 || D <= 0)
        return tk_err_set(e, TK_EINTERNAL, "rows_copy: bad shape n %lld D %d (want n >= 0, D > 0)", (long long)n, D);
    return 0;
}
static inline int tk_rows_segsum_check(tk_dtype st, int nseg, int D, tk_err *e) {
    if (st != TK_F32 && st != TK_BF16)
        return tk_err_set(e, TK_EINTERNAL, "rows_segsum: unsupported source type %s", tk_dtype_name(st));
    if (nseg < 0 || D <= 0)
        return tk_err_set(e, TK_EINTERNAL, "rows_segsum: bad shape nseg %d D %d (want nseg >= 0, D > 0)", nseg, D);
    return 0;
}
#ifdef TK_HAVE_CUDA
int tk_rows_copy_cuda(tk_ctx *c, const void *src, tk_dtype st, const int32_t *spos, void *dst, tk_dtype dt,
                      const int32_t *dpos, int64_t n, const int64_t *dn, int D, tk_err *e);
int tk_rows_segsum_cuda(tk_ctx *c, const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                        const int32_t *seg_row, int nseg, const int64_t *dnseg, int D, float *dst, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
