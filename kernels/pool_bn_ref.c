// CPU reference of kernels/pool_bn.h: the max pool's backward, then BN's (the specification).
#include <stdlib.h>

#include "pool_bn.h"

int tk_maxpool_bn_bwd_ref(tk_dtype t, const void *x, tk_pool_bn bn, const void *dy, const void *dy2,
                          const uint8_t *idx, int N, int H, int W, int C, int R, int stride, int pad, void *dx,
                          float *dgamma, float *dbeta, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int64_t M = (int64_t)N * H * W;
    void *dpool = malloc((size_t)M * C * tk_dtype_size(t));
    if (!dpool) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = tk_maxpool_bwd_ref(t, dy, dy2, idx, N, H, W, C, R, stride, pad, dpool, e);
    if (!rc)
        rc = tk_bn_bwd_ref(t, x, NULL, bn.beta, dpool, NULL, M, C, bn.gamma, bn.mean, bn.invstd, dx, NULL, dgamma,
                           dbeta, e);
    free(dpool);
    return rc;
}
