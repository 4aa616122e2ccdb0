// CUDA side of kernels/interaction.h: the dot interaction forward and backward, one fused kernel
// each. The F = T+1 vectors of a sample are staged in shared memory (rows padded to D+1 values so
// threads reading the same dimension of different vectors hit different banks). Products of two
// floats are exact in fp64, and every sum runs in fp64 in the reference's order, so the results
// are the reference's bit for bit.
#include "core/vec.cuh"
#include "cuda_util.cuh"
#include "interaction.h"

constexpr int kThreads = 256;

// Activations (bot, emb, out, dout, dbot, demb) in f32 or bf16 (kernels/interaction.h, the _act
// variants; loads and stores: lib/core/vec.cuh); math in f32/fp64.

// Element offset of the vector of (sample b, table t) in the grouped layout (interaction.h): the
// groups [t / G][B][G][D] one after the other; G = T is (B, T, D).
__device__ __forceinline__ size_t emb_at(int b, int t, int B, int G, int D) {
    int g = t / G;
    return (((size_t)g * B + b) * G + (t - g * G)) * (size_t)D;
}

// Shared memory: F rows of D+1 floats (the vectors), then (backward) the W gradients.
static size_t smem_bytes(int F, int D, int W, int bwd) {
    return sizeof(float) * ((size_t)F * (D + 1) + (bwd ? (size_t)W : 0));
}

template <typename TA>
__device__ __forceinline__ void stage(const TA *bot, const TA *emb, int b, int B, int T, int G, int D, float *v) {
    int F = T + 1;
    for (int k = threadIdx.x; k < F * D; k += blockDim.x) {
        int i = k / D, d = k % D;
        v[i * (D + 1) + d] = tk_ld(i == 0 ? bot + (size_t)b * D + d : emb + emb_at(b, i - 1, B, G, D) + d, 0);
    }
}

// The forward's staged values, a 32-bit word each. A bf16 value widened to fp64 has a zero low
// word, so bf16 activations are staged as the high word of their exact double: the dot loop then
// reads a word and uses it as a double with no conversion. (Staged as floats and converted in the
// loop, 8 conversions per 16 fp64 FMAs, the conversion unit, at a quarter of the fp64 FMA rate,
// bounded the forward: 0.82 ms at batch 65536 on an H100, now 0.66 ms.) f32 activations are
// staged as floats and converted in the loop.
__device__ __forceinline__ uint32_t stage_word(float x, const float *) { return __float_as_uint(x); }
__device__ __forceinline__ uint32_t stage_word(float x, const __nv_bfloat16 *) {
    return (uint32_t)__double2hiint((double)x);
}
__device__ __forceinline__ double staged(uint32_t w, const float *) { return (double)__uint_as_float(w); }
__device__ __forceinline__ double staged(uint32_t w, const __nv_bfloat16 *) { return __hiloint2double((int)w, 0); }

// One warp stages a sample's F vectors (stage_word): the embeddings with 16-byte (f32) or 8-byte
// (bf16) loads, several in flight, when D % 4 == 0 and emb is 4-element aligned (every vector
// then is: its offset is a multiple of D in any grouping). A group's vectors of the sample are
// one contiguous run (G = T: a single run, the plain layout's loop).
template <typename TA>
__device__ __forceinline__ void stage_warp(const TA *bot, const TA *emb, int b, int B, int T, int G, int D,
                                           uint32_t *v, int lane) {
    const TA *k0 = nullptr; // (selects stage_word's overload)
    for (int d = lane; d < D; d += 32) v[d] = stage_word(tk_ld(bot + (size_t)b * D + d, 0), k0);
    if (D % 4 == 0 && (uintptr_t)emb % (4 * sizeof(TA)) == 0) {
        int q = D / 4;
        for (int t0 = 0; t0 < T; t0 += G) {
            int n = min(G, T - t0);
            const TA *e4 = emb + emb_at(b, t0, B, G, D);
            uint32_t *v0 = v + (t0 + 1) * (D + 1);
#pragma unroll 4
            for (int k = lane; k < n * q; k += 32) {
                int i = k / q, d = (k % q) * 4;
                float4 x = tk_ld4(e4 + (size_t)k * 4, 0);
                uint32_t *r = v0 + i * (D + 1) + d;
                r[0] = stage_word(x.x, k0), r[1] = stage_word(x.y, k0), r[2] = stage_word(x.z, k0),
                r[3] = stage_word(x.w, k0);
            }
        }
        return;
    }
    for (int k = lane; k < T * D; k += 32) {
        int t = k / D, d = k - t * D;
        v[(t + 1) * (D + 1) + d] = stage_word(tk_ld(emb + emb_at(b, t, B, G, D) + d, 0), k0);
    }
}

constexpr int kSpb = 4, kTile = 4;

// The forward's dots of one sample staged in v (F rows of D + 1 words): each lane owns 4 x 4
// tiles of the F x F dot matrix (on or below the diagonal) and walks d once for all 16 dots: 8
// shared loads per 16 fp64 FMAs instead of 2 per 1. Every dot sums d = 0, 1, ... in order.
template <typename TA>
__device__ __forceinline__ void fwd_tiles(const uint32_t *v, int F, int D, TA *o, int lane) {
    int nt = (F + kTile - 1) / kTile, ntiles = nt * (nt + 1) / 2;
    for (int tile = lane; tile < ntiles; tile += 32) {
        int ti = (int)((sqrtf(8.0f * tile + 1.0f) - 1.0f) * 0.5f);
        while (ti * (ti + 1) / 2 > tile) ti--;
        while ((ti + 1) * (ti + 2) / 2 <= tile) ti++;
        int tj = tile - ti * (ti + 1) / 2;
        const uint32_t *rows_i[kTile], *rows_j[kTile];
#pragma unroll
        for (int x = 0; x < kTile; x++) { // rows past F are clamped; their dots are not written
            rows_i[x] = v + min(ti * kTile + x, F - 1) * (D + 1);
            rows_j[x] = v + min(tj * kTile + x, F - 1) * (D + 1);
        }
        double acc[kTile][kTile] = {};
        for (int d = 0; d < D; d++) {
            double a[kTile], c[kTile];
#pragma unroll
            for (int x = 0; x < kTile; x++) a[x] = staged(rows_i[x][d], o), c[x] = staged(rows_j[x][d], o);
#pragma unroll
            for (int x = 0; x < kTile; x++)
#pragma unroll
                for (int y = 0; y < kTile; y++) acc[x][y] += a[x] * c[y];
        }
#pragma unroll
        for (int x = 0; x < kTile; x++)
#pragma unroll
            for (int y = 0; y < kTile; y++) {
                int i = ti * kTile + x, j = tj * kTile + y;
                if (i < F && j < i) tk_st(o + D + i * (i - 1) / 2 + j, 0, (float)acc[x][y]);
            }
    }
}

// Forward: one warp per sample (kSpb samples a block): its vectors staged (stage_warp), then
// fwd_tiles. (Staging fp64 instead of words: 2.06 ms at batch 65536 with all of D staged, half
// the samples an SM; 1.08 ms with chunks of 32 dimensions, whose 16-byte loads of fp64 pairs
// saturate the shared memory; H100.)
template <typename TA>
__global__ static void __launch_bounds__(32 * kSpb)
inter_fwd(const TA *bot, const TA *emb, int B, int T, int G, int D, int W, TA *out) {
    extern __shared__ uint32_t sm[];
    int F = T + 1, lane = threadIdx.x % 32, b = blockIdx.x * kSpb + threadIdx.x / 32;
    if (b >= B) return; // warps are independent: no block-wide barrier below
    uint32_t *v = sm + (size_t)(threadIdx.x / 32) * F * (D + 1);
    stage_warp(bot, emb, b, B, T, G, D, v, lane);
    __syncwarp();
    TA *o = out + (size_t)b * W;
    for (int d = lane; d < D; d += 32) o[d] = bot[(size_t)b * D + d];
    fwd_tiles(v, F, D, o, lane);
    for (int k = D + F * T / 2 + lane; k < W; k += 32) tk_st(o + k, 0, 0.0f);
}

// The F values v[.][d] of sample b, widened (see inter_bwd_fixed for first and gap).
template <int F, typename TA>
__device__ __forceinline__ void bwd_load(const TA *bot, const TA *emb, int b, int G, int D, size_t first, size_t gap,
                                         int d, double (&v)[F]) {
    v[0] = tk_ld(bot + (size_t)b * D + d, 0);
    const TA *p = emb + first + d;
#pragma unroll
    for (int k = 1, j = 0; k < F; k++) {
        v[k] = tk_ld(p, 0);
        p += D;
        if (++j == G) j = 0, p += gap;
    }
}

// Backward for a compile-time F (the MLPerf model's 27): one thread per (sample, d) keeps the F
// values v[.][d] and the F accumulators in registers and walks the pairs in the reference's
// order (acc[i] += g v_j, then acc[j] += g v_i), reading each pair's gradient once from shared
// memory (a broadcast). In the grouped layout a sample's vectors are contiguous G at a time: the
// walk over them steps D, plus the gap to the next group after every G-th (no division in the
// unrolled loops; G = T never takes the gap).
template <int F, typename TA>
__global__ static void __launch_bounds__(128)
inter_bwd_fixed(const TA *bot, const TA *emb, const TA *dout, int B, int G, int D, int W, int bot_relu, bool vec_g,
                TA *dbot, TA *demb) {
    extern __shared__ double g[];
    int b = blockIdx.x, d = threadIdx.x;
    const size_t first = (size_t)b * G * D, gap = (size_t)(B - 1) * G * D; // table 0's vector; group gap
    // The first dimension's vectors are loaded before the gradients are staged, and the gradients
    // with 16-byte loads (vec_g: W * sizeof(TA) a multiple of 16, dout aligned), all issued before
    // any is used: the staging loop of one load at a time, each waited for, and then the vectors'
    // loads were 45% of this kernel's stall samples (ncu, H100).
    double v[F];
    if (d < D) bwd_load(bot, emb, b, G, D, first, gap, d, v);
    const TA *gb = dout + (size_t)b * W;
    if (vec_g) {
        constexpr int per = 16 / sizeof(TA);
        for (int k = threadIdx.x; k < W / per; k += blockDim.x) {
            uint4 raw = ((const uint4 *)gb)[k];
            const TA *t = (const TA *)&raw;
#pragma unroll
            for (int e = 0; e < per; e++) g[k * per + e] = tk_ld(t + e, 0);
        }
    } else {
#pragma unroll 4
        for (int k = threadIdx.x; k < W; k += blockDim.x) g[k] = tk_ld(gb + k, 0);
    }
    __syncthreads();
    for (; d < D; d += blockDim.x) {
        if (d != (int)threadIdx.x) bwd_load(bot, emb, b, G, D, first, gap, d, v);
        double acc[F];
        acc[0] = g[d];
#pragma unroll
        for (int k = 1; k < F; k++) acc[k] = 0;
#pragma unroll
        for (int i = 1; i < F; i++) {
#pragma unroll
            for (int j = 0; j < i; j++) {
                double gz = g[D + i * (i - 1) / 2 + j];
                acc[i] += gz * v[j];
                acc[j] += gz * v[i];
            }
            // Keeps the compiler from hoisting all F(F-1)/2 gradient loads to the top, which
            // runs out of registers (spills); one row of pairs at a time stays in flight.
            asm volatile("" ::: "memory");
        }
        tk_st(dbot + (size_t)b * D + d, 0, bot_relu && v[0] <= 0 ? 0.0f : (float)acc[0]);
        TA *q = demb + first + d;
#pragma unroll
        for (int k = 1, j = 0; k < F; k++) {
            tk_st(q, 0, (float)acc[k]);
            q += D;
            if (++j == G) j = 0, q += gap;
        }
    }
}

// Backward, any F: thread per (vector k, dimension d): acc = [k == 0] g[d] + sum over pairs containing k of
// g[pair] * (the other vector)[d], in the reference's order (pairs (k, j) for j < k, then (i, k)
// for i > k).
template <typename TA>
__global__ static void __launch_bounds__(kThreads)
inter_bwd(const TA *bot, const TA *emb, const TA *dout, int B, int T, int G, int D, int W, int bot_relu,
          TA *dbot, TA *demb) {
    extern __shared__ float v[];
    int b = blockIdx.x, F = T + 1;
    float *g = v + (size_t)F * (D + 1);
    stage(bot, emb, b, B, T, G, D, v);
    for (int k = threadIdx.x; k < W; k += blockDim.x) g[k] = tk_ld(dout + (size_t)b * W + k, 0);
    __syncthreads();
    for (int kd = threadIdx.x; kd < F * D; kd += blockDim.x) {
        int k = kd / D, d = kd % D;
        double acc = k == 0 ? (double)g[d] : 0.0;
        const float *gk = g + D + k * (k - 1) / 2;
        for (int j = 0; j < k; j++) acc += (double)gk[j] * (double)v[j * (D + 1) + d];
        for (int i = k + 1; i < F; i++) acc += (double)g[D + i * (i - 1) / 2 + k] * (double)v[i * (D + 1) + d];
        if (k == 0) tk_st(dbot + (size_t)b * D + d, 0, bot_relu && v[d] <= 0 ? 0.0f : (float)acc);
        else tk_st(demb + emb_at(b, k - 1, B, G, D) + d, 0, (float)acc);
    }
}

static int launch_check(const void *fn, size_t smem, const char *op, tk_err *e) {
    // More than 48 KiB of dynamic shared memory must be asked for (Hopper allows 227 KiB).
    if (smem > 48 * 1024) {
        cudaError_t st = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (st != cudaSuccess) return tk_cu_check(e, op, st);
    }
    return 0;
}

static int check_args(int T, int G, int D, int W, const char *op, tk_err *e) {
    if (G < 1 || G > T) return tk_err_set(e, TK_EINTERNAL, "%s: group of %d tables, not in [1, %d]", op, G, T);
    if (W >= tk_interaction_width(T, D)) return 0;
    return tk_err_set(e, TK_EINTERNAL, "%s: output width %d < %d features", op, W, tk_interaction_width(T, D));
}

template <typename TA>
static int fwd_launch(tk_ctx *c, const TA *bot, const TA *emb, int B, int T, int G, int D, int W, TA *out,
                      tk_err *e) {
    TRY(check_args(T, G, D, W, "interaction_fwd", e));
    if (B <= 0) return 0;
    size_t smem = kSpb * smem_bytes(T + 1, D, W, 0);
    TRY(launch_check((const void *)inter_fwd<TA>, smem, "interaction_fwd", e));
    inter_fwd<TA><<<(B + kSpb - 1) / kSpb, 32 * kSpb, smem, tk_cu_stream(c)>>>(bot, emb, B, T, G, D, W, out);
    return tk_cu_check(e, "interaction_fwd");
}

template <typename TA>
static int bwd_launch(tk_ctx *c, const TA *bot, const TA *emb, const TA *dout, int B, int T, int G, int D,
                      int W, int bot_relu, TA *dbot, TA *demb, tk_err *e) {
    TRY(check_args(T, G, D, W, "interaction_bwd", e));
    if (B <= 0) return 0;
    cudaStream_t s = tk_cu_stream(c);
    if (T == 26) { // the MLPerf model
        size_t smem = sizeof(double) * (size_t)W;
        const bool vec_g = (W * sizeof(TA)) % 16 == 0 && (uintptr_t)dout % 16 == 0;
        TRY(launch_check((const void *)inter_bwd_fixed<27, TA>, smem, "interaction_bwd", e));
        inter_bwd_fixed<27, TA><<<B, 128, smem, s>>>(bot, emb, dout, B, G, D, W, bot_relu, vec_g, dbot, demb);
        return tk_cu_check(e, "interaction_bwd");
    }
    size_t smem = smem_bytes(T + 1, D, W, 1);
    TRY(launch_check((const void *)inter_bwd<TA>, smem, "interaction_bwd", e));
    inter_bwd<TA><<<B, kThreads, smem, s>>>(bot, emb, dout, B, T, G, D, W, bot_relu, dbot, demb);
    return tk_cu_check(e, "interaction_bwd");
}

int tk_interaction_fwd_cuda(tk_ctx *c, const float *bot, const float *emb, int B, int T, int D,
                            int W, float *out, tk_err *e) {
    return fwd_launch(c, bot, emb, B, T, T, D, W, out, e);
}

int tk_interaction_bwd_cuda(tk_ctx *c, const float *bot, const float *emb, const float *dout,
                            int B, int T, int D, int W, int bot_relu, float *dbot,
                            float *demb, tk_err *e) {
    return bwd_launch(c, bot, emb, dout, B, T, T, D, W, bot_relu, dbot, demb, e);
}

int tk_interaction_fwd_act_cuda(tk_ctx *c, tk_dtype act, const void *bot, const void *emb, int B, int T,
                                int G, int D, int W, void *out, tk_err *e) {
    if (act == TK_F32)
        return fwd_launch(c, (const float *)bot, (const float *)emb, B, T, G, D, W, (float *)out, e);
    if (act != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "interaction_fwd: activations in %s", tk_dtype_name(act));
    return fwd_launch(c, (const __nv_bfloat16 *)bot, (const __nv_bfloat16 *)emb, B, T, G, D, W,
                      (__nv_bfloat16 *)out, e);
}

int tk_interaction_bwd_act_cuda(tk_ctx *c, tk_dtype act, const void *bot, const void *emb,
                                const void *dout, int B, int T, int G, int D, int W, int bot_relu,
                                void *dbot, void *demb, tk_err *e) {
    if (act == TK_F32)
        return bwd_launch(c, (const float *)bot, (const float *)emb, (const float *)dout, B, T, G, D, W, bot_relu,
                          (float *)dbot, (float *)demb, e);
    if (act != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "interaction_bwd: activations in %s", tk_dtype_name(act));
    return bwd_launch(c, (const __nv_bfloat16 *)bot, (const __nv_bfloat16 *)emb, (const __nv_bfloat16 *)dout, B, T,
                      G, D, W, bot_relu, (__nv_bfloat16 *)dbot, (__nv_bfloat16 *)demb, e);
}
