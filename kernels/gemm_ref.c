// CPU reference GEMM with cuBLASLt-style epilogues (the specification of tk_gemm; see
// lib/gpu/gpu.h for the argument conventions). fp32 in, fp32 out, fp32 accumulation in a fixed
// order (k ascending) so results are reproducible for any thread count.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/gelu.h" // the GELU epilogues' math
#include "gemm.h"
#include "gpu/gpu.h"

static inline float a_at(const tk_gemm_args *g, const float *A, int m, int k) {
    return g->transa ? A[(size_t)k * g->M + m] : A[(size_t)m * g->K + k];
}

static int gemm_one(const tk_gemm_args *g, const float *A, const float *B, const float *C, float *D, int par,
                    tk_err *e);

int tk_gemm_ref(const tk_gemm_args *g, tk_err *e) {
    if (g->ab_type != TK_F32 || g->cd_type != TK_F32)
        return tk_err_set(e, TK_EINTERNAL, "gemm (cpu): only fp32 is supported, got %s/%s",
                          tk_dtype_name(g->ab_type), tk_dtype_name(g->cd_type));
    if (g->M < 0 || g->N < 0 || g->K < 0)
        return tk_err_set(e, TK_EINTERNAL, "gemm: negative size %dx%dx%d", g->M, g->N, g->K);
    if (g->beta != 0 && !g->C) return tk_err_set(e, TK_EINTERNAL, "gemm: beta != 0 without C");
    if (g->batch <= 1) return gemm_one(g, g->A, g->B, g->C, g->D, 1, e);
    // A strided batch (the epilogue is NONE, checked by tk_gemm): the threads take whole GEMMs,
    // each computed as the single one is (the same order of sums), serially.
    int rc = 0;
#pragma omp parallel for schedule(static) reduction(| : rc)
    for (int i = 0; i < g->batch; i++) {
        const float *C = g->C ? (const float *)g->C + (size_t)i * g->stride_c : NULL;
        tk_err ei;
        rc |= gemm_one(g, (const float *)g->A + (size_t)i * g->stride_a, (const float *)g->B + (size_t)i * g->stride_b,
                       C, (float *)g->D + (size_t)i * g->stride_c, 0, &ei);
    }
    return rc ? tk_err_set(e, TK_EIO, "gemm: out of host memory") : 0;
}

static int gemm_one(const tk_gemm_args *g, const float *A, const float *B, const float *C, float *D, int par,
                    tk_err *e) {
    const int M = g->M, N = g->N, K = g->K;
    uint8_t *aux = g->aux;
    float *gaux = g->aux; // the GELU epilogues' pre-activation

    // B^T is packed once so the inner loop always runs over contiguous rows of B (K, N).
    float *Bt = NULL;
    if (g->transb && (size_t)K * N > 0) {
        Bt = malloc(sizeof(float) * (size_t)K * N);
        if (!Bt) return tk_err_set(e, TK_EIO, "gemm: out of host memory");
        for (int n = 0; n < N; n++)
            for (int k = 0; k < K; k++) Bt[(size_t)k * N + n] = B[(size_t)n * K + k];
        B = Bt;
    }

#pragma omp parallel if (par)
    {
        float *acc = malloc(sizeof(float) * (size_t)(N > 0 ? N : 1) * 4);
#pragma omp for schedule(static)
        for (int m0 = 0; m0 < M; m0 += 4) {
            int mb = M - m0 < 4 ? M - m0 : 4;
            memset(acc, 0, sizeof(float) * (size_t)N * 4);
            // Four rows of D at a time share each row of B.
            for (int k = 0; k < K; k++) {
                const float *b = B + (size_t)k * N;
                for (int r = 0; r < mb; r++) {
                    float a = a_at(g, A, m0 + r, k);
                    float *ac = acc + (size_t)r * N;
#pragma omp simd
                    for (int n = 0; n < N; n++) ac[n] += a * b[n];
                }
            }
            for (int r = 0; r < mb; r++) {
                size_t row = (size_t)(m0 + r) * N;
                float *d = D + row;
                const float *ac = acc + (size_t)r * N;
                for (int n = 0; n < N; n++) {
                    float v = g->alpha * ac[n];
                    if (g->beta != 0) v += g->beta * C[row + n];
                    switch (g->epi) {
                    case TK_EPI_BIAS: v += ((const float *)g->bias)[n]; break;
                    case TK_EPI_RELU_BIAS:
                        v += ((const float *)g->bias)[n];
                        if (aux) aux[row + n] = v > 0;
                        v = v > 0 ? v : 0;
                        break;
                    case TK_EPI_DRELU:
                    case TK_EPI_DRELU_BGRAD: v = aux[row + n] ? v : 0; break;
                    case TK_EPI_GELU_BIAS:
                        v += ((const float *)g->bias)[n];
                        if (gaux) gaux[row + n] = v;
                        v = tk_gelu_f(v);
                        break;
                    case TK_EPI_DGELU:
                    case TK_EPI_DGELU_BGRAD: v *= tk_dgelu_f(gaux[row + n]); break;
                    default: break;
                    }
                    d[n] = v;
                }
            }
        }
        free(acc);
    }
    free(Bt);

    // Bias-gradient epilogues: sums in double, in a fixed order, then rounded once.
    if (g->epi == TK_EPI_DRELU_BGRAD || g->epi == TK_EPI_DGELU_BGRAD) {
        float *bg = g->bgrad;
#pragma omp parallel for schedule(static) if (par)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int m = 0; m < M; m++) s += D[(size_t)m * N + n];
            bg[n] = (float)s;
        }
    } else if (g->epi == TK_EPI_BGRADB) {
        float *bg = g->bgrad;
#pragma omp parallel for schedule(static) if (par)
        for (int m = 0; m < M; m++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += a_at(g, A, m, k);
            bg[m] = (float)s;
        }
    }
    return 0;
}
