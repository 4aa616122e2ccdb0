// GEMM, the op: D = alpha * op(A) @ op(B) + beta * C, then the epilogue (the arguments and the
// epilogues: tk_gemm_args in lib/gpu/gpu.h). The cpu backend runs the reference (gemm_ref.c, the
// specification), the cuda backend cuBLASLt (lib/gpu/gemm_cublaslt.cu); the dispatcher, with the
// argument checks both share, is gemm.c.
#ifndef TK_KERNELS_GEMM_H
#define TK_KERNELS_GEMM_H

#include <stddef.h>

#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

int tk_gemm(tk_ctx *c, const tk_gemm_args *g, tk_err *e);
size_t tk_gemm_aux_bytes(const tk_ctx *c, int M, int N);
// The GELU epilogues' aux: the (M, N) pre-activation in cd (fp32 on cpu).
size_t tk_gemm_gelu_aux_bytes(const tk_ctx *c, int M, int N, tk_dtype cd);
int tk_gemm_ref(const tk_gemm_args *g, tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
