// CUDA side of kernels/colcat.h: one thread a unit V of the wide matrix (16 bytes when both
// blocks' rows and the three pointers are multiples of 16 bytes, else one element), a grid-stride
// loop; the row and column of a unit from one division by the units a row.
#include <stdint.h>

#include "colcat.h"
#include "cuda_util.cuh"

namespace {

constexpr int kT = 256;

// split 0: wide (rows, na + nb) <- a (rows, na), b (rows, nb); split 1: the other way. In units of V.
template <typename V, int split>
__global__ void __launch_bounds__(kT) colcat_kernel(V *wide, V *a, int64_t na, V *b, int64_t nb, int64_t rows) {
    const int64_t n = na + nb, total = rows * n;
    for (int64_t i = (int64_t)blockIdx.x * kT + threadIdx.x; i < total; i += (int64_t)gridDim.x * kT) {
        const int64_t r = i / n, k = i - r * n;
        V *side = k < na ? a + r * na + k : b + r * nb + (k - na);
        if (split) *side = wide[i];
        else wide[i] = *side;
    }
}

template <int split> int run(tk_ctx *c, size_t es, void *wide, void *a, int64_t ca, void *b, int64_t cb, int64_t rows,
                             tk_err *e) {
    TRY(tk_colcat_check(es, ca, cb, rows, e));
    if (rows == 0) return 0;
    const size_t na = (size_t)ca * es, nb = (size_t)cb * es;
    const int wide16 = na % 16 == 0 && nb % 16 == 0 && ((uintptr_t)wide | (uintptr_t)a | (uintptr_t)b) % 16 == 0;
    const size_t u = wide16 ? 16 : es;
    const unsigned blocks = tk_cu_blocks(rows * (int64_t)((na + nb) / u), kT);
    cudaStream_t s = tk_cu_stream(c);
    if (wide16)
        colcat_kernel<uint4, split><<<blocks, kT, 0, s>>>((uint4 *)wide, (uint4 *)a, (int64_t)(na / 16), (uint4 *)b,
                                                         (int64_t)(nb / 16), rows);
    else if (es == 4)
        colcat_kernel<uint32_t, split><<<blocks, kT, 0, s>>>((uint32_t *)wide, (uint32_t *)a, ca, (uint32_t *)b, cb, rows);
    else
        colcat_kernel<uint16_t, split><<<blocks, kT, 0, s>>>((uint16_t *)wide, (uint16_t *)a, ca, (uint16_t *)b, cb, rows);
    return tk_cu_check(e, split ? "colsplit" : "colcat");
}

} // namespace

int tk_colcat_cuda(tk_ctx *c, size_t es, const void *a, int64_t ca, const void *b, int64_t cb, int64_t rows, void *out,
                   tk_err *e) {
    return run<0>(c, es, out, (void *)a, ca, (void *)b, cb, rows, e);
}

int tk_colsplit_cuda(tk_ctx *c, size_t es, const void *in, int64_t ca, int64_t cb, int64_t rows, void *a, void *b,
                     tk_err *e) {
    return run<1>(c, es, (void *)in, a, ca, b, cb, rows, e);
}
