// Dispatch of kernels/pool.h (kernels/dispatch.h): the cpu backend runs the reference
// (pool_ref.c), the cuda backend the kernel (pool.cu).
#include "dispatch.h"
#include "pool.h"

int tk_maxpool_fwd(tk_ctx *c, tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad,
                   void *y, uint8_t *idx, tk_err *e) {
    return TK_DISPATCH(c, tk_maxpool_fwd_ref(t, x, N, H, W, C, R, stride, pad, y, idx, e),
                       tk_maxpool_fwd_cuda(c, t, x, N, H, W, C, R, stride, pad, y, idx, e));
}

int tk_maxpool_bn_fwd(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R,
                      int stride, int pad, void *y, uint8_t *idx, tk_err *e) {
    return TK_DISPATCH(c, tk_maxpool_bn_fwd_ref(t, x, bn, N, H, W, C, R, stride, pad, y, idx, e),
                       tk_maxpool_bn_fwd_cuda(c, t, x, bn, N, H, W, C, R, stride, pad, y, idx, e));
}

int tk_maxpool_bwd(tk_ctx *c, tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H, int W,
                   int C, int R, int stride, int pad, void *dx, tk_err *e) {
    return TK_DISPATCH(c, tk_maxpool_bwd_ref(t, dy, dy2, idx, N, H, W, C, R, stride, pad, dx, e),
                       tk_maxpool_bwd_cuda(c, t, dy, dy2, idx, N, H, W, C, R, stride, pad, dx, e));
}

int tk_avgpool_fwd(tk_ctx *c, tk_dtype t, const void *x, int N, int HW, int C, void *y, tk_err *e) {
    return TK_DISPATCH(c, tk_avgpool_fwd_ref(t, x, N, HW, C, y, e), tk_avgpool_fwd_cuda(c, t, x, N, HW, C, y, e));
}

int tk_avgpool_bwd(tk_ctx *c, tk_dtype t, const void *dy, int N, int HW, int C, void *dx, tk_err *e) {
    return TK_DISPATCH(c, tk_avgpool_bwd_ref(t, dy, N, HW, C, dx, e), tk_avgpool_bwd_cuda(c, t, dy, N, HW, C, dx, e));
}
