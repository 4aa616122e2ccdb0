// Dispatch of kernels/conv3d.h (kernels/dispatch.h): the cpu backend runs the reference
// (conv3d_ref.c), the cuda backend cuDNN (lib/gpu/cudnn_conv3d.h), which stands for the kernel.
#include "conv3d.h"
#include "dispatch.h"

int tk_conv3d(tk_ctx *c, struct tk_cudnn *dnn, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a,
              const void *b, void *out, tk_err *e) {
    (void)dnn;
    return TK_DISPATCH(c, tk_conv3d_ref(pass, s, t, a, b, out, e), tk_cudnn_conv3d(dnn, pass, s, t, a, b, out, e));
}
