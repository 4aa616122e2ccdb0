// CUDA side of kernels/bce.h. One block of 1024 threads: each thread takes a fixed strided set of
// samples, the block reduces the losses in a fixed tree order (no atomics), so the accumulated
// loss is the same on every run and every replay of a graph. A training batch (65536 samples) is
// a few microseconds of work, so one block is enough. Math in fp64 as the reference.
#include "bce.h"
#include "core/vec.cuh"
#include "cuda_util.cuh"

constexpr int kThreads = 1024;


template <typename TL>
__global__ static void __launch_bounds__(kThreads)
bce_kernel(const TL *logit, const uint8_t *label, int B, int N, TL *dlogit, double *acc) {
    __shared__ double part[kThreads];
    double sum = 0;
    for (int b = threadIdx.x; b < B; b += kThreads) {
        double z = tk_ld(logit, b), y = label[b] ? 1.0 : 0.0;
        sum += fmax(z, 0.0) - z * y + log1p(exp(-fabs(z)));
        if (dlogit) tk_st(dlogit, b, (float)((1.0 / (1.0 + exp(-z)) - y) / N));
    }
    part[threadIdx.x] = sum;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0 && acc && B > 0) {
        acc[0] += part[0] / N;
        acc[1] += 1;
    }
}

int tk_bce_logits_cuda(tk_ctx *c, const float *logit, const uint8_t *label, int B, float *dlogit,
                       double *acc, tk_err *e) {
    if (B <= 0) return 0;
    bce_kernel<<<1, kThreads, 0, tk_cu_stream(c)>>>(logit, label, B, B, dlogit, acc);
    return tk_cu_check(e, "bce_logits");
}

int tk_bce_logits_act_n_cuda(tk_ctx *c, tk_dtype lt, const void *logit, const uint8_t *label, int B, int N,
                             void *dlogit, double *acc, tk_err *e) {
    if (N < B) return tk_err_set(e, TK_EINTERNAL, "bce_logits: normalizer %d < batch %d", N, B);
    if (lt != TK_F32 && lt != TK_BF16)
        return tk_err_set(e, TK_EINTERNAL, "bce_logits: logits in %s", tk_dtype_name(lt));
    if (B <= 0) return 0;
    if (lt == TK_F32)
        bce_kernel<<<1, kThreads, 0, tk_cu_stream(c)>>>((const float *)logit, label, B, N, (float *)dlogit, acc);
    else
        bce_kernel<<<1, kThreads, 0, tk_cu_stream(c)>>>((const __nv_bfloat16 *)logit, label, B, N,
                                                        (__nv_bfloat16 *)dlogit, acc);
    return tk_cu_check(e, "bce_logits");
}

int tk_bce_logits_act_cuda(tk_ctx *c, tk_dtype lt, const void *logit, const uint8_t *label, int B,
                           void *dlogit, double *acc, tk_err *e) {
    return tk_bce_logits_act_n_cuda(c, lt, logit, label, B, B, dlogit, acc, e);
}
