// CUDA side of kernels/pool.h: channels fastest so warps read consecutive channels, 16-byte vectors
// of channels per thread where C and the pointers allow, the same order of additions as the
// reference. ResNet's max pooling (3x3 windows at stride 2, pad 1) as tiles of K output rows per
// thread, each thread's loads issued at once; other windows one thread per output element
// (forward) or input element (the gathered backward). Average pooling a thread per channel vector
// of an image (forward) or of a pixel (backward).
#include <type_traits>

#include "cuda_util.cuh"
#include "pool.cuh"
#include "core/vec.cuh"

namespace {

// Output rows per thread of the 3x3/2 tiles (forward, backward).
#ifndef TK_POOL_FWD_K
#define TK_POOL_FWD_K 2
#endif
#ifndef TK_POOL_BWD_K
#define TK_POOL_BWD_K 3
#endif
#ifndef TK_POOL_FWD_THREADS // a block of the forward's tiles, and the blocks an SM must hold
#define TK_POOL_FWD_THREADS 256
#endif
#ifndef TK_POOL_FWD_MINB
#define TK_POOL_FWD_MINB 1
#endif

// N channels per thread (a 16-byte vector of them, or N = 1): thread j of the flat index takes
// vector j % V (V = C / N) of pixel j / V; 32-bit index arithmetic where the count fits.
template <typename I, int N> __device__ __forceinline__ void split(I j, int V, int *c0, I *pix) {
    *pix = j / (I)V;
    *c0 = (int)(j - *pix * (I)V) * N;
}

template <int N> __device__ __forceinline__ void st_idx(uint8_t *p, size_t o, const uint8_t *v) {
    if constexpr (N == 8) *reinterpret_cast<uint2 *>(p + o) = *reinterpret_cast<const uint2 *>(v);
    else if constexpr (N == 4) *reinterpret_cast<uint32_t *>(p + o) = *reinterpret_cast<const uint32_t *>(v);
    else p[o] = v[0];
}
template <typename T, int N> __device__ __forceinline__ void ldv(const T *p, size_t i, float *f) {
    if constexpr (N == 1) f[0] = tk_f(p[i]);
    else tk_vload(p, i, f);
}
template <typename T, int N> __device__ __forceinline__ void stv(T *p, size_t i, const float *f) {
    if constexpr (N == 1) p[i] = tk_to<T>(f[0]);
    else tk_vstore(p, i, f);
}

// BN: x through round_t(relu(x scale + shift)) first (pool.h), scale and shift as kernels/bn.cu's
// stats_final computes them.
template <typename T, int N, typename I, bool BN>
__global__ void maxpool_fwd(const T *__restrict__ x, tk_pool_bn bn, int NB, int H, int W, int C, int R, int stride,
                            int pad, int P, int Q, T *__restrict__ y, uint8_t *__restrict__ idx) {
    const int V = C / N;
    const I total = (I)NB * P * Q * V;
    float sc[N], sh[N];
    int c_last = -1; // the channels sc, sh hold (a thread's channels rarely change between its outputs)
    for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += (I)gridDim.x * blockDim.x) {
        int c0;
        I r0;
        split<I, N>(j, V, &c0, &r0);
        const I pq = (I)P * Q, n = r0 / pq, rem = r0 - n * pq;
        const int p = (int)(rem / (I)Q), q = (int)(rem - (I)p * Q);
        float m[N];
        int best[N];
        if (BN && c0 != c_last) {
#pragma unroll
            for (int k = 0; k < N; k++) {
                sc[k] = __fmul_rn(bn.gamma[c0 + k], bn.invstd[c0 + k]);
                sh[k] = __fsub_rn(bn.beta[c0 + k], __fmul_rn(bn.mean[c0 + k], sc[k]));
            }
            c_last = c0;
        }
#pragma unroll
        for (int k = 0; k < N; k++) m[k] = 0, best[k] = -1;
        for (int r = 0; r < R; r++) {
            int h = p * stride - pad + r;
            if (h < 0 || h >= H) continue;
            for (int s = 0; s < R; s++) {
                int w = q * stride - pad + s;
                if (w < 0 || w >= W) continue;
                float v[N];
                ldv<T, N>(x, (((size_t)n * H + h) * W + w) * C + c0, v);
                if (BN)
#pragma unroll
                    for (int k = 0; k < N; k++) {
                        float o = __fadd_rn(__fmul_rn(v[k], sc[k]), sh[k]);
                        v[k] = tk_round<T>(!(o > 0.0f) && o == o ? 0.0f : o);
                    }
#pragma unroll
                for (int k = 0; k < N; k++)
                    if (best[k] < 0 || v[k] > m[k] || (v[k] != v[k] && m[k] == m[k])) m[k] = v[k], best[k] = r * R + s;
            }
        }
        const size_t o = (size_t)r0 * C + c0;
        uint8_t b[N];
#pragma unroll
        for (int k = 0; k < N; k++) b[k] = (uint8_t)best[k];
        stv<T, N>(y, o, m);
        st_idx<N>(idx, o, b);
    }
}


template <typename T, int N, typename I>
__global__ void maxpool_bwd(const T *__restrict__ dy, const T *__restrict__ dy2, const uint8_t *__restrict__ idx,
                            int NB, int H, int W, int C, int R, int stride, int pad, int P, int Q, T *__restrict__ dx) {
    const int V = C / N;
    const I total = (I)NB * H * W * V;
    for (I j = (I)blockIdx.x * blockDim.x + threadIdx.x; j < total; j += (I)gridDim.x * blockDim.x) {
        int c0;
        I r0;
        split<I, N>(j, V, &c0, &r0);
        const I hw = (I)H * W, n = r0 / hw, rem = r0 - n * hw;
        const int h = (int)(rem / (I)W), w = (int)(rem - (I)h * W);
        float acc[N];
        tk_pool_grad<T, N>(dy, dy2, idx, (int64_t)n, h, w, C, c0, R, stride, pad, P, Q, acc);
        stv<T, N>(dx, (size_t)r0 * C + c0, acc);
    }
}

// ResNet's 3x3 windows at stride 2, pad 1, as tiles: a thread takes N channels of K outputs down
// one column (p0 .. p0 + K - 1, q). The forward loads the 2K + 1 input rows x 3 columns those
// windows cover at once (rows shared by two windows loaded once), then folds each window's pixels
// in row-major order as maxpool_fwd does. The backward's thread owns the 2K x 2 input pixels
// (2p0 .. 2p0 + 2K - 1, 2q .. 2q + 1), whose windows are rows p0 .. p0 + K and columns q, q + 1
// (an input at 2p is in window p only, at 2p + 1 in p and p + 1): it loads those windows' idx and
// gradients at once and adds, per pixel, the ones naming it in (p, q) order, as tk_pool_grad.
// The tile of this thread (flat index j: vector j % V of column q, row tile pt of image n, channels
// fastest): channels c0 .., output rows p0 .. p0 + K - 1; false past the last.
template <typename I> struct Tile {
    int c0, q, p0;
    I n;
};
template <int N, int K, typename I> __device__ __forceinline__ bool tile_of(I total, int C, int Q, int PT, Tile<I> *t) {
    const I j = (I)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= total) return false;
    const I r = j / (I)(C / N), r2 = r / (I)Q;
    t->c0 = (int)(j - r * (C / N)) * N;
    t->q = (int)(r - r2 * Q);
    t->n = r2 / (I)PT;
    t->p0 = (int)(r2 - t->n * PT) * K;
    return true;
}
// Whether value f, later in a window's order, displaces the maximum m so far (pool.h: the first
// maximum, a NaN wins): f > m, or f a NaN while m is not.
__device__ __forceinline__ bool displaces(float f, float m) { return m == m && !(f <= m); }

// What a thread loads at once: a 16-byte vector of N channels, or one.
template <typename T, int N> using ld_t = typename std::conditional<N == 1, T, typename TkVec<T>::raw>::type;

template <typename T, int N, int K, typename I, bool BN>
__global__ void __launch_bounds__(TK_POOL_FWD_THREADS, TK_POOL_FWD_MINB)
    maxpool3s2_fwd(const T *__restrict__ x, tk_pool_bn bn, int H, int W, int C, int P, int Q, int PT, I total,
                   T *__restrict__ y, uint8_t *__restrict__ idx) {
    Tile<I> t;
    if (!tile_of<N, K>(total, C, Q, PT, &t)) return;
    const int c0 = t.c0, q = t.q, p0 = t.p0;
    const I n = t.n;
    constexpr int RH = 2 * K + 1;
    ld_t<T, N> v[RH][3];
    bool okh[RH], okw[3];
#pragma unroll
    for (int s = 0; s < 3; s++) okw[s] = (unsigned)(2 * q - 1 + s) < (unsigned)W;
#pragma unroll
    for (int i = 0; i < RH; i++) {
        const int h = 2 * p0 - 1 + i;
        okh[i] = (unsigned)h < (unsigned)H;
#pragma unroll
        for (int s = 0; s < 3; s++)
            if (okh[i] && okw[s])
                v[i][s] = *reinterpret_cast<const ld_t<T, N> *>(x + (((size_t)n * H + h) * W + 2 * q - 1 + s) * C + c0);
    }
    float sc[N], sh[N];
    if (BN)
#pragma unroll
        for (int k = 0; k < N; k++) {
            sc[k] = __fmul_rn(bn.gamma[c0 + k], bn.invstd[c0 + k]);
            sh[k] = __fsub_rn(bn.beta[c0 + k], __fmul_rn(bn.mean[c0 + k], sc[k]));
        }
    // Separably: each input row's first maximum over the window's columns (s order; column 1, at
    // 2q, is always inside), then each window's first maximum over its rows' maxima (r order; row 1,
    // at 2p, is inside for every stored output): the first maximum in row-major order, as the
    // reference's scan finds it (a NaN, the first one, wins both ways).
    float m[K][N];
    int best[K][N];
#pragma unroll
    for (int i = 0; i < RH; i++) {
        if (!okh[i]) continue;
        float f[3][N];
#pragma unroll
        for (int s = 0; s < 3; s++) {
            const T *e = reinterpret_cast<const T *>(&v[i][s]);
#pragma unroll
            for (int k = 0; k < N; k++) {
                f[s][k] = tk_f(e[k]);
                if (BN) {
                    const float a = __fadd_rn(__fmul_rn(f[s][k], sc[k]), sh[k]);
                    f[s][k] = tk_round<T>(a > 0.0f || a != a ? a : 0.0f);
                }
            }
        }
        float rm[N];
        int rs[N];
#pragma unroll
        for (int k = 0; k < N; k++) {
            rm[k] = f[1][k], rs[k] = 1;
            if (okw[0] && !displaces(f[1][k], f[0][k])) rm[k] = f[0][k], rs[k] = 0;
            if (okw[2] && displaces(f[2][k], rm[k])) rm[k] = f[2][k], rs[k] = 2;
        }
        // output o's window holds input row i as its row r = i - 2 o (0 .. 2)
#pragma unroll
        for (int o = 0; o < K; o++) {
            const int r = i - 2 * o;
            if (r < 0 || r > 2) continue;
#pragma unroll
            for (int k = 0; k < N; k++)
                if (r == 0 || (r == 1 && !okh[2 * o]) || displaces(rm[k], m[o][k]))
                    m[o][k] = rm[k], best[o][k] = r * 3 + rs[k];
        }
    }
#pragma unroll
    for (int o = 0; o < K; o++) {
        if (p0 + o >= P) break;
        const size_t off = (((size_t)n * P + p0 + o) * Q + q) * C + c0;
        uint8_t b[N];
#pragma unroll
        for (int k = 0; k < N; k++) b[k] = (uint8_t)best[o][k];
        stv<T, N>(y, off, m[o]);
        st_idx<N>(idx, off, b);
    }
}

template <typename T, int N, int K, typename I>
__global__ void __launch_bounds__(256) maxpool3s2_bwd(const T *__restrict__ dy, const T *__restrict__ dy2,
                                                     const uint8_t *__restrict__ idx, int H, int W, int C, int P,
                                                     int Q, int PT, I total, T *__restrict__ dx) {
    Tile<I> tl;
    if (!tile_of<N, K>(total, C, Q, PT, &tl)) return;
    const int c0 = tl.c0, q = tl.q, p0 = tl.p0;
    const I n = tl.n;
    typedef typename std::conditional<N == 8, uint2, typename std::conditional<N == 4, uint32_t, uint8_t>::type>::type
        ix_t;
    // windows (p0 + a, q + b), a 0 .. K, b 0 .. 1; absent ones read as no match
    ix_t ib[K + 1][2];
    ld_t<T, N> g[K + 1][2], g2[K + 1][2];
    bool ok[K + 1][2];
#pragma unroll
    for (int a = 0; a <= K; a++)
#pragma unroll
        for (int b = 0; b < 2; b++) {
            ok[a][b] = p0 + a < P && q + b < Q;
            if (ok[a][b]) {
                const size_t o = (((size_t)n * P + p0 + a) * Q + q + b) * C + c0;
                ib[a][b] = *reinterpret_cast<const ix_t *>(idx + o);
                g[a][b] = *reinterpret_cast<const ld_t<T, N> *>(dy + o);
                if (dy2) g2[a][b] = *reinterpret_cast<const ld_t<T, N> *>(dy2 + o);
            }
        }
    // input pixel (2 p0 + u, 2 q + t): window rows a = u / 2 (position row u % 2 + 1) and, for odd u,
    // a + 1 (position row 0); columns the same way
#pragma unroll
    for (int u = 0; u < 2 * K; u++) {
        const int h = 2 * p0 + u;
        if (h >= H) break;
#pragma unroll
        for (int t = 0; t < 2; t++) {
            const int w = 2 * q + t;
            if (w >= W) continue;
            float acc[N];
#pragma unroll
            for (int k = 0; k < N; k++) acc[k] = 0;
#pragma unroll
            for (int da = 0; da < 1 + (u & 1); da++)
#pragma unroll
                for (int db = 0; db < 1 + t; db++) {
                    const int a = u / 2 + da, want = (da ? 0 : u % 2 + 1) * 3 + (db ? 0 : t + 1);
                    if (!ok[a][db]) continue;
                    const uint8_t *bi = reinterpret_cast<const uint8_t *>(&ib[a][db]);
                    const T *e = reinterpret_cast<const T *>(&g[a][db]), *e2 = reinterpret_cast<const T *>(&g2[a][db]);
#pragma unroll
                    for (int k = 0; k < N; k++)
                        if (bi[k] == want) acc[k] += dy2 ? tk_f(e[k]) + tk_f(e2[k]) : tk_f(e[k]);
                }
            stv<T, N>(dx, (((size_t)n * H + h) * W + w) * C + c0, acc);
        }
    }
}

// Average pooling, N channels a thread. The forward a thread per channel vector of an image: its
// HW loads issued U at a time (raw, widened as they are added) and added in hw order. The backward
// a thread per channel vector of AP_HW consecutive pixels: dy / HW once, then its stores.
constexpr int AP_HW = 8;

template <typename T, int N, typename I>
__global__ void avgpool_fwd(const T *__restrict__ x, int NB, int HW, int C, T *__restrict__ y) {
    const int V = C / N;
    const I j = (I)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (I)NB * V) return;
    const I n = j / V;
    const int c0 = (int)(j - n * V) * N;
    const T *xp = x + (size_t)n * HW * C + c0;
    constexpr int U = 16; // loads in flight per thread
    float s[N];
#pragma unroll
    for (int k = 0; k < N; k++) s[k] = 0;
    for (int i = 0; i < HW; i += U) {
        ld_t<T, N> v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (i + u < HW) v[u] = *reinterpret_cast<const ld_t<T, N> *>(xp + (size_t)(i + u) * C);
#pragma unroll
        for (int u = 0; u < U; u++) {
            if (i + u >= HW) break;
            const T *e = reinterpret_cast<const T *>(&v[u]);
#pragma unroll
            for (int k = 0; k < N; k++) s[k] += tk_f(e[k]);
        }
    }
#pragma unroll
    for (int k = 0; k < N; k++) s[k] = s[k] / (float)HW;
    stv<T, N>(y, (size_t)n * C + c0, s);
}

template <typename T, int N, typename I>
__global__ void avgpool_bwd(const T *__restrict__ dy, int NB, int HW, int C, T *__restrict__ dx) {
    const int V = C / N, NH = (HW + AP_HW - 1) / AP_HW;
    const I j = (I)blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= (I)NB * NH * V) return;
    const I r = j / V, n = r / NH;
    const int c0 = (int)(j - r * V) * N, i0 = (int)(r - n * NH) * AP_HW;
    float g[N];
    ldv<T, N>(dy, (size_t)n * C + c0, g);
#pragma unroll
    for (int k = 0; k < N; k++) g[k] = g[k] / (float)HW;
#pragma unroll
    for (int u = 0; u < AP_HW; u++)
        if (i0 + u < HW) stv<T, N>(dx, ((size_t)n * HW + i0 + u) * C + c0, g);
}

static unsigned blocks_of(int64_t n, int threads = 256) { return (unsigned)((n + threads - 1) / threads); }

// Calls f(vector width, index type) for a launch over items of n channels: 16-byte vectors of
// channels (TkVec<T>::N) when vec, else one; a 32-bit index when n items fit.
template <typename T, typename F> void launch(bool vec, int64_t n, F f) {
    constexpr int NV = TkVec<T>::N;
    if (n < ((int64_t)1 << 31)) {
        if (vec) f(std::integral_constant<int, NV>{}, uint32_t{});
        else f(std::integral_constant<int, 1>{}, uint32_t{});
    } else if (vec) f(std::integral_constant<int, NV>{}, uint64_t{});
    else f(std::integral_constant<int, 1>{}, uint64_t{});
}
#define TK_LAUNCH_TYPES(nv, i)                                                                                         \
    constexpr int N = decltype(nv)::value;                                                                             \
    typedef decltype(i) I

// vec: 16 bytes of channels a thread where C and the pointers allow. 3x3 windows at stride 2, pad 1
// as tiles of K output rows; other windows one thread per output vector (forward) or input vector
// (backward), grid-stride.
template <typename T, bool BN>
void mp_fwd(cudaStream_t st, const void *x, tk_pool_bn bn, int NB, int H, int W, int C, int R, int stride, int pad,
            int P, int Q, void *y, uint8_t *idx) {
    constexpr int NV = TkVec<T>::N, K = TK_POOL_FWD_K;
    const bool vec = C % NV == 0 && tk_aligned16(x, y) && ((uintptr_t)idx & (NV - 1)) == 0;
    const T *X = (const T *)x;
    T *Y = (T *)y;
    const int PT = (P + K - 1) / K, V = vec ? C / NV : C;
    if (R == 3 && stride == 2 && pad == 1) {
        const int64_t n = (int64_t)NB * PT * Q * V;
        launch<T>(vec, n, [&](auto nv, auto i) {
            TK_LAUNCH_TYPES(nv, i);
            maxpool3s2_fwd<T, N, K, I, BN><<<blocks_of(n, TK_POOL_FWD_THREADS), TK_POOL_FWD_THREADS, 0, st>>>(
                X, bn, H, W, C, P, Q, PT, (I)n, Y, idx);
        });
        return;
    }
    const int64_t n = (int64_t)NB * P * Q * V;
    launch<T>(vec, n, [&](auto nv, auto i) {
        TK_LAUNCH_TYPES(nv, i);
        maxpool_fwd<T, N, I, BN><<<tk_cu_blocks(n, 256), 256, 0, st>>>(X, bn, NB, H, W, C, R, stride, pad, P, Q, Y,
                                                                        idx);
    });
}

template <typename T>
void mp_bwd(cudaStream_t st, const void *dy, const void *dy2, const uint8_t *idx, int NB, int H, int W, int C, int R,
            int stride, int pad, int P, int Q, void *dx) {
    constexpr int NV = TkVec<T>::N, K = TK_POOL_BWD_K;
    const bool vec = C % NV == 0 && tk_aligned16(dy, dy2, dx) && ((uintptr_t)idx & (NV - 1)) == 0;
    const T *DY = (const T *)dy, *DY2 = (const T *)dy2;
    T *DX = (T *)dx;
    const int PT = (P + K - 1) / K, V = vec ? C / NV : C;
    if (R == 3 && stride == 2 && pad == 1) {
        const int64_t n = (int64_t)NB * PT * Q * V;
        launch<T>(vec, n, [&](auto nv, auto i) {
            TK_LAUNCH_TYPES(nv, i);
            maxpool3s2_bwd<T, N, K, I><<<blocks_of(n), 256, 0, st>>>(DY, DY2, idx, H, W, C, P, Q, PT, (I)n, DX);
        });
        return;
    }
    const int64_t n = (int64_t)NB * H * W * V;
    launch<T>(vec, n, [&](auto nv, auto i) {
        TK_LAUNCH_TYPES(nv, i);
        maxpool_bwd<T, N, I><<<tk_cu_blocks(n, 256), 256, 0, st>>>(DY, DY2, idx, NB, H, W, C, R, stride, pad, P, Q, DX);
    });
}

// Average pooling: the forward in blocks of 128 (few threads, N C / 8, each with HW loads: spread
// over every SM).
template <typename T> void ap_fwd(cudaStream_t st, const void *x, int NB, int HW, int C, void *y) {
    const bool vec = C % TkVec<T>::N == 0 && tk_aligned16(x, y);
    const int64_t n = (int64_t)NB * (vec ? C / TkVec<T>::N : C);
    launch<T>(vec, n, [&](auto nv, auto i) {
        TK_LAUNCH_TYPES(nv, i);
        avgpool_fwd<T, N, I><<<blocks_of(n, 128), 128, 0, st>>>((const T *)x, NB, HW, C, (T *)y);
    });
}

template <typename T> void ap_bwd(cudaStream_t st, const void *dy, int NB, int HW, int C, void *dx) {
    const bool vec = C % TkVec<T>::N == 0 && tk_aligned16(dy, dx);
    const int64_t n = (int64_t)NB * ((HW + AP_HW - 1) / AP_HW) * (vec ? C / TkVec<T>::N : C);
    launch<T>(vec, n, [&](auto nv, auto i) {
        TK_LAUNCH_TYPES(nv, i);
        avgpool_bwd<T, N, I><<<blocks_of(n), 256, 0, st>>>((const T *)dy, NB, HW, C, (T *)dx);
    });
}

} // namespace

#define BF (t == TK_BF16)
typedef __nv_bfloat16 bf;

int tk_maxpool_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int H, int W, int C, int R, int stride, int pad,
                        void *y, uint8_t *idx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    if (BF) mp_fwd<bf, false>(tk_cu_stream(c), x, tk_pool_bn{}, N, H, W, C, R, stride, pad, P, Q, y, idx);
    else mp_fwd<float, false>(tk_cu_stream(c), x, tk_pool_bn{}, N, H, W, C, R, stride, pad, P, Q, y, idx);
    return tk_cu_check(e, "maxpool_fwd");
}

int tk_maxpool_bn_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, tk_pool_bn bn, int N, int H, int W, int C, int R,
                           int stride, int pad, void *y, uint8_t *idx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    if (BF) mp_fwd<bf, true>(tk_cu_stream(c), x, bn, N, H, W, C, R, stride, pad, P, Q, y, idx);
    else mp_fwd<float, true>(tk_cu_stream(c), x, bn, N, H, W, C, R, stride, pad, P, Q, y, idx);
    return tk_cu_check(e, "maxpool_bn_fwd");
}

int tk_maxpool_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, const void *dy2, const uint8_t *idx, int N, int H,
                        int W, int C, int R, int stride, int pad, void *dx, tk_err *e) {
    TRY(tk_pool_check(t, N, H, W, C, R, stride, pad, e));
    const int P = tk_pool_out(H, R, stride, pad), Q = tk_pool_out(W, R, stride, pad);
    if (BF) mp_bwd<bf>(tk_cu_stream(c), dy, dy2, idx, N, H, W, C, R, stride, pad, P, Q, dx);
    else mp_bwd<float>(tk_cu_stream(c), dy, dy2, idx, N, H, W, C, R, stride, pad, P, Q, dx);
    return tk_cu_check(e, "maxpool_bwd");
}

int tk_avgpool_fwd_cuda(tk_ctx *c, tk_dtype t, const void *x, int N, int HW, int C, void *y, tk_err *e) {
    TRY(tk_pool_check(t, N, HW, 1, C, 1, 1, 0, e));
    if (BF) ap_fwd<bf>(tk_cu_stream(c), x, N, HW, C, y);
    else ap_fwd<float>(tk_cu_stream(c), x, N, HW, C, y);
    return tk_cu_check(e, "avgpool_fwd");
}

int tk_avgpool_bwd_cuda(tk_ctx *c, tk_dtype t, const void *dy, int N, int HW, int C, void *dx, tk_err *e) {
    TRY(tk_pool_check(t, N, HW, 1, C, 1, 1, 0, e));
    if (BF) ap_bwd<bf>(tk_cu_stream(c), dy, N, HW, C, dx);
    else ap_bwd<float>(tk_cu_stream(c), dy, N, HW, C, dx);
    return tk_cu_check(e, "avgpool_bwd");
}
