// CUDA side of kernels/dice_score.h: count: one thread a voxel (grid-stride), the division and
// argmax in fp32 (__fdiv_rn: IEEE division whatever the flags), per-thread counts summed over the
// warp and added into six 64-bit integers with atomics (integer sums: the same in any order);
// finish: one thread turns the counts into the two Dice values.
#include "cuda_util.cuh"
#include "dice_score.h"

namespace {

constexpr int kT = 256;

struct Geo {
    int64_t out[3], crop[3], shape[3];
};

// cnt: I1, I2, T1, T2, P1, P2
__global__ void __launch_bounds__(kT) count(const float *acc, const float *wsum, const uint8_t *label, Geo q,
                                             int64_t n, uint8_t *pred, unsigned long long *cnt) {
    unsigned c[6] = {0, 0, 0, 0, 0, 0};
    for (int64_t v = (int64_t)blockIdx.x * kT + threadIdx.x; v < n; v += (int64_t)gridDim.x * kT) {
        const int64_t i = v / (q.out[1] * q.out[2]), j = v / q.out[2] % q.out[1], k = v % q.out[2];
        const int y = label[((i + q.crop[0]) * q.shape[1] + j + q.crop[1]) * q.shape[2] + k + q.crop[2]];
        const float w = wsum[v];
        int best = 0;
        float bv = __fdiv_rn(acc[v * 3], w);
        for (int cl = 1; cl < 3; cl++) {
            const float x = __fdiv_rn(acc[v * 3 + cl], w);
            if (!isnan(bv) && (isnan(x) || x > bv)) best = cl, bv = x;
        }
        if (pred) pred[v] = (uint8_t)best;
        c[0] += y == 1 && best == 1, c[1] += y == 2 && best == 2;
        c[2] += y == 1, c[3] += y == 2;
        c[4] += best == 1, c[5] += best == 2;
    }
#pragma unroll
    for (int s = 0; s < 6; s++) {
        unsigned x = c[s];
        for (int o = 16; o > 0; o >>= 1) x += __shfl_down_sync(0xffffffffu, x, o);
        if ((threadIdx.x & 31) == 0 && x) atomicAdd(&cnt[s], (unsigned long long)x);
    }
}

__global__ void finish(const unsigned long long *cnt, float *dice) {
    for (int k = 0; k < 2; k++)
        dice[k] = tk_dice_of_counts((int64_t)cnt[k], (int64_t)cnt[2 + k], (int64_t)cnt[4 + k]);
}

} // namespace

size_t tk_dice_score_ws_bytes_cuda(void) { return tk_cu_align(6 * sizeof(unsigned long long)); }

int tk_dice_score_cuda(tk_ctx *c, const tk_swin_grid *g, const float *acc, const float *wsum, const uint8_t *label,
                       uint8_t *pred, float *dice, void *ws, tk_err *e) {
    cudaStream_t st = tk_cu_stream(c);
    Geo q;
    for (int a = 0; a < 3; a++) q.out[a] = g->out[a], q.crop[a] = g->crop[a], q.shape[a] = g->shape[a];
    const int64_t n = tk_swin_out_numel(g);
    unsigned long long *cnt = (unsigned long long *)ws;
    cudaError_t rc = cudaMemsetAsync(cnt, 0, 6 * sizeof(unsigned long long), st);
    if (rc != cudaSuccess) return tk_cu_check(e, "dice_score", rc);
    count<<<tk_cu_blocks(n, kT), kT, 0, st>>>(acc, wsum, label, q, n, pred, cnt);
    finish<<<1, 1, 0, st>>>(cnt, dice);
    return tk_cu_check(e, "dice_score");
}
