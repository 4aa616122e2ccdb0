// Dispatch of kernels/rnnt_greedy.h (kernels/dispatch.h): the cpu backend runs the reference
// (rnnt_greedy_ref.c), the cuda backend the kernel (rnnt_greedy.cu).
#include "rnnt_greedy.h"
#include "dispatch.h"

int tk_rnnt_greedy_step(tk_ctx *c, tk_dtype t, const tk_rnnt_greedy *s, const void *logits, const float *hn,
                        const float *cn, float *h, float *cc, tk_err *e) {
    return TK_DISPATCH(c, tk_rnnt_greedy_step_ref(t, s, logits, hn, cn, h, cc, e),
                       tk_rnnt_greedy_step_cuda(c, t, s, logits, hn, cn, h, cc, e));
}
