// Element and vector access to device arrays of fp32, bf16 and fp16, for CUDA code only (the
// kernels of kernels/*.cu and the GEMM's epilogues in lib/gpu/gemm_cublaslt.cu): loads widen to
// float, stores round to nearest even once (as the host's tk_f32_to_bf16, lib/core/bf16.h). One
// header, in the lowest layer, for every layer that needs them, so each conversion and vector
// access is written once.
#ifndef TK_CORE_VEC_CUH
#define TK_CORE_VEC_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

// One element of p[i] as float, and v stored into p[i].
__device__ __forceinline__ float tk_ld(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float tk_ld(const __nv_bfloat16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ float tk_ld(const __half *p, size_t i) { return __half2float(p[i]); }
__device__ __forceinline__ void tk_st(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void tk_st(__nv_bfloat16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
__device__ __forceinline__ void tk_st(__half *p, size_t i, float v) { p[i] = __float2half_rn(v); }

// 4 consecutive elements from / to registers: one 16-byte (fp32) or 8-byte (16-bit) access (p + i
// aligned to it). A bf16 widens by a shift: exact, as __bfloat162float.
__device__ __forceinline__ float4 tk_ld4(const float *p, size_t i) { return *(const float4 *)(p + i); }
__device__ __forceinline__ float4 tk_ld4(const __nv_bfloat16 *p, size_t i) {
    uint2 u = *(const uint2 *)(p + i);
    return make_float4(__uint_as_float(u.x << 16), __uint_as_float(u.x & 0xffff0000u), __uint_as_float(u.y << 16),
                       __uint_as_float(u.y & 0xffff0000u));
}
__device__ __forceinline__ float4 tk_ld4(const __half *p, size_t i) {
    uint2 u = *(const uint2 *)(p + i);
    float2 a = __half22float2(*(const __half2 *)&u.x), b = __half22float2(*(const __half2 *)&u.y);
    return make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void tk_st4(float *p, size_t i, float4 v) { *(float4 *)(p + i) = v; }
__device__ __forceinline__ void tk_st4(__nv_bfloat16 *p, size_t i, float4 v) {
    __nv_bfloat16 r[4] = {__float2bfloat16_rn(v.x), __float2bfloat16_rn(v.y), __float2bfloat16_rn(v.z),
                          __float2bfloat16_rn(v.w)};
    *(uint2 *)(p + i) = *(const uint2 *)r;
}

// 8 consecutive elements from / to registers: one 16-byte access for 16-bit types, two for fp32
// (the pointer 16-byte aligned).
__device__ __forceinline__ void tk_ld8(const float *p, float v[8]) {
    float4 a = ((const float4 *)p)[0], b = ((const float4 *)p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void tk_st8(float *p, const float v[8]) {
    ((float4 *)p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    ((float4 *)p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
template <typename H> __device__ __forceinline__ void tk_ld8(const H *p, float v[8]) {
    uint4 u = *(const uint4 *)p;
    const H *h = (const H *)&u;
#pragma unroll
    for (int j = 0; j < 8; j++) v[j] = tk_ld(h, j);
}
template <typename H> __device__ __forceinline__ void tk_st8(H *p, const float v[8]) {
    uint4 u;
    H *h = (H *)&u;
#pragma unroll
    for (int j = 0; j < 8; j++) tk_st(h, j, v[j]);
    *(uint4 *)p = u;
}

// 16-byte vectors of T widened to float (TkVec: 4 floats or 8 bf16s), for kernels whose layout
// allows them (channel counts a multiple of the vector, 16-byte aligned pointers): one element's
// value as float, a float rounded to T,
__device__ __forceinline__ float tk_f(float v) { return v; }
__device__ __forceinline__ float tk_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T tk_to(float v);
template <> __device__ __forceinline__ float tk_to<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 tk_to<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
// v rounded to T and back (what a value stored in T reads as).
template <typename T> __device__ __forceinline__ float tk_round(float v) { return tk_f(tk_to<T>(v)); }

template <typename T> struct TkVec;
template <> struct TkVec<float> {
    static constexpr int N = 4;
    typedef float4 raw;
};
template <> struct TkVec<__nv_bfloat16> {
    static constexpr int N = 8;
    typedef uint4 raw;
};

template <typename T> __device__ __forceinline__ void tk_vload(const T *p, size_t i, float *f) {
    typename TkVec<T>::raw r = *reinterpret_cast<const typename TkVec<T>::raw *>(p + i);
    const T *e = reinterpret_cast<const T *>(&r);
#pragma unroll
    for (int k = 0; k < TkVec<T>::N; k++) f[k] = tk_f(e[k]);
}
template <typename T> __device__ __forceinline__ void tk_vstore(T *p, size_t i, const float *f) {
    typename TkVec<T>::raw r;
    T *e = reinterpret_cast<T *>(&r);
#pragma unroll
    for (int k = 0; k < TkVec<T>::N; k++) e[k] = tk_to<T>(f[k]);
    *reinterpret_cast<typename TkVec<T>::raw *>(p + i) = r;
}

// N elements of T as loaded, not yet widened: one 16-byte load where N * sizeof(T) is 16. Kernels
// that stream rows load a batch of these first and widen them after, so a thread has the batch's
// loads in flight at once (a widen-and-use right after each load leaves one load in flight).
template <typename T, int N> struct alignas(N * sizeof(T) == 16 ? 16 : alignof(T)) TkRaw {
    T e[N];
};
template <typename T, int N> __device__ __forceinline__ TkRaw<T, N> tk_ldraw(const T *p, size_t i) {
    return *reinterpret_cast<const TkRaw<T, N> *>(p + i);
}
template <typename T, int N> __device__ __forceinline__ void tk_widen(const TkRaw<T, N> &r, float *f) {
#pragma unroll
    for (int k = 0; k < N; k++) f[k] = tk_f(r.e[k]);
}

// Whether every non-NULL pointer is 16-byte aligned.
static inline bool tk_aligned16(const void *a, const void *b = nullptr, const void *c = nullptr,
                                const void *d = nullptr, const void *f = nullptr) {
    const void *p[5] = {a, b, c, d, f};
    for (int i = 0; i < 5; i++)
        if (p[i] && ((uintptr_t)p[i] & 15)) return false;
    return true;
}

#endif
