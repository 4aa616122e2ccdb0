// CUDA side of kernels/colcat.h: one thread a unit V of the wide matrix (16 bytes when both
// blocks' rows and the three pointers are multiples of 16 bytes, else one element), a grid-stride
// loop; the row and column of a unit from one division by the units a row. With a bias, a's units
// are added to it element by element in fp32 (T: the elements' type).
#include <stdint.h>

#include "act_types.cuh"
#include "colcat.h"

namespace {

constexpr int kT = 256;

// a's unit at column unit k (elements k E .. k E + E - 1 of its row) plus the bias, rounded once.
template <typename T, typename V> __device__ __forceinline__ V add_bias(V v, int64_t k, const float *bias) {
    constexpr int E = sizeof(V) / sizeof(T);
    union {
        V v;
        T x[E];
    } u;
    u.v = v;
#pragma unroll
    for (int j = 0; j < E; j++) u.x[j] = tk_to<T>(tk_f(u.x[j]) + bias[k * E + j]);
    return u.v;
}

// split 0: wide (rows, na + nb) <- a (rows, na) (+ bias), b (rows, nb); split 1: the other way. In
// units of V.
template <typename T, typename V, int split>
__global__ void __launch_bounds__(kT) colcat_kernel(V *wide, V *a, int64_t na, const float *bias, V *b, int64_t nb,
                                                    int64_t rows) {
    const int64_t n = na + nb, total = rows * n;
    for (int64_t i = (int64_t)blockIdx.x * kT + threadIdx.x; i < total; i += (int64_t)gridDim.x * kT) {
        const int64_t r = i / n, k = i - r * n;
        V *side = k < na ? a + r * na + k : b + r * nb + (k - na);
        if (split) *side = wide[i];
        else wide[i] = bias && k < na ? add_bias<T>(*side, k, bias) : *side;
    }
}

template <typename T, int split>
void launch(void *wide, void *a, size_t na, const float *bias, void *b, size_t nb, int64_t rows, int wide16,
            cudaStream_t s) {
    const size_t u = wide16 ? 16 : sizeof(T);
    const unsigned blocks = tk_cu_blocks(rows * (int64_t)((na + nb) / u), kT);
    if (wide16)
        colcat_kernel<T, uint4, split><<<blocks, kT, 0, s>>>((uint4 *)wide, (uint4 *)a, (int64_t)(na / u), bias,
                                                            (uint4 *)b, (int64_t)(nb / u), rows);
    else
        colcat_kernel<T, T, split><<<blocks, kT, 0, s>>>((T *)wide, (T *)a, (int64_t)(na / u), bias, (T *)b,
                                                        (int64_t)(nb / u), rows);
}

template <int split>
int run(tk_ctx *c, tk_dtype t, void *wide, void *a, int64_t ca, const float *bias, void *b, int64_t cb, int64_t rows,
        tk_err *e) {
    TRY(tk_colcat_check(t, ca, cb, rows, e));
    if (rows == 0) return 0;
    const size_t es = tk_dtype_size(t), na = (size_t)ca * es, nb = (size_t)cb * es;
    const int wide16 = na % 16 == 0 && nb % 16 == 0 && ((uintptr_t)wide | (uintptr_t)a | (uintptr_t)b) % 16 == 0;
    TK_ACT_DISPATCH(t, "colcat", e, launch<T, split>(wide, a, na, bias, b, nb, rows, wide16, tk_cu_stream(c)));
    return tk_cu_check(e, split ? "colsplit" : "colcat");
}

} // namespace

int tk_colcat_cuda(tk_ctx *c, tk_dtype t, const void *a, int64_t ca, const float *bias, const void *b, int64_t cb,
                   int64_t rows, void *out, tk_err *e) {
    return run<0>(c, t, out, (void *)a, ca, bias, (void *)b, cb, rows, e);
}

int tk_colsplit_cuda(tk_ctx *c, tk_dtype t, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b,
                     tk_err *e) {
    return run<1>(c, t, (void *)in, a, ca, NULL, b, cb, rows, e);
}
