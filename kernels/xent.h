// Softmax cross-entropy with integer labels, for BERT's masked-LM head (over the vocabulary, on the
// gathered masked positions) and its next-sentence head (2 classes), and the masked-LM accuracy.
// logits (R, ld) act; only the first C columns are classes: columns C .. ld-1 (the vocabulary's
// padding to a multiple of 8) are never predicted: they take no probability, no argmax, and get
// gradient 0. labels (R) i32: the class in [0, C), or negative: the row is ignored (Hugging Face's
// ignore_index), no loss, gradient 0.
//
// tk_xent_fwd_bwd, with n the number of labeled rows (counted on the device) and w = scale / n
// (w = 0 when n = 0):
//   acc[0] += w sum_r (logsumexp(logits_r) - logits_r[label_r])          (fp64; acc[1] += 1 if bump)
//   dlogits_r = w (softmax(logits_r) - onehot(label_r))                  (act; may be logits itself)
// so the loss is the mean over the labeled rows times scale (BERT: 1 / world size, the gradients
// summed over the ranks then average theirs). Sums in fp64 (reference) / fp32 (cuda rows) and one
// fixed-order fp64 sum over the rows: deterministic.
// tk_xent_correct: counts[0] += rows whose argmax (the first maximum) is the label, counts[1] +=
// labeled rows (device i64).
#ifndef TK_KERNELS_XENT_H
#define TK_KERNELS_XENT_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

size_t tk_xent_ws_bytes(tk_backend b, int R);
int tk_xent_fwd_bwd(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                    float scale, double *acc, int bump, void *dlogits, void *ws, tk_err *e);
int tk_xent_fwd_bwd_ref(tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels, float scale,
                        double *acc, int bump, void *dlogits, void *ws, tk_err *e);
int tk_xent_correct(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                    int64_t *counts, tk_err *e);
int tk_xent_correct_ref(tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels, int64_t *counts,
                        tk_err *e);
#ifdef TK_HAVE_CUDA
size_t tk_xent_ws_bytes_cuda(int R);
int tk_xent_fwd_bwd_cuda(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                         float scale, double *acc, int bump, void *dlogits, void *ws, tk_err *e);
int tk_xent_correct_cuda(tk_ctx *c, tk_dtype act, int R, int C, int ld, const void *logits, const int32_t *labels,
                         int64_t *counts, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
