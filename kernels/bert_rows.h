// The rows BERT's heads read from the encoder's output, and their gradients back, and the packing
// of the tokens (model.unpad): sequence b's tokens are rows start[b] .. start[b] + len[b] - 1 of
// the encoder's activations: start[b] = b L (padded, every sequence L rows) or the prefix sum of
// the lengths (packed: only the real tokens, rows past start[B] belonging to no sequence).
//   starts:  start[b] = packed ? len[0] + .. + len[b-1] : b L, for b <= B (start[B]: the rows used).
//   pack:    dst[start[b] + i] = src[b L + i] for i < len[b]; dst rows start[B] .. rows-1 zeroed.
//   unpack:  dst[b L + i] = src[start[b] + i] for i < len[b], 0 for len[b] <= i < L.
//   gather:  out[b P + k] = hidden[start[b] + pos[b P + k]] for k < nmask[b], hidden[start[b]]
//            (position 0) for k >= nmask[b] (a padding slot; its label is -1); labels[b P + k] =
//            ids[b P + k] or -1 (labels and ids may be NULL). pos NULL: out[b] = hidden[start[b]]
//            ([CLS], P = 1).
//   scatter: dhidden rows 0 .. rows-1 = 0, then for each sequence dhidden[start[b]] = dcls[b] (dcls
//            may be NULL) and dhidden[start[b] + pos[b P + k]] += drows[b P + k] for k < nmask[b],
//            in order of k.
// start NULL in gather and scatter: b L (and scatter zeroes B L rows when rows is 0).
// act rows of H; len, start, pos, nmask, ids, labels i32; lengths in [0, L], positions in [0, len)
// (the reader checks them).
#ifndef TK_KERNELS_BERT_ROWS_H
#define TK_KERNELS_BERT_ROWS_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

int tk_bert_starts(tk_ctx *c, int B, int L, int packed, const int32_t *len, int32_t *start, tk_err *e);
int tk_bert_starts_ref(int B, int L, int packed, const int32_t *len, int32_t *start, tk_err *e);
int tk_bert_pack(tk_ctx *c, tk_dtype act, int B, int L, int H, int64_t rows, const int32_t *start,
                 const int32_t *len, const void *src, void *dst, tk_err *e);
int tk_bert_pack_ref(tk_dtype act, int B, int L, int H, int64_t rows, const int32_t *start, const int32_t *len,
                     const void *src, void *dst, tk_err *e);
int tk_bert_unpack(tk_ctx *c, tk_dtype act, int B, int L, int H, const int32_t *start, const int32_t *len,
                   const void *src, void *dst, tk_err *e);
int tk_bert_unpack_ref(tk_dtype act, int B, int L, int H, const int32_t *start, const int32_t *len, const void *src,
                       void *dst, tk_err *e);
int tk_bert_gather(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *start,
                   const int32_t *pos, const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels,
                   tk_err *e);
int tk_bert_gather_ref(tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *start,
                       const int32_t *pos, const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels,
                       tk_err *e);
int tk_bert_scatter(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, int64_t rows, const void *drows,
                    const int32_t *start, const int32_t *pos, const int32_t *nmask, const void *dcls, void *dhidden,
                    tk_err *e);
int tk_bert_scatter_ref(tk_dtype act, int B, int L, int H, int P, int64_t rows, const void *drows,
                        const int32_t *start, const int32_t *pos, const int32_t *nmask, const void *dcls,
                        void *dhidden, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_bert_starts_cuda(tk_ctx *c, int B, int L, int packed, const int32_t *len, int32_t *start, tk_err *e);
int tk_bert_pack_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int64_t rows, const int32_t *start,
                      const int32_t *len, const void *src, void *dst, tk_err *e);
int tk_bert_unpack_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, const int32_t *start, const int32_t *len,
                        const void *src, void *dst, tk_err *e);
int tk_bert_gather_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *start,
                        const int32_t *pos, const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels,
                        tk_err *e);
int tk_bert_scatter_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, int64_t rows, const void *drows,
                         const int32_t *start, const int32_t *pos, const int32_t *nmask, const void *dcls,
                         void *dhidden, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
