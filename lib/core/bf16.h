// fp32 <-> bf16 on the host (the kernels' references, the image decoders, the shm sums, the
// checkpoint importers): round to nearest even, NaN stays NaN (quieted); the widening is exact.
#ifndef TK_CORE_BF16_H
#define TK_CORE_BF16_H

#include <stdint.h>

static inline uint16_t tk_f32_to_bf16(float f) {
    union { float f; uint32_t u; } v = {f};
    if ((v.u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((v.u >> 16) | 0x40);
    v.u += 0x7fffu + ((v.u >> 16) & 1u);
    return (uint16_t)(v.u >> 16);
}
static inline float tk_bf16_to_f32(uint16_t h) {
    union { uint32_t u; float f; } v = {(uint32_t)h << 16};
    return v.f;
}

#endif
