// Dispatch of kernels/bert_rows.h (kernels/dispatch.h): the cpu backend runs the reference
// (bert_rows_ref.c), the cuda backend the kernel (bert_rows.cu).
#include "bert_rows.h"
#include "dispatch.h"

int tk_bert_starts(tk_ctx *c, int B, int L, int packed, const int32_t *len, int32_t *start, tk_err *e) {
    return TK_DISPATCH(c, tk_bert_starts_ref(B, L, packed, len, start, e),
                       tk_bert_starts_cuda(c, B, L, packed, len, start, e));
}

int tk_bert_pack(tk_ctx *c, tk_dtype act, int B, int L, int H, int64_t rows, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, tk_err *e) {
    return TK_DISPATCH(c, tk_bert_pack_ref(act, B, L, H, rows, start, len, src, dst, e),
                       tk_bert_pack_cuda(c, act, B, L, H, rows, start, len, src, dst, e));
}

int tk_bert_unpack(tk_ctx *c, tk_dtype act, int B, int L, int H, const int32_t *start, const int32_t *len,
                   const void *src, void *dst, tk_err *e) {
    return TK_DISPATCH(c, tk_bert_unpack_ref(act, B, L, H, start, len, src, dst, e),
                       tk_bert_unpack_cuda(c, act, B, L, H, start, len, src, dst, e));
}

int tk_bert_gather(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *start,
                   const int32_t *pos, const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels,
                   tk_err *e) {
    return TK_DISPATCH(c, tk_bert_gather_ref(act, B, L, H, P, hidden, start, pos, nmask, ids, out, labels, e),
                       tk_bert_gather_cuda(c, act, B, L, H, P, hidden, start, pos, nmask, ids, out, labels, e));
}

int tk_bert_scatter(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, int64_t rows, const void *drows,
                    const int32_t *start, const int32_t *pos, const int32_t *nmask, const void *dcls, void *dhidden,
                    tk_err *e) {
    return TK_DISPATCH(c, tk_bert_scatter_ref(act, B, L, H, P, rows, drows, start, pos, nmask, dcls, dhidden, e),
                       tk_bert_scatter_cuda(c, act, B, L, H, P, rows, drows, start, pos, nmask, dcls, dhidden, e));
}
