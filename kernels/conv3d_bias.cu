// CUDA side of kernels/conv3d_bias.h. Forward: one thread per element (grid-stride). Backward: a
// block of 256 threads is L channel lanes (min(K, 256)) by R = 256 / L row lanes; block g of G adds
// its group's rows (about kRowsPerLane a row lane) for each channel in fp64 per thread, the R row
// lanes are added in order by the first; then one block a channel adds the G partials (each thread
// a fixed stride of them, then a fixed tree): the same order every run.
#include "act_types.cuh"
#include "conv3d_bias.h"

namespace {

constexpr int kT = 256, kMaxG = 4096, kRowsPerLane = 32;

// Enough groups to fill the GPU with short per-thread loops (the sums' latency, not the bytes,
// bounded the earlier 2,048 rows a group: 0.4 ms for 1,024 rows of 256 channels).
int groups(int64_t M, int K) {
    const int L = K < kT ? K : kT, R = kT / L;
    const int64_t g = (M + (int64_t)R * kRowsPerLane - 1) / ((int64_t)R * kRowsPerLane);
    return (int)(g < 1 ? 1 : g > kMaxG ? kMaxG : g);
}

template <typename T> __global__ void __launch_bounds__(kT) add_bias(T *y, int64_t M, int K, const float *b) {
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < (size_t)M * K; i += (size_t)gridDim.x * kT)
        y[i] = tk_to<T>(tk_f(y[i]) + b[i % K]);
}

template <typename T>
__global__ void __launch_bounds__(kT) col_partials(const T *dy, int64_t M, int K, int G, double *part) {
    __shared__ double sh[kT];
    const int L = K < kT ? K : kT, R = kT / L, lane = threadIdx.x % L, r = threadIdx.x / L;
    const int64_t chunk = (M + G - 1) / G, m0 = blockIdx.x * chunk, m1 = m0 + chunk < M ? m0 + chunk : M;
    for (int c0 = 0; c0 < K; c0 += L) { // channel tiles of L (one tile unless K > 256)
        const int c = c0 + lane;
        double s = 0;
        if (r < R && c < K)
            for (int64_t m = m0 + r; m < m1; m += R) s += tk_f(dy[(size_t)m * K + c]);
        sh[threadIdx.x] = s;
        __syncthreads();
        if (r == 0 && c < K) {
            double t = 0;
            for (int j = 0; j < R; j++) t += sh[j * L + lane];
            part[(size_t)blockIdx.x * K + c] = t;
        }
        __syncthreads();
    }
}

// Block c: channel c's G partials, thread t adding partials t, t + 256, ... then the tree.
__global__ void __launch_bounds__(kT) col_finish(const double *part, int K, int G, float *db) {
    __shared__ double sh[kT];
    const int c = blockIdx.x;
    double s = 0;
    for (int g = threadIdx.x; g < G; g += kT) s += part[(size_t)g * K + c];
    sh[threadIdx.x] = s;
    __syncthreads();
    for (int h = kT / 2; h > 0; h /= 2) {
        if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) db[c] = (float)sh[0];
}

} // namespace

size_t tk_conv3d_bias_ws_bytes_cuda(int64_t M, int K) {
    return tk_cu_align((size_t)groups(M, K > 0 ? K : 1) * (K > 0 ? K : 1) * sizeof(double));
}

int tk_conv3d_bias_fwd_cuda(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, tk_err *e) {
    TRY(tk_conv3d_bias_check(t, M, K, e));
    TK_ACT_DISPATCH(t, "conv3d bias", e,
                    add_bias<T><<<tk_cu_blocks(M * K, kT), kT, 0, tk_cu_stream(c)>>>((T *)y, M, K, b));
    return tk_cu_check(e, "conv3d bias fwd");
}

int tk_conv3d_bias_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, int64_t M, int K, float *db, void *ws, tk_err *e) {
    TRY(tk_conv3d_bias_check(t, M, K, e));
    const int G = groups(M, K);
    cudaStream_t st = tk_cu_stream(c);
    TK_ACT_DISPATCH(t, "conv3d bias", e, col_partials<T><<<G, kT, 0, st>>>((const T *)dy, M, K, G, (double *)ws));
    col_finish<<<K, kT, 0, st>>>((const double *)ws, K, G, db);
    return tk_cu_check(e, "conv3d bias bwd");
}
