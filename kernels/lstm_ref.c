// CPU reference of kernels/lstm.h, the specification the CUDA side and the tests check against.
// torch.nn.LSTM's recurrence (gate order i, f, g, o; out = h; packed sequences: the state frozen
// and the output 0 past each length; dropout between layers, and after the last with drop_last),
// written step by step: every product summed in fp64 in a fixed order, the gates in fp32, the values the CUDA
// side rounds to t (h, the dropped outputs, the gates' gradient) rounded here in the same places.
// OpenMP over the batch x gate rows (products) and the batch x features (cells).
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "act_io.h"
#include "lstm.h"

static inline float sigm(float a) { return 1.0f / (1.0f + expf(-a)); }

// n values of type t at p as a new fp32 array (NULL: out of memory).
static float *to_f32(const void *p, tk_dtype t, size_t n) {
    float *f = malloc((n ? n : 1) * sizeof(float));
    if (f) tk_act_ld_n(p, t, 0, f, n);
    return f;
}

static inline int seq_len(const int *len, int T, int b) { return len ? len[b] : T; }

static int check_len(const tk_lstm_shape *s, const int *len, tk_err *e) {
    for (int b = 0; len && b < s->B; b++)
        if (len[b] < 1 || len[b] > s->T)
            return tk_err_set(e, TK_EINTERNAL, "lstm: sequence %d: length %d (1..%d)", b, len[b], s->T);
    return 0;
}

// The dropout factor of layer k's output element i (its index in (T, B, H)); 1 for the last layer
// unless s->drop_last.
static inline float out_factor(const tk_dropout *d, const tk_lstm_shape *s, int k, int64_t step, uint32_t th,
                               int64_t i) {
    if ((k == s->L - 1 && !s->drop_last) || !d || d->p <= 0) return 1.0f;
    tk_dropout dk = *d;
    dk.site = d->site + (uint32_t)k;
    return tk_dropout_factor(&dk, th, step, i);
}

int tk_lstm_fwd_ref(tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
                    const float *h0, const float *c0, const tk_dropout *drop, void *y, float *hn, float *cn, void *ws,
                    tk_err *e) {
    if (tk_lstm_check(t, s, e) || check_len(s, len, e)) return e->code;
    const tk_lstm_ws W = tk_lstm_ws_layout(t, s);
    const int T = s->T, B = s->B, H = s->H, G4 = 4 * H;
    const size_t BH = (size_t)B * H;
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    char *base = ws;
    for (int k = 0; k < s->L; k++) {
        const int Ik = k ? H : s->I;
        float *gates = (float *)(base + W.gates[k]), *cs = (float *)(base + W.c[k]);
        void *hs = base + W.h[k];
        void *out = k == s->L - 1 ? y : (void *)(base + W.in[k + 1]);
        float *in = to_f32(k ? (const void *)(base + W.in[k]) : x, t, (size_t)T * B * Ik);
        float *wih = to_f32(w->w_ih[k], t, (size_t)G4 * Ik), *whh = to_f32(w->w_hh[k], t, (size_t)G4 * H);
        float *hp = malloc(BH * sizeof(float));
        if (!in || !wih || !whh || !hp) {
            free(in), free(wih), free(whh), free(hp);
            return tk_err_errno(e, ENOMEM, "lstm (cpu): out of memory");
        }
        for (size_t i = 0; i < BH; i++) {
            tk_act_st(hs, t, i, h0 ? h0[(size_t)k * BH + i] : 0.0f);
            cs[i] = c0 ? c0[(size_t)k * BH + i] : 0.0f;
        }
        const float *bi = w->b_ih[k], *bh = w->b_hh[k];
        for (int tt = 0; tt < T; tt++) {
            tk_act_ld_n(hs, t, (size_t)tt * BH, hp, BH); // h_{t-1} as the product reads it
            float *ga = gates + (size_t)tt * B * G4;
#pragma omp parallel for schedule(static)
            for (int64_t br = 0; br < (int64_t)B * G4; br++) {
                const int b = (int)(br / G4), r = (int)(br % G4);
                if (tt >= seq_len(len, T, b)) {
                    ga[br] = 0;
                    continue;
                }
                const float *xr = in + ((size_t)tt * B + b) * Ik, *wr = wih + (size_t)r * Ik;
                const float *hr = hp + (size_t)b * H, *vr = whh + (size_t)r * H;
                double a = (double)bi[r] + bh[r];
                for (int i = 0; i < Ik; i++) a += (double)wr[i] * xr[i];
                for (int j = 0; j < H; j++) a += (double)vr[j] * hr[j];
                ga[br] = (float)a;
            }
#pragma omp parallel for schedule(static)
            for (int64_t bj = 0; bj < (int64_t)BH; bj++) {
                const int b = (int)(bj / H), j = (int)(bj % H);
                const size_t prev = (size_t)tt * BH + bj, cur = prev + BH, o = (size_t)tt * BH + bj;
                if (tt >= seq_len(len, T, b)) { // frozen state, output 0
                    tk_act_st(hs, t, cur, hp[bj]);
                    cs[cur] = cs[prev];
                    tk_act_st(out, t, o, 0.0f);
                    continue;
                }
                float *g = ga + (size_t)b * G4;
                const float gi = sigm(g[j]), gf = sigm(g[H + j]), gg = tanhf(g[2 * H + j]), go = sigm(g[3 * H + j]);
                g[j] = gi, g[H + j] = gf, g[2 * H + j] = gg, g[3 * H + j] = go;
                const float c = gf * cs[prev] + gi * gg;
                cs[cur] = c;
                tk_act_st(hs, t, cur, go * tanhf(c));
                const float h = tk_act_ld(hs, t, cur);
                tk_act_st(out, t, o, h * out_factor(drop, s, k, step, th, (int64_t)o));
            }
        }
        for (int b = 0; b < B; b++) {
            const size_t last = (size_t)seq_len(len, T, b) * BH + (size_t)b * H;
            for (int j = 0; j < H; j++) {
                if (hn) hn[(size_t)k * BH + (size_t)b * H + j] = tk_act_ld(hs, t, last + j);
                if (cn) cn[(size_t)k * BH + (size_t)b * H + j] = cs[last + j];
            }
        }
        free(in), free(wih), free(whh), free(hp);
    }
    return 0;
}

int tk_lstm_bwd_ref(tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
                    const tk_dropout *drop, const void *dy, const float *dhn, const float *dcn, void *dx, float *dh0,
                    float *dc0, const tk_lstm_dw *dw, void *ws, tk_err *e) {
    if (tk_lstm_check(t, s, e) || check_len(s, len, e)) return e->code;
    const tk_lstm_ws W = tk_lstm_ws_layout(t, s);
    const int T = s->T, B = s->B, H = s->H, G4 = 4 * H;
    const size_t BH = (size_t)B * H, TB = (size_t)T * B;
    const uint32_t th = drop ? tk_dropout_thresh(drop->p) : 0;
    const int64_t step = drop && drop->p > 0 ? *drop->step : 0;
    char *base = ws;
    void *dyb = base + W.dy;
    float *dc = (float *)(base + W.dc), *dhr = (float *)(base + W.dhr);
    for (int k = s->L - 1; k >= 0; k--) {
        const int Ik = k ? H : s->I;
        const float *gates = (const float *)(base + W.gates[k]), *cs = (const float *)(base + W.c[k]);
        const void *hs = base + W.h[k], *dyk = k == s->L - 1 ? dy : dyb;
        float *in = to_f32(k ? (const void *)(base + W.in[k]) : x, t, TB * Ik);
        float *wih = to_f32(w->w_ih[k], t, (size_t)G4 * Ik), *whh = to_f32(w->w_hh[k], t, (size_t)G4 * H);
        float *hsf = to_f32(hs, t, TB * H), *daf = malloc(TB * G4 * sizeof(float));
        if (!in || !wih || !whh || !hsf || !daf) {
            free(in), free(wih), free(whh), free(hsf), free(daf);
            return tk_err_errno(e, ENOMEM, "lstm (cpu): out of memory");
        }
        for (int tt = T - 1; tt >= 0; tt--) {
            float *dat = daf + (size_t)tt * B * G4;
#pragma omp parallel for schedule(static)
            for (int64_t bj = 0; bj < (int64_t)BH; bj++) {
                const int b = (int)(bj / H), j = (int)(bj % H), n = seq_len(len, T, b);
                float *d = dat + (size_t)b * G4;
                if (tt >= n) {
                    d[j] = d[H + j] = d[2 * H + j] = d[3 * H + j] = 0;
                    continue;
                }
                const size_t o = (size_t)tt * BH + bj;
                const float dh_in = tt == n - 1 ? (dhn ? dhn[(size_t)k * BH + bj] : 0.0f) : dhr[bj];
                const float dc_in = tt == n - 1 ? (dcn ? dcn[(size_t)k * BH + bj] : 0.0f) : dc[bj];
                const float dht = tk_act_ld(dyk, t, o) * out_factor(drop, s, k, step, th, (int64_t)o) + dh_in;
                const float *g = gates + (size_t)tt * B * G4 + (size_t)b * G4;
                const float gi = g[j], gf = g[H + j], gg = g[2 * H + j], go = g[3 * H + j];
                const float c = cs[o + BH], tc = tanhf(c), dct = dc_in + dht * go * (1 - tc * tc);
                d[j] = dct * gg * gi * (1 - gi);
                d[H + j] = dct * cs[o] * gf * (1 - gf);
                d[2 * H + j] = dct * gi * (1 - gg * gg);
                d[3 * H + j] = dht * tc * go * (1 - go);
                dc[bj] = dct * gf;
            }
            if (t == TK_BF16) // da as the GEMMs read it
                for (size_t i = 0; i < (size_t)B * G4; i++) dat[i] = tk_bf16_to_f32(tk_f32_to_bf16(dat[i]));
            // the recurrent product dh_{t-1} = W_hh^T da_t
#pragma omp parallel for schedule(static)
            for (int64_t bj = 0; bj < (int64_t)BH; bj++) {
                const int b = (int)(bj / H), j = (int)(bj % H);
                const float *d = dat + (size_t)b * G4;
                double a = 0;
                for (int r = 0; r < G4; r++) a += (double)d[r] * whh[(size_t)r * H + j];
                dhr[bj] = (float)a;
            }
        }
        for (size_t i = 0; i < BH; i++) {
            if (dh0) dh0[(size_t)k * BH + i] = dhr[i];
            if (dc0) dc0[(size_t)k * BH + i] = dc[i];
        }
        // the weight gradients, summed over every step and sequence (da is 0 past the lengths)
#pragma omp parallel for schedule(static)
        for (int r = 0; r < G4; r++) {
            double db = 0;
            for (size_t q = 0; q < TB; q++) db += daf[q * G4 + r];
            dw->b_ih[k][r] += (float)db, dw->b_hh[k][r] += (float)db;
            for (int i = 0; i < Ik; i++) {
                double a = 0;
                for (size_t q = 0; q < TB; q++) a += (double)daf[q * G4 + r] * in[q * Ik + i];
                dw->w_ih[k][(size_t)r * Ik + i] += (float)a;
            }
            for (int j = 0; j < H; j++) {
                double a = 0;
                for (size_t q = 0; q < TB; q++) a += (double)daf[q * G4 + r] * hsf[q * H + j];
                dw->w_hh[k][(size_t)r * H + j] += (float)a;
            }
        }
        // the input's gradient: dx = W_ih^T da, the dy of the layer below (its dropout applied there)
        void *dst = k ? dyb : dx;
        if (dst) {
#pragma omp parallel for schedule(static)
            for (int64_t qi = 0; qi < (int64_t)TB * Ik; qi++) {
                const size_t q = (size_t)(qi / Ik);
                const int i = (int)(qi % Ik);
                double a = 0;
                for (int r = 0; r < G4; r++) a += (double)daf[q * G4 + r] * wih[(size_t)r * Ik + i];
                tk_act_st(dst, t, (size_t)qi, (float)a);
            }
        }
        free(in), free(wih), free(whh), free(hsf), free(daf);
    }
    return 0;
}
