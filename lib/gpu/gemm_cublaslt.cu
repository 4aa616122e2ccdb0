// tk_gemm on the cuda backend through cuBLASLt (semantics: lib/gpu/gpu.h, specification:
// kernels/gemm_ref.c).
//
// Row-major onto column-major: a row-major (R, C) matrix is a column-major (C, R) one with the
// same leading dimension, so D = op(A) op(B) (row-major, M x N) is computed as the column-major
// product D^T = op(B)^T op(A)^T, an (N x M) result: cuBLASLt's "A" is our B and its "B" is our A.
// In that view the bias and the DRELU_BGRAD gradient run along cuBLASLt's rows (our N), the relu
// bit mask is an (N x M) column-major bit matrix with a leading dimension rounded up to 128 bits
// (tk_gemm_aux_bytes), and BGRADB reduces cuBLASLt's B (our op(A)) over K, giving M values.
//
// Each distinct call (shape, transposes, types, epilogue, beta != 0, pointer alignment) gets a
// plan, cached in ctx->gemm_cache: the descriptors and the algorithm the heuristic chose. When
// cuBLASLt has no kernel for the fused epilogue (seen on H100, cuBLASLt 13.1: DRELU_BGRAD and
// BGRADB with bf16/fp16 output and an fp32 bias gradient; BGRADB when our A is not transposed),
// or its fused kernel is slower than the plain GEMM plus ours (DRELU with a 16-bit output), the
// plan runs the plain GEMM and our kernels below do the epilogue, with the same results and the
// same bit mask layout, so fused and unfused GEMMs can be mixed in one model.
//
// The GELU epilogues are never cuBLASLt's: its GELU is the tanh approximation, ours the exact erf
// form (lib/core/gelu.h), so they always run as the plain GEMM plus our kernel (epi_gelu).
// A strided batch (tk_gemm_args.batch) sets the layouts' batch count and offsets.
//
// One difference from the reference: cuBLASLt's RELU_AUX_BIAS sets the mask bit where the
// pre-activation is exactly 0 (relu'(0) = 1) while kernels/gemm_ref.c and our unfused kernel
// clear it (relu'(0) = 0, as PyTorch). Only exact zeros differ (with bf16/fp16 output its
// epilogue rounds x + bias in that type, so zeros are more frequent); tests/gpu/test_gemm.c
// counts them.
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>

#include "core/gelu.h"
#include "core/vec.cuh" // tk_ld, tk_st, tk_ld4, tk_ld8, tk_st8
#include "gpu/gpu.h"

namespace {

// 32 MiB per stream: what NVIDIA recommends for Hopper's cuBLASLt kernels. One slice per stream
// so GEMMs on different streams never share scratch.
constexpr size_t kWsPerStream = (size_t)32 << 20;

struct Key {
    int M, N, K, ta, tb, ab, cd, epi, has_c, align, align_epi, det, unfused, tf32;
    int batch, sm_target; // (an even count of ints: no padding bytes before the strides, which memcmp
                          // would read); sm_target: cuBLASLt's SM count target, 0 = the device's
    int64_t sa, sb, sc;
};

struct Plan {
    Key key;
    tk_epilogue lt_epi; // the epilogue cuBLASLt applies: the call's, or NONE (our kernels do it)
    int gemm;           // 0 when M, N or K is zero (no cuBLASLt call)
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lcd;
    cublasLtMatmulAlgo_t algo;
};

struct Cache {
    Plan *p;
    int n, cap;
    int unfused;     // tests: force the unfused path
    int sms;         // the device's multiprocessors (tk_ctx.gemm_sm_margin is taken from these)
};

int lt_fail(tk_err *e, cublasStatus_t st, const char *what, const tk_gemm_args *g) {
    tk_err_set(e, TK_EDEVICE, "gemm %dx%dx%d (%s/%s, epilogue %d): %s: %s", g->M, g->N, g->K,
               tk_dtype_name(g->ab_type), tk_dtype_name(g->cd_type), (int)g->epi, what,
               cublasLtGetStatusString(st));
    return tk_err_lib(e, "cublas", (int)st);
}

int rt_fail(tk_err *e, cudaError_t st, const char *what) {
    tk_err_set(e, TK_EDEVICE, "gemm: %s: %s", what, cudaGetErrorString(st));
    return tk_err_lib(e, "cuda", (int)st);
}

#define LT_TRY(call, what)                                                                         \
    do {                                                                                           \
        cublasStatus_t st_ = (call);                                                               \
        if (st_ != CUBLAS_STATUS_SUCCESS) return lt_fail(e, st_, what, g);                         \
    } while (0)

// Only called after supported_types().
cudaDataType_t cuda_type(tk_dtype t) {
    return t == TK_BF16 ? CUDA_R_16BF : t == TK_F16 ? CUDA_R_16F : CUDA_R_32F;
}

int supported_types(tk_dtype ab, tk_dtype cd) {
    if (ab == TK_F32) return cd == TK_F32;
    if (ab == TK_BF16) return cd == TK_BF16 || cd == TK_F32;
    if (ab == TK_F16) return cd == TK_F16 || cd == TK_F32;
    return 0;
}

unsigned ptr_align(const void *p) {
    uintptr_t v = (uintptr_t)p;
    if (!v) return 256;
    unsigned a = (unsigned)(v & (~v + 1));
    return a > 256 || a == 0 ? 256 : a;
}

cublasLtEpilogue_t lt_epilogue(tk_epilogue epi) {
    switch (epi) {
    case TK_EPI_BIAS: return CUBLASLT_EPILOGUE_BIAS;
    case TK_EPI_RELU_BIAS: return CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
    case TK_EPI_DRELU: return CUBLASLT_EPILOGUE_DRELU;
    case TK_EPI_DRELU_BGRAD: return CUBLASLT_EPILOGUE_DRELU_BGRAD;
    case TK_EPI_BGRADB: return CUBLASLT_EPILOGUE_BGRADB;
    default: return CUBLASLT_EPILOGUE_DEFAULT;
    }
}

int64_t aux_ld(int N) { return ((int64_t)N + 127) / 128 * 128; }

// ---- unfused epilogue kernels (row-major D (M, N) of type T) ----

// D = beta * C (or 0): the whole GEMM when K == 0.
template <typename T>
__global__ void scale_c(T *D, const T *C, float beta, size_t n) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) tk_st(D, i, C && beta != 0.0f ? beta * tk_ld(C, i) : 0.0f);
}

// BIAS, RELU_BIAS (writes the mask) and DRELU (reads it). One thread per byte of the relu bit
// mask: 8 consecutive columns of one row of D. The bit of D[m, n] is bit (n % 8) of byte
// (m * ld + n) / 8, cuBLASLt's column-major bit matrix of D^T.
// VEC: the 8 elements are loaded and stored as 16-byte vectors (N % 8 == 0, D and bias aligned).
template <typename T, bool VEC>
__global__ void epi_pointwise(T *D, int M, int N, int epi, const T *bias, uint8_t *aux, int64_t ld) {
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int64_t groups = ((int64_t)N + 7) / 8;
    if (t >= groups * M) return;
    int m = (int)(t / groups), n0 = (int)(t % groups) * 8;
    size_t row = (size_t)m * N;
    size_t byte = (size_t)((m * ld + n0) / 8);
    uint8_t in = epi == TK_EPI_DRELU ? aux[byte] : 0, out = 0;
    float v[8] = {}, b[8] = {};
    if constexpr (VEC) {
        tk_ld8(D + row + n0, v);
        if (epi == TK_EPI_BIAS || epi == TK_EPI_RELU_BIAS) tk_ld8(bias + n0, b);
    } else {
        for (int j = 0; j < 8 && n0 + j < N; j++) {
            v[j] = tk_ld(D, row + n0 + j);
            if (epi == TK_EPI_BIAS || epi == TK_EPI_RELU_BIAS) b[j] = tk_ld(bias, n0 + j);
        }
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        if (epi == TK_EPI_BIAS || epi == TK_EPI_RELU_BIAS) v[j] += b[j];
        if (epi == TK_EPI_RELU_BIAS) {
            if (v[j] > 0) out |= (uint8_t)(1u << j);
            else v[j] = 0;
        }
        if (epi == TK_EPI_DRELU && !((in >> j) & 1)) v[j] = 0;
    }
    if constexpr (VEC) {
        tk_st8(D + row + n0, v);
    } else {
        for (int j = 0; j < 8 && n0 + j < N; j++) tk_st(D, row + n0 + j, v[j]);
    }
    if (epi == TK_EPI_RELU_BIAS) aux[byte] = n0 + 8 <= N ? out : (uint8_t)(out & ((1u << (N - n0)) - 1));
}

// The GELU epilogues: GELU_BIAS: v = D + bias, aux = v, D = gelu(v); DGELU: D = D * gelu'(aux)
// (DGELU_BGRAD does it inside its column sums, col_sum_part). aux is (M, N) in T. epi_gelu_vec
// takes 8 consecutive columns a thread with 16-byte accesses (N % 8 == 0, aligned), epi_gelu one
// element a thread.
template <typename T>
__global__ void epi_gelu_vec(T *D, int M, int N, int epi, const T *bias, T *aux) {
    const int groups = N / 8;
    const int64_t n = (int64_t)M * groups;
    for (int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; t < n; t += (int64_t)gridDim.x * blockDim.x) {
        int64_t m = t / groups;
        int n0 = (int)(t - m * groups) * 8;
        size_t i = (size_t)m * N + n0;
        float v[8], a[8];
        tk_ld8(D + i, v);
        if (epi == TK_EPI_GELU_BIAS) {
            tk_ld8(bias + n0, a);
#pragma unroll
            for (int j = 0; j < 8; j++) v[j] += a[j];
            if (aux) tk_st8(aux + i, v);
#pragma unroll
            for (int j = 0; j < 8; j++) v[j] = tk_gelu_f(v[j]);
        } else {
            tk_ld8(aux + i, a);
#pragma unroll
            for (int j = 0; j < 8; j++) v[j] *= tk_dgelu_f(a[j]);
        }
        tk_st8(D + i, v);
    }
}

template <typename T>
__global__ void epi_gelu(T *D, int M, int N, int epi, const T *bias, T *aux) {
    size_t n = (size_t)M * N;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float v = tk_ld(D, i);
        if (epi == TK_EPI_GELU_BIAS) {
            v += tk_ld(bias, i % N);
            if (aux) tk_st(aux, i, v);
            v = tk_gelu_f(v);
        } else {
            v *= tk_dgelu_f(tk_ld(aux, i));
        }
        tk_st(D, i, v);
    }
}

// Column sums of a row-major (R, C) matrix, in double, in a fixed order (deterministic). A
// block is 64 column lanes x 4 row lanes; each thread sums V consecutive columns (one 8- or
// 16-byte load per row when V = 4) over its rows of one chunk; partial sums go to
// part[chunk][c], and col_sum_finish adds the chunks in order. With aux (DRELU_BGRAD unfused),
// X is D: the relu mask is applied to it in place first, so D is read once and written once;
// GELU (DGELU_BGRAD) likewise multiplies D by gelu'(gaux) (gaux: the (R, C) pre-activation) first.
template <typename T, int V, bool GELU>
__global__ void col_sum_part(T *X, int R, int C, int rows_per_chunk, double *part, const uint8_t *aux, int64_t ld,
                             const T *gaux) {
    __shared__ double s[4][64 * V + 1];
    int c0 = (blockIdx.x * 64 + threadIdx.x) * V;
    int r0 = blockIdx.y * rows_per_chunk, r1 = min(R, r0 + rows_per_chunk);
    double acc[V] = {};
    if (c0 < C)
        for (int r = r0 + threadIdx.y; r < r1; r += 4) {
            T *x = X + (size_t)r * C + c0;
            if constexpr (V == 4) {
                float4 v = tk_ld4(x, 0);
                if constexpr (GELU) {
                    float4 a = tk_ld4(gaux, (size_t)r * C + c0);
                    v.x *= tk_dgelu_f(a.x), v.y *= tk_dgelu_f(a.y), v.z *= tk_dgelu_f(a.z), v.w *= tk_dgelu_f(a.w);
                    tk_st(x, 0, v.x), tk_st(x, 1, v.y), tk_st(x, 2, v.z), tk_st(x, 3, v.w);
                } else if (aux) { // 4 consecutive columns: 4 bits of one byte (c0 % 4 == 0)
                    unsigned bits = aux[(r * ld + c0) / 8] >> ((r * ld + c0) % 8);
                    v.x = bits & 1 ? v.x : 0.0f, v.y = bits & 2 ? v.y : 0.0f;
                    v.z = bits & 4 ? v.z : 0.0f, v.w = bits & 8 ? v.w : 0.0f;
                    tk_st(x, 0, v.x), tk_st(x, 1, v.y), tk_st(x, 2, v.z), tk_st(x, 3, v.w);
                }
                acc[0] += v.x, acc[1] += v.y, acc[2] += v.z, acc[3] += v.w;
            } else {
                float v = tk_ld(x, 0);
                if constexpr (GELU) tk_st(x, 0, v *= tk_dgelu_f(tk_ld(gaux, (size_t)r * C + c0)));
                else if (aux && !((aux[(r * ld + c0) / 8] >> ((r * ld + c0) % 8)) & 1)) tk_st(x, 0, v = 0.0f);
                acc[0] += v;
            }
        }
#pragma unroll
    for (int v = 0; v < V; v++) s[threadIdx.y][threadIdx.x * V + v] = acc[v];
    __syncthreads();
    for (int k = threadIdx.y * 64 + threadIdx.x; k < 64 * V; k += 256) {
        int c = blockIdx.x * 64 * V + k;
        if (c < C) part[(size_t)blockIdx.y * C + c] = ((s[0][k] + s[1][k]) + s[2][k]) + s[3][k];
    }
}

__global__ void col_sum_finish(const double *part, int chunks, int C, float *out) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double t = 0;
    for (int i = 0; i < chunks; i++) t += part[(size_t)i * C + c];
    out[c] = (float)t;
}

// Row sums of a row-major (R, C) matrix: one warp per row, fixed shuffle order.
template <typename T>
__global__ void row_sum(const T *X, int R, int C, float *out) {
    int r = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
    if (r >= R) return;
    double acc = 0;
    for (int c = lane; c < C; c += 32) acc += tk_ld(X, (size_t)r * C + c);
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
    if (lane == 0) out[r] = (float)acc;
}

template <typename T>
int col_sum(const T *X, int R, int C, float *out, void *ws, size_t ws_bytes, cudaStream_t s, tk_err *e,
            const uint8_t *aux = nullptr, const T *gaux = nullptr) {
    if (C <= 0) return 0;
    // Enough chunks of rows to fill the GPU (about 2048 blocks), within the workspace.
    int vec = C % 4 == 0 && (uintptr_t)X % (4 * sizeof(T)) == 0 && (uintptr_t)gaux % (4 * sizeof(T)) == 0;
    int tiles = (C + 64 * (vec ? 4 : 1) - 1) / (64 * (vec ? 4 : 1));
    int chunks = R > 0 ? (R + 63) / 64 : 1;
    int want = (2048 + tiles - 1) / tiles;
    if (chunks > want) chunks = want;
    while (chunks > 1 && (size_t)chunks * C * sizeof(double) > ws_bytes) chunks /= 2;
    if ((size_t)chunks * C * sizeof(double) > ws_bytes)
        return tk_err_set(e, TK_EINTERNAL, "gemm: bias gradient of %d columns exceeds the workspace", C);
    int per = R > 0 ? (R + chunks - 1) / chunks : 0;
    double *part = (double *)ws;
    T *x = (T *)X; // written only when aux is given (then X is the GEMM's D)
    dim3 grid(tiles, chunks), block(64, 4);
    if (gaux && vec) col_sum_part<T, 4, true><<<grid, block, 0, s>>>(x, R, C, per, part, aux, aux_ld(C), gaux);
    else if (gaux) col_sum_part<T, 1, true><<<grid, block, 0, s>>>(x, R, C, per, part, aux, aux_ld(C), gaux);
    else if (vec) col_sum_part<T, 4, false><<<grid, block, 0, s>>>(x, R, C, per, part, aux, aux_ld(C), nullptr);
    else col_sum_part<T, 1, false><<<grid, block, 0, s>>>(x, R, C, per, part, aux, aux_ld(C), nullptr);
    col_sum_finish<<<(C + 255) / 256, 256, 0, s>>>(part, chunks, C, out);
    return 0;
}

template <typename T>
int row_sums(const T *X, int R, int C, float *out, cudaStream_t s) {
    if (R > 0) row_sum<T><<<(R + 7) / 8, 256, 0, s>>>(X, R, C, out);
    return 0;
}

// The epilogue, after a plain GEMM (or, with no GEMM at all, after D = beta C).
template <typename TC, typename TA>
int unfused(const tk_gemm_args *g, int did_gemm, void *ws, size_t ws_bytes, cudaStream_t s, tk_err *e) {
    TC *D = (TC *)g->D;
    size_t mn = (size_t)g->M * g->N;
    if (!did_gemm && mn)
        scale_c<TC><<<(unsigned)((mn + 255) / 256), 256, 0, s>>>(D, (const TC *)g->C, g->beta, mn);
    int gelu = g->epi == TK_EPI_GELU_BIAS || g->epi == TK_EPI_DGELU || g->epi == TK_EPI_DGELU_BGRAD;
    if ((g->epi == TK_EPI_GELU_BIAS || g->epi == TK_EPI_DGELU) && mn) {
        const TC *bias = (const TC *)g->bias;
        TC *aux = (TC *)g->aux;
        int vec = g->N % 8 == 0 && (uintptr_t)D % 16 == 0 && (uintptr_t)aux % 16 == 0 &&
                  (g->epi != TK_EPI_GELU_BIAS || (uintptr_t)bias % 16 == 0);
        size_t work = vec ? mn / 8 : mn;
        unsigned blocks = (unsigned)((work + 255) / 256 < 8192 ? (work + 255) / 256 : 8192);
        if (vec) epi_gelu_vec<TC><<<blocks, 256, 0, s>>>(D, g->M, g->N, g->epi, bias, aux);
        else epi_gelu<TC><<<blocks, 256, 0, s>>>(D, g->M, g->N, g->epi, bias, aux);
    }
    // DGELU_BGRAD: gelu' and the column sums in one pass over D
    if (g->epi == TK_EPI_DGELU_BGRAD)
        TRY(col_sum<TC>(D, g->M, g->N, (float *)g->bgrad, ws, ws_bytes, s, e, nullptr, (const TC *)g->aux));
    // DRELU_BGRAD: the mask and the column sums in one pass over D (col_sum below).
    if (!gelu && g->epi != TK_EPI_NONE && g->epi != TK_EPI_BGRADB && g->epi != TK_EPI_DRELU_BGRAD && mn) {
        int64_t threads = ((int64_t)g->N + 7) / 8 * g->M;
        unsigned blocks = (unsigned)((threads + 255) / 256);
        const TC *bias = (const TC *)g->bias;
        int vec = g->N % 8 == 0 && (uintptr_t)D % 16 == 0 && (uintptr_t)bias % 16 == 0;
        if (vec) epi_pointwise<TC, true><<<blocks, 256, 0, s>>>(D, g->M, g->N, g->epi, bias, (uint8_t *)g->aux, aux_ld(g->N));
        else epi_pointwise<TC, false><<<blocks, 256, 0, s>>>(D, g->M, g->N, g->epi, bias, (uint8_t *)g->aux, aux_ld(g->N));
    }
    if (g->epi == TK_EPI_DRELU_BGRAD)
        TRY(col_sum<TC>(D, g->M, g->N, (float *)g->bgrad, ws, ws_bytes, s, e, (const uint8_t *)g->aux));
    if (g->epi == TK_EPI_BGRADB) {
        const TA *A = (const TA *)g->A;
        if (g->transa) TRY(col_sum<TA>(A, g->K, g->M, (float *)g->bgrad, ws, ws_bytes, s, e));
        else TRY(row_sums<TA>(A, g->M, g->K, (float *)g->bgrad, s));
    }
    cudaError_t st = cudaGetLastError();
    return st == cudaSuccess ? 0 : rt_fail(e, st, "epilogue kernel launch failed");
}

template <typename TA>
int unfused_cd(const tk_gemm_args *g, int did_gemm, void *ws, size_t ws_bytes, cudaStream_t s, tk_err *e) {
    switch (g->cd_type) {
    case TK_F32: return unfused<float, TA>(g, did_gemm, ws, ws_bytes, s, e);
    case TK_BF16: return unfused<__nv_bfloat16, TA>(g, did_gemm, ws, ws_bytes, s, e);
    default: return unfused<__half, TA>(g, did_gemm, ws, ws_bytes, s, e);
    }
}

int run_unfused(const tk_gemm_args *g, int did_gemm, void *ws, size_t ws_bytes, cudaStream_t s, tk_err *e) {
    switch (g->ab_type) {
    case TK_F32: return unfused_cd<float>(g, did_gemm, ws, ws_bytes, s, e);
    case TK_BF16: return unfused_cd<__nv_bfloat16>(g, did_gemm, ws, ws_bytes, s, e);
    default: return unfused_cd<__half>(g, did_gemm, ws, ws_bytes, s, e);
    }
}

// ---- plans ----

void plan_destroy(Plan *p) {
    if (p->la) cublasLtMatrixLayoutDestroy(p->la);
    if (p->lb) cublasLtMatrixLayoutDestroy(p->lb);
    if (p->lcd) cublasLtMatrixLayoutDestroy(p->lcd);
    if (p->op) cublasLtMatmulDescDestroy(p->op);
    memset(p, 0, sizeof *p);
}

// The per-call pointers of the epilogue (they are not part of the plan).
int set_epilogue_ptrs(Plan *p, const tk_gemm_args *g, tk_err *e) {
    tk_epilogue lt = p->lt_epi;
    const void *vec = lt == TK_EPI_BIAS || lt == TK_EPI_RELU_BIAS ? g->bias : g->bgrad;
    if (lt != TK_EPI_DRELU && lt != TK_EPI_NONE)
        LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof vec),
               "cannot set the bias pointer");
    if (lt == TK_EPI_RELU_BIAS || lt == TK_EPI_DRELU || lt == TK_EPI_DRELU_BGRAD) {
        void *aux = g->aux;
        LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux),
               "cannot set the relu mask pointer");
    }
    return 0;
}

// Builds the descriptors for cuBLASLt doing epilogue lt and asks the heuristic for an
// algorithm. *found = 0 when cuBLASLt has none (the caller then tries a smaller lt); with
// lt = NONE that is an error.
int plan_build(tk_ctx *c, Plan *p, const tk_gemm_args *g, tk_epilogue lt, int *found, tk_err *e) {
    *found = 0;
    p->lt_epi = lt;
    p->gemm = g->M > 0 && g->N > 0 && g->K > 0;
    if (!p->gemm) {
        *found = 1;
        p->lt_epi = TK_EPI_NONE;
        return 0;
    }
    cudaDataType_t ab = cuda_type(g->ab_type), cd = cuda_type(g->cd_type);
    cublasComputeType_t ct = g->tf32 && g->ab_type == TK_F32 ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    LT_TRY(cublasLtMatmulDescCreate(&p->op, ct, CUDA_R_32F), "cannot create a matmul descriptor");
    cublasOperation_t opa = g->transb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = g->transa ? CUBLAS_OP_T : CUBLAS_OP_N;
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa), "TRANSA");
    LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb), "TRANSB");
    // cuBLASLt's A = our B: stored (K, N) row-major = (N x K) column-major, ld N; transposed
    // storage (N, K) row-major = (K x N) column-major, ld K. Likewise its B = our A.
    int64_t M = g->M, N = g->N, K = g->K;
    LT_TRY(g->transb ? cublasLtMatrixLayoutCreate(&p->la, ab, K, N, K) : cublasLtMatrixLayoutCreate(&p->la, ab, N, K, N),
           "cannot create the layout of B");
    LT_TRY(g->transa ? cublasLtMatrixLayoutCreate(&p->lb, ab, M, K, M) : cublasLtMatrixLayoutCreate(&p->lb, ab, K, M, K),
           "cannot create the layout of A");
    LT_TRY(cublasLtMatrixLayoutCreate(&p->lcd, cd, N, M, N), "cannot create the layout of D");
    if (g->batch > 1) {
        int32_t bc = g->batch;
        int64_t so[3] = {g->stride_b, g->stride_a, g->stride_c};
        cublasLtMatrixLayout_t ls[3] = {p->la, p->lb, p->lcd};
        for (int i = 0; i < 3; i++) {
            LT_TRY(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc, sizeof bc),
                   "cannot set the batch count");
            LT_TRY(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &so[i],
                                                    sizeof so[i]),
                   "cannot set the batch stride");
        }
    }
    if (lt != TK_EPI_NONE) {
        cublasLtEpilogue_t epi = lt_epilogue(lt);
        LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof epi),
               "cannot set the epilogue");
        if (lt == TK_EPI_DRELU_BGRAD || lt == TK_EPI_BGRADB) {
            int32_t bt = CUDA_R_32F; // our bias gradients are always fp32
            LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bt, sizeof bt),
                   "cannot set the bias gradient type");
        }
        if (lt == TK_EPI_RELU_BIAS || lt == TK_EPI_DRELU || lt == TK_EPI_DRELU_BGRAD) {
            int64_t ld = aux_ld(g->N);
            LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld),
                   "cannot set the relu mask leading dimension");
        }
        TRY(set_epilogue_ptrs(p, g, e)); // the heuristic reads their alignment
    }
    if (p->key.sm_target > 0) {
        // Fewer SMs than the device has: a collective's kernel holds the others while this GEMM
        // runs, and a kernel sized for every SM would run a second, mostly idle wave.
        int32_t sms = p->key.sm_target;
        LT_TRY(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms),
               "cannot set the SM count target");
    }
    cublasLtMatmulPreference_t pref;
    LT_TRY(cublasLtMatmulPreferenceCreate(&pref), "cannot create a matmul preference");
    uint64_t ws = c->gemm_ws_bytes / TK_NSTREAMS;
    uint32_t al = (uint32_t)p->key.align;
    cublasStatus_t st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES && !st; a++)
        st = cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, sizeof al);
    if (!st && c->deterministic) {
        // Split-K reductions are the only place where cuBLASLt's summation order can depend
        // on the algorithm; deterministic runs exclude them.
        uint32_t mask = CUBLASLT_REDUCTION_SCHEME_NONE;
        st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &mask, sizeof mask);
    }
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    if (!st)
        st = cublasLtMatmulAlgoGetHeuristic((cublasLtHandle_t)c->blaslt, p->op, p->la, p->lb, p->lcd, p->lcd, pref,
                                            1, &res, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    // With an epilogue, a refusal of any kind (NOT_SUPPORTED, or INVALID_VALUE for a bias
    // gradient type it lacks) means "try a smaller one"; a plain GEMM must succeed.
    if (lt != TK_EPI_NONE && (st != CUBLAS_STATUS_SUCCESS || nres == 0)) return 0;
    if (st == CUBLAS_STATUS_SUCCESS && nres == 0) return 0;
    if (st != CUBLAS_STATUS_SUCCESS) return lt_fail(e, st, "algorithm heuristic failed", g);
    p->algo = res.algo;
    *found = 1;
    return 0;
}

int sm_target(const tk_ctx *c, const Cache *cache) {
    if (c->gemm_sm_margin <= 0 || cache->sms <= 0) return 0;
    return c->gemm_sm_margin < cache->sms ? cache->sms - c->gemm_sm_margin : 1;
}

int plan_get(tk_ctx *c, const tk_gemm_args *g, Plan **out, tk_err *e) {
    Cache *cache = (Cache *)c->gemm_cache;
    unsigned align = ptr_align(g->A);
    const void *ptrs[] = {g->B, g->C, g->D};
    for (const void *q : ptrs) align = q && ptr_align(q) < align ? ptr_align(q) : align;
    // The heuristic also reads the epilogue pointers' alignment from the descriptor.
    unsigned align_epi = 256;
    const void *eptrs[] = {g->bias, g->aux, g->bgrad};
    for (const void *q : eptrs) align_epi = q && ptr_align(q) < align_epi ? ptr_align(q) : align_epi;
    int batched = g->batch > 1;
    Key k = {g->M, g->N, g->K, g->transa, g->transb, (int)g->ab_type, (int)g->cd_type, (int)g->epi,
             g->beta != 0.0f, (int)align, (int)align_epi, c->deterministic, cache->unfused, g->tf32 && g->ab_type == TK_F32,
             batched ? g->batch : 1, sm_target(c, cache), batched ? g->stride_a : 0, batched ? g->stride_b : 0, batched ? g->stride_c : 0};
    for (int i = 0; i < cache->n; i++)
        if (memcmp(&cache->p[i].key, &k, sizeof k) == 0) {
            *out = &cache->p[i];
            return 0;
        }
    if (cache->n == cache->cap) {
        int cap = cache->cap ? cache->cap * 2 : 32;
        Plan *np = (Plan *)realloc(cache->p, sizeof(Plan) * cap);
        if (!np) return tk_err_set(e, TK_EIO, "gemm: out of host memory for the plan cache");
        cache->p = np;
        cache->cap = cap;
    }
    Plan *p = &cache->p[cache->n];
    memset(p, 0, sizeof *p);
    p->key = k;
    // What cuBLASLt should try to do, most first. Its DRELU epilogues with a 16-bit output ran
    // at a third of the plain GEMM's speed on H100 (65536x1024x1024 bf16: 0.59 ms with DRELU,
    // 0.20 ms without), slower than the plain GEMM plus our one-pass mask (and column sums), so
    // those are not fused.
    int slow_drelu = (g->epi == TK_EPI_DRELU || g->epi == TK_EPI_DRELU_BGRAD) && g->cd_type != TK_F32;
    int gelu = g->epi == TK_EPI_GELU_BIAS || g->epi == TK_EPI_DGELU || g->epi == TK_EPI_DGELU_BGRAD;
    tk_epilogue levels[2];
    int nl = 0;
    if (!cache->unfused && g->epi != TK_EPI_NONE && !slow_drelu && !gelu) levels[nl++] = g->epi;
    levels[nl++] = TK_EPI_NONE;
    int found = 0, rc = 0;
    for (int i = 0; i < nl && !rc && !found; i++) {
        plan_destroy(p);
        p->key = k;
        rc = plan_build(c, p, g, levels[i], &found, e);
    }
    if (!rc && !found) {
        rc = tk_err_set(e, TK_EDEVICE, "gemm %dx%dx%d (%s/%s, transa %d, transb %d): cuBLASLt has no algorithm",
                        g->M, g->N, g->K, tk_dtype_name(g->ab_type), tk_dtype_name(g->cd_type), g->transa, g->transb);
        tk_err_lib(e, "cublas", (int)CUBLAS_STATUS_NOT_SUPPORTED);
    }
    if (rc) {
        plan_destroy(p);
        return rc;
    }
    cache->n++;
    *out = p;
    return 0;
}

} // namespace

extern "C" int tk_gemm_cuda_init(tk_ctx *c, tk_err *e) {
    cublasLtHandle_t h;
    cublasStatus_t st = cublasLtCreate(&h);
    if (st != CUBLAS_STATUS_SUCCESS) {
        tk_err_set(e, TK_EDEVICE, "cannot create a cuBLASLt handle: %s", cublasLtGetStatusString(st));
        return tk_err_lib(e, "cublas", (int)st);
    }
    c->blaslt = h;
    c->gemm_ws_bytes = kWsPerStream * TK_NSTREAMS;
    cudaError_t cst = cudaMalloc(&c->gemm_ws, c->gemm_ws_bytes);
    if (cst != cudaSuccess) {
        c->gemm_ws = NULL;
        c->gemm_ws_bytes = 0;
        return rt_fail(e, cst, "cannot allocate the cuBLASLt workspace");
    }
    c->gemm_cache = calloc(1, sizeof(Cache));
    if (!c->gemm_cache) return tk_err_set(e, TK_EIO, "out of host memory creating the GEMM cache");
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, c->device) == cudaSuccess)
        ((Cache *)c->gemm_cache)->sms = sms;
    return 0;
}

extern "C" void tk_gemm_cuda_fini(tk_ctx *c) {
    Cache *cache = (Cache *)c->gemm_cache;
    if (cache) {
        for (int i = 0; i < cache->n; i++) plan_destroy(&cache->p[i]);
        free(cache->p);
        free(cache);
    }
    if (c->gemm_ws) cudaFree(c->gemm_ws);
    if (c->blaslt) cublasLtDestroy((cublasLtHandle_t)c->blaslt);
    c->gemm_cache = NULL;
    c->gemm_ws = NULL;
    c->blaslt = NULL;
    c->gemm_ws_bytes = 0;
}

// Tests: force (on = 1) the unfused epilogue path for plans made from now on.
extern "C" void tk_gemm_cuda_set_unfused(tk_ctx *c, int on) {
    if (c->gemm_cache) ((Cache *)c->gemm_cache)->unfused = on;
}

// Tests and benchmarks: 1 when this call's epilogue runs inside cuBLASLt, 0 when it runs in our
// kernels (or there is none), negative on error. Plans the call.
extern "C" int tk_gemm_cuda_is_fused(tk_ctx *c, const tk_gemm_args *g, tk_err *e) {
    Plan *p;
    int rc = plan_get(c, g, &p, e);
    return rc ? -rc : p->lt_epi != TK_EPI_NONE;
}

extern "C" int tk_gemm_cuda(tk_ctx *c, const tk_gemm_args *g, tk_err *e) {
    if (g->M < 0 || g->N < 0 || g->K < 0)
        return tk_err_set(e, TK_EINTERNAL, "gemm: negative size %dx%dx%d", g->M, g->N, g->K);
    if (!supported_types(g->ab_type, g->cd_type))
        return tk_err_set(e, TK_EINTERNAL, "gemm (cuda): unsupported types %s/%s", tk_dtype_name(g->ab_type),
                          tk_dtype_name(g->cd_type));
    if (g->beta != 0.0f && !g->C) return tk_err_set(e, TK_EINTERNAL, "gemm: beta != 0 without C");
    if (g->batch > 1 && (g->M == 0 || g->N == 0 || g->K == 0))
        return tk_err_set(e, TK_EINTERNAL, "gemm: a batch of empty GEMMs");
    if (g->stream < 0 || g->stream >= TK_NSTREAMS)
        return tk_err_set(e, TK_EINTERNAL, "gemm: bad stream %d", g->stream);
    if (!c->gemm_cache) return tk_err_set(e, TK_EINTERNAL, "gemm: the cuda context has no cuBLASLt state");
    Plan *p;
    TRY(plan_get(c, g, &p, e));
    cudaStream_t s = (cudaStream_t)c->stream[g->stream];
    size_t ws_bytes = c->gemm_ws_bytes / TK_NSTREAMS;
    void *ws = (char *)c->gemm_ws + ws_bytes * g->stream;
    if (p->gemm) {
        TRY(set_epilogue_ptrs(p, g, e));
        const void *C = g->C ? g->C : g->D;
        LT_TRY(cublasLtMatmul((cublasLtHandle_t)c->blaslt, p->op, &g->alpha, g->B, p->la, g->A, p->lb, &g->beta, C,
                              p->lcd, g->D, p->lcd, &p->algo, ws, ws_bytes, s),
               "cublasLtMatmul failed");
    }
    if (p->lt_epi != g->epi || !p->gemm) return run_unfused(g, p->gemm, ws, ws_bytes, s, e);
    return 0;
}
