// CUDA side of kernels/hybrid_plan.h: the per-batch exchange plan, on the stream a->stream (it
// runs beside the training step, which is on the compute stream), with the reference's outputs bit
// for bit and nothing read back: the counts are written on the device.
//
// One index space covers both sides: the B*tn owned uses in (sample, table) order (already
// peer-major: peer j's samples are [j*b, (j+1)*b)), then this rank's b*T uses in owner-major,
// sample, table order (owner i's uses start at b*i*tm). Steps:
//   classify  each use's replica row (tk_hset_find); flag = infrequent; for the receiver part also
//             the sort's input: key = the row (nf when infrequent), value = the position
//   scan      inclusive sum of the flags (CUB): a flagged use's place in send_rows / recv_pos
//   scatter   send_rows and recv_pos; the counts from the scan at peer / owner boundaries
//   sort      the receiver's b*T (key, value) pairs by key (CUB radix, stable, only the bits nf
//             needs): the frequent uses by replica row, ties in enumeration order (the
//             reference's counting sort), the infrequent ones (key nf) after them
//   runs      flag the first use of each distinct row, scan, scatter seg_row / seg_off; nseg and
//             seg_off[nseg] = n_freq from the device
// Sorting all b*T pairs instead of the n_freq frequent ones keeps every size known on the host
// (CUB takes num_items from the host), so nothing waits for the device. The sorted tails of fpos
// and frow past n_freq hold the infrequent uses (key nf): outside the counts, like any leftover.
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include "cuda_util.cuh"
#include "hybrid_plan.h"

namespace {

// The bits a key in [0, nf] needs (nf itself marks an infrequent use); at least one.
int key_bits(int64_t nf) {
    int bits = 1;
    while (bits < 32 && ((int64_t)1 << bits) <= nf) bits++;
    return bits;
}

size_t scan_temp(int64_t n) {
    size_t bytes = 0;
    cub::DeviceScan::InclusiveSum(nullptr, bytes, (int32_t *)nullptr, (int)n);
    return bytes;
}
size_t sort_temp(int64_t n, int bits) {
    size_t bytes = 0;
    cub::DeviceRadixSort::SortPairs(nullptr, bytes, (const uint32_t *)nullptr, (uint32_t *)nullptr,
                                    (const int32_t *)nullptr, (int32_t *)nullptr, (int)n, 0, bits);
    return bytes;
}

// The workspace: flags, then their inclusive sum, in place (n_scan), the sort's input keys and
// values (bT each), and one CUB temp region shared by the three CUB calls (they run in turn on
// one stream). ws_bytes sizes it with n_scan = B*T + bT (tn <= T for any tm the check accepts).
struct PlanWs {
    int32_t *scan;
    uint32_t *keys;
    int32_t *vals;
    void *temp;
    size_t temp_bytes, total;
};

PlanWs plan_ws(void *base, int64_t n_scan, int64_t bT, int bits) {
    PlanWs l = {};
    size_t t1 = scan_temp(n_scan), t2 = sort_temp(bT, bits), t3 = scan_temp(bT);
    size_t temp = t1 > t2 ? t1 : t2;
    temp = temp > t3 ? temp : t3;
    char *p = (char *)base;
    size_t off = 0;
    l.scan = (int32_t *)(p + off), off += tk_cu_align(4 * (size_t)n_scan);
    l.keys = (uint32_t *)(p + off), off += tk_cu_align(4 * (size_t)bT);
    l.vals = (int32_t *)(p + off), off += tk_cu_align(4 * (size_t)bT);
    l.temp = p + off, l.temp_bytes = temp, off += tk_cu_align(temp);
    l.total = off;
    return l;
}

// The shape, in the int32 index space the kernels use (the check in tk_hybrid_plan_cuda keeps
// every index, position and count below 2^31).
struct Shape {
    const int32_t *cat;
    const uint64_t *hset;
    const int64_t *hoff, *fbase, *own_off;
    const int32_t *hbits;
    int T, tm, t0, tn, b, s0;
    uint32_t n_own, bT, nf; // B*tn, b*T
};

// The use at index q of the receiver part: its table, its sample, its position in the grouped
// layout. Owner i's b*tn_i uses start at b*i*tm and every owner before the last with tables
// has tm of them, so q / (b*tm) is the owner.
struct RecvUse {
    int t;
    uint32_t s;
    int32_t pos;
};
__device__ __forceinline__ RecvUse recv_use(const Shape &p, uint32_t q) {
    uint32_t btm = (uint32_t)p.b * (uint32_t)p.tm, i = q / btm, rem = q - i * btm;
    uint32_t ti0 = i * (uint32_t)p.tm, tni = min((uint32_t)p.tm, (uint32_t)p.T - ti0);
    uint32_t sl = rem / tni, lq = rem - sl * tni;
    RecvUse u;
    u.t = (int)(ti0 + lq);
    u.s = (uint32_t)p.s0 + sl;
    u.pos = (int32_t)((i * (uint32_t)p.b + sl) * (uint32_t)p.tm + lq);
    return u;
}

__global__ void plan_classify(Shape p, int32_t *flag, uint32_t *keys, int32_t *vals) {
    uint32_t n = p.n_own + p.bT;
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        if (k < p.n_own) {
            uint32_t s = k / (uint32_t)p.tn;
            int t = p.t0 + (int)(k - s * (uint32_t)p.tn);
            int32_t f = tk_hset_find(p.hset, p.hoff, p.hbits, p.fbase, t, p.cat[(size_t)s * p.T + t]);
            flag[k] = f < 0;
        } else {
            uint32_t q = k - p.n_own;
            RecvUse u = recv_use(p, q);
            int32_t f = tk_hset_find(p.hset, p.hoff, p.hbits, p.fbase, u.t, p.cat[(size_t)u.s * p.T + u.t]);
            flag[k] = f < 0;
            keys[q] = f < 0 ? p.nf : (uint32_t)f;
            vals[q] = u.pos;
        }
    }
}

// inc: the inclusive sum of the flags; a flagged use k goes to inc[k] - 1 of its side. Thread 0
// also writes the counts (the number of flags below x is inc[x - 1]).
__global__ void plan_scatter(Shape p, const int32_t *inc, int32_t *send_rows, int32_t *recv_pos, int64_t *counts,
                             int W) {
    uint32_t n = p.n_own + p.bT;
    int32_t n_send = p.n_own ? inc[p.n_own - 1] : 0;
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        int32_t prev = k ? inc[k - 1] : 0;
        if (inc[k] == prev) continue;
        if (k < p.n_own) {
            uint32_t s = k / (uint32_t)p.tn;
            int lt = (int)(k - s * (uint32_t)p.tn);
            send_rows[prev] = (int32_t)(p.own_off[lt] + p.cat[(size_t)s * p.T + p.t0 + lt]);
        } else {
            recv_pos[prev - n_send] = recv_use(p, k - p.n_own).pos;
        }
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        auto below = [&](uint32_t x) -> int64_t { return x ? inc[x - 1] : 0; };
        uint32_t bt = (uint32_t)p.b * (uint32_t)p.tn;
        for (int j = 0; j < W; j++) counts[j] = below((uint32_t)(j + 1) * bt) - below((uint32_t)j * bt);
        for (int i = 0; i < W; i++) {
            uint32_t lo = (uint32_t)min((int64_t)p.T, (int64_t)i * p.tm),
                     hi = (uint32_t)min((int64_t)p.T, (int64_t)(i + 1) * p.tm);
            counts[W + i] = below(p.n_own + (uint32_t)p.b * hi) - below(p.n_own + (uint32_t)p.b * lo);
        }
        int64_t n_recv = below(n) - n_send;
        counts[2 * W] = n_send;
        counts[2 * W + 1] = n_recv;
        counts[2 * W + 2] = (int64_t)p.bT - n_recv;
    }
}

// The first use of each distinct replica row in the sorted keys (infrequent ones, key nf, never).
__global__ void plan_heads(const uint32_t *frow, uint32_t n, uint32_t nf, int32_t *head) {
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x)
        head[k] = frow[k] < nf && (k == 0 || frow[k] != frow[k - 1]);
}

__global__ void plan_runs(const uint32_t *frow, uint32_t n, const int32_t *inc, int32_t *seg_row, int32_t *seg_off,
                          int64_t *counts, int W) {
    for (uint32_t k = blockIdx.x * blockDim.x + threadIdx.x; k < n; k += gridDim.x * blockDim.x) {
        int32_t prev = k ? inc[k - 1] : 0;
        if (inc[k] == prev) continue;
        seg_row[prev] = (int32_t)frow[k];
        seg_off[prev] = (int32_t)k;
    }
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        int32_t nseg = inc[n - 1];
        seg_off[nseg] = (int32_t)counts[2 * W + 2]; // n_freq, written by plan_scatter before
        counts[2 * W + 3] = nseg;
    }
}

// No uses (B = 0): every count is 0 and seg_off = {0}.
__global__ void plan_empty(int64_t *counts, int n, int32_t *seg_off) {
    for (int k = threadIdx.x; k < n; k += blockDim.x) counts[k] = 0;
    if (threadIdx.x == 0) seg_off[0] = 0;
}

} // namespace

size_t tk_hybrid_plan_ws_bytes_cuda(int B, int T, int W, int64_t nf) {
    int64_t bT = W > 0 && B > 0 && T > 0 ? (int64_t)(B / W) * T : 0, BT = B > 0 && T > 0 ? (int64_t)B * T : 0;
    if (BT + bT > INT32_MAX) return 0; // tk_hybrid_plan_cuda refuses this shape
    return plan_ws(nullptr, BT + bT, bT, key_bits(nf)).total;
}

int tk_hybrid_plan_cuda(tk_ctx *c, const tk_hybrid_plan_args *a, tk_err *e) {
    int tn;
    TRY(tk_hybrid_plan_check(a, &tn, e));
    if (a->stream < 0 || a->stream >= TK_NSTREAMS || !c->stream[a->stream])
        return tk_err_set(e, TK_EINTERNAL, "hybrid_plan: no stream %d", a->stream);
    const int W = a->W, T = a->T, tm = a->tm;
    const int64_t B = a->B, b = B / W, bT = b * T, n_own = B * tn;
    // 32-bit indices: the uses of both sides, the positions (< B*tm) and the workspace's bound.
    if (B < 0 || B * T + bT > INT32_MAX || B * tm > INT32_MAX)
        return tk_err_set(e, TK_EINTERNAL, "hybrid_plan: B %lld T %d tm %d: over 2^31 uses or positions",
                          (long long)B, T, tm);
    cudaStream_t s = (cudaStream_t)c->stream[a->stream];
    size_t off[7];
    tk_hybrid_plan_layout(a->B, T, W, a->rank, tm, off);
    int32_t *send_rows = a->out + off[0], *recv_pos = a->out + off[1], *fpos = a->out + off[2];
    int32_t *frow = a->out + off[3], *seg_row = a->out + off[4], *seg_off = a->out + off[5];
    if (bT == 0) {
        plan_empty<<<1, 32, 0, s>>>(a->counts, 2 * W + 4, seg_off);
        return tk_cu_check(e, "hybrid_plan");
    }
    const int bits = key_bits(a->nf);
    // The arrays sit where tk_hybrid_plan_ws_bytes_cuda put them; the CUB temp sizes are asked
    // again with this call's sizes and must fit in the region reserved for the bound.
    PlanWs l = plan_ws(a->ws, B * T + bT, bT, bits);
    const int64_t n = n_own + bT;
    size_t t1 = scan_temp(n), t2 = sort_temp(bT, bits), t3 = scan_temp(bT);
    if (t1 > l.temp_bytes || t2 > l.temp_bytes || t3 > l.temp_bytes)
        return tk_err_set(e, TK_EINTERNAL, "hybrid_plan: CUB temp storage %zu/%zu/%zu over the %zu reserved", t1, t2,
                          t3, l.temp_bytes);

    Shape p;
    p.cat = a->cat, p.hset = a->hset, p.hoff = a->hoff, p.fbase = a->fbase, p.own_off = a->own_off;
    p.hbits = a->hbits;
    p.T = T, p.tm = tm, p.t0 = a->rank * tm, p.tn = tn, p.b = (int)b, p.s0 = (int)(a->rank * b);
    p.n_own = (uint32_t)n_own, p.bT = (uint32_t)bT, p.nf = (uint32_t)a->nf;

    plan_classify<<<tk_cu_blocks(n, 256), 256, 0, s>>>(p, l.scan, l.keys, l.vals);
    TRY(tk_cu_check(e, "hybrid_plan (classify)"));
    TRY(tk_cu_check(e, "hybrid_plan (scan)", cub::DeviceScan::InclusiveSum(l.temp, t1, l.scan, (int)n, s)));
    plan_scatter<<<tk_cu_blocks(n, 256), 256, 0, s>>>(p, l.scan, send_rows, recv_pos, a->counts, W);
    TRY(tk_cu_check(e, "hybrid_plan (scatter)"));
    TRY(tk_cu_check(e, "hybrid_plan (sort)",
                    cub::DeviceRadixSort::SortPairs(l.temp, t2, l.keys, (uint32_t *)frow, l.vals, fpos, (int)bT, 0,
                                                    bits, s)));
    // The scan array is free again (plan_scatter has read it): the run heads and their sum.
    plan_heads<<<tk_cu_blocks(bT, 256), 256, 0, s>>>((const uint32_t *)frow, (uint32_t)bT, p.nf, l.scan);
    TRY(tk_cu_check(e, "hybrid_plan (heads)"));
    TRY(tk_cu_check(e, "hybrid_plan (scan runs)", cub::DeviceScan::InclusiveSum(l.temp, t3, l.scan, (int)bT, s)));
    plan_runs<<<tk_cu_blocks(bT, 256), 256, 0, s>>>((const uint32_t *)frow, (uint32_t)bT, l.scan, seg_row, seg_off,
                                                    a->counts, W);
    return tk_cu_check(e, "hybrid_plan (runs)");
}

// ---- the exchange matrix and the fixed-size layout ----

namespace {

// Each block counts into shared counters (W*W <= 4096), then adds them to mat.
__global__ void xcount_kernel(const int32_t *cat, const uint64_t *hset, const int64_t *hoff, const int32_t *hbits,
                              const int64_t *fbase, int64_t B, int T, int W, int tm, int64_t b,
                              unsigned long long *mat) {
    extern __shared__ unsigned int xc_sh[];
    for (int i = threadIdx.x; i < W * W; i += blockDim.x) xc_sh[i] = 0;
    __syncthreads();
    const int64_t n = B * T;
    for (int64_t u = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; u < n; u += (int64_t)gridDim.x * blockDim.x) {
        int64_t s = u / T;
        int t = (int)(u - s * T);
        if (tk_hset_find(hset, hoff, hbits, fbase, t, cat[u]) < 0) atomicAdd(&xc_sh[(t / tm) * W + (int)(s / b)], 1u);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < W * W; i += blockDim.x)
        if (xc_sh[i]) atomicAdd(&mat[i], (unsigned long long)xc_sh[i]);
}

__global__ void fixed_send_kernel(const int32_t *send_rows, const int64_t *counts, int W, int64_t cap,
                                  int32_t pad_row, int32_t *send_pad) {
    const int64_t n = (int64_t)W * cap;
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n; x += (int64_t)gridDim.x * blockDim.x) {
        int j = (int)(x / cap);
        int64_t q = x - j * cap, from = 0;
        for (int p = 0; p < j; p++) from += counts[p];
        send_pad[x] = q < counts[j] ? send_rows[from + q] : pad_row;
    }
}

__global__ void fixed_recv_kernel(const int64_t *counts, int W, int64_t cap, int64_t nmax, int32_t *recv_src) {
    const int64_t n = min(counts[2 * W + 1], nmax);
    for (int64_t x = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; x < n; x += (int64_t)gridDim.x * blockDim.x) {
        int64_t from = 0;
        int i = 0;
        while (i < W - 1 && x >= from + counts[W + i]) from += counts[W + i++];
        int64_t q = x - from;
        recv_src[x] = q < cap ? (int32_t)(i * cap + q) : -1;
    }
}

} // namespace

static int plan_stream(tk_ctx *c, const tk_hybrid_plan_args *a, cudaStream_t *s, tk_err *e) {
    if (a->stream < 0 || a->stream >= TK_NSTREAMS || !c->stream[a->stream])
        return tk_err_set(e, TK_EINTERNAL, "hybrid_plan: no stream %d", a->stream);
    *s = (cudaStream_t)c->stream[a->stream];
    return 0;
}

int tk_hybrid_exchange_counts_cuda(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t *mat, tk_err *e) {
    int tn;
    TRY(tk_hybrid_plan_check(a, &tn, e));
    cudaStream_t s = nullptr;
    TRY(plan_stream(c, a, &s, e));
    const int W = a->W;
    if (W > 64) return tk_err_set(e, TK_EINTERNAL, "hybrid_exchange_counts: %d ranks (at most 64: shared counters)", W);
    TRY(tk_cu_check(e, "hybrid_exchange_counts (memset)", cudaMemsetAsync(mat, 0, (size_t)W * W * 8, s)));
    const int64_t n = (int64_t)a->B * a->T;
    if (n == 0) return 0;
    xcount_kernel<<<tk_cu_blocks(n, 256 * 8), 256, (size_t)W * W * 4, s>>>(
        a->cat, a->hset, a->hoff, a->hbits, a->fbase, a->B, a->T, W, a->tm, a->B / W, (unsigned long long *)mat);
    return tk_cu_check(e, "hybrid_exchange_counts");
}

int tk_hybrid_plan_fixed_cuda(tk_ctx *c, const tk_hybrid_plan_args *a, int64_t cap, int32_t pad_row,
                              int32_t *send_pad, int32_t *recv_src, tk_err *e) {
    TRY(tk_hybrid_plan_fixed_check(a, cap, e));
    cudaStream_t s = nullptr;
    TRY(plan_stream(c, a, &s, e));
    const int W = a->W;
    size_t off[7];
    tk_hybrid_plan_layout(a->B, a->T, W, a->rank, a->tm, off);
    const int64_t nsend = (int64_t)W * cap, bT = (int64_t)(a->B / W) * a->T;
    if (nsend > 0)
        fixed_send_kernel<<<tk_cu_blocks(nsend, 256), 256, 0, s>>>(a->out + off[0], a->counts, W, cap, pad_row,
                                                                   send_pad);
    TRY(tk_cu_check(e, "hybrid_plan_fixed (send)"));
    if (bT > 0) fixed_recv_kernel<<<tk_cu_blocks(bT, 256), 256, 0, s>>>(a->counts, W, cap, bT, recv_src);
    return tk_cu_check(e, "hybrid_plan_fixed (recv)");
}
