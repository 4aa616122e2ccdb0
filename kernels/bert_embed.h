// BERT's input embeddings: the sum of the word, position and token type embeddings of every
// token (the LayerNorm and dropout that follow are kernels/layernorm.h), and the backward into
// the three tables. Token t < B L is position t % L of sequence t / L.
//   e[t] = word[ids[t]] + pos[t % L] + type[seg[t]]
// Tables in wt (f32 on cpu; the bf16 compute copy on cuda), e and de in act. The backward is
// deterministic (fixed summation order, fp64 sums): dword[v] += sum of de[t] over the tokens with
// ids[t] == v in token order (ADDED to dword, which holds the tied MLM decoder's gradient), dpos
// and dtype written (dpos rows >= L set to 0). len (B) i32, may be NULL: the padding tokens
// (position t % L >= len[t / L]) are left out of dword (their gradient is 0 in BERT; the sum of a
// padded batch's [PAD] run would otherwise be one long serial run). The cuda side sorts the ids
// (stable radix sort; the padding tokens get a key past every id) and sums each id's run; the
// reference loops over the tokens.
#ifndef TK_KERNELS_BERT_EMBED_H
#define TK_KERNELS_BERT_EMBED_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

#define TK_BERT_MAX_TYPES 4

// ids (B L) i32 in [0, V); seg (B L) u8 in [0, T); word (V, H), pos (>= L, H), type (T, H) wt;
// e (B L, H) act.
int tk_bert_embed_fwd(tk_ctx *c, tk_dtype wt, tk_dtype act, int B, int L, int H, const int32_t *ids,
                      const uint8_t *seg, const void *word, const void *pos, const void *type, void *e_out, tk_err *e);
int tk_bert_embed_fwd_ref(tk_dtype wt, tk_dtype act, int B, int L, int H, const int32_t *ids, const uint8_t *seg,
                          const void *word, const void *pos, const void *type, void *e_out, tk_err *e);
size_t tk_bert_embed_bwd_ws_bytes(tk_backend b, int B, int L, int H, int T);
// de (B L, H) act; dword (V, H) f32 (added to); dpos (npos, H) f32, npos >= L; dtype (T, H) f32, T <= 4.
int tk_bert_embed_bwd(tk_ctx *c, tk_dtype act, int B, int L, int H, int T, int npos, const int32_t *ids,
                      const uint8_t *seg, const int32_t *len, const void *de, float *dword, float *dpos, float *dtype,
                      void *ws, tk_err *e);
int tk_bert_embed_bwd_ref(tk_dtype act, int B, int L, int H, int T, int npos, const int32_t *ids, const uint8_t *seg,
                          const int32_t *len, const void *de, float *dword, float *dpos, float *dtype, void *ws,
                          tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_bert_embed_fwd_cuda(tk_ctx *c, tk_dtype wt, tk_dtype act, int B, int L, int H, const int32_t *ids,
                           const uint8_t *seg, const void *word, const void *pos, const void *type, void *e_out,
                           tk_err *e);
size_t tk_bert_embed_bwd_ws_bytes_cuda(int B, int L, int H, int T);
int tk_bert_embed_bwd_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int T, int npos, const int32_t *ids,
                           const uint8_t *seg, const int32_t *len, const void *de, float *dword, float *dpos,
                           float *dtype, void *ws, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
