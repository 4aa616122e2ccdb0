// Two column blocks side by side and back, on row-major matrices of `rows` rows (the 3D U-Net's
// skip connections: the upsampled tensor and the encoder's, channels-last, concatenated along the
// channels, and the concatenation's gradient split again):
//   cat:   out[r, 0:ca] = a[r, :] (+ bias[:]), out[r, ca:ca+cb] = b[r, :]   (out: rows x (ca + cb))
//   split: a[r, :] = in[r, 0:ca],  b[r, :] = in[r, ca:ca+cb]       (a: rows x ca, b: rows x cb)
// Elements in t (TK_F32 or TK_BF16), copied bit for bit; with bias (ca floats, or NULL) a's side is
// a + bias added in fp32 and rounded to t once (the upsampling's bias, kernels/conv3d_bias.h's
// forward, folded into the copy). The regions do not overlap. One pass over
// every byte (cudaMemcpy2D moved 64-byte rows at a third of the card's bandwidth: 0.55 ms for each
// half of the U-Net's top level at batch 2 of 128^3 on an H100). The CUDA kernel moves 16 bytes a
// thread when both blocks' rows and the pointers allow it, else one element.
#ifndef TK_KERNELS_COLCAT_H
#define TK_KERNELS_COLCAT_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

int tk_colcat(tk_ctx *c, tk_dtype t, const void *a, int64_t ca, const float *bias, const void *b, int64_t cb,
              int64_t rows, void *out, tk_err *e);
int tk_colsplit(tk_ctx *c, tk_dtype t, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b,
                tk_err *e);

int tk_colcat_ref(tk_dtype t, const void *a, int64_t ca, const float *bias, const void *b, int64_t cb, int64_t rows,
                  void *out, tk_err *e);
int tk_colsplit_ref(tk_dtype t, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_colcat_cuda(tk_ctx *c, tk_dtype t, const void *a, int64_t ca, const float *bias, const void *b, int64_t cb,
                   int64_t rows, void *out, tk_err *e);
int tk_colsplit_cuda(tk_ctx *c, tk_dtype t, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b,
                     tk_err *e);
#endif

static inline int tk_colcat_check(tk_dtype t, int64_t ca, int64_t cb, int64_t rows, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "colcat: elements in %s", tk_dtype_name(t));
    if (ca < 1 || cb < 1 || rows < 0)
        return tk_err_set(e, TK_EINTERNAL, "colcat: bad shape rows %lld, columns %lld + %lld", (long long)rows,
                          (long long)ca, (long long)cb);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
