// BERT's forward, backward and training step. One fixed sequence of ops with no host reads and
// no allocation: the cuda backend captures it in a CUDA graph.
//
// Notation: N = b L tokens of this rank's b sequences, R = b P masked-LM rows, H hidden, F
// intermediate; rows: the layers' rows (N padded; with model.unpad the real tokens packed, rounded
// up to the bucket: tk_bert types.h). The embeddings (and their LayerNorm and dropout) run on the
// padded layout, then the real tokens are packed; the layers, the heads' gathers and the
// attention (tk_attention_*: sequences by start and len) work on the rows; the backward unpacks
// the embeddings' gradient. Rows past the last sequence hold zeros (pack) or stale finite values,
// and their gradients are zero (the heads read only real rows, the attention writes none of them,
// dQKV is cleared once a step), so they add nothing to any weight gradient.
//
// A linear layer's weight is stored (out, in) as torch.nn.Linear: y = x W^T + b, so its weight
// gradient is dy^T x (M = out, K = tokens, the bias gradient fused: BGRADB) and its input
// gradient dy W.
#include "activation.h"
#include "attention.h"
#include "bert_embed.h"
#include "bert_rows.h"
#include "gemm.h"
#include "layernorm.h"
#include "workloads/bert/bert.h"
#include "xent.h"

// The compute copy of a parameter (bf16 on the bf16 path, else the master itself).
static const void *wc(const tk_bert *m, const float *p) { return tk_params_copy_of(m->env.params, p); }

// D (M, N) = op(A) op(B) + beta D; ab = act; cd = act, or F32 for a weight gradient (fp32 D).
static int gemm(tk_bert *m, int M, int N, int K, int ta, int tb, const void *A, const void *B, void *D, tk_dtype cd,
                float beta, tk_epilogue epi, const void *bias, void *aux, float *bgrad, tk_err *e) {
    tk_gemm_args g = {.M = M, .N = N, .K = K, .transa = ta, .transb = tb, .ab_type = m->act, .cd_type = cd,
                      .A = A, .B = B, .C = beta != 0 ? D : NULL, .D = D, .alpha = 1, .beta = beta, .epi = epi,
                      .bias = bias, .aux = aux, .bgrad = bgrad, .stream = TK_STREAM_COMPUTE, .tf32 = m->cfg.tf32};
    return tk_gemm(m->c, &g, e);
}

// x (rows, in) act -> y (rows, out) act: y = x W^T + b (epilogue BIAS or GELU_BIAS with aux).
static int linear(tk_bert *m, int rows, int out, int in, const void *x, const float *W, const float *b, void *y,
                  tk_epilogue epi, void *aux, tk_err *e) {
    return gemm(m, rows, out, in, 0, 1, x, wc(m, W), y, m->act, 0, epi, wc(m, b), aux, NULL, e);
}

// The backward of linear: dW = dy^T x (and db = sum of dy over rows, when db), dx = dy W (+ dx if
// accumulate; dx NULL: not wanted).
static int linear_bwd(tk_bert *m, int rows, int out, int in, const void *x, const void *dy, const float *W, float *dW,
                      float *db, void *dx, int accumulate, tk_err *e) {
    TRY(gemm(m, out, in, rows, 1, 0, dy, x, dW, TK_F32, 0, db ? TK_EPI_BGRADB : TK_EPI_NONE, NULL, NULL, db, e));
    if (!dx) return 0;
    return gemm(m, rows, in, out, 0, 0, dy, wc(m, W), dx, m->act, accumulate ? 1.0f : 0.0f, TK_EPI_NONE, NULL, NULL,
                NULL, e);
}

// The dropouts: site 0 the embeddings, then per layer 1 + 3 l (attention probabilities), 2 + 3 l
// (after the attention's output dense), 3 + 3 l (after the intermediate's output dense). Element
// numbering is global over the ranks (a rank's rows start at rank b), so every world size draws
// the one-rank masks.
enum { DROP_ATTN = 1, DROP_ATTN_OUT = 2, DROP_FFN_OUT = 3 };
static tk_dropout dropout(const tk_bert *m, int train, int layer, int kind) {
    const tk_bert_config *c = &m->cfg;
    tk_dropout d = {.seed = c->seed, .step = m->env.step};
    if (!train) return d;
    if (layer < 0) {
        d.p = c->hidden_dropout;
        d.offset = (int64_t)m->rank * m->N * c->hidden;
        return d;
    }
    d.site = (uint32_t)(1 + 3 * layer + kind - 1);
    d.p = kind == DROP_ATTN ? c->attn_dropout : c->hidden_dropout;
    d.offset = kind == DROP_ATTN ? (int64_t)m->rank * m->b * c->heads * c->L * c->L
                                 : (int64_t)m->rank * m->N * c->hidden;
    return d;
}

// ---- forward ----

// The encoder over b sequences (this rank's rows of the inputs given), leaving the last layer's
// output in layer[layers - 1].y.
static int encoder_fwd(tk_bert *m, int train, const int32_t *ids, const uint8_t *seg, const int32_t *len, tk_err *e) {
    const tk_bert_config *c = &m->cfg;
    const int b = m->b, L = c->L, H = c->hidden, F = c->ffn, NH = c->heads, N = (int)m->rows;
    tk_range_push("forward");
    TRY(tk_bert_embed_fwd(m->c, m->act, m->act, b, L, H, ids, seg, wc(m, m->word), wc(m, m->pos), wc(m, m->type), m->e,
                          e));
    tk_dropout d = dropout(m, train, -1, 0);
    TRY(tk_layernorm_fwd(m->c, m->act, m->N, H, m->e, NULL, &d, TK_LN_DROP_POST, m->eg, m->eb, c->ln_eps, m->x0, NULL,
                         m->mean0, m->rstd0, e));
    TRY(tk_bert_starts(m->c, b, L, c->unpad, len, m->start, e));
    if (c->unpad) TRY(tk_bert_pack(m->c, m->act, b, L, H, N, m->start, len, m->x0, m->xp, e));
    TRY(tk_bert_prof_mark(m, "embeddings_fwd", e));
    const void *x = c->unpad ? m->xp : m->x0;
    for (int l = 0; l < c->layers; l++) {
        tk_bert_layer *Ly = &m->layer[l];
        TRY(linear(m, N, 3 * H, H, x, Ly->Wqkv, Ly->bqkv, Ly->qkv, TK_EPI_BIAS, NULL, e));
        TRY(tk_bert_prof_mark(m, "qkv_fwd", e));
        tk_attn_bufs ab = m->attn;
        ab.qkvh = Ly->qkvh, ab.P = Ly->P, ab.Pd = Ly->Pd, ab.lse = Ly->lse, ab.out = Ly->ctx;
        d = dropout(m, train, l, DROP_ATTN);
        TRY(tk_attention_fwd(m->c, m->act, b, L, NH, H / NH, m->start, len, Ly->qkv, &d, &ab, Ly->ctx, e));
        TRY(tk_bert_prof_mark(m, "attention_fwd", e));
        TRY(linear(m, N, H, H, Ly->ctx, Ly->Wo, Ly->bo, m->tmp, TK_EPI_BIAS, NULL, e));
        d = dropout(m, train, l, DROP_ATTN_OUT);
        TRY(tk_layernorm_fwd(m->c, m->act, N, H, m->tmp, x, &d, TK_LN_DROP_PRE, Ly->g1, Ly->b1, c->ln_eps, Ly->h, Ly->s1,
                             Ly->mean1, Ly->rstd1, e));
        TRY(tk_bert_prof_mark(m, "attn_out_ln_fwd", e));
        // the intermediate: its bias fused in the GEMM (cuBLASLt's BIAS epilogue) writing the
        // pre-activation, then GELU in one pass (the GELU_BIAS epilogue is the plain GEMM plus
        // our pass over D writing both pre and inter: one (N, F) write more; lib/gpu/gemm_cublaslt.cu)
        TRY(linear(m, N, F, H, Ly->h, Ly->Wi, Ly->bi, Ly->pre, TK_EPI_BIAS, NULL, e));
        TRY(tk_gelu_fwd(m->c, m->act, (int64_t)N * F, Ly->pre, Ly->inter, e));
        TRY(linear(m, N, H, F, Ly->inter, Ly->Wo2, Ly->bo2, m->tmp, TK_EPI_BIAS, NULL, e));
        d = dropout(m, train, l, DROP_FFN_OUT);
        TRY(tk_layernorm_fwd(m->c, m->act, N, H, m->tmp, Ly->h, &d, TK_LN_DROP_PRE, Ly->g2, Ly->b2, c->ln_eps, Ly->y,
                             Ly->s2, Ly->mean2, Ly->rstd2, e));
        TRY(tk_bert_prof_mark(m, "ffn_fwd", e));
        x = Ly->y;
    }
    tk_range_pop();
    return 0;
}

// The masked-LM head on the gathered masked positions: logits (R, Vp) and labels.
static int mlm_fwd(tk_bert *m, const int32_t *pos, const int32_t *mid, const int32_t *nmask, tk_err *e) {
    const tk_bert_config *c = &m->cfg;
    const int H = c->hidden, R = (int)m->R;
    TRY(tk_bert_gather(m->c, m->act, m->b, c->L, H, c->P, m->layer[c->layers - 1].y, m->start, pos, nmask, mid, m->g,
                       m->labels, e));
    TRY(linear(m, R, H, H, m->g, m->Wt, m->bt, m->t1, TK_EPI_GELU_BIAS, m->t_pre, e));
    TRY(tk_layernorm_fwd(m->c, m->act, R, H, m->t1, NULL, NULL, TK_LN_DROP_NONE, m->tg, m->tb, c->ln_eps, m->t2, NULL,
                         m->mean_t, m->rstd_t, e));
    // the decoder: the word embeddings (tied), its own bias
    TRY(gemm(m, R, c->vocab_padded, H, 0, 1, m->t2, wc(m, m->word), m->logits, m->act, 0, TK_EPI_BIAS, wc(m, m->dec_b),
             NULL, NULL, e));
    return tk_bert_prof_mark(m, "mlm_head_fwd", e);
}

// The next-sentence head: the pooler on [CLS], then the classifier.
static int nsp_fwd(tk_bert *m, tk_err *e) {
    const tk_bert_config *c = &m->cfg;
    const int H = c->hidden, b = m->b;
    TRY(tk_bert_gather(m->c, m->act, b, c->L, H, 1, m->layer[c->layers - 1].y, m->start, NULL, NULL, NULL, m->cls, NULL,
                       e));
    TRY(linear(m, b, H, H, m->cls, m->Wp, m->bp, m->pooled, TK_EPI_BIAS, NULL, e));
    TRY(tk_tanh_fwd(m->c, m->act, (int64_t)b * H, m->pooled, m->pooled, e));
    TRY(linear(m, b, 2, H, m->pooled, m->Wn, m->bn, m->nsp_logits, TK_EPI_BIAS, NULL, e));
    return tk_bert_prof_mark(m, "nsp_head_fwd", e);
}

// ---- backward ----

static int heads_bwd(tk_bert *m, const int32_t *pos, const int32_t *nmask, tk_err *e) {
    const tk_bert_config *c = &m->cfg;
    const int H = c->hidden, b = m->b, R = (int)m->R;
    tk_range_push("heads_backward");
    // next sentence (the logits hold their gradient)
    TRY(linear_bwd(m, b, 2, H, m->pooled, m->nsp_logits, m->Wn, m->dWn, m->dbn, m->dcls, 0, e));
    TRY(tk_tanh_bwd(m->c, m->act, (int64_t)b * H, m->pooled, m->dcls, m->dcls, e));
    // ([CLS]'s gradient into pooled's buffer, which the backward has no more use for)
    TRY(linear_bwd(m, b, H, H, m->cls, m->dcls, m->Wp, m->dWp, m->dbp, m->pooled, 0, e));
    // masked LM: the decoder's weight gradient is the word embeddings' (the embeddings' backward
    // adds the lookups' part last)
    TRY(linear_bwd(m, R, c->vocab_padded, H, m->t2, m->logits, m->word, m->dword, m->ddec_b, m->dg, 0, e));
    TRY(tk_layernorm_bwd(m->c, m->act, R, H, m->dg, m->t1, m->mean_t, m->rstd_t, m->tg, NULL, TK_LN_DROP_NONE, m->dg,
                         NULL, m->dtg, m->dtb, m->ln_ws, e));
    TRY(tk_gelu_bwd(m->c, m->act, (int64_t)R * H, m->t_pre, m->dg, m->dg, e));
    // (the transform's input gradient goes to the dH scratch, free until the layers' backward)
    TRY(linear_bwd(m, R, H, H, m->g, m->dg, m->Wt, m->dWt, m->dbt, m->dH, 0, e));
    TRY(tk_bert_scatter(m->c, m->act, b, c->L, H, c->P, m->rows, m->dH, m->start, pos, nmask, m->pooled, m->dY, e));
    tk_range_pop();
    return tk_bert_prof_mark(m, "heads_bwd", e);
}

static int encoder_bwd(tk_bert *m, const int32_t *ids, const uint8_t *seg, const int32_t *len, tk_err *e) {
    const tk_bert_config *c = &m->cfg;
    const int b = m->b, L = c->L, H = c->hidden, F = c->ffn, NH = c->heads, N = (int)m->rows;
    void *dY = m->dY, *dX = m->dX;
    tk_range_push("backward");
    // the attention's input gradient has no value at rows outside the sequences: 0 for the GEMMs
    TRY(tk_memset0(m->c, m->dQKV, (size_t)N * 3 * H * tk_dtype_size(m->act), TK_STREAM_COMPUTE, e));
    for (int l = c->layers - 1; l >= 0; l--) {
        tk_bert_layer *Ly = &m->layer[l];
        const void *x = l > 0 ? m->layer[l - 1].y : c->unpad ? m->xp : m->x0;
        // LayerNorm 2: dH (the residual's gradient) and dA (the output dense's)
        tk_dropout d = dropout(m, 1, l, DROP_FFN_OUT);
        TRY(tk_layernorm_bwd(m->c, m->act, N, H, dY, Ly->s2, Ly->mean2, Ly->rstd2, Ly->g2, &d, TK_LN_DROP_PRE, m->dH, m->dA,
                             Ly->dg2, Ly->db2, m->ln_ws, e));
        // output dense, then the intermediate (its GELU in the input gradient's epilogue)
        TRY(gemm(m, H, F, N, 1, 0, m->dA, Ly->inter, Ly->dWo2, TK_F32, 0, TK_EPI_BGRADB, NULL, NULL, Ly->dbo2, e));
        TRY(gemm(m, N, F, H, 0, 0, m->dA, wc(m, Ly->Wo2), m->dPre, m->act, 0, TK_EPI_DGELU_BGRAD, NULL, Ly->pre, Ly->dbi,
                 e));
        TRY(linear_bwd(m, N, F, H, Ly->h, m->dPre, Ly->Wi, Ly->dWi, NULL, m->dH, 1, e));
        TRY(tk_bert_prof_mark(m, "ffn_bwd", e));
        // LayerNorm 1: dX (the residual's gradient), dA
        d = dropout(m, 1, l, DROP_ATTN_OUT);
        TRY(tk_layernorm_bwd(m->c, m->act, N, H, m->dH, Ly->s1, Ly->mean1, Ly->rstd1, Ly->g1, &d, TK_LN_DROP_PRE, dX, m->dA,
                             Ly->dg1, Ly->db1, m->ln_ws, e));
        TRY(linear_bwd(m, N, H, H, Ly->ctx, m->dA, Ly->Wo, Ly->dWo, Ly->dbo, m->dCtx, 0, e));
        TRY(tk_bert_prof_mark(m, "attn_out_ln_bwd", e));
        tk_attn_bufs ab = m->attn;
        ab.qkvh = Ly->qkvh, ab.P = Ly->P, ab.Pd = Ly->Pd, ab.lse = Ly->lse, ab.out = Ly->ctx;
        d = dropout(m, 1, l, DROP_ATTN);
        TRY(tk_attention_bwd(m->c, m->act, b, L, NH, H / NH, m->start, len, Ly->qkv, &d, &ab, m->dCtx, m->dQKV, e));
        TRY(tk_bert_prof_mark(m, "attention_bwd", e));
        TRY(linear_bwd(m, N, 3 * H, H, x, m->dQKV, Ly->Wqkv, Ly->dWqkv, Ly->dbqkv, dX, 1, e));
        TRY(tk_bert_prof_mark(m, "qkv_bwd", e));
        // every gradient from this layer on is final: several ranks reduce them meanwhile
        if (m->env.grads_ready) TRY(m->env.grads_ready(m->env.grads_arg, Ly->off, e));
        void *t = dY;
        dY = dX, dX = t;
    }
    // the embeddings: LayerNorm (dropout after it), then the three tables
    if (c->unpad) { // (to the padded layout, zeros at the padding: dH is free)
        TRY(tk_bert_unpack(m->c, m->act, b, L, H, m->start, len, dY, m->dH, e));
        dY = m->dH;
    }
    tk_dropout d = dropout(m, 1, -1, 0);
    TRY(tk_layernorm_bwd(m->c, m->act, m->N, H, dY, m->e, m->mean0, m->rstd0, m->eg, &d, TK_LN_DROP_POST, dY, NULL,
                         m->deg, m->deb, m->ln_ws, e));
    TRY(tk_bert_prof_mark(m, "embeddings_ln_bwd", e)); // (the tables' gradients apart: embeddings_bwd)
    TRY(tk_bert_embed_bwd(m->c, m->act, b, L, H, c->types, c->max_pos, ids, seg, len, dY, m->dword, m->dpos, m->dtype,
                          m->emb_ws, e));
    tk_range_pop();
    return tk_bert_prof_mark(m, "embeddings_bwd", e);
}

int tk_bert_fwd_bwd(void *model, tk_err *e) {
    tk_bert *m = model;
    const tk_bert_config *c = &m->cfg;
    const int b = m->b, L = c->L, P = c->P;
    const size_t r0 = (size_t)m->rank * b; // this rank's first sequence
    const int32_t *ids = m->in_ids + r0 * L, *len = m->in_len + r0, *pos = m->in_pos + r0 * P,
                  *mid = m->in_mid + r0 * P, *nmask = m->in_nmask + r0;
    const uint8_t *seg = m->in_seg + r0 * L;
    tk_bert_prof_step(m, 1);
    TRY(tk_bert_prof_mark(m, NULL, e));
    TRY(encoder_fwd(m, 1, ids, seg, len, e));
    TRY(mlm_fwd(m, pos, mid, nmask, e));
    TRY(nsp_fwd(m, e));
    // The loss: each rank's means times 1 / world (the engine sums the ranks' gradients).
    const float scale = 1.0f / (float)m->world;
    double *acc = m->env.loss_acc;
    TRY(tk_xent_fwd_bwd(m->c, m->act, (int)m->R, c->vocab, c->vocab_padded, m->logits, m->labels, scale, acc, 0, m->logits,
                        m->xent_ws, e));
    TRY(tk_xent_fwd_bwd(m->c, m->act, b, 2, 2, m->nsp_logits, m->in_nsp + r0, scale, acc, 1, m->nsp_logits, m->xent_ws,
                        e));
    TRY(tk_bert_prof_mark(m, "loss", e));
    TRY(heads_bwd(m, pos, nmask, e));
    return encoder_bwd(m, ids, seg, len, e); // (the step's profile ends after the optimizer: after_update)
}

int tk_bert_eval_batch(tk_bert *m, const int32_t *ids, const uint8_t *seg, const int32_t *len, const int32_t *pos,
                       const int32_t *mid, const int32_t *nmask, tk_err *e) {
    const tk_bert_config *c = &m->cfg;
    const int64_t keep = m->rows;
    m->rows = m->N; // (the eval set's lengths are not on the host: every row, the packed ones first)
    int rc = encoder_fwd(m, 0, ids, seg, len, e);
    if (!rc) rc = mlm_fwd(m, pos, mid, nmask, e);
    m->rows = keep;
    TRY(rc);
    return tk_xent_correct(m->c, m->act, (int)m->R, c->vocab, c->vocab_padded, m->logits, m->labels, m->counts, e);
}

int64_t tk_bert_rows_for(const tk_bert *m, const int32_t *len) {
    if (!m->cfg.unpad) return m->N;
    int64_t T = 0;
    for (int s = 0; s < m->b; s++) T += len[(size_t)m->rank * m->b + s];
    const int64_t q = m->cfg.unpad_bucket;
    T = (T + q - 1) / q * q;
    return T < 1 ? (q < m->N ? q : m->N) : T < m->N ? T : m->N;
}
