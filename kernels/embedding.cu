// CUDA side of kernels/embedding.h.
//
// Forward: one launch for all tables; each thread copies 4 consecutive elements of one looked-up
// row (16-byte stores; 8- or 16-byte loads for bf16 / fp32 tables) when D % 4 == 0, else one.
// An index out of range gives a zero row (the loader validates every batch; the reference
// reports TK_EDATA).
//
// The lookup output and the backward's gradient may be f32 or bf16 (the bf16 compute path);
// gradient values are widened to f32 exactly, so the sums below do not depend on that type.
//
// Backward fused with SGD, deterministic, sort-based: every (sample, table) pair becomes a key,
// its global row (row_off[t] + idx), with its position b*T + t as the value; a stable radix sort
// (CUB) groups duplicate rows and keeps them in sample order; then each distinct row's gradients
// are summed in fp64 and w -= lr * sum is applied once, rounding to the table type once, with
// the reference's arithmetic. No atomics in the sums, no dense gradient, the same bits on every
// run. A row seen at most kLong times in the batch is summed by a few lanes in sample order (the
// reference's result bit for bit); a more frequent one by a block of 32 warps, each summing a
// contiguous part in order, the parts then added in order (deterministic; may differ from the
// reference in the last bit).
#include <cub/device/device_radix_sort.cuh>

#include "core/vec.cuh"
#include "cuda_util.cuh"
#include "embedding.h"

// Keys hold global rows < 2^40 (10^12 rows; the MLPerf tables have 1.9e8); sorting only those
// bits saves three of eight radix passes. Invalid indices get the largest key and sort last.
constexpr int kKeyBits = 40;
constexpr uint64_t kInvalid = ((uint64_t)1 << kKeyBits) - 1;

// Row of (b, t) or -1.
__device__ __forceinline__ int64_t global_row(const int64_t *row_off, const int32_t *idx, int64_t bt, int T) {
    int t = (int)(bt % T);
    int64_t r = idx[bt], lo = row_off[t], rows = row_off[t + 1] - lo;
    return r >= 0 && r < rows ? lo + r : -1;
}

template <typename W, typename O>
__global__ static void emb_fwd_vec4(const W *w, const int64_t *row_off, const int32_t *idx, int64_t n4, int T, int D,
                                    O *out) {
    int q = D / 4;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t bt = i / q;
        int d = (int)(i % q) * 4;
        int64_t row = global_row(row_off, idx, bt, T);
        float4 v = row >= 0 ? tk_ld4(w, (size_t)row * D + d) : make_float4(0, 0, 0, 0);
        tk_st4(out, (size_t)bt * D + d, v);
    }
}

template <typename W, typename O>
__global__ static void emb_fwd_scalar(const W *w, const int64_t *row_off, const int32_t *idx, int64_t n, int T, int D,
                                      O *out) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t bt = i / D;
        int d = (int)(i % D);
        int64_t row = global_row(row_off, idx, bt, T);
        tk_st(out, (size_t)i, row >= 0 ? tk_ld(w, (size_t)row * D + d) : 0.0f);
    }
}

static int check_type(tk_dtype t, const char *op, tk_err *e) {
    if (t == TK_F32 || t == TK_BF16) return 0;
    return tk_err_set(e, TK_EINTERNAL, "%s: table dtype %s not supported (F32 or BF16)", op, tk_dtype_name(t));
}

template <typename W, typename O>
static void fwd_launch(const W *w, const int64_t *row_off, const int32_t *idx, int64_t n, int T, int D, O *out,
                       cudaStream_t s) {
    // 4 elements a thread: 16- or 8-byte rows loads (f32 / bf16 table), 16- or 8-byte stores.
    size_t walign = sizeof(W) * 4, oalign = sizeof(O) * 4;
    if (D % 4 == 0 && (uintptr_t)w % walign == 0 && (uintptr_t)out % oalign == 0)
        emb_fwd_vec4<<<tk_cu_blocks(n / 4, 256), 256, 0, s>>>(w, row_off, idx, n / 4, T, D, out);
    else
        emb_fwd_scalar<<<tk_cu_blocks(n, 256), 256, 0, s>>>(w, row_off, idx, n, T, D, out);
}

int tk_embedding_fwd_act_cuda(tk_ctx *c, const void *w, tk_dtype wtype, const int64_t *row_off,
                              const int32_t *idx, int B, int T, int D, void *out, tk_dtype otype,
                              tk_err *e) {
    TRY(check_type(wtype, "embedding_fwd", e));
    TRY(check_type(otype, "embedding_fwd (output)", e));
    int64_t n = (int64_t)B * T * D;
    if (n <= 0) return 0;
    cudaStream_t s = tk_cu_stream(c);
    const __nv_bfloat16 *wb = (const __nv_bfloat16 *)w;
    const float *wf = (const float *)w;
    if (otype == TK_BF16) {
        __nv_bfloat16 *o = (__nv_bfloat16 *)out;
        if (wtype == TK_BF16) fwd_launch(wb, row_off, idx, n, T, D, o, s);
        else fwd_launch(wf, row_off, idx, n, T, D, o, s);
    } else {
        float *o = (float *)out;
        if (wtype == TK_BF16) fwd_launch(wb, row_off, idx, n, T, D, o, s);
        else fwd_launch(wf, row_off, idx, n, T, D, o, s);
    }
    return tk_cu_check(e, "embedding_fwd");
}

// ---- backward + SGD ----

// Rows that repeat more than kLong times in a batch (small tables, Zipf heads: a 3-row table is
// hit ~22,000 times in a batch of 65536) are summed by a whole block, the others by 8 lanes
// (a warp when D % 4 != 0).
constexpr int kLong = 64, kAcc = 4, kLongThreads = 1024;

struct BwdWs {
    uint64_t *keys_in, *keys_out;
    int32_t *pos_in, *pos_out;
    int64_t *longs; // heads of runs longer than kLong (at most n / kLong of them), and their count
    int *nlong;
    void *temp;
    size_t temp_bytes, total;
};

static BwdWs bwd_layout(void *base, int64_t n) {
    BwdWs l = {};
    size_t temp = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, temp, (uint64_t *)nullptr, (uint64_t *)nullptr, (int32_t *)nullptr,
                                    (int32_t *)nullptr, (int)n, 0, kKeyBits);
    char *p = (char *)base;
    size_t off = 0;
    l.keys_in = (uint64_t *)(p + off), off += tk_cu_align(8 * (size_t)n);
    l.keys_out = (uint64_t *)(p + off), off += tk_cu_align(8 * (size_t)n);
    l.pos_in = (int32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.pos_out = (int32_t *)(p + off), off += tk_cu_align(4 * (size_t)n);
    l.longs = (int64_t *)(p + off), off += tk_cu_align(8 * (size_t)(n / kLong + 1));
    l.nlong = (int *)(p + off), off += 256;
    l.temp = p + off, l.temp_bytes = temp, off += tk_cu_align(temp);
    l.total = off;
    return l;
}

size_t tk_embedding_bwd_ws_bytes_cuda(int B, int T) {
    int64_t n = (int64_t)B * T;
    return bwd_layout(nullptr, n > 0 ? n : 1).total;
}

__global__ static void bwd_keys(const int64_t *row_off, const int32_t *idx, int64_t n, int T, uint64_t *keys,
                                int32_t *pos) {
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
        int64_t row = global_row(row_off, idx, i, T);
        keys[i] = row >= 0 ? (uint64_t)row : kInvalid;
        pos[i] = (int32_t)i;
    }
}

__device__ __forceinline__ void store_row(float *w, size_t i, double v) { w[i] = (float)v; }
__device__ __forceinline__ void store_row(__nv_bfloat16 *w, size_t i, double v) {
    w[i] = __float2bfloat16_rn((float)v); // double -> float -> bf16, as the reference rounds
}

// Keys are sorted, so the run starting at i is long iff the key kLong places on is the same.
__device__ __forceinline__ bool run_is_long(const uint64_t *keys, int64_t n, int64_t i) {
    return i + kLong < n && keys[i + kLong] == keys[i];
}
// End of a short run (a linear look) and of a long one (a binary search past i + kLong).
__device__ __forceinline__ int64_t short_run_end(const uint64_t *keys, int64_t n, int64_t i) {
    int64_t j = i + 1;
    while (j < n && keys[j] == keys[i]) j++;
    return j;
}
__device__ __forceinline__ int64_t long_run_end(const uint64_t *keys, int64_t n, int64_t i) {
    uint64_t key = keys[i];
    int64_t lo = i + kLong, hi = n;
    while (lo < hi) {
        int64_t mid = (lo + hi) / 2;
        if (keys[mid] == key) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

// w - lr * sum in fp64: rounded product, then rounded difference (no FMA), the reference's
// arithmetic; the caller rounds to the table type.
__device__ __forceinline__ double sgd1(float w, double rate, double sum) {
    return __dsub_rn((double)w, __dmul_rn(rate, sum));
}
template <typename W>
__device__ __forceinline__ void apply_row(W *w, size_t base, int d, double rate, double sum) {
    store_row(w, base + d, sgd1(tk_ld(w, base + d), rate, sum));
}

// A lane's kAcc columns (d0 + a*32 + lane) of the gradient rows pos[lo..hi), summed in fp64 in
// row order (the order the reference sums duplicates in).
template <typename G>
static __device__ __forceinline__ void sum_grad_rows(double acc[kAcc], const G *dout, const int32_t *pos,
                                                     int64_t lo, int64_t hi, int D, int d0, int lane) {
#pragma unroll
    for (int a = 0; a < kAcc; a++) acc[a] = 0;
    for (int64_t j = lo; j < hi; j++) {
        const G *g = dout + (size_t)pos[j] * D;
#pragma unroll
        for (int a = 0; a < kAcc; a++) {
            int d = d0 + a * 32 + lane;
            if (d < D) acc[a] += tk_ld(g, d);
        }
    }
}

// Short runs: one warp per sorted position; the first of each run owns the row and sums its
// gradients in sample order in fp64 (the reference's order exactly). Lane l holds dimensions
// l, l+32, ... of a chunk of 32*kAcc dimensions.
template <typename W, typename G>
__global__ static void bwd_apply_short(W *w, const uint64_t *keys, const int32_t *pos, int64_t n, int D,
                                       const G *dout, const float *lr, int64_t *longs, int *nlong) {
    int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (i >= n) return;
    uint64_t key = keys[i];
    if (key == kInvalid || (i > 0 && keys[i - 1] == key)) return;
    if (run_is_long(keys, n, i)) { // listed for bwd_apply_long (list order does not matter)
        if (lane == 0) longs[atomicAdd(nlong, 1)] = i;
        return;
    }
    int64_t end = short_run_end(keys, n, i);
    double rate = (double)*lr;
    for (int d0 = 0; d0 < D; d0 += 32 * kAcc) {
        double acc[kAcc];
        sum_grad_rows(acc, dout, pos, i, end, D, d0, lane);
#pragma unroll
        for (int a = 0; a < kAcc; a++) {
            int d = d0 + a * 32 + lane;
            if (d < D) apply_row(w, (size_t)key * D, d, rate, acc[a]);
        }
    }
}

// apply_row on 4 consecutive elements (base + d 4-aligned) with one 8- or 16-byte load and store.
__device__ __forceinline__ void apply_row4(float *w, size_t i, double rate, const double *sum) {
    float4 x = *(float4 *)(w + i);
    *(float4 *)(w + i) = make_float4((float)sgd1(x.x, rate, sum[0]), (float)sgd1(x.y, rate, sum[1]),
                                     (float)sgd1(x.z, rate, sum[2]), (float)sgd1(x.w, rate, sum[3]));
}
__device__ __forceinline__ void apply_row4(__nv_bfloat16 *w, size_t i, double rate, const double *sum) {
    float4 x = tk_ld4(w, i);
    __nv_bfloat16 r[4] = {__float2bfloat16_rn((float)sgd1(x.x, rate, sum[0])),
                          __float2bfloat16_rn((float)sgd1(x.y, rate, sum[1])),
                          __float2bfloat16_rn((float)sgd1(x.z, rate, sum[2])),
                          __float2bfloat16_rn((float)sgd1(x.w, rate, sum[3]))};
    *(uint2 *)(w + i) = *(const uint2 *)r;
}

// The same with 8 lanes per sorted position (4 rows in flight per warp), 16-byte gradient loads
// and vector row updates, when D % 4 == 0: each lane sums 4 consecutive dimensions of every 32.
// Same sums, same order, same result.
template <typename W, typename G>
__global__ static void bwd_apply_short4(W *w, const uint64_t *keys, const int32_t *pos, int64_t n, int D,
                                        const G *dout, const float *lr, int64_t *longs, int *nlong) {
    int64_t i = ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / 8;
    int sub = threadIdx.x % 8;
    if (i >= n) return;
    uint64_t key = keys[i];
    if (key == kInvalid || (i > 0 && keys[i - 1] == key)) return;
    if (run_is_long(keys, n, i)) {
        if (sub == 0) longs[atomicAdd(nlong, 1)] = i;
        return;
    }
    int64_t end = short_run_end(keys, n, i);
    double rate = (double)*lr;
    for (int d0 = 0; d0 < D; d0 += 32 * kAcc) {
        double acc[kAcc][4] = {};
        for (int64_t j = i; j < end; j++) {
            const G *g = dout + (size_t)pos[j] * D;
#pragma unroll
            for (int a = 0; a < kAcc; a++) {
                int d = d0 + (a * 8 + sub) * 4;
                if (d < D) {
                    float4 x = tk_ld4(g, d);
                    acc[a][0] += x.x, acc[a][1] += x.y, acc[a][2] += x.z, acc[a][3] += x.w;
                }
            }
        }
#pragma unroll
        for (int a = 0; a < kAcc; a++) {
            int d = d0 + (a * 8 + sub) * 4;
            if (d < D) apply_row4(w, (size_t)key * D + d, rate, acc[a]);
        }
    }
}

// Long runs: a fixed grid of blocks takes the listed heads in turn. A block's 32 warps each sum a
// contiguous 1/32 of the run in order in fp64, then the 32 partial sums are added in warp order:
// deterministic (whichever block takes a run), though not the reference's order (results may
// differ from it in the last bit).
constexpr int kLongBlocks = 264; // two per H100 SM
template <typename W, typename G>
__global__ static void __launch_bounds__(kLongThreads)
bwd_apply_long(W *w, const uint64_t *keys, const int32_t *pos, int64_t n, int D, const G *dout, const float *lr,
               const int64_t *longs, const int *nlong) {
    __shared__ int64_t end;
    __shared__ double part[kLongThreads / 32][32 * kAcc];
    int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = kLongThreads / 32;
    double rate = (double)*lr;
    for (int q = blockIdx.x; q < *nlong; q += gridDim.x) {
        int64_t head = longs[q];
        if (threadIdx.x == 0) end = long_run_end(keys, n, head);
        __syncthreads();
        int64_t len = end - head, lo = head + len * warp / nw, hi = head + len * (warp + 1) / nw;
        size_t base = (size_t)keys[head] * D;
        for (int d0 = 0; d0 < D; d0 += 32 * kAcc) {
            double acc[kAcc];
            sum_grad_rows(acc, dout, pos, lo, hi, D, d0, lane);
#pragma unroll
            for (int a = 0; a < kAcc; a++) part[warp][a * 32 + lane] = acc[a];
            __syncthreads();
            for (int k = threadIdx.x; k < 32 * kAcc && d0 + k < D; k += blockDim.x) {
                double sum = 0;
                for (int r = 0; r < nw; r++) sum += part[r][k];
                apply_row(w, base, d0 + k, rate, sum);
            }
            __syncthreads();
        }
    }
}

// The apply kernels for a table type W and a gradient type G (16-byte gradient loads for f32,
// 8-byte for bf16 in the vector path).
template <typename W, typename G>
static void apply_launch(W *w, const BwdWs &l, int64_t n, int D, const G *dout, const float *lr, cudaStream_t s) {
    unsigned blocks = (unsigned)((n * 32 + 255) / 256), blocks4 = (unsigned)((n * 8 + 255) / 256);
    if (D % 4 == 0 && (uintptr_t)dout % (4 * sizeof(G)) == 0 && (uintptr_t)w % 16 == 0)
        bwd_apply_short4<<<blocks4, 256, 0, s>>>(w, l.keys_out, l.pos_out, n, D, dout, lr, l.longs, l.nlong);
    else
        bwd_apply_short<<<blocks, 256, 0, s>>>(w, l.keys_out, l.pos_out, n, D, dout, lr, l.longs, l.nlong);
    bwd_apply_long<<<kLongBlocks, kLongThreads, 0, s>>>(w, l.keys_out, l.pos_out, n, D, dout, lr, l.longs, l.nlong);
}

int tk_embedding_bwd_sgd_act_cuda(tk_ctx *c, void *w, tk_dtype wtype, const int64_t *row_off,
                                  const int32_t *idx, int B, int T, int D, const void *dout,
                                  tk_dtype gtype, const float *lr, void *ws, tk_err *e) {
    TRY(check_type(wtype, "embedding_bwd_sgd", e));
    TRY(check_type(gtype, "embedding_bwd_sgd (gradient)", e));
    int64_t n = (int64_t)B * T;
    if (n <= 0 || D <= 0) return 0;
    if (n > INT32_MAX) return tk_err_set(e, TK_EINTERNAL, "embedding_bwd_sgd: %lld lookups in one batch", (long long)n);
    cudaStream_t s = tk_cu_stream(c);
    BwdWs l = bwd_layout(ws, n);
    bwd_keys<<<tk_cu_blocks(n, 256), 256, 0, s>>>(row_off, idx, n, T, l.keys_in, l.pos_in);
    TRY(tk_cu_check(e, "embedding_bwd_sgd (keys)"));
    TRY(tk_cu_check(e, "embedding_bwd_sgd (sort)",
                    cub::DeviceRadixSort::SortPairs(l.temp, l.temp_bytes, l.keys_in, l.keys_out, l.pos_in, l.pos_out,
                                                    (int)n, 0, kKeyBits, s)));
    TRY(tk_cu_check(e, "embedding_bwd_sgd", cudaMemsetAsync(l.nlong, 0, sizeof(int), s)));
    const __nv_bfloat16 *gb = (const __nv_bfloat16 *)dout;
    const float *gf = (const float *)dout;
    if (wtype == TK_BF16) {
        __nv_bfloat16 *wb = (__nv_bfloat16 *)w;
        if (gtype == TK_BF16) apply_launch(wb, l, n, D, gb, lr, s);
        else apply_launch(wb, l, n, D, gf, lr, s);
    } else {
        float *wf = (float *)w;
        if (gtype == TK_BF16) apply_launch(wf, l, n, D, gb, lr, s);
        else apply_launch(wf, l, n, D, gf, lr, s);
    }
    return tk_cu_check(e, "embedding_bwd_sgd (apply)");
}

// One element a thread, the per-row kernels' arithmetic (sgd1, store_row) with a sum of one term.
template <typename W>
__global__ void dense_sgd(W *w, int64_t n, const float *g, const float *lr) {
    const double rate = (double)*lr;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        store_row(w, (size_t)i, sgd1(tk_ld(w, (size_t)i), rate, (double)g[i]));
}

int tk_embedding_dense_sgd_cuda(tk_ctx *c, void *w, tk_dtype wtype, int64_t n, const float *g, const float *lr,
                                tk_err *e) {
    TRY(check_type(wtype, "embedding_dense_sgd", e));
    if (n <= 0) return 0;
    cudaStream_t s = tk_cu_stream(c);
    if (wtype == TK_BF16) dense_sgd<<<tk_cu_blocks(n, 256), 256, 0, s>>>((__nv_bfloat16 *)w, n, g, lr);
    else dense_sgd<<<tk_cu_blocks(n, 256), 256, 0, s>>>((float *)w, n, g, lr);
    return tk_cu_check(e, "embedding_dense_sgd");
}
