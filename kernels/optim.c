// Dispatch of the shared optimizer (kernels/optim.h): the cpu backend runs the reference
// (optim_ref.c), the cuda backend the kernels (optim.cu) on the context's compute stream. Nothing
// here synchronizes or allocates, so the call can be captured in a CUDA graph.

#include "dispatch.h"
#include "optim.h"

size_t tk_optim_ws_bytes_dist(tk_backend b, int nseg, size_t n, const tk_optim_dist *d) {
    (void)nseg, (void)n, (void)d; // used only by the cuda size
    return TK_DISPATCH_SIZE(b, 0, tk_optim_ws_bytes_cuda(nseg, n, d));
}

size_t tk_optim_ws_bytes(tk_backend b, int nseg, size_t n) { return tk_optim_ws_bytes_dist(b, nseg, n, NULL); }

int tk_optim_step_dist(tk_ctx *c, const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                       const tk_opt_seg *seg_dev, const tk_opt_seg *seg_host, int nseg, const tk_optim_dist *d,
                       const float *lr, int64_t *step, void *copy, tk_dtype copy_type, void *ws, tk_err *e) {
    if (c->backend == TK_BACKEND_CUDA) {
#ifdef TK_HAVE_CUDA
        return tk_optim_step_cuda(c, hp, w, g, state, n, seg_dev, seg_host, nseg, d, lr, step, copy, copy_type, ws,
                                  e);
#else
        (void)seg_dev, (void)ws;
        return tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
#endif
    }
    return tk_optim_step_dist_ref(hp, w, g, state, n, seg_host, nseg, d, lr, step, copy, copy_type, e);
}

int tk_optim_step(tk_ctx *c, const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                  const tk_opt_seg *seg_dev, const tk_opt_seg *seg_host, int nseg, const float *lr,
                  int64_t *step, void *copy, tk_dtype copy_type, void *ws, tk_err *e) {
    return tk_optim_step_dist(c, hp, w, g, state, n, seg_dev, seg_host, nseg, NULL, lr, step, copy, copy_type, ws, e);
}
