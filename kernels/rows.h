// Row gather/scatter and segmented row sums, for the hybrid embedding: the frequent rows are
// replicated on every rank, the rest travel by all-to-all, so rows are packed into send buffers,
// unpacked from receive buffers and their gradients summed per distinct row.
//
// tk_rows_copy, rows of D elements, k < n, c < D:
//   dst[(dpos ? dpos[k] : k) * D + c] = convert(src[(spos ? spos[k] : k) * D + c])
// st, dt each TK_F32 or TK_BF16: to bf16 rounds to nearest even (as tk_f32_to_bf16), bf16 -> f32
// is exact, and a same-type copy moves the bits (NaN payloads included). spos, dpos: int32 row
// numbers (device memory on cuda; NULL = identity); offsets are int64 (row * D may pass 2^31).
// dpos entries must be distinct; src and dst must not overlap. n == 0 is a no-op. A negative
// spos[k] is padding: row k of the destination is written with zeros (the hybrid embedding's
// fixed exchange pads its send lists with -1).
// dn: NULL, or one int64 in device memory (host memory on cpu) read when the op runs: then only
// k < min(n, max(*dn, 0)) are moved. A CUDA graph then launches the op at capacity n and each
// replay moves the rows its plan counted (the hybrid embedding's fixed-size exchange).
//
// tk_rows_segsum, g < nseg, c < D:
//   dst[seg_row[g] * D + c] = sum over k in [seg_off[g], seg_off[g+1]) of src[pos[k] * D + c]
// src in st (TK_F32 or TK_BF16, widened exactly), dst fp32. The order of the adds is fixed, the
// same on both backends, which agree bit for bit (a NaN's payload aside), and a run repeats
// exactly: the items are cut into pieces at the multiples of TK_ROWS_PIECE of k (the item index,
// counted over all segments) and at the segments' ends; a piece is summed `acc += v` in item order
// from acc = 0.0f in a float (adds only: no FMA contraction); a segment's sum is its first piece,
// then `sum += piece` for the next pieces in order. (So a hot row's tens of thousands of items
// are summed by many threads at once, not in one chain of adds.) seg_off (nseg + 1) ascending,
// seg_row distinct; an empty segment writes zeros; rows of dst not named in seg_row are left
// untouched. src and dst must not overlap. dnseg: NULL, or a count read when the op runs, as dn
// above: only segments g < min(nseg, max(*dnseg, 0)) are summed (seg_off then needs that many + 1
// entries). nitems: at least seg_off[that count] (the items; a capacity when dnseg is given; the
// reference checks it, TK_EINTERNAL); ws: tk_rows_segsum_ws_bytes(backend, nitems, D) bytes of
// device memory (the pieces' sums; none on the cpu).
#define TK_ROWS_PIECE 256
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
size_t tk_rows_segsum_ws_bytes(tk_backend b, int64_t nitems, int D);
int tk_rows_segsum(tk_ctx *c, const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                   const int32_t *seg_row, int nseg, const int64_t *dnseg, int64_t nitems, int D, float *dst,
                   void *ws, tk_err *e);
int tk_rows_segsum_ref(const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                       const int32_t *seg_row, int nseg, const int64_t *dnseg, int64_t nitems, int D, float *dst,
                       tk_err *e);

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
static inline int tk_rows_segsum_check(tk_dtype st, int nseg, int64_t nitems, int D, tk_err *e) {
    if (st != TK_F32 && st != TK_BF16)
        return tk_err_set(e, TK_EINTERNAL, "rows_segsum: unsupported source type %s", tk_dtype_name(st));
    if (nseg < 0 || D <= 0 || nitems < 0)
        return tk_err_set(e, TK_EINTERNAL, "rows_segsum: bad shape nseg %d items %lld D %d (want nseg >= 0, items >= 0, D > 0)",
                          nseg, (long long)nitems, D);
    return 0;
}
// The pieces (TK_ROWS_PIECE items) that nitems items span: the cuda side's tiles.
static inline int64_t tk_rows_pieces(int64_t nitems) { return (nitems + TK_ROWS_PIECE - 1) / TK_ROWS_PIECE; }
#ifdef TK_HAVE_CUDA
int tk_rows_copy_cuda(tk_ctx *c, const void *src, tk_dtype st, const int32_t *spos, void *dst, tk_dtype dt,
                      const int32_t *dpos, int64_t n, const int64_t *dn, int D, tk_err *e);
size_t tk_rows_segsum_ws_bytes_cuda(int64_t nitems, int D);
int tk_rows_segsum_cuda(tk_ctx *c, const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                        const int32_t *seg_row, int nseg, const int64_t *dnseg, int64_t nitems, int D, float *dst,
                        void *ws, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
