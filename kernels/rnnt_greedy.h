// One iteration of the RNN-T's greedy decoding over a batch, with its state in the backend's
// memory, so that a decoding loop is a fixed sequence of ops with no host decision between
// iterations (a CUDA graph of one iteration, replayed: lib/workloads/rnnt/decode.c).
//
// The reference's decoder (mlcommons/training rnn_speech_recognition/pytorch rnnt/decoder.py
// RNNTGreedyDecoder._greedy_decode, per utterance): for each encoder frame t < T_b, up to
// max_symbols_per_step (30) times: the prediction network's step from the last emitted label
// (the start of sequence: a zero input) and its state, the joint's logits at (t, that step);
// k = argmax; a blank ends the frame, another symbol is appended, becomes the last label, and
// its prediction state the state. MLPerf's training script adds max_symbol_per_sample (300):
// an utterance whose hypothesis holds that many symbols is done.
// Per utterance b that is active (t[b] < T[b] and n[b] < cap), from logits (B, V) in t:
//   k = the first index of the row's largest value (torch's max on ties)
//   k == blank:  t[b] += 1, sym[b] = 0
//   else:        hyp[b, n[b]] = k, n[b] += 1, label[b] = k, the state rows of b (h, c: (L, B, H)
//                fp32) = those of hn, cn (the prediction step's new state), sym[b] += 1, and when
//                sym[b] == max_per_step: t[b] += 1, sym[b] = 0
// then fidx[b] = b T2 + min(t[b], T2 - 1) (the f row the next iteration reads). Inactive
// utterances are left as they are. A NaN logit never wins (comparisons are false on it; a row
// of NaNs gives index 0). Each iteration of an active utterance advances t or n, so T2 + cap
// iterations finish every utterance.
#ifndef TK_KERNELS_RNNT_GREEDY_H
#define TK_KERNELS_RNNT_GREEDY_H

#ifdef __cplusplus
extern "C" {
#endif
#include "gpu/gpu.h"

typedef struct tk_rnnt_greedy {
    int B, V, blank;       // batch, logits a row, the blank's index
    int L, H;              // the prediction network's layers and hidden size (the state's shape)
    int T2;                // frames of f a row block (f is (B, T2, J))
    int max_per_step, cap; // symbols a frame at most (30), a hypothesis at most (300)
    const int32_t *T;      // (B) the utterances' encoder frames, 1 .. T2
    int32_t *label;        // (B) the last label, -1 = the start of sequence (a zero embedding row)
    int32_t *t, *sym, *n;  // (B) frame, symbols at this frame, hypothesis length
    int32_t *fidx;         // (B) the f row of the next iteration
    int32_t *hyp;          // (B, cap)
} tk_rnnt_greedy;

int tk_rnnt_greedy_step(tk_ctx *c, tk_dtype t, const tk_rnnt_greedy *s, const void *logits, const float *hn,
                        const float *cn, float *h, float *cc, tk_err *e);
int tk_rnnt_greedy_step_ref(tk_dtype t, const tk_rnnt_greedy *s, const void *logits, const float *hn,
                            const float *cn, float *h, float *cc, tk_err *e);
#ifdef TK_HAVE_CUDA
int tk_rnnt_greedy_step_cuda(tk_ctx *c, tk_dtype t, const tk_rnnt_greedy *s, const void *logits, const float *hn,
                             const float *cn, float *h, float *cc, tk_err *e);
#endif

static inline int tk_rnnt_greedy_check(tk_dtype t, const tk_rnnt_greedy *s, tk_err *e) {
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "rnnt_greedy: logits in %s", tk_dtype_name(t));
    if (s->B < 1 || s->V < 1 || s->blank < 0 || s->blank >= s->V || s->L < 1 || s->H < 1 || s->T2 < 1 ||
        s->max_per_step < 1 || s->cap < 1)
        return tk_err_set(e, TK_EINTERNAL, "rnnt_greedy: bad shape B %d V %d blank %d L %d H %d T2 %d", s->B, s->V,
                          s->blank, s->L, s->H, s->T2);
    return 0;
}

#ifdef __cplusplus
}
#endif
#endif
