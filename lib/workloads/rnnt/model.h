// The RNN-T of MLPerf's speech benchmark (mlcommons/training rnn_speech_recognition/pytorch:
// rnnt/model.py RNNT, common/rnn.py LSTM, configs/baseline_v3-1023sp.yaml), forward and backward
// of one training step on the ops kernels/lstm.h, kernels/rnnt.h, kernels/gemm.h and kernels/rows.h,
// so that one code path runs on the cpu reference and on cuda.
//
// The network (the reference's sizes are rnnt_model_cfg_default's; tests shrink them):
// - encoder: pre_rnn, torch.nn.LSTM(240, 1024, 2 layers, dropout 0.1) then Dropout(0.1) (common/
//   rnn.py's Dropout after the LSTM: kernels/lstm.h drop_last); StackTime(2) (model.py: (T, B, H)
//   padded with zero frames to an even T, frames 2t and 2t + 1 concatenated: (ceil(T/2), B, 2H),
//   lengths (len + 3) / 2 - 1); post_rnn, LSTM(2048, 1024, 3 layers, dropout 0.1) + Dropout(0.1).
//   The reference runs both LSTMs over the padded tensor without lengths (encode passes none), so
//   the padded frames are computed as data here too (the LSTMs get len NULL); this matters only in
//   the last stacked frame of an odd-length utterance, which holds a padded step's output.
// - prediction: embed, Embedding(V - 1, P) (the blank has no row); the input sequence is a zero
//   row (model.py predict's "start of sequence", add_sos) followed by the embeddings of the U
//   labels; dec_rnn, LSTM(P, P, 2 layers, dropout 0.3) + Dropout(0.3). P is pred_n_hid: 512 in the
//   reference's baseline_v3-1023sp.yaml (issue 31 mentions 320, which is another config's; we
//   follow the reference). Label positions past an utterance's length are fed zero rows (the
//   reference embeds its padding label 0 there): their outputs reach no lattice cell, and the
//   LSTM is causal, so the loss and every gradient are the same.
// - joint: joint_enc Linear(E, J) on the encoder's output, joint_pred Linear(P, J) on the
//   prediction's, f + g broadcast over (t, u), ReLU, Dropout(0.3), joint_net.2 Linear(J, V). The
//   broadcast, ReLU and dropout are kernels/rnnt.h's packed joint (apex's TransducerJoint as
//   NVIDIA's submissions use it: only the T_b x (U_b + 1) cells of each utterance are rows), the
//   last Linear a GEMM over those rows, and the loss (warp-transducer's, blank = V - 1 as train.py
//   sets it) writes the logits' gradient over the logits in place: no (B, T, U + 1, V) fp32 tensor.
//
// Tensors: the reference's state-dict names and PyTorch's layouts, in its order:
// encoder.pre_rnn.lstm.{weight_ih,weight_hh,bias_ih,bias_hh}_l{k}, encoder.post_rnn.lstm.*,
// prediction.embed.weight (V - 1, P), prediction.dec_rnn.lstm.*, joint_pred.{weight,bias},
// joint_enc.{weight,bias}, joint_net.2.{weight,bias}; all dense (the engine's optimizer trains
// them; the reference decays every one of them, so no TK_PARAM_NO_DECAY). 49,006,080 elements at
// the reference's sizes (contrib/peers/rnnt.py --count computes it from the torch model).
//
// Init (rnnt_model_init): the LSTMs as common/rnn.py with train.py's weights_init_scale 0.5 and
// hidden_hidden_bias_scale 0 (tk_lstm_init_layer: uniform(+-1/sqrt(H)), bias_ih's forget rows =
// forget_gate_bias 1.0, bias_hh's forget rows x 0, then every LSTM weight and bias x 0.5); the
// embedding N(0, 1) (torch.nn.Embedding's default); the Linears torch.nn.Linear's default, weight
// and bias uniform(+-1/sqrt(in)). Philox streams TK_RNG_INIT | tensor << 8 (the tensor's index).
//
// Precision: fp32 on both backends; bf16 activations and compute copies on cuda (cfg.bf16: the
// GEMMs and the LSTMs read the params' bf16 copy; master weights and gradients fp32).
//
// Dropout sites (kernels/dropout.h, the engine's update counter): pre_rnn's layers from 0, then
// post_rnn's, dec_rnn's, and the joint's last (the reference's sizes: 0, 1; 2, 3, 4; 5, 6; 7):
// rnnt_model.site_*. Each rank draws its own masks: a call's elements are numbered from
// rank * drop_stride on (drop_stride: the most elements any dropout call of the model masks, the
// largest of Tmax B E, (Umax + 1) B P and rows_max J), so the ranks' ranges never overlap (the
// reference's ranks draw from their own torch generators; with one rank offset 0, as before).
// Masks per global sample position (N ranks = 1 rank) are not possible here: the LSTMs number
// their elements time-major over the rank's batch (t B + b) H + j, and the joint over the rank's
// lattice, both padded to the rank's own longest utterance; runs compared across world sizes
// turn dropout off (tests/cli/rnnt_small.bash).
#ifndef TK_WORKLOADS_RNNT_MODEL_H
#define TK_WORKLOADS_RNNT_MODEL_H

#include <stdint.h>

#include "dropout.h"
#include "engine/params.h"
#include "engine/workload.h"
#include "lstm.h"
#include "rnnt.h"


typedef struct rnnt_model_cfg {
    int in_feats;                 // 240 (80 filters x 3 stacked frames)
    int enc_n_hid;                // E: 1024
    int enc_pre_rnn_layers;       // 2
    int enc_post_rnn_layers;      // 3
    int enc_stack_time_factor;    // 2 (the only factor supported)
    float enc_dropout;            // 0.1
    int pred_n_hid;               // P: 512
    int pred_rnn_layers;          // 2
    float pred_dropout;           // 0.3
    int joint_n_hid;              // J: 512
    float joint_dropout;          // 0.3
    int n_classes;                // V: 1024 (1023 sentence pieces + blank, the last)
    float forget_gate_bias;       // 1.0
    float hidden_hidden_bias_scale; // 0.0
    float weights_init_scale;     // 0.5 (train.py's --weights_init_scale default)
    int b;                        // utterances a step
    int max_frames;               // Tmax: input frames a step at most
    int max_labels;               // Umax: labels an utterance at most
    int64_t max_rows;             // the joint's lattice cells (sum of T2_b (U_b + 1)) a step at most;
                                  // 0: B ceil(Tmax / 2) (Umax + 1). A workload whose evaluation
                                  // encodes longer utterances than it trains on bounds it by the
                                  // training batches (the joint's buffers are the largest)
    int bf16;                     // cuda: bf16 activations
    uint64_t seed;                // dropout masks
} rnnt_model_cfg;

// One step's batch: padded extents T <= Tmax frames (feat's first T rows used), U <= Umax labels;
// host arrays: feat_len (B) frames, lab_len (B) labels, labels (B, U) row-major (values in
// [0, V - 1), the blank never). The features are in m->feat.
typedef struct rnnt_step_batch {
    int T, U;
    const int *feat_len, *lab_len, *labels;
} rnnt_step_batch;

// ---- the step's plan ----
// What a step computes on the host from its batch (the gathers' index arrays, the lengths, the
// labels, the lattice's row0, the embedding gradient's segments), in one buffer of rnnt_plan_bytes
// bytes: rnnt_plan_fill builds it (a loader thread can, beside the batch), rnnt_model_step_plan
// reads it in the backend's memory and nothing else of the batch, so that the step can be
// captured in a CUDA graph whose launches depend only on the plan's padded extents (its key).
// The extents of the model a plan is for (rnnt_model_plan_dims of its cfg):
typedef struct rnnt_plan_dims {
    int B, Tmax, Umax, V;         // cfg's b, max_frames, max_labels, n_classes
    int64_t rows_max;             // the joint's rows at most (cfg.max_rows, else B ceil(Tmax / 2) (Umax + 1))
} rnnt_plan_dims;
// How a plan pads the batch's extents: frames T up to a multiple of T, labels U up to a multiple of
// U (both at most the model's); levels > 0: the joint's rows up to the next of `levels` even steps
// of the padded extents' whole lattice (B ceil(Tp / 2) (Up + 1)), at most rows_max. A padded
// step computes the same loss and gradients as the unpadded one (the LSTMs are causal and every
// padded frame, label position and row is zero or masked: model.c), bit for bit on the cpu.
typedef struct rnnt_plan_pad {
    int T, U, levels;
} rnnt_plan_pad;
// A plan's extents (its header, host-readable with rnnt_plan_shape_of).
typedef struct rnnt_plan_shape {
    int T, U;                     // the batch's frames and labels (its longest utterance's)
    int Tp, Up;                   // the step's (padded) extents
    int64_t rows, rows_cap;       // the lattice's cells, the joint's rows the step runs at
    int64_t key;                  // the step's CUDA graph key: one for each (Tp, Up, rows_cap); -1
                                  // for a plan without row levels (rows_cap = rows)
} rnnt_plan_shape;
rnnt_plan_dims rnnt_model_plan_dims(const rnnt_model_cfg *cfg);
size_t rnnt_plan_bytes(const rnnt_plan_dims *d);
// The plan (host memory, rnnt_plan_bytes, 8-byte aligned) of batch bt (host arrays) padded by pad
// (NULL: the batch's own extents); *s its extents. TK_EINTERNAL for lengths or labels out of range,
// TK_EDATA for a batch of more lattice cells than rows_max.
int rnnt_plan_fill(const rnnt_plan_dims *d, const rnnt_step_batch *bt, const rnnt_plan_pad *pad, void *plan,
                   rnnt_plan_shape *s, tk_err *e);
void rnnt_plan_shape_of(const void *plan, rnnt_plan_shape *s);

typedef struct rnnt_model {
    rnnt_model_cfg cfg;
    rnnt_plan_dims pd;
    tk_ctx *c;
    tk_params *P;
    tk_dtype t;
    int64_t *step;                // the engine's update counter (device)
    double *loss_acc;             // the engine's loss accumulator (device), may be NULL
    int V, E, P_, J, I, B, T2max;
    uint32_t site_pre, site_post, site_dec, site_joint; // dropout sites (above)
    int64_t drop_offset;          // this rank's first dropout element: rank * drop_stride (above)
    // tensor indices
    int p_pre, p_post, p_embed, p_dec, p_jp_w, p_jp_b, p_je_w, p_je_b, p_out_w, p_out_b;
    // inputs (device): feat (Tmax, B, I) fp32, written by the caller
    float *feat;
    // activations (device)
    void *x0;                     // feat in t (bf16 only; fp32: feat itself)
    void *y1, *x2, *y2;           // pre_rnn out (T, B, E), stacked (T2, B, 2E), post_rnn out (T2, B, E)
    void *emb, *gp;               // (U + 1, B, P): dec_rnn in and out
    void *fe_tm, *gj_tm;          // joint_enc (T2 B, J), joint_pred ((U + 1) B, J) outputs, time major
    void *f, *g;                  // (B, T2, J), (B, U + 1, J): the joint's operands
    void *h, *z;                  // (rows, J), (rows, V): the joint's output, the logits (their gradient)
    void *df, *dg;                // gradients of f, g
    void *d1, *d2;                // scratch gradients: the largest of (T2 B, 2E), (T B, E), ((U+1) B, P)
    void *ws_pre, *ws_post, *ws_dec, *ws_loss, *ws_seg;
    void *plan, *h_plan;          // rnnt_model_step's and rnnt_model_encode's plan (device; host)
    float *loss, *costs;          // (1), (B)
    size_t plan_bytes, ws_loss_bytes, ws_seg_bytes;
    int64_t rows_max;
    // the last step's extents (padded) and joint rows
    int T, U, T2;
    int64_t rows;
} rnnt_model;

// The reference's sizes (above) at b utterances of at most max_frames frames and max_labels labels.
rnnt_model_cfg rnnt_model_cfg_default(int b, int max_frames, int max_labels);
// Declares the tensors into env->params, allocates them (tk_params_alloc; bf16: the params' copy
// set first) and the activations (env->acts). env->step and env->loss_acc are used as given.
int rnnt_model_create(const rnnt_model_cfg *cfg, const tk_wl_env *env, rnnt_model **out, tk_err *e);
void rnnt_model_destroy(rnnt_model *m);
// The reference's initialization (above) from seed, written into the master weights (and copy).
int rnnt_model_init(rnnt_model *m, uint64_t seed, tk_err *e);
// Elements of the trainable tensors.
int64_t rnnt_model_param_count(const rnnt_model *m);
// The elements the reference model has at cfg's sizes (the formula; 49,006,080 at the defaults).
int64_t rnnt_model_ref_count(const rnnt_model_cfg *cfg);
// One training step's forward and backward: every dense gradient overwritten; the loss (scale
// sum_b nll_b, scale = 1 / global batch in training) in m->loss (device), added to m->loss_acc
// when set. train 0: no dropout (the evaluation's forward; the gradients still computed).
// The batch's plan (its own extents) is built on the host and copied in (a synchronous copy), then
// rnnt_model_step_plan runs: not capturable.
int rnnt_model_step(rnnt_model *m, const rnnt_step_batch *bt, float scale, int train, tk_err *e);
// The same step from a plan already in the backend's memory (plan; s its extents, as filled):
// reads nothing else of the batch and queues launches that depend only on s's Tp, Up and rows_cap
// (capturable: a CUDA graph of the step replays for every plan of the same key).
int rnnt_model_step_plan(rnnt_model *m, const void *plan, const rnnt_plan_shape *s, float scale, int train,
                         tk_err *e);
// The encoder alone (evaluation: no dropout) on m->feat of T frames: m->f (B, T2, J) in t, the
// joint_enc projections the decoder reads; *T2 = ceil(T / 2).
int rnnt_model_encode(rnnt_model *m, int T, int *T2, tk_err *e);
// The helpers decode.c shares: a tensor's values in t (the compute copy) and fp32 (the master); an
// LSTM's weight and gradient pointers from its first tensor; D (M, N) in cd = op(A) op(B) (+ bias
// with TK_EPI_BIAS; bgrad with TK_EPI_BGRADB), A and B in the model's type.
const void *rnnt_wt(const rnnt_model *m, int idx);
float *rnnt_wf(const rnnt_model *m, int idx);
void rnnt_lstm_of(const rnnt_model *m, int first, int L, tk_lstm_w *w, tk_lstm_dw *dw);
int rnnt_mm(rnnt_model *m, int M, int N, int K, int ta, int tb, const void *A, const void *B, void *D, tk_dtype cd,
            tk_epilogue epi, const void *bias, float *bgrad, tk_err *e);
// StackTime's output length of an utterance of n frames ((n + 3) / 2 - 1, model.py).
static inline int rnnt_stacked_len(int n) { return (n + 3) / 2 - 1; }

#endif
