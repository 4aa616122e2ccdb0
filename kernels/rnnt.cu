// CUDA side of kernels/rnnt.h. Joint: one thread per 8 features of a row (one Philox call gives
// their 8 dropout factors); its backward one thread per 8 features of a frame (df, summed over
// the labels) or of a label position (dg, summed over the frames), in a fixed order: deterministic,
// no atomics, nothing stored by the forward. Loss: four kernels, (1) a warp per row: log-sum-exp
// over V (fp32 per lane, the lanes' sums in fp64 by a butterfly of shuffles), the blank's and the
// next label's log-probabilities; (2) a block per utterance: alpha then beta in fp64 over the
// anti-diagonals t + u = d of its lattice (each diagonal needs only the one before it: a barrier
// per diagonal); (3) one thread adds the utterances' losses in order (and into acc); (4) a warp
// per row writes dz from the row's z, lse, alpha and beta (dz may be z: each element is read
// before its own thread writes it). The (rows, V) logits are read twice and written once, in
// their type: no fp32 copy of them exists.
#include "act_types.cuh"
#include "dropout.cuh"
#include "rnnt.h"

namespace {

constexpr int kT = 256, kWarps = kT / 32;

// The cell of a row: utterance b (the last with row0[b] <= row), frame t, label position u;
// returns 0 for a padding row (padded layout, t >= T_b or u > U_b).
struct cell {
    int b, t, u;
};
__device__ __forceinline__ int cell_of(const tk_rnnt_lay &L, int64_t row, cell &c) {
    int lo = 0, hi = L.B - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (L.row0[mid] <= row) lo = mid;
        else hi = mid - 1;
    }
    const int64_t ld = L.packed ? L.U[lo] + 1 : L.Umax + 1, r = row - L.row0[lo];
    c.b = lo, c.t = (int)(r / ld), c.u = (int)(r % ld);
    return c.t < L.T[lo] && c.u <= L.U[lo];
}
__device__ __forceinline__ int64_t row_of(const tk_rnnt_lay &L, int b, int t, int u) {
    return L.row0[b] + (int64_t)t * (L.packed ? L.U[b] + 1 : L.Umax + 1) + u;
}

unsigned grid_of(int64_t n, int per_block) {
    const int64_t g = (n + per_block - 1) / per_block;
    return (unsigned)(g < 1 ? 1 : g > (1 << 20) ? (1 << 20) : g);
}

// ---- joint ----

template <typename T>
__global__ void __launch_bounds__(kT)
    joint_fwd(tk_rnnt_lay L, int H, const T *f, const T *g, tk_drop_dev d, T *h) {
    const int G = (H + 7) / 8;
    const int64_t step = tk_drop_step(d), n = L.rows * G;
    for (int64_t k = (int64_t)blockIdx.x * kT + threadIdx.x; k < n; k += (int64_t)gridDim.x * kT) {
        const int64_t row = k / G;
        const int j0 = (int)(k % G) * 8, j1 = j0 + 8 < H ? j0 + 8 : H;
        cell c;
        T *o = h + row * H;
        if (!cell_of(L, row, c)) {
            for (int j = j0; j < j1; j++) o[j] = tk_to<T>(0.0f);
            continue;
        }
        const T *fr = f + ((int64_t)c.b * L.Tmax + c.t) * H, *gr = g + ((int64_t)c.b * (L.Umax + 1) + c.u) * H;
        float m[8];
        tk_drop8(d, step, row * H + j0, m);
        for (int j = j0; j < j1; j++) {
            const float s = tk_f(fr[j]) + tk_f(gr[j]);
            o[j] = tk_to<T>(s > 0 ? s * m[j - j0] : 0.0f);
        }
    }
}

// by_frame: df (B, Tmax, H), the sum over u of frame t's rows; else dg (B, Umax + 1, H), the sum
// over t of label position u's rows.
template <typename T>
__global__ void __launch_bounds__(kT) joint_bwd(tk_rnnt_lay L, int H, const T *f, const T *g, tk_drop_dev d,
                                                const T *dh, int by_frame, T *out) {
    const int G = (H + 7) / 8, P = by_frame ? L.Tmax : L.Umax + 1;
    const int64_t step = tk_drop_step(d), n = (int64_t)L.B * P * G;
    for (int64_t k = (int64_t)blockIdx.x * kT + threadIdx.x; k < n; k += (int64_t)gridDim.x * kT) {
        const int b = (int)(k / ((int64_t)P * G)), p = (int)(k / G % P);
        const int j0 = (int)(k % G) * 8, j1 = j0 + 8 < H ? j0 + 8 : H;
        float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        const int n_other = by_frame ? L.U[b] + 1 : L.T[b];
        if (p < (by_frame ? L.T[b] : L.U[b] + 1))
            for (int q = 0; q < n_other; q++) {
                const int t = by_frame ? p : q, u = by_frame ? q : p;
                const int64_t row = row_of(L, b, t, u);
                const T *fr = f + ((int64_t)b * L.Tmax + t) * H, *gr = g + ((int64_t)b * (L.Umax + 1) + u) * H,
                        *dr = dh + row * H;
                float m[8];
                tk_drop8(d, step, row * H + j0, m);
                for (int j = j0; j < j1; j++)
                    if (tk_f(fr[j]) + tk_f(gr[j]) > 0) acc[j - j0] += tk_f(dr[j]) * m[j - j0];
            }
        T *o = out + ((int64_t)b * P + p) * H;
        for (int j = j0; j < j1; j++) o[j] = tk_to<T>(acc[j - j0]);
    }
}

// ---- loss ----

// The workspace's arrays (rnnt.h's ws), fp64: per row lse, lp_blank, lp_label, alpha, beta; per
// utterance nll. (fp64 per row: a row's lse off by an fp32 rounding shifts every path through it,
// and a path crosses T + U rows.)
struct lossws {
    double *lse, *lpb, *lpy, *alpha, *beta, *nll;
};
lossws carve(void *ws, int B, int64_t rows) {
    char *p = (char *)ws;
    lossws w;
    w.lse = (double *)p, p += tk_cu_align(rows * sizeof(double));
    w.lpb = (double *)p, p += tk_cu_align(rows * sizeof(double));
    w.lpy = (double *)p, p += tk_cu_align(rows * sizeof(double));
    w.alpha = (double *)p, p += tk_cu_align(rows * sizeof(double));
    w.beta = (double *)p, p += tk_cu_align(rows * sizeof(double));
    w.nll = (double *)p, p += tk_cu_align((size_t)B * sizeof(double));
    (void)p;
    return w;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

template <typename T>
__global__ void __launch_bounds__(kT)
    row_stats(tk_rnnt_lay L, int V, int blank, const int *labels, const T *z, lossws w) {
    const int lane = threadIdx.x & 31;
    for (int64_t row = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32; row < L.rows;
         row += (int64_t)gridDim.x * kWarps) {
        cell c;
        if (!cell_of(L, row, c)) continue;
        const T *zr = z + row * V;
        float mx = -INFINITY;
        for (int v = lane; v < V; v += 32) mx = fmaxf(mx, tk_f(zr[v]));
        mx = warp_max(mx);
        float s = 0; // each lane's V / 32 terms in fp32, the lanes' sums in fp64
        for (int v = lane; v < V; v += 32) s += expf(tk_f(zr[v]) - mx);
        const double sum = warp_sum((double)s);
        if (lane != 0) continue;
        const double lse = mx + log(sum);
        w.lse[row] = lse;
        w.lpb[row] = (double)tk_f(zr[blank]) - lse;
        const int y = c.u < L.U[c.b] ? labels[(int64_t)c.b * L.Umax + c.u] : -1;
        w.lpy[row] = y >= 0 && y < V ? (double)tk_f(zr[y]) - lse : -INFINITY;
    }
}

__device__ __forceinline__ double logadd(double a, double b) {
    if (a == -INFINITY) return b;
    if (b == -INFINITY) return a;
    return a > b ? a + log1p(exp(b - a)) : b + log1p(exp(a - b));
}

__global__ void __launch_bounds__(kT) lattice(tk_rnnt_lay L, lossws w, float *costs) {
    const int b = blockIdx.x, T = L.T[b], U = L.U[b];
    for (int d = 0; d < T + U; d++) {
        const int u0 = d - T + 1 > 0 ? d - T + 1 : 0, u1 = d < U ? d : U;
        for (int u = u0 + threadIdx.x; u <= u1; u += kT) {
            const int t = d - u;
            const int64_t r = row_of(L, b, t, u);
            double a = d == 0 ? 0.0 : -INFINITY;
            if (t > 0) {
                const int64_t q = row_of(L, b, t - 1, u);
                a = logadd(a, w.alpha[q] + w.lpb[q]);
            }
            if (u > 0) a = logadd(a, w.alpha[r - 1] + w.lpy[r - 1]);
            w.alpha[r] = a;
        }
        __syncthreads();
    }
    for (int d = T + U - 1; d >= 0; d--) {
        const int u0 = d - T + 1 > 0 ? d - T + 1 : 0, u1 = d < U ? d : U;
        for (int u = u0 + threadIdx.x; u <= u1; u += kT) {
            const int t = d - u;
            const int64_t r = row_of(L, b, t, u);
            double bt = t == T - 1 && u == U ? w.lpb[r] : -INFINITY;
            if (t < T - 1) bt = logadd(bt, w.beta[row_of(L, b, t + 1, u)] + w.lpb[r]);
            if (u < U) bt = logadd(bt, w.beta[r + 1] + w.lpy[r]);
            w.beta[r] = bt;
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        const double nll = -w.beta[L.row0[b]];
        w.nll[b] = nll;
        if (costs) costs[b] = (float)nll;
    }
}

__global__ void total(int B, const double *nll, float scale, double *acc, float *loss) {
    double s = 0;
    for (int b = 0; b < B; b++) s += nll[b];
    *loss = (float)(scale * s);
    if (acc) acc[0] += scale * s, acc[1] += 1;
}

template <typename T>
__global__ void __launch_bounds__(kT)
    grad(tk_rnnt_lay L, int V, int blank, const int *labels, const T *z, lossws w, float scale, T *dz) {
    const int lane = threadIdx.x & 31;
    for (int64_t row = (int64_t)blockIdx.x * kWarps + threadIdx.x / 32; row < L.rows;
         row += (int64_t)gridDim.x * kWarps) {
        cell c;
        T *o = dz + row * V;
        if (!cell_of(L, row, c)) {
            for (int v = lane; v < V; v += 32) o[v] = tk_to<T>(0.0f);
            continue;
        }
        const int Tb = L.T[c.b], Ub = L.U[c.b];
        const double ll = -w.nll[c.b], al = w.alpha[row] - ll;
        // the row's occupancy and the mass through its blank and its label edges, times scale
        const float occ = (float)(scale * exp(al + w.beta[row]));
        const double nb = c.t < Tb - 1 ? w.beta[row_of(L, c.b, c.t + 1, c.u)] : c.u == Ub ? 0.0 : -INFINITY;
        const float gb = (float)(scale * exp(al + w.lpb[row] + nb));
        const float gy = c.u < Ub ? (float)(scale * exp(al + w.lpy[row] + w.beta[row + 1])) : 0.0f;
        const int y = c.u < Ub ? labels[(int64_t)c.b * L.Umax + c.u] : -1;
        const double lse = w.lse[row];
        const T *zr = z + row * V;
        for (int v = lane; v < V; v += 32) {
            float d = expf((float)(tk_f(zr[v]) - lse)) * occ;
            if (v == blank) d -= gb;
            if (v == y) d -= gy;
            o[v] = tk_to<T>(d);
        }
    }
}

} // namespace

size_t tk_rnnt_loss_ws_bytes_cuda(int B, int64_t rows) {
    return 5 * tk_cu_align(rows * sizeof(double)) +
           tk_cu_align((size_t)B * sizeof(double));
}

int tk_rnnt_joint_fwd_cuda(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                           const tk_dropout *drop, void *h, tk_err *e) {
    TRY(tk_rnnt_check(t, L, H, e));
    const tk_drop_dev d = tk_drop_dev_of(drop);
    TK_ACT_DISPATCH(t, "rnnt_joint_fwd", e, {
        joint_fwd<T><<<grid_of(L->rows * ((H + 7) / 8), kT), kT, 0, tk_cu_stream(c)>>>(*L, H, (const T *)f,
                                                                                     (const T *)g, d, (T *)h);
    });
    return tk_cu_check(e, "rnnt_joint_fwd");
}

int tk_rnnt_joint_bwd_cuda(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int H, const void *f, const void *g,
                           const tk_dropout *drop, const void *dh, void *df, void *dg, tk_err *e) {
    TRY(tk_rnnt_check(t, L, H, e));
    const tk_drop_dev d = tk_drop_dev_of(drop);
    const int64_t G = (H + 7) / 8;
    cudaStream_t st = tk_cu_stream(c);
    TK_ACT_DISPATCH(t, "rnnt_joint_bwd", e, {
        joint_bwd<T><<<grid_of((int64_t)L->B * L->Tmax * G, kT), kT, 0, st>>>(*L, H, (const T *)f, (const T *)g, d,
                                                                            (const T *)dh, 1, (T *)df);
        joint_bwd<T><<<grid_of((int64_t)L->B * (L->Umax + 1) * G, kT), kT, 0, st>>>(
            *L, H, (const T *)f, (const T *)g, d, (const T *)dh, 0, (T *)dg);
    });
    return tk_cu_check(e, "rnnt_joint_bwd");
}

int tk_rnnt_loss_cuda(tk_ctx *c, tk_dtype t, const tk_rnnt_lay *L, int V, int blank, const int *labels,
                      const void *z, float scale, double *acc, float *loss, float *costs, void *dz, void *ws,
                      tk_err *e) {
    TRY(tk_rnnt_check(t, L, V, e));
    if (blank < 0 || blank >= V) return tk_err_set(e, TK_EINTERNAL, "rnnt: blank %d outside 0..%d", blank, V - 1);
    cudaStream_t st = tk_cu_stream(c);
    const lossws w = carve(ws, L->B, L->rows);
    const unsigned rb = grid_of(L->rows, kWarps);
    TK_ACT_DISPATCH(t, "rnnt_loss", e, {
        row_stats<T><<<rb, kT, 0, st>>>(*L, V, blank, labels, (const T *)z, w);
        lattice<<<L->B, kT, 0, st>>>(*L, w, costs);
        total<<<1, 1, 0, st>>>(L->B, w.nll, scale, acc, loss);
        if (dz) grad<T><<<rb, kT, 0, st>>>(*L, V, blank, labels, (const T *)z, w, scale, (T *)dz);
    });
    return tk_cu_check(e, "rnnt_loss");
}
