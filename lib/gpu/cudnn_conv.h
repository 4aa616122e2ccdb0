// Convolutions on the cuda backend through cuDNN 9's graph ("backend") API: forward, backward
// data and backward filter of kernels/conv.h (NHWC activations, KRSC filters, fp32 or bf16 with
// fp32 accumulation). Each distinct (pass, shape, type) gets an execution plan once, before any
// capture: the operation graph of one convolution, cuDNN's heuristics (mode A, then the fallback
// list), and, of the engine configurations that finalize within the workspace limit and whose
// numerical notes the type allows (fp32: no tensor-core down-conversion, FFT or Winograd, so fp32
// stays fp32; with ctx->deterministic: no nondeterministic engine), the fastest of mode A's first
// 8, each timed on scratch buffers of the shape (autotuning, as torch's cudnn.benchmark; the
// choice is kept for the process, so its models agree), or, with ctx->deterministic, the first
// (the same engine on every run, so runs repeat bit for bit). Plans are cached per shape; running
// one is a variant pack and cudnnBackendExecute on the compute stream: no allocation, no host
// sync, so it can be captured in a CUDA graph. The workspace is the caller's (one buffer for all
// plans, sized by tk_cudnn_ws_bytes once every shape is planned).
//
// The 3-D convolutions (NDHWC, KTRSC: the 3D U-Net's) share this handle, its plan cache and its
// workspace: lib/gpu/cudnn_conv3d.h.
//
// libcudnn.so.9 is opened at run time (dlopen) on the first tk_cudnn_create, so nothing else in
// trainkit needs it to start; without it, or in a build without cuDNN's headers, tk_cudnn_create
// fails with TK_EDEVICE and a hint. Kept in its own translation unit (STYLE habit 10).
#ifndef TK_GPU_CUDNN_CONV_H
#define TK_GPU_CUDNN_CONV_H

#include <stddef.h>

#include "core/err.h"
#include "gpu/conv_shape.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_cudnn tk_cudnn;

#ifdef TK_HAVE_CUDA // (lib/gpu/cudnn_conv.cu; without CUDA the stubs below)
// A handle on c's compute stream (cuda backend). ws_limit: the most workspace one plan may use
// (0: 256 MiB).
int tk_cudnn_create(tk_ctx *c, size_t ws_limit, tk_cudnn **h, tk_err *e);
void tk_cudnn_destroy(tk_cudnn *h);
// Makes (or finds) the plan of a pass for a shape and type. Not while capturing.
int tk_cudnn_plan(tk_cudnn *h, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, tk_err *e);
// The largest workspace of the plans made so far, and the buffer they run with (device memory of
// at least that many bytes; may be NULL when it is 0).
size_t tk_cudnn_ws_bytes(const tk_cudnn *h);
void tk_cudnn_set_ws(tk_cudnn *h, void *ws, size_t bytes);
// Runs a planned pass (TK_EINTERNAL when the shape was not planned): kernels/conv.h's a, b, out.
int tk_cudnn_conv(tk_cudnn *h, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, const void *a, const void *b,
                  void *out, tk_err *e);
// Fused passes, through cuDNN's runtime fusion (operation graphs of several operations, their
// kernels compiled by cuDNN at run time when a plan finalizes):
//   TK_CUDNN_FWD_STATS: the forward, y as TK_CONV_FWD writes it, and batch norm's statistics of y
//     from its epilogue (a genstats operation): per output channel k, sum[k] = sum of y[n,p,q,k]
//     and sqsum[k] = sum of its squares over (n, p, q), fp32 (K each; zeroed first by the call).
//     So a training BN after the convolution needs no pass over y for its statistics (kernels/bn.h
//     tk_bn_fwd_train_sums).
//   TK_CUDNN_SBR_FWD_STATS: the same, reading relu(x scale[c] + bias[c]) instead of x (the previous
//     BN's apply and ReLU as the prologue; scale, bias fp32, C each), so that BN's output is never
//     written.
//   TK_CUDNN_SBR_WGRAD: the filter gradient of TK_CONV_BWD_FILTER with that prologue on x (the
//     backward recomputes the forward's input instead of reading it).
// Planned like the three passes (autotuned among the first few engines; with ctx->deterministic only
// engines without the nondeterministic note). A plan fails with TK_EDEVICE when cuDNN has no
// engine for the fused graph (an architecture or version without the fusion, a shape it refuses),
// and always unless TK_CUDNN_FUSION=1 was in the environment at tk_cudnn_create (off by default:
// on an H100 with cuDNN 9.19 the genstats forward's runtime-compiled engine ran 2-4x slower than
// the plain forward at every ResNet-50 shape, and the prologue graphs had no engine at all;
// contrib/bench/NOTES.md): callers then run the plain passes and their own kernels. A refusal is
// remembered, so asking again is cheap. The genstats engine is not bitwise reproducible (its sums'
// order varies) though cuDNN does not mark it nondeterministic.
typedef enum { TK_CUDNN_FWD_STATS = 3, TK_CUDNN_SBR_FWD_STATS = 4, TK_CUDNN_SBR_WGRAD = 5 } tk_cudnn_fused;
int tk_cudnn_plan_fused(tk_cudnn *h, tk_cudnn_fused f, const tk_conv_shape *s, tk_dtype t, tk_err *e);
// The fused forward: scale NULL for TK_CUDNN_FWD_STATS, else TK_CUDNN_SBR_FWD_STATS's prologue.
int tk_cudnn_conv_fwd_stats(tk_cudnn *h, const tk_conv_shape *s, tk_dtype t, const void *x, const float *scale,
                            const float *bias, const void *w, void *y, float *sum, float *sqsum, tk_err *e);
// TK_CUDNN_SBR_WGRAD: dw (K, R, S, C) in t from x, its prologue's scale and bias, and dy.
int tk_cudnn_wgrad_sbr(tk_cudnn *h, const tk_conv_shape *s, tk_dtype t, const void *x, const float *scale,
                       const float *bias, const void *dy, void *dw, tk_err *e);
// The autotuning's time (ms) of the plan of a pass (a tk_conv_pass or a tk_cudnn_fused) for a shape,
// or -1 when it was not timed or not planned.
float tk_cudnn_plan_ms(const tk_cudnn *h, int pass, const tk_conv_shape *s, tk_dtype t);
// The plans made so far, for a profile or a report: count, and the i-th's description
// ("fwd N256 56x56x64 -> 64 3x3/1 BF16: engine 7, 4194304 B workspace").
int tk_cudnn_nplans(const tk_cudnn *h);
const char *tk_cudnn_plan_desc(const tk_cudnn *h, int i);
// "cuDNN 9.19.0" (the library loaded), or why none is loaded.
const char *tk_cudnn_describe(void);
#else
static inline int tk_cudnn_create(tk_ctx *c, size_t ws_limit, tk_cudnn **h, tk_err *e) {
    (void)c, (void)ws_limit;
    *h = NULL;
    return tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
}
static inline void tk_cudnn_destroy(tk_cudnn *h) { (void)h; }
static inline int tk_cudnn_plan(tk_cudnn *h, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, tk_err *e) {
    (void)h, (void)pass, (void)s, (void)t;
    return tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
}
static inline size_t tk_cudnn_ws_bytes(const tk_cudnn *h) { return (void)h, 0; }
static inline void tk_cudnn_set_ws(tk_cudnn *h, void *ws, size_t bytes) { (void)h, (void)ws, (void)bytes; }
typedef enum { TK_CUDNN_FWD_STATS = 3, TK_CUDNN_SBR_FWD_STATS = 4, TK_CUDNN_SBR_WGRAD = 5 } tk_cudnn_fused;
static inline int tk_cudnn_plan_fused(tk_cudnn *h, tk_cudnn_fused f, const tk_conv_shape *s, tk_dtype t, tk_err *e) {
    (void)h, (void)f, (void)s, (void)t;
    return tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
}
static inline float tk_cudnn_plan_ms(const tk_cudnn *h, int pass, const tk_conv_shape *s, tk_dtype t) {
    return (void)h, (void)pass, (void)s, (void)t, -1.0f;
}
static inline int tk_cudnn_conv_fwd_stats(tk_cudnn *h, const tk_conv_shape *s, tk_dtype t, const void *x,
                                          const float *scale, const float *bias, const void *w, void *y, float *sum,
                                          float *sqsum, tk_err *e) {
    (void)h, (void)s, (void)t, (void)x, (void)scale, (void)bias, (void)w, (void)y, (void)sum, (void)sqsum;
    return tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
}
static inline int tk_cudnn_wgrad_sbr(tk_cudnn *h, const tk_conv_shape *s, tk_dtype t, const void *x,
                                     const float *scale, const float *bias, const void *dy, void *dw, tk_err *e) {
    (void)h, (void)s, (void)t, (void)x, (void)scale, (void)bias, (void)dy, (void)dw;
    return tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
}
static inline int tk_cudnn_nplans(const tk_cudnn *h) { return (void)h, 0; }
static inline const char *tk_cudnn_describe(void) { return "built without CUDA"; }
#endif

#ifdef __cplusplus
}
#endif
#endif
