// The RNN-T's greedy decoder (the reference's rnnt/decoder.py RNNTGreedyDecoder, with MLPerf's
// max_symbols_per_step 30 and max_symbol_per_sample 300: kernels/rnnt_greedy.h states the rules)
// for the utterances of a model's batch, on the model's ops: the encoder once (rnnt_model_encode,
// no dropout), then iterations of fixed shape over the whole batch, each
//   the embedding rows of the last labels (a zero row at the start), one step of dec_rnn from the
//   state, joint_pred, the f row of each utterance's frame, the joint's ReLU, joint_net.2, and
//   tk_rnnt_greedy_step (argmax, hypotheses, state, next frame: all in the backend's memory).
// T2 + cap iterations finish every utterance, so the loop needs no host decision: on cuda one
// iteration is captured into a CUDA graph (use_graph) and replayed; the host looks at the state
// (lengths and frames, one copy) every RNNT_DECODE_CHECK iterations only, to stop once every
// utterance is done (an iteration of done utterances changes nothing). The utterances decode independently, as the reference decodes them
// one at a time (its prediction network batch of one; the ops' results do not depend on the
// batch's other rows).
// The cap: an utterance is done once its hypothesis holds cap symbols (cap kept). NVIDIA's batched
// decoder (training_results v1.x rnnt/decoder.py, its CUDA-graph loop) does not advance its label
// index on the symbol that reaches max_symbol_per_sample, which seems to keep cap - 1; not
// checked against a run of it, and it matters only for utterances that reach the cap (an
// untrained model's rambling).
// The weights are the model's params as they are when called (the engine's EMA weights swapped in
// by the caller for MLPerf's evaluation).
#ifndef TK_WORKLOADS_RNNT_DECODE_H
#define TK_WORKLOADS_RNNT_DECODE_H

#include "model.h"
#include "rnnt_greedy.h"

#define RNNT_DECODE_CHECK 32

typedef struct rnnt_decoder {
    rnnt_model *m;
    int max_per_step, cap, use_graph;
    tk_rnnt_greedy st;            // the state's device pointers (T2 set per call)
    void *emb, *gp, *gj, *fcur, *hj, *logits; // (B, P) (B, P) (B, J) (B, J) (B, J) (B, V) in t
    float *h, *c, *hn, *cn;       // (L, B, P) fp32
    void *ws;                     // dec_rnn's workspace at one step
    int32_t *d_T, *d_one, *d_zero; // (B) encoder lengths, ones, zeros (the joint's lattice of 1 x 1)
    int64_t *d_row0;              // (B + 1) 0, 1, .., B
    void *mem;                    // the one allocation
    tk_graph graph;
} rnnt_decoder;

// A decoder for m's batch: max_per_step symbols a frame (30), cap symbols a hypothesis (300).
int rnnt_decoder_create(rnnt_model *m, int max_per_step, int cap, int use_graph, rnnt_decoder **out, tk_err *e);
void rnnt_decoder_destroy(rnnt_decoder *d);
// The hypotheses of the B utterances in m->feat (T frames, feat_len (B) host): hyp (B, cap) and
// n (B) host arrays (hypothesis b: hyp[b cap .. b cap + n[b])).
int rnnt_decode(rnnt_decoder *d, int T, const int *feat_len, int32_t *hyp, int32_t *n, tk_err *e);

#endif
