// Vector access for the elementwise ResNet kernels (bn.cu, pool.cu): fp32 or bf16 element loads
// and stores widened to float, and 16-byte vectors of them (4 floats or 8 bf16s) where the layout
// allows (channel counts a multiple of the vector, 16-byte aligned pointers).
#ifndef TK_KERNELS_RN_VEC_CUH
#define TK_KERNELS_RN_VEC_CUH

#include <cuda_bf16.h>
#include <stdint.h>

__device__ __forceinline__ float rn_f(float v) { return v; }
__device__ __forceinline__ float rn_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T rn_to(float v);
template <> __device__ __forceinline__ float rn_to<float>(float v) { return v; }
template <> __device__ __forceinline__ __nv_bfloat16 rn_to<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }
// v rounded to T and back (what a value stored in T reads as).
template <typename T> __device__ __forceinline__ float rn_round(float v) { return rn_f(rn_to<T>(v)); }

template <typename T> struct RnVec;
template <> struct RnVec<float> {
    static constexpr int N = 4;
    typedef float4 raw;
};
template <> struct RnVec<__nv_bfloat16> {
    static constexpr int N = 8;
    typedef uint4 raw;
};

template <typename T> __device__ __forceinline__ void rn_vload(const T *p, size_t i, float *f) {
    typename RnVec<T>::raw r = *reinterpret_cast<const typename RnVec<T>::raw *>(p + i);
    const T *e = reinterpret_cast<const T *>(&r);
#pragma unroll
    for (int k = 0; k < RnVec<T>::N; k++) f[k] = rn_f(e[k]);
}
template <typename T> __device__ __forceinline__ void rn_vstore(T *p, size_t i, const float *f) {
    typename RnVec<T>::raw r;
    T *e = reinterpret_cast<T *>(&r);
#pragma unroll
    for (int k = 0; k < RnVec<T>::N; k++) e[k] = rn_to<T>(f[k]);
    *reinterpret_cast<typename RnVec<T>::raw *>(p + i) = r;
}

// N elements of T as loaded, not yet widened: one 16-byte load where N * sizeof(T) is 16. Kernels
// that stream rows load a batch of these first and widen them after, so a thread has the batch's
// loads in flight at once (a widen-and-use right after each load leaves one load in flight).
template <typename T, int N> struct alignas(N * sizeof(T) == 16 ? 16 : alignof(T)) RnRaw {
    T e[N];
};
template <typename T, int N> __device__ __forceinline__ RnRaw<T, N> rn_ldraw(const T *p, size_t i) {
    return *reinterpret_cast<const RnRaw<T, N> *>(p + i);
}
template <typename T, int N> __device__ __forceinline__ void rn_widen(const RnRaw<T, N> &r, float *f) {
#pragma unroll
    for (int k = 0; k < N; k++) f[k] = rn_f(r.e[k]);
}

// Whether every non-NULL pointer is 16-byte aligned.
static inline bool rn_aligned16(const void *a, const void *b = nullptr, const void *c = nullptr,
                                const void *d = nullptr, const void *f = nullptr) {
    const void *p[5] = {a, b, c, d, f};
    for (int i = 0; i < 5; i++)
        if (p[i] && ((uintptr_t)p[i] & 15)) return false;
    return true;
}

#endif
