// Element access for the CPU references of ops whose activations come in fp32 or bf16 (the cuda
// backend's compute type): each reference reads its inputs as fp32, computes in fp32/fp64 and
// rounds its outputs to the same type as the CUDA kernel does (round to nearest even), so a
// device test can hand both the same bf16 inputs.
#ifndef TK_KERNELS_ACT_IO_H
#define TK_KERNELS_ACT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "core/bf16.h"
#include "gpu/gpu.h"

static inline float tk_act_ld(const void *p, tk_dtype t, size_t i) {
    return t == TK_BF16 ? tk_bf16_to_f32(((const uint16_t *)p)[i]) : ((const float *)p)[i];
}
static inline void tk_act_st(void *p, tk_dtype t, size_t i, float v) {
    if (t == TK_BF16) ((uint16_t *)p)[i] = tk_f32_to_bf16(v);
    else ((float *)p)[i] = v;
}
// n elements from p (starting at element i) into f32 dst.
static inline void tk_act_ld_n(const void *p, tk_dtype t, size_t i, float *dst, size_t n) {
    if (t == TK_BF16)
        for (size_t k = 0; k < n; k++) dst[k] = tk_bf16_to_f32(((const uint16_t *)p)[i + k]);
    else
        for (size_t k = 0; k < n; k++) dst[k] = ((const float *)p)[i + k];
}
static inline void tk_act_st_n(void *p, tk_dtype t, size_t i, const float *src, size_t n) {
    if (t == TK_BF16)
        for (size_t k = 0; k < n; k++) ((uint16_t *)p)[i + k] = tk_f32_to_bf16(src[k]);
    else
        for (size_t k = 0; k < n; k++) ((float *)p)[i + k] = src[k];
}
static inline int tk_act_ok(tk_dtype t) { return t == TK_F32 || t == TK_BF16; }

#endif
