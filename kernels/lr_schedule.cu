// CUDA side of kernels/lr_schedule.h: one thread reads the device step counter, writes the
// learning rate of that update and increments the counter, so a captured graph advances the
// schedule on every replay with no host value.
#include "cuda_util.cuh"
#include "lr_schedule.h"

// The same formula as tk_lr_at (kernels/lr_schedule_ref.c), in double.
__device__ static double lr_at(const tk_lr_sched s, int64_t step) {
    if (s.warmup_steps > 0 && step < s.warmup_steps)
        return s.base_lr * (double)(step + 1) / (double)s.warmup_steps;
    if (s.decay_steps > 0 && step >= s.decay_start) {
        int64_t k = step - s.decay_start;
        if (k >= s.decay_steps) k = s.decay_steps - 1; // frozen at the last decay value
        double lr = s.base_lr * pow((double)(s.decay_steps - k) / (double)s.decay_steps, s.power);
        return lr > s.min_lr ? lr : s.min_lr;
    }
    return s.base_lr;
}

__global__ static void lr_kernel(const tk_lr_sched s, int64_t *step, float *lr) {
    int64_t k = *step;
    *lr = (float)lr_at(s, k);
    *step = k + 1;
}

int tk_lr_schedule_cuda(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e) {
    lr_kernel<<<1, 1, 0, tk_cu_stream(c)>>>(*s, step, lr);
    return tk_cu_check(e, "lr_schedule");
}
