// Dispatch of DLRM's ops (kernels/{embedding,interaction,rows,hybrid_plan}.h):
// the cpu backend runs the reference, the cuda backend the kernel (lib/gpu/dispatch.h).
#include "embedding.h"
#include "gpu/dispatch.h"
#include "hybrid_plan.h"
#include "interaction.h"
#include "rows.h"

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
#ifdef TK_HAVE_CUDA
    if (b == TK_BACKEND_CUDA) return tk_embedding_bwd_ws_bytes_cuda(B, T);
#endif
    (void)b;
    return (size_t)B * (size_t)T * sizeof(uint64_t);
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

int tk_interaction_fwd(tk_ctx *c, const float *bot, const float *emb, int B, int T, int D, int W,
                       float *out, tk_err *e) {
    return TK_DISPATCH(c, tk_interaction_fwd_ref(bot, emb, B, T, D, W, out, e),
                       tk_interaction_fwd_cuda(c, bot, emb, B, T, D, W, out, e));
}

int tk_interaction_bwd(tk_ctx *c, const float *bot, const float *emb, const float *dout, int B,
                       int T, int D, int W, int bot_relu, float *dbot, float *demb,
                       tk_err *e) {
    return TK_DISPATCH(
        c, tk_interaction_bwd_ref(bot, emb, dout, B, T, D, W, bot_relu, dbot, demb, e),
        tk_interaction_bwd_cuda(c, bot, emb, dout, B, T, D, W, bot_relu, dbot, demb, e));
}

int tk_interaction_fwd_act(tk_ctx *c, tk_dtype act, const void *bot, const void *emb, int B, int T, int G,
                           int D, int W, void *out, tk_err *e) {
    return TK_DISPATCH(c, tk_interaction_fwd_act_ref(act, bot, emb, B, T, G, D, W, out, e),
                       tk_interaction_fwd_act_cuda(c, act, bot, emb, B, T, G, D, W, out, e));
}

int tk_interaction_bwd_act(tk_ctx *c, tk_dtype act, const void *bot, const void *emb, const void *dout,
                           int B, int T, int G, int D, int W, int bot_relu, void *dbot, void *demb,
                           tk_err *e) {
    return TK_DISPATCH(
        c, tk_interaction_bwd_act_ref(act, bot, emb, dout, B, T, G, D, W, bot_relu, dbot, demb, e),
        tk_interaction_bwd_act_cuda(c, act, bot, emb, dout, B, T, G, D, W, bot_relu, dbot, demb, e));
}

int tk_rows_copy(tk_ctx *c, const void *src, tk_dtype st, const int32_t *spos, void *dst, tk_dtype dt,
                 const int32_t *dpos, int64_t n, const int64_t *dn, int D, tk_err *e) {
    return TK_DISPATCH(c, tk_rows_copy_ref(src, st, spos, dst, dt, dpos, n, dn, D, e),
                       tk_rows_copy_cuda(c, src, st, spos, dst, dt, dpos, n, dn, D, e));
}

size_t tk_rows_segsum_ws_bytes(tk_backend b, int64_t nitems, int D) {
#ifdef TK_HAVE_CUDA
    if (b == TK_BACKEND_CUDA) return tk_rows_segsum_ws_bytes_cuda(nitems, D);
#endif
    (void)b, (void)nitems, (void)D;
    return 0;
}

int tk_rows_segsum(tk_ctx *c, const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                   const int32_t *seg_row, int nseg, const int64_t *dnseg, int64_t nitems, int D, float *dst,
                   void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_rows_segsum_ref(src, st, pos, seg_off, seg_row, nseg, dnseg, nitems, D, dst, e),
                       tk_rows_segsum_cuda(c, src, st, pos, seg_off, seg_row, nseg, dnseg, nitems, D, dst, ws, e));
}

int tk_hybrid_plan(tk_ctx *c, const tk_hybrid_plan_args *a, tk_err *e) {
    return TK_DISPATCH(c, tk_hybrid_plan_ref(a, e), tk_hybrid_plan_cuda(c, a, e));
}

int tk_hybrid_exchange_counts(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t *mat, tk_err *e) {
    return TK_DISPATCH(c, tk_hybrid_exchange_counts_ref(a, mat, e), tk_hybrid_exchange_counts_cuda(c, a, mat, e));
}

int tk_hybrid_plan_fixed(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t cap, int32_t pad_row, int32_t *send_pad,
                         int32_t *recv_src, tk_err *e) {
    return TK_DISPATCH(c, tk_hybrid_plan_fixed_ref(a, cap, pad_row, send_pad, recv_src, e),
                       tk_hybrid_plan_fixed_cuda(c, a, cap, pad_row, send_pad, recv_src, e));
}
