// CUDA side of kernels/bn.h. The per-channel sums (statistics forward, dbeta/dgamma backward) are
// two kernels: blocks add fp32 partials over a fixed set of rows, reading 16-byte vectors of
// channels (partial: G row groups, G a function of M and C only) and reducing their row lanes in
// a fixed order; one thread per channel then adds the G partials in fp64. No atomics: the same
// inputs give the same bits on every run and every graph replay. The elementwise passes (apply,
// dx) take 16-byte vectors of channels too, when the channel count and the pointers allow.
#include "bn.h"
#include "cuda_util.cuh"
#include "rn_vec.cuh"

namespace {

constexpr int kThreads = 256;

// The partial sums' grid: blocks of 256 threads each cover a tile of up to 256 vectors of N
// channels (C / N vectors per row; tiles along grid.y) and R = 256 / (vectors in the tile) rows
// at a time; G = grid.x row groups of about 16 block iterations, at most 2048. A function of
// (M, C, N) only, so the sums' order is fixed.
int groups(int64_t M, int C, int N) {
    const int V = C / N, Vt = V < kThreads ? V : kThreads, R = kThreads / Vt;
    int64_t g = (M + (int64_t)R * 16 - 1) / ((int64_t)R * 16);
    return (int)(g < 1 ? 1 : g > 2048 ? 2048 : g);
}
int groups_max(int64_t M, int C) { // over the vector widths a call may take (1, 4, 8)
    int a = groups(M, C, 1), b = C % 4 == 0 ? groups(M, C, 4) : 0, c = C % 8 == 0 ? groups(M, C, 8) : 0;
    return a > b ? (a > c ? a : c) : (b > c ? b : c);
}

// ws: partials (G x C x 2 floats), then coef (3 x C floats).
float *coef_of(void *ws, int64_t M, int C) {
    return (float *)((char *)ws + tk_cu_align((size_t)groups_max(M, C) * C * 2 * sizeof(float)));
}

__device__ __forceinline__ float act(float v, int relu) { return relu && !(v > 0.0f) ? (v != v ? v : 0.0f) : v; }

// N elements at p + i as floats: one, or a 16-byte vector.
template <typename T, int N> __device__ __forceinline__ void ldn(const T *p, size_t i, float *f) {
    if constexpr (N == 1) f[0] = rn_f(p[i]);
    else rn_vload(p, i, f);
}
template <typename T, int N> __device__ __forceinline__ void stn(T *p, size_t i, const float *f) {
    if constexpr (N == 1) p[i] = rn_to<T>(f[0]);
    else rn_vstore(p, i, f);
}

// Part 1 of the per-channel sums, both directions: each thread adds its rows' values of its N
// channels, then the R row lanes of a vector are added in a fixed order into the block's partial.
//   forward (BWD false): s = sum (x - x[0, c]), q = sum (x - x[0, c])^2
//   backward: dz (bn.h; written to dz_out when asked), s = sum dz, q = sum dz xhat
template <typename T, int N, bool BWD>
__global__ void __launch_bounds__(kThreads) partial(const T *x, const T *y, const T *dy, const T *dy2,
                                                    const float *mean, const float *invstd, int64_t M, int C,
                                                    float *part, T *dz_out) {
    __shared__ float sh[kThreads * N];
    const int V = C / N, v0 = blockIdx.y * kThreads, Vt = V - v0 < kThreads ? V - v0 : kThreads, R = kThreads / Vt;
    const int tid = threadIdx.x, r = tid / Vt, v = v0 + tid % Vt, c0 = v * N;
    const bool active = r < R;
    float s[N], q[N], a[N], b[N];
#pragma unroll
    for (int k = 0; k < N; k++) s[k] = q[k] = 0;
    if (active) {
        if (BWD) {
#pragma unroll
            for (int k = 0; k < N; k++) a[k] = mean[c0 + k], b[k] = invstd[c0 + k];
        } else {
            ldn<T, N>(x, (size_t)c0, a); // the shift: row 0
        }
        for (int64_t m = (int64_t)blockIdx.x * R + r; m < M; m += (int64_t)gridDim.x * R) {
            const size_t i = (size_t)m * C + c0;
            float xv[N];
            ldn<T, N>(x, i, xv);
            if (BWD) {
                float g[N], g2[N], yv[N], o[N];
                ldn<T, N>(dy, i, g);
                if (dy2) ldn<T, N>(dy2, i, g2);
                if (y) ldn<T, N>(y, i, yv);
#pragma unroll
                for (int k = 0; k < N; k++) {
                    float dz = g[k];
                    if (dy2) dz += g2[k];
                    if (y && !(yv[k] > 0.0f)) dz = 0.0f;
                    dz = rn_round<T>(dz);
                    float xhat = __fmul_rn(__fsub_rn(xv[k], a[k]), b[k]);
                    s[k] += dz;
                    q[k] = __fmaf_rn(dz, xhat, q[k]);
                    o[k] = dz;
                }
                if (dz_out) stn<T, N>(dz_out, i, o);
            } else {
#pragma unroll
                for (int k = 0; k < N; k++) {
                    float d = xv[k] - a[k];
                    s[k] += d;
                    q[k] += d * d;
                }
            }
        }
    }
    for (int pass = 0; pass < 2; pass++) {
        float *acc = pass ? q : s;
#pragma unroll
        for (int k = 0; k < N; k++) sh[tid * N + k] = acc[k];
        __syncthreads();
        if (active && r == 0) {
            for (int rr = 1; rr < R; rr++)
#pragma unroll
                for (int k = 0; k < N; k++) acc[k] += sh[(rr * Vt + tid) * N + k];
#pragma unroll
            for (int k = 0; k < N; k++) part[((size_t)blockIdx.x * C + c0 + k) * 2 + pass] = acc[k];
        }
        __syncthreads();
    }
}

// The launch of part 1 with the widest vectors the channels and pointers allow; returns G.
template <typename T, bool BWD>
int launch_partial(cudaStream_t st, const void *x, const void *y, const void *dy, const void *dy2, const float *mean,
                   const float *invstd, int64_t M, int C, float *part, void *dz_out) {
    constexpr int NV = RnVec<T>::N;
    const bool vec = C % NV == 0 && rn_aligned16(x, y, dy, dy2, dz_out);
    const int N = vec ? NV : 1, G = groups(M, C, N), tiles = (C / N + kThreads - 1) / kThreads;
    const T *X = (const T *)x, *Y = (const T *)y, *DY = (const T *)dy, *DY2 = (const T *)dy2;
    if (vec)
        partial<T, NV, BWD><<<dim3(G, tiles), kThreads, 0, st>>>(X, Y, DY, DY2, mean, invstd, M, C, part, (T *)dz_out);
    else
        partial<T, 1, BWD><<<dim3(G, tiles), kThreads, 0, st>>>(X, Y, DY, DY2, mean, invstd, M, C, part, (T *)dz_out);
    return G;
}

// Part 2: one thread per channel: the statistics, the running update, scale and shift.
template <typename T>
__global__ void stats_final(const float *part, int G, const T *x, int64_t M, int C, const float *gamma,
                            const float *beta, float eps, float momentum, float *run_mean, float *run_var,
                            float *save_mean, float *save_invstd, float *coef) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double s = 0, q = 0;
    for (int g = 0; g < G; g++) s += part[((size_t)g * C + c) * 2], q += part[((size_t)g * C + c) * 2 + 1];
    double md = s / (double)M, var = q / (double)M - md * md;
    if (var < 0) var = 0;
    double mean = (double)rn_f(x[c]) + md, unbiased = M > 1 ? var * (double)M / (double)(M - 1) : var;
    float invstd = (float)(1.0 / sqrt(var + (double)eps)), fmean = (float)mean;
    save_mean[c] = fmean;
    save_invstd[c] = invstd;
    run_mean[c] = (float)((1.0 - momentum) * run_mean[c] + momentum * mean);
    run_var[c] = (float)((1.0 - momentum) * run_var[c] + momentum * unbiased);
    float scale = __fmul_rn(gamma[c], invstd);
    coef[c] = scale;
    coef[C + c] = __fsub_rn(beta[c], __fmul_rn(fmean, scale));
}

// y = act(x scale + shift [+ res]); VEC: 16-byte vectors of channels. Training: scale and shift
// from coef (stats_final); EVAL: each element's from the running statistics, computed as
// stats_final computes them (the eval entry point has no workspace for coef).
struct EvalStats {
    const float *gamma, *beta, *mean, *var;
    float eps;
};

template <typename T, bool VEC, bool EVAL>
__global__ void apply(const T *x, const T *res, int relu, const float *coef, EvalStats ev, int64_t M, int C, T *y) {
    constexpr int N = VEC ? RnVec<T>::N : 1;
    const size_t nv = (size_t)M * C / N;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += (size_t)gridDim.x * blockDim.x) {
        const size_t i = j * N;
        const int c0 = (int)(i % (size_t)C);
        float v[N], r[N];
        if (VEC) {
            rn_vload(x, i, v);
            if (res) rn_vload(res, i, r);
        } else {
            v[0] = rn_f(x[i]);
            if (res) r[0] = rn_f(res[i]);
        }
#pragma unroll
        for (int k = 0; k < N; k++) {
            const int c = c0 + k;
            float scale, shift;
            if (EVAL) {
                float invstd = (float)(1.0 / sqrt((double)ev.var[c] + (double)ev.eps));
                scale = __fmul_rn(ev.gamma[c], invstd);
                shift = __fsub_rn(ev.beta[c], __fmul_rn(ev.mean[c], scale));
            } else {
                scale = coef[c], shift = coef[C + c];
            }
            float o = __fadd_rn(__fmul_rn(v[k], scale), shift);
            if (res) o = __fadd_rn(o, r[k]);
            v[k] = act(o, relu);
        }
        if (VEC) rn_vstore(y, i, v);
        else y[i] = rn_to<T>(v[0]);
    }
}

__global__ void bwd_final(const float *part, int G, int64_t M, int C, const float *gamma, const float *save_invstd,
                          float *dgamma, float *dbeta, float *coef) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    double sb = 0, sg = 0;
    for (int g = 0; g < G; g++) sb += part[((size_t)g * C + c) * 2], sg += part[((size_t)g * C + c) * 2 + 1];
    dbeta[c] = (float)sb;
    dgamma[c] = (float)sg;
    coef[c] = __fmul_rn(gamma[c], save_invstd[c]);
    coef[C + c] = (float)(sb / (double)M);
    coef[2 * C + c] = (float)(sg / (double)M);
}

// dx = a (dz - b - xhat g) with the coefficients of bwd_final; dz recomputed from dy, dy2 and y,
// or read from dzin (part 1 wrote it: two reads instead of four).
template <typename T, bool VEC>
__global__ void bwd_dx(const T *x, const T *y, const T *dy, const T *dy2, const T *dzin, const float *save_mean,
                       const float *save_invstd, const float *coef, int64_t M, int C, T *dx) {
    constexpr int N = VEC ? RnVec<T>::N : 1;
    const size_t nv = (size_t)M * C / N;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += (size_t)gridDim.x * blockDim.x) {
        const size_t i = j * N;
        const int c0 = (int)(i % (size_t)C);
        float xv[N], g[N], g2[N], yv[N], o[N];
        ldn<T, N>(x, i, xv);
        ldn<T, N>(dzin ? dzin : dy, i, g);
        if (!dzin && dy2) ldn<T, N>(dy2, i, g2);
        if (!dzin && y) ldn<T, N>(y, i, yv);
#pragma unroll
        for (int k = 0; k < N; k++) {
            const int c = c0 + k;
            float dz = g[k];
            if (!dzin) {
                if (dy2) dz += g2[k];
                if (y && !(yv[k] > 0.0f)) dz = 0.0f;
                dz = rn_round<T>(dz);
            }
            float xhat = __fmul_rn(__fsub_rn(xv[k], save_mean[c]), save_invstd[c]);
            o[k] = __fmul_rn(coef[c], __fsub_rn(__fsub_rn(dz, coef[C + c]), __fmul_rn(xhat, coef[2 * C + c])));
        }
        stn<T, N>(dx, i, o);
    }
}

int check(tk_dtype t, int64_t M, int C, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "bn: tensors in %s", tk_dtype_name(t));
    if (M < 1 || C < 1) return tk_err_set(e, TK_EINTERNAL, "bn: bad shape M %lld C %d", (long long)M, C);
    return 0;
}

template <typename T, bool EVAL>
void launch_apply(cudaStream_t st, const void *x, const void *res, int relu, const float *coef, EvalStats ev,
                  int64_t M, int C, void *y) {
    const bool vec = C % RnVec<T>::N == 0 && rn_aligned16(x, res, y);
    const int64_t n = M * C / (vec ? RnVec<T>::N : 1);
    if (vec)
        apply<T, true, EVAL><<<tk_cu_blocks(n, 256), 256, 0, st>>>((const T *)x, (const T *)res, relu, coef, ev, M, C,
                                                                    (T *)y);
    else
        apply<T, false, EVAL><<<tk_cu_blocks(n, 256), 256, 0, st>>>((const T *)x, (const T *)res, relu, coef, ev, M, C,
                                                                     (T *)y);
}

template <typename T>
int fwd_train(tk_ctx *c, const void *x, int64_t M, int C, const float *gamma, const float *beta, const void *res,
              int relu, float eps, float momentum, float *run_mean, float *run_var, float *save_mean,
              float *save_invstd, void *y, void *ws, tk_err *e) {
    cudaStream_t st = tk_cu_stream(c);
    float *part = (float *)ws, *coef = coef_of(ws, M, C);
    const int G = launch_partial<T, false>(st, x, nullptr, nullptr, nullptr, nullptr, nullptr, M, C, part, nullptr);
    stats_final<T><<<(C + 127) / 128, 128, 0, st>>>(part, G, (const T *)x, M, C, gamma, beta, eps, momentum, run_mean,
                                                    run_var, save_mean, save_invstd, coef);
    launch_apply<T, false>(st, x, res, relu, coef, EvalStats{}, M, C, y);
    return tk_cu_check(e, "bn_fwd_train");
}

template <typename T>
int bwd(tk_ctx *c, const void *x, const void *y, const void *dy, const void *dy2, int64_t M, int C,
        const float *gamma, const float *save_mean, const float *save_invstd, void *dx, void *dz_out, float *dgamma,
        float *dbeta, void *ws, tk_err *e) {
    cudaStream_t st = tk_cu_stream(c);
    float *part = (float *)ws, *coef = coef_of(ws, M, C);
    const int G = launch_partial<T, true>(st, x, y, dy, dy2, save_mean, save_invstd, M, C, part, dz_out);
    bwd_final<<<(C + 127) / 128, 128, 0, st>>>(part, G, M, C, gamma, save_invstd, dgamma, dbeta, coef);
    const bool vec = C % RnVec<T>::N == 0 && rn_aligned16(x, y, dy, dy2, dx) && rn_aligned16(dz_out);
    const int64_t n = M * C / (vec ? RnVec<T>::N : 1);
    const T *X = (const T *)x, *Y = (const T *)y, *DY = (const T *)dy, *DY2 = (const T *)dy2, *DZ = (const T *)dz_out;
    if (vec)
        bwd_dx<T, true><<<tk_cu_blocks(n, 256), 256, 0, st>>>(X, Y, DY, DY2, DZ, save_mean, save_invstd, coef, M, C,
                                                              (T *)dx);
    else
        bwd_dx<T, false><<<tk_cu_blocks(n, 256), 256, 0, st>>>(X, Y, DY, DY2, DZ, save_mean, save_invstd, coef, M, C,
                                                               (T *)dx);
    return tk_cu_check(e, "bn_bwd");
}

} // namespace

size_t tk_bn_ws_bytes_cuda(int64_t M, int C) {
    return tk_cu_align((size_t)groups_max(M, C) * C * 2 * sizeof(float)) + tk_cu_align((size_t)3 * C * sizeof(float));
}

int tk_bn_fwd_train_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                         const void *res, int relu, float eps, float momentum, float *run_mean, float *run_var,
                         float *save_mean, float *save_invstd, void *y, void *ws, tk_err *e) {
    TRY(check(t, M, C, e));
    if (t == TK_BF16)
        return fwd_train<__nv_bfloat16>(c, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var,
                                        save_mean, save_invstd, y, ws, e);
    return fwd_train<float>(c, x, M, C, gamma, beta, res, relu, eps, momentum, run_mean, run_var, save_mean,
                            save_invstd, y, ws, e);
}

int tk_bn_fwd_eval_cuda(tk_ctx *c, tk_dtype t, const void *x, int64_t M, int C, const float *gamma, const float *beta,
                        const void *res, int relu, float eps, const float *run_mean, const float *run_var, void *y,
                        tk_err *e) {
    TRY(check(t, M, C, e));
    const EvalStats ev = {gamma, beta, run_mean, run_var, eps};
    if (t == TK_BF16) launch_apply<__nv_bfloat16, true>(tk_cu_stream(c), x, res, relu, nullptr, ev, M, C, y);
    else launch_apply<float, true>(tk_cu_stream(c), x, res, relu, nullptr, ev, M, C, y);
    return tk_cu_check(e, "bn_fwd_eval");
}

int tk_bn_bwd_cuda(tk_ctx *c, tk_dtype t, const void *x, const void *y, const void *dy, const void *dy2, int64_t M,
                   int C, const float *gamma, const float *save_mean, const float *save_invstd, void *dx, void *dz_out,
                   float *dgamma, float *dbeta, void *ws, tk_err *e) {
    TRY(check(t, M, C, e));
    if (t == TK_BF16)
        return bwd<__nv_bfloat16>(c, x, y, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out, dgamma, dbeta,
                                  ws, e);
    return bwd<float>(c, x, y, dy, dy2, M, C, gamma, save_mean, save_invstd, dx, dz_out, dgamma, dbeta, ws, e);
}
