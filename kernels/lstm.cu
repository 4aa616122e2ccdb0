// CUDA side of kernels/lstm.h: our kernels around cuBLASLt GEMMs (tk_gemm), not cuDNN's RNN API.
// Why: cuDNN's multi-layer RNN draws its inter-layer dropout from its own generator
// (cudnnDropoutDescriptor), which the cpu reference cannot reproduce, so the dropout of
// kernels/dropout.h would need one cuDNN call per layer anyway; its packed weight space would
// need a copy to and from PyTorch's layout (cudnnGetRNNWeightParams) at every step or a second
// parameter layout; and everything here is already a GEMM the project runs (capturable in a
// CUDA graph, no allocation). The per-step recurrent GEMM is small (B x 4H x H) and
// launch-bound at small B: a persistent fused kernel is the next step if the timing line in
// tests/gpu/test_lstm.c says the recurrence dominates.
// Forward, per layer: one GEMM for every step's input projection, gates (T B, 4H) fp32 =
// in W_ih^T; then per step the recurrent GEMM gates_t += h_{t-1} W_hh^T (fp32 accumulate in
// place) and the cell kernel (a thread per (b, j): biases, activations stored back for the
// backward, c and h, the output with the next layer's dropout). Backward, per layer from the
// top: per step the cell's backward (da_t in t, dc) and the recurrent GEMM dh = da_t W_hh; then
// three GEMMs over all steps (dW_ih += da^T in, dW_hh += da^T h, dx = da W_ih) and the bias
// gradient as column sums of da in two deterministic passes. No TF32 (fp32 GEMMs in full fp32).
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "act_types.cuh"
#include "dropout.cuh"
#include "gemm.h"
#include "lstm.h"

namespace {

constexpr int kT = 256;

unsigned grid_of(int64_t n) { return tk_cu_blocks(n, kT); }

__device__ __forceinline__ float sigm(float a) { return 1.0f / (1.0f + expf(-a)); }
__device__ __forceinline__ int seq_len(const int *len, int T, int b) { return len ? len[b] : T; }

// The dropout of layer k's output (site + k), by value for the kernels; off for the last layer
// unless s->drop_last.
tk_drop_dev layer_drop(const tk_dropout *d, int k, const tk_lstm_shape *s) {
    if (!d || (k == s->L - 1 && !s->drop_last)) return tk_drop_dev_of(NULL);
    tk_dropout dk = *d;
    dk.site = d->site + (uint32_t)k;
    return tk_drop_dev_of(&dk);
}

template <typename T>
__global__ void __launch_bounds__(kT) init_state(int64_t n, const float *h0, const float *c0, T *hs, float *cs) {
    for (int64_t i = (int64_t)blockIdx.x * kT + threadIdx.x; i < n; i += (int64_t)gridDim.x * kT) {
        hs[i] = tk_to<T>(h0 ? h0[i] : 0.0f);
        cs[i] = c0 ? c0[i] : 0.0f;
    }
}

// Step tt of a layer: ga (B, 4H) holds the pre-activations without the biases.
template <typename T>
__global__ void __launch_bounds__(kT) cell_fwd(int T_, int B, int H, int tt, const int *len, const float *bi,
                                               const float *bh, float *ga, T *hs, float *cs, T *out, tk_drop_dev d) {
    const int64_t BH = (int64_t)B * H;
    const int64_t step = tk_drop_step(d);
    for (int64_t bj = (int64_t)blockIdx.x * kT + threadIdx.x; bj < BH; bj += (int64_t)gridDim.x * kT) {
        const int b = (int)(bj / H), j = (int)(bj % H);
        const int64_t prev = (int64_t)tt * BH + bj, cur = prev + BH, o = prev;
        float *g = ga + (int64_t)b * 4 * H;
        if (tt >= seq_len(len, T_, b)) {
            hs[cur] = hs[prev];
            cs[cur] = cs[prev];
            out[o] = tk_to<T>(0.0f);
            g[j] = g[H + j] = g[2 * H + j] = g[3 * H + j] = 0.0f;
            continue;
        }
        const float gi = sigm(g[j] + (bi[j] + bh[j]));
        const float gf = sigm(g[H + j] + (bi[H + j] + bh[H + j]));
        const float gg = tanhf(g[2 * H + j] + (bi[2 * H + j] + bh[2 * H + j]));
        const float go = sigm(g[3 * H + j] + (bi[3 * H + j] + bh[3 * H + j]));
        g[j] = gi, g[H + j] = gf, g[2 * H + j] = gg, g[3 * H + j] = go;
        const float c = gf * cs[prev] + gi * gg;
        cs[cur] = c;
        const T h = tk_to<T>(go * tanhf(c));
        hs[cur] = h;
        out[o] = tk_to<T>(tk_f(h) * tk_drop1(d, step, o));
    }
}

template <typename T>
__global__ void __launch_bounds__(kT) final_state(int T_, int B, int H, const int *len, const T *hs, const float *cs,
                                                  float *hn, float *cn) {
    const int64_t BH = (int64_t)B * H;
    for (int64_t bj = (int64_t)blockIdx.x * kT + threadIdx.x; bj < BH; bj += (int64_t)gridDim.x * kT) {
        const int64_t last = (int64_t)seq_len(len, T_, (int)(bj / H)) * BH + bj;
        if (hn) hn[bj] = tk_f(hs[last]);
        if (cn) cn[bj] = cs[last];
    }
}

// The cell's backward at step tt: da_t (B, 4H) in t, dc carried; dhr holds W_hh^T da_{tt+1}.
template <typename T>
__global__ void __launch_bounds__(kT) cell_bwd(int T_, int B, int H, int tt, const int *len, const float *gates,
                                               const float *cs, const T *dy, tk_drop_dev d, const float *dhn,
                                               const float *dcn, const float *dhr, float *dc, T *da) {
    const int64_t BH = (int64_t)B * H;
    const int64_t step = tk_drop_step(d);
    for (int64_t bj = (int64_t)blockIdx.x * kT + threadIdx.x; bj < BH; bj += (int64_t)gridDim.x * kT) {
        const int b = (int)(bj / H), j = (int)(bj % H), n = seq_len(len, T_, b);
        T *dr = da + (int64_t)tt * B * 4 * H + (int64_t)b * 4 * H;
        if (tt >= n) {
            dr[j] = dr[H + j] = dr[2 * H + j] = dr[3 * H + j] = tk_to<T>(0.0f);
            continue;
        }
        const int64_t o = (int64_t)tt * BH + bj;
        const float dh_in = tt == n - 1 ? (dhn ? dhn[bj] : 0.0f) : dhr[bj];
        const float dc_in = tt == n - 1 ? (dcn ? dcn[bj] : 0.0f) : dc[bj];
        const float dht = tk_f(dy[o]) * tk_drop1(d, step, o) + dh_in;
        const float *g = gates + (int64_t)tt * B * 4 * H + (int64_t)b * 4 * H;
        const float gi = g[j], gf = g[H + j], gg = g[2 * H + j], go = g[3 * H + j];
        const float c = cs[o + BH], tc = tanhf(c), dct = dc_in + dht * go * (1 - tc * tc);
        dr[j] = tk_to<T>(dct * gg * gi * (1 - gi));
        dr[H + j] = tk_to<T>(dct * cs[o] * gf * (1 - gf));
        dr[2 * H + j] = tk_to<T>(dct * gi * (1 - gg * gg));
        dr[3 * H + j] = tk_to<T>(dht * tc * go * (1 - go));
        dc[bj] = dct * gf;
    }
}

// Column sums of da (rows, G4): chunk y of the rows into part[y][r] (rows in order).
template <typename T>
__global__ void __launch_bounds__(kT) col_part(int64_t rows, int G4, int chunks, const T *da, float *part) {
    const int r = blockIdx.x * kT + threadIdx.x;
    if (r >= G4) return;
    const int64_t per = (rows + chunks - 1) / chunks, q0 = blockIdx.y * per, q1 = q0 + per < rows ? q0 + per : rows;
    float s = 0;
    for (int64_t q = q0; q < q1; q++) s += tk_f(da[q * G4 + r]);
    part[(int64_t)blockIdx.y * G4 + r] = s;
}

__global__ void __launch_bounds__(kT) col_total(int G4, int chunks, const float *part, float *db_ih, float *db_hh) {
    const int r = blockIdx.x * kT + threadIdx.x;
    if (r >= G4) return;
    float s = 0;
    for (int y = 0; y < chunks; y++) s += part[(int64_t)y * G4 + r];
    db_ih[r] += s;
    db_hh[r] += s;
}

// D (M, N) = op(A) op(B) (+ D when acc), A and B in t, D in cd; full fp32 math (no TF32).
int gemm(tk_ctx *c, tk_dtype t, tk_dtype cd, int M, int N, int K, int ta, int tb, const void *A, const void *B,
         void *D, int acc, tk_err *e) {
    tk_gemm_args g = {};
    g.M = M, g.N = N, g.K = K, g.transa = ta, g.transb = tb;
    g.ab_type = t, g.cd_type = cd, g.A = A, g.B = B, g.D = D, g.C = acc ? D : NULL;
    g.alpha = 1.0f, g.beta = acc ? 1.0f : 0.0f, g.epi = TK_EPI_NONE, g.stream = TK_STREAM_COMPUTE, g.tf32 = 0;
    return tk_gemm(c, &g, e);
}

template <typename T>
int fwd(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
        const float *h0, const float *c0, const tk_dropout *drop, void *y, float *hn, float *cn, void *ws, tk_err *e) {
    const tk_lstm_ws W = tk_lstm_ws_layout(t, s);
    const int T_ = s->T, B = s->B, H = s->H, G4 = 4 * H;
    const int64_t BH = (int64_t)B * H, TB = (int64_t)T_ * B;
    char *base = (char *)ws;
    cudaStream_t st = tk_cu_stream(c);
    for (int k = 0; k < s->L; k++) {
        const int Ik = k ? H : s->I;
        float *gates = (float *)(base + W.gates[k]), *cs = (float *)(base + W.c[k]);
        T *hs = (T *)(base + W.h[k]);
        T *out = k == s->L - 1 ? (T *)y : (T *)(base + W.in[k + 1]);
        const void *in = k ? (const void *)(base + W.in[k]) : x;
        init_state<T><<<grid_of(BH), kT, 0, st>>>(BH, h0 ? h0 + k * BH : NULL, c0 ? c0 + k * BH : NULL, hs, cs);
        TRY(tk_cu_check(e, "lstm_fwd"));
        TRY(gemm(c, t, TK_F32, (int)TB, G4, Ik, 0, 1, in, w->w_ih[k], gates, 0, e));
        const tk_drop_dev d = layer_drop(drop, k, s);
        for (int tt = 0; tt < T_; tt++) {
            float *ga = gates + (int64_t)tt * B * G4;
            TRY(gemm(c, t, TK_F32, B, G4, H, 0, 1, hs + tt * BH, w->w_hh[k], ga, 1, e));
            cell_fwd<T><<<grid_of(BH), kT, 0, st>>>(T_, B, H, tt, len, w->b_ih[k], w->b_hh[k], ga, hs, cs, out, d);
            TRY(tk_cu_check(e, "lstm_fwd"));
        }
        if (hn || cn) {
            final_state<T><<<grid_of(BH), kT, 0, st>>>(T_, B, H, len, hs, cs, hn ? hn + k * BH : NULL,
                                                       cn ? cn + k * BH : NULL);
            TRY(tk_cu_check(e, "lstm_fwd"));
        }
    }
    return 0;
}

template <typename T>
int bwd(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
        const tk_dropout *drop, const void *dy, const float *dhn, const float *dcn, void *dx, float *dh0, float *dc0,
        const tk_lstm_dw *dw, void *ws, tk_err *e) {
    const tk_lstm_ws W = tk_lstm_ws_layout(t, s);
    const int T_ = s->T, B = s->B, H = s->H, G4 = 4 * H;
    const int64_t BH = (int64_t)B * H, TB = (int64_t)T_ * B;
    char *base = (char *)ws;
    T *da = (T *)(base + W.da), *dyb = (T *)(base + W.dy);
    float *dc = (float *)(base + W.dc), *dhr = (float *)(base + W.dhr), *part = (float *)(base + W.db);
    cudaStream_t st = tk_cu_stream(c);
    for (int k = s->L - 1; k >= 0; k--) {
        const int Ik = k ? H : s->I;
        const float *gates = (const float *)(base + W.gates[k]), *cs = (const float *)(base + W.c[k]);
        const T *hs = (const T *)(base + W.h[k]);
        const T *dyk = k == s->L - 1 ? (const T *)dy : dyb;
        const void *in = k ? (const void *)(base + W.in[k]) : x;
        const tk_drop_dev d = layer_drop(drop, k, s);
        for (int tt = T_ - 1; tt >= 0; tt--) {
            cell_bwd<T><<<grid_of(BH), kT, 0, st>>>(T_, B, H, tt, len, gates, cs, dyk, d, dhn ? dhn + k * BH : NULL,
                                                    dcn ? dcn + k * BH : NULL, dhr, dc, da);
            TRY(tk_cu_check(e, "lstm_bwd"));
            const T *dat = da + (int64_t)tt * B * G4;
            if (tt > 0) TRY(gemm(c, t, TK_F32, B, H, G4, 0, 0, dat, w->w_hh[k], dhr, 0, e));
            else if (dh0) TRY(gemm(c, t, TK_F32, B, H, G4, 0, 0, dat, w->w_hh[k], dh0 + k * BH, 0, e));
        }
        if (dc0) TRY(tk_cu_check(e, "lstm_bwd (dc0)",
                                 cudaMemcpyAsync(dc0 + k * BH, dc, BH * sizeof(float), cudaMemcpyDeviceToDevice, st)));
        TRY(gemm(c, t, TK_F32, G4, Ik, (int)TB, 1, 0, da, in, dw->w_ih[k], 1, e));
        TRY(gemm(c, t, TK_F32, G4, H, (int)TB, 1, 0, da, hs, dw->w_hh[k], 1, e));
        const int chunks = TB < TK_LSTM_DB_CHUNKS ? (int)TB : TK_LSTM_DB_CHUNKS;
        col_part<T><<<dim3((G4 + kT - 1) / kT, chunks), kT, 0, st>>>(TB, G4, chunks, da, part);
        col_total<<<(G4 + kT - 1) / kT, kT, 0, st>>>(G4, chunks, part, dw->b_ih[k], dw->b_hh[k]);
        TRY(tk_cu_check(e, "lstm_bwd"));
        void *dst = k ? (void *)dyb : dx;
        if (dst) TRY(gemm(c, t, t, (int)TB, Ik, G4, 0, 0, da, w->w_ih[k], dst, 0, e));
    }
    return 0;
}

} // namespace

extern "C" int tk_lstm_fwd_cuda(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len,
                                const void *x, const float *h0, const float *c0, const tk_dropout *drop, void *y,
                                float *hn, float *cn, void *ws, tk_err *e) {
    TRY(tk_lstm_check(t, s, e));
    TK_ACT_DISPATCH(t, "lstm_fwd", e, return fwd<T>(c, t, s, w, len, x, h0, c0, drop, y, hn, cn, ws, e));
    return 0;
}

extern "C" int tk_lstm_bwd_cuda(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len,
                                const void *x, const tk_dropout *drop, const void *dy, const float *dhn,
                                const float *dcn, void *dx, float *dh0, float *dc0, const tk_lstm_dw *dw, void *ws,
                                tk_err *e) {
    TRY(tk_lstm_check(t, s, e));
    TK_ACT_DISPATCH(t, "lstm_bwd", e,
                    return bwd<T>(c, t, s, w, len, x, drop, dy, dhn, dcn, dx, dh0, dc0, dw, ws, e));
    return 0;
}
