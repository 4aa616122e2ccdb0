// Dispatch of kernels/melfeat.h (kernels/dispatch.h): the cpu backend runs the reference
// (melfeat_ref.c), the cuda backend the kernels and cuFFT (melfeat.cu).
#include "melfeat.h"
#include "dispatch.h"

size_t tk_melfeat_ws_bytes(tk_backend b, const tk_melfeat_cfg *cfg, int B, int Fmax) {
    (void)cfg, (void)B, (void)Fmax; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_melfeat_ws_bytes_cuda(cfg, B, Fmax));
}

int tk_speed_resample(tk_ctx *c, int B, const int64_t *in_off, const int64_t *out_off, const double *rate,
                      const float *in, float *out, tk_err *e) {
    return TK_DISPATCH(c, tk_speed_resample_ref(B, in_off, out_off, rate, in, out, e),
                       tk_speed_resample_cuda(c, B, in_off, out_off, rate, in, out, e));
}

int tk_melfeat_logmel(tk_ctx *c, const tk_melfeat_cfg *cfg, const tk_melfeat_batch *bt, const float *audio,
                      const float *fb, float *x, void *ws, tk_err *e) {
    (void)ws;
    return TK_DISPATCH(c, tk_melfeat_logmel_ref(cfg, bt, audio, fb, x, e),
                       tk_melfeat_logmel_cuda(c, cfg, bt, audio, fb, x, ws, e));
}

int tk_specaug(tk_ctx *c, const tk_specaug_cfg *s, const tk_melfeat_batch *bt, int n_mels, float *x, tk_err *e) {
    return TK_DISPATCH(c, tk_specaug_ref(s, bt, n_mels, x, e), tk_specaug_cuda(c, s, bt, n_mels, x, e));
}

int tk_melfeat_splice(tk_ctx *c, const tk_melfeat_batch *bt, int n_mels, int stack, int sub, int Tout,
                      const float *x, float *y, tk_err *e) {
    return TK_DISPATCH(c, tk_melfeat_splice_ref(bt, n_mels, stack, sub, Tout, x, y, e),
                       tk_melfeat_splice_cuda(c, bt, n_mels, stack, sub, Tout, x, y, e));
}
