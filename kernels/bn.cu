// CUDA side of kernels/bn.h. The per-channel sums (statistics forward, dbeta/dgamma backward) are
// two kernels: blocks of 32 channels x 8 row lanes add fp32 partials over a fixed set of rows
// (grid G row groups, G a function of M only) and reduce their 8 lanes in a fixed order; one
// thread per channel then adds the G partials in fp64. No atomics: the same inputs give the same
// bits on every run and every graph replay. The elementwise passes (apply, dx) take 16-byte
// vectors of channels when the channel count and the pointers allow.
#include "bn.h"
#include "cuda_util.cuh"
#include "rn_vec.cuh"

namespace {

constexpr int kTileC = 32, kLanes = 8;

// Row groups of the partial sums: about 256 rows per block, at most 1024 groups.
int groups(int64_t M) {
    int64_t g = (M + 255) / 256;
    return (int)(g < 1 ? 1 : g > 1024 ? 1024 : g);
}

// ws: partials (G x C x 2 floats), then coef (3 x C floats).
float *coef_of(void *ws, int64_t M, int C) {
    return (float *)((char *)ws + tk_cu_align((size_t)groups(M) * C * 2 * sizeof(float)));
}

// dz of element i (bn.h), rounded to T.
template <typename T>
__device__ __forceinline__ float dz_at(const T *y, const T *dy, const T *dy2, size_t i) {
    float g = rn_f(dy[i]);
    if (dy2) g += rn_f(dy2[i]);
    if (y && !(rn_f(y[i]) > 0.0f)) g = 0.0f;
    return rn_round<T>(g);
}

__device__ __forceinline__ float act(float v, int relu) { return relu && !(v > 0.0f) ? (v != v ? v : 0.0f) : v; }

// The block's 8 row lanes added in a fixed order: the block's partial sums of channel c.
__device__ __forceinline__ void lanes_to_partial(float s, float q, int c, int C, float *part) {
    __shared__ float ss[kLanes][kTileC], sq[kLanes][kTileC];
    ss[threadIdx.y][threadIdx.x] = s;
    sq[threadIdx.y][threadIdx.x] = q;
    __syncthreads();
    if (threadIdx.y == 0 && c < C) {
        for (int l = 1; l < kLanes; l++) s += ss[l][threadIdx.x], q += sq[l][threadIdx.x];
        part[((size_t)blockIdx.y * C + c) * 2] = s;
        part[((size_t)blockIdx.y * C + c) * 2 + 1] = q;
    }
}

// Forward statistics, part 1: per (group, channel) the sum and sum of squares of x - x[0, c].
template <typename T>
__global__ void stats_partial(const T *x, int64_t M, int C, float *part) {
    const int c = blockIdx.x * kTileC + threadIdx.x, G = gridDim.y;
    float s = 0, q = 0;
    if (c < C) {
        const float shift = rn_f(x[c]);
        for (int64_t m = (int64_t)blockIdx.y * kLanes + threadIdx.y; m < M; m += (int64_t)G * kLanes) {
            float d = rn_f(x[(size_t)m * C + c]) - shift;
            s += d;
            q += d * d;
        }
    }
    lanes_to_partial(s, q, c, C, part);
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

// Backward part 1: per (group, channel) the sums of dz and dz xhat; dz written out when asked.
template <typename T>
__global__ void bwd_partial(const T *x, const T *y, const T *dy, const T *dy2, const float *save_mean,
                            const float *save_invstd, int64_t M, int C, float *part, T *dz_out) {
    const int c = blockIdx.x * kTileC + threadIdx.x, G = gridDim.y;
    float s = 0, q = 0;
    if (c < C) {
        const float mean = save_mean[c], invstd = save_invstd[c];
        for (int64_t m = (int64_t)blockIdx.y * kLanes + threadIdx.y; m < M; m += (int64_t)G * kLanes) {
            const size_t i = (size_t)m * C + c;
            float dz = dz_at(y, dy, dy2, i), xhat = __fmul_rn(__fsub_rn(rn_f(x[i]), mean), invstd);
            s += dz;
            q = __fmaf_rn(dz, xhat, q);
            if (dz_out) dz_out[i] = rn_to<T>(dz);
        }
    }
    lanes_to_partial(s, q, c, C, part);
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

// dx = a (dz - b - xhat g) with the coefficients of bwd_final.
template <typename T, bool VEC>
__global__ void bwd_dx(const T *x, const T *y, const T *dy, const T *dy2, const float *save_mean,
                       const float *save_invstd, const float *coef, int64_t M, int C, T *dx) {
    constexpr int N = VEC ? RnVec<T>::N : 1;
    const size_t nv = (size_t)M * C / N;
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < nv; j += (size_t)gridDim.x * blockDim.x) {
        const size_t i = j * N;
        const int c0 = (int)(i % (size_t)C);
        float xv[N], g[N], g2[N], yv[N], o[N];
        if (VEC) {
            rn_vload(x, i, xv);
            rn_vload(dy, i, g);
            if (dy2) rn_vload(dy2, i, g2);
            if (y) rn_vload(y, i, yv);
        } else {
            xv[0] = rn_f(x[i]);
            g[0] = rn_f(dy[i]);
            if (dy2) g2[0] = rn_f(dy2[i]);
            if (y) yv[0] = rn_f(y[i]);
        }
#pragma unroll
        for (int k = 0; k < N; k++) {
            const int c = c0 + k;
            float dz = g[k];
            if (dy2) dz += g2[k];
            if (y && !(yv[k] > 0.0f)) dz = 0.0f;
            dz = rn_round<T>(dz);
            float xhat = __fmul_rn(__fsub_rn(xv[k], save_mean[c]), save_invstd[c]);
            o[k] = __fmul_rn(coef[c], __fsub_rn(__fsub_rn(dz, coef[C + c]), __fmul_rn(xhat, coef[2 * C + c])));
        }
        if (VEC) rn_vstore(dx, i, o);
        else dx[i] = rn_to<T>(o[0]);
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
    const int G = groups(M);
    float *part = (float *)ws, *coef = coef_of(ws, M, C);
    stats_partial<T><<<dim3((C + kTileC - 1) / kTileC, G), dim3(kTileC, kLanes), 0, st>>>((const T *)x, M, C, part);
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
    const int G = groups(M);
    float *part = (float *)ws, *coef = coef_of(ws, M, C);
    bwd_partial<T><<<dim3((C + kTileC - 1) / kTileC, G), dim3(kTileC, kLanes), 0, st>>>(
        (const T *)x, (const T *)y, (const T *)dy, (const T *)dy2, save_mean, save_invstd, M, C, part, (T *)dz_out);
    bwd_final<<<(C + 127) / 128, 128, 0, st>>>(part, G, M, C, gamma, save_invstd, dgamma, dbeta, coef);
    const bool vec = C % RnVec<T>::N == 0 && rn_aligned16(x, y, dy, dy2, dx);
    const int64_t n = M * C / (vec ? RnVec<T>::N : 1);
    if (vec)
        bwd_dx<T, true><<<tk_cu_blocks(n, 256), 256, 0, st>>>((const T *)x, (const T *)y, (const T *)dy,
                                                              (const T *)dy2, save_mean, save_invstd, coef, M, C,
                                                              (T *)dx);
    else
        bwd_dx<T, false><<<tk_cu_blocks(n, 256), 256, 0, st>>>((const T *)x, (const T *)y, (const T *)dy,
                                                               (const T *)dy2, save_mean, save_invstd, coef, M, C,
                                                               (T *)dx);
    return tk_cu_check(e, "bn_bwd");
}

} // namespace

size_t tk_bn_ws_bytes_cuda(int64_t M, int C) {
    return tk_cu_align((size_t)groups(M) * C * 2 * sizeof(float)) + tk_cu_align((size_t)3 * C * sizeof(float));
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
