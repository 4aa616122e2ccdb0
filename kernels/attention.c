// Dispatch of kernels/attention.h (kernels/dispatch.h): the cpu backend runs the reference
// (attention_ref.c), the cuda backend the kernels (attention.cu); and the attention's forward and
// backward: the fused kernel (kernels/flash_attn.h) where bufs->fused says so, else composed of
// strided-batched GEMMs (kernels/gemm.h) and the attention kernels.
#include <math.h>

#include "attention.h"
#include "dispatch.h"
#include "flash_attn.h"
#include "gemm.h"

int tk_attn_heads_split(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                        const int32_t *len, const void *src, void *dst, tk_err *e) {
    return TK_DISPATCH(c, tk_attn_heads_split_ref(act, B, L, NH, D, parts, start, len, src, dst, e),
                       tk_attn_heads_split_cuda(c, act, B, L, NH, D, parts, start, len, src, dst, e));
}

int tk_attn_heads_merge(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, int parts, const int32_t *start,
                        const int32_t *len, const void *src, void *dst, tk_err *e) {
    return TK_DISPATCH(c, tk_attn_heads_merge_ref(act, B, L, NH, D, parts, start, len, src, dst, e),
                       tk_attn_heads_merge_cuda(c, act, B, L, NH, D, parts, start, len, src, dst, e));
}

int tk_attn_softmax_fwd(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *S,
                        const tk_dropout *drop, void *P, void *Pd, tk_err *e) {
    return TK_DISPATCH(c, tk_attn_softmax_fwd_ref(act, B, NH, L, len, S, drop, P, Pd, e),
                       tk_attn_softmax_fwd_cuda(c, act, B, NH, L, len, S, drop, P, Pd, e));
}

int tk_attn_softmax_bwd(tk_ctx *c, tk_dtype act, int B, int NH, int L, const int32_t *len, const void *P,
                        const void *dPd, const tk_dropout *drop, void *dS, tk_err *e) {
    return TK_DISPATCH(c, tk_attn_softmax_bwd_ref(act, B, NH, L, len, P, dPd, drop, dS, e),
                       tk_attn_softmax_bwd_cuda(c, act, B, NH, L, len, P, dPd, drop, dS, e));
}

int tk_attn_probs_dropout(tk_ctx *c, tk_dtype act, int B, int NH, int L, const void *P, const tk_dropout *drop,
                          void *Pd, tk_err *e) {
    return TK_DISPATCH(c, tk_attn_probs_dropout_ref(act, B, NH, L, P, drop, Pd, e),
                       tk_attn_probs_dropout_cuda(c, act, B, NH, L, P, drop, Pd, e));
}

// The batch of B NH products (M, N, K) of the heads; strides in elements.
static int bgemm(tk_ctx *c, tk_dtype act, int batch, int M, int N, int K, int ta, int tb, float alpha, const void *A,
                 int64_t sa, const void *Bm, int64_t sb, void *D, int64_t sd, tk_err *e) {
    tk_gemm_args g = {.M = M, .N = N, .K = K, .transa = ta, .transb = tb, .ab_type = act, .cd_type = act, .A = A,
                      .B = Bm, .D = D, .alpha = alpha, .beta = 0, .epi = TK_EPI_NONE, .stream = TK_STREAM_COMPUTE,
                      .batch = batch, .stride_a = sa, .stride_b = sb, .stride_c = sd};
    return tk_gemm(c, &g, e);
}

int tk_attention_fusable(const tk_ctx *c, tk_dtype act, int D) {
    return c->backend == TK_BACKEND_CUDA && act == TK_BF16 && D == 64;
}

int tk_attention_fwd(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, const int32_t *start,
                     const int32_t *len, const void *qkv, const tk_dropout *drop, const tk_attn_bufs *bufs, void *ctx,
                     tk_err *e) {
    if (bufs->fused) return tk_flash_attn_fwd(c, act, B, NH, D, L, start, len, qkv, drop, ctx, bufs->lse, e);
    const int n = B * NH;
    const int64_t hd = (int64_t)L * D, ll = (int64_t)L * L;
    const size_t part = (size_t)n * hd * tk_dtype_size(act);
    const char *q = bufs->qkvh, *k = q + part, *v = k + part;
    const int dropping = drop && drop->p > 0;
    TRY(tk_attn_heads_split(c, act, B, L, NH, D, 3, start, len, qkv, bufs->qkvh, e));
    // S = Q K^T / sqrt(D)   (L, D) x (L, D)^T per head
    TRY(bgemm(c, act, n, L, L, D, 0, 1, 1.0f / sqrtf((float)D), q, hd, k, hd, bufs->S, ll, e));
    void *pd = !dropping ? bufs->P : bufs->Pd ? bufs->Pd : bufs->S;
    TRY(tk_attn_softmax_fwd(c, act, B, NH, L, len, bufs->S, drop, bufs->P, dropping ? pd : NULL, e));
    // ctx = Pd V   (L, L) x (L, D)
    TRY(bgemm(c, act, n, L, D, L, 0, 0, 1.0f, pd, ll, v, hd, bufs->ctxh, hd, e));
    return tk_attn_heads_merge(c, act, B, L, NH, D, 1, start, len, bufs->ctxh, ctx, e);
}

int tk_attention_bwd(tk_ctx *c, tk_dtype act, int B, int L, int NH, int D, const int32_t *start,
                     const int32_t *len, const void *qkv, const tk_dropout *drop, const tk_attn_bufs *bufs,
                     const void *dctx, void *dqkv, tk_err *e) {
    if (bufs->fused)
        return tk_flash_attn_bwd(c, act, B, NH, D, L, start, len, qkv, bufs->out, bufs->lse, dctx, drop, bufs->ws,
                                 dqkv, e);
    // (this composition reads the heads it saved in bufs->qkvh)
    const int n = B * NH;
    const int64_t hd = (int64_t)L * D, ll = (int64_t)L * L;
    const size_t part = (size_t)n * hd * tk_dtype_size(act);
    const char *q = bufs->qkvh, *k = q + part, *v = k + part;
    char *dq = bufs->dqkvh, *dk = dq + part, *dv = dk + part;
    const float scale = 1.0f / sqrtf((float)D);
    const int dropping = drop && drop->p > 0;
    TRY(tk_attn_heads_split(c, act, B, L, NH, D, 1, start, len, dctx, bufs->ctxh, e)); // dctx per head
    // dV = Pd^T dctx
    const void *pd = !dropping ? bufs->P : bufs->Pd ? bufs->Pd : bufs->S;
    if (dropping && !bufs->Pd) TRY(tk_attn_probs_dropout(c, act, B, NH, L, bufs->P, drop, bufs->S, e));
    TRY(bgemm(c, act, n, L, D, L, 1, 0, 1.0f, pd, ll, bufs->ctxh, hd, dv, hd, e));
    // dPd = dctx V^T, then dS in place
    TRY(bgemm(c, act, n, L, L, D, 0, 1, 1.0f, bufs->ctxh, hd, v, hd, bufs->S, ll, e));
    TRY(tk_attn_softmax_bwd(c, act, B, NH, L, len, bufs->P, bufs->S, drop, bufs->S, e));
    // dQ = dS K / sqrt(D), dK = dS^T Q / sqrt(D)
    TRY(bgemm(c, act, n, L, D, L, 0, 0, scale, bufs->S, ll, k, hd, dq, hd, e));
    TRY(bgemm(c, act, n, L, D, L, 1, 0, scale, bufs->S, ll, q, hd, dk, hd, e));
    return tk_attn_heads_merge(c, act, B, L, NH, D, 3, start, len, bufs->dqkvh, dqkv, e);
}
