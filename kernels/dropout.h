// Dropout masks from Philox (lib/core/philox.h), the same on the CPU and in CUDA kernels: a mask
// element is a pure function of (seed, site, update counter, global element index), so the cpu
// reference and the cuda kernels drop the same elements, a backward regenerates the forward's
// mask instead of storing it, and a step replayed from a CUDA graph draws new masks because the
// update counter is read on the device. Header only (C11 and CUDA C++).
//
// Element i of site s at update t keeps its value when the 16-bit word
//   w = bits [16 (i % 2), 16 (i % 2) + 16) of word (i / 2) % 4 of tk_philox_draw(seed, TK_RNG_DROPOUT | s << 8,
//       t << 37 | i / 8)
// is >= round(p * 65536): one Philox call serves 8 elements. The drop probability is therefore
// round(p * 65536) / 65536 (0.1 -> 0.1000061), and kept values are scaled by 1 / (1 - p) with the
// p given, as torch.nn.Dropout scales. Indices below 2^40, updates below 2^27.
#ifndef TK_KERNELS_DROPOUT_H
#define TK_KERNELS_DROPOUT_H

#include <math.h>
#include <stdint.h>

#include "core/philox.h"

#ifdef __cplusplus
extern "C" {
#endif

// What an op needs to draw its mask. p == 0: no dropout (every element kept, no scaling).
typedef struct tk_dropout {
    float p;              // drop probability in [0, 1)
    uint64_t seed;        // the run's seed
    uint32_t site;        // which dropout of the model (BERT: 0 embeddings, 1 + 3 layer + k)
    const int64_t *step;  // the update counter in the backend's memory (read where the op runs)
    int64_t offset;       // global index of this call's element 0 (a rank's rows start further on)
} tk_dropout;

#ifdef __CUDACC__
#define TK_DROP_HD __host__ __device__ __forceinline__
#else
#define TK_DROP_HD static inline
#endif

// The keep threshold of p on the 16-bit words.
TK_DROP_HD uint32_t tk_dropout_thresh(float p) { return (uint32_t)(p * 65536.0f + 0.5f); }

// The 16-bit word of element i (global index) of site at update step.
TK_DROP_HD uint32_t tk_dropout_word(uint64_t seed, uint32_t site, int64_t step, int64_t i) {
    uint64_t idx = (uint64_t)step << 37 | (uint64_t)i >> 3;
    tk_philox_ctr r = tk_philox_draw(seed, (uint32_t)TK_RNG_DROPOUT | site << 8, idx);
    uint32_t w = r.v[(i >> 1) & 3];
    return (i & 1) ? w >> 16 : w & 0xffffu;
}

// 1 when element i is kept.
TK_DROP_HD int tk_dropout_keep(uint64_t seed, uint32_t site, int64_t step, int64_t i, uint32_t thresh) {
    return thresh == 0 || tk_dropout_word(seed, site, step, i) >= thresh;
}

// The factor element i of the call (d->offset + i globally) gets: 0 (dropped), 1 / (1 - p) (kept),
// 1 without dropout (d NULL or p 0); step is *d->step, th tk_dropout_thresh(d->p).
TK_DROP_HD float tk_dropout_factor(const tk_dropout *d, uint32_t th, int64_t step, int64_t i) {
    if (!d || d->p <= 0) return 1.0f;
    return tk_dropout_keep(d->seed, d->site, step, d->offset + i, th) ? 1.0f / (1.0f - d->p) : 0.0f;
}

#undef TK_DROP_HD

#ifdef __cplusplus
}
#endif
#endif
