// A multi-layer unidirectional LSTM over padded sequences: torch.nn.LSTM as MLPerf's speech
// benchmark uses it (mlcommons/training rnn_speech_recognition/pytorch common/rnn.py: the encoder's
// 2 + 3 layers of 1024 and the prediction network's 2 of 512, fed pack_padded_sequence batches).
//
// Shapes: x (T, B, I) time major (torch.nn.LSTM's batch_first=False), y (T, B, H); L layers, layer k
// with input size I_k = k ? H : I. Sequence b has len[b] steps (1 <= len[b] <= T; len NULL: all T).
// Gate order and weights are PyTorch's, so checkpoints map 1:1: w_ih[k] (4H, I_k), w_hh[k] (4H, H),
// b_ih[k], b_hh[k] (4H), rows [0, H) the input gate i, [H, 2H) the forget gate f, [2H, 3H) the cell
// candidate g, [3H, 4H) the output gate o. Per layer, step t < len[b], with h_{-1} = h0, c_{-1} = c0:
//   a = W_ih x_t + b_ih + W_hh h_{t-1} + b_hh
//   i = sigmoid(a_i), f = sigmoid(a_f), g = tanh(a_g), o = sigmoid(a_o)
//   c_t = f c_{t-1} + i g,  h_t = o tanh(c_t),  out_t = h_t
// Past a sequence's length its state is frozen and its outputs are 0, as a packed sequence gives
// (hn, cn = the state after step len[b] - 1; padded y rows 0, like pad_packed_sequence's padding).
// MLPerf's reference runs its LSTMs over the padded tensor, unpacked (rnnt/model.py encode and
// predict pass no lengths): len NULL reproduces that exactly (padding steps computed as data).
// With lengths the outputs at t < len[b] are the same (the recurrence is causal) and the padded
// steps are skipped; the one place that differs is the encoder's StackTime, whose last stacked
// frame of an odd-length utterance pairs its last output with a padded step's (0 here).
// Dropout, torch.nn.LSTM's between layers: layer k + 1 reads out_k times the mask factor of
// kernels/dropout.h with site drop->site + k and element index drop->offset + (t B + b) H + j
// (k = 0 .. L-2); with s->drop_last also the last layer's output, site drop->site + L - 1 (the
// Dropout common/rnn.py applies after its torch.nn.LSTM, same p; hn and cn are never dropped).
// drop NULL or p 0: no dropout (evaluation).
//
// Types: x, y, dx, dy and the weights w_ih, w_hh in t (TK_F32, or TK_BF16: the GEMM operands);
// biases, states (h0, c0, hn, cn, dh0, dc0, dhn, dcn: (L, B, H)) and weight gradients fp32. Math is
// fp32; the values rounded to t are the ones the GEMMs read on cuda, in the same places on the cpu:
// h_t (kept in t for the recurrent product; hn is that rounded value), the dropped outputs and the
// gates' gradient da (the backward GEMMs' operand). c stays fp32. Optional: h0/c0 (NULL: zeros),
// hn/cn (NULL: not written), dhn/dcn (NULL: zero), dh0/dc0, dx (NULL: not written).
// Backward takes dy (T, B, H) (rows past the length ignored) and ADDS into the weight gradients
// (dW_ih += sum_t da_t x_t^T, dW_hh += sum_t da_t h_{t-1}^T, db_ih and db_hh += sum_t da_t: the same
// da), so a caller accumulating over micro-batches zeroes them once.
// ws (tk_lstm_ws_bytes, in the backend's memory) holds what the forward saves for the backward
// (the gates, the h and c of every step, the dropped inputs of layers 1..L-1) and the backward's
// scratch; a backward must follow the forward with the same ws, inputs, weights and lengths.
// Precision: the reference accumulates the products in fp64, cuda in fp32 (cuBLASLt, no TF32).
// cuda: not cuDNN's RNN API but our kernels around cuBLASLt (kernels/lstm.cu says why): one GEMM
// for the input projection of all steps, then per step a recurrent GEMM and one gate kernel.
// Pointers in the backend's memory (len and *drop->step too); lstm.cu launches on the compute stream.
#ifndef TK_KERNELS_LSTM_H
#define TK_KERNELS_LSTM_H

#include <math.h>

#include "core/philox.h"
#include "dropout.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_LSTM_MAX_LAYERS 8

typedef struct tk_lstm_shape {
    int L;    // layers, 1 .. TK_LSTM_MAX_LAYERS
    int T, B; // padded steps, batch
    int I, H; // layer 0's input size, hidden size
    int drop_last; // 1: the last layer's output is dropped too (see above)
} tk_lstm_shape;

// The parameters, PyTorch's weight_ih_l{k}, weight_hh_l{k} (in t), bias_ih_l{k}, bias_hh_l{k} (fp32).
typedef struct tk_lstm_w {
    const void *w_ih[TK_LSTM_MAX_LAYERS], *w_hh[TK_LSTM_MAX_LAYERS];
    const float *b_ih[TK_LSTM_MAX_LAYERS], *b_hh[TK_LSTM_MAX_LAYERS];
} tk_lstm_w;
// Their gradients (fp32, added to).
typedef struct tk_lstm_dw {
    float *w_ih[TK_LSTM_MAX_LAYERS], *w_hh[TK_LSTM_MAX_LAYERS], *b_ih[TK_LSTM_MAX_LAYERS], *b_hh[TK_LSTM_MAX_LAYERS];
} tk_lstm_dw;

// ws layout (bytes from ws), the same on both backends: per layer k the activated gates (T, B, 4H)
// fp32 (i, f, g, o), h (T + 1, B, H) in t (row block 0 = h0) and c (T + 1, B, H) fp32, and for
// k >= 1 its dropped input (T, B, H) in t; then the backward's scratch: da (T, B, 4H) in t, dy of
// the layer below (T, B, H) in t, dc and the recurrent product (B, H) fp32 each, and the bias
// gradient's partial sums (TK_LSTM_DB_CHUNKS, 4H) fp32 (cuda).
#define TK_LSTM_DB_CHUNKS 64
typedef struct tk_lstm_ws {
    size_t gates[TK_LSTM_MAX_LAYERS], h[TK_LSTM_MAX_LAYERS], c[TK_LSTM_MAX_LAYERS], in[TK_LSTM_MAX_LAYERS];
    size_t da, dy, dc, dhr, db, bytes;
} tk_lstm_ws;

static inline size_t tk_lstm_align_(size_t x) { return (x + 255) & ~(size_t)255; }
static inline tk_lstm_ws tk_lstm_ws_layout(tk_dtype t, const tk_lstm_shape *s) {
    tk_lstm_ws w = {{0}, {0}, {0}, {0}, 0, 0, 0, 0, 0, 0};
    const size_t es = t == TK_BF16 ? 2 : 4, TB = (size_t)s->T * s->B, H = (size_t)s->H, BH = (size_t)s->B * H;
    size_t o = 0;
    for (int k = 0; k < s->L && k < TK_LSTM_MAX_LAYERS; k++) {
        w.gates[k] = o, o += tk_lstm_align_(TB * 4 * H * 4);
        w.h[k] = o, o += tk_lstm_align_((TB + s->B) * H * es);
        w.c[k] = o, o += tk_lstm_align_((TB + s->B) * H * 4);
        if (k) w.in[k] = o, o += tk_lstm_align_(TB * H * es);
    }
    w.da = o, o += tk_lstm_align_(TB * 4 * H * es);
    w.dy = o, o += tk_lstm_align_(TB * H * es);
    w.dc = o, o += tk_lstm_align_(BH * 4);
    w.dhr = o, o += tk_lstm_align_(BH * 4);
    w.db = o, o += tk_lstm_align_((size_t)TK_LSTM_DB_CHUNKS * 4 * H * 4);
    w.bytes = o;
    return w;
}

static inline int tk_lstm_check(tk_dtype t, const tk_lstm_shape *s, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "lstm: activations in %s", tk_dtype_name(t));
    if (s->L < 1 || s->L > TK_LSTM_MAX_LAYERS || s->T < 1 || s->B < 1 || s->I < 1 || s->H < 1 ||
        (double)s->T * s->B * 4 * s->H > 2.0e9 || (double)s->T * s->B * s->I > 2.0e9 || (double)4 * s->H * s->I > 2.0e9)
        return tk_err_set(e, TK_EINTERNAL, "lstm: bad shape L %d T %d B %d I %d H %d", s->L, s->T, s->B, s->I, s->H);
    return 0;
}

size_t tk_lstm_ws_bytes(tk_dtype t, const tk_lstm_shape *s);
// y (T, B, H) in t from x (T, B, I); saves into ws what tk_lstm_bwd needs.
int tk_lstm_fwd(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
                const float *h0, const float *c0, const tk_dropout *drop, void *y, float *hn, float *cn, void *ws,
                tk_err *e);
// dx (T, B, I) in t, dh0, dc0 and the weight gradients (added to) from dy (and dhn, dcn).
int tk_lstm_bwd(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
                const tk_dropout *drop, const void *dy, const float *dhn, const float *dcn, void *dx, float *dh0,
                float *dc0, const tk_lstm_dw *dw, void *ws, tk_err *e);
int tk_lstm_fwd_ref(tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
                    const float *h0, const float *c0, const tk_dropout *drop, void *y, float *hn, float *cn, void *ws,
                    tk_err *e);
int tk_lstm_bwd_ref(tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len, const void *x,
                    const tk_dropout *drop, const void *dy, const float *dhn, const float *dcn, void *dx, float *dh0,
                    float *dc0, const tk_lstm_dw *dw, void *ws, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_lstm_fwd_cuda(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len,
                     const void *x, const float *h0, const float *c0, const tk_dropout *drop, void *y, float *hn,
                     float *cn, void *ws, tk_err *e);
int tk_lstm_bwd_cuda(tk_ctx *c, tk_dtype t, const tk_lstm_shape *s, const tk_lstm_w *w, const int *len,
                     const void *x, const tk_dropout *drop, const void *dy, const float *dhn, const float *dcn,
                     void *dx, float *dh0, float *dc0, const tk_lstm_dw *dw, void *ws, tk_err *e);
#endif

// The workload's initialization of one layer (host fp32 arrays), as common/rnn.py's LSTM does it
// (the v1.x reference with weights_init_scale): torch.nn.LSTM's default, every weight and bias
// uniform in [-1/sqrt(H), 1/sqrt(H)) (here from Philox: stream TK_RNG_INIT | tensor << 8, the four
// tensors drawn one after another: w_ih, w_hh, b_ih, b_hh); then bias_ih's forget rows [H, 2H) set
// to forget_bias (1.0) and bias_hh's multiplied by hh_bias_scale (hidden_hidden_bias_scale, 0.0 by
// default: zeroed); then every weight and bias multiplied by scale (weights_init_scale, 0.5).
// The forget gate thus starts at sigmoid(0.5 forget_bias) on average.
static inline void tk_lstm_init_layer(uint64_t seed, uint32_t tensor, int I, int H, float forget_bias,
                                      float hh_bias_scale, float scale, float *w_ih, float *w_hh, float *b_ih,
                                      float *b_hh) {
    const uint32_t st = (uint32_t)TK_RNG_INIT | tensor << 8;
    const float a = 1.0f / sqrtf((float)H);
    const size_t n_ih = (size_t)4 * H * I, n_hh = (size_t)4 * H * H, nb = (size_t)4 * H;
    uint64_t i = 0;
    for (size_t k = 0; k < n_ih; k++) w_ih[k] = -a + 2 * a * tk_philox_uniform(seed, st, i++);
    for (size_t k = 0; k < n_hh; k++) w_hh[k] = -a + 2 * a * tk_philox_uniform(seed, st, i++);
    for (size_t k = 0; k < nb; k++) b_ih[k] = -a + 2 * a * tk_philox_uniform(seed, st, i++);
    for (size_t k = 0; k < nb; k++) b_hh[k] = -a + 2 * a * tk_philox_uniform(seed, st, i++);
    for (int j = H; j < 2 * H; j++) b_ih[j] = forget_bias, b_hh[j] *= hh_bias_scale;
    for (size_t k = 0; k < n_ih; k++) w_ih[k] *= scale;
    for (size_t k = 0; k < n_hh; k++) w_hh[k] *= scale;
    for (size_t k = 0; k < nb; k++) b_ih[k] *= scale, b_hh[k] *= scale;
}

#ifdef __cplusplus
}
#endif
#endif
