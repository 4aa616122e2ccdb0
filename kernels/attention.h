// Multi-head self-attention over variable-length sequences with dropout on the probabilities, as
// BERT's (Hugging Face BertSelfAttention, eager, with a key padding mask): sequence s = 0 .. nseq-1
// occupies rows start[s] .. start[s] + len[s] - 1 of qkv (rows, 3 NH D: row r holds token r's
// [q | k | v], head h at columns h D .. h D + D - 1 of each third) and of ctx (rows, NH D, heads
// concatenated). For sequence s and head h, over its len[s] tokens:
//   S = Q K^T / sqrt(D);  P = softmax_j(S);  Pd = dropout(P);  ctx = Pd V
// len[s] = 0 marks an unused slot; len[s] <= Lstride. The padded layout is start[s] = s Lstride;
// the packed one (model.unpad) the prefix sums of the lengths (kernels/bert_rows.h, starts). Rows
// outside every sequence are not written (the caller zeroes what it needs). start and len are i32
// in the backend's memory. Activations in act (TK_F32; TK_BF16 on cuda: the products in bf16 with
// fp32 accumulation, the softmax in fp32).
//
// tk_attention_fwd / _bwd (kernels/attention.c) take one of two paths, by bufs->fused:
// fused, the flash kernel (kernels/flash_attn.h: the scores never reach memory, the work follows
// the real lengths; tk_attention_fusable says where it is built: cuda, bf16, D 64); unfused, each
// sequence scattered into a padded per-head layout of Lstride rows (the positions past len[s]
// zero) and strided-batched GEMMs (tk_gemm) around the kernels below, each with its reference
// (B = nseq, L = Lstride). Both write the same rows, draw the same dropout masks, and compute the
// same math (bf16 rounding aside: the unfused path rounds S, P and Pd to act):
//   heads_split  (rows, parts NH D) -> (parts, B, NH, L, D)  (q, k, v contiguous per head;
//                positions i >= len[s] written 0)
//   heads_merge  the inverse for i < len[s] (nothing else written)
//   softmax_fwd  P and Pd from S (the masked softmax and the dropout in one pass)
//   softmax_bwd  dS = P (dP - sum_j dP_j P_j) with dP = dropout(dPd), dS may overwrite dPd
//   probs_dropout  Pd = dropout(P) (the backward regenerates Pd instead of keeping it)
// Dropout element (s, h, i, j) is drop->offset + ((s NH + h) Lstride + i) Lstride + j
// (kernels/dropout.h): the same masks whether the rows are padded, packed or fused.
#ifndef TK_KERNELS_ATTENTION_H
#define TK_KERNELS_ATTENTION_H

#ifdef __cplusplus
extern "C" {
#endif
#include "dropout.h"
#include "gpu/gpu.h"

// The saved state and scratch of one attention call (backend memory, act).
typedef struct tk_attn_bufs {
    void *qkvh;  // (3, nseq, NH, Lstride, D): the heads of q, k, v (saved for the backward)
    void *P;     // (nseq, NH, Lstride, Lstride): the probabilities before dropout (saved)
    void *Pd;    // (nseq, NH, Lstride, Lstride): after dropout (saved, so the backward need not draw them again);
                 // NULL: the forward leaves them in S and the backward regenerates them there
    void *S;     // (nseq, NH, Lstride, Lstride): scratch (scores, Pd, their gradients)
    void *ctxh;  // (nseq, NH, Lstride, D): scratch (the context per head, its gradient)
    void *dqkvh; // (3, nseq, NH, Lstride, D): scratch of the backward
    // fused != 0: the flash kernel, which needs only these three (the above may be NULL):
    int fused;
    float *lse;  // (nseq, NH, Lstride) f32: the forward's log-sum-exp (saved for the backward)
    const void *out; // the forward's ctx (the backward reads it: set for tk_attention_bwd)
    void *ws;    // tk_flash_attn_bwd_ws_bytes(rows, nseq, NH, D, Lstride): scratch of the backward
} tk_attn_bufs;

// Whether the fused path is built for this backend, activation type and head dimension (cuda,
// bf16, D 64); elsewhere a caller leaves bufs->fused 0.
int tk_attention_fusable(const tk_ctx *c, tk_dtype act, int D);

// drop may be NULL or p = 0; bufs' per-head buffers hold nseq sequences of Lstride rows.
int tk_attention_fwd(tk_ctx *c, tk_dtype act, int nseq, int Lstride, int NH, int D, const int32_t *start,
                     const int32_t *len, const void *qkv, const tk_dropout *drop, const tk_attn_bufs *bufs, void *ctx,
                     tk_err *e);
// dctx -> dqkv (the sequences' rows), from the forward's qkv and bufs (same drop).
int tk_attention_bwd(tk_ctx *c, tk_dtype act, int nseq, int Lstride, int NH, int D, const int32_t *start,
                     const int32_t *len, const void *qkv, const tk_dropout *drop, const tk_attn_bufs *bufs,
                     const void *dctx, void *dqkv, tk_err *e);

int tk_attn_heads_split(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, tk_err *e);
int tk_attn_heads_merge(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, tk_err *e);
// S, P, Pd (B, NH, L, L); Pd may be NULL (not written).
int tk_attn_softmax_fwd(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                        const tk_dropout *drop, void *P, void *Pd, tk_err *e);
int tk_attn_softmax_bwd(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *P,
                        const void *dPd, const tk_dropout *drop, void *dS, tk_err *e);
int tk_attn_probs_dropout(tk_ctx *c, tk_dtype act, int B, int NH, int L, const void *P, const tk_dropout *drop,
                          void *Pd, tk_err *e);

int tk_attn_heads_split_ref(tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, tk_err *e);
int tk_attn_heads_merge_ref(tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, tk_err *e);
int tk_attn_softmax_fwd_ref(tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                            const tk_dropout *drop, void *P, void *Pd, tk_err *e);
int tk_attn_softmax_bwd_ref(tk_dtype act, int B, int NH, int L, const int32_t *len, const void *P, const void *dPd,
                            const tk_dropout *drop, void *dS, tk_err *e);
int tk_attn_probs_dropout_ref(tk_dtype act, int B, int NH, int L, const void *P, const tk_dropout *drop, void *Pd,
                              tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_attn_heads_split_cuda(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, tk_err *e);
int tk_attn_heads_merge_cuda(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, tk_err *e);
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
