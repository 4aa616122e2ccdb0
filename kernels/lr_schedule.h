// The MLPerf DLRM learning-rate schedule (reference LRPolicyScheduler; HugeCTR's
// warmup/decay_start/decay_steps/decay_power), computed ON THE DEVICE from a device step
// counter so the whole iteration can be captured in one graph. For the update with 0-based
// index s = *step (the number of updates already applied):
//   s < warmup_steps (linear warm-up):         lr = base_lr * (s + 1) / warmup_steps
//   decay_start <= s < decay_start + decay_steps (polynomial decay):
//       lr = max(min_lr, base_lr * ((decay_steps - (s - decay_start)) / decay_steps)^power)
//   s >= decay_start + decay_steps:            lr = the last decay value (frozen, as the reference)
//   otherwise (between warm-up and decay):     lr = base_lr
// warmup_steps = 0 disables warm-up; decay_steps = 0 disables decay. Then *step += 1.
// (The reference's _LRScheduler quirk of holding base_lr*(W-1)/W between warm-up and decay is not
// copied: HugeCTR, whose hyperparameters the config takes, holds base_lr.)
#ifndef TK_KERNELS_LR_SCHEDULE_H
#define TK_KERNELS_LR_SCHEDULE_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

typedef struct tk_lr_sched {
    double base_lr;
    int64_t warmup_steps;
    int64_t decay_start;   // 0-based update index where the decay starts
    int64_t decay_steps;
    double power;          // 2 for MLPerf DLRM
    double min_lr;         // 1e-7 in the reference (0 = none)
} tk_lr_sched;

// The value for 0-based update index step (host function; the specification the ops follow).
double tk_lr_at(const tk_lr_sched *s, int64_t step);

// step (1) i64 device counter, read and incremented; lr (1) f32 device output.
int tk_lr_schedule(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e);
int tk_lr_schedule_ref(const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_lr_schedule_cuda(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e);
#endif

#ifdef __cplusplus
}
#endif
#endif
