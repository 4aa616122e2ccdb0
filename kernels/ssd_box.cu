// CUDA side of kernels/ssd_box.h.
// Matching: best_gt, one warp per ground truth, finds its best default box (lanes scan a strided
// range keeping the first maximum, then a shuffle reduction that keeps the lower index on ties);
// assign, one thread per (image, default box), finds the box's best ground truth, applies the
// forced matches in ground-truth order and writes the label and the xywh box. IoU and the box
// conversion use the _rn intrinsics so nothing is contracted into an FMA: the same fp32 numbers
// as the reference, bit for bit.
// Loss: terms, one warp per box, the log-sum-exp, the cross-entropy, the mining key and the Smooth
// L1 of a positive; mine, one block per image, counts the positives, finds the mining's
// threshold key by a radix select over the keys' bits (non-negative floats order as their bits;
// four 8-bit digits, each a 256-bin histogram), takes the keys above it and the first of the keys
// equal to it in index order (a block scan of per-thread counts over contiguous ranges: the
// stable sort's tie order), and adds the image's sums in fp64 in a fixed tree; finish adds the
// images in order; grad, one warp 32 boxes (their weights, labels and lse loaded at once, a lane a
// box), writes both gradients. Deterministic (the histogram's
// shared-memory atomics add integers).
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "act_types.cuh"
#include "ssd_box.h"

namespace {

constexpr int kT = 256, kSelT = 512, kWarps = kT / 32, kGtBlocks = 8;

__device__ __forceinline__ float iou_rn(const float *a, const float *b) {
    float dx = __fsub_rn(fminf(a[2], b[2]), fmaxf(a[0], b[0])), dy = __fsub_rn(fminf(a[3], b[3]), fmaxf(a[1], b[1]));
    if (dx < 0) dx = 0;
    if (dy < 0) dy = 0;
    const float inter = __fmul_rn(dx, dy), a1 = __fmul_rn(__fsub_rn(a[2], a[0]), __fsub_rn(a[3], a[1])),
                a2 = __fmul_rn(__fsub_rn(b[2], b[0]), __fsub_rn(b[3], b[1]));
    return __fdiv_rn(inter, __fsub_rn(__fadd_rn(a1, a2), inter));
}

// Grid (N, kGtBlocks), kT threads: bestd[j] = the first default box of maximal IoU with ground
// truth j, one warp per ground truth (several blocks an image, so that a small batch fills the GPU).
__global__ void __launch_bounds__(kT)
    best_gt(const float *gt, const int32_t *off, const float *db, int D, int32_t *bestd) {
    const int n = blockIdx.x, lane = threadIdx.x & 31;
    const int32_t g0 = off[n], g1 = off[n + 1];
    for (int32_t j = g0 + (int)(blockIdx.y * kWarps + (threadIdx.x >> 5)); j < g1; j += kWarps * gridDim.y) {
        float bv = -INFINITY;
        int bi = D;
        for (int d = lane; d < D; d += 32) {
            const float v = iou_rn(gt + (size_t)j * 4, db + (size_t)d * 4);
            if (bi == D || v > bv) bv = v, bi = d;
        }
        for (int o = 16; o > 0; o >>= 1) {
            const float ov = __shfl_down_sync(0xffffffffu, bv, o);
            const int oi = __shfl_down_sync(0xffffffffu, bi, o);
            if (ov > bv || (ov == bv && oi < bi)) bv = ov, bi = oi;
        }
        if (lane == 0) bestd[j] = bi;
    }
}

// Grid (ceil(D / kT), N): default box d of image n.
__global__ void __launch_bounds__(kT) assign(const float *gt, const int32_t *gt_label, const int32_t *off,
                                             const float *db, int D, float thresh, const int32_t *bestd, float *box,
                                             int32_t *label) {
    const int n = blockIdx.y, d = blockIdx.x * kT + threadIdx.x;
    if (d >= D) return;
    const int32_t g0 = off[n], g1 = off[n + 1];
    const float *a = db + (size_t)d * 4;
    float bv = -INFINITY;
    int32_t bg = -1;
    for (int32_t j = g0; j < g1; j++) {
        const float v = iou_rn(gt + (size_t)j * 4, a);
        if (bg < 0 || v > bv) bv = v, bg = j;
    }
    for (int32_t j = g0; j < g1; j++)
        if (bestd[j] == d) bv = 2.0f, bg = j;
    const int hit = bg >= 0 && bv > thresh;
    const float *b = hit ? gt + (size_t)bg * 4 : a;
    const size_t i = (size_t)n * D + d;
    label[i] = hit ? gt_label[bg] : 0;
    box[i * 4 + 0] = 0.5f * __fadd_rn(b[0], b[2]), box[i * 4 + 1] = 0.5f * __fadd_rn(b[1], b[3]);
    box[i * 4 + 2] = __fsub_rn(b[2], b[0]), box[i * 4 + 3] = __fsub_rn(b[3], b[1]);
}

// The regression target's coordinate k of box i (_loc_vec, fp32) and ploc minus it.
__device__ __forceinline__ float loc_resid(float p, const float *g, const float *a, int k) {
    const float t = k < 2 ? 10.0f * (g[k] - a[k]) / a[k + 2] : 5.0f * logf(g[k] / a[k]);
    return p - t;
}

struct LossWs {
    float *con, *lse, *key, *sl1;
    uint8_t *w;
    double *tot;
    int *pos;
};
LossWs loss_ws(void *ws, int N, int D) {
    const size_t nd = (size_t)N * D;
    char *p = (char *)ws;
    LossWs l;
    l.con = (float *)p, p += tk_cu_align(nd * 4);
    l.lse = (float *)p, p += tk_cu_align(nd * 4);
    l.key = (float *)p, p += tk_cu_align(nd * 4);
    l.sl1 = (float *)p, p += tk_cu_align(nd * 4);
    l.w = (uint8_t *)p, p += tk_cu_align(nd);
    l.tot = (double *)p, p += tk_cu_align((size_t)N * 8);
    l.pos = (int *)p;
    return l;
}

// A label as the kernels take it: outside [0, C), 0.
__device__ __forceinline__ int label_in(int y, int C) { return y < 0 || y >= C ? 0 : y; }
__device__ __forceinline__ int label_of(const int32_t *label, size_t i, int C) { return label_in(label[i], C); }

// One warp per box (grid-stride): con, lse, the mining key, and the positive's Smooth L1 sum.
// K > 0 (C <= 32 K): the row's values in registers, K a lane, all loaded at once (one pass over
// pconf; the label's value shuffled from the lane holding it), and the warp's next box's row and
// label loaded before this box's sums (two boxes' loads in flight a warp); K = 0: any C, the row
// read per pass (max, sum, the label's). Either adds the same numbers in the same order.
template <typename T, int K>
__global__ void __launch_bounds__(kT) terms(const T *ploc, const T *pconf, const float *gbox, const int32_t *label,
                                            const float *dbox, int N, int D, int C, LossWs l) {
    const int lane = threadIdx.x & 31;
    const size_t nb = (size_t)N * D, step = ((size_t)gridDim.x * kT) >> 5;
    size_t i = ((size_t)blockIdx.x * kT + threadIdx.x) >> 5;
    T raw[K > 0 ? K : 1]; // K > 0: box i's values as loaded (lanes past C: unused)
    int32_t yraw = 0;     // and its label
    auto fetch = [&](size_t b) {
#pragma unroll
        for (int k = 0; k < K; k++)
            if (lane + 32 * k < C) raw[k] = pconf[b * C + lane + 32 * k];
        yraw = label[b];
    };
    if constexpr (K > 0) {
#pragma unroll
        for (int k = 0; k < K; k++) raw[k] = tk_to<T>(0.0f);
        if (i < nb) fetch(i);
    }
    for (; i < nb; i += step) {
        int y;
        float mx = -INFINITY, s = 0, zy;
        if constexpr (K > 0) {
            float v[K > 0 ? K : 1];
#pragma unroll
            for (int k = 0; k < K; k++) v[k] = lane + 32 * k < C ? tk_f(raw[k]) : -INFINITY;
            y = label_in(yraw, C);
            if (i + step < nb) fetch(i + step);
#pragma unroll
            for (int k = 0; k < K; k++) mx = fmaxf(mx, v[k]);
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
#pragma unroll
            for (int k = 0; k < K; k++)
                if (lane + 32 * k < C) s += expf(v[k] - mx);
            float own = 0; // the label's value, on lane y % 32 (selected, not indexed: v stays in registers)
#pragma unroll
            for (int k = 0; k < K; k++)
                if (lane + 32 * k == y) own = v[k];
            zy = __shfl_sync(0xffffffffu, own, y & 31);
        } else {
            const T *z = pconf + i * C;
            y = label_of(label, i, C);
            for (int c = lane; c < C; c += 32) mx = fmaxf(mx, tk_f(z[c]));
            for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
            for (int c = lane; c < C; c += 32) s += expf(tk_f(z[c]) - mx);
            zy = tk_f(z[y]);
        }
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        float r = 0;
        if (y > 0 && lane < 4) {
            const size_t d = i % (size_t)D;
            const float x = fabsf(loc_resid(tk_f(ploc[i * 4 + lane]), gbox + i * 4, dbox + d * 4, lane));
            r = x < 1.0f ? 0.5f * x * x : x - 0.5f;
        }
        r += __shfl_down_sync(0xffffffffu, r, 2);
        r += __shfl_down_sync(0xffffffffu, r, 1);
        if (lane == 0) {
            const float lse = mx + logf(s), con = lse - zy;
            l.con[i] = con, l.lse[i] = lse, l.sl1[i] = r;
            l.key[i] = y > 0 || !(con > 0) ? 0.0f : con;
        }
    }
}

// One block per image: positives, the mining (radix select), weights and the image's sums.
__global__ void __launch_bounds__(kSelT) mine(const int32_t *label, int D, int C, LossWs l, uint8_t *sel) {
    typedef cub::BlockReduce<int, kSelT> RedI;
    typedef cub::BlockReduce<double, kSelT> RedD;
    typedef cub::BlockScan<int, kSelT> Scan;
    __shared__ union {
        typename RedI::TempStorage ri;
        typename RedD::TempStorage rd;
        typename Scan::TempStorage sc;
    } tmp;
    __shared__ unsigned hist[256];
    __shared__ unsigned s_prefix, s_need;
    __shared__ int s_pos;
    const int n = blockIdx.x;
    const size_t base = (size_t)n * D;
    const uint32_t *key = (const uint32_t *)(l.key + base); // >= 0: ordered as unsigned bits
    int p = 0;
    for (int d = threadIdx.x; d < D; d += kSelT) p += label_of(label, base + d, C) > 0;
    p = RedI(tmp.ri).Sum(p);
    if (threadIdx.x == 0) s_pos = p;
    __syncthreads();
    const int P = s_pos, nneg = TK_SSD_NEG_RATIO * P < D ? TK_SSD_NEG_RATIO * P : D;
    // the nneg-th largest key, K, and how many keys equal to K are taken (need)
    uint32_t prefix = 0, mask = 0, need = (uint32_t)nneg;
    for (int shift = 24; nneg > 0 && shift >= 0; shift -= 8) {
        for (int b = threadIdx.x; b < 256; b += kSelT) hist[b] = 0;
        __syncthreads();
        for (int d = threadIdx.x; d < D; d += kSelT)
            if ((key[d] & mask) == prefix) atomicAdd(&hist[(key[d] >> shift) & 255u], 1u);
        __syncthreads();
        if (threadIdx.x == 0) {
            int b = 255;
            for (; b > 0 && hist[b] < need; b--) need -= hist[b];
            s_prefix = prefix | ((uint32_t)b << shift), s_need = need;
        }
        __syncthreads();
        prefix = s_prefix, need = s_need, mask |= 255u << shift;
        __syncthreads(); // hist and the scalars are rewritten by the next digit
    }
    // contiguous ranges per thread so that a scan gives the index order among keys equal to K
    const int ch = (D + kSelT - 1) / kSelT, d0 = threadIdx.x * ch, d1 = d0 + ch < D ? d0 + ch : D;
    int eq = 0;
    for (int d = d0; d < d1; d++) eq += nneg > 0 && key[d] == prefix;
    int before;
    Scan(tmp.sc).ExclusiveSum(eq, before);
    __syncthreads();
    double s = 0;
    for (int d = d0; d < d1; d++) {
        const uint32_t k = key[d];
        int neg = 0;
        if (nneg > 0 && k > prefix) neg = 1;
        else if (nneg > 0 && k == prefix) neg = (uint32_t)before++ < need;
        const int w = (label_of(label, base + d, C) > 0) + neg;
        l.w[base + d] = (uint8_t)w;
        if (sel) sel[base + d] = (uint8_t)w;
        s += (double)l.sl1[base + d] + (w ? w * (double)l.con[base + d] : 0.0);
    }
    s = RedD(tmp.rd).Sum(s);
    if (threadIdx.x == 0) l.tot[n] = s, l.pos[n] = P;
}

__global__ void finish(LossWs l, int N, float scale, double *acc, float *loss) {
    if (threadIdx.x != 0) return;
    double t = 0;
    for (int n = 0; n < N; n++)
        if (l.pos[n] > 0) t += l.tot[n] / l.pos[n];
    *loss = (float)(t / N);
    if (acc) acc[0] += (double)scale * (t / N), acc[1] += 1;
}

// dpconf = q w (softmax - onehot), dploc = q pos clamp(resid, -1, 1). A warp takes 32 boxes at a
// time: lane j loads box j's weight, label, lse and scale at once (one round trip for the 32, not
// one a box), then the warp writes the boxes one after another from those, shuffled.
template <typename T>
__global__ void __launch_bounds__(kT) grad(const T *ploc, const T *pconf, const float *gbox, const int32_t *label,
                                           const float *dbox, int N, int D, int C, float scale, LossWs l, T *dploc,
                                           T *dpconf) {
    const int lane = threadIdx.x & 31;
    const size_t nb = (size_t)N * D;
    for (size_t i0 = ((size_t)blockIdx.x * kT + threadIdx.x) & ~(size_t)31; i0 < nb; i0 += (size_t)gridDim.x * kT) {
        const size_t ij = i0 + lane;
        int wj = 0, yj = 0;
        float qj = 0, lj = 0;
        if (ij < nb) {
            const int P = l.pos[ij / (size_t)D];
            wj = l.w[ij], yj = label_of(label, ij, C), lj = l.lse[ij];
            qj = P > 0 ? (float)(scale / ((double)N * P)) : 0.0f;
        }
        const int m = nb - i0 < 32 ? (int)(nb - i0) : 32;
        for (int j = 0; j < m; j++) {
            const size_t i = i0 + j, d = i % (size_t)D;
            const int w = __shfl_sync(0xffffffffu, wj, j), y = __shfl_sync(0xffffffffu, yj, j);
            const float q = __shfl_sync(0xffffffffu, qj, j), lse = __shfl_sync(0xffffffffu, lj, j), qw = q * (float)w;
            if (dpconf)
                for (int c = lane; c < C; c += 32)
                    dpconf[i * C + c] = tk_to<T>(w ? qw * (expf(tk_f(pconf[i * C + c]) - lse) - (c == y ? 1.0f : 0.0f)) : 0.0f);
            if (dploc && lane < 4) {
                const float r = y > 0 ? loc_resid(tk_f(ploc[i * 4 + lane]), gbox + i * 4, dbox + d * 4, lane) : 0.0f;
                dploc[i * 4 + lane] = tk_to<T>(y > 0 ? q * fminf(fmaxf(r, -1.0f), 1.0f) : 0.0f);
            }
        }
    }
}

unsigned warp_blocks(int64_t boxes) { return tk_cu_blocks(boxes * 32, kT); }

} // namespace

size_t tk_ssd_match_ws_bytes_cuda(int64_t ngt) { return tk_cu_align((size_t)(ngt > 0 ? ngt : 1) * 4); }

int tk_ssd_match_cuda(tk_ctx *c, const float *gt, const int32_t *gt_label, const int32_t *gt_off, int N, int64_t ngt,
                      const float *dbox_ltrb, int D, float thresh, float *box, int32_t *label, void *ws, tk_err *e) {
    TRY(tk_ssd_match_check(N, ngt, D, e));
    if (N > 65535) return tk_err_set(e, TK_EINTERNAL, "ssd_match: %d images (at most 65535 a call on cuda)", N);
    cudaStream_t st = tk_cu_stream(c);
    int32_t *bestd = (int32_t *)ws;
    best_gt<<<dim3(N, kGtBlocks), kT, 0, st>>>(gt, gt_off, dbox_ltrb, D, bestd);
    assign<<<dim3((D + kT - 1) / kT, N), kT, 0, st>>>(gt, gt_label, gt_off, dbox_ltrb, D, thresh, bestd, box, label);
    return tk_cu_check(e, "ssd_match");
}

size_t tk_ssd_loss_ws_bytes_cuda(int N, int D) {
    const size_t nd = (size_t)N * D;
    return 4 * tk_cu_align(nd * 4) + tk_cu_align(nd) + tk_cu_align((size_t)N * 8) + tk_cu_align((size_t)N * 4);
}

int tk_ssd_loss_cuda(tk_ctx *c, tk_dtype t, const void *ploc, const void *pconf, const float *gbox,
                     const int32_t *label, const float *dbox, int N, int D, int C, float *loss, void *dploc,
                     void *dpconf, uint8_t *sel, void *ws, tk_err *e) {
    return tk_ssd_loss_acc_cuda(c, t, ploc, pconf, gbox, label, dbox, N, D, C, 1.0f, NULL, loss, dploc, dpconf, sel,
                                ws, e);
}

int tk_ssd_loss_acc_cuda(tk_ctx *c, tk_dtype t, const void *ploc, const void *pconf, const float *gbox,
                         const int32_t *label, const float *dbox, int N, int D, int C, float scale, double *acc,
                         float *loss, void *dploc, void *dpconf, uint8_t *sel, void *ws, tk_err *e) {
    TRY(tk_ssd_loss_check(t, N, D, C, e));
    cudaStream_t st = tk_cu_stream(c);
    const LossWs l = loss_ws(ws, N, D);
    const unsigned nb = warp_blocks((int64_t)N * D);
    TK_ACT_DISPATCH(t, "ssd_loss", e, {
        const T *pl = (const T *)ploc, *pc = (const T *)pconf;
        const int K = (C + 31) / 32; // the row in registers up to 96 classes (SSD's 81: 3 a lane)
        if (K == 1) terms<T, 1><<<nb, kT, 0, st>>>(pl, pc, gbox, label, dbox, N, D, C, l);
        else if (K == 2) terms<T, 2><<<nb, kT, 0, st>>>(pl, pc, gbox, label, dbox, N, D, C, l);
        else if (K == 3) terms<T, 3><<<nb, kT, 0, st>>>(pl, pc, gbox, label, dbox, N, D, C, l);
        else terms<T, 0><<<nb, kT, 0, st>>>(pl, pc, gbox, label, dbox, N, D, C, l);
        mine<<<N, kSelT, 0, st>>>(label, D, C, l, sel);
        finish<<<1, 32, 0, st>>>(l, N, scale, acc, loss);
        if (dploc || dpconf)
            grad<T><<<tk_cu_blocks((int64_t)N * D, kT), kT, 0, st>>>(pl, pc, gbox, label, dbox, N, D, C, scale, l,
                                                                    (T *)dploc, (T *)dpconf);
    });
    return tk_cu_check(e, "ssd_loss");
}
