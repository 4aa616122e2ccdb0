// Dispatch of kernels/embedding.h (kernels/dispatch.h): the cpu backend runs the reference
// (embedding_ref.c), the cuda backend the kernel (embedding.cu).
#include "dispatch.h"
#include "embedding.h"

int tk_embedding_fwd_act(tk_ctx *c, const void *w, tk_dtype wtype, const int64_t *row_off,
                         const int32_t *idx, int B, int T, int D, void *out, tk_dtype otype, tk_err *e) {
    return TK_DISPATCH(c, tk_embedding_fwd_act_ref(w, wtype, row_off, idx, B, T, D, out, otype, e),
                       tk_embedding_fwd_act_cuda(c, w, wtype, row_off, idx, B, T, D, out, otype, e));
}

int tk_embedding_fwd(tk_ctx *c, const void *w, tk_dtype wtype, const int64_t *row_off,
                     const int32_t *idx, int B, int T, int D, float *out, tk_err *e) {
    return tk_embedding_fwd_act(c, w, wtype, row_off, idx, B, T, D, out, TK_F32, e);
}

size_t tk_embedding_bwd_ws_bytes(tk_backend b, int B, int T) {
    return TK_DISPATCH_SIZE(b, (size_t)B * (size_t)T * sizeof(uint64_t), tk_embedding_bwd_ws_bytes_cuda(B, T));
}

int tk_embedding_bwd_sgd_act(tk_ctx *c, void *w, tk_dtype wtype, const int64_t *row_off,
                             const int32_t *idx, int B, int T, int D, const void *dout,
                             tk_dtype gtype, const float *lr, void *ws, tk_err *e) {
    return TK_DISPATCH(
        c, tk_embedding_bwd_sgd_act_ref(w, wtype, row_off, idx, B, T, D, dout, gtype, lr, ws, e),
        tk_embedding_bwd_sgd_act_cuda(c, w, wtype, row_off, idx, B, T, D, dout, gtype, lr, ws, e));
}

int tk_embedding_bwd_sgd(tk_ctx *c, void *w, tk_dtype wtype, const int64_t *row_off,
                         const int32_t *idx, int B, int T, int D, const float *dout,
                         const float *lr, void *ws, tk_err *e) {
    return tk_embedding_bwd_sgd_act(c, w, wtype, row_off, idx, B, T, D, dout, TK_F32, lr, ws, e);
}

int tk_embedding_dense_sgd(tk_ctx *c, void *w, tk_dtype wtype, int64_t n, const float *g, const float *lr,
                           tk_err *e) {
    return TK_DISPATCH(c, tk_embedding_dense_sgd_ref(w, wtype, n, g, lr, e),
                       tk_embedding_dense_sgd_cuda(c, w, wtype, n, g, lr, e));
}
