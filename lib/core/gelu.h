// GELU, the exact (erf) form: Hugging Face's "gelu", the MLPerf BERT reference's. One definition
// for the host and CUDA (compiles as C11 and as CUDA C++), so BERT's activation op
// (kernels/activation.h), the GEMM's GELU epilogues on cuda (lib/gpu/gemm_cublaslt.cu) and their
// reference (kernels/gemm_ref.c) compute the same function.
#ifndef TK_CORE_GELU_H
#define TK_CORE_GELU_H

#include <math.h>

#ifdef __CUDACC__
#define TK_GELU_HD __host__ __device__ __forceinline__
#else
#define TK_GELU_HD static inline
#endif

// gelu(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2))
TK_GELU_HD float tk_gelu_f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
// gelu'(x) = Phi(x) + x phi(x)
TK_GELU_HD float tk_dgelu_f(float x) {
    return 0.5f * (1.0f + erff(x * 0.70710678118654752f)) + x * 0.39894228040143268f * expf(-0.5f * x * x);
}

#undef TK_GELU_HD
#endif
