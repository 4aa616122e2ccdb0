// Dispatch of kernels/lr_schedule.h (kernels/dispatch.h): the cpu backend runs the reference
// (lr_schedule_ref.c), the cuda backend the kernel (lr_schedule.cu).
#include "dispatch.h"
#include "lr_schedule.h"

int tk_lr_schedule(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e) {
    return TK_DISPATCH(c, tk_lr_schedule_ref(s, step, lr, e), tk_lr_schedule_cuda(c, s, step, lr, e));
}
