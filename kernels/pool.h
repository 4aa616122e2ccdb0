// Pooling of channels-last activations (NHWC), the two a ResNet uses:
//
// Max pooling, R x R windows at stride s with pad on each side (ResNet's stem: 3x3/2 pad 1):
//   y[n,p,q,c] = max over the window's pixels inside the image of x[n,h,w,c]
//   idx[n,p,q,c] = (h - p s + pad) R + (w - q s + pad) of the first maximum in row-major window
//                  order (a NaN wins, as torch's max_pool2d)
//   with BN + ReLU before it (tk_maxpool_bn_fwd): each x first becomes round_t(relu(x scale +
//   shift)), scale = gamma invstd, shift = beta - mean scale per channel (fp32, as kernels/bn.h's
//   training forward computes them from its saved statistics), so y and idx are those of pooling
//   tk_bn_fwd_train's output, which then need not be written (ResNet's stem)
//   backward, gathered per input pixel in (p, q) order (so both sides add in the same order):
//   dx[n,h,w,c] = sum over the windows whose idx names (h, w) of (dy [+ dy2])[n,p,q,c]
// Global average pooling (the head):
//   y[n,c] = (sum_{hw} x[n,hw,c]) / HW   (fp32, summed in hw order);  dx[n,hw,c] = dy[n,c] / HW
// Activations in t (TK_F32, or TK_BF16 on cuda: fp32 math, outputs rounded); idx u8.
#ifndef TK_KERNELS_POOL_H
#define TK_KERNELS_POOL_H

#ifdef __cplusplus
extern "C" {
#endif
#include "bn.h"
#include "gpu/gpu.h"


int tk_maxpool_fwd(tk_ctx *c, tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad,
                   void *y, uint8_t *idx, tk_err *e);
// BN's parameters and saved statistics (kernels/bn.h).
typedef tk_bn_saved tk_pool_bn;
int tk_maxpool_bn_fwd(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R,
                      int stride, int pad, void *y, uint8_t *idx, tk_err *e);
// dy2 may be NULL.
int tk_maxpool_bwd(tk_ctx *c, tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H, int W,
                   int C, int R, int stride, int pad, void *dx, tk_err *e);
int tk_avgpool_fwd(tk_ctx *c, tk_dtype t, const void *x, int N, int HW, int C, void *y, tk_err *e);
int tk_avgpool_bwd(tk_ctx *c, tk_dtype t, const void *dy, int N, int HW, int C, void *dx, tk_err *e);

int tk_maxpool_fwd_ref(tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad, void *y,
                       uint8_t *idx, tk_err *e);
int tk_maxpool_bn_fwd_ref(tk_dtype t, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R, int stride,
                          int pad, void *y, uint8_t *idx, tk_err *e);
int tk_maxpool_bwd_ref(tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H, int W, int C,
                       int R, int stride, int pad, void *dx, tk_err *e);
int tk_avgpool_fwd_ref(tk_dtype t, const void *x, int N, int HW, int C, void *y, tk_err *e);
int tk_avgpool_bwd_ref(tk_dtype t, const void *dy, int N, int HW, int C, void *dx, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_maxpool_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad,
                        void *y, uint8_t *idx, tk_err *e);
int tk_maxpool_bn_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R,
                           int stride, int pad, void *y, uint8_t *idx, tk_err *e);
int tk_maxpool_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H,
                        int W, int C, int R, int stride, int pad, void *dx, tk_err *e);
int tk_avgpool_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int HW, int C, void *y, tk_err *e);
int tk_avgpool_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, int N, int HW, int C, void *dx, tk_err *e);
#endif

#ifdef __CUDACC__
#define TK_POOL_HD __host__ __device__
#else
#define TK_POOL_HD
#endif
static inline TK_POOL_HD int tk_pool_out(int H, int R, int stride, int pad) { return (H + 2 * pad - R) / stride + 1; }
// The windows (p range lo..hi) that hold coordinate h: p s - pad <= h <= p s - pad + R - 1.
static inline TK_POOL_HD void tk_pool_windows(int h, int R, int stride, int pad, int P, int *lo, int *hi) {
    int a = h + pad - R + 1;
    *lo = a <= 0 ? 0 : (a + stride - 1) / stride;
    *hi = (h + pad) / stride;
    if (*hi > P - 1) *hi = P - 1;
}

// The argument checks both sides share.
static inline int tk_pool_check(tk_dtype t, int N, int H, int W, int C, int R, int stride, int pad, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "pool: tensors in %s", tk_dtype_name(t));
    if (N < 1 || H < 1 || W < 1 || C < 1 || R < 1 || R > 15 || stride < 1 || pad < 0 || pad >= R || H + 2 * pad < R ||
        W + 2 * pad < R)
        return tk_err_set(e, TK_EINTERNAL, "pool: bad shape N %d H %d W %d C %d R %d stride %d pad %d", N, H, W, C, R,
                          stride, pad);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
