// The op dispatch every dispatcher file shares: the cpu backend runs the reference
// (kernels/NAME_ref.c), the cuda backend the kernel (kernels/NAME.cu) on the context's streams.
// Dispatchers neither synchronize nor allocate, so their calls can be captured in a CUDA graph.
// Use inside a function with a `tk_err *e` in scope.
#ifndef TK_GPU_DISPATCH_H
#define TK_GPU_DISPATCH_H

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

#endif
