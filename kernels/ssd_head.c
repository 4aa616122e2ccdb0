// Dispatch of kernels/ssd_head.h (kernels/dispatch.h): the cpu backend runs the reference
// (ssd_head_ref.c), the cuda backend the kernels (ssd_head.cu).
#include "dispatch.h"
#include "ssd_head.h"

int tk_ssd_bias_relu_fwd(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, int relu, tk_err *e) {
    return TK_DISPATCH(c, tk_ssd_bias_relu_fwd_ref(t, y, M, K, b, relu, e),
                       tk_ssd_bias_relu_fwd_cuda(c, t, y, M, K, b, relu, e));
}

int tk_ssd_relu_bwd(tk_ctx *c, tk_dtype t, int64_t n, const void *y, const void *dy, const void *dy2, void *dx,
                    tk_err *e) {
    return TK_DISPATCH(c, tk_ssd_relu_bwd_ref(t, n, y, dy, dy2, dx, e), tk_ssd_relu_bwd_cuda(c, t, n, y, dy, dy2, dx, e));
}

int tk_ssd_head_gather(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const void *src, float *out, tk_err *e) {
    return TK_DISPATCH(c, tk_ssd_head_gather_ref(t, mp, src, out, e), tk_ssd_head_gather_cuda(c, t, mp, src, out, e));
}

int tk_ssd_head_scatter(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const float *dout, void *dsrc, tk_err *e) {
    return TK_DISPATCH(c, tk_ssd_head_scatter_ref(t, mp, dout, dsrc, e),
                       tk_ssd_head_scatter_cuda(c, t, mp, dout, dsrc, e));
}

int tk_ssd_head_gather_many(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e) {
    return TK_DISPATCH(c, tk_ssd_head_gather_many_ref(t, nh, h, e), tk_ssd_head_gather_many_cuda(c, t, nh, h, e));
}

int tk_ssd_head_scatter_many(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e) {
    return TK_DISPATCH(c, tk_ssd_head_scatter_many_ref(t, nh, h, e), tk_ssd_head_scatter_many_cuda(c, t, nh, h, e));
}
