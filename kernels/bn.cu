// CUDA side of kernels/bn.h. Every kernel walks the (M, C) activation as tiles: a block of 256
// threads covers up to 256 vectors of N channels (16 bytes: 8 bf16 or 4 fp32, else N = 1), so
// R = 256 / (vectors in the tile) rows at a time (tiles along grid.y when C / N > 256), and each
// thread keeps its channels for the whole kernel: no index division, and the per-channel
// coefficients are loaded once into registers. Rows go round grid.x with a stride.
// The per-channel sums (statistics forward, dbeta/dgamma backward) are two kernels: blocks add
// fp32 partials over a fixed set of rows (G row groups, G a function of M, C and N only, at most
// 1024) and reduce their row lanes in a fixed tree; then a block per 32 channels adds the G
// partials in fp64, 32 lanes over the partials, the lanes added in a fixed order. No atomics:
// the same inputs give the same bits on every run and every graph replay.
#include "bn.h"
#include "cuda_util.cuh"
#include "rn_vec.cuh"

namespace {

constexpr int kThreads = 256;
constexpr int kMaxGroups = 1024;
constexpr int kElemBlocks = 2048; // the elementwise passes' blocks (about 2 waves of 8 per SM on an H100)
constexpr int kFinC = 32, kFinLanes = 32;

// The tiles of a call: V vectors of N channels per row, up to 256 per tile.
struct Tiles {
    int V, R, tiles;
};
__host__ __device__ inline Tiles tiles_of(int C, int N) {
    const int V = C / N, Vt = V < kThreads ? V : kThreads;
    return Tiles{V, kThreads / Vt, (V + kThreads - 1) / kThreads};
}

// The partial sums' row groups: about 16 block iterations each, at most kMaxGroups (4 iterations
// measured slower on an H100 for the last stages' small activations: 47 -> 60 us per BN forward
// at M 50176, C 256), and at least 64 rows each: with one or two rows per block iteration (C of
// 1024 or 2048 bf16 channels) 16 iterations made partials of a quarter of x's bytes for the final
// sums to read (the statistics alone of M 12544, C 2048 took 75 us for 51 MB). A function of
// (M, C, N) only, so the sums' order is fixed.
int groups(int64_t M, int C, int N) {
    const int R = tiles_of(C, N).R, rows = R * 16 < 64 ? 64 : R * 16;
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
    if constexpr (N == 1) f[0] = rn_f(p[i]);
    else rn_vload(p, i, f);
}
template <typename T, int N> __device__ __forceinline__ void stn(T *p, size_t i, const float *f) {
    if constexpr (N == 1) p[i] = rn_to<T>(f[0]);
    else rn_vstore(p, i, f);
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
// Where the kernels' dz comes from: dy [+ dy2] masked by y or x (kPlain), or by the forward's bits
// (kBits).
enum { kPlain = 0, kBits = 1 };

// The bits of elements i .. i + N - 1 (i a multiple of N, N <= 8: all in one byte), from bit 0.
__device__ __forceinline__ unsigned bits_at(const uint8_t *bits, size_t i) { return bits[i >> 3] >> (i & 7); }
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
    return rn_round<T>(__fadd_rn(__fmul_rn(x, scale), shift)) > 0.0f;
}

// Part 1 of the per-channel sums, both directions: each thread adds its rows' values of its N
// channels, then the R row lanes of a vector are added in a fixed tree into the block's partial.
//   forward (BWD false): s = sum (x - x[0, c]), q = sum (x - x[0, c])^2
//   backward: dz (bn.h; written to dz_out when asked), s = sum dz, q = sum dz xhat
// MODE: where the backward's dz comes from (kPlain, kBits: a template flag, so each kernel keeps
// only the registers it needs).
template <typename T, int N, bool BWD, int MODE>
__global__ void __launch_bounds__(kThreads)
    partial(const T *__restrict__ x, const T *__restrict__ y, const BwdMask mk, const T *__restrict__ dy,
            const T *__restrict__ dy2, const float *__restrict__ mean, const float *__restrict__ invstd, int64_t M,
            int C, float *__restrict__ part, T *__restrict__ dz_out) {
    __shared__ float sh[2][kThreads * N];
    const Place p = place<N>(C);
    float s[N], q[N], a[N], b[N], ms[N], mh[N];
#pragma unroll
    for (int k = 0; k < N; k++) s[k] = q[k] = 0;
    if (p.active) {
        if (BWD) {
#pragma unroll
            for (int k = 0; k < N; k++) a[k] = mean[p.c0 + k], b[k] = invstd[p.c0 + k];
            mask_coef<N>(mk, p.c0, a, b, ms, mh);
        } else {
            ldn<T, N>(x, (size_t)p.c0, a); // the shift: row 0
        }
        const int64_t step = (int64_t)gridDim.x * p.R;
#pragma unroll 4
        for (int64_t m = (int64_t)blockIdx.x * p.R + p.r; m < M; m += step) {
            const size_t i = (size_t)m * C + p.c0;
            float xv[N];
            ldn<T, N>(x, i, xv);
            if (BWD) {
                float g[N], g2[N], yv[N], o[N];
                ldn<T, N>(dy, i, g);
                if (dy2) ldn<T, N>(dy2, i, g2);
                if (MODE == kPlain && y) ldn<T, N>(y, i, yv);
                const unsigned bb = MODE == kBits ? bits_at(mk.bits, i) : 0u;
#pragma unroll
                for (int k = 0; k < N; k++) {
                    float dz = g[k];
                    if (dy2) dz += g2[k];
                    if (MODE == kPlain && y && !(yv[k] > 0.0f)) dz = 0.0f;
                    if (MODE == kBits && !(bb >> k & 1)) dz = 0.0f;
                    if (mk.beta && !xmask_on<T>(xv[k], ms[k], mh[k])) dz = 0.0f;
                    dz = rn_round<T>(dz);
                    float xhat = __fmul_rn(__fsub_rn(xv[k], a[k]), b[k]);
                    s[k] += dz;
                    q[k] = __fmaf_rn(dz, xhat, q[k]);
                    o[k] = dz;
                }
                if (dz_out) stn<T, N>(dz_out, i, o);
            } else {
#pragma unroll
                for (int k = 0; k < N; k++) {
                    float d = xv[k] - a[k];
                    s[k] += d;
                    q[k] += d * d;
                }
            }
        }
    }
    const int tid = threadIdx.x;
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

// The launch of part 1 with the widest vectors the channels and pointers allow; returns G.
template <typename T, bool BWD>
int launch_partial(cudaStream_t st, const void *x, const void *y, BwdMask mk, const void *dy, const void *dy2,
                   const float *mean, const float *invstd, int64_t M, int C, float *part, void *dz_out) {
    constexpr int NV = RnVec<T>::N;
    const bool vec = C % NV == 0 && rn_aligned16(x, y, dy, dy2, dz_out);
    const int N = vec ? NV : 1, G = groups(M, C, N), tiles = tiles_of(C, N).tiles;
    const T *X = (const T *)x, *Y = (const T *)y, *DY = (const T *)dy, *DY2 = (const T *)dy2;
    const dim3 grid(G, tiles);
    const bool bits = BWD && mk.bits;
    T *DZ = (T *)dz_out;
#define TK_PARTIAL(NN, MM) partial<T, NN, BWD, MM><<<grid, kThreads, 0, st>>>(X, Y, mk, DY, DY2, mean, invstd, M, C, part, DZ)
    if (vec && bits) TK_PARTIAL(NV, kBits);
    else if (vec) TK_PARTIAL(NV, kPlain);
    else if (bits) TK_PARTIAL(1, kBits);
    else TK_PARTIAL(1, kPlain);
#undef TK_PARTIAL
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
    stats_out(c, (double)rn_f(x[c]) + md, var, M, C, gamma, beta, eps, momentum, run_mean, run_var, save_mean,
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
template <typename T, int N, bool EVAL, bool RBN>
__global__ void __launch_bounds__(kThreads)
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
    const int64_t step = (int64_t)gridDim.x * p.R;
#pragma unroll 4
    for (int64_t m = (int64_t)blockIdx.x * p.R + p.r; m < M; m += step) {
        const size_t i = (size_t)m * C + p.c0;
        float v[N], r[N];
        ldn<T, N>(x, i, v);
        if (res) ldn<T, N>(res, i, r);
#pragma unroll
        for (int k = 0; k < N; k++) {
            float o = __fadd_rn(__fmul_rn(v[k], scale[k]), shift[k]);
            if (RBN) r[k] = rn_round<T>(__fadd_rn(__fmul_rn(r[k], rs[k]), rh[k])); // (as its BN would store it)
            if (res) o = __fadd_rn(o, r[k]);
            v[k] = act(o, relu);
        }
        stn<T, N>(y, i, v);
        if (N == 8 && bits) {
            unsigned b = 0;
#pragma unroll
            for (int k = 0; k < N; k++) b |= (rn_round<T>(v[k]) > 0.0f ? 1u : 0u) << k;
            bits[i >> 3] = (uint8_t)b;
        }
    }
}

// dx = a (dz - b - xhat g) with the coefficients of bwd_final; dz recomputed from dy, dy2 and y,
// or read from dzin (part 1 wrote it: two reads instead of four).
template <typename T, int N, int MODE>
__global__ void __launch_bounds__(kThreads)
    bwd_dx(const T *__restrict__ x, const T *__restrict__ y, const BwdMask mk, const T *__restrict__ dy,
           const T *__restrict__ dy2, const T *__restrict__ dzin, const float *__restrict__ save_mean,
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
    if (!dzin) mask_coef<N>(mk, p.c0, mu, is, ms, mh);
    const int64_t step = (int64_t)gridDim.x * p.R;
#pragma unroll 4
    for (int64_t m = (int64_t)blockIdx.x * p.R + p.r; m < M; m += step) {
        const size_t i = (size_t)m * C + p.c0;
        float xv[N], g[N], g2[N], yv[N], o[N];
        ldn<T, N>(x, i, xv);
        ldn<T, N>(dzin ? dzin : dy, i, g);
        if (!dzin && dy2) ldn<T, N>(dy2, i, g2);
        if (MODE == kPlain && !dzin && y) ldn<T, N>(y, i, yv);
        const unsigned bb = MODE == kBits && !dzin ? bits_at(mk.bits, i) : 0u;
#pragma unroll
        for (int k = 0; k < N; k++) {
            float dz = g[k];
            if (!dzin) {
                if (dy2) dz += g2[k];
                if (MODE == kPlain && y && !(yv[k] > 0.0f)) dz = 0.0f;
                if (MODE == kBits && !(bb >> k & 1)) dz = 0.0f;
                if (mk.beta && !xmask_on<T>(xv[k], ms[k], mh[k])) dz = 0.0f;
                dz = rn_round<T>(dz);
            }
            float xhat = __fmul_rn(__fsub_rn(xv[k], mu[k]), is[k]);
            o[k] = __fmul_rn(ca[k], __fsub_rn(__fsub_rn(dz, cb[k]), __fmul_rn(xhat, cg[k])));
        }
        stn<T, N>(dx, i, o);
    }
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
    return RnVec<T>::N == 8 && C % 8 == 0 && rn_aligned16(x, res, y);
}

template <typename T, bool EVAL>
void launch_apply(cudaStream_t st, const void *x, const void *res, int relu, const float *coef, EvalStats ev,
                  int64_t M, int C, void *y, uint8_t *bits = nullptr, const tk_bn_saved *rb = nullptr) {
    constexpr int NV = RnVec<T>::N;
    const bool vec = C % NV == 0 && rn_aligned16(x, res, y);
    const T *X = (const T *)x, *RS = (const T *)res;
    const tk_bn_saved r = rb ? *rb : tk_bn_saved{};
    if (vec && rb)
        apply<T, NV, EVAL, true><<<elem_grid(M, C, NV), kThreads, 0, st>>>(X, RS, relu, coef, ev, M, C, (T *)y, bits, r);
    else if (vec)
        apply<T, NV, EVAL, false><<<elem_grid(M, C, NV), kThreads, 0, st>>>(X, RS, relu, coef, ev, M, C, (T *)y, bits, r);
    else if (rb)
        apply<T, 1, EVAL, true><<<elem_grid(M, C, 1), kThreads, 0, st>>>(X, RS, relu, coef, ev, M, C, (T *)y, nullptr, r);
    else
        apply<T, 1, EVAL, false><<<elem_grid(M, C, 1), kThreads, 0, st>>>(X, RS, relu, coef, ev, M, C, (T *)y, nullptr, r);
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
    constexpr int NV = RnVec<T>::N;
    const bool vec = C % NV == 0 && rn_aligned16(x, y, dy, dy2, dx) && rn_aligned16(dz_out);
    const T *X = (const T *)x, *Y = (const T *)y, *DY = (const T *)dy, *DY2 = (const T *)dy2, *DZ = (const T *)dz_out;
    // (with dz from part 1 the mask is not needed again: the plain kernel)
    const bool bits_dx = bits && !dz_out;
#define TK_DX(NN, MM)                                                                                               \
    bwd_dx<T, NN, MM><<<elem_grid(M, C, NN), kThreads, 0, st>>>(X, Y, mk, DY, DY2, DZ, save_mean, save_invstd, coef, M, \
                                                               C, (T *)dx)
    if (vec && bits_dx) TK_DX(NV, kBits);
    else if (vec) TK_DX(NV, kPlain);
    else if (bits_dx) TK_DX(1, kBits);
    else TK_DX(1, kPlain);
#undef TK_DX
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
