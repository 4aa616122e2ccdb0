// Loads and stores of activation elements for the CUDA ops whose activations are TK_F32 or
// TK_BF16 (the BERT ops): math is fp32, a bf16 store rounds to nearest even once. TK_ACT_DISPATCH
// instantiates a kernel launch for the op's activation type.
#ifndef TK_KERNELS_ACT_TYPES_CUH
#define TK_KERNELS_ACT_TYPES_CUH

#include <cuda_bf16.h>

#include "cuda_util.cuh"

__device__ __forceinline__ float tk_ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float tk_ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void tk_st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void tk_st(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }

// 8 consecutive elements from / to registers: one 16-byte access for bf16, two for fp32 (the
// pointer 16-byte aligned).
__device__ __forceinline__ void tk_ld8(const float *p, float v[8]) {
    float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void tk_st8(float *p, const float v[8]) {
    ((float4 *)p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    ((float4 *)p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void tk_ld8(const __nv_bfloat16 *p, float v[8]) {
    uint4 u = *(const uint4 *)p;
    const __nv_bfloat16 *h = (const __nv_bfloat16 *)&u;
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = __bfloat162float(h[j]);
}
__device__ __forceinline__ void tk_st8(__nv_bfloat16 *p, const float v[8]) {
    uint4 u;
    __nv_bfloat16 *h = (__nv_bfloat16 *)&u;
#pragma unroll
    for (int j = 0; j < 8; j++) h[j] = __float2bfloat16_rn(v[j]);
    *(uint4 *)p = u;
}
static inline int tk_aligned16(const void *p) { return ((uintptr_t)p & 15) == 0; }

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
