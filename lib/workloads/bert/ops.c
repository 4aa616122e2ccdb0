// Dispatch of BERT's ops (kernels/{activation,layernorm,attention,bert_embed,bert_rows,xent}.h):
// the cpu backend runs the reference, the cuda backend the kernel (lib/gpu/dispatch.h); and the
// attention's forward and backward: the fused kernel (kernels/flash_attn.h) where bufs->fused
// says so, else composed of strided-batched GEMMs and the attention kernels.
#include <math.h>

#include "activation.h"
#include "attention.h"
#include "bert_embed.h"
#include "bert_rows.h"
#include "flash_attn.h"
#include "gpu/dispatch.h"
#include "layernorm.h"
#include "xent.h"

int tk_gelu_fwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    return TK_DISPATCH(c, tk_gelu_fwd_ref(act, n, x, y, e), tk_gelu_fwd_cuda(c, act, n, x, y, e));
}
int tk_gelu_bwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, const void *dy, void *dx, tk_err *e) {
    return TK_DISPATCH(c, tk_gelu_bwd_ref(act, n, x, dy, dx, e), tk_gelu_bwd_cuda(c, act, n, x, dy, dx, e));
}
int tk_tanh_fwd(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    return TK_DISPATCH(c, tk_tanh_fwd_ref(act, n, x, y, e), tk_tanh_fwd_cuda(c, act, n, x, y, e));
}
int tk_tanh_bwd(tk_ctx *c, tk_dtype act, int64_t n, const void *y, const void *dy, void *dx, tk_err *e) {
    return TK_DISPATCH(c, tk_tanh_bwd_ref(act, n, y, dy, dx, e), tk_tanh_bwd_cuda(c, act, n, y, dy, dx, e));
}

int tk_layernorm_fwd(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *x, const void *res,
                     const tk_dropout *drop, int where, const float *gamma, const float *beta, float eps, void *y,
                     void *s, float *mean, float *rstd, tk_err *e) {
    return TK_DISPATCH(
        c, tk_layernorm_fwd_ref(act, R, H, x, res, drop, where, gamma, beta, eps, y, s, mean, rstd, e),
        tk_layernorm_fwd_cuda(c, act, R, H, x, res, drop, where, gamma, beta, eps, y, s, mean, rstd, e));
}
int tk_layernorm_bwd(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *dy, const void *s, const float *mean,
                     const float *rstd, const float *gamma, const tk_dropout *drop, int where, void *ds, void *dx,
                     float *dgamma, float *dbeta, void *ws, tk_err *e) {
    return TK_DISPATCH(
        c, tk_layernorm_bwd_ref(act, R, H, dy, s, mean, rstd, gamma, drop, where, ds, dx, dgamma, dbeta, ws, e),
        tk_layernorm_bwd_cuda(c, act, R, H, dy, s, mean, rstd, gamma, drop, where, ds, dx, dgamma, dbeta, ws, e));
}

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

int tk_bert_embed_fwd(tk_ctx *c, tk_dtype wt, tk_dtype act, int B, int L, int H, const int32_t *ids,
                      const uint8_t *seg, const void *word, const void *pos, const void *type, void *e_out, tk_err *e) {
    return TK_DISPATCH(c, tk_bert_embed_fwd_ref(wt, act, B, L, H, ids, seg, word, pos, type, e_out, e),
                       tk_bert_embed_fwd_cuda(c, wt, act, B, L, H, ids, seg, word, pos, type, e_out, e));
}
int tk_bert_embed_bwd(tk_ctx *c, tk_dtype act, int B, int L, int H, int T, int npos, const int32_t *ids,
                      const uint8_t *seg, const int32_t *len, const void *de, float *dword, float *dpos, float *dtype,
                      void *ws, tk_err *e) {
    return TK_DISPATCH(c, tk_bert_embed_bwd_ref(act, B, L, H, T, npos, ids, seg, len, de, dword, dpos, dtype, ws, e),
                       tk_bert_embed_bwd_cuda(c, act, B, L, H, T, npos, ids, seg, len, de, dword, dpos, dtype, ws, e));
}

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

int tk_xent_fwd_bwd(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                    float scale, double *acc, int bump, void *dlogits, void *ws, tk_err *e) {
    return TK_DISPATCH(c, tk_xent_fwd_bwd_ref(act, R, C, ld, logits, labels, scale, acc, bump, dlogits, ws, e),
                       tk_xent_fwd_bwd_cuda(c, act, R, C, ld, logits, labels, scale, acc, bump, dlogits, ws, e));
}
int tk_xent_correct(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                    int64_t *counts, tk_err *e) {
    return TK_DISPATCH(c, tk_xent_correct_ref(act, R, C, ld, logits, labels, counts, e),
                       tk_xent_correct_cuda(c, act, R, C, ld, logits, labels, counts, e));
}

// ---- attention (kernels/attention.h) ----

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
