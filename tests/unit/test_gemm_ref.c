// kernels/gemm_ref.c: every transpose and epilogue against a naive triple loop in double, plus
// small-integer cases that must be exact.
#include <stdint.h>

#include "core/philox.h"
#include "gemm.h"
#include "gpu/gpu.h"
#include "tk_test.h"

static void fill(float *x, size_t n, uint32_t stream, int ints) {
    for (size_t i = 0; i < n; i++) {
        float u = tk_philox_uniform(42, stream, i);
        x[i] = ints ? (float)((int)(u * 7.0f) - 3) : 2.0f * u - 1.0f;
    }
}

// D_ref in double from the definition in gpu.h.
static void naive(const tk_gemm_args *g, double *D, double *bg) {
    const float *A = g->A, *B = g->B, *C = g->C;
    for (int m = 0; m < g->M; m++)
        for (int n = 0; n < g->N; n++) {
            double s = 0;
            for (int k = 0; k < g->K; k++) {
                double a = g->transa ? A[k * g->M + m] : A[m * g->K + k];
                double b = g->transb ? B[n * g->K + k] : B[k * g->N + n];
                s += a * b;
            }
            double v = g->alpha * s + (g->beta != 0 ? g->beta * C[m * g->N + n] : 0);
            if (g->epi == TK_EPI_BIAS || g->epi == TK_EPI_RELU_BIAS) v += ((const float *)g->bias)[n];
            if (g->epi == TK_EPI_RELU_BIAS && v < 0) v = 0;
            if ((g->epi == TK_EPI_DRELU || g->epi == TK_EPI_DRELU_BGRAD) && !((uint8_t *)g->aux)[m * g->N + n]) v = 0;
            D[m * g->N + n] = v;
        }
    if (g->epi == TK_EPI_DRELU_BGRAD)
        for (int n = 0; n < g->N; n++) {
            bg[n] = 0;
            for (int m = 0; m < g->M; m++) bg[n] += D[m * g->N + n];
        }
    if (g->epi == TK_EPI_BGRADB)
        for (int m = 0; m < g->M; m++) {
            bg[m] = 0;
            for (int k = 0; k < g->K; k++) bg[m] += g->transa ? A[k * g->M + m] : A[m * g->K + k];
        }
}

static int run_case(int M, int N, int K, int ta, int tb, tk_epilogue epi, int ints, float beta) {
    tk_ctx *c;
    tk_err e;
    if (tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e)) return 1;
    float *A = malloc(sizeof(float) * M * K), *B = malloc(sizeof(float) * K * N);
    float *C = malloc(sizeof(float) * M * N), *D = malloc(sizeof(float) * M * N);
    float *bias = malloc(sizeof(float) * N), *bg = malloc(sizeof(float) * (M > N ? M : N));
    uint8_t *aux = malloc((size_t)M * N);
    double *Dr = malloc(sizeof(double) * M * N), *bgr = malloc(sizeof(double) * (M > N ? M : N));
    fill(A, (size_t)M * K, 1, ints);
    fill(B, (size_t)K * N, 2, ints);
    fill(C, (size_t)M * N, 3, ints);
    fill(bias, (size_t)N, 4, ints);
    for (int i = 0; i < M * N; i++) aux[i] = tk_philox_uniform(7, 5, (uint64_t)i) > 0.5f;
    tk_gemm_args g = {.M = M, .N = N, .K = K, .transa = ta, .transb = tb, .ab_type = TK_F32,
                      .cd_type = TK_F32, .A = A, .B = B, .C = C, .D = D, .alpha = 1, .beta = beta,
                      .epi = epi, .bias = bias, .aux = aux, .bgrad = bg};
    uint8_t *aux_in = NULL;
    if (epi == TK_EPI_RELU_BIAS) memset(aux, 0xff, (size_t)M * N); // must be overwritten
    if (epi == TK_EPI_DRELU || epi == TK_EPI_DRELU_BGRAD) {
        aux_in = malloc((size_t)M * N);
        memcpy(aux_in, aux, (size_t)M * N);
    }
    naive(&g, Dr, bgr);
    int bad = tk_gemm(c, &g, &e) != 0;
    for (int i = 0; i < M * N && !bad; i++) {
        double tol = ints ? 0 : 1e-5 * (fabs(Dr[i]) > 1 ? fabs(Dr[i]) : 1) * (K > 16 ? K / 16.0 : 1);
        if (fabs(D[i] - Dr[i]) > tol) bad = 1;
        if (epi == TK_EPI_RELU_BIAS && aux[i] != (Dr[i] > 0)) bad = 1;
    }
    int nb = epi == TK_EPI_DRELU_BGRAD ? N : epi == TK_EPI_BGRADB ? M : 0;
    for (int i = 0; i < nb && !bad; i++)
        if (fabs(bg[i] - bgr[i]) > (ints ? 0 : 1e-4 * (fabs(bgr[i]) + 1))) bad = 1;
    free(A), free(B), free(C), free(D), free(bias), free(bg), free(aux), free(Dr), free(bgr), free(aux_in);
    tk_ctx_destroy(c);
    return bad;
}

TK_TEST(gemm_all_transposes_random) {
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            CHECK_EQ_INT(run_case(37, 29, 53, ta, tb, TK_EPI_NONE, 0, 0), 0);
            CHECK_EQ_INT(run_case(5, 130, 7, ta, tb, TK_EPI_NONE, 0, 0.5f), 0);
        }
}

TK_TEST(gemm_epilogues_random) {
    tk_epilogue epis[] = {TK_EPI_BIAS, TK_EPI_RELU_BIAS, TK_EPI_DRELU, TK_EPI_DRELU_BGRAD, TK_EPI_BGRADB};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(run_case(33, 17, 65, 0, 1, epis[i], 0, 0), 0);
        CHECK_EQ_INT(run_case(16, 24, 40, 1, 0, epis[i], 0, 0), 0);
    }
}

TK_TEST(gemm_small_integers_exact) {
    tk_epilogue epis[] = {TK_EPI_NONE, TK_EPI_BIAS, TK_EPI_RELU_BIAS, TK_EPI_DRELU_BGRAD, TK_EPI_BGRADB};
    for (int i = 0; i < 5; i++)
        for (int ta = 0; ta < 2; ta++)
            for (int tb = 0; tb < 2; tb++) CHECK_EQ_INT(run_case(9, 11, 13, ta, tb, epis[i], 1, 0), 0);
}

TK_TEST(gemm_2x2_by_hand) {
    tk_ctx *c;
    tk_err e;
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    float A[] = {1, 2, 3, 4}, B[] = {5, 6, 7, 8}, bias[] = {-20, -100}, D[4], bg[2];
    uint8_t aux[4];
    tk_gemm_args g = {.M = 2, .N = 2, .K = 2, .ab_type = TK_F32, .cd_type = TK_F32, .A = A, .B = B,
                      .D = D, .alpha = 1, .epi = TK_EPI_RELU_BIAS, .bias = bias, .aux = aux};
    CHECK_EQ_INT(tk_gemm(c, &g, &e), 0);
    // [[19, 22], [43, 50]] + [-20, -100] -> relu -> [[0, 0], [23, 0]]
    CHECK(D[0] == 0 && D[1] == 0 && D[2] == 23 && D[3] == 0);
    CHECK(aux[0] == 0 && aux[1] == 0 && aux[2] == 1 && aux[3] == 0);
    g.epi = TK_EPI_BGRADB;
    g.bgrad = bg;
    CHECK_EQ_INT(tk_gemm(c, &g, &e), 0);
    CHECK(bg[0] == 3 && bg[1] == 7);
    g.bias = NULL;
    g.epi = TK_EPI_BIAS;
    CHECK_EQ_INT(tk_gemm(c, &g, &e), TK_EINTERNAL);
    tk_ctx_destroy(c);
}
