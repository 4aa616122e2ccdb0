// CUDA side of kernels/lr_schedule.h: one thread reads the device step counter, writes the
// learning rate of that update and increments the counter, so a captured graph advances the
// schedule on every replay with no host value. The formula is the header's tk_lr_formula, the
// one tk_lr_at evaluates on the host.
#include "cuda_util.cuh"
#include "lr_schedule.h"

__global__ static void lr_kernel(const tk_lr_sched s, int64_t *step, float *lr) {
    int64_t k = *step;
    *lr = (float)tk_lr_formula(&s, k);
    *step = k + 1;
}

int tk_lr_schedule_cuda(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e) {
    lr_kernel<<<1, 1, 0, tk_cu_stream(c)>>>(*s, step, lr);
    return tk_cu_check(e, "lr_schedule");
}
