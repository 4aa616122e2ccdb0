// Dispatch of kernels/conv.h (kernels/dispatch.h): the cpu backend runs the reference (conv_ref.c), the
// cuda backend cuDNN (lib/gpu/cudnn_conv.h), which stands for the kernel.
#include "conv.h"
#include "dispatch.h"
#include "gpu/cudnn_conv.h"

int tk_conv(tk_ctx *c, struct tk_cudnn *dnn, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, const void *a,
            const void *b, void *out, tk_err *e) {
    (void)dnn;
    return TK_DISPATCH(c, tk_conv_ref(pass, s, t, a, b, out, e), tk_cudnn_conv(dnn, pass, s, t, a, b, out, e));
}
