// CUDA side of kernels/layernorm.h. H a multiple of 256 up to 1024 (BERT's 1024), 16-byte
// aligned: one warp a row (ln_fwd_reg's WARP form, ln_bwd_warp: dgamma/dbeta in the same pass).
// Otherwise, forward and the backward's row part: one block of 128 threads a row, each thread 8
// consecutive features at a time (one Philox call draws their dropout); the row in registers with
// 16-byte accesses when H is a multiple of 8 up to 4096 (ln_*_reg), else in shared memory
// (fp32); dgamma and dbeta by a pass of their own (ln_bwd_params). Either way those are column
// sums in fp64 over fixed chunks of rows (partials in the workspace), then the chunks added in a
// fixed order: deterministic.
#include "act_types.cuh"
#include "dropout.cuh"
#include "layernorm.h"

namespace {

constexpr int kThreads = 128;
constexpr int kChunkRows = 16; // rows a partial of dgamma/dbeta sums

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float block_sum(float v, float *red) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int w = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads(); // red is reused: every thread is past its previous read
    if (lane == 0) red[w] = v;
    __syncthreads();
    float t = 0;
    for (int i = 0; i < kThreads / 32; i++) t += red[i];
    return t;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
ln_fwd(int H, const T *x, const T *res, tk_drop_dev pre, tk_drop_dev post, const float *gamma, const float *beta, float eps,
       T *y, T *s, float *mean, float *rstd) {
    extern __shared__ float row[];
    __shared__ float red[kThreads / 32];
    const int64_t r = blockIdx.x;
    const size_t o = (size_t)r * H;
    const int64_t spre = tk_drop_step(pre), spost = tk_drop_step(post);
    float sum = 0;
    for (int h0 = threadIdx.x * 8; h0 < H; h0 += kThreads * 8) {
        float f[8];
        tk_drop8(pre, spre, (int64_t)o + h0, f);
        for (int j = 0; j < 8 && h0 + j < H; j++) {
            float v = tk_ld(x, o + h0 + j) * f[j];
            if (res) v += tk_ld(res, o + h0 + j);
            row[h0 + j] = v;
            sum += v;
        }
    }
    float mu = block_sum(sum, red) / H, sq = 0;
    for (int h = threadIdx.x; h < H; h += kThreads) {
        float d = row[h] - mu;
        sq += d * d;
    }
    float rs = 1.0f / sqrtf(block_sum(sq, red) / H + eps);
    if (threadIdx.x == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
    for (int h0 = threadIdx.x * 8; h0 < H; h0 += kThreads * 8) {
        float f[8];
        tk_drop8(post, spost, (int64_t)o + h0, f);
        for (int j = 0; j < 8 && h0 + j < H; j++) {
            int h = h0 + j;
            float v = (row[h] - mu) * rs * gamma[h] + beta[h];
            tk_st(y, o + h, v * f[j]);
            if (s) tk_st(s, o + h, row[h]);
        }
    }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
ln_bwd_rows(int H, const T *dy, const T *s, const float *mean, const float *rstd, const float *gamma, tk_drop_dev pre,
            tk_drop_dev post, T *ds, T *dx) {
    extern __shared__ float row[]; // g gamma, then xhat
    __shared__ float red[kThreads / 32];
    float *gg = row, *xh = row + H;
    const int64_t r = blockIdx.x;
    const size_t o = (size_t)r * H;
    const int64_t spre = tk_drop_step(pre), spost = tk_drop_step(post);
    const float m = mean[r], rs = rstd[r];
    float a = 0, b = 0;
    for (int h0 = threadIdx.x * 8; h0 < H; h0 += kThreads * 8) {
        float f[8];
        tk_drop8(post, spost, (int64_t)o + h0, f);
        for (int j = 0; j < 8 && h0 + j < H; j++) {
            int h = h0 + j;
            float g = tk_ld(dy, o + h) * f[j] * gamma[h];
            float x = (tk_ld(s, o + h) - m) * rs;
            gg[h] = g, xh[h] = x;
            a += g;
            b += g * x;
        }
    }
    float ma = block_sum(a, red) / H, mb = block_sum(b, red) / H;
    for (int h0 = threadIdx.x * 8; h0 < H; h0 += kThreads * 8) {
        float f[8];
        tk_drop8(pre, spre, (int64_t)o + h0, f);
        for (int j = 0; j < 8 && h0 + j < H; j++) {
            int h = h0 + j;
            float d = rs * (gg[h] - ma - xh[h] * mb);
            tk_st(ds, o + h, d);
            if (dx) tk_st(dx, o + h, d * f[j]);
        }
    }
}

// The same two kernels with the row in registers: H % 8 == 0, H <= 1024 G, 16-byte aligned rows;
// thread t holds features 8 (128 g + t) .. + 7 of group g < G, loaded and stored 16 bytes at a
// time. One block reduction for each of the two sums. (The same arithmetic as above except the
// order of the fp32 sums.) The forward with WARP: one warp a row instead (below: ln_bwd_warp).
template <typename T, int G, bool WARP>
__global__ void __launch_bounds__(kThreads)
ln_fwd_reg(int64_t R, int H, const T *x, const T *res, tk_drop_dev pre, tk_drop_dev post, const float *gamma,
           const float *beta, float eps, T *y, T *s, float *mean, float *rstd) {
    __shared__ float red[kThreads / 32];
    constexpr int S = WARP ? 32 : kThreads; // threads a row
    const int t = threadIdx.x % S;
    const int64_t r = WARP ? (int64_t)blockIdx.x * (kThreads / 32) + threadIdx.x / 32 : (int64_t)blockIdx.x;
    if (WARP && r >= R) return; // (no block barrier in the warp form)
    const size_t o = (size_t)r * H;
    const int64_t spre = tk_drop_step(pre), spost = tk_drop_step(post);
    float v[G][8], sum = 0;
#pragma unroll
    for (int g = 0; g < G; g++) {
        int h0 = (g * S + t) * 8;
        if (h0 >= H) continue;
        float f[8], a[8];
        tk_drop8(pre, spre, (int64_t)o + h0, f);
        tk_ld8(x + o + h0, v[g]);
        if (res) tk_ld8(res + o + h0, a);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            v[g][j] = v[g][j] * f[j] + (res ? a[j] : 0.0f);
            sum += v[g][j];
        }
    }
    const float mu = (WARP ? warp_sum(sum) : block_sum(sum, red)) / H;
    float sq = 0;
#pragma unroll
    for (int g = 0; g < G; g++)
        if ((g * S + t) * 8 < H)
#pragma unroll
            for (int j = 0; j < 8; j++) sq += (v[g][j] - mu) * (v[g][j] - mu);
    const float rs = 1.0f / sqrtf((WARP ? warp_sum(sq) : block_sum(sq, red)) / H + eps);
    if (t == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
        int h0 = (g * S + t) * 8;
        if (h0 >= H) continue;
        float f[8], gm[8], bt[8], out[8];
        tk_drop8(post, spost, (int64_t)o + h0, f);
        tk_ld8(gamma + h0, gm);
        tk_ld8(beta + h0, bt);
#pragma unroll
        for (int j = 0; j < 8; j++) out[j] = ((v[g][j] - mu) * rs * gm[j] + bt[j]) * f[j];
        tk_st8(y + o + h0, out);
        if (s) tk_st8(s + o + h0, v[g]);
    }
}

// The backward's loads of a thread's 8 features at element i (feature h0): gg = dy f gamma (f the
// post-dropout) and xh = xhat, their sums into a and b; with P also pg += (dy f) xhat and
// pb += dy f (dgamma's and dbeta's terms).
template <typename T, bool P>
__device__ __forceinline__ void load_bwd8(const T *dy, const T *s, const float *gamma, const tk_drop_dev &post,
                                          int64_t spost, size_t i, int h0, float m, float rs, float gg[8], float xh[8],
                                          float &a, float &b, float *pg, float *pb) {
    float f[8], gm[8];
    tk_drop8(post, spost, (int64_t)i, f);
    tk_ld8(dy + i, gg);
    tk_ld8(s + i, xh);
    tk_ld8(gamma + h0, gm);
#pragma unroll
    for (int j = 0; j < 8; j++) {
        const float gr = gg[j] * f[j];
        xh[j] = (xh[j] - m) * rs;
        if (P) pg[j] += gr * xh[j], pb[j] += gr;
        gg[j] = gr * gm[j];
        a += gg[j];
        b += gg[j] * xh[j];
    }
}

// The backward's ds of a thread's 8 features at element i, and dx (ds with the pre-dropout).
template <typename T>
__device__ __forceinline__ void store_ds_dx(const float gg[8], const float xh[8], float rs, float ma, float mb,
                                            const tk_drop_dev &pre, int64_t spre, size_t i, T *ds, T *dx) {
    float f[8], d[8];
#pragma unroll
    for (int j = 0; j < 8; j++) d[j] = rs * (gg[j] - ma - xh[j] * mb);
    tk_st8(ds + i, d);
    if (!dx) return;
    tk_drop8(pre, spre, (int64_t)i, f);
#pragma unroll
    for (int j = 0; j < 8; j++) d[j] *= f[j];
    tk_st8(dx + i, d);
}

template <typename T, int G>
__global__ void __launch_bounds__(kThreads)
ln_bwd_rows_reg(int H, const T *dy, const T *s, const float *mean, const float *rstd, const float *gamma,
                tk_drop_dev pre, tk_drop_dev post, T *ds, T *dx) {
    __shared__ float red[kThreads / 32];
    const int64_t r = blockIdx.x;
    const size_t o = (size_t)r * H;
    const int64_t spre = tk_drop_step(pre), spost = tk_drop_step(post);
    const float m = mean[r], rs = rstd[r];
    float gg[G][8], xh[G][8], a = 0, b = 0;
#pragma unroll
    for (int g = 0; g < G; g++) {
        int h0 = (g * kThreads + threadIdx.x) * 8;
        if (h0 < H) load_bwd8<T, false>(dy, s, gamma, post, spost, o + h0, h0, m, rs, gg[g], xh[g], a, b, nullptr, nullptr);
    }
    // (every thread has read its dy before any writes ds, which may be dy: block_sum synchronizes)
    const float ma = block_sum(a, red) / H, mb = block_sum(b, red) / H;
#pragma unroll
    for (int g = 0; g < G; g++) {
        int h0 = (g * kThreads + threadIdx.x) * 8;
        if (h0 < H) store_ds_dx(gg[g], xh[g], rs, ma, mb, pre, spre, o + h0, ds, dx);
    }
}

// ---- one warp a row (H a multiple of 256 up to 1024: BERT's 1024) ----
// Lane l holds features 8 (32 g + l) .. + 7 of group g < G = H / 256, loaded and stored 16 bytes
// at a time; the row's sums by warp shuffles (no block barrier), 4 rows a block of 128 threads.
// The forward is ln_fwd_reg's WARP form. The backward also sums dgamma and dbeta of its chunk of kChunkRows rows (each warp its rows in
// fp32, the 4 warps added in order in fp64 into the chunk's partial), so dy and s are read once.
// (The same arithmetic as the kernels above except the order of the sums.)

// Block c: rows c kChunkRows .. + kChunkRows - 1, warp w every 4th from w; part as ln_bwd_params.
template <typename T, int G>
__global__ void __launch_bounds__(kThreads)
ln_bwd_warp(int64_t R, int H, const T *dy, const T *s, const float *mean, const float *rstd, const float *gamma,
            tk_drop_dev pre, tk_drop_dev post, T *ds, T *dx, double *part) {
    constexpr int W = kThreads / 32;
    __shared__ float red[W][2][G * 256];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t r0 = (int64_t)blockIdx.x * kChunkRows, r1 = r0 + kChunkRows < R ? r0 + kChunkRows : R;
    const int64_t spre = tk_drop_step(pre), spost = tk_drop_step(post);
    float pg[G][8], pb[G][8];
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int j = 0; j < 8; j++) pg[g][j] = pb[g][j] = 0;
    for (int64_t r = r0 + warp; r < r1; r += W) {
        const size_t o = (size_t)r * H;
        const float m = mean[r], rs = rstd[r];
        float gg[G][8], xh[G][8], a = 0, b = 0;
#pragma unroll
        for (int g = 0; g < G; g++) {
            const int h0 = (g * 32 + lane) * 8;
            load_bwd8<T, true>(dy, s, gamma, post, spost, o + h0, h0, m, rs, gg[g], xh[g], a, b, pg[g], pb[g]);
        }
        // (a lane writes ds only where it read dy, which ds may be)
        const float ma = warp_sum(a) / H, mb = warp_sum(b) / H;
#pragma unroll
        for (int g = 0; g < G; g++) store_ds_dx(gg[g], xh[g], rs, ma, mb, pre, spre, o + (g * 32 + lane) * 8, ds, dx);
    }
#pragma unroll
    for (int g = 0; g < G; g++)
#pragma unroll
        for (int j = 0; j < 8; j++) {
            const int h = (g * 32 + lane) * 8 + j;
            red[warp][0][h] = pg[g][j], red[warp][1][h] = pb[g][j];
        }
    __syncthreads();
    for (int h = threadIdx.x; h < H; h += kThreads)
#pragma unroll
        for (int k = 0; k < 2; k++) {
            double t = 0;
#pragma unroll
            for (int w = 0; w < W; w++) t += (double)red[w][k][h];
            part[((size_t)blockIdx.x * 2 + k) * H + h] = t;
        }
}

// Groups of 256 features for the warp kernels (1 .. 4), or 0.
int warp_groups(int H, const void *a, const void *b, const void *c, const void *d, const void *g2, const void *b2) {
    const void *p[6] = {a, b, c, d, g2, b2};
    if (H % 256 != 0 || H > 4 * 256) return 0;
    for (int i = 0; i < 6; i++)
        if (p[i] && !tk_aligned16(p[i])) return 0;
    return H / 256;
}

// Groups of 8 features a thread for the register kernels (1 .. 4), or 0: the shared-memory ones.
int reg_groups(int H, const void *a, const void *b, const void *c, const void *d, const void *g2, const void *b2) {
    const void *p[6] = {a, b, c, d, g2, b2};
    if (H % 8 != 0 || H > 4 * kThreads * 8) return 0;
    for (int i = 0; i < 6; i++)
        if (p[i] && !tk_aligned16(p[i])) return 0;
    return (H + kThreads * 8 - 1) / (kThreads * 8);
}

// part[chunk][0 or 1][h]: the chunk's sums of g xhat and g for feature h. A block is 64 column
// lanes x 4 row lanes; a thread sums V consecutive features (V = 8: 16-byte loads and one Philox
// call for the dropout, when H % 8 == 0 and dy, s are 16-byte aligned) over its rows of the
// chunk (every 4th), then the 4 row lanes are added in order. (Was one feature a thread, 64 rows
// in a row with 2-byte loads.)
template <typename T, int V>
__global__ void __launch_bounds__(256)
ln_bwd_params(int64_t R, int H, const T *dy, const T *s, const float *mean, const float *rstd, tk_drop_dev post,
              double *part) {
    __shared__ double red[2][4][64 * V];
    const int h0 = (blockIdx.x * 64 + threadIdx.x) * V;
    const int64_t r0 = (int64_t)blockIdx.y * kChunkRows, r1 = r0 + kChunkRows < R ? r0 + kChunkRows : R;
    const int64_t step = tk_drop_step(post);
    double sg[V], sb[V];
#pragma unroll
    for (int j = 0; j < V; j++) sg[j] = 0, sb[j] = 0;
    if (h0 < H)
        for (int64_t r = r0 + threadIdx.y; r < r1; r += 4) {
            const size_t o = (size_t)r * H + h0;
            float g[V], x[V], f[V];
            if constexpr (V == 8) {
                tk_ld8(dy + o, g);
                tk_ld8(s + o, x);
                tk_drop8(post, step, (int64_t)o, f);
            } else {
                g[0] = tk_ld(dy, o), x[0] = tk_ld(s, o), f[0] = tk_drop1(post, step, (int64_t)o);
            }
            const float m = mean[r], rs = rstd[r];
#pragma unroll
            for (int j = 0; j < V; j++) {
                float gj = g[j] * f[j], xj = (x[j] - m) * rs;
                sg[j] += (double)gj * xj;
                sb[j] += gj;
            }
        }
#pragma unroll
    for (int j = 0; j < V; j++) red[0][threadIdx.y][threadIdx.x * V + j] = sg[j], red[1][threadIdx.y][threadIdx.x * V + j] = sb[j];
    __syncthreads();
    for (int k = threadIdx.y * 64 + threadIdx.x; k < 64 * V; k += 256) {
        int h = blockIdx.x * 64 * V + k;
        if (h >= H) continue;
        part[((size_t)blockIdx.y * 2) * H + h] = ((red[0][0][k] + red[0][1][k]) + red[0][2][k]) + red[0][3][k];
        part[((size_t)blockIdx.y * 2 + 1) * H + h] = ((red[1][0][k] + red[1][1][k]) + red[1][2][k]) + red[1][3][k];
    }
}

// The chunks' partials added: a block is 32 features x 8 chunk lanes (lane y adds chunks y, y + 8,
// ... in order), then the 8 lanes in order. (Was one thread a feature adding every chunk.)
__global__ void __launch_bounds__(256) ln_bwd_finish(int chunks, int H, const double *part, float *dgamma, float *dbeta) {
    __shared__ double red[2][8][33];
    const int h = blockIdx.x * 32 + threadIdx.x;
    double sg = 0, sb = 0;
    if (h < H)
        for (int c = threadIdx.y; c < chunks; c += 8) {
            sg += part[((size_t)c * 2) * H + h];
            sb += part[((size_t)c * 2 + 1) * H + h];
        }
    red[0][threadIdx.y][threadIdx.x] = sg, red[1][threadIdx.y][threadIdx.x] = sb;
    __syncthreads();
    if (threadIdx.y != 0 || h >= H) return;
    sg = 0, sb = 0;
    for (int y = 0; y < 8; y++) sg += red[0][y][threadIdx.x], sb += red[1][y][threadIdx.x];
    dgamma[h] = (float)sg;
    dbeta[h] = (float)sb;
}

int check(const char *op, int64_t R, int H, tk_err *e) {
    if (H < 1 || R < 0 || R > INT32_MAX) return tk_err_set(e, TK_EINTERNAL, "%s: R %lld H %d", op, (long long)R, H);
    return 0;
}

int smem_attr(const void *fn, size_t bytes, tk_err *e) {
    if (bytes <= 48 * 1024) return 0;
    return tk_cu_check(e, "layernorm (shared memory)",
                       cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

} // namespace

int tk_layernorm_fwd_cuda(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *x, const void *res,
                          const tk_dropout *drop, int where, const float *gamma, const float *beta, float eps, void *y,
                          void *s, float *mean, float *rstd, tk_err *e) {
    TRY(check("layernorm_fwd", R, H, e));
    if (R == 0) return 0;
    tk_drop_dev pre = tk_drop_dev_of(where == TK_LN_DROP_PRE ? drop : NULL);
    tk_drop_dev post = tk_drop_dev_of(where == TK_LN_DROP_POST ? drop : NULL);
    size_t sm = (size_t)H * 4;
    cudaStream_t st = tk_cu_stream(c);
    // one warp a row, else a block a row with the row in registers (4 rows, or 1, a block)
#define FWD(GG, WARP)                                                                                                  \
    TK_ACT_DISPATCH(act, "layernorm_fwd", e,                                                                           \
                    ln_fwd_reg<T, GG, WARP><<<(unsigned)(WARP ? (R + 3) / 4 : R), kThreads, 0, st>>>(                  \
                        R, H, (const T *)x, (const T *)res, pre, post, gamma, beta, eps, (T *)y, (T *)s, mean, rstd))
    const int gw = warp_groups(H, x, res, y, s, gamma, beta), gr = gw ? 0 : reg_groups(H, x, res, y, s, gamma, beta);
    switch (gw ? gw : gr) {
    case 1: if (gw) FWD(1, true); else FWD(1, false); return tk_cu_check(e, "layernorm_fwd");
    case 2: if (gw) FWD(2, true); else FWD(2, false); return tk_cu_check(e, "layernorm_fwd");
    case 3: if (gw) FWD(3, true); else FWD(3, false); return tk_cu_check(e, "layernorm_fwd");
    case 4: if (gw) FWD(4, true); else FWD(4, false); return tk_cu_check(e, "layernorm_fwd");
    default: break;
    }
#undef FWD
    TK_ACT_DISPATCH(act, "layernorm_fwd", e, {
        TRY(smem_attr((const void *)ln_fwd<T>, sm, e));
        ln_fwd<T><<<(unsigned)R, kThreads, sm, tk_cu_stream(c)>>>(H, (const T *)x, (const T *)res, pre, post, gamma, beta,
                                                                   eps, (T *)y, (T *)s, mean, rstd);
    });
    return tk_cu_check(e, "layernorm_fwd");
}

static int chunks_of(int64_t R) { return (int)((R + kChunkRows - 1) / kChunkRows); }

size_t tk_layernorm_bwd_ws_bytes_cuda(int64_t R, int H) { return (size_t)(chunks_of(R) > 0 ? chunks_of(R) : 1) * 2 * H * 8; }

int tk_layernorm_bwd_cuda(tk_ctx *c, tk_dtype act, int64_t R, int H, const void *dy, const void *s, const float *mean,
                          const float *rstd, const float *gamma, const tk_dropout *drop, int where, void *ds, void *dx,
                          float *dgamma, float *dbeta, void *ws, tk_err *e) {
    TRY(check("layernorm_bwd", R, H, e));
    tk_drop_dev pre = tk_drop_dev_of(where == TK_LN_DROP_PRE ? drop : NULL);
    tk_drop_dev post = tk_drop_dev_of(where == TK_LN_DROP_POST ? drop : NULL);
    int chunks = chunks_of(R);
    cudaStream_t st = tk_cu_stream(c);
    size_t sm = (size_t)H * 8;
    const int GW = R > 0 ? warp_groups(H, dy, s, ds, dx, gamma, NULL) : 0;
    if (GW > 0) {
        TK_ACT_DISPATCH(act, "layernorm_bwd", e, {
            const T *dyt = (const T *)dy, *st_ = (const T *)s;
            double *part = (double *)ws;
            if (GW == 1) ln_bwd_warp<T, 1><<<chunks, kThreads, 0, st>>>(R, H, dyt, st_, mean, rstd, gamma, pre, post, (T *)ds, (T *)dx, part);
            else if (GW == 2) ln_bwd_warp<T, 2><<<chunks, kThreads, 0, st>>>(R, H, dyt, st_, mean, rstd, gamma, pre, post, (T *)ds, (T *)dx, part);
            else if (GW == 3) ln_bwd_warp<T, 3><<<chunks, kThreads, 0, st>>>(R, H, dyt, st_, mean, rstd, gamma, pre, post, (T *)ds, (T *)dx, part);
            else ln_bwd_warp<T, 4><<<chunks, kThreads, 0, st>>>(R, H, dyt, st_, mean, rstd, gamma, pre, post, (T *)ds, (T *)dx, part);
        });
        ln_bwd_finish<<<(H + 31) / 32, dim3(32, 8), 0, st>>>(chunks, H, (const double *)ws, dgamma, dbeta);
        return tk_cu_check(e, "layernorm_bwd");
    }
    TK_ACT_DISPATCH(act, "layernorm_bwd", e, {
        // the parameter gradients first: ds may overwrite dy
        if (chunks > 0 && H % 8 == 0 && tk_aligned16(dy) && tk_aligned16(s))
            ln_bwd_params<T, 8><<<dim3((H + 511) / 512, chunks), dim3(64, 4), 0, st>>>(
                R, H, (const T *)dy, (const T *)s, mean, rstd, post, (double *)ws);
        else if (chunks > 0)
            ln_bwd_params<T, 1><<<dim3((H + 63) / 64, chunks), dim3(64, 4), 0, st>>>(
                R, H, (const T *)dy, (const T *)s, mean, rstd, post, (double *)ws);
        ln_bwd_finish<<<(H + 31) / 32, dim3(32, 8), 0, st>>>(chunks, H, (const double *)ws, dgamma, dbeta);
        int G = R > 0 ? reg_groups(H, dy, s, ds, dx, gamma, NULL) : 0;
        if (G == 1) ln_bwd_rows_reg<T, 1><<<(unsigned)R, kThreads, 0, st>>>(H, (const T *)dy, (const T *)s, mean, rstd,
                                                                          gamma, pre, post, (T *)ds, (T *)dx);
        else if (G == 2) ln_bwd_rows_reg<T, 2><<<(unsigned)R, kThreads, 0, st>>>(H, (const T *)dy, (const T *)s, mean,
                                                                               rstd, gamma, pre, post, (T *)ds, (T *)dx);
        else if (G == 3) ln_bwd_rows_reg<T, 3><<<(unsigned)R, kThreads, 0, st>>>(H, (const T *)dy, (const T *)s, mean,
                                                                               rstd, gamma, pre, post, (T *)ds, (T *)dx);
        else if (G == 4) ln_bwd_rows_reg<T, 4><<<(unsigned)R, kThreads, 0, st>>>(H, (const T *)dy, (const T *)s, mean,
                                                                               rstd, gamma, pre, post, (T *)ds, (T *)dx);
        else if (R > 0) {
            TRY(smem_attr((const void *)ln_bwd_rows<T>, sm, e));
            ln_bwd_rows<T><<<(unsigned)R, kThreads, sm, st>>>(H, (const T *)dy, (const T *)s, mean, rstd, gamma, pre,
                                                               post, (T *)ds, (T *)dx);
        }
    });
    return tk_cu_check(e, "layernorm_bwd");
}
