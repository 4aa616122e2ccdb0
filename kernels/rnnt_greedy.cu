// The CUDA side of kernels/rnnt_greedy.h: one block an utterance; its threads find the row's
// argmax (the smallest index among the largest values, as the reference's scan), thread 0
// updates the state, and the block copies the new prediction state when a symbol was emitted.
// No host access: capturable in a CUDA graph and replayed as is.
#include "act_types.cuh"
#include "rnnt_greedy.h"

namespace {

constexpr int kT = 256;

// (value, index) a is preferred over b: larger, NaN never (unless both), smaller index on ties.
__device__ __forceinline__ bool better(float av, int ai, float bv, int bi) {
    if (av != av) return false;
    if (bv != bv) return true;
    return av > bv || (av == bv && ai < bi);
}

template <typename T>
__global__ void greedy_step(tk_rnnt_greedy s, const T *logits, const float *hn, const float *cn, float *h, float *cc) {
    const int b = blockIdx.x;
    __shared__ float sv[kT];
    __shared__ int si[kT];
    __shared__ int emit;
    const bool active = s.t[b] < s.T[b] && s.n[b] < s.cap; // the same value in every thread
    if (active) {
        float bv = NAN;
        int bi = 0x7fffffff;
        for (int v = threadIdx.x; v < s.V; v += kT) {
            const float x = tk_ld(logits, (size_t)b * s.V + v);
            if (bi == 0x7fffffff || better(x, v, bv, bi)) bv = x, bi = v;
        }
        sv[threadIdx.x] = bv, si[threadIdx.x] = bi;
        __syncthreads();
        for (int w = kT / 2; w > 0; w >>= 1) {
            if (threadIdx.x < w) {
                const int o = threadIdx.x + w;
                const int i = threadIdx.x;
                if (si[o] != 0x7fffffff && (si[i] == 0x7fffffff || better(sv[o], si[o], sv[i], si[i])))
                    sv[threadIdx.x] = sv[o], si[threadIdx.x] = si[o];
            }
            __syncthreads();
        }
        if (threadIdx.x == 0) {
            const int k = si[0] == 0x7fffffff ? 0 : si[0];
            emit = k != s.blank;
            if (!emit) {
                s.t[b]++, s.sym[b] = 0;
            } else {
                s.hyp[(size_t)b * s.cap + s.n[b]] = k;
                s.n[b]++, s.label[b] = k;
                if (++s.sym[b] == s.max_per_step) s.t[b]++, s.sym[b] = 0;
            }
        }
        __syncthreads();
        if (emit)
            for (int i = threadIdx.x; i < s.L * s.H; i += kT) {
                const size_t o = ((size_t)(i / s.H) * s.B + b) * s.H + i % s.H;
                h[o] = hn[o], cc[o] = cn[o];
            }
    }
    if (threadIdx.x == 0) s.fidx[b] = b * s.T2 + min(s.t[b], s.T2 - 1);
}

} // namespace

int tk_rnnt_greedy_step_cuda(tk_ctx *c, tk_dtype t, const tk_rnnt_greedy *s, const void *logits, const float *hn,
                             const float *cn, float *h, float *cc, tk_err *e) {
    TRY(tk_rnnt_greedy_check(t, s, e));
    TK_ACT_DISPATCH(t, "rnnt_greedy_step", e, {
        greedy_step<T><<<s->B, kT, 0, tk_cu_stream(c)>>>(*s, (const T *)logits, hn, cn, h, cc);
    });
    return tk_cu_check(e, "rnnt_greedy_step");
}
