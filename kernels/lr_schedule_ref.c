// CPU reference of kernels/lr_schedule.h; tk_lr_at is the formula both backends follow.
#include <math.h>

#include "lr_schedule.h"

double tk_lr_at(const tk_lr_sched *s, int64_t step) {
    if (s->warmup_steps > 0 && step < s->warmup_steps)
        return s->base_lr * (double)(step + 1) / (double)s->warmup_steps;
    if (s->decay_steps > 0 && step >= s->decay_start) {
        int64_t k = step - s->decay_start;
        if (k >= s->decay_steps) k = s->decay_steps - 1; // frozen at the last decay value
        double lr = s->base_lr * pow((double)(s->decay_steps - k) / (double)s->decay_steps, s->power);
        return lr > s->min_lr ? lr : s->min_lr;
    }
    return s->base_lr;
}

int tk_lr_schedule_ref(const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e) {
    (void)e;
    *lr = (float)tk_lr_at(s, *step);
    *step += 1;
    return 0;
}
