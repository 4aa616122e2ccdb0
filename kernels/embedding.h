// Embedding lookup for all tables of a DLRM in one call, and its backward fused with the SGD
// update (MLPerf DLRM: one index per table per sample, no pooling). Tables are concatenated in ONE
// buffer: table t holds rows [row_off[t], row_off[t+1]) of width D, row-major. The table dtype is
// TK_F32 or TK_BF16 (the cuda backend keeps the full-size tables in bf16: 187.8 M x 128 x 2 bytes
// fit one 80 GB GPU; the cpu reference supports both). No dense gradient is ever formed for the
// tables: the backward sums the gradients of duplicate rows within the batch (fp64 on the cpu, in
// sample order) and applies w -= lr * sum once per distinct row, rounding to the table dtype once.
#ifndef TK_KERNELS_EMBEDDING_H
#define TK_KERNELS_EMBEDDING_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

// w (rows_total, D) wtype; row_off (T+1) i64 device; idx (B, T) i32 row-major, idx[b,t] in
// [0, row_off[t+1]-row_off[t]); out (B, T, D) f32 row-major. TK_EDATA if an index is past its
// table (the cpu reference checks; the cuda kernel trusts the loader, which validates every batch).
// A negative index is padding, on both backends: its lookup is a zero row and the backward
// skips it (no gradient, no update): the hybrid embedding's fixed exchange pads with -1.
int tk_embedding_fwd(tk_ctx *c, const void *w, tk_dtype wtype, const int64_t *row_off,
                     const int32_t *idx, int B, int T, int D, float *out, tk_err *e);
int tk_embedding_fwd_ref(const void *w, tk_dtype wtype, const int64_t *row_off,
                         const int32_t *idx, int B, int T, int D, float *out, tk_err *e);
// The same with the output in otype (TK_F32 or TK_BF16; the bf16 compute path keeps the
// looked-up vectors, their gradient and the all-to-all buffers in bf16, halving their traffic).
// A bf16 table gives a bf16 output exactly; an f32 table's values are rounded to nearest even.
int tk_embedding_fwd_act(tk_ctx *c, const void *w, tk_dtype wtype, const int64_t *row_off,
                         const int32_t *idx, int B, int T, int D, void *out, tk_dtype otype, tk_err *e);
int tk_embedding_fwd_act_ref(const void *w, tk_dtype wtype, const int64_t *row_off,
                             const int32_t *idx, int B, int T, int D, void *out, tk_dtype otype,
                             tk_err *e);

// Workspace bytes tk_embedding_bwd_sgd needs for a batch of B x T indices (sort scratch).
size_t tk_embedding_bwd_ws_bytes(tk_backend b, int B, int T);
// w (rows_total, D) wtype, updated in place; row_off, idx as above; dout (B, T, D) f32 (gradient
// of the loss w.r.t. the lookup output); lr: ONE f32 device scalar (read on the device, never by
// the host); ws: tk_embedding_bwd_ws_bytes bytes of device memory.
int tk_embedding_bwd_sgd(tk_ctx *c, void *w, tk_dtype wtype, const int64_t *row_off,
                         const int32_t *idx, int B, int T, int D, const float *dout,
                         const float *lr, void *ws, tk_err *e);
int tk_embedding_bwd_sgd_ref(void *w, tk_dtype wtype, const int64_t *row_off, const int32_t *idx,
                             int B, int T, int D, const float *dout, const float *lr, void *ws,
                             tk_err *e);
// The same with dout in gtype (TK_F32 or TK_BF16): only the loads change (each gradient value
// is widened to fp32 exactly); the sums and the update are the f32 variant's.
int tk_embedding_bwd_sgd_act(tk_ctx *c, void *w, tk_dtype wtype, const int64_t *row_off,
                             const int32_t *idx, int B, int T, int D, const void *dout,
                             tk_dtype gtype, const float *lr, void *ws, tk_err *e);
int tk_embedding_bwd_sgd_act_ref(void *w, tk_dtype wtype, const int64_t *row_off,
                                 const int32_t *idx, int B, int T, int D, const void *dout,
                                 tk_dtype gtype, const float *lr, void *ws, tk_err *e);

// A dense update with the same arithmetic: w (n) wtype -= lr * g (n) f32, each element as
// tk_embedding_bwd_sgd updates a row used once (fp64 product and difference, one rounding to
// wtype). The hybrid embedding's replica, whose summed gradient is dense, uses it.
int tk_embedding_dense_sgd(tk_ctx *c, void *w, tk_dtype wtype, int64_t n, const float *g, const float *lr,
                           tk_err *e);
int tk_embedding_dense_sgd_ref(void *w, tk_dtype wtype, int64_t n, const float *g, const float *lr, tk_err *e);

#ifdef TK_HAVE_CUDA
int tk_embedding_dense_sgd_cuda(tk_ctx *c, void *w, tk_dtype wtype, int64_t n, const float *g, const float *lr,
                                tk_err *e);
size_t tk_embedding_bwd_ws_bytes_cuda(int B, int T);
int tk_embedding_fwd_act_cuda(tk_ctx *c, const void *w, tk_dtype wtype, const int64_t *row_off,
                              const int32_t *idx, int B, int T, int D, void *out, tk_dtype otype,
                              tk_err *e);
int tk_embedding_bwd_sgd_act_cuda(tk_ctx *c, void *w, tk_dtype wtype, const int64_t *row_off,
                                  const int32_t *idx, int B, int T, int D, const void *dout,
                                  tk_dtype gtype, const float *lr, void *ws, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
