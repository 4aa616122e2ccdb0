// The rows BERT's heads read from the encoder's output, and their gradients back: the masked
// positions of each sequence (the masked-LM head runs on them only, NVIDIA's dense_seq_output) and
// the [CLS] token (the pooler and next-sentence head). Sequence b's tokens are rows b L .. b L + L-1.
//   gather:  out[b P + k] = hidden[b L + pos[b P + k]] for k < nmask[b], hidden[b L] (position 0)
//            for k >= nmask[b] (a padding slot; its label is -1); labels[b P + k] = ids[b P + k]
//            or -1 (labels and ids may be NULL). pos NULL: out[b] = hidden[b L] ([CLS], P = 1).
//   scatter: dhidden = 0, then for each sequence dhidden[b L] = dcls[b] (dcls may be NULL) and
//            dhidden[b L + pos[b P + k]] += drows[b P + k] for k < nmask[b], in order of k.
// act rows of H; pos, nmask, ids, labels i32; positions in [0, L) (the reader checks them).
#ifndef TK_KERNELS_BERT_ROWS_H
#define TK_KERNELS_BERT_ROWS_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

int tk_bert_gather(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *pos,
                   const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels, tk_err *e);
int tk_bert_gather_ref(tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *pos,
                       const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels, tk_err *e);
int tk_bert_scatter(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *drows, const int32_t *pos,
                    const int32_t *nmask, const void *dcls, void *dhidden, tk_err *e);
int tk_bert_scatter_ref(tk_dtype act, int B, int L, int H, int P, const void *drows, const int32_t *pos,
                        const int32_t *nmask, const void *dcls, void *dhidden, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_bert_gather_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *hidden, const int32_t *pos,
                        const int32_t *nmask, const int32_t *ids, void *out, int32_t *labels, tk_err *e);
int tk_bert_scatter_cuda(tk_ctx *c, tk_dtype act, int B, int L, int H, int P, const void *drows, const int32_t *pos,
                         const int32_t *nmask, const void *dcls, void *dhidden, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
