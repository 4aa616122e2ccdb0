// CUDA side of kernels/activation.h: grid-stride pointwise kernels, fp32 math; 8 elements a
// thread with 16-byte accesses when every pointer is 16-byte aligned (the rest of n, n % 8, by
// the element-wise kernel).
#include "act_types.cuh"
#include "activation.h"

namespace {

enum { GELU_F, GELU_B, TANH_F, TANH_B };

template <int OP>
__device__ __forceinline__ float op1(float v, float g) {
    if (OP == GELU_F) return tk_gelu_f(v);
    if (OP == GELU_B) return g * tk_dgelu_f(v);
    if (OP == TANH_F) return tanhf(v);
    return g * (1.0f - v * v);
}

template <typename T, int OP>
__global__ void pointwise(int64_t n, const T *x, const T *dy, T *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        tk_st(out, i, op1<OP>(tk_ld(x, i), OP == GELU_B || OP == TANH_B ? tk_ld(dy, i) : 0.0f));
}

template <typename T, int OP>
__global__ void pointwise8(int64_t n8, const T *x, const T *dy, T *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n8; i += (int64_t)gridDim.x * blockDim.x) {
        float v[8], g[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        tk_ld8(x + 8 * i, v);
        if (OP == GELU_B || OP == TANH_B) tk_ld8(dy + 8 * i, g);
#pragma unroll
        for (int j = 0; j < 8; j++) v[j] = op1<OP>(v[j], g[j]);
        tk_st8(out + 8 * i, v);
    }
}

template <int OP>
int launch(tk_ctx *c, tk_dtype act, int64_t n, const void *x, const void *dy, void *out, const char *name, tk_err *e) {
    if (n <= 0) return 0;
    const int vec = tk_aligned16(x) && tk_aligned16(out) && (!dy || tk_aligned16(dy));
    const int64_t n8 = vec ? n / 8 : 0, done = 8 * n8;
    TK_ACT_DISPATCH(act, name, e, {
        const T *xt = (const T *)x, *dt = (const T *)dy;
        T *ot = (T *)out;
        if (n8 > 0) pointwise8<T, OP><<<tk_cu_blocks(n8, 256), 256, 0, tk_cu_stream(c)>>>(n8, xt, dt, ot);
        if (done < n)
            pointwise<T, OP><<<tk_cu_blocks(n - done, 256), 256, 0, tk_cu_stream(c)>>>(n - done, xt + done,
                                                                                       dt ? dt + done : nullptr, ot + done);
    });
    return tk_cu_check(e, name);
}

} // namespace

int tk_gelu_fwd_cuda(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    return launch<GELU_F>(c, act, n, x, NULL, y, "gelu_fwd", e);
}
int tk_gelu_bwd_cuda(tk_ctx *c, tk_dtype act, int64_t n, const void *x, const void *dy, void *dx, tk_err *e) {
    return launch<GELU_B>(c, act, n, x, dy, dx, "gelu_bwd", e);
}
int tk_tanh_fwd_cuda(tk_ctx *c, tk_dtype act, int64_t n, const void *x, void *y, tk_err *e) {
    return launch<TANH_F>(c, act, n, x, NULL, y, "tanh_fwd", e);
}
int tk_tanh_bwd_cuda(tk_ctx *c, tk_dtype act, int64_t n, const void *y, const void *dy, void *dx, tk_err *e) {
    return launch<TANH_B>(c, act, n, y, dy, dx, "tanh_bwd", e);
}
