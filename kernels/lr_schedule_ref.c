// CPU reference of kernels/lr_schedule.h; tk_lr_formula (in the header) is the formula both
// backends follow.
#include "lr_schedule.h"

double tk_lr_at(const tk_lr_sched *s, int64_t step) { return tk_lr_formula(s, step); }

int tk_lr_schedule_ref(const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e) {
    (void)e;
    *lr = (float)tk_lr_at(s, *step);
    *step += 1;
    return 0;
}
