// CUDA side of kernels/flash_attn.h (bf16, D = 64): FlashAttention-2's tiling on the tensor cores
// (mma.sync m16n8k16, bf16 in, fp32 accumulation; fragments from shared memory with ldmatrix).
// A block is 4 warps and a tile of 64 rows of one (sequence, head); each warp owns 16 of them.
//   forward   block = 64 queries; loop over 64-key tiles (K, V double-buffered through cp.async):
//             S = Q K^T, the online softmax (running max and sum in fp32, exp2), Pd = P * mask,
//             O += Pd V from registers; O / l and lse at the end.
//   backward  prep: D_i = dO_i . O_i and the dropout mask as bits (one Philox call a byte) into ws;
//             dkdv: block = 64 keys; loop over 64-query tiles: S^T = K Q^T, P^T from lse,
//               dV += Pd^T dO, dP^T = V dO^T, dS^T = P^T (dP^T m - D), dK += dS^T Q (the mask
//               words of its keys come with each query tile through shared memory);
//             dq: block = 64 queries; loop over key tiles: S, P, dP = dO V^T, dS, dQ += dS K.
//   Each output row is written by one warp: deterministic, no atomics. Registers bound the
//   occupancy: forward 128 (4 blocks an SM), dkdv 245 (2), dq 168 (3); capping the forward and dq
//   (small spills) measured 8% faster on the backward than leaving ptxas at 132 and 178 (H100,
//   contrib/bench/NOTES.md).
// The forward draws the mask itself: the 16 groups of 8 keys a thread's quad touches in a tile
// are drawn one Philox call each, spread over the quad's 4 lanes and exchanged by shuffles (when
// every group starts at a multiple of 8, i.e. Lstride and drop->offset are multiples of 8;
// element by element otherwise).
#include <cuda_bf16.h>

#include "act_types.cuh"
#include "dropout.cuh"
#include "flash_attn.h"

namespace {

typedef __nv_bfloat16 bf16;
constexpr int kTile = 64;  // rows of a block's tile and of the tiles it loops over
constexpr int kWarps = 4;  // 16 rows each
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ uint32_t smem_u32(const void *p) { return (uint32_t)__cvta_generic_to_shared(p); }

// 16 bytes global -> shared, zero-filled when !ok (nothing read then).
__device__ __forceinline__ void cp16(void *dst, const void *src, bool ok) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_u32(dst)), "l"(src), "r"(ok ? 16 : 0));
}
__device__ __forceinline__ void cp_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::); }

__device__ __forceinline__ void ldsm4(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
__device__ __forceinline__ void ldsm4t(uint32_t r[4], const void *p) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_u32(p)));
}
// c (16 x 8, fp32) += a (16 x 16, row) b (16 x 8, col)
__device__ __forceinline__ void mma(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
__device__ __forceinline__ uint32_t pack(float lo, float hi) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *(uint32_t *)&v;
}

// A tile of 64 rows x D bf16 (global row stride ldg elements) into shared rows of D + 8 (the pad
// puts the 8 rows an ldmatrix reads in distinct banks); rows >= nvalid are zero.
template <int D>
__device__ __forceinline__ void load_tile(bf16 *sm, const bf16 *g, int64_t ldg, int nvalid) {
    constexpr int kCpr = D / 8;
    for (int c = threadIdx.x; c < kTile * kCpr; c += kThreads) {
        int r = c / kCpr, col = (c % kCpr) * 8;
        bool ok = r < nvalid;
        cp16(sm + r * (D + 8) + col, ok ? g + (int64_t)r * ldg + col : g, ok);
    }
}
// 64 floats (one per row; rows >= nvalid zero) into shared memory (plain loads: the rows of lse
// and D_i need not be 16-byte aligned).
__device__ __forceinline__ void load_vec(float *sm, const float *g, int nvalid) {
    const int c = threadIdx.x;
    if (c < kTile) sm[c] = c < nvalid ? g[c] : 0.0f;
}

// 64 mask words, one a row (row stride `words`; rows >= nvalid zero), into shared memory.
__device__ __forceinline__ void load_mask(uint64_t *sm, const uint64_t *g, int words, int nvalid) {
    const int c = threadIdx.x;
    if (c < kTile) sm[c] = c < nvalid ? g[(int64_t)c * words] : 0;
}

// The A fragments (16 rows x D) of a warp's rows r0 .. r0 + 15 of a shared tile.
template <int D>
__device__ __forceinline__ void load_a(uint32_t f[D / 16][4], const bf16 *sm, int r0) {
    const int lane = threadIdx.x % 32;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) ldsm4(f[kk], sm + (r0 + (lane & 15)) * (D + 8) + kk * 16 + (lane >> 4) * 8);
}

// acc (16 x 64) += A (16 x D, fragments) X^T with X the shared tile (64 rows x D): B[k][n] = X[n][k].
template <int D>
__device__ __forceinline__ void mma_abt(float acc[8][4], const uint32_t a[D / 16][4], const bf16 *sm) {
    const int lane = threadIdx.x % 32, m = lane >> 3;
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++)
#pragma unroll
        for (int n2 = 0; n2 < 4; n2++) {
            uint32_t b[4];
            ldsm4(b, sm + (n2 * 16 + (m >> 1) * 8 + (lane & 7)) * (D + 8) + kk * 16 + (m & 1) * 8);
            mma(acc[2 * n2], a[kk], b[0], b[1]);
            mma(acc[2 * n2 + 1], a[kk], b[2], b[3]);
        }
}

// acc (16 x D) += P (16 x 64, accumulator layout in p) X with X the shared tile (64 rows x D).
template <int D>
__device__ __forceinline__ void mma_px(float acc[D / 8][4], const float p[8][4], const bf16 *sm) {
    const int lane = threadIdx.x % 32, m = lane >> 3;
#pragma unroll
    for (int kk = 0; kk < 4; kk++) {
        uint32_t a[4] = {pack(p[2 * kk][0], p[2 * kk][1]), pack(p[2 * kk][2], p[2 * kk][3]),
                         pack(p[2 * kk + 1][0], p[2 * kk + 1][1]), pack(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
        for (int d2 = 0; d2 < D / 16; d2++) {
            uint32_t b[4];
            ldsm4t(b, sm + (kk * 16 + (m & 1) * 8 + (lane & 7)) * (D + 8) + d2 * 16 + (m >> 1) * 8);
            mma(acc[2 * d2], a, b[0], b[1]);
            mma(acc[2 * d2 + 1], a, b[2], b[3]);
        }
    }
}

__device__ __forceinline__ uint32_t pick4(uint32_t u0, uint32_t u1, uint32_t u2, uint32_t u3, int x) {
    uint32_t lo = (x & 1) ? u1 : u0, hi = (x & 1) ? u3 : u2;
    return (x & 2) ? hi : lo;
}

// The forward's mask on a warp's S tile p (rows i0 = row g, i0 + 8; keys j0 + 8 nt + 2 t + {0, 1}):
// p *= factor. rowidx(i) = (s NH + h) Lstride + i; aligned: every group of 8 keys starts at a
// multiple of 8 of the global index.
__device__ __forceinline__ void drop_fwd(float p[8][4], const tk_drop_dev &dr, int64_t step, int64_t ridx0, int Lstride,
                                         int j0, bool aligned) {
    const int lane = threadIdx.x % 32, t = lane & 3;
    if (aligned) {
        const uint32_t stream = (uint32_t)TK_RNG_DROPOUT | dr.site << 8;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            // this lane draws group (half r >> 1, key tile (r & 1) 4 + t)
            const int half = r >> 1, nt = (r & 1) * 4 + t;
            const int64_t gi = dr.offset + (ridx0 + 8 * half) * Lstride + j0 + nt * 8;
            tk_philox_ctr v = tk_philox_draw(dr.seed, stream, (uint64_t)step << 37 | (uint64_t)gi >> 3);
            // transpose the quad's 4 x 4 words: lane t gets word t of the groups of lanes t ^ x
            const int t0 = t & 1, t1 = t >> 1;
            uint32_t a = t0 ? v.v[0] : v.v[1], b = t0 ? v.v[2] : v.v[3];
            uint32_t k0 = t0 ? v.v[1] : v.v[0], k1 = t0 ? v.v[3] : v.v[2];
            uint32_t ra = __shfl_xor_sync(0xffffffffu, a, 1), rb = __shfl_xor_sync(0xffffffffu, b, 1);
            uint32_t c0 = t1 ? k0 : k1, c1 = t1 ? ra : rb;
            uint32_t u0 = t1 ? k1 : k0, u1 = t1 ? rb : ra;
            uint32_t u2 = __shfl_xor_sync(0xffffffffu, c0, 2), u3 = __shfl_xor_sync(0xffffffffu, c1, 2);
#pragma unroll
            for (int q = 0; q < 4; q++) {
                uint32_t w = pick4(u0, u1, u2, u3, q ^ t);
                float *x = p[(r & 1) * 4 + q] + 2 * half;
                x[0] *= (w & 0xffffu) >= dr.th ? dr.scale : 0.0f;
                x[1] *= (w >> 16) >= dr.th ? dr.scale : 0.0f;
            }
        }
    } else {
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                p[nt][e] *= tk_drop1(dr, step, (ridx0 + 8 * (e >> 1)) * Lstride + j0 + nt * 8 + 2 * t + (e & 1));
    }
}

// ---- forward ----

template <int D>
__global__ void __launch_bounds__(kThreads, 4) // <= 128 registers: 4 blocks an SM
fwd_kernel(int NH, int Lstride, const int32_t *start, const int32_t *len, const bf16 *qkv, tk_drop_dev dr,
           bool aligned, float scale_log2, bf16 *ctx, float *lse) {
    const int s = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * kTile;
    const int n = min(len[s], Lstride);
    if (q0 >= n) return;
    constexpr int LD = D + 8;
    // K and V double-buffered; Q shares the second buffer of K until its fragments are loaded
    __shared__ __align__(16) bf16 sK[2][kTile * LD], sV[2][kTile * LD];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int64_t ldq = (int64_t)3 * NH * D, row0 = start[s];
    const bf16 *Q = qkv + row0 * ldq + h * D, *K = Q + NH * D, *V = Q + 2 * NH * D;
    const int nt_tiles = (n + kTile - 1) / kTile;
    load_tile<D>(sK[1], Q + q0 * ldq, ldq, n - q0);
    load_tile<D>(sK[0], K, ldq, n);
    load_tile<D>(sV[0], V, ldq, n);
    cp_commit();
    uint32_t qf[D / 16][4];
    float o[D / 8][4], m[2] = {-INFINITY, -INFINITY}, l[2] = {0, 0};
#pragma unroll
    for (int d = 0; d < D / 8; d++) o[d][0] = o[d][1] = o[d][2] = o[d][3] = 0;
    const int64_t step = tk_drop_step(dr);
    const int64_t ridx0 = ((int64_t)s * NH + h) * Lstride + q0 + warp * 16 + g;
    for (int kt = 0; kt < nt_tiles; kt++) {
        const int buf = kt & 1;
        cp_wait_all();
        __syncthreads();
        if (kt == 0) {
            load_a<D>(qf, sK[1], warp * 16);
            __syncthreads();
        }
        if (kt + 1 < nt_tiles) {
            load_tile<D>(sK[buf ^ 1], K + (int64_t)(kt + 1) * kTile * ldq, ldq, n - (kt + 1) * kTile);
            load_tile<D>(sV[buf ^ 1], V + (int64_t)(kt + 1) * kTile * ldq, ldq, n - (kt + 1) * kTile);
        }
        cp_commit();
        float p[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++) p[nt][0] = p[nt][1] = p[nt][2] = p[nt][3] = 0;
        mma_abt<D>(p, qf, sK[buf]);
        const int j0 = kt * kTile;
        float mx[2] = {m[0], m[1]};
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float v = j0 + nt * 8 + 2 * t + (e & 1) < n ? p[nt][e] * scale_log2 : -INFINITY;
                p[nt][e] = v;
                mx[e >> 1] = fmaxf(mx[e >> 1], v);
            }
        float alpha[2], rs[2] = {0, 0};
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
            alpha[r] = exp2f(m[r] - mx[r]); // key j0 < n exists: mx is finite
            m[r] = mx[r];
        }
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float v = exp2f(p[nt][e] - m[e >> 1]);
                p[nt][e] = v;
                rs[e >> 1] += v;
            }
#pragma unroll
        for (int r = 0; r < 2; r++) l[r] = l[r] * alpha[r] + rs[r];
#pragma unroll
        for (int d = 0; d < D / 8; d++) o[d][0] *= alpha[0], o[d][1] *= alpha[0], o[d][2] *= alpha[1], o[d][3] *= alpha[1];
        if (dr.on) drop_fwd(p, dr, step, ridx0, Lstride, j0, aligned);
        mma_px<D>(o, p, sV[buf]);
    }
    const int64_t ldo = (int64_t)NH * D;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
        l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
        const int i = q0 + warp * 16 + g + 8 * r;
        if (i >= n) continue;
        const float inv = 1.0f / l[r];
        bf16 *out = ctx + (row0 + i) * ldo + h * D + 2 * t;
#pragma unroll
        for (int d = 0; d < D / 8; d++) *(uint32_t *)(out + d * 8) = pack(o[d][2 * r] * inv, o[d][2 * r + 1] * inv);
        if (t == 0) lse[((int64_t)s * NH + h) * Lstride + i] = (m[r] + log2f(l[r])) * (1.0f / kLog2e);
    }
}

// ---- backward ----

// D_i = dO_i . O_i and the mask bits of row i (bit b of word w: key 64 w + b kept), 8 threads a
// row, 32 rows a block. Only rows i < len and words 64 w < len are written.
__global__ void __launch_bounds__(256)
prep_kernel(int NH, int D, int Lstride, const int32_t *start, const int32_t *len, const bf16 *ctx, const bf16 *dctx,
            tk_drop_dev dr, bool aligned, float *delta, uint64_t *mask) {
    const int s = blockIdx.z, h = blockIdx.y, i = blockIdx.x * 32 + threadIdx.x / 8, k = threadIdx.x % 8;
    const int n = min(len[s], Lstride);
    if (i >= n) return; // whole groups of 8 lanes leave together
    const int64_t ldo = (int64_t)NH * D, row = start[s] + i, ridx = ((int64_t)s * NH + h) * Lstride + i;
    float a = 0;
    for (int d = k * 8; d < D; d += 64) {
        float x[8], y[8];
        tk_ld8(ctx + row * ldo + h * D + d, x);
        tk_ld8(dctx + row * ldo + h * D + d, y);
#pragma unroll
        for (int q = 0; q < 8; q++) a += x[q] * y[q];
    }
    const unsigned grp = 0xffu << (threadIdx.x & 24);
    a += __shfl_xor_sync(grp, a, 1);
    a += __shfl_xor_sync(grp, a, 2);
    a += __shfl_xor_sync(grp, a, 4);
    if (k == 0) delta[ridx] = a;
    if (!dr.on) return;
    const int64_t step = *dr.step;
    const int words = (Lstride + 63) / 64;
    const uint32_t stream = (uint32_t)TK_RNG_DROPOUT | dr.site << 8;
    for (int w = k; w * 64 < n; w += 8) {
        uint64_t bits = 0;
        const int64_t g0 = ridx * Lstride + (int64_t)w * 64; // element of key 64 w (the call's index)
        if (aligned) {
            for (int b8 = 0; b8 < 8; b8++) {
                tk_philox_ctr v = tk_philox_draw(dr.seed, stream, (uint64_t)step << 37 | (uint64_t)(dr.offset + g0 + 8 * b8) >> 3);
                for (int q = 0; q < 8; q++)
                    bits |= (uint64_t)(((v.v[q >> 1] >> (16 * (q & 1))) & 0xffffu) >= dr.th) << (8 * b8 + q);
            }
        } else {
            for (int b = 0; b < 64; b++) bits |= (uint64_t)(tk_drop1(dr, step, g0 + b) != 0.0f) << b;
        }
        mask[ridx * words + w] = bits;
    }
}

// dK, dV of a block's 64 keys (each warp 16), looping over the query tiles.
template <int D>
__global__ void __launch_bounds__(kThreads, 3) // <= 168 registers: 3 blocks an SM (was 245, 2)
dkdv_kernel(int NH, int Lstride, const int32_t *start, const int32_t *len, const bf16 *qkv, const bf16 *dctx,
            const float *lse, const float *delta, const uint64_t *mask, bool dropping, float drop_scale,
            float scale, bf16 *dqkv) {
    const int s = blockIdx.z, h = blockIdx.y, k0 = blockIdx.x * kTile;
    const int n = min(len[s], Lstride);
    if (k0 >= n) return;
    constexpr int LD = D + 8;
    // Q and dO double-buffered; K and V share the second buffers until their fragments are loaded
    __shared__ __align__(16) bf16 sQ[2][kTile * LD], sO[2][kTile * LD];
    __shared__ __align__(16) float sL[2][kTile], sD[2][kTile];
    __shared__ uint64_t sM[2][kTile]; // the mask word of this block's keys, per query
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int64_t ldq = (int64_t)3 * NH * D, ldo = (int64_t)NH * D, row0 = start[s];
    const int64_t lrow = ((int64_t)s * NH + h) * Lstride;
    const bf16 *Q = qkv + row0 * ldq + h * D, *K = Q + NH * D, *V = Q + 2 * NH * D, *dO = dctx + row0 * ldo + h * D;
    const int words = (Lstride + 63) / 64;
    const int nq_tiles = (n + kTile - 1) / kTile;
    load_tile<D>(sQ[1], K + k0 * ldq, ldq, n - k0);
    load_tile<D>(sO[1], V + k0 * ldq, ldq, n - k0);
    load_tile<D>(sQ[0], Q, ldq, n);
    load_tile<D>(sO[0], dO, ldo, n);
    load_vec(sL[0], lse + lrow, n);
    load_vec(sD[0], delta + lrow, n);
    if (dropping) load_mask(sM[0], mask + lrow * words + k0 / 64, words, n);
    cp_commit();
    uint32_t kf[D / 16][4], vf[D / 16][4];
    float dk[D / 8][4], dv[D / 8][4];
#pragma unroll
    for (int d = 0; d < D / 8; d++)
#pragma unroll
        for (int e = 0; e < 4; e++) dk[d][e] = dv[d][e] = 0;
    const int kw = k0 + warp * 16; // this warp's first key
    const int kbit = warp * 16 + g; // its keys' bits in a mask word: kbit, kbit + 8
    for (int qt = 0; qt < nq_tiles; qt++) {
        const int buf = qt & 1, i0 = qt * kTile;
        cp_wait_all();
        __syncthreads();
        if (qt == 0) {
            load_a<D>(kf, sQ[1], warp * 16);
            load_a<D>(vf, sO[1], warp * 16);
            __syncthreads();
        }
        if (qt + 1 < nq_tiles) {
            const int i1 = i0 + kTile;
            load_tile<D>(sQ[buf ^ 1], Q + i1 * ldq, ldq, n - i1);
            load_tile<D>(sO[buf ^ 1], dO + i1 * ldo, ldo, n - i1);
            load_vec(sL[buf ^ 1], lse + lrow + i1, n - i1);
            load_vec(sD[buf ^ 1], delta + lrow + i1, n - i1);
            if (dropping) load_mask(sM[buf ^ 1], mask + (lrow + i1) * words + k0 / 64, words, n - i1);
        }
        cp_commit();
        // P^T (keys x queries)
        float p[8][4], dp[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) p[nt][e] = dp[nt][e] = 0;
        mma_abt<D>(p, kf, sQ[buf]);
        mma_abt<D>(dp, vf, sO[buf]); // dPd^T = V dO^T
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int c = 0; c < 2; c++) {
                const int ci = nt * 8 + 2 * t + c, i = i0 + ci; // query (column)
                const float L2 = sL[buf][ci] * kLog2e, Dl = sD[buf][ci];
                const uint64_t mw = dropping ? sM[buf][ci] : 0;
#pragma unroll
                for (int r = 0; r < 2; r++) {
                    const int e = 2 * r + c, j = kw + g + 8 * r;
                    const bool ok = i < n && j < n;
                    const float pv = ok ? exp2f(p[nt][e] * scale * kLog2e - L2) : 0.0f;
                    const float f = !dropping ? 1.0f : (mw >> (kbit + 8 * r)) & 1 ? drop_scale : 0.0f;
                    p[nt][e] = pv * f;                          // Pd^T
                    dp[nt][e] = pv * (dp[nt][e] * f - Dl);      // dS^T
                }
            }
        mma_px<D>(dv, p, sO[buf]);
        mma_px<D>(dk, dp, sQ[buf]);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int j = kw + g + 8 * r;
        if (j >= n) continue;
        bf16 *outk = dqkv + (row0 + j) * ldq + NH * D + h * D + 2 * t, *outv = outk + NH * D;
#pragma unroll
        for (int d = 0; d < D / 8; d++) {
            *(uint32_t *)(outk + d * 8) = pack(dk[d][2 * r] * scale, dk[d][2 * r + 1] * scale);
            *(uint32_t *)(outv + d * 8) = pack(dv[d][2 * r], dv[d][2 * r + 1]);
        }
    }
}

// dQ of a block's 64 queries (each warp 16), looping over the key tiles.
template <int D>
__global__ void __launch_bounds__(kThreads, 3) // <= 168 registers: 3 blocks an SM
dq_kernel(int NH, int Lstride, const int32_t *start, const int32_t *len, const bf16 *qkv, const bf16 *dctx,
          const float *lse, const float *delta, const uint64_t *mask, bool dropping, float drop_scale, float scale,
          bf16 *dqkv) {
    const int s = blockIdx.z, h = blockIdx.y, q0 = blockIdx.x * kTile;
    const int n = min(len[s], Lstride);
    if (q0 >= n) return;
    constexpr int LD = D + 8;
    __shared__ __align__(16) bf16 sK[2][kTile * LD], sV[2][kTile * LD];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, t = lane & 3;
    const int64_t ldq = (int64_t)3 * NH * D, ldo = (int64_t)NH * D, row0 = start[s];
    const int64_t lrow = ((int64_t)s * NH + h) * Lstride;
    const bf16 *Q = qkv + row0 * ldq + h * D, *K = Q + NH * D, *V = Q + 2 * NH * D, *dO = dctx + row0 * ldo + h * D;
    const int words = (Lstride + 63) / 64;
    const int nk_tiles = (n + kTile - 1) / kTile;
    load_tile<D>(sK[1], Q + q0 * ldq, ldq, n - q0);
    load_tile<D>(sV[1], dO + q0 * ldo, ldo, n - q0);
    load_tile<D>(sK[0], K, ldq, n);
    load_tile<D>(sV[0], V, ldq, n);
    cp_commit();
    uint32_t qf[D / 16][4], of[D / 16][4];
    float dq[D / 8][4];
#pragma unroll
    for (int d = 0; d < D / 8; d++) dq[d][0] = dq[d][1] = dq[d][2] = dq[d][3] = 0;
    float L2[2], Dl[2];
    const uint64_t *mrow[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int i = q0 + warp * 16 + g + 8 * r;
        L2[r] = i < n ? lse[lrow + i] * kLog2e : 0.0f;
        Dl[r] = i < n ? delta[lrow + i] : 0.0f;
        mrow[r] = mask + (lrow + (i < n ? i : 0)) * words;
    }
    for (int kt = 0; kt < nk_tiles; kt++) {
        const int buf = kt & 1, j0 = kt * kTile;
        cp_wait_all();
        __syncthreads();
        if (kt == 0) {
            load_a<D>(qf, sK[1], warp * 16);
            load_a<D>(of, sV[1], warp * 16);
            __syncthreads();
        }
        if (kt + 1 < nk_tiles) {
            const int j1 = j0 + kTile;
            load_tile<D>(sK[buf ^ 1], K + j1 * ldq, ldq, n - j1);
            load_tile<D>(sV[buf ^ 1], V + j1 * ldq, ldq, n - j1);
        }
        cp_commit();
        float p[8][4], dp[8][4];
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) p[nt][e] = dp[nt][e] = 0;
        mma_abt<D>(p, qf, sK[buf]);
        mma_abt<D>(dp, of, sV[buf]); // dPd = dO V^T
        uint64_t mw[2] = {0, 0};
        if (dropping) mw[0] = mrow[0][kt], mw[1] = mrow[1][kt];
#pragma unroll
        for (int nt = 0; nt < 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1, jj = nt * 8 + 2 * t + (e & 1), j = j0 + jj;
                const bool ok = q0 + warp * 16 + g + 8 * r < n && j < n;
                const float pv = ok ? exp2f(p[nt][e] * scale * kLog2e - L2[r]) : 0.0f;
                const float f = !dropping ? 1.0f : (mw[r] >> jj) & 1 ? drop_scale : 0.0f;
                dp[nt][e] = pv * (dp[nt][e] * f - Dl[r]); // dS
            }
        mma_px<D>(dq, dp, sK[buf]);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int i = q0 + warp * 16 + g + 8 * r;
        if (i >= n) continue;
        bf16 *out = dqkv + (row0 + i) * ldq + h * D + 2 * t;
#pragma unroll
        for (int d = 0; d < D / 8; d++) *(uint32_t *)(out + d * 8) = pack(dq[d][2 * r] * scale, dq[d][2 * r + 1] * scale);
    }
}

int check(tk_dtype act, const char *op, int nseq, int NH, int D, int Lstride, const void *a, const void *b,
          const void *c2, const void *d2, const tk_dropout *drop, tk_err *e) {
    if (act != TK_BF16)
        return tk_err_set(e, TK_EINTERNAL, "%s (cuda): activations in %s, want BF16", op, tk_dtype_name(act));
    if (D != 64) return tk_err_set(e, TK_EINTERNAL, "%s (cuda): head dimension %d, only 64 is built", op, D);
    if (nseq < 0 || nseq > 65535 || NH < 1 || NH > 65535 || Lstride < 1)
        return tk_err_set(e, TK_EINTERNAL, "%s: bad shape nseq %d NH %d Lstride %d", op, nseq, NH, Lstride);
    if (!tk_aligned16(a) || !tk_aligned16(b) || (c2 && !tk_aligned16(c2)) || (d2 && !tk_aligned16(d2)))
        return tk_err_set(e, TK_EINTERNAL, "%s (cuda): buffers not 16-byte aligned", op);
    if (drop && drop->p > 0 && !drop->step) return tk_err_set(e, TK_EINTERNAL, "%s: dropout without a step counter", op);
    return 0;
}

// Every Philox group of 8 keys starts at a multiple of 8 of the global index.
bool aligned8(const tk_dropout *d, int Lstride) { return !d || d->p <= 0 || (Lstride % 8 == 0 && d->offset % 8 == 0); }

} // namespace

int tk_flash_attn_fwd_cuda(tk_ctx *c, tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start,
                           const int32_t *len, const void *qkv, const tk_dropout *drop, void *ctx, float *lse,
                           tk_err *e) {
    TRY(check(act, "flash_attn_fwd", nseq, NH, D, Lstride, qkv, ctx, NULL, NULL, drop, e));
    if (nseq == 0) return 0;
    dim3 grid((Lstride + kTile - 1) / kTile, NH, nseq);
    const float scale_log2 = kLog2e / sqrtf((float)D);
    fwd_kernel<64><<<grid, kThreads, 0, tk_cu_stream(c)>>>(NH, Lstride, start, len, (const bf16 *)qkv,
                                                            tk_drop_dev_of(drop), aligned8(drop, Lstride), scale_log2,
                                                            (bf16 *)ctx, lse);
    return tk_cu_check(e, "flash_attn_fwd");
}

int tk_flash_attn_bwd_cuda(tk_ctx *c, tk_dtype act, int nseq, int NH, int D, int Lstride, const int32_t *start,
                           const int32_t *len, const void *qkv, const void *ctx, const float *lse, const void *dctx,
                           const tk_dropout *drop, void *ws, void *dqkv, tk_err *e) {
    TRY(check(act, "flash_attn_bwd", nseq, NH, D, Lstride, qkv, ctx, dctx, dqkv, drop, e));
    if (nseq == 0) return 0;
    if (!tk_aligned16(ws)) return tk_err_set(e, TK_EINTERNAL, "flash_attn_bwd (cuda): workspace not 16-byte aligned");
    cudaStream_t st = tk_cu_stream(c);
    const tk_drop_dev dr = tk_drop_dev_of(drop);
    float *delta = (float *)ws;
    uint64_t *mask = (uint64_t *)((char *)ws + tk_flash_attn_delta_bytes_(nseq, NH, Lstride));
    prep_kernel<<<dim3((Lstride + 31) / 32, NH, nseq), 256, 0, st>>>(NH, D, Lstride, start, len, (const bf16 *)ctx,
                                                                     (const bf16 *)dctx, dr, aligned8(drop, Lstride),
                                                                     delta, mask);
    TRY(tk_cu_check(e, "flash_attn_bwd prep"));
    dim3 grid((Lstride + kTile - 1) / kTile, NH, nseq);
    const float scale = 1.0f / sqrtf((float)D), ds = dr.on ? dr.scale : 1.0f;
    dkdv_kernel<64><<<grid, kThreads, 0, st>>>(NH, Lstride, start, len, (const bf16 *)qkv, (const bf16 *)dctx, lse,
                                               delta, mask, dr.on != 0, ds, scale, (bf16 *)dqkv);
    TRY(tk_cu_check(e, "flash_attn_bwd dkdv"));
    dq_kernel<64><<<grid, kThreads, 0, st>>>(NH, Lstride, start, len, (const bf16 *)qkv, (const bf16 *)dctx, lse,
                                             delta, mask, dr.on != 0, ds, scale, (bf16 *)dqkv);
    return tk_cu_check(e, "flash_attn_bwd dq");
}
