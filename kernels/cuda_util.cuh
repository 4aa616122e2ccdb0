// Shared by the CUDA op files (kernels/*.cu): the stream ops run on, launch checks that turn a
// failed launch into a tk_err, and float helpers. Ops run on the context's compute stream and
// never synchronize or allocate, so a training step can be captured in a CUDA graph.
#ifndef TK_KERNELS_CUDA_UTIL_CUH
#define TK_KERNELS_CUDA_UTIL_CUH

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "gpu/gpu.h"

static inline cudaStream_t tk_cu_stream(tk_ctx *c) { return (cudaStream_t)c->stream[TK_STREAM_COMPUTE]; }

// After a launch (or a CUB call's status st): fill e and return TK_EDEVICE on failure.
static inline int tk_cu_check(tk_err *e, const char *op, cudaError_t st = cudaSuccess) {
    if (st == cudaSuccess) st = cudaGetLastError();
    if (st == cudaSuccess) return 0;
    tk_err_set(e, TK_EDEVICE, "%s: CUDA launch failed: %s", op, cudaGetErrorString(st));
    return tk_err_lib(e, "cuda", (int)st);
}

// Blocks for a grid-stride loop over n items (enough to fill an H100 several times over).
static inline unsigned tk_cu_blocks(int64_t n, int threads) {
    int64_t b = (n + threads - 1) / threads;
    return (unsigned)(b < 1 ? 1 : b > 8192 ? 8192 : b);
}

// Byte offset rounded up for carving one workspace into several arrays.
static inline size_t tk_cu_align(size_t x) { return (x + 255) & ~(size_t)255; }

#endif
