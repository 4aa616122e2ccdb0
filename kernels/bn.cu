// CUDA side of kernels/bn.h. Every kernel walks the (M, C) activation as tiles: a block of 256
// threads covers up to 256 vectors of N channels (16 bytes: 8 bf16 or 4 fp32, else N = 1), so
// R = 256 / (vectors in the tile) rows at a time (tiles along grid.y when C / N > 256), and each
// thread keeps its channels for the whole kernel: no index division, and the per-channel
// coefficients are loaded once into registers. Rows go round grid.x with a stride.
// The per-channel sums (statistics forward, dbeta/dgamma backward) are two kernels: blocks add
// fp32 partials over a fixed set of rows (G row groups, G a function of M, C and N only, at most
// 264: one wave of 2 blocks on each of an H100's 132 SMs) and reduce their row lanes in a fixed
// tree; then a block per 32 channels adds the G partials in fp64, 32 lanes over the partials, the
// lanes added in a fixed order. No atomics: the same inputs give the same bits on every run and
// every graph replay.
#include "bn.h"
#include "cp_async.cuh"
#include "cuda_util.cuh"
#include "core/vec.cuh"

namespace {

// Build-time tuning knobs (the defaults are what was measured best): TK_BN_MAX_GROUPS, the partial
// sums' most row groups; TK_BN_GROUP_ITERS, a group's block iterations; TK_BN_ELEM_BLOCKS, the
// elementwise passes' (apply, dx) most blocks.
#ifndef TK_BN_MAX_GROUPS
#define TK_BN_MAX_GROUPS 264
#endif
#ifndef TK_BN_GROUP_ITERS
#define TK_BN_GROUP_ITERS 16
#endif
constexpr int kThreads = 256;
constexpr int kMaxGroups = TK_BN_MAX_GROUPS;
#ifndef TK_BN_ELEM_BLOCKS
#define TK_BN_ELEM_BLOCKS 1056
#endif
constexpr int kElemBlocks = TK_BN_ELEM_BLOCKS; // the elementwise passes' most blocks
constexpr int kFinC = 32, kFinLanes = 32;

// The tiles of a call: V vectors of N channels per row, up to 256 per tile.
struct Tiles {
    int V, R, tiles;
};
__host__ __device__ inline Tiles tiles_of(int C, int N) {
    const int V = C / N, Vt = V < kThreads ? V : kThreads;
    return Tiles{V, kThreads / Vt, (V + kThreads - 1) / kThreads};
}

// The partial sums' row groups: at least 16 block iterations each, at most kMaxGroups (4 iterations
// measured slower on an H100 for the last stages' small activations: 47 -> 60 us per BN forward
// at M 50176, C 256; and at most 1024 groups, several waves of blocks, 37.79 ms a ResNet-50 step
// against 36.63 with 264, 38.01 with 132, 37.19 with 528), and at least 64 rows each: with one or
// two rows per block iteration (C of 1024 or 2048 bf16 channels) 16 iterations made partials of a
// quarter of x's bytes for the final sums to read (the statistics alone of M 12544, C 2048 took 75 us for 51 MB). A function of
// (M, C, N) only, so the sums' order is fixed.
int groups(int64_t M, int C, int N) {
    const int R = tiles_of(C, N).R, rows = R * TK_BN_GROUP_ITERS < 64 ? 64 : R * TK_BN_GROUP_ITERS;
    int64_t g = (M + rows - 1) / rows;
    return (int)(g < 1 ? 1 : g > kMaxGroups ? kMaxGroups : g);
}
int groups_max(int64_t M, int C) { // over the vector widths a call may take (1, 4, 8)
    int a = groups(M, C, 1), b = C % 4 == 0 ? groups(M, C, 4) : 0, c = C % 8 == 0 ? groups(M, C, 8) : 0;
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}
// The elementwise passes' row blocks.
int elem_blocks(int64_t M, int C, int N) {
    const Tiles t = tiles_of(C, N);
    int64_t rb = (M + t.R - 1) / t.R, cap = (kElemBlocks + t.tiles - 1) / t.tiles;
    return (int)(rb < cap ? rb : cap);
}

// ws: partials (G x C x 2 floats), then coef (3 x C floats).
float *coef_of(void *ws, int64_t M, int C) {
    return (float *)((char *)ws + tk_cu_align((size_t)groups_max(M, C) * C * 2 * sizeof(float)));
}

__device__ __forceinline__ float act(float v, int relu) { return relu && !(v > 0.0f) ? (v != v ? v : 0.0f) : v; }

// N elements at p + i as floats: one, or a 16-byte vector.
template <typename T, int N> __device__ __forceinline__ void ldn(const T *p, size_t i, float *f) {
    if constexpr (N == 1) f[0] = tk_f(p[i]);
    else tk_vload(p, i, f);
}
template <typename T, int N> __device__ __forceinline__ void stn(T *p, size_t i, const float *f) {
    if constexpr (N == 1) p[i] = tk_to<T>(f[0]);
    else tk_vstore(p, i, f);
}

// A thread's place in its tile: its row lane r (of R; idle when r >= R), its first channel c0.
struct Place {
    int R, r, c0, Vt;
    bool active;
};
template <int N> __device__ __forceinline__ Place place(int C) {
    const int V = C / N, v0 = blockIdx.y * kThreads, Vt = V - v0 < kThreads ? V - v0 : kThreads;
    const int R = kThreads / Vt, tid = threadIdx.x;
    return Place{R, tid / Vt, (v0 + tid % Vt) * N, Vt, tid / Vt < R};
}

// The backward's ReLU mask recomputed from x (bn.h): the forward's scale and shift from gamma,
// beta and the saved statistics, as stats_final computes them, and round_t(x scale + shift) > 0.
struct BwdMask {
    const float *gamma, *beta; // beta NULL: no mask from x
    const uint8_t *bits;       // the forward's mask bits (tk_bn_bwd_mask), or NULL
};
// Where the backward kernels' dz comes from: dy [+ dy2] (DY2, a template flag beside it) unmasked
// (kNone), masked by y (kYMask), by round_t(x scale + shift) > 0 (kXMask), or by the forward's bits
// (kBits). Compile-time, so each kernel holds only the registers its loads and mask need.
enum { kNone = 0, kYMask = 1, kXMask = 2, kBits = 3 };
// The source of a call's dz from its arguments (bwd's BwdMask: beta only for the mask from x).
inline int dz_source(const void *y, const BwdMask &mk) {
    return mk.bits ? kBits : y ? kYMask : mk.beta ? kXMask : kNone;
}

// The bits of elements i .. i + N - 1 (i a multiple of N, N <= 8: all in one byte), from bit 0.
__device__ __forceinline__ unsigned bits_at(const uint8_t *bits, size_t i) { return bits[i >> 3] >> (i & 7); }

// ---- a thread's rows streamed through shared memory ----
// A kernel thread walks rows m0, m0 + step, ... of up to four (M, C) inputs (its N channels at c0
// of each), and of the mask bits. A use right after each load leaves one load in flight per
// tensor, and registers for more would cost occupancy (the statistics kernels ran at 1.3-2.5 TB/s
// on an H100 so), so on the vector path (N elements = 16 bytes) each thread copies its rows ahead
// into a ring of S slots of shared memory of its own (cp.async): S - 1 rows' loads are in flight
// while it uses one, at the same registers. The scalar path (N = 1: channel counts the vectors do
// not divide) reads each row directly.
template <typename T, int N, int NIN, bool BITS> struct Stream {
    static constexpr bool kRing = N * sizeof(T) == 16;
    // slots: about 32 KB of ring a block (2 blocks an SM: 64 KB of loads in flight an SM)
    static constexpr int S = !kRing ? 1 : NIN == 1 ? 8 : NIN == 2 ? 4 : NIN == 3 ? 3 : 2;
    static constexpr int kBytes = kRing ? S * kThreads * (NIN * 16 + (BITS ? 4 : 0)) : 0;
    typedef TkRaw<T, N> V;
    const T *in[NIN];
    const uint8_t *bits;
    int C, c0;
    char *sm; // kBytes: [S][NIN][kThreads] vectors, then [S][kThreads] words of bits

    __device__ __forceinline__ V *slot(int s, int t) const {
        return reinterpret_cast<V *>(sm) + ((size_t)s * NIN + t) * kThreads + threadIdx.x;
    }
    __device__ __forceinline__ unsigned *bslot(int s) const {
        return reinterpret_cast<unsigned *>(sm + (size_t)S * NIN * kThreads * 16) + (size_t)s * kThreads + threadIdx.x;
    }
    __device__ __forceinline__ void issue(int64_t m, int s) const {
        const size_t i = (size_t)m * C + c0;
#pragma unroll
        for (int t = 0; t < NIN; t++) tk_cp16(slot(s, t), in[t] + i);
        if (BITS) tk_cp4(bslot(s), bits + ((i >> 3) & ~(size_t)3)); // (the aligned word holding i's byte)
    }
    // Input t of row m (in slot s on the ring path).
    __device__ __forceinline__ V get(int t, int64_t m, int s) const {
        if constexpr (kRing) return *slot(s, t);
        else return tk_ldraw<T, N>(in[t], (size_t)m * C + c0);
    }
    // The mask bits of row m's N channels, from bit 0 (N <= 8: one byte).
    __device__ __forceinline__ unsigned mask(int64_t m, int s) const {
        const size_t i = (size_t)m * C + c0;
        if constexpr (kRing) return *bslot(s) >> (8 * ((i >> 3) & 3)) >> (i & 7);
        else return bits_at(bits, i);
    }
    // use(m, s) for each row in order, its inputs loaded.
    template <typename F> __device__ __forceinline__ void rows(int64_t m0, int64_t step, int64_t M, F use) const {
        if constexpr (!kRing) {
            for (int64_t m = m0; m < M; m += step) use(m, 0);
        } else {
            int64_t mi = m0; // the next row to copy
#pragma unroll
            for (int s = 0; s < S - 1; s++, mi += step) {
                if (mi < M) issue(mi, s);
                tk_cp_commit();
            }
            int su = 0, si = S - 1; // the slots of the row to use and the row to copy
            for (int64_t m = m0; m < M; m += step, mi += step) {
                if (mi < M) issue(mi, si);
                tk_cp_commit();
                tk_cp_wait<S - 1>(); // (row m's group is done)
                use(m, su);
                su = su + 1 == S ? 0 : su + 1;
                si = si + 1 == S ? 0 : si + 1;
            }
            tk_cp_wait<0>();
        }
    }
};

template <int N>
__device__ __forceinline__ void mask_coef(BwdMask mk, int c0, const float *mean, const float *invstd, float *ms,
                                          float *mh) {
    if (!mk.beta) return;
#pragma unroll
    for (int k = 0; k < N; k++) {
        ms[k] = __fmul_rn(mk.gamma[c0 + k], invstd[k]);
        mh[k] = __fsub_rn(mk.beta[c0 + k], __fmul_rn(mean[k], ms[k]));
    }
}
template <typename T> __device__ __forceinline__ bool xmask_on(float x, float scale, float shift) {
    return tk_round<T>(__fadd_rn(__fmul_rn(x, scale), shift)) > 0.0f;
}

// Part 1 of the per-channel sums, both directions: each thread adds its rows' values of its N
// channels, then the R row lanes of a vector are added in a fixed tree into the block's partial.
//   forward (BWD false): s = sum (x - x[0, c]), q = sum (x - x[0, c])^2
//   backward: dz (bn.h; written to dz_out when asked), s = sum dz, q = sum dz xhat
// SRC, DY2: where the backward's dz comes from (above); the forward's kNone, false.
template <typename T, int N, bool BWD, int SRC, bool DY2>
__global__ void __launch_bounds__(kThreads, 2)
    partial(const T *__restrict__ x, const T *__restrict__ y, const BwdMask mk, const T *__restrict__ dy,
            const T *__restrict__ dy2, const float *__restrict__ mean, const float *__restrict__ invstd, int64_t M,
            int C, float *__restrict__ part, T *__restrict__ dz_out) {
    // inputs: x; backward dy, then dy2 and y where the source needs them
    constexpr int NIN = !BWD ? 1 : 2 + DY2 + (SRC == kYMask);
    typedef Stream<T, N, NIN, BWD && SRC == kBits> St;
    constexpr int kSums = 2 * kThreads * N * (int)sizeof(float);
    __shared__ __align__(16) char smem[St::kBytes > kSums ? St::kBytes : kSums]; // the ring, then the sums
    float(*sh)[kThreads * N] = reinterpret_cast<float(*)[kThreads * N]>(smem);
    const Place p = place<N>(C);
    float s[N], q[N], a[N], b[N], ms[N], mh[N];
#pragma unroll
    for (int k = 0; k < N; k++) s[k] = q[k] = 0;
    if (p.active) {
        if (BWD) {
#pragma unroll
            for (int k = 0; k < N; k++) a[k] = mean[p.c0 + k], b[k] = invstd[p.c0 + k];
            if (SRC == kXMask) mask_coef<N>(mk, p.c0, a, b, ms, mh);
        } else {
            ldn<T, N>(x, (size_t)p.c0, a); // the shift: row 0
        }
        St st{{x}, mk.bits, C, p.c0, smem};
        if constexpr (BWD) {
            st.in[1] = dy;
            if (DY2) st.in[2] = dy2;
            if (SRC == kYMask) st.in[NIN - 1] = y;
        }
        st.rows((int64_t)blockIdx.x * p.R + p.r, (int64_t)gridDim.x * p.R, M, [&](int64_t m, int sl) {
            float xv[N];
            tk_widen(st.get(0, m, sl), xv);
            if constexpr (BWD) {
                float g[N], g2[N], yv[N], o[N];
                tk_widen(st.get(1, m, sl), g);
                if (DY2) tk_widen(st.get(2, m, sl), g2);
                if (SRC == kYMask) tk_widen(st.get(NIN - 1, m, sl), yv);
                const unsigned bb = SRC == kBits ? st.mask(m, sl) : 0u;
#pragma unroll
                for (int k = 0; k < N; k++) {
                    float dz = g[k];
                    if (DY2) dz += g2[k];
                    if (SRC == kYMask && !(yv[k] > 0.0f)) dz = 0.0f;
                    if (SRC == kBits && !(bb >> k & 1)) dz = 0.0f;
                    if (SRC == kXMask && !xmask_on<T>(xv[k], ms[k], mh[k])) dz = 0.0f;
                    dz = tk_round<T>(dz);
                    float xhat = __fmul_rn(__fsub_rn(xv[k], a[k]), b[k]);
                    s[k] += dz;
                    q[k] = __fmaf_rn(dz, xhat, q[k]);
                    o[k] = dz;
                }
                if (dz_out) stn<T, N>(dz_out, (size_t)m * C + p.c0, o);
            } else {
#pragma unroll
                for (int k = 0; k < N; k++) {
                    float d = xv[k] - a[k];
                    s[k] += d;
                    q[k] += d * d;
                }
            }
        });
    }
    const int tid = threadIdx.x;
    __syncthreads(); // (every ring read: the sums reuse its memory)
#pragma unroll
    for (int k = 0; k < N; k++) sh[0][tid * N + k] = s[k], sh[1][tid * N + k] = q[k];
    __syncthreads();
    // lane r adds lane r + h (h = 1, 2, 4, ...) where r is a multiple of 2h: a fixed tree
    for (int h = 1; h < p.R; h *= 2) {
        if (p.active && p.r % (2 * h) == 0 && p.r + h < p.R) {
            const int o = tid + h * p.Vt;
#pragma unroll
            for (int k = 0; k < N; k++) sh[0][tid * N + k] += sh[0][o * N + k], sh[1][tid * N + k] += sh[1][o * N + k];
        }
        __syncthreads();
    }
    if (p.active && p.r == 0)
#pragma unroll
        for (int k = 0; k < N; k++) {
            float *d = part + ((size_t)blockIdx.x * C + p.c0 + k) * 2;
            d[0] = sh[0][tid * N + k], d[1] = sh[1][tid * N + k];
        }
}

// A backward kernel's launch for the source and dy2 of a call (forward: kNone, no dy2 only).
#define TK_BN_SOURCES(LAUNCH, BWD)                                                                                    \
    do {                                                                                                              \
        if (!(BWD)) LAUNCH(kNone, false);                                                                             \
        else if (src == kNone) { if (dy2) LAUNCH(kNone, true); else LAUNCH(kNone, false); }                          \
        else if (src == kYMask) { if (dy2) LAUNCH(kYMask, true); else LAUNCH(kYMask, false); }                       \
        else if (src == kXMask) { if (dy2) LAUNCH(kXMask, true); else LAUNCH(kXMask, false); }                       \
        else { if (dy2) LAUNCH(kBits, true); else LAUNCH(kBits, false); }                                             \
    } while (0)

// The launch of part 1 with the widest vectors the channels and pointers allow; returns G.
template <typename T, bool BWD, int N>
void launch_partial_n(cudaStream_t st, dim3 grid, int src, const T *x, const T *y, BwdMask mk, const T *dy,
                      const T *dy2, const float *mean, const float *invstd, int64_t M, int C, float *part, T *dz) {
#define TK_PARTIAL(S, D)                                                                                              \
    partial<T, N, BWD, (BWD ? S : kNone), (BWD && D)><<<grid, kThreads, 0, st>>>(x, y, mk, dy, dy2, mean, invstd, M,  \
                                                                                 C, part, dz)
    TK_BN_SOURCES(TK_PARTIAL, BWD);
#undef TK_PARTIAL
}
template <typename T, bool BWD>
int launch_partial(cudaStream_t st, const void *x, const void *y, BwdMask mk, const void *dy, const void *dy2,
                   const float *mean, const float *invstd, int64_t M, int C, float *part, void *dz_out) {
    constexpr int NV = TkVec<T>::N;
    const bool vec = C % NV == 0 && tk_aligned16(x, y, dy, dy2, dz_out);
    const int N = vec ? NV : 1, G = groups(M, C, N), tiles = tiles_of(C, N).tiles;
    const T *X = (const T *)x, *Y = (const T *)y, *DY = (const T *)dy, *DY2 = (const T *)dy2;
    const dim3 grid(G, tiles);
    const int src = dz_source(y, mk);
    if (vec) launch_partial_n<T, BWD, NV>(st, grid, src, X, Y, mk, DY, DY2, mean, invstd, M, C, part, (T *)dz_out);
    else launch_partial_n<T, BWD, 1>(st, grid, src, X, Y, mk, DY, DY2, mean, invstd, M, C, part, (T *)dz_out);
    return G;
}

// Part 2's sums: thread (cx, lane) of a block of 32 channels adds partials lane, lane + 32, ... in
// fp64 (at most 32 of them, loads 8 at a time); lane 0 then adds the 32 lanes in order. Returns the
// sums to lane 0 (others: garbage).
__device__ __forceinline__ void final_sums(const float *__restrict__ part, int G, int C, int c, double *S, double *Q) {
    __shared__ double sh[2][kFinLanes][kFinC];
    const int cx = threadIdx.x, lane = threadIdx.y;
    double s = 0, q = 0;
    if (c < C) {
#pragma unroll 8
        for (int g = lane; g < G; g += kFinLanes) {
            const float2 v = *reinterpret_cast<const float2 *>(part + ((size_t)g * C + c) * 2);
            s += v.x, q += v.y;
        }
    }
    sh[0][lane][cx] = s, sh[1][lane][cx] = q;
    __syncthreads();
    if (lane == 0)
        for (int l = 1; l < kFinLanes; l++) s += sh[0][l][cx], q += sh[1][l][cx];
    *S = s, *Q = q;
}

// Channel c's statistics out, given its mean and biased variance (fp64; a negative variance, the
// one-pass formula's rounding, is 0): saved, the running update, the apply's scale and shift.
__device__ __forceinline__ void stats_out(int c, double mean, double var, int64_t M, int C, const float *gamma,
                                          const float *beta, float eps, float momentum, float *run_mean,
                                          float *run_var, float *save_mean, float *save_invstd, float *coef) {
    if (var < 0) var = 0;
    double unbiased = M > 1 ? var * (double)M / (double)(M - 1) : var;
    float invstd = (float)(1.0 / sqrt(var + (double)eps)), fmean = (float)mean;
    save_mean[c] = fmean;
    save_invstd[c] = invstd;
    run_mean[c] = (float)((1.0 - momentum) * run_mean[c] + momentum * mean);
    run_var[c] = (float)((1.0 - momentum) * run_var[c] + momentum * unbiased);
    float scale = __fmul_rn(gamma[c], invstd);
    coef[c] = scale;
    coef[C + c] = __fsub_rn(beta[c], __fmul_rn(fmean, scale));
}

// Part 2 forward: the statistics, the running update, scale and shift.
template <typename T>
__global__ void __launch_bounds__(kFinC *kFinLanes)
    stats_final(const float *part, int G, const T *x, int64_t M, int C, const float *gamma, const float *beta,
                float eps, float momentum, float *run_mean, float *run_var, float *save_mean, float *save_invstd,
                float *coef) {
    const int c = blockIdx.x * kFinC + threadIdx.x;
    double s, q;
    final_sums(part, G, C, c, &s, &q);
    if (threadIdx.y != 0 || c >= C) return;
    double md = s / (double)M, var = q / (double)M - md * md;
    stats_out(c, (double)tk_f(x[c]) + md, var, M, C, gamma, beta, eps, momentum, run_mean, run_var, save_mean,
              save_invstd, coef);
}

// The statistics from sums made elsewhere (tk_bn_fwd_train_sums): one thread per channel, the
// same updates and coefficients as stats_final.
__global__ void __launch_bounds__(kThreads)
    sums_final(const float *sum, const float *sqsum, int64_t M, int C, const float *gamma, const float *beta, float eps,
               float momentum, float *run_mean, float *run_var, float *save_mean, float *save_invstd, float *coef) {
    const int c = blockIdx.x * kThreads + threadIdx.x;
    if (c >= C) return;
    double mean = (double)sum[c] / (double)M, var = (double)sqsum[c] / (double)M - mean * mean;
    stats_out(c, mean, var, M, C, gamma, beta, eps, momentum, run_mean, run_var, save_mean, save_invstd, coef);
}

// Part 2 backward: dbeta, dgamma and dx's coefficients.
__global__ void __launch_bounds__(kFinC *kFinLanes)
    bwd_final(const float *part, int G, int64_t M, int C, const float *gamma, const float *save_invstd, float *dgamma,
              float *dbeta, float *coef) {
    const int c = blockIdx.x * kFinC + threadIdx.x;
    double sb, sg;
    final_sums(part, G, C, c, &sb, &sg);
    if (threadIdx.y != 0 || c >= C) return;
    dbeta[c] = (float)sb;
    dgamma[c] = (float)sg;
    coef[c] = __fmul_rn(gamma[c], save_invstd[c]);
    coef[C + c] = (float)(sb / (double)M);
    coef[2 * C + c] = (float)(sg / (double)M);
}

// y = act(x scale + shift [+ res]). Training: scale and shift from coef (stats_final); EVAL: from
// the running statistics, computed as stats_final computes them (the eval entry point has no
// workspace for coef).
struct EvalStats {
    const float *gamma, *beta, *mean, *var;
    float eps;
};

// bits: y > 0 as one byte per vector of 8 channels (N == 8 only: the host checks), or NULL.
// RBN: res through its own BN first, round_t(res scale_r + shift_r) from rb (tk_bn_fwd_train_res_bn).
template <typename T, int N, bool EVAL, bool RBN, bool RES>
__global__ void __launch_bounds__(kThreads, 2)
    apply(const T *__restrict__ x, const T *__restrict__ res, int relu, const float *__restrict__ coef, EvalStats ev,
          int64_t M, int C, T *__restrict__ y, uint8_t *__restrict__ bits, tk_bn_saved rb) {
    const Place p = place<N>(C);
    if (!p.active) return;
    float scale[N], shift[N], rs[N], rh[N];
#pragma unroll
    for (int k = 0; k < N; k++) {
        const int c = p.c0 + k;
        if (RBN) {
            rs[k] = __fmul_rn(rb.gamma[c], rb.invstd[c]);
            rh[k] = __fsub_rn(rb.beta[c], __fmul_rn(rb.mean[c], rs[k]));
        }
        if (EVAL) {
            float invstd = (float)(1.0 / sqrt((double)ev.var[c] + (double)ev.eps));
            scale[k] = __fmul_rn(ev.gamma[c], invstd);
            shift[k] = __fsub_rn(ev.beta[c], __fmul_rn(ev.mean[c], scale[k]));
        } else {
            scale[k] = coef[c], shift[k] = coef[C + c];
        }
    }
    typedef Stream<T, N, 1 + (RES || RBN), false> St; // x [, res]
    __shared__ __align__(16) char smem[St::kBytes > 0 ? St::kBytes : 16];
    St st{{x}, nullptr, C, p.c0, smem};
    if constexpr (RES || RBN) st.in[1] = res;
    st.rows((int64_t)blockIdx.x * p.R + p.r, (int64_t)gridDim.x * p.R, M, [&](int64_t m, int sl) {
        const size_t i = (size_t)m * C + p.c0;
        float v[N], r[N];
        tk_widen(st.get(0, m, sl), v);
        if constexpr (RES || RBN) tk_widen(st.get(1, m, sl), r);
#pragma unroll
        for (int k = 0; k < N; k++) {
            float o = __fadd_rn(__fmul_rn(v[k], scale[k]), shift[k]);
            if (RBN) r[k] = tk_round<T>(__fadd_rn(__fmul_rn(r[k], rs[k]), rh[k])); // (as its BN would store it)
            if (RES || RBN) o = __fadd_rn(o, r[k]);
            v[k] = act(o, relu);
        }
        stn<T, N>(y, i, v);
        if (N == 8 && bits) {
            unsigned b = 0;
#pragma unroll
            for (int k = 0; k < N; k++) b |= (tk_round<T>(v[k]) > 0.0f ? 1u : 0u) << k;
            bits[i >> 3] = (uint8_t)b;
        }
    });
}

// dx = a (dz - b - xhat g) with the coefficients of bwd_final; dz recomputed from dy [+ dy2] and its
// mask (SRC, DY2), or, where part 1 wrote it, read as dy with SRC kNone (two reads instead of four).
template <typename T, int N, int SRC, bool DY2>
__global__ void __launch_bounds__(kThreads, 2)
    bwd_dx(const T *__restrict__ x, const T *__restrict__ y, const BwdMask mk, const T *__restrict__ dy,
           const T *__restrict__ dy2, const float *__restrict__ save_mean,
           const float *__restrict__ save_invstd, const float *__restrict__ coef, int64_t M, int C,
           T *__restrict__ dx) {
    const Place p = place<N>(C);
    if (!p.active) return;
    float mu[N], is[N], ca[N], cb[N], cg[N], ms[N], mh[N];
#pragma unroll
    for (int k = 0; k < N; k++) {
        const int c = p.c0 + k;
        mu[k] = save_mean[c], is[k] = save_invstd[c], ca[k] = coef[c], cb[k] = coef[C + c], cg[k] = coef[2 * C + c];
    }
    if (SRC == kXMask) mask_coef<N>(mk, p.c0, mu, is, ms, mh);
    constexpr int NIN = 2 + DY2 + (SRC == kYMask); // x, dy [, dy2] [, y]
    typedef Stream<T, N, NIN, SRC == kBits> St;
    __shared__ __align__(16) char smem[St::kBytes > 0 ? St::kBytes : 16];
    St st{{x, dy}, mk.bits, C, p.c0, smem};
    if (DY2) st.in[2] = dy2;
    if (SRC == kYMask) st.in[NIN - 1] = y;
    st.rows((int64_t)blockIdx.x * p.R + p.r, (int64_t)gridDim.x * p.R, M, [&](int64_t m, int sl) {
        float xv[N], g[N], g2[N], yv[N], o[N];
        tk_widen(st.get(0, m, sl), xv);
        tk_widen(st.get(1, m, sl), g);
        if (DY2) tk_widen(st.get(2, m, sl), g2);
        if (SRC == kYMask) tk_widen(st.get(NIN - 1, m, sl), yv);
        const unsigned bb = SRC == kBits ? st.mask(m, sl) : 0u;
#pragma unroll
        for (int k = 0; k < N; k++) {
            float dz = g[k];
            if (DY2) dz += g2[k];
            if (SRC == kYMask && !(yv[k] > 0.0f)) dz = 0.0f;
            if (SRC == kBits && !(bb >> k & 1)) dz = 0.0f;
            if (SRC == kXMask && !xmask_on<T>(xv[k], ms[k], mh[k])) dz = 0.0f;
            if (SRC != kNone || DY2) dz = tk_round<T>(dz); // (a stored dz, or dy alone, is already rounded)
            float xhat = __fmul_rn(__fsub_rn(xv[k], mu[k]), is[k]);
            o[k] = __fmul_rn(ca[k], __fsub_rn(__fsub_rn(dz, cb[k]), __fmul_rn(xhat, cg[k])));
        }
        stn<T, N>(dx, (size_t)m * C + p.c0, o);
    });
}

int check(tk_dtype t, int64_t M, int C, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "bn: tensors in %s", tk_dtype_name(t));
    if (M < 1 || C < 1) return tk_err_set(e, TK_EINTERNAL, "bn: bad shape M %lld C %d", (long long)M, C);
    return 0;
}

dim3 elem_grid(int64_t M, int C, int N) { return dim3(elem_blocks(M, C, N), tiles_of(C, N).tiles); }
unsigned fin_blocks(int C) { return (unsigned)((C + kFinC - 1) / kFinC); }

// Whether a call can write the mask bits: 8 channels per thread (bf16 vectors).
template <typename T> bool bits_ok(const void *x, const void *res, const void *y, int C) {
    return TkVec<T>::N == 8 && C % 8 == 0 && tk_aligned16(x, res, y);
}

template <typename T, bool EVAL>
void launch_apply(cudaStream_t st, const void *x, const void *res, int relu, const float *coef, EvalStats ev,
                  int64_t M, int C, void *y, uint8_t *bits = nullptr, const tk_bn_saved *rb = nullptr) {
    constexpr int NV = TkVec<T>::N;
    const bool vec = C % NV == 0 && tk_aligned16(x, res, y);
    const T *X = (const T *)x, *RS = (const T *)res;
    const tk_bn_saved r = rb ? *rb : tk_bn_saved{};
#define TK_APPLY(NN, RB, RE, BITS)                                                                                    \
    apply<T, NN, EVAL, RB, RE><<<elem_grid(M, C, NN), kThreads, 0, st>>>(X, RS, relu, coef, ev, M, C, (T *)y, BITS, r)
    if (vec && rb) TK_APPLY(NV, true, true, bits);
    else if (vec && res) TK_APPLY(NV, false, true, bits);
    else if (vec) TK_APPLY(NV, false, false, bits);
    else if (rb) TK_APPLY(1, true, true, nullptr);
    else if (res) TK_APPLY(1, false, true, nullptr);
    else TK_APPLY(1, false, false, nullptr);
#undef TK_APPLY
}

template <typename T>
int fwd_train(tk_ctx *c, const void *x, int64_t M, int C, const float *gamma, const float *beta, const void *res,
              int relu, float eps, float momentum, float *run_mean, float *run_var, float *save_mean,
              float *save_invstd, void *y, uint8_t *bits, const tk_bn_saved *rb, void *ws, tk_err *e) {
    if (rb && !res) return tk_err_set(e, TK_EINTERNAL, "bn: a residual BN without its residual");
    if (bits && (!y || !bits_ok<T>(x, res, y, C)))
        return tk_err_set(e, TK_EINTERNAL, "bn: mask bits need bf16, C %% 8 == 0 and aligned tensors (C %d)", C);
    cudaStream_t st = tk_cu_stream(c);
    float *part = (float *)ws, *coef = coef_of(ws, M, C);
    const int G = launch_partial<T, false>(st, x, nullptr, BwdMask{}, nullptr, nullptr, nullptr, nullptr, M, C, part,
                                           nullptr);
    stats_final<T><<<fin_blocks(C), dim3(kFinC, kFinLanes), 0, st>>>(part, G, (const T *)x, M, C, gamma, beta, eps,
                                                                      momentum, run_mean, run_var, save_mean,
                                                                      save_invstd, coef);
    if (y) launch_apply<T, false>(st, x, res, relu, coef, EvalStats{}, M, C, y, bits, rb);
    return tk_cu_check(e, "bn_fwd_train");
}

template <typename T>
int fwd_train_sums(tk_ctx *c, const void *x, int64_t M, int C, const float *sum, const float *sqsum,
                   const float *gamma, const float *beta, const void *res, int relu, float eps, float momentum,
                   float *run_mean, float *run_var, float *save_mean, float *save_invstd, void *y, void *ws,
                   tk_err *e) {
    cudaStream_t st = tk_cu_stream(c);
    float *coef = coef_of(ws, M, C);
    sums_final<<<(C + kThreads - 1) / kThreads, kThreads, 0, st>>>(sum, sqsum, M, C, gamma, beta, eps, momentum,
                                                                   run_mean, run_var, save_mean, save_invstd, coef);
    launch_apply<T, false>(st, x, res, relu, coef, EvalStats{}, M, C, y);
    return tk_cu_check(e, "bn_fwd_train_sums");
}

template <typename T, int N>
void launch_dx(cudaStream_t st, dim3 grid, int src, const T *x, const T *y, BwdMask mk, const T *dy, const T *dy2,
               const float *mean, const float *invstd, const float *coef, int64_t M, int C, T *dx) {
#define TK_DX(S, D) bwd_dx<T, N, S, D><<<grid, kThreads, 0, st>>>(x, y, mk, dy, dy2, mean, invstd, coef, M, C, dx)
    TK_BN_SOURCES(TK_DX, true);
#undef TK_DX
}

template <typename T>
int bwd(tk_ctx *c, const void *x, const void *y, const uint8_t *bits, const float *beta, const void *dy,
        const void *dy2, int64_t M, int C, const float *gamma, const float *save_mean, const float *save_invstd,
        void *dx, void *dz_out, float *dgamma, float *dbeta, void *ws, tk_err *e) {
    cudaStream_t st = tk_cu_stream(c);
    float *part = (float *)ws, *coef = coef_of(ws, M, C);
    const BwdMask mk = {gamma, y || bits ? nullptr : beta, bits};
    const int G = launch_partial<T, true>(st, x, y, mk, dy, dy2, save_mean, save_invstd, M, C, part, dz_out);
    bwd_final<<<fin_blocks(C), dim3(kFinC, kFinLanes), 0, st>>>(part, G, M, C, gamma, save_invstd, dgamma, dbeta,
                                                                coef);
    constexpr int NV = TkVec<T>::N;
    const bool vec = C % NV == 0 && tk_aligned16(x, y, dy, dy2, dx) && tk_aligned16(dz_out);
    const T *X = (const T *)x, *Y = (const T *)y;
    // with dz from part 1 the mask and dy2 are not needed again: dz read as dy, unmasked
    const T *DY = (const T *)(dz_out ? dz_out : dy), *DY2 = dz_out ? nullptr : (const T *)dy2;
    const int src = dz_out ? kNone : dz_source(y, mk);
    if (vec) launch_dx<T, NV>(st, elem_grid(M, C, NV), src, X, Y, mk, DY, DY2, save_mean, save_invstd, coef, M, C, (T *)dx);
    else launch_dx<T, 1>(st, elem_grid(M, C, 1), src, X, Y, mk, DY, DY2, save_mean, save_invstd, coef, M, C, (T *)dx);
    return tk_cu_check(e, "bn_bwd");
}

} // namespace
size_t tk_bn_ws_bytes_cuda(int64_t M, int C) {
    return tk_cu_align((size_t)groups_max(M, C) * C * 2 * sizeof(float)) + tk_cu_align((size_t)3 * C * sizeof(float));
}

int tk_bn_fwd_train_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                         const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                         float *save_mean, float *save_invstd, void *y, uint8_t *mask, void *ws, tk_err *e) {
    TRY(check(t, M, C, e));
    if (t == TK_BF16)
        return fwd_train<__nv_bfloat16>(c, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var,
                                        save_mean, save_invstd, y, mask, nullptr, ws, e);
    return fwd_train<float>(c, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var, save_mean,
                            save_invstd, y, mask, nullptr, ws, e);
}

int tk_bn_fwd_train_res_bn_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma,
                                const float *beta, const void *res, tk_bn_saved res_bn, int relu, float eps,
                                float momentum, float *run_mean, float *run_var, float *save_mean, float *save_invstd,
                                void *y, uint8_t *mask, void *ws, tk_err *e) {
    TRY(check(t, M, C, e));
    if (t == TK_BF16)
        return fwd_train<__nv_bfloat16>(c, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var,
                                        save_mean, save_invstd, y, mask, &res_bn, ws, e);
    return fwd_train<float>(c, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var, save_mean,
                            save_invstd, y, mask, &res_bn, ws, e);
}

int tk_bn_mask_ok_cuda(tk_dtype t, int C) { return t == TK_BF16 && C % 8 == 0; }

int tk_bn_fwd_train_sums_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *sum,
                              const float *sqsum, const float *gamma, const float *beta, const void *res, int relu,
                              float eps, float momentum, float *run_mean, float *run_var, float *save_mean,
                              float *save_invstd, void *y, void *ws, tk_err *e) {
    TRY(check(t, M, C, e));
    if (t == TK_BF16)
        return fwd_train_sums<__nv_bfloat16>(c, x, M, C, sum, sqsum, gamma, beta, res, relu, eps, momentum, run_mean,
                                             run_var, save_mean, save_invstd, y, ws, e);
    return fwd_train_sums<float>(c, x, M, C, sum, sqsum, gamma, beta, res, relu, eps, momentum, run_mean, run_var,
                                 save_mean, save_invstd, y, ws, e);
}

int tk_bn_fwd_eval_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                        const void *res, int relu, float eps, const float *run_mean, const float *run_var, void *y,
                        tk_err *e) {
    TRY(check(t, M, C, e));
    const EvalStats ev = {gamma, beta, run_mean, run_var, eps};
    if (t == TK_BF16) launch_apply<__nv_bfloat16, true>(tk_cu_stream(c), x, res, relu, nullptr, ev, M, C, y);
    else launch_apply<float, true>(tk_cu_stream(c), x, res, relu, nullptr, ev, M, C, y);
    return tk_cu_check(e, "bn_fwd_eval");
}

int tk_bn_bwd_cuda(tk_ctx *c, tk_dtype t, const void *x, const void *y, const uint8_t *mask, const float *beta,
                   const void *dy, const void *dy2, int64_t M, int C, const float *gamma, const float *save_mean,
                   const float *save_invstd, void *dx, void *dz_out, float *dgamma, float *dbeta, void *ws, tk_err *e) {
    TRY(check(t, M, C, e));
    if (t == TK_BF16)
        return bwd<__nv_bfloat16>(c, x, y, mask, beta, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out,
                                  dgamma, dbeta, ws, e);
    return bwd<float>(c, x, y, mask, beta, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out, dgamma, dbeta, ws,
                      e);
}
