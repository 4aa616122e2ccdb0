// Dispatch of kernels/rows.h (kernels/dispatch.h): the cpu backend runs the reference
// (rows_ref.c), the cuda backend the kernel (rows.cu).
#include "dispatch.h"
#include "rows.h"

int tk_rows_copy(tk_ctx *c, const void *src, tk_dtype st, const int32_t *spos, void *dst, tk_dtype dt,
                 const int32_t *dpos, int64_t n, const int64_t *dn, int D, tk_err *e) {
    return TK_DISPATCH(c, tk_rows_copy_ref(src, st, spos, dst, dt, dpos, n, dn, D, e),
                       tk_rows_copy_cuda(c, src, st, spos, dst, dt, dpos, n, dn, D, e));
}

size_t tk_rows_segsum_ws_bytes(tk_backend b, int64_t nitems, int D) {
    (void)nitems, (void)D; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_rows_segsum_ws_bytes_cuda(nitems, D));
}

int tk_rows_segsum(tk_ctx *c, const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                   const int32_t *seg_row, int nseg, const int64_t *dnseg, int64_t nitems, int D, float *dst,
                   void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_rows_segsum_ref(src, st, pos, seg_off, seg_row, nseg, dnseg, nitems, D, dst, e),
                       tk_rows_segsum_cuda(c, src, st, pos, seg_off, seg_row, nseg, dnseg, nitems, D, dst, ws, e));
}
