// Dispatch of kernels/img_norm.h (kernels/dispatch.h): the cpu backend runs the reference
// (img_norm_ref.c), the cuda backend the kernel (img_norm.cu).
#include "dispatch.h"
#include "img_norm.h"

int tk_img_normalize(tk_ctx *c, const uint8_t *src, int64_t npix, tk_img_norm n, tk_dtype t, void *dst, int cin,
                     tk_err *e) {
    return TK_DISPATCH(c, tk_img_normalize_ref(src, npix, n, t, dst, cin, e),
                       tk_img_normalize_cuda(c, src, npix, n, t, dst, cin, e));
}
