// Multi-head self-attention with a key padding mask and dropout on the probabilities, as BERT's
// (Hugging Face BertSelfAttention, eager): for sequence b and head h,
//   S = Q K^T / sqrt(D);  P = softmax_j(S) over the keys j < len[b] (the others get 0);
//   Pd = dropout(P);  ctx = Pd V
// with Q, K, V the head's slices of the fused projection qkv (B L, 3 NH D): row b L + i holds
// token i's [q | k | v], head h at columns h D .. h D + D - 1 of each third. ctx is (B L, NH D),
// heads concatenated. Activations in act (TK_F32; TK_BF16 on cuda: the products in bf16 with fp32
// accumulation, the softmax in fp32).
//
// tk_attention_fwd / _bwd (lib/workloads/bert/ops.c) are the op boundary a fused (flash) kernel
// replaces; today they are strided-batched GEMMs (tk_gemm) around the kernels below, each with
// its reference:
//   heads_split  (B L, parts NH D) -> (parts, B, NH, L, D)    (q, k, v contiguous per head)
//   heads_merge  the inverse
//   softmax_fwd  P and Pd from S (the masked softmax and the dropout in one pass)
//   softmax_bwd  dS = P (dP - sum_j dP_j P_j) with dP = dropout(dPd), dS may overwrite dPd
//   probs_dropout  Pd = dropout(P) (the backward regenerates Pd instead of keeping it)
// Dropout element (b, h, i, j) is drop->offset + ((b NH + h) L + i) L + j (kernels/dropout.h).
#ifndef TK_KERNELS_ATTENTION_H
#define TK_KERNELS_ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif
#include "dropout.h"
#include "gpu/gpu.h"

// The saved state and scratch of one attention call (backend memory, act).
typedef struct tk_attn_bufs {
    void *qkvh;  // (3, B, NH, L, D): the heads of q, k, v (saved for the backward)
    void *P;     // (B, NH, L, L): the probabilities before dropout (saved)
    void *Pd;    // (B, NH, L, L): after dropout (saved, so the backward need not draw them again);
                 // NULL: the forward leaves them in S and the backward regenerates them there
    void *S;     // (B, NH, L, L): scratch (scores, Pd, their gradients)
    void *ctxh;  // (B, NH, L, D): scratch (the context per head, its gradient)
    void *dqkvh; // (3, B, NH, L, D): scratch of the backward
} tk_attn_bufs;

// qkv (B L, 3 NH D); len (B) i32 in [1, L]; drop may be NULL or p = 0; ctx (B L, NH D).
int tk_attention_fwd(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, const void *qkv, const int32_t *len,
                     const tk_dropout *drop, const tk_attn_bufs *bufs, void *ctx, tk_err *e);
// dctx (B L, NH D) -> dqkv (B L, 3 NH D), from the forward's bufs (same drop).
int tk_attention_bwd(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, const int32_t *len,
                     const tk_dropout *drop, const tk_attn_bufs *bufs, const void *dctx, void *dqkv, tk_err *e);

int tk_attn_heads_split(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const void *src, void *dst,
                        tk_err *e);
int tk_attn_heads_merge(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const void *src, void *dst,
                        tk_err *e);
// S, P, Pd (B, NH, L, L); Pd may be NULL (not written).
int tk_attn_softmax_fwd(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                        const tk_dropout *drop, void *P, void *Pd, tk_err *e);
int tk_attn_softmax_bwd(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *P,
                        const void *dPd, const tk_dropout *drop, void *dS, tk_err *e);
int tk_attn_probs_dropout(tk_ctx *c, tk_dtype act, int B, int NH, int L, const void *P, const tk_dropout *drop,
                          void *Pd, tk_err *e);

int tk_attn_heads_split_ref(tk_dtype act, int B, int L, int NH, int D, int parts, const void *src, void *dst,
                            tk_err *e);
int tk_attn_heads_merge_ref(tk_dtype act, int B, int L, int NH, int D, int parts, const void *src, void *dst,
                            tk_err *e);
int tk_attn_softmax_fwd_ref(tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                            const tk_dropout *drop, void *P, void *Pd, tk_err *e);
int tk_attn_softmax_bwd_ref(tk_dtype act, int B, int NH, int L, const int32_t *len, const void *P, const void *dPd,
                            const tk_dropout *drop, void *dS, tk_err *e);
int tk_attn_probs_dropout_ref(tk_dtype act, int B, int NH, int L, const void *P, const tk_dropout *drop, void *Pd,
                              tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_attn_heads_split_cuda(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const void *src,
                             void *dst, tk_err *e);
int tk_attn_heads_merge_cuda(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const void *src,
                             void *dst, tk_err *e);
int tk_attn_softmax_fwd_cuda(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                             const tk_dropout *drop, void *P, void *Pd, tk_err *e);
int tk_attn_softmax_bwd_cuda(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *P,
                             const void *dPd, const tk_dropout *drop, void *dS, tk_err *e);
int tk_attn_probs_dropout_cuda(tk_ctx *c, tk_dtype act, int B, int NH, int L, const void *P, const tk_dropout *drop,
                               void *Pd, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
