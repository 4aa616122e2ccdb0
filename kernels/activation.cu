// CUDA side of kernels/activation.h: grid-stride pointwise kernels, fp32 math.
#include "act_types.cuh"
#include "activation.h"

namespace {

enum { GELU_F, GELU_B, TANH_F, TANH_B };

template <typename T, int OP>
__global__ void pointwise(int64_t n, const T *x, const T *dy, T *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        float v = tk_ld(x, i), r;
        if (OP == GELU_F) r = tk_gelu_f(v);
        else if (OP == GELU_B) r = tk_ld(dy, i) * tk_dgelu_f(v);
        else if (OP == TANH_F) r = tanhf(v);
        else r = tk_ld(dy, i) * (1.0f - v * v);
        tk_st(out, i, r);
    }
}

template <int OP>
int launch(tk_ctx *c, tk_dtype act, int64_t n, const void *x, const void *dy, void *out, const char *name, tk_err *e) {
    if (n <= 0) return 0;
    TK_ACT_DISPATCH(act, name, e,
                    (pointwise<T, OP><<<tk_cu_blocks(n, 256), 256, 0, tk_cu_stream(c)>>>(n, (const T *)x, (const T *)dy,
                                                                                         (T *)out)));
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
