// CUDA side of kernels/ssd_head.h: one thread an element (grid-stride). The gather and the scatter
// run over the output's elements in its order ((n, a, column), box-major (n, column, a)): the fp32
// side coalesced, the channels-last side strided by the map's nd (box-major: nd) channels.
// The many-head forms (the training step's): one launch for all the heads' parts. A block takes R
// consecutive rows (n, p) of one head (R from the widest head's ld: about 24 KB of t); those rows
// are one contiguous run of R ld values in the head's output, copied between global and shared
// memory in 16-byte vectors (the run's unaligned ends element by element; the shared tile offset
// so its vectors line up with global memory's). The fp32 side is walked in its own order, so that
// consecutive threads touch consecutive floats: box-major, for each box d of a position, the R
// rows' boxes (d HW + p .. d HW + p + R - 1: one contiguous run of R A floats within an image);
// else for each (d, a) the R rows' columns. The scatter zeroes the tile first, so the channels no
// part covers go out as 0 with the rest of the row.
#include "act_types.cuh"
#include "ssd_head.h"

namespace {

constexpr int kT = 256;

template <typename T> __global__ void __launch_bounds__(kT) bias_relu(T *y, int64_t M, int K, const float *b, int relu) {
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < (size_t)M * K; i += (size_t)gridDim.x * kT) {
        const float v = tk_f(y[i]) + b[i % K];
        y[i] = tk_to<T>(relu && !(v > 0.0f) ? 0.0f : v);
    }
}

template <typename T>
__global__ void __launch_bounds__(kT) relu_bwd(int64_t n, const T *y, const T *dy, const T *dy2, T *dx) {
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < (size_t)n; i += (size_t)gridDim.x * kT) {
        const float g = tk_f(dy[i]) + (dy2 ? tk_f(dy2[i]) : 0.0f);
        dx[i] = tk_to<T>(tk_f(y[i]) > 0.0f ? g : 0.0f);
    }
}

// Element i of the map's block of the output, (n, a, j = d HW + p) or box-major (n, j, a): its
// index in the output and the source's index.
__device__ inline void place(const tk_ssd_map mp, size_t i, size_t *o, size_t *s) {
    const size_t cols = (size_t)mp.nd * mp.HW;
    size_t j;
    int a, n;
    if (mp.box_major) {
        const size_t nj = i / mp.A;
        a = (int)(i % mp.A), j = nj % cols, n = (int)(nj / cols);
        *o = ((size_t)n * (size_t)mp.total + (size_t)mp.off + j) * mp.A + a;
    } else {
        const size_t na = i / cols;
        j = i % cols, a = (int)(na % mp.A), n = (int)(na / mp.A);
        *o = na * (size_t)mp.total + (size_t)mp.off + j;
    }
    const int d = (int)(j / mp.HW), p = (int)(j % mp.HW);
    *s = ((size_t)n * mp.HW + p) * mp.ld + mp.c0 + (size_t)a * mp.nd + d;
}

template <typename T> __global__ void __launch_bounds__(kT) gather(const tk_ssd_map mp, const T *src, float *out) {
    const size_t n = (size_t)mp.N * mp.A * mp.nd * mp.HW;
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < n; i += (size_t)gridDim.x * kT) {
        size_t o, s;
        place(mp, i, &o, &s);
        out[o] = tk_f(src[s]);
    }
}

template <typename T> __global__ void __launch_bounds__(kT) scatter(const tk_ssd_map mp, const float *dout, T *dsrc) {
    const size_t n = (size_t)mp.N * mp.A * mp.nd * mp.HW;
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < n; i += (size_t)gridDim.x * kT) {
        size_t o, s;
        place(mp, i, &o, &s);
        dsrc[s] = tk_to<T>(dout[o]);
    }
}

// ---- many heads ----

constexpr int kMaxR = 64;           // rows a block
constexpr size_t kTileBytes = 24576; // the tile's budget (R from it)
constexpr int kMaxLd = 12000;       // (R = 1: 48 KB of fp32, the static shared memory's limit)

struct PartK {
    float *out;
    int nd, A, c0, bm;
    long long total, off;
};
struct HeadK {
    void *src;
    int HW, ld, np;
    long long rows, tile0; // N HW; the head's first block
    PartK p[TK_SSD_HEAD_PARTS];
};
struct Heads {
    int nh, R;
    HeadK h[TK_SSD_MAX_HEADS];
};

// The indices (x, y, z) of k = threadIdx.x, threadIdx.x + kT, ... over X x Y x Z (z fastest), kept
// by carries instead of a division each step.
struct Walk {
    int x, y, z, sx, sy, sz, Y, Z;
    __device__ Walk(int k, int Y_, int Z_) : Y(Y_), Z(Z_) {
        z = k % Z, y = k / Z % Y, x = k / Z / Y;
        sz = kT % Z, sy = kT / Z % Y, sx = kT / Z / Y;
    }
    __device__ void next() {
        z += sz;
        int c = z >= Z;
        if (c) z -= Z;
        y += sy + c;
        c = y >= Y;
        if (c) y -= Y;
        x += sx + c;
    }
};

// A run of n elements of T at global p: `lead` elements before p + lead is 16-byte aligned, then
// nv vectors of V, then the rest; the shared tile holds element i at tile + ofs + i (ofs = p's
// misalignment in elements, so that tile + ofs + lead is aligned as p + lead is).
template <typename T> struct Run {
    static constexpr int V = 16 / sizeof(T);
    size_t n, lead, nv;
    int ofs;
    __device__ Run(const T *p, size_t n_) : n(n_) {
        ofs = (int)(((uintptr_t)p & 15) / sizeof(T));
        lead = ofs ? (size_t)(V - ofs) : 0;
        if (lead > n) lead = n;
        nv = (n - lead) / V;
    }
};

// Block b's head: the last whose first block is at or before b.
__device__ inline int block_head(const Heads &H) {
    int h = 0;
    while (h + 1 < H.nh && (long long)blockIdx.x >= H.h[h + 1].tile0) h++;
    return h;
}

// rb[i] = the fp32 side's index of part q's value (d, a) = (0, 0) at row r0 + i.
__device__ inline void row_bases(const HeadK &k, const PartK &q, long long r0, int nr, long long *rb) {
    for (int i = threadIdx.x; i < nr; i += kT) {
        const long long r = r0 + i, n = r / k.HW, p = r % k.HW;
        rb[i] = q.bm ? (n * q.total + q.off + p) * q.A : n * q.A * q.total + q.off + p;
    }
}

// f(o, s) for every value of part q in the block's rows r0 .. r0 + nr - 1: o its index on the fp32
// side, s its index in the tile; in the fp32 side's order (consecutive threads, consecutive o).
// Barriers first: the caller's tile writes done, the previous part's rb read.
template <typename F>
__device__ inline void each_value(const HeadK &k, const PartK &q, long long r0, int nr, long long *rb, F f) {
    __syncthreads();
    row_bases(k, q, r0, nr, rb);
    __syncthreads();
    if (q.bm) { // (d, i, a): out[n, off + d HW + p, a]
        const long long step = (long long)k.HW * q.A;
        for (Walk w(threadIdx.x, nr, q.A); w.x < q.nd; w.next())
            f(rb[w.y] + w.x * step + w.z, w.y * k.ld + q.c0 + w.z * q.nd + w.x);
    } else { // (d, a, i): out[n, a, off + d HW + p]
        for (Walk w(threadIdx.x, q.A, nr); w.x < q.nd; w.next())
            f(rb[w.z] + w.y * q.total + (long long)w.x * k.HW, w.z * k.ld + q.c0 + w.y * q.nd + w.x);
    }
}

// The run u from `from` to `to` (one global, one the shared tile: aligned alike), by 16-byte vectors.
template <typename T> __device__ inline void copy_run(T *to, const T *from, const Run<T> &u) {
    constexpr int V = Run<T>::V;
    for (size_t i = threadIdx.x; i < u.lead; i += kT) to[i] = from[i];
    for (size_t v = threadIdx.x; v < u.nv; v += kT) *(uint4 *)(to + u.lead + v * V) = *(const uint4 *)(from + u.lead + v * V);
    for (size_t i = u.lead + u.nv * V + threadIdx.x; i < u.n; i += kT) to[i] = from[i];
}

// The block's rows r0 .. r0 + nr - 1 of its head k: the head's output there (g), their run and the
// tile (tl).
template <typename T> struct Rows {
    const HeadK *k;
    long long r0;
    int nr;
    T *g;
    Run<T> u;
    T *tl;
    __device__ Rows(const Heads &H, unsigned char *smem)
        : k(&H.h[block_head(H)]), r0(((long long)blockIdx.x - k->tile0) * H.R),
          nr((int)min((long long)H.R, k->rows - r0)), g((T *)k->src + r0 * k->ld), u(g, (size_t)nr * k->ld),
          tl((T *)smem + u.ofs) {}
};

template <typename T> __global__ void __launch_bounds__(kT) gather_many(const Heads H) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ long long rb[kMaxR];
    const Rows<T> b(H, smem);
    copy_run(b.tl, (const T *)b.g, b.u);
    for (int j = 0; j < b.k->np; j++) {
        const PartK &q = b.k->p[j];
        each_value(*b.k, q, b.r0, b.nr, rb, [&](long long o, int s) { q.out[o] = tk_f(b.tl[s]); });
    }
}

template <typename T> __global__ void __launch_bounds__(kT) scatter_many(const Heads H) {
    extern __shared__ __align__(16) unsigned char smem[];
    __shared__ long long rb[kMaxR];
    const Rows<T> b(H, smem);
    for (size_t i = threadIdx.x; i < b.u.n; i += kT) b.tl[i] = tk_to<T>(0.0f); // the channels no part covers
    for (int j = 0; j < b.k->np; j++) {
        const PartK &q = b.k->p[j];
        each_value(*b.k, q, b.r0, b.nr, rb, [&](long long o, int s) { b.tl[s] = tk_to<T>(q.out[o]); });
    }
    __syncthreads();
    copy_run(b.g, (const T *)b.tl, b.u);
}

// The launch's table, its blocks and its dynamic shared memory.
int heads_table(tk_dtype t, int nh, const tk_ssd_head *h, Heads *H, unsigned *blocks, size_t *smem, tk_err *e) {
    TRY(tk_ssd_heads_check(t, nh, h, e));
    const size_t es = tk_dtype_size(t);
    int ldmax = 1;
    for (int i = 0; i < nh; i++) ldmax = h[i].part[0].ld > ldmax ? h[i].part[0].ld : ldmax;
    if (ldmax > kMaxLd)
        return tk_err_set(e, TK_EINTERNAL, "ssd head: %d channels a position (at most %d on cuda)", ldmax, kMaxLd);
    int R = (int)(kTileBytes / ((size_t)ldmax * es));
    R = R < 1 ? 1 : R > kMaxR ? kMaxR : R;
    memset(H, 0, sizeof *H);
    H->nh = nh, H->R = R;
    long long tiles = 0;
    for (int i = 0; i < nh; i++) {
        HeadK *k = &H->h[i];
        const tk_ssd_map *m0 = &h[i].part[0];
        k->src = h[i].src, k->HW = m0->HW, k->ld = m0->ld, k->np = h[i].nparts;
        k->rows = (long long)m0->N * m0->HW, k->tile0 = tiles;
        tiles += (k->rows + R - 1) / R;
        for (int j = 0; j < h[i].nparts; j++) {
            const tk_ssd_map *m = &h[i].part[j];
            k->p[j] = PartK{h[i].out[j], m->nd, m->A, m->c0, m->box_major, (long long)m->total, (long long)m->off};
        }
    }
    if (tiles > 0x7fffffffLL) return tk_err_set(e, TK_EINTERNAL, "ssd head: %lld blocks", tiles);
    *blocks = (unsigned)tiles;
    *smem = (size_t)R * ldmax * es + 16;
    return 0;
}

} // namespace

// One launch of gather_many (scatter 0) or scatter_many over the heads.
static int heads_launch(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, int scatter, tk_err *e) {
    Heads H;
    unsigned nb;
    size_t smem;
    TRY(heads_table(t, nh, h, &H, &nb, &smem, e));
    cudaStream_t st = tk_cu_stream(c);
    TK_ACT_DISPATCH(t, "ssd head", e, {
        if (scatter) scatter_many<T><<<nb, kT, smem, st>>>(H);
        else gather_many<T><<<nb, kT, smem, st>>>(H);
    });
    return tk_cu_check(e, scatter ? "ssd head scatter (many)" : "ssd head gather (many)");
}

int tk_ssd_head_gather_many_cuda(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e) {
    return heads_launch(c, t, nh, h, 0, e);
}

int tk_ssd_head_scatter_many_cuda(tk_ctx *c, tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e) {
    return heads_launch(c, t, nh, h, 1, e);
}

int tk_ssd_bias_relu_fwd_cuda(tk_ctx *c, tk_dtype t, void *y, int64_t M, int K, const float *b, int relu, tk_err *e) {
    TRY(tk_ssd_type_check(t, e));
    if (M < 0 || K < 1) return tk_err_set(e, TK_EINTERNAL, "ssd head: bad bias shape M %lld K %d", (long long)M, K);
    if (M == 0) return 0;
    TK_ACT_DISPATCH(t, "ssd bias", e,
                    bias_relu<T><<<tk_cu_blocks(M * K, kT), kT, 0, tk_cu_stream(c)>>>((T *)y, M, K, b, relu));
    return tk_cu_check(e, "ssd bias relu fwd");
}

int tk_ssd_relu_bwd_cuda(tk_ctx *c, tk_dtype t, int64_t n, const void *y, const void *dy, const void *dy2, void *dx,
                         tk_err *e) {
    TRY(tk_ssd_type_check(t, e));
    if (n <= 0) return 0;
    TK_ACT_DISPATCH(t, "ssd relu", e,
                    relu_bwd<T><<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>(n, (const T *)y, (const T *)dy,
                                                                          (const T *)dy2, (T *)dx));
    return tk_cu_check(e, "ssd relu bwd");
}

int tk_ssd_head_gather_cuda(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const void *src, float *out, tk_err *e) {
    TRY(tk_ssd_map_check(t, mp, e));
    const int64_t n = (int64_t)mp->N * mp->A * mp->nd * mp->HW;
    TK_ACT_DISPATCH(t, "ssd head", e,
                    gather<T><<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>(*mp, (const T *)src, out));
    return tk_cu_check(e, "ssd head gather");
}

int tk_ssd_head_scatter_cuda(tk_ctx *c, tk_dtype t, const tk_ssd_map *mp, const float *dout, void *dsrc, tk_err *e) {
    TRY(tk_ssd_map_check(t, mp, e));
    const int64_t n = (int64_t)mp->N * mp->A * mp->nd * mp->HW;
    TK_ACT_DISPATCH(t, "ssd head", e,
                    scatter<T><<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>(*mp, dout, (T *)dsrc));
    return tk_cu_check(e, "ssd head scatter");
}
