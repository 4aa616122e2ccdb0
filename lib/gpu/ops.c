// Dispatch of the generic libgpu ops (kernels/{cast2d,sgd,lr_schedule,bce,auc,dense_log1p}.h):
// the cpu backend runs the reference, the cuda backend the kernel (lib/gpu/dispatch.h).
#include "auc.h"
#include "bce.h"
#include "cast2d.h"
#include "dense_log1p.h"
#include "gpu/dispatch.h"
#include "lr_schedule.h"
#include "sgd.h"

int tk_cast2d(tk_ctx *c, const void *src, tk_dtype st, int64_t sld, void *dst, tk_dtype dt, int64_t dld,
              int64_t rows, int64_t cols, tk_err *e) {
    return TK_DISPATCH(c, tk_cast2d_ref(src, st, sld, dst, dt, dld, rows, cols, e),
                       tk_cast2d_cuda(c, src, st, sld, dst, dt, dld, rows, cols, e));
}

int tk_cast_many(tk_ctx *c, const tk_cast_span *spans, int count, tk_dtype st, tk_dtype dt, tk_err *e) {
    return TK_DISPATCH(c, tk_cast_many_ref(spans, count, st, dt, e), tk_cast_many_cuda(c, spans, count, st, dt, e));
}

int tk_sgd_update(tk_ctx *c, float *w, const float *g, size_t n, const float *lr, void *copy,
                  tk_dtype copy_type, tk_err *e) {
    return TK_DISPATCH(c, tk_sgd_update_ref(w, g, n, lr, copy, copy_type, e),
                       tk_sgd_update_cuda(c, w, g, n, lr, copy, copy_type, e));
}

int tk_lr_schedule(tk_ctx *c, const tk_lr_sched *s, int64_t *step, float *lr, tk_err *e) {
    return TK_DISPATCH(c, tk_lr_schedule_ref(s, step, lr, e), tk_lr_schedule_cuda(c, s, step, lr, e));
}

int tk_dense_log1p(tk_ctx *c, const int32_t *x, int64_t n, float *y, tk_err *e) {
    return TK_DISPATCH(c, tk_dense_log1p_ref(x, n, y, e), tk_dense_log1p_cuda(c, x, n, y, e));
}

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

size_t tk_auc_ws_bytes(tk_backend b, int64_t n) {
#ifdef TK_HAVE_CUDA
    if (b == TK_BACKEND_CUDA) return tk_auc_ws_bytes_cuda(n);
#endif
    (void)b;
    return (size_t)n * 8;
}

int tk_auc(tk_ctx *c, const float *score, const uint8_t *label, int64_t n, void *ws, double *auc,
           tk_err *e) {
    return TK_DISPATCH(c, tk_auc_ref(score, label, n, ws, auc, e),
                       tk_auc_cuda(c, score, label, n, ws, auc, e));
}
