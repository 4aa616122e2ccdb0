// CUDA side of kernels/xent_smooth.h: one block per row (fp64 sums in a fixed tree order), the
// rows' losses added by one more block in a fixed order.
#include "cuda_util.cuh"
#include "core/vec.cuh"
#include "xent_smooth.h"

namespace {

constexpr int kT = 256;

// Tree sum of v over the block (every thread gets it).
__device__ double block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = kT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

template <typename T>
__global__ void __launch_bounds__(kT) xent_rows(const float *z, const int32_t *label, int K, int N, double eps, T *dz,
                                                double *loss) {
    __shared__ double sh[kT];
    const int b = blockIdx.x, y = label[b];
    const float *r = z + (size_t)b * K;
    T *d = dz ? dz + (size_t)b * K : nullptr;
    if (y < 0 || y >= K) {
        for (int j = threadIdx.x; j < K && d; j += kT) d[j] = tk_to<T>(0.0f);
        if (threadIdx.x == 0) loss[b] = 0;
        return;
    }
    double mx = -INFINITY;
    for (int j = threadIdx.x; j < K; j += kT) mx = fmax(mx, (double)r[j]);
    sh[threadIdx.x] = mx;
    __syncthreads();
    for (int s = kT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] = fmax(sh[threadIdx.x], sh[threadIdx.x + s]);
        __syncthreads();
    }
    mx = sh[0];
    __syncthreads();
    double se = 0, sz = 0;
    for (int j = threadIdx.x; j < K; j += kT) se += exp((double)r[j] - mx), sz += r[j];
    se = block_sum(se, sh);
    sz = block_sum(sz, sh);
    const double lse = mx + log(se);
    if (threadIdx.x == 0) loss[b] = lse - eps / K * sz - (1.0 - eps) * r[y];
    for (int j = threadIdx.x; j < K && d; j += kT) {
        double q = eps / K + (j == y ? 1.0 - eps : 0.0);
        d[j] = tk_to<T>((float)((exp((double)r[j] - lse) - q) / N));
    }
}

__global__ void __launch_bounds__(kT) add_losses(const double *loss, int B, int N, double *acc) {
    __shared__ double sh[kT];
    double s = 0;
    for (int b = threadIdx.x; b < B; b += kT) s += loss[b];
    s = block_sum(s, sh);
    if (threadIdx.x == 0) {
        acc[0] += s / N;
        acc[1] += 1;
    }
}

__global__ void __launch_bounds__(kT) top1_rows(const float *z, const int32_t *label, int K,
                                                unsigned long long *count) {
    __shared__ float sv[kT];
    __shared__ int si[kT];
    const float *r = z + (size_t)blockIdx.x * K;
    float bv = 0;
    int bi = -1;
    for (int j = threadIdx.x; j < K; j += kT) // each thread's first largest (indices ascend)
        if (r[j] == r[j] && (bi < 0 || r[j] > bv)) bv = r[j], bi = j;
    sv[threadIdx.x] = bv;
    si[threadIdx.x] = bi;
    __syncthreads();
    for (int s = kT / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) {
            float ov = sv[threadIdx.x + s];
            int oi = si[threadIdx.x + s], mi = si[threadIdx.x];
            if (oi >= 0 && (mi < 0 || ov > sv[threadIdx.x] || (ov == sv[threadIdx.x] && oi < mi)))
                sv[threadIdx.x] = ov, si[threadIdx.x] = oi;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0 && si[0] >= 0 && si[0] == label[blockIdx.x]) atomicAdd(count, 1ull);
}

} // namespace

size_t tk_xent_smooth_ws_bytes_cuda(int B) { return tk_cu_align((size_t)(B > 0 ? B : 1) * sizeof(double)); }

int tk_xent_smooth_cuda(tk_ctx *c, const float *z, const int32_t *label, int B, int K, int N, float eps, tk_dtype t,
                        void *dz, double *acc, void *ws, tk_err *e) {
    TRY(tk_xent_check(B, K, N, eps, t, e));
    if (B == 0) return 0;
    cudaStream_t st = tk_cu_stream(c);
    double *loss = (double *)ws;
    if (t == TK_BF16)
        xent_rows<__nv_bfloat16><<<B, kT, 0, st>>>(z, label, K, N, eps, (__nv_bfloat16 *)dz, loss);
    else
        xent_rows<float><<<B, kT, 0, st>>>(z, label, K, N, eps, (float *)dz, loss);
    if (acc) add_losses<<<1, kT, 0, st>>>(loss, B, N, acc);
    return tk_cu_check(e, "xent_smooth");
}

int tk_top1_count_cuda(tk_ctx *c, const float *z, const int32_t *label, int B, int K, int64_t *count, tk_err *e) {
    if (B < 0 || K < 1) return tk_err_set(e, TK_EINTERNAL, "top1: bad shape B %d K %d", B, K);
    if (B == 0) return 0;
    top1_rows<<<B, kT, 0, tk_cu_stream(c)>>>(z, label, K, (unsigned long long *)count);
    return tk_cu_check(e, "top1_count");
}
