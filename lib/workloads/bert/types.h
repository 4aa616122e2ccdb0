// BERT's types (configuration, model, eval set), shared by the files of lib/workloads/bert/.
//
// The MLPerf Training BERT (BERT-large pre-training phase 2, mlcommons/training
// language_model/tensorflow/bert; Devlin et al. 2019) as Hugging Face's BertForPreTraining computes
// it: word + position + token type embeddings -> LayerNorm -> dropout; L post-LN encoder layers
// (self-attention with a key padding mask and dropout on the probabilities, output dense ->
// dropout -> residual -> LayerNorm; intermediate dense -> GELU (erf) -> output dense -> dropout
// -> residual -> LayerNorm); the masked-LM head (dense -> GELU -> LayerNorm -> decoder tied to the
// word embeddings + output bias) on the masked positions only; the next-sentence head (pooler
// dense + tanh on [CLS], then a 2-way classifier). Loss: masked-LM cross-entropy (mean over the
// masked positions) + next-sentence cross-entropy (mean over the sequences).
//
// The vocabulary is padded to a multiple of vocab_pad_multiple rows (30522 -> 30528 for the tensor
// cores): the padding rows of the word embeddings and the output bias start at 0, are never
// looked up (ids < vocab) and never predicted (the loss and the argmax read only the first vocab
// logits), so their gradients are 0 and they stay 0 under any optimizer with weight decay.
//
// Every tensor is a view into the engine's flat buffers (lib/engine/params.h), named as Hugging
// Face names them (the checkpoint names; query, key and value of a layer are contiguous so one
// GEMM projects all three). The cpu backend is the fp32 reference; on cuda the activations and
// the weights' compute copy are bf16 ("precision": "bf16") or fp32, with fp32 master weights and
// gradients.
#ifndef TK_WORKLOADS_BERT_TYPES_H
#define TK_WORKLOADS_BERT_TYPES_H

#include <jansson.h>
#include <stdint.h>

#include "attention.h"
#include "core/err.h"
#include "engine/dist.h"
#include "engine/params.h"
#include "engine/profile.h"
#include "engine/workload.h"
#include "gpu/gpu.h"

#define TK_BERT_MAX_LAYERS 64

typedef struct tk_bert_config {
    int vocab;              // classes of the masked-LM head (the data's vocab_size)
    int vocab_padded;       // rows of the word embeddings: vocab rounded up to vocab_pad_multiple
    int hidden, layers, heads, ffn;
    int max_pos, types;     // position and token type embedding rows
    int L, P;               // max_seq_length, max_predictions_per_seq: the model's input shape
    float hidden_dropout, attn_dropout;
    float ln_eps;
    double init_std;
    int bf16, tf32;         // "precision": bf16 or tf32 (cuda), else fp32
    int batch;              // the global batch
    int unpad;              // model.unpad: the layers run on the real tokens only (packed rows)
    int unpad_bucket;       // model.unpad_bucket: the packed rows rounded up to a multiple of it
    int fused_attention;    // model.fused_attention: the flash kernel where it is built (tk_attention_fusable)
    uint64_t seed;
} tk_bert_config;

// One encoder layer: its parameters (fp32 masters, gradients) and what its forward keeps for the
// backward (act).
typedef struct tk_bert_layer {
    int pidx;               // index of its first tensor (query.weight) in the params
    size_t off;             // ... and that tensor's float offset in the dense span
    float *Wqkv, *bqkv, *Wo, *bo, *g1, *b1, *Wi, *bi, *Wo2, *bo2, *g2, *b2;
    float *dWqkv, *dbqkv, *dWo, *dbo, *dg1, *db1, *dWi, *dbi, *dWo2, *dbo2, *dg2, *db2;
    void *qkv;              // (rows, 3H) the attention's input (kept: tk_attention_bwd reads it)
    void *qkvh, *P, *Pd;    // attention's saved heads and probabilities (tk_attn_bufs; Pd NULL
                            // without attention dropout; all three NULL on the fused path)
    float *lse;             // (b, NH, L) f32: the fused attention's log-sum-exp (NULL unfused)
    void *ctx;              // (N, H) the attention's output before the output dense
    void *s1, *h;           // (N, H) LayerNorm 1's input and output
    float *mean1, *rstd1;
    void *pre, *inter;      // (N, F) the GELU's input (the GEMM's aux) and output
    void *s2, *y;           // (N, H) LayerNorm 2's input and output (the next layer's input)
    float *mean2, *rstd2;
} tk_bert_layer;

typedef struct tk_bert {
    tk_ctx *c;
    tk_bert_config cfg;
    // What the engine handed create, kept whole: the tensors (env.params), the ranks (env.dist),
    // the device scalars of the step (env.lr, env.step, env.loss_acc), grads_ready (the engine's
    // bucketed all-reduce; NULL: one rank) and the per-phase step timer (*env.prof; NULL: off).
    tk_wl_env env;
    int rank, world;
    int b;                  // sequences a rank trains on (batch / world)
    int64_t N, R;           // tokens (b L) and masked-LM rows (b P) of a rank's batch
    // The layers' rows: N (padded: sequence s at rows s L ..), or with cfg.unpad the real tokens of
    // the batch packed (sequence s at rows start[s] .., kernels/bert_rows.h) rounded up to
    // cfg.unpad_bucket, at most N: from the host's copy of the lengths (tk_bert_rows_for; each
    // bucket its own CUDA graph, graph_key), the starts computed on the device.
    int64_t rows;
    int64_t slot_rows[2];   // the rows of the batch in each staging slot
    int32_t *start;         // (b + 1) i32, device
    tk_dtype act;
    // parameters (fp32 masters; d*: gradients)
    float *word, *pos, *type, *eg, *eb;
    float *dword, *dpos, *dtype, *deg, *deb;
    float *Wp, *bp, *Wt, *bt, *tg, *tb, *dec_b, *Wn, *bn;
    float *dWp, *dbp, *dWt, *dbt, *dtg, *dtb, *ddec_b, *dWn, *dbn;
    tk_bert_layer layer[TK_BERT_MAX_LAYERS];
    // inputs: the global batch (every rank stages all of it and trains on its own rows)
    int32_t *in_ids, *in_len, *in_pos, *in_mid, *in_nmask, *in_nsp;
    uint8_t *in_seg;
    // activations and scratch (act unless said), in the engine's arena (tk_wl_env.acts)
    void *e;                // (N, H) the embeddings' sum (the LayerNorm's input)
    float *mean0, *rstd0;
    void *x0;               // (N, H) the embeddings' output (padded layout)
    void *xp;               // (N, H) ... packed (cfg.unpad), the first layer's input
    void *tmp;              // (N, H) scratch of the forward
    tk_attn_bufs attn;      // S, ctxh, dqkvh (unfused) or fused and ws: shared by the layers
    void *g;                // (R, H) the gathered masked positions
    int32_t *labels;        // (R) their labels, -1 for padding slots
    void *t_pre, *t1, *t2;  // (R, H) the transform's GELU input and output, its LayerNorm's output
    float *mean_t, *rstd_t;
    void *logits;           // (R, Vp) (the gradient in place)
    void *cls, *pooled;     // (b, H)
    void *nsp_logits;       // (b, 2) (the gradient in place)
    void *dY, *dX, *dH, *dA, *dCtx, *dQKV, *dPre; // backward scratch
    void *dg, *dcls;        // (R, H), (b, H)
    void *ln_ws, *emb_ws, *xent_ws;
    int64_t *counts;        // eval: correct, total
} tk_bert;

// The eval set is a tk_evalset (engine/evalset.h) of n real sequences, padded to whole batches of
// b with sequences of length 1 that have no masked positions (they count nothing): field 0 ids
// (L i32 a record), 1 seg (L u8), 2 len (i32), 3 pos (P i32), 4 mid (P i32), 5 nmask (i32), as
// tk_bert_data_read's arrays.

#endif
