// CUDA side of kernels/optim.h: multi-tensor kernels over the flat buffers. The work is cut into
// chunks of CH floats inside each segment (a segment of n floats has ceil(n / CH) chunks, so no
// chunk spans two tensors); block b of a launch takes chunk b, found by binary search in the
// chunks' prefix over segments (cstart, built on the device every call from the segments, so
// the call needs no host value beyond the segment count it was given). Elements go through
// 16-byte accesses when the segment's offset and every buffer are 16-byte aligned, else one by one.
//
// Launches per update (each kernel reads the scalars the previous ones left in the workspace):
//   [sumsq]  per chunk, fp64 sums of g^2 (and w^2 for LARS)          when the gradient norm or
//                                                                    LARS's norms are needed
//   prep     1 block: (the chunk prefix when sumsq did not need it first), the global norm, the
//            per-step scalars, LARS's per-segment rates; decrements *step on a skipped update
//   update   the element update (+ the compute copy)                 all but LAMB
//   LAMB: lamb1 (moments, per-chunk sums of w^2 and u^2), prep2 (per-segment rates), lamb2
//         (w -= rate * u with u recomputed from the new moments, + the copy)
// The distributed form (tk_optim_step_dist) adds: k_gsum (this rank's gradient sum of squares
// into the workspace's `mine`) before the host's gather and k_prep (which then adds the ranks'
// sums in rank order), and for LAMB k_slots (the per-tensor sums of the rank's pieces: each
// segment's sum as below, then a tensor's pieces in segment order) before the second gather and
// k_prep2 (which adds the ranks' per-tensor sums in rank order).
// Sums are deterministic: each chunk's partial is one block's fixed-order reduction, each
// segment's total one warp's fixed-order sum of its chunks' partials, the global total one
// block's fixed-order sum of all partials. No atomics, so eager runs, graph replays and repeated
// runs give the same bits.
#include <cuda_fp16.h>

#include "cuda_util.cuh"
#include "optim_math.h"

#define CH 16384     // floats per chunk: a multiple of 4 * THREADS
#define THREADS 256  // per block of the chunk kernels
#define PREP 1024    // threads of the one-block kernels

struct Hdr {
    tk_opt_scal sc;
};

// The workspace: header, chunk prefix (nseg + 1), per-segment rates (nseg), per-chunk partial
// sums (2 doubles per chunk, at most n / CH + nseg chunks); the distributed form's per-segment
// sums (2 nseg), this rank's sums (mine: 2 nslot + 1) and every rank's (all: world times that).
struct Ws {
    Hdr *hdr;
    int32_t *cstart;
    float *rate;
    double *part;
    double *segp, *mine, *all;
};

static size_t max_chunks(int nseg, size_t n) { return n / CH + (size_t)nseg + 1; }
static size_t red_count(const tk_optim_dist *d) { return d ? 2 * (size_t)d->nslot + 1 : 0; }

// The workspace's parts' sizes in bytes, in order.
static void ws_sizes(int nseg, size_t n, const tk_optim_dist *d, size_t sz[7]) {
    sz[0] = tk_cu_align(sizeof(Hdr));
    sz[1] = tk_cu_align(sizeof(int32_t) * ((size_t)nseg + 1));
    sz[2] = tk_cu_align(sizeof(float) * ((size_t)nseg + 1));
    sz[3] = tk_cu_align(2 * sizeof(double) * max_chunks(nseg, n));
    sz[4] = d ? tk_cu_align(2 * sizeof(double) * ((size_t)nseg + 1)) : 0;
    sz[5] = tk_cu_align(sizeof(double) * red_count(d));
    sz[6] = tk_cu_align(sizeof(double) * red_count(d) * (size_t)(d ? d->world : 0));
}

static Ws ws_carve(void *ws, int nseg, size_t n, const tk_optim_dist *d) {
    size_t sz[7];
    ws_sizes(nseg, n, d, sz);
    char *p = (char *)ws;
    void *at[7];
    for (int i = 0; i < 7; i++) at[i] = p, p += sz[i];
    Ws w;
    w.hdr = (Hdr *)at[0];
    w.cstart = (int32_t *)at[1];
    w.rate = (float *)at[2];
    w.part = (double *)at[3];
    w.segp = d ? (double *)at[4] : nullptr;
    w.mine = d ? (double *)at[5] : nullptr;
    w.all = d ? (double *)at[6] : nullptr;
    return w;
}

size_t tk_optim_ws_bytes_cuda(int nseg, size_t n, const tk_optim_dist *d) {
    size_t sz[7], t = 0;
    ws_sizes(nseg, n, d, sz);
    for (int i = 0; i < 7; i++) t += sz[i];
    return t;
}

// ---- block-level helpers (fixed reduction trees: deterministic) ----

__device__ static double warp_sum(double x) {
    for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(0xffffffffu, x, o);
    return x;
}

// Sums a and b over the block; the totals are valid in thread 0.
__device__ static void block_sum2(double &a, double &b) {
    __shared__ double sa[32], sb[32];
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = (blockDim.x + 31) >> 5;
    a = warp_sum(a), b = warp_sum(b);
    if (lane == 0) sa[wid] = a, sb[wid] = b;
    __syncthreads();
    if (wid == 0) {
        a = lane < nw ? sa[lane] : 0, b = lane < nw ? sb[lane] : 0;
        a = warp_sum(a), b = warp_sum(b);
    }
    __syncthreads();
}

// cstart[s] = chunks of segments before s; cstart[nseg] = all chunks. One block of PREP threads.
__device__ static void plan(const tk_opt_seg *seg, int nseg, int32_t *cstart) {
    __shared__ int32_t wsum[32];
    __shared__ int32_t carry;
    int lane = threadIdx.x & 31, wid = threadIdx.x >> 5;
    if (threadIdx.x == 0) carry = 0;
    __syncthreads();
    for (int base = 0; base < nseg; base += PREP) {
        int s = base + (int)threadIdx.x;
        int32_t x = s < nseg ? (int32_t)((seg[s].n + CH - 1) / CH) : 0, incl = x;
        for (int o = 1; o < 32; o <<= 1) {
            int32_t y = __shfl_up_sync(0xffffffffu, incl, o);
            if (lane >= o) incl += y;
        }
        if (lane == 31) wsum[wid] = incl;
        __syncthreads();
        if (wid == 0) {
            int32_t v = wsum[lane];
            for (int o = 1; o < 32; o <<= 1) {
                int32_t y = __shfl_up_sync(0xffffffffu, v, o);
                if (lane >= o) v += y;
            }
            wsum[lane] = v;
        }
        __syncthreads();
        int32_t before = carry + (wid > 0 ? wsum[wid - 1] : 0) + incl - x;
        if (s < nseg) cstart[s] = before;
        __syncthreads();
        if (threadIdx.x == 0) carry += wsum[31];
        __syncthreads();
    }
    if (threadIdx.x == 0) cstart[nseg] = carry;
}

// ---- chunks ----

struct Chunk {
    int64_t lo, hi;
    int s;
    int32_t flags;
    bool vec;
};

__device__ static Chunk chunk_of(const tk_opt_seg *seg, const int32_t *cstart, int nseg, bool vec_ok) {
    int b = (int)blockIdx.x, lo = 0, hi = nseg; // cstart[lo] <= b < cstart[hi]
    while (hi - lo > 1) {
        int mid = (lo + hi) >> 1;
        if (cstart[mid] <= b) lo = mid;
        else hi = mid;
    }
    Chunk c;
    c.s = lo;
    c.flags = seg[lo].flags;
    int64_t end = seg[lo].off + seg[lo].n;
    c.lo = seg[lo].off + (int64_t)(b - cstart[lo]) * CH;
    c.hi = c.lo + CH < end ? c.lo + CH : end;
    c.vec = vec_ok && (seg[lo].off & 3) == 0;
    return c;
}

// Calls body.template run<4>(i) for each aligned group of four and run<1>(i) for the rest, each
// thread in a fixed order (what makes its partial sums reproducible).
template <class Body> __device__ static void walk(const Chunk &c, Body &body) {
    int64_t i0 = c.lo;
    if (c.vec) {
        int64_t nv = (c.hi - c.lo) >> 2;
        for (int64_t j = threadIdx.x; j < nv; j += blockDim.x) body.template run<4>(c.lo + 4 * j);
        i0 = c.lo + 4 * nv;
    }
    for (int64_t i = i0 + threadIdx.x; i < c.hi; i += blockDim.x) body.template run<1>(i);
}

template <int N> __device__ static void load(float (&r)[N], const float *p) {
    if (N == 4) {
        float4 t = *reinterpret_cast<const float4 *>(p);
        r[0] = t.x, r[1] = t.y, r[2] = t.z, r[3] = t.w;
    } else {
        r[0] = *p;
    }
}
template <int N> __device__ static void store(float *p, const float (&r)[N]) {
    if (N == 4) *reinterpret_cast<float4 *>(p) = make_float4(r[0], r[1], r[2], r[3]);
    else *p = r[0];
}
// ctype: 0 none, 1 bf16, 2 f16 (round to nearest even, as the reference).
template <int N> __device__ static void store_copy(void *copy, int ctype, int64_t i, const float (&r)[N]) {
    if (!ctype) return;
    unsigned short h[N];
    for (int j = 0; j < N; j++)
        h[j] = ctype == 1 ? __bfloat16_as_ushort(__float2bfloat16_rn(r[j])) : __half_as_ushort(__float2half_rn(r[j]));
    unsigned short *p = (unsigned short *)copy + i;
    if (N == 4) *reinterpret_cast<uint2 *>(p) = make_uint2(h[0] | (unsigned)h[1] << 16, h[2] | (unsigned)h[3] << 16);
    else *p = h[0];
}

// The arguments every chunk kernel takes.
struct Args {
    float *w;
    const float *g;
    float *m, *v;
    void *copy;
    int ctype;
    const tk_opt_seg *seg;
    int nseg;
    bool vec_ok;
    Ws ws;
};

// ---- sums of squares ----

struct SumSq {
    const float *g, *w; // w NULL: g only
    double ag, aw;
    template <int N> __device__ void run(int64_t i) {
        float a[N], b[N];
        load<N>(a, g + i);
        for (int j = 0; j < N; j++) ag += (double)a[j] * a[j];
        if (w) {
            load<N>(b, w + i);
            for (int j = 0; j < N; j++) aw += (double)b[j] * b[j];
        }
    }
};

// part[2c] = sum g^2, part[2c + 1] = sum w^2 (LARS) over chunk c.
__global__ static void __launch_bounds__(THREADS) k_sumsq(Args a, bool with_w) {
    Chunk c = chunk_of(a.seg, a.ws.cstart, a.nseg, a.vec_ok);
    SumSq body = {a.g, with_w ? a.w : nullptr, 0, 0};
    walk(c, body);
    block_sum2(body.ag, body.aw);
    if (threadIdx.x == 0) a.ws.part[2 * blockIdx.x] = body.ag, a.ws.part[2 * blockIdx.x + 1] = body.aw;
}

// Sum over segment s's chunks of part[2c + j], in warp lane order (deterministic).
__device__ static double seg_sum(const Ws &ws, int s, int j) {
    double x = 0;
    for (int c = ws.cstart[s] + (threadIdx.x & 31); c < ws.cstart[s + 1]; c += 32) x += ws.part[2 * c + j];
    return warp_sum(x);
}

// This rank's gradient sum of squares over all its chunks (valid in thread 0).
__device__ static double chunks_gsq(const Ws &ws, int nseg) {
    double gsq = 0, unused = 0;
    for (int c = threadIdx.x; c < ws.cstart[nseg]; c += blockDim.x) gsq += ws.part[2 * c];
    block_sum2(gsq, unused);
    return gsq;
}

// The distributed form: mine[0] = this rank's gradient sum of squares.
__global__ static void __launch_bounds__(PREP) k_gsum(Args a) {
    double gsq = chunks_gsq(a.ws, a.nseg);
    if (threadIdx.x == 0) a.ws.mine[0] = gsq;
}

// The one-block step: [chunk prefix], global gradient norm, scalars, LARS's per-segment rates.
// world > 0 (the distributed form): the norm is the sum of the ranks' sums gathered in ws.all.
__global__ static void __launch_bounds__(PREP) k_prep(const tk_opt_hp hp, Args a, bool do_plan, bool have_sums,
                                                      int world, const float *lr, int64_t *step) {
    if (do_plan) plan(a.seg, a.nseg, a.ws.cstart);
    __syncthreads();
    double gsq = 0;
    if (have_sums && !world) gsq = chunks_gsq(a.ws, a.nseg);
    if (have_sums && world && threadIdx.x == 0)
        for (int r = 0; r < world; r++) gsq += a.ws.all[r];
    __shared__ tk_opt_scal sc;
    if (threadIdx.x == 0) {
        sc = tk_opt_scalars(&hp, *lr, *step, gsq);
        a.ws.hdr->sc = sc;
        if (sc.skip) *step = sc.t - 1;
    }
    __syncthreads();
    if (hp.kind != TK_OPT_LARS || sc.skip) return;
    for (int s = threadIdx.x >> 5; s < a.nseg; s += blockDim.x >> 5) {
        double wsq = seg_sum(a.ws, s, 1), g2 = seg_sum(a.ws, s, 0);
        if ((threadIdx.x & 31) == 0) a.ws.rate[s] = tk_opt_seg_rate(&hp, &sc, a.seg[s].flags, wsq, g2);
    }
}

// ---- the element updates ----

// What every element kernel's body holds.
struct Base {
    Args a;
    tk_opt_k k;
    tk_opt_scal sc;
    float rate, wd;
};

// Fills b and c for this block; false when the update is skipped. seg_rate: the rate is the
// segment's (LARS, LAMB's second stage) rather than the schedule's.
__device__ static bool begin(const tk_opt_hp &hp, const Args &a, bool seg_rate, Chunk &c, Base &b) {
    b.sc = a.ws.hdr->sc;
    if (b.sc.skip) return false;
    c = chunk_of(a.seg, a.ws.cstart, a.nseg, a.vec_ok);
    b.a = a;
    b.k = tk_opt_consts(&hp);
    b.wd = tk_opt_seg_wd(&b.k, c.flags);
    b.rate = seg_rate ? a.ws.rate[c.s] : b.sc.lr;
    return true;
}

template <int KIND> struct Update : Base {
    template <int N> __device__ void run(int64_t i) {
        float w[N], g[N], m[N], v[N];
        load<N>(w, a.w + i);
        load<N>(g, a.g + i);
        if (KIND != TK_OPT_SGD) load<N>(m, a.m + i);
        if (KIND == TK_OPT_ADAM) load<N>(v, a.v + i);
        for (int j = 0; j < N; j++) tk_opt_elem(&k, &sc, rate, wd, &w[j], g[j], &m[j], &v[j]);
        store<N>(a.w + i, w);
        if (KIND != TK_OPT_SGD) store<N>(a.m + i, m);
        if (KIND == TK_OPT_ADAM) store<N>(a.v + i, v);
        store_copy<N>(a.copy, a.ctype, i, w);
    }
};

// KIND: TK_OPT_SGD (no state), TK_OPT_MOMENTUM (m; also LARS), TK_OPT_ADAM (m, v; also AdamW):
// what is loaded and stored. hp.kind picks the formula.
template <int KIND> __global__ static void __launch_bounds__(THREADS) k_update(const tk_opt_hp hp, Args a) {
    Chunk c;
    Update<KIND> body;
    if (begin(hp, a, hp.kind == TK_OPT_LARS, c, body)) walk(c, body);
}

// LAMB stage 1: moments, and per chunk part[2c] = sum w^2, part[2c + 1] = sum u^2.
struct Lamb1 : Base {
    double aw, au;
    template <int N> __device__ void run(int64_t i) {
        float w[N], g[N], m[N], v[N];
        load<N>(w, a.w + i), load<N>(g, a.g + i), load<N>(m, a.m + i), load<N>(v, a.v + i);
        for (int j = 0; j < N; j++) {
            float u = tk_opt_lamb_moments(&k, &sc, wd, w[j], g[j], &m[j], &v[j]);
            aw += (double)w[j] * w[j];
            au += (double)u * u;
        }
        store<N>(a.m + i, m), store<N>(a.v + i, v);
    }
};

__global__ static void __launch_bounds__(THREADS) k_lamb1(const tk_opt_hp hp, Args a) {
    Chunk c;
    Lamb1 body;
    if (!begin(hp, a, false, c, body)) return;
    body.aw = body.au = 0;
    walk(c, body);
    block_sum2(body.aw, body.au);
    if (threadIdx.x == 0) a.ws.part[2 * blockIdx.x] = body.aw, a.ws.part[2 * blockIdx.x + 1] = body.au;
}

// The distributed form, LAMB: mine[2p], mine[2p + 1] = this rank's ||w||^2, ||u||^2 of tensor p
// (its pieces' sums in segment order; 0 for a tensor with no piece here).
__global__ static void __launch_bounds__(PREP) k_slots(Args a, int nslot) {
    if (a.ws.hdr->sc.skip) return;
    for (int i = threadIdx.x; i < 2 * nslot; i += blockDim.x) a.ws.mine[i] = 0;
    for (int s = threadIdx.x >> 5; s < a.nseg; s += blockDim.x >> 5) {
        double x = seg_sum(a.ws, s, 0), y = seg_sum(a.ws, s, 1);
        if ((threadIdx.x & 31) == 0) a.ws.segp[2 * s] = x, a.ws.segp[2 * s + 1] = y;
    }
    __syncthreads();
    for (int s = threadIdx.x; s < a.nseg; s += blockDim.x) {
        int p = a.seg[s].slot;
        if (s > 0 && a.seg[s - 1].slot == p) continue; // (the tensor's first piece adds them all)
        double x = 0, y = 0;
        for (int j = s; j < a.nseg && a.seg[j].slot == p; j++) x += a.ws.segp[2 * j], y += a.ws.segp[2 * j + 1];
        a.ws.mine[2 * p] = x, a.ws.mine[2 * p + 1] = y;
    }
}

// LAMB: per-segment rate = lr * ||w|| / ||u|| (or lr). stride > 0 (the distributed form): the
// norms are the ranks' per-tensor sums gathered in ws.all (stride = 2 nslot a rank), added in
// rank order.
__global__ static void __launch_bounds__(PREP) k_prep2(const tk_opt_hp hp, Args a, int world, int stride) {
    const tk_opt_scal sc = a.ws.hdr->sc;
    if (sc.skip) return;
    if (world) {
        for (int s = threadIdx.x; s < a.nseg; s += blockDim.x) {
            double wsq = 0, usq = 0;
            const double *x = a.ws.all + 2 * (size_t)a.seg[s].slot;
            for (int r = 0; r < world; r++) wsq += x[(size_t)r * stride], usq += x[(size_t)r * stride + 1];
            a.ws.rate[s] = tk_opt_seg_rate(&hp, &sc, a.seg[s].flags, wsq, usq);
        }
        return;
    }
    for (int s = threadIdx.x >> 5; s < a.nseg; s += blockDim.x >> 5) {
        double wsq = seg_sum(a.ws, s, 0), usq = seg_sum(a.ws, s, 1);
        if ((threadIdx.x & 31) == 0) a.ws.rate[s] = tk_opt_seg_rate(&hp, &sc, a.seg[s].flags, wsq, usq);
    }
}

// LAMB stage 2: w -= rate * u, u recomputed from the new moments.
struct Lamb2 : Base {
    template <int N> __device__ void run(int64_t i) {
        float w[N], m[N], v[N];
        load<N>(w, a.w + i), load<N>(m, a.m + i), load<N>(v, a.v + i);
        for (int j = 0; j < N; j++) w[j] = TK_FSUB(w[j], TK_FMUL(rate, tk_opt_lamb_u(&k, &sc, wd, w[j], m[j], v[j])));
        store<N>(a.w + i, w);
        store_copy<N>(a.copy, a.ctype, i, w);
    }
};

__global__ static void __launch_bounds__(THREADS) k_lamb2(const tk_opt_hp hp, Args a) {
    Chunk c;
    Lamb2 body;
    if (begin(hp, a, true, c, body)) walk(c, body);
}

__global__ static void __launch_bounds__(PREP) k_plan(Args a) { plan(a.seg, a.nseg, a.ws.cstart); }

static bool aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

// The distributed form's launches (the chunk kernels only where this rank has chunks), the
// gathers queued from the host between them (d->gather orders them after the compute stream's
// work and the compute stream's next work after them).
static int step_dist(tk_ctx *c, const tk_opt_hp *hp, const Args &a, const tk_optim_dist *d, unsigned grid, bool sums,
                     const float *lr, int64_t *step, tk_err *e) {
    cudaStream_t st = tk_cu_stream(c);
    k_plan<<<1, PREP, 0, st>>>(a);
    if (sums) {
        if (grid) k_sumsq<<<grid, THREADS, 0, st>>>(a, false);
        k_gsum<<<1, PREP, 0, st>>>(a);
        TRY(tk_cu_check(e, "optim_step gsum"));
        TRY(d->gather(d->arg, a.ws.mine, a.ws.all, 1, e));
    }
    k_prep<<<1, PREP, 0, st>>>(*hp, a, false, sums, d->world, lr, step);
    switch (hp->kind) {
    case TK_OPT_SGD:
        if (grid) k_update<TK_OPT_SGD><<<grid, THREADS, 0, st>>>(*hp, a);
        break;
    case TK_OPT_MOMENTUM:
        if (grid) k_update<TK_OPT_MOMENTUM><<<grid, THREADS, 0, st>>>(*hp, a);
        break;
    case TK_OPT_ADAM:
    case TK_OPT_ADAMW:
        if (grid) k_update<TK_OPT_ADAM><<<grid, THREADS, 0, st>>>(*hp, a);
        break;
    case TK_OPT_LAMB:
        if (grid) k_lamb1<<<grid, THREADS, 0, st>>>(*hp, a);
        k_slots<<<1, PREP, 0, st>>>(a, d->nslot);
        TRY(tk_cu_check(e, "optim_step slots"));
        // (a skipped update still gathers: every rank must issue the same collectives)
        TRY(d->gather(d->arg, a.ws.mine, a.ws.all, 2 * (size_t)d->nslot, e));
        k_prep2<<<1, PREP, 0, st>>>(*hp, a, d->world, 2 * d->nslot);
        if (grid) k_lamb2<<<grid, THREADS, 0, st>>>(*hp, a);
        break;
    default: return tk_err_set(e, TK_EINTERNAL, "optim: the distributed form does not run %s", tk_opt_kind_name(hp->kind));
    }
    return tk_cu_check(e, "optim_step");
}

int tk_optim_step_cuda(tk_ctx *c, const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                       const tk_opt_seg *seg_dev, const tk_opt_seg *seg_host, int nseg, const tk_optim_dist *d,
                       const float *lr, int64_t *step, void *copy, tk_dtype copy_type, void *ws, tk_err *e) {
    TRY(tk_optim_check_dist(hp, n, seg_host, nseg, d, copy ? copy_type : TK_BF16, e));
    size_t ns = tk_optim_state_floats(hp->kind);
    if (ns > 0 && !state) return tk_err_set(e, TK_EINTERNAL, "optim: %s needs a state buffer", tk_opt_kind_name(hp->kind));
    if (!ws) return tk_err_set(e, TK_EINTERNAL, "optim: no workspace");
    int64_t nchunks = 0;
    for (int s = 0; s < nseg; s++) nchunks += (seg_host[s].n + CH - 1) / CH;
    if (nchunks > INT32_MAX) return tk_err_set(e, TK_EINTERNAL, "optim: %lld chunks", (long long)nchunks);
    if (nchunks == 0 && !d) return 0; // (a rank of the distributed form joins the gathers regardless)
    Args a;
    a.w = w, a.g = g, a.m = ns > 0 ? state : nullptr, a.v = ns > 1 ? state + n : nullptr;
    a.copy = copy, a.ctype = !copy ? 0 : copy_type == TK_BF16 ? 1 : 2;
    a.seg = seg_dev, a.nseg = nseg;
    a.vec_ok = aligned(w, 16) && aligned(g, 16) && (!a.m || aligned(a.m, 16)) && (!a.v || aligned(a.v, 16)) &&
               (!copy || aligned(copy, 8));
    a.ws = ws_carve(ws, nseg, n, d);
    cudaStream_t st = tk_cu_stream(c);
    unsigned grid = (unsigned)nchunks;
    bool sums = tk_opt_needs_gnorm(hp);
    if (d) return step_dist(c, hp, a, d, grid, sums, lr, step, e);
    if (sums) {
        k_plan<<<1, PREP, 0, st>>>(a);
        k_sumsq<<<grid, THREADS, 0, st>>>(a, hp->kind == TK_OPT_LARS);
    }
    k_prep<<<1, PREP, 0, st>>>(*hp, a, !sums, sums, 0, lr, step);
    switch (hp->kind) {
    case TK_OPT_SGD: k_update<TK_OPT_SGD><<<grid, THREADS, 0, st>>>(*hp, a); break;
    case TK_OPT_MOMENTUM:
    case TK_OPT_LARS: k_update<TK_OPT_MOMENTUM><<<grid, THREADS, 0, st>>>(*hp, a); break;
    case TK_OPT_ADAM:
    case TK_OPT_ADAMW: k_update<TK_OPT_ADAM><<<grid, THREADS, 0, st>>>(*hp, a); break;
    case TK_OPT_LAMB:
        k_lamb1<<<grid, THREADS, 0, st>>>(*hp, a);
        k_prep2<<<1, PREP, 0, st>>>(*hp, a, 0, 0);
        k_lamb2<<<grid, THREADS, 0, st>>>(*hp, a);
        break;
    }
    return tk_cu_check(e, "optim_step");
}
