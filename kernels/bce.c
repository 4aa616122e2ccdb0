// Dispatch of kernels/bce.h (kernels/dispatch.h): the cpu backend runs the reference
// (bce_ref.c), the cuda backend the kernel (bce.cu).
#include "bce.h"
#include "dispatch.h"

int tk_bce_logits(tk_ctx *c, const float *logit, const uint8_t *label, int B, float *dlogit,
                  double *acc, tk_err *e) {
    return TK_DISPATCH(c, tk_bce_logits_ref(logit, label, B, dlogit, acc, e),
                       tk_bce_logits_cuda(c, logit, label, B, dlogit, acc, e));
}

int tk_bce_logits_act(tk_ctx *c, tk_dtype lt, const void *logit, const uint8_t *label, int B, void *dlogit,
                      double *acc, tk_err *e) {
    return TK_DISPATCH(c, tk_bce_logits_act_ref(lt, logit, label, B, dlogit, acc, e),
                       tk_bce_logits_act_cuda(c, lt, logit, label, B, dlogit, acc, e));
}

int tk_bce_logits_act_n(tk_ctx *c, tk_dtype lt, const void *logit, const uint8_t *label, int B, int N,
                        void *dlogit, double *acc, tk_err *e) {
    if (c->backend == TK_BACKEND_CPU) return tk_bce_logits_act_n_ref(lt, logit, label, B, N, dlogit, acc, e);
#ifdef TK_HAVE_CUDA
    return tk_bce_logits_act_n_cuda(c, lt, logit, label, B, N, dlogit, acc, e);
#else
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}
