// CUDA side of kernels/layernorm.h. Forward and the backward's row part: one block of 128 threads
// a row, each thread 8 consecutive features at a time (one Philox call draws their dropout); the
// row in registers with 16-byte accesses when H is a multiple of 8 up to 4096 (ln_*_reg), else in
// shared memory (fp32). The backward's dgamma and dbeta: column sums in fp64 over
// fixed chunks of rows (partials in the workspace), then the chunks added in a fixed order:
// deterministic.
#include "act_types.cuh"
#include "dropout.cuh"
#include "layernorm.h"

namespace {

constexpr int kThreads = 128;
constexpr int kChunkRows = 32; // rows a partial of dgamma/dbeta sums

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
// order of the fp32 sums.)
template <typename T, int G>
__global__ void __launch_bounds__(kThreads)
ln_fwd_reg(int H, const T *x, const T *res, tk_drop_dev pre, tk_drop_dev post, const float *gamma, const float *beta,
           float eps, T *y, T *s, float *mean, float *rstd) {
    __shared__ float red[kThreads / 32];
    const int64_t r = blockIdx.x;
    const size_t o = (size_t)r * H;
    const int64_t spre = tk_drop_step(pre), spost = tk_drop_step(post);
    float v[G][8], sum = 0;
#pragma unroll
    for (int g = 0; g < G; g++) {
        int h0 = (g * kThreads + threadIdx.x) * 8;
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
    const float mu = block_sum(sum, red) / H;
    float sq = 0;
#pragma unroll
    for (int g = 0; g < G; g++)
        if ((g * kThreads + threadIdx.x) * 8 < H)
#pragma unroll
            for (int j = 0; j < 8; j++) sq += (v[g][j] - mu) * (v[g][j] - mu);
    const float rs = 1.0f / sqrtf(block_sum(sq, red) / H + eps);
    if (threadIdx.x == 0) {
        if (mean) mean[r] = mu;
        if (rstd) rstd[r] = rs;
    }
#pragma unroll
    for (int g = 0; g < G; g++) {
        int h0 = (g * kThreads + threadIdx.x) * 8;
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
        if (h0 >= H) continue;
        float f[8], gm[8];
        tk_drop8(post, spost, (int64_t)o + h0, f);
        tk_ld8(dy + o + h0, gg[g]);
        tk_ld8(s + o + h0, xh[g]);
        tk_ld8(gamma + h0, gm);
#pragma unroll
        for (int j = 0; j < 8; j++) {
            gg[g][j] *= f[j] * gm[j];
            xh[g][j] = (xh[g][j] - m) * rs;
            a += gg[g][j];
            b += gg[g][j] * xh[g][j];
        }
    }
    // (every thread has read its dy before any writes ds, which may be dy: block_sum synchronizes)
    const float ma = block_sum(a, red) / H, mb = block_sum(b, red) / H;
#pragma unroll
    for (int g = 0; g < G; g++) {
        int h0 = (g * kThreads + threadIdx.x) * 8;
        if (h0 >= H) continue;
        float f[8], d[8];
#pragma unroll
        for (int j = 0; j < 8; j++) d[j] = rs * (gg[g][j] - ma - xh[g][j] * mb);
        tk_st8(ds + o + h0, d);
        if (dx) {
            tk_drop8(pre, spre, (int64_t)o + h0, f);
#pragma unroll
            for (int j = 0; j < 8; j++) d[j] *= f[j];
            tk_st8(dx + o + h0, d);
        }
    }
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
#define FWD_REG(GG)                                                                                                    \
    TK_ACT_DISPATCH(act, "layernorm_fwd", e,                                                                           \
                    ln_fwd_reg<T, GG><<<(unsigned)R, kThreads, 0, st>>>(H, (const T *)x, (const T *)res, pre, post,    \
                                                                       gamma, beta, eps, (T *)y, (T *)s, mean, rstd))
    switch (reg_groups(H, x, res, y, s, gamma, beta)) {
    case 1: FWD_REG(1); return tk_cu_check(e, "layernorm_fwd");
    case 2: FWD_REG(2); return tk_cu_check(e, "layernorm_fwd");
    case 3: FWD_REG(3); return tk_cu_check(e, "layernorm_fwd");
    case 4: FWD_REG(4); return tk_cu_check(e, "layernorm_fwd");
    default: break;
    }
#undef FWD_REG
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
