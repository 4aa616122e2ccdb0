// Device side of kernels/dropout.h for the CUDA ops: the mask factors of 8 consecutive elements
// from one Philox call when they start at a multiple of 8 (the common case: rows of a multiple
// of 8 features), element by element otherwise. Same elements kept as the reference.
#ifndef TK_KERNELS_DROPOUT_CUH
#define TK_KERNELS_DROPOUT_CUH

#include "dropout.h"

// A tk_dropout as kernels take it (by value): the step pointer is read on the device.
struct tk_drop_dev {
    uint64_t seed;
    const int64_t *step;
    int64_t offset;
    uint32_t site, th;
    float scale; // 1 / (1 - p)
    int on;
};

static inline tk_drop_dev tk_drop_dev_of(const tk_dropout *d) {
    tk_drop_dev r = {};
    if (d && d->p > 0) {
        r.seed = d->seed, r.step = d->step, r.offset = d->offset, r.site = d->site;
        r.th = tk_dropout_thresh(d->p), r.scale = 1.0f / (1.0f - d->p), r.on = 1;
    }
    return r;
}

// f[j] = the factor of element i0 + j (j < 8): 0, scale, or 1 without dropout. i0 is relative to
// the call (offset added here); step is *d.step, read once by the caller.
__device__ __forceinline__ void tk_drop8(const tk_drop_dev &d, int64_t step, int64_t i0, float f[8]) {
    if (!d.on) {
#pragma unroll
        for (int j = 0; j < 8; j++) f[j] = 1.0f;
        return;
    }
    int64_t g = d.offset + i0;
    if ((g & 7) == 0) {
        tk_philox_ctr r = tk_philox_draw(d.seed, (uint32_t)TK_RNG_DROPOUT | d.site << 8, (uint64_t)step << 37 | (uint64_t)g >> 3);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            uint32_t w = (r.v[j >> 1] >> (16 * (j & 1))) & 0xffffu;
            f[j] = w >= d.th ? d.scale : 0.0f;
        }
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) f[j] = tk_dropout_keep(d.seed, d.site, step, g + j, d.th) ? d.scale : 0.0f;
    }
}

__device__ __forceinline__ float tk_drop1(const tk_drop_dev &d, int64_t step, int64_t i) {
    if (!d.on) return 1.0f;
    return tk_dropout_keep(d.seed, d.site, step, d.offset + i, d.th) ? d.scale : 0.0f;
}

__device__ __forceinline__ int64_t tk_drop_step(const tk_drop_dev &d) { return d.on ? *d.step : 0; }

#endif
