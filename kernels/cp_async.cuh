// Asynchronous global -> shared copies (sm_80+ cp.async), for the kernels that pipeline their loads
// through shared memory (flash_attn.cu, bn.cu): a copy is issued, copies are committed as a group,
// and a thread waits until at most K of its groups are pending; then the data its own copies wrote
// are visible to it (other threads' need a barrier as well).
#ifndef TK_KERNELS_CP_ASYNC_CUH
#define TK_KERNELS_CP_ASYNC_CUH

#include <stdint.h>

__device__ __forceinline__ uint32_t tk_smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// 16 bytes global -> shared (both 16-byte aligned), zero-filled when !ok (nothing read then).
__device__ __forceinline__ void tk_cp16(void *dst, const void *src, bool ok = true) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(tk_smem_u32(dst)), "l"(src),
                 "r"(ok ? 16 : 0)
                 : "memory");
}
// 4 bytes global -> shared (both 4-byte aligned).
__device__ __forceinline__ void tk_cp4(void *dst, const void *src) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(tk_smem_u32(dst)), "l"(src) : "memory");
}
__device__ __forceinline__ void tk_cp_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int K> __device__ __forceinline__ void tk_cp_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(K) : "memory");
}

#endif
