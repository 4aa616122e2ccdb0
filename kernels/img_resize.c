// Dispatch of kernels/img_resize.h (kernels/dispatch.h): the cpu backend runs the reference
// (img_resize_ref.c), the cuda backend the kernel (img_resize.cu).
#include "dispatch.h"
#include "img_resize.h"

int tk_img_resize(tk_ctx *c, const uint8_t *src, const tk_img_rs_job *jobs, int n, int maxtaps,
                  const tk_img_rs_out *o, float *tmp, void *ws, void *out, tk_err *e) {
    return TK_DISPATCH(c, tk_img_resize_ref(src, jobs, n, maxtaps, o, tmp, ws, out, e),
                       tk_img_resize_cuda(c, src, jobs, n, maxtaps, o, tmp, ws, out, e));
}
