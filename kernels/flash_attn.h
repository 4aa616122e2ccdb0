// Fused multi-head self-attention over packed variable-length sequences (FlashAttention-2's
// scheme: the L x L scores never reach memory), forward and backward, with BERT's key padding
// mask and dropout on the probabilities. The same math as kernels/attention.h's unfused path:
//
//   sequence s (0 <= s < nseq) is rows start[s] .. start[s] + len[s] - 1 of qkv (rows, 3 NH D):
//   row r holds token r's [q | k | v], head h at columns h D .. h D + D - 1 of each third;
//   len[s] = 0 is an unused slot, len[s] <= Lstride. For head h and query i < len[s]:
//     S_ij = q_i . k_j / sqrt(D) over the keys j < len[s] (the others do not exist);
//     P_ij = softmax_j(S_ij);  Pd_ij = dropout(P_ij);  ctx_i = sum_j Pd_ij v_j
//   ctx (rows, NH D), heads concatenated; rows outside every sequence are not written.
//   lse (nseq, NH, Lstride) f32: log sum_j exp(S_ij), saved by the forward for the backward
//   (entries i >= len[s] are not written).
//
// Dropout element (s, h, i, j) is drop->offset + ((s NH + h) Lstride + i) Lstride + j
// (kernels/dropout.h): with start[s] = s L, Lstride = L, the mask of tk_attention_fwd's padded
// layout, element for element. drop may be NULL or p = 0 (no dropout).
//
// The backward recomputes P from lse: with D_i = dctx_i . ctx_i (the dropout is inside ctx),
//   dv_j = sum_i Pd_ij dctx_i;  dP_ij = (dctx_i . v_j) m_ij  (m_ij the dropout factor, 0 or 1/(1-p));
//   dS_ij = P_ij (dP_ij - D_i);  dq_i = sum_j dS_ij k_j / sqrt(D);  dk_j = sum_i dS_ij q_i / sqrt(D)
// and writes dqkv (rows, 3 NH D) for the rows of the sequences (others untouched). Deterministic:
// no atomics (a dK/dV pass over key tiles and a separate dQ pass over query tiles).
//
// start and len are int32 in the backend's memory and read only there (no host sync, no
// allocation: CUDA-graph capturable). cpu (the reference): act TK_F32 or TK_BF16, any D, fp64
// sums. cuda: act TK_BF16 (fp32 accumulation on the tensor cores, the softmax in fp32), D 64
// (others are refused: TK_EINTERNAL), qkv/ctx/dctx/dqkv/ws 16-byte aligned.
#ifndef TK_KERNELS_FLASH_ATTN_H
#define TK_KERNELS_FLASH_ATTN_H

#ifdef __cplusplus
extern "C" {
#endif
#include "dropout.h"
#include "gpu/gpu.h"

int tk_flash_attn_fwd(tk_ctx *c, tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start,
                      const int32_t *len, const void *qkv, const tk_dropout *drop, void *ctx, float *lse, tk_err *e);
// The backward's workspace (backend memory), for either backend: the D_i (nseq, NH, Lstride) f32,
// then (cuda) the dropout mask as bits, (nseq, NH, Lstride) rows of ceil(Lstride / 64) u64.
size_t tk_flash_attn_bwd_ws_bytes(int rows, int nseq, int NH, int D, int Lstride);
static inline size_t tk_flash_attn_delta_bytes_(int nseq, int NH, int Lstride) {
    return ((size_t)nseq * NH * Lstride * 4 + 255) & ~(size_t)255;
}
int tk_flash_attn_bwd(tk_ctx *c, tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start,
                      const int32_t *len, const void *qkv, const void *ctx, const float *lse, const void *dctx,
                      const tk_dropout *drop, void *ws, void *dqkv, tk_err *e);

int tk_flash_attn_fwd_ref(tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start, const int32_t *len,
                          const void *qkv, const tk_dropout *drop, void *ctx, float *lse, tk_err *e);
int tk_flash_attn_bwd_ref(tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start, const int32_t *len,
                          const void *qkv, const void *ctx, const float *lse, const void *dctx, const tk_dropout *drop,
                          void *ws, void *dqkv, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_flash_attn_fwd_cuda(tk_ctx *c, tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start,
                           const int32_t *len, const void *qkv, const tk_dropout *drop, void *ctx, float *lse,
                           tk_err *e);
int tk_flash_attn_bwd_cuda(tk_ctx *c, tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start,
                           const int32_t *len, const void *qkv, const void *ctx, const float *lse, const void *dctx,
                           const tk_dropout *drop, void *ws, void *dqkv, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
