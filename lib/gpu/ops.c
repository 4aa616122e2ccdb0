// Dispatch of the generic libgpu ops (kernels/{cast2d,sgd,lr_schedule}.h): the cpu backend runs
// the reference, the cuda backend the kernel (lib/gpu/dispatch.h).
#include "cast2d.h"
#include "gpu/dispatch.h"
#include "lr_schedule.h"
#include "sgd.h"

int tk_cast2d(tk_ctx *c, const void *src, tk_dtype st, int64_t sld, void *dst, tk_dtype dt, int64_t dld,
              int64_t rows, int64_t cols, tk_err *e) {
    return TK_DISPATCH(c, tk_cast2d_ref(src, st, sld, dst, dt, dld, rows, cols, e),
                       tk_cast2d_cuda(c, src, st, sld, dst, dt, dld, rows, cols, e));
}

int tk_sgd_update(tk_ctx *c, float *w, const float *g, size_t n, const float *lr, void *copy,
                  tk_dtype copy_type, tk_err *e) {
    return TK_DISPATCH(c, tk_sgd_update_ref(w, g, n, lr, copy, copy_type, e),
                       tk_sgd_update_cuda(c, w, g, n, lr, copy, copy_type, e));
}

int tk_lr_schedule(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e) {
    return TK_DISPATCH(c, tk_lr_schedule_ref(s, step, lr, e), tk_lr_schedule_cuda(c, s, step, lr, e));
}
