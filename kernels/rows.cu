// CUDA side of kernels/rows.h. rows_copy gives each row a group of TPR threads: TPR is the power
// of two (<= 32) that covers the row's chunks, so a group never straddles a warp, and a 256-thread
// block holds 256 / TPR groups that walk the rows with a grid stride (n reaches millions, past
// any sensible grid). A chunk is 16 bytes where D and the pointers' alignment allow it (D = 128
// bf16 is 256 bytes: 16 lanes of one 16-byte load each), one element otherwise. rows_segsum: a
// warp per tile of TK_ROWS_PIECE items and 32 V columns (V a lane: 8 bytes where alignment allows)
// for the pieces of segments that cross tiles, then one per segment (below).
#include <stdint.h>

#include "cuda_util.cuh"
#include "rows.h"

// fp32 -> bf16 exactly as tk_f32_to_bf16 (round to nearest even, NaN quieted by setting bit 6):
// __float2bfloat16_rn returns its own canonical NaN, and the two sides must agree bit for bit.
__device__ __forceinline__ uint32_t rows_bf16(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (u >> 16) | 0x40u;
    return (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
}

// bf16 bits -> float, exactly: the bf16 in the low half of w, or in its high half.
__device__ __forceinline__ float rows_bf16_lo(uint32_t w) { return __uint_as_float(w << 16); }
__device__ __forceinline__ float rows_bf16_hi(uint32_t w) { return __uint_as_float(w & 0xffff0000u); }

// Move<S, T, V>::run moves V elements from s to d. bf16 travels as uint16_t bits; a same-type copy
// moves the bits (uint4 = 16 bytes of either type).
template <typename S, typename T, int V> struct Move;
template <typename T> struct Move<T, T, 1> {
    static __device__ __forceinline__ void run(const T *__restrict__ s, T *__restrict__ d) { *d = *s; }
};
template <> struct Move<float, uint16_t, 1> {
    static __device__ __forceinline__ void run(const float *__restrict__ s, uint16_t *__restrict__ d) {
        *d = (uint16_t)rows_bf16(*s);
    }
};
template <> struct Move<uint16_t, float, 1> {
    static __device__ __forceinline__ void run(const uint16_t *__restrict__ s, float *__restrict__ d) {
        *d = rows_bf16_lo(*s);
    }
};
template <> struct Move<float, uint16_t, 8> { // 32 bytes in, 16 out
    static __device__ __forceinline__ void run(const float *__restrict__ s, uint16_t *__restrict__ d) {
        float4 a = ((const float4 *)s)[0], b = ((const float4 *)s)[1];
        uint4 o;
        o.x = rows_bf16(a.x) | rows_bf16(a.y) << 16, o.y = rows_bf16(a.z) | rows_bf16(a.w) << 16;
        o.z = rows_bf16(b.x) | rows_bf16(b.y) << 16, o.w = rows_bf16(b.z) | rows_bf16(b.w) << 16;
        *(uint4 *)d = o;
    }
};
template <> struct Move<uint16_t, float, 8> { // 16 bytes in, 32 out; element 0 is the low half
    static __device__ __forceinline__ void run(const uint16_t *__restrict__ s, float *__restrict__ d) {
        uint4 a = *(const uint4 *)s;
        float4 lo = {rows_bf16_lo(a.x), rows_bf16_hi(a.x), rows_bf16_lo(a.y), rows_bf16_hi(a.y)};
        float4 hi = {rows_bf16_lo(a.z), rows_bf16_hi(a.z), rows_bf16_lo(a.w), rows_bf16_hi(a.w)};
        ((float4 *)d)[0] = lo, ((float4 *)d)[1] = hi;
    }
};

// Rows of ld elements (of S and of T alike), w = ld / V chunks each; thread (x, y) of a block
// moves chunks x, x + TPR, ... of rows y + blockIdx.x * rows_per_block + grid stride.
template <typename S, typename T, int V>
__global__ static void rows_copy_kernel(const S *__restrict__ src, const int32_t *__restrict__ spos,
                                        T *__restrict__ dst, const int32_t *__restrict__ dpos, int64_t n,
                                        const int64_t *__restrict__ dn, int ld, int w) {
    n = tk_rows_cap(n, dn);
    for (int64_t k = (int64_t)blockIdx.x * blockDim.y + threadIdx.y; k < n; k += (int64_t)gridDim.x * blockDim.y) {
        const int64_t sk = spos ? (int64_t)spos[k] : k;
        T *d = dst + (dpos ? (int64_t)dpos[k] : k) * ld;
        if (sk < 0) { // padding: zeros
            for (int c = threadIdx.x; c < w; c += blockDim.x)
#pragma unroll
                for (int v = 0; v < V; v++) d[(int64_t)c * V + v] = T{};
            continue;
        }
        const S *s = src + sk * ld;
        for (int c = threadIdx.x; c < w; c += blockDim.x) Move<S, T, V>::run(s + (int64_t)c * V, d + (int64_t)c * V);
    }
}

// Threads per row (or segment) for w chunks: a power of two, at most a warp.
static int rows_tpr(int64_t w) {
    int t = 1;
    while (t < w && t < 32) t *= 2;
    return t;
}

template <typename S, typename T, int V>
static void launch_copy(const void *src, const int32_t *spos, void *dst, const int32_t *dpos, int64_t n,
                        const int64_t *dn, int ld, cudaStream_t s) {
    int tpr = rows_tpr(ld / V), rpb = 256 / tpr;
    rows_copy_kernel<S, T, V><<<tk_cu_blocks(n, rpb), dim3(tpr, rpb), 0, s>>>((const S *)src, spos, (T *)dst, dpos,
                                                                              n, dn, ld, ld / V);
}

int tk_rows_copy_cuda(tk_ctx *c, const void *src, tk_dtype st, const int32_t *spos, void *dst, tk_dtype dt,
                      const int32_t *dpos, int64_t n, const int64_t *dn, int D, tk_err *e) {
    TRY(tk_rows_copy_check(st, dt, n, D, e));
    if (n == 0) return 0;
    cudaStream_t s = tk_cu_stream(c);
    int al16 = (uintptr_t)src % 16 == 0 && (uintptr_t)dst % 16 == 0;
    if (st == dt) {
        int64_t bytes = (int64_t)D * (int64_t)tk_dtype_size(st);
        if (al16 && bytes % 16 == 0) launch_copy<uint4, uint4, 1>(src, spos, dst, dpos, n, dn, (int)(bytes / 16), s);
        else if (st == TK_F32) launch_copy<float, float, 1>(src, spos, dst, dpos, n, dn, D, s);
        else launch_copy<uint16_t, uint16_t, 1>(src, spos, dst, dpos, n, dn, D, s);
    } else if (st == TK_F32) {
        if (al16 && D % 8 == 0) launch_copy<float, uint16_t, 8>(src, spos, dst, dpos, n, dn, D, s);
        else launch_copy<float, uint16_t, 1>(src, spos, dst, dpos, n, dn, D, s);
    } else {
        if (al16 && D % 8 == 0) launch_copy<uint16_t, float, 8>(src, spos, dst, dpos, n, dn, D, s);
        else launch_copy<uint16_t, float, 1>(src, spos, dst, dpos, n, dn, D, s);
    }
    return tk_cu_check(e, "rows_copy");
}

// V consecutive columns of one source row as floats, from one load: V = 1 (any alignment), or 8
// bytes (bf16: 4 columns, f32: 2) where D % V == 0 and the source is 8-byte aligned.
template <typename S, int V> struct Cols;
template <typename S> struct Cols<S, 1> {
    S raw;
    __device__ __forceinline__ void load(const S *p) { raw = *p; }
    __device__ __forceinline__ float at(int) const;
};
template <> __device__ __forceinline__ float Cols<float, 1>::at(int) const { return raw; }
template <> __device__ __forceinline__ float Cols<uint16_t, 1>::at(int) const { return rows_bf16_lo(raw); }
template <> struct Cols<uint16_t, 4> {
    uint2 raw;
    __device__ __forceinline__ void load(const uint16_t *p) { raw = *(const uint2 *)p; }
    __device__ __forceinline__ float at(int e) const { // element 0 is the low half of raw.x
        uint32_t w = e < 2 ? raw.x : raw.y;
        return e % 2 ? rows_bf16_hi(w) : rows_bf16_lo(w);
    }
};
template <> struct Cols<float, 2> {
    float2 raw;
    __device__ __forceinline__ void load(const float *p) { raw = *(const float2 *)p; }
    __device__ __forceinline__ float at(int e) const { return e ? raw.y : raw.x; }
};

// The chains of adds of V columns a lane over items [k, end) (warp-uniform k and end), in item
// order, from 0.0f, into acc. Its time is the loads' latency over the loads in flight: a warp takes
// items in batches of U whose U loads go out together before their adds, a batch's positions were
// fetched during the previous one (no load waits on its position), one per lane, and reach the
// lanes by shuffles. Lanes past D load the last V columns (col is clamped by the caller) and
// their sums are not stored; positions past the end repeat its last item, which is loaded again
// and not added. U = 32 measured best on an H100 (D 128, f32, V = 1): U = 64 took a 20,000-item
// chain from 0.54 to 0.43 ms, but its registers (110 against 62) took 2^18 segments of 4 items
// from 0.38 to 0.64 ms. (The first version, 4 columns a thread and positions loaded in the batch:
// 1.9 ms, bf16 3.4 ms.) V > 1: a warp reads 32 V columns of a row with one instruction (a whole
// bf16 row of 128), where V = 1 spread a row over D / 32 warps at different times.
#define ROWS_U 32

template <typename S, int V, int U>
__device__ __forceinline__ void rows_chain(const S *__restrict__ col, const int32_t *__restrict__ pos, int32_t k,
                                           int32_t end, int D, int lane, float (&acc)[V]) {
#pragma unroll
    for (int e = 0; e < V; e++) acc[e] = 0.0f;
    if (end - k >= U) {
        int32_t p[U / 32];
#pragma unroll
        for (int i = 0; i < U / 32; i++) p[i] = pos[k + 32 * i + lane];
        for (; end - k >= U; k += U) {
            Cols<S, V> v[U];
#pragma unroll
            for (int u = 0; u < U; u++) v[u].load(col + (int64_t)__shfl_sync(~0u, p[u / 32], u % 32) * D);
#pragma unroll
            for (int i = 0; i < U / 32; i++) p[i] = pos[min(k + U + 32 * i + lane, end - 1)];
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int e = 0; e < V; e++) acc[e] += v[u].at(e);
        }
    }
    // the last < U items: windows of 32 positions, 8 loads at a time
    for (; k < end; k += 32) {
        int32_t p = pos[min(k + lane, end - 1)], m = min(32, end - k);
        for (int i = 0; i < m; i += 8) {
            Cols<S, V> v[8];
#pragma unroll
            for (int u = 0; u < 8; u++) v[u].load(col + (int64_t)__shfl_sync(~0u, p, (i + u) & 31) * D);
#pragma unroll
            for (int u = 0; u < 8; u++)
                if (i + u < m)
#pragma unroll
                    for (int e = 0; e < V; e++) acc[e] += v[u].at(e);
        }
    }
}

// Stores a lane's V sums at columns c.. of out (a row of D): those below D.
template <int V>
__device__ __forceinline__ void rows_put(float *out, int c, int D, const float (&acc)[V]) {
#pragma unroll
    for (int e = 0; e < V; e++)
        if (c + e < D) out[c + e] = acc[e];
}

// The last segment g in [0, nseg) with seg_off[g] <= k (0 if none): it holds item k when any does.
__device__ __forceinline__ int rows_seg_of(const int32_t *__restrict__ seg_off, int nseg, int32_t k) {
    int lo = 0, hi = nseg - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (seg_off[mid] <= k) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Pass 1: the pieces of the segments that cross a tile boundary (tile t is items [t C, (t + 1) C),
// C = TK_ROWS_PIECE), a warp per (tile, slice of 32 V columns; lane l has columns 32 V slice +
// V l ..): the piece of the segment holding the tile's first item, if it started before, to
// head[t]; the piece of the segment holding its last item, if it started in the tile and goes on
// past it, to tail[t]. So a hot row's segment is summed by as many warps as it spans tiles.
template <typename S, int V, int U>
__global__ static void rows_segsum_cross(const S *__restrict__ src, const int32_t *__restrict__ pos,
                                         const int32_t *__restrict__ seg_off, int nseg,
                                         const int64_t *__restrict__ dnseg, int64_t ntiles, int D,
                                         float *__restrict__ head, float *__restrict__ tail) {
    nseg = (int)tk_rows_cap(nseg, dnseg);
    if (nseg <= 0) return;
    const int32_t n = seg_off[nseg];
    const int64_t tiles = min(ntiles, ((int64_t)n + TK_ROWS_PIECE - 1) / TK_ROWS_PIECE);
    int lane = threadIdx.x & 31, wpb = blockDim.x / 32;
    int64_t nwork = tiles * ((D + 32 * V - 1) / (32 * V));
    for (int64_t j = (int64_t)blockIdx.x * wpb + threadIdx.x / 32; j < nwork; j += (int64_t)gridDim.x * wpb) {
        int64_t slice = j / tiles, t = j - slice * tiles;
        int c = (int)slice * 32 * V + lane * V;
        const S *col = src + min(c, D - V);
        const int32_t t0 = (int32_t)(t * TK_ROWS_PIECE), t1 = min(t0 + TK_ROWS_PIECE, n);
        float acc[V];
        int g = rows_seg_of(seg_off, nseg, t0);
        int32_t a = seg_off[g], b = seg_off[g + 1];
        if (a < t0 && b > t0) {
            rows_chain<S, V, U>(col, pos, t0, min(b, t1), D, lane, acc);
            rows_put<V>(head + t * D, c, D, acc);
        }
        g = rows_seg_of(seg_off, nseg, t1 - 1);
        a = seg_off[g], b = seg_off[g + 1];
        if (a >= t0 && a < t1 && b > t1) {
            rows_chain<S, V, U>(col, pos, a, t1, D, lane, acc);
            rows_put<V>(tail + t * D, c, D, acc);
        }
    }
}

// Pass 2: one warp per (segment, slice): an empty segment writes zeros; one inside a tile is one
// piece, summed here; one over several tiles adds its pieces in order, the tail of its first
// tile, then the heads of the next ones.
template <typename S, int V, int U>
__global__ static void rows_segsum_segs(const S *__restrict__ src, const int32_t *__restrict__ pos,
                                        const int32_t *__restrict__ seg_off, const int32_t *__restrict__ seg_row,
                                        int nseg, const int64_t *__restrict__ dnseg, int64_t ntiles, int D,
                                        float *__restrict__ dst, const float *__restrict__ head,
                                        const float *__restrict__ tail) {
    nseg = (int)tk_rows_cap(nseg, dnseg);
    int lane = threadIdx.x & 31, wpb = blockDim.x / 32;
    int64_t nwork = (int64_t)nseg * ((D + 32 * V - 1) / (32 * V));
    for (int64_t j = (int64_t)blockIdx.x * wpb + threadIdx.x / 32; j < nwork; j += (int64_t)gridDim.x * wpb) {
        int64_t slice = j / nseg, g = j - slice * nseg;
        int c = (int)slice * 32 * V + lane * V;
        const int32_t a = seg_off[g], b = seg_off[g + 1];
        float *out = dst + (int64_t)seg_row[g] * D;
        const int64_t ta = a / TK_ROWS_PIECE, tb = b > a ? (b - 1) / TK_ROWS_PIECE : ta;
        float acc[V];
        if (ta == tb) { // (warp-uniform: the chain's shuffles need the whole warp)
            rows_chain<S, V, U>(src + min(c, D - V), pos, a, b, D, lane, acc);
            rows_put<V>(out, c, D, acc);
            continue;
        }
        if (c >= D) continue;
        if (tb >= ntiles) { // more items than the caller said: a visible wrong answer, not a stray read
#pragma unroll
            for (int e = 0; e < V; e++) acc[e] = __int_as_float(0x7fc00000);
            rows_put<V>(out, c, D, acc);
            continue;
        }
#pragma unroll
        for (int e = 0; e < V; e++) acc[e] = tail[ta * D + c + e]; // (c < D, D % V == 0: all V columns)
        for (int64_t t = ta + 1; t <= tb; t += 8) { // 8 tiles' loads in flight, then their adds in order
            float h[8][V];
#pragma unroll
            for (int u = 0; u < 8; u++)
#pragma unroll
                for (int e = 0; e < V; e++) h[u][e] = t + u <= tb ? head[(t + u) * D + c + e] : 0.0f;
#pragma unroll
            for (int u = 0; u < 8; u++)
                if (t + u <= tb)
#pragma unroll
                    for (int e = 0; e < V; e++) acc[e] += h[u][e];
        }
        rows_put<V>(out, c, D, acc);
    }
}

size_t tk_rows_segsum_ws_bytes_cuda(int64_t nitems, int D) { return 2 * (size_t)tk_rows_pieces(nitems) * D * 4 + 16; }

template <typename S, int V>
static void launch_segsum(const void *src, const int32_t *pos, const int32_t *seg_off, const int32_t *seg_row,
                          int nseg, const int64_t *dnseg, int64_t nitems, int D, float *dst, void *ws,
                          cudaStream_t s) {
    const int64_t ntiles = tk_rows_pieces(nitems), slices = (D + 32 * V - 1) / (32 * V);
    float *head = (float *)ws, *tail = head + ntiles * D;
    if (ntiles > 0)
        rows_segsum_cross<S, V, ROWS_U><<<tk_cu_blocks(ntiles * slices, 8), 256, 0, s>>>(
            (const S *)src, pos, seg_off, nseg, dnseg, ntiles, D, head, tail);
    rows_segsum_segs<S, V, ROWS_U><<<tk_cu_blocks((int64_t)nseg * slices, 8), 256, 0, s>>>(
        (const S *)src, pos, seg_off, seg_row, nseg, dnseg, ntiles, D, dst, head, tail);
}

int tk_rows_segsum_cuda(tk_ctx *c, const void *src, tk_dtype st, const int32_t *pos, const int32_t *seg_off,
                        const int32_t *seg_row, int nseg, const int64_t *dnseg, int64_t nitems, int D, float *dst,
                        void *ws, tk_err *e) {
    TRY(tk_rows_segsum_check(st, nseg, nitems, D, e));
    if (nseg == 0) return 0;
    if (nitems > 0 && !ws) return tk_err_set(e, TK_EINTERNAL, "rows_segsum: no workspace");
    // 8-byte loads of V columns where every row allows them (D % V == 0, src 8-byte aligned)
    const bool v8 = (uintptr_t)src % 8 == 0 && D % (st == TK_F32 ? 2 : 4) == 0;
    cudaStream_t s = tk_cu_stream(c);
    if (st == TK_F32) {
        if (v8) launch_segsum<float, 2>(src, pos, seg_off, seg_row, nseg, dnseg, nitems, D, dst, ws, s);
        else launch_segsum<float, 1>(src, pos, seg_off, seg_row, nseg, dnseg, nitems, D, dst, ws, s);
    } else {
        if (v8) launch_segsum<uint16_t, 4>(src, pos, seg_off, seg_row, nseg, dnseg, nitems, D, dst, ws, s);
        else launch_segsum<uint16_t, 1>(src, pos, seg_off, seg_row, nseg, dnseg, nitems, D, dst, ws, s);
    }
    return tk_cu_check(e, "rows_segsum");
}
