// The CUDA ops whose activations are TK_F32 or TK_BF16 (the BERT ops): math is fp32, a bf16 store
// rounds to nearest even once (the loads and stores: lib/core/vec.cuh). TK_ACT_DISPATCH
// instantiates a kernel launch for the op's activation type.
#ifndef TK_KERNELS_ACT_TYPES_CUH
#define TK_KERNELS_ACT_TYPES_CUH

#include <cuda_bf16.h>

#include "core/vec.cuh" // tk_ld, tk_st, tk_ld8, tk_st8, tk_aligned16
#include "cuda_util.cuh"

// Runs the statements given with T the C++ type of act (float or __nv_bfloat16); other types are an internal error.
#define TK_ACT_DISPATCH(act, op, e, ...)                                                          \
    do {                                                                                           \
        if ((act) == TK_F32) {                                                                     \
            typedef float T;                                                                       \
            __VA_ARGS__;                                                                           \
        } else if ((act) == TK_BF16) {                                                             \
            typedef __nv_bfloat16 T;                                                               \
            __VA_ARGS__;                                                                           \
        } else {                                                                                   \
            return tk_err_set(e, TK_EINTERNAL, "%s: activations in %s", op, tk_dtype_name(act));  \
        }                                                                                          \
    } while (0)

#endif
