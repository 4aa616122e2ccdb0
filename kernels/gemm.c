// Dispatch of kernels/gemm.h: argument checks shared by both backends, then the reference
// (gemm_ref.c) on cpu, cuBLASLt (lib/gpu/gemm_cublaslt.cu, which stands for the kernel) on cuda.
#include "gemm.h"

size_t tk_gemm_aux_bytes(const tk_ctx *c, int M, int N) {
    if (c->backend == TK_BACKEND_CUDA) {
        // cuBLASLt's ReLU mask: one bit per element of the column-major D^T (N rows, M
        // columns) with a leading dimension that is a multiple of 128 elements.
        size_t ld = ((size_t)N + 127) / 128 * 128;
        return ld / 8 * (size_t)M;
    }
    return (size_t)M * (size_t)N;
}

size_t tk_gemm_gelu_aux_bytes(const tk_ctx *c, int M, int N, tk_dtype cd) {
    return (size_t)M * (size_t)N * (c->backend == TK_BACKEND_CUDA ? tk_dtype_size(cd) : 4);
}

int tk_gemm(tk_ctx *c, const tk_gemm_args *g, tk_err *e) {
    int needs_bias = g->epi == TK_EPI_BIAS || g->epi == TK_EPI_RELU_BIAS || g->epi == TK_EPI_GELU_BIAS;
    int needs_aux = g->epi == TK_EPI_DRELU || g->epi == TK_EPI_DRELU_BGRAD || g->epi == TK_EPI_DGELU ||
                    g->epi == TK_EPI_DGELU_BGRAD;
    int needs_bgrad = g->epi == TK_EPI_DRELU_BGRAD || g->epi == TK_EPI_BGRADB || g->epi == TK_EPI_DGELU_BGRAD;
    if ((needs_bias && !g->bias) || (needs_aux && !g->aux) || (needs_bgrad && !g->bgrad) || !g->D ||
        (g->K > 0 && (!g->A || !g->B)))
        return tk_err_set(e, TK_EINTERNAL, "gemm %dx%dx%d: a pointer the epilogue %d needs is NULL",
                          g->M, g->N, g->K, (int)g->epi);
    if (g->batch > 1 && g->epi != TK_EPI_NONE)
        return tk_err_set(e, TK_EINTERNAL, "gemm %dx%dx%d: a batch of %d with epilogue %d", g->M, g->N, g->K, g->batch,
                          (int)g->epi);
    if (c->backend == TK_BACKEND_CPU) return tk_gemm_ref(g, e);
#ifdef TK_HAVE_CUDA
    return tk_gemm_cuda(c, g, e);
#else
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}
