// The op dispatch every dispatcher shares. Every op's dispatcher is kernels/NAME.c, beside the
// kernel (kernels/NAME.cu) and the reference (kernels/NAME_ref.c) it picks between: the cpu
// backend runs the reference, the cuda backend the kernel on the context's streams (or the
// library wrapper of lib/gpu that stands for the kernel: cuBLASLt's GEMM, cuDNN's convolutions).
// Dispatchers neither synchronize nor allocate, so their calls can be captured in a CUDA graph.
// Use inside a function with a `tk_err *e` in scope.
#ifndef TK_KERNELS_DISPATCH_H
#define TK_KERNELS_DISPATCH_H

#include "core/err.h"
#include "gpu/gpu.h"

#ifdef TK_HAVE_CUDA
#define TK_DISPATCH(c, ref_call, cuda_call)                                                        \
    ((c)->backend == TK_BACKEND_CUDA ? (cuda_call) : (ref_call))
#else
#define TK_DISPATCH(c, ref_call, cuda_call)                                                        \
    ((c)->backend == TK_BACKEND_CUDA                                                               \
         ? tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA")                       \
         : (ref_call))
#endif

// A size query (workspace bytes) by backend: the cuda kernel's size on cuda, ref_size on the cpu.
// Without CUDA the cuda expression is not compiled; a parameter only it uses then needs (void).
#ifdef TK_HAVE_CUDA
#define TK_DISPATCH_SIZE(b, ref_size, cuda_size)                                                   \
    ((b) == TK_BACKEND_CUDA ? (size_t)(cuda_size) : (size_t)(ref_size))
#else
#define TK_DISPATCH_SIZE(b, ref_size, cuda_size) ((void)(b), (size_t)(ref_size))
#endif

#endif
