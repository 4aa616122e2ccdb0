// CUDA side of kernels/instnorm.h. Instance norm is batch norm over one sample's S voxels, so each
// sample runs kernels/bn.cu's training kernels on its (S, C) slice: per-channel fp32 partials of
// rows shifted by the channel's first value over G row groups (up to one wave of blocks on an
// H100), added in fp64 in a fixed order, then the apply (+ ReLU) pass; the backward likewise, with
// the ReLU's mask from y. Those kernels stream 16-byte vectors through a cp.async ring (C % 8 == 0
// in bf16, C % 4 in fp32, aligned: all the U-Net's widths), so the statistics are one read of x,
// the forward's apply one read and one write. The running statistics BN would update go to
// scratch in ws (instance norm keeps none), and the backward's per-sample dgamma, dbeta are added
// over the samples by one more small kernel in a fixed order: deterministic, no atomics.
#include "bn.h"
#include "cuda_util.cuh"
#include "instnorm.h"

namespace {

constexpr int kT = 256;

// dgamma[c] = sum_n part[n][0][c], dbeta[c] = sum_n part[n][1][c] (n ascending, fp64).
__global__ void __launch_bounds__(kT) sum_samples(const float *part, int N, int C, float *dgamma, float *dbeta) {
    const int c = blockIdx.x * kT + threadIdx.x;
    if (c >= C) return;
    double g = 0, b = 0;
    for (int n = 0; n < N; n++) g += part[(size_t)n * 2 * C + c], b += part[(size_t)(n * 2 + 1) * C + c];
    dgamma[c] = (float)g;
    dbeta[c] = (float)b;
}

// ws: BN's workspace for (S, C), then scratch (2 C floats: BN's running statistics in the forward),
// then the per-sample dgamma, dbeta of the backward (N x 2 x C floats).
size_t bn_part(int64_t S, int C) { return tk_cu_align(tk_bn_ws_bytes_cuda(S, C)); }
float *scratch_of(void *ws, int64_t S, int C) { return (float *)((char *)ws + bn_part(S, C)); }
float *pairs_of(void *ws, int64_t S, int C) {
    return (float *)((char *)ws + bn_part(S, C) + tk_cu_align((size_t)2 * C * sizeof(float)));
}

} // namespace

size_t tk_instnorm_ws_bytes_cuda(int N, int64_t S, int C) {
    return bn_part(S, C) + tk_cu_align((size_t)2 * C * sizeof(float)) +
           tk_cu_align((size_t)(N > 0 ? N : 1) * C * 2 * sizeof(float));
}

int tk_instnorm_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int64_t S, int C, const float *gamma,
                         const float *beta, int relu, float eps, float *save_mean, float *save_invstd, void *y,
                         void *ws, tk_err *e) {
    TRY(tk_instnorm_check(t, N, S, C, e));
    const size_t es = tk_dtype_size(t), stride = (size_t)S * C * es;
    float *run = scratch_of(ws, S, C);
    for (int n = 0; n < N; n++)
        TRY(tk_bn_fwd_train_cuda(c, t, (const char *)x + n * stride, S, C, gamma, beta, NULL, relu, eps, 0.0f, run,
                                 run + C, save_mean + (size_t)n * C, save_invstd + (size_t)n * C,
                                 (char *)y + n * stride, NULL, ws, e));
    return 0;
}

int tk_instnorm_bwd_cuda(tk_ctx *c, tk_dtype t, const void *x, const void *y, const void *dy, const void *dy2, int N,
                         int64_t S, int C, const float *gamma, const float *save_mean, const float *save_invstd,
                         void *dx, float *dgamma, float *dbeta, void *ws, tk_err *e) {
    TRY(tk_instnorm_check(t, N, S, C, e));
    const size_t es = tk_dtype_size(t), stride = (size_t)S * C * es;
    float *pairs = pairs_of(ws, S, C);
    for (int n = 0; n < N; n++) {
        const size_t o = n * stride;
        float *dg = pairs + (size_t)n * 2 * C, *db = dg + C; // sample n's (dgamma, dbeta)
        TRY(tk_bn_bwd_cuda(c, t, (const char *)x + o, y ? (const char *)y + o : NULL, NULL, NULL, (const char *)dy + o,
                           dy2 ? (const char *)dy2 + o : NULL, S, C, gamma, save_mean + (size_t)n * C,
                           save_invstd + (size_t)n * C, (char *)dx + o, NULL, dg, db, ws, e));
    }
    sum_samples<<<(C + kT - 1) / kT, kT, 0, tk_cu_stream(c)>>>(pairs, N, C, dgamma, dbeta);
    return tk_cu_check(e, "instnorm bwd");
}
