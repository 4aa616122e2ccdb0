// CUDA side of kernels/ssd_nms.h: three kernels. decode: one thread per (image, anchor) decodes
// the box and softmaxes the classes into class-major probabilities (N, C, A); classes: one block
// per (image, class) counts the candidates, finds the max_num-th largest (score, anchor) key by
// a bisection of the 64-bit key range when there are more (keys are unique, so the count is
// exact), gathers the selected keys, sorts them (bitonic, shared memory), builds the pairwise
// suppression bitmask and walks it greedily in one warp; merge: one block per image orders the
// kept detections of all classes by (score, position in the concatenation) the same way and
// writes the last max_out. The arithmetic is ssd_nms.h's shared functions (each operation
// rounded once), so the results are the reference's bit for bit. No atomics decide an order.
#include "act_types.cuh"
#include "ssd_nms.h"

namespace {

constexpr int kT = 256;

template <typename T>
__global__ void __launch_bounds__(kT) decode(const T *loc, const T *conf, const float *dbox, int N, int A, int C,
                                             int softmax, float *box, float *prob) {
    const int64_t total = (int64_t)N * A;
    for (int64_t i = blockIdx.x * (int64_t)kT + threadIdx.x; i < total; i += (int64_t)gridDim.x * kT) {
        const int n = (int)(i / A), a = (int)(i % A);
        const float l[4] = {tk_f(loc[i * 4]), tk_f(loc[i * 4 + 1]), tk_f(loc[i * 4 + 2]), tk_f(loc[i * 4 + 3])};
        const float *da = dbox + (size_t)a * 4;
        const float d[4] = {da[0], da[1], da[2], da[3]};
        float b[4];
        tk_ssd_decode(l, d, b);
        for (int k = 0; k < 4; k++) box[i * 4 + k] = b[k];
        const T *z = conf + i * C;
        float *p = prob + (size_t)n * C * A + a; // class k at p[k A]
        if (!softmax) {
            for (int k = 0; k < C; k++) p[(size_t)k * A] = tk_f(z[k]);
            continue;
        }
        float m = tk_f(z[0]);
        for (int k = 1; k < C; k++) {
            const float v = tk_f(z[k]);
            m = v > m ? v : m;
        }
        float s = 0.0f;
        for (int k = 0; k < C; k++) {
            const float ev = tk_ssd_expf(TK_SSD_SUB(tk_f(z[k]), m));
            p[(size_t)k * A] = ev;
            s = TK_SSD_ADD(s, ev);
        }
        const float r = TK_SSD_DIV(1.0f, s);
        for (int k = 0; k < C; k++) p[(size_t)k * A] = TK_SSD_MUL(p[(size_t)k * A], r);
    }
}

// Number of valid keys (nonzero) >= t among key(0 .. M-1), summed over the block (all threads
// call it; the sum of integers is the same in any order).
template <typename F> __device__ int count_ge(F key, int M, uint64_t t, int *cnt) {
    int c = 0;
    for (int i = threadIdx.x; i < M; i += kT) {
        const uint64_t v = key(i);
        c += v != 0 && v >= t;
    }
    __syncthreads();
    if (threadIdx.x == 0) *cnt = 0;
    __syncthreads();
    if (c) atomicAdd(cnt, c);
    __syncthreads();
    return *cnt;
}

// The K-th largest valid key (1 when there are at most K): keys >= it are exactly the top K.
template <typename F> __device__ uint64_t kth_key(F key, int M, int K, int total, int *cnt) {
    if (total <= K) return 1;
    uint64_t lo = 1, hi = ~(uint64_t)0; // count_ge(lo) >= K always
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo + 1) / 2;
        if (count_ge(key, M, mid, cnt) >= K) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

// Gathers the valid keys >= t into s (unordered; *cnt gets their number), pads s up to the next
// power of two P with pad and sorts s[0 .. P) (descending when desc). Returns the number gathered.
template <typename F>
__device__ int gather_sort(F key, int M, uint64_t t, uint64_t *s, int cap, uint64_t pad, bool desc, int *cnt) {
    __syncthreads();
    if (threadIdx.x == 0) *cnt = 0;
    __syncthreads();
    for (int i = threadIdx.x; i < M; i += kT) {
        const uint64_t v = key(i);
        if (v != 0 && v >= t) {
            const int at = atomicAdd(cnt, 1);
            if (at < cap) s[at] = v;
        }
    }
    __syncthreads();
    const int m = *cnt < cap ? *cnt : cap;
    int P = 1;
    while (P < m) P <<= 1;
    for (int i = m + threadIdx.x; i < P; i += kT) s[i] = pad;
    __syncthreads();
    for (int size = 2; size <= P; size <<= 1)
        for (int stride = size / 2; stride > 0; stride >>= 1) {
            for (int i = threadIdx.x; i < P; i += kT) {
                const int j = i ^ stride;
                if (j <= i) continue;
                const bool up = ((i & size) == 0) != desc; // this run ascending
                const uint64_t x = s[i], y = s[j];
                if (up ? x > y : x < y) s[i] = y, s[j] = x;
            }
            __syncthreads();
        }
    return m;
}

__global__ void __launch_bounds__(kT) classes(const float *prob, const float *box, int A, int C, int K, float score_min,
                                              float iou, uint64_t *kept, int *nkept) {
    constexpr int W = TK_SSD_NMS_MAX_NUM / 32;
    __shared__ uint64_t sk[TK_SSD_NMS_MAX_NUM];
    __shared__ float sb[TK_SSD_NMS_MAX_NUM][4];
    __shared__ uint32_t mask[TK_SSD_NMS_MAX_NUM][W];
    __shared__ int cnt;
    const int k = blockIdx.x + 1, n = blockIdx.y;
    const float *pr = prob + ((size_t)n * C + k) * A;
    auto key = [=](int a) -> uint64_t {
        const float v = pr[a];
        return v > score_min ? tk_ssd_key(v, (uint32_t)a) : 0;
    };
    const int M = count_ge(key, A, 1, &cnt);
    const uint64_t t = kth_key(key, A, K, M, &cnt);
    const int m = gather_sort(key, A, t, sk, K, 0, true, &cnt);
    const float *bx = box + (size_t)n * A * 4;
    for (int i = threadIdx.x; i < m * 4; i += kT) sb[i / 4][i % 4] = bx[(size_t)(uint32_t)sk[i / 4] * 4 + i % 4];
    __syncthreads();
    const int nw = (m + 31) / 32;
    for (int q = threadIdx.x; q < m * nw; q += kT) {
        const int i = q / nw, w = q % nw;
        uint32_t bits = 0;
        for (int b = 0; b < 32; b++) {
            const int j = w * 32 + b;
            if (j > i && j < m && !(tk_ssd_iou(sb[j], sb[i]) < iou)) bits |= 1u << b;
        }
        mask[i][w] = bits;
    }
    __syncthreads();
    if (threadIdx.x >= 32) return;
    const int lane = threadIdx.x;
    uint32_t gone = 0; // lane w < nw: word w of the suppressed set
    int nk = 0;
    uint64_t *out = kept + ((size_t)n * C + k) * K;
    for (int i = 0; i < m; i++) {
        const uint32_t word = __shfl_sync(0xffffffffu, gone, i >> 5);
        if ((word >> (i & 31)) & 1) continue;
        if (lane < nw) gone |= mask[i][lane];
        if (lane == 0) out[nk] = sk[i];
        nk++;
    }
    if (lane == 0) nkept[(size_t)n * C + k] = nk;
}

__global__ void __launch_bounds__(kT) merge(const float *box, const uint64_t *kept, const int *nkept, int A, int C,
                                            int K, int O, float *obox, float *oscore, int32_t *olabel,
                                            int32_t *ocount) {
    __shared__ uint64_t sk[TK_SSD_NMS_MAX_OUT];
    __shared__ int off[TK_SSD_NMS_MAX_C + 1];
    __shared__ int cnt;
    const int n = blockIdx.x;
    if (threadIdx.x == 0) {
        off[1] = 0;
        for (int k = 1; k < C; k++) off[k + 1] = off[k] + nkept[(size_t)n * C + k];
    }
    __syncthreads();
    const int M = off[C];
    const uint64_t *kn = kept + (size_t)n * C * K;
    auto cls = [&](int p) { // the class whose range holds position p
        int lo = 1, hi = C - 1;
        while (lo < hi) {
            const int mid = (lo + hi + 1) / 2;
            if (off[mid] <= p) lo = mid;
            else hi = mid - 1;
        }
        return lo;
    };
    auto key = [&](int p) -> uint64_t {
        const int k = cls(p);
        return (kn[(size_t)k * K + (p - off[k])] >> 32 << 32) | (uint32_t)p;
    };
    const uint64_t t = kth_key(key, M, O, M, &cnt);
    const int m = gather_sort(key, M, t, sk, O, ~(uint64_t)0, false, &cnt);
    float *ob = obox + (size_t)n * O * 4, *os = oscore + (size_t)n * O;
    int32_t *ol = olabel + (size_t)n * O;
    const float *bx = box + (size_t)n * A * 4;
    for (int s = threadIdx.x; s < O; s += kT) {
        if (s < m) {
            const int p = (int)(uint32_t)sk[s], k = cls(p);
            const uint32_t a = (uint32_t)kn[(size_t)k * K + (p - off[k])];
            for (int q = 0; q < 4; q++) ob[(size_t)s * 4 + q] = bx[(size_t)a * 4 + q];
            os[s] = tk_ssd_bits_float((uint32_t)(sk[s] >> 32));
            ol[s] = k;
        } else {
            for (int q = 0; q < 4; q++) ob[(size_t)s * 4 + q] = 0.0f;
            os[s] = 0.0f;
            ol[s] = 0;
        }
    }
    if (threadIdx.x == 0) ocount[n] = m;
}

// ws: boxes (N, A, 4), probabilities (N, C, A), kept keys (N, C, K), kept counts (N, C).
size_t box_bytes(int N, int A) { return tk_cu_align((size_t)N * A * 4 * sizeof(float)); }
size_t prob_bytes(int N, int A, int C) { return tk_cu_align((size_t)N * C * A * sizeof(float)); }
size_t kept_bytes(int N, int C, int K) { return tk_cu_align((size_t)N * C * K * sizeof(uint64_t)); }

} // namespace

size_t tk_ssd_nms_ws_bytes_cuda(int N, int A, int C, const tk_ssd_nms_params *p) {
    return box_bytes(N, A) + prob_bytes(N, A, C) + kept_bytes(N, C, p->max_num) +
           tk_cu_align((size_t)N * C * sizeof(int));
}

int tk_ssd_nms_cuda(tk_ctx *c, tk_dtype t, const void *loc, const void *conf, const float *dbox, int N, int A, int C,
                    const tk_ssd_nms_params *p, float *box, float *score, int32_t *label, int32_t *count, void *ws,
                    tk_err *e) {
    TRY(tk_ssd_nms_check(t, N, A, C, p, e));
    if (N > 65535) return tk_err_set(e, TK_EINTERNAL, "ssd_nms: %d images (at most 65535 a call on cuda)", N);
    cudaStream_t st = tk_cu_stream(c);
    float *bx = (float *)ws, *pr = (float *)((char *)ws + box_bytes(N, A));
    uint64_t *kept = (uint64_t *)((char *)pr + prob_bytes(N, A, C));
    int *nkept = (int *)((char *)kept + kept_bytes(N, C, p->max_num));
    TK_ACT_DISPATCH(t, "ssd_nms", e, {
        decode<T><<<tk_cu_blocks((int64_t)N * A, kT), kT, 0, st>>>((const T *)loc, (const T *)conf, dbox, N, A, C,
                                                                   p->softmax, bx, pr);
    });
    classes<<<dim3(C - 1, N), kT, 0, st>>>(pr, bx, A, C, p->max_num, p->score_min, p->iou, kept, nkept);
    merge<<<N, kT, 0, st>>>(bx, kept, nkept, A, C, p->max_num, p->max_out, box, score, label, count);
    return tk_cu_check(e, "ssd_nms");
}
