// CUDA side of kernels/dice_ce.h: three kernels. sums: a grid of (G, N) blocks, each over a fixed
// range of one sample's voxels (G a function of S only), fp32 softmax per voxel, fp64 sums per
// thread, reduced in a fixed tree into the block's 7 partials (I, P, T of classes 1 and 2, and the
// cross-entropy); finish: one block adds each sample's G partials in fp64 (in order), writes the
// loss and the dice, and the gradient's per-(sample, class) coefficients; grad: dz per voxel.
// Deterministic (no atomics). z is read twice (6 or 12 bytes a voxel): small against the
// convolutions around it.
#include "act_types.cuh"
#include "dice_ce.h"

namespace {

constexpr int kT = 256, kQ = 7, kMaxG = 256, kVoxPerBlock = 4096;
enum { qI1, qI2, qP1, qP2, qT1, qT2, qCE };

// Blocks per sample: about kVoxPerBlock voxels each, at most kMaxG.
int groups(int64_t S) {
    int64_t g = (S + kVoxPerBlock - 1) / kVoxPerBlock;
    return (int)(g < 1 ? 1 : g > kMaxG ? kMaxG : g);
}

// p = softmax of voxel i's logits (fp32); returns log sum exp.
template <typename T> __device__ __forceinline__ float softmax3(const T *z, size_t i, int ld, float p[3]) {
    const float a = tk_f(z[i * ld]), b = tk_f(z[i * ld + 1]), c = tk_f(z[i * ld + 2]);
    const float mx = fmaxf(a, fmaxf(b, c));
    p[0] = expf(a - mx), p[1] = expf(b - mx), p[2] = expf(c - mx);
    const float s = p[0] + p[1] + p[2], r = 1.0f / s;
    p[0] *= r, p[1] *= r, p[2] *= r;
    return mx + logf(s);
}

template <typename T>
__global__ void __launch_bounds__(kT) sums(const T *z, const uint8_t *label, int64_t S, int ld, int G, double *part) {
    __shared__ double sh[kQ][kT];
    const int n = blockIdx.y, g = blockIdx.x;
    const int64_t chunk = (S + G - 1) / G, s0 = g * chunk, s1 = s0 + chunk < S ? s0 + chunk : S;
    double q[kQ] = {0, 0, 0, 0, 0, 0, 0};
    for (int64_t s = s0 + threadIdx.x; s < s1; s += kT) {
        const size_t i = (size_t)n * S + s;
        const int y = label[i];
        float p[3];
        const float lse = softmax3(z, i, ld, p);
        q[qI1] += y == 1 ? p[1] : 0.0f, q[qI2] += y == 2 ? p[2] : 0.0f;
        q[qP1] += p[1], q[qP2] += p[2];
        q[qT1] += y == 1, q[qT2] += y == 2;
        q[qCE] += y < 3 ? lse - tk_f(z[i * ld + y]) : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kQ; k++) sh[k][threadIdx.x] = q[k];
    __syncthreads();
    for (int w = kT / 2; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w)
#pragma unroll
            for (int k = 0; k < kQ; k++) sh[k][threadIdx.x] += sh[k][threadIdx.x + w];
        __syncthreads();
    }
    if ((int)threadIdx.x < kQ) part[((size_t)n * G + g) * kQ + threadIdx.x] = sh[threadIdx.x][0];
}

// coef (N, 2, 2) fp32: per sample and class k, g_k = a [label == k] + b (dice_ce.h's g_k), then
// ce_w = 1 / (2 N S) at coef[4 N], each times scale; acc (not NULL) += (scale loss, 1).
__global__ void __launch_bounds__(kT) finish(const double *part, int N, int64_t S, int G, float scale, double *acc,
                                             float *loss, float *dice, float *coef) {
    __shared__ double tot[64][kQ]; // (N <= 64: checked by the caller)
    for (int j = threadIdx.x; j < N * kQ; j += kT) {
        const int n = j / kQ, k = j % kQ;
        double s = 0;
        for (int g = 0; g < G; g++) s += part[((size_t)n * G + g) * kQ + k];
        tot[n][k] = s;
    }
    __syncthreads();
    if (threadIdx.x != 0) return;
    double ce = 0, dsum = 0;
    for (int n = 0; n < N; n++) {
        ce += tot[n][qCE];
        for (int k = 0; k < 2; k++) {
            const double den = tot[n][qT1 + k] + tot[n][qP1 + k] + TK_DICE_SMOOTH;
            const double d = (2 * tot[n][qI1 + k] + TK_DICE_SMOOTH) / den;
            dsum += d;
            if (dice) dice[n * 2 + k] = (float)d;
            coef[(n * 2 + k) * 2] = (float)(-2.0 * scale / (4.0 * N * den));
            coef[(n * 2 + k) * 2 + 1] = (float)(d * scale / (4.0 * N * den));
        }
    }
    coef[4 * N] = (float)(scale / (2.0 * N * (double)S));
    const double l = (1.0 - dsum / (2.0 * N) + ce / ((double)N * S)) / 2;
    *loss = (float)l;
    if (acc) acc[0] += (double)scale * l, acc[1] += 1;
}

template <typename T>
__global__ void __launch_bounds__(kT)
    grad(const T *z, const uint8_t *label, int N, int64_t S, int ld, const float *coef, T *dz) {
    const float cw = coef[4 * N];
    for (size_t i = (size_t)blockIdx.x * kT + threadIdx.x; i < (size_t)N * S; i += (size_t)gridDim.x * kT) {
        const int n = (int)(i / (size_t)S), y = label[i];
        float p[3];
        softmax3(z, i, ld, p);
        const float *cf = coef + n * 4;
        const float g1 = (y == 1 ? cf[0] : 0.0f) + cf[1], g2 = (y == 2 ? cf[2] : 0.0f) + cf[3];
        const float pg = p[1] * g1 + p[2] * g2;
        T *d = dz + i * ld;
        d[0] = tk_to<T>(p[0] * (0.0f - pg) + (p[0] - (y == 0)) * cw);
        d[1] = tk_to<T>(p[1] * (g1 - pg) + (p[1] - (y == 1)) * cw);
        d[2] = tk_to<T>(p[2] * (g2 - pg) + (p[2] - (y == 2)) * cw);
        for (int k = 3; k < ld; k++) d[k] = tk_to<T>(0.0f);
    }
}

// ws: partials (N G kQ doubles), then coef (4 N + 1 floats).
size_t part_bytes(int N, int64_t S) { return tk_cu_align((size_t)N * groups(S) * kQ * sizeof(double)); }

} // namespace

size_t tk_dice_ce_ws_bytes_cuda(int N, int64_t S) {
    return part_bytes(N, S) + tk_cu_align((size_t)(4 * N + 1) * sizeof(float));
}

int tk_dice_ce_cuda(tk_ctx *c, tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld, float *loss,
                    float *dice, void *dz, void *ws, tk_err *e) {
    return tk_dice_ce_acc_cuda(c, t, z, label, N, S, ld, 1.0f, NULL, loss, dice, dz, ws, e);
}

int tk_dice_ce_acc_cuda(tk_ctx *c, tk_dtype t, const void *z, const uint8_t *label, int N, int64_t S, int ld,
                        float scale, double *acc, float *loss, float *dice, void *dz, void *ws, tk_err *e) {
    TRY(tk_dice_ce_check(t, N, S, ld, e));
    if (N > 64) return tk_err_set(e, TK_EINTERNAL, "dice_ce: %d samples (at most 64 a call on cuda)", N);
    cudaStream_t st = tk_cu_stream(c);
    const int G = groups(S);
    double *part = (double *)ws;
    float *coef = (float *)((char *)ws + part_bytes(N, S));
    TK_ACT_DISPATCH(t, "dice_ce", e, {
        sums<T><<<dim3(G, N), kT, 0, st>>>((const T *)z, label, S, ld, G, part);
        finish<<<1, kT, 0, st>>>(part, N, S, G, scale, acc, loss, dice, coef);
        if (dz) grad<T><<<tk_cu_blocks((int64_t)N * S, kT), kT, 0, st>>>((const T *)z, label, N, S, ld, coef, (T *)dz);
    });
    return tk_cu_check(e, "dice_ce");
}
