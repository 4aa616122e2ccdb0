// BERT's model: tensors (Hugging Face's names), initialization, activations and inputs.
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bert_embed.h"
#include "core/philox.h"
#include "flash_attn.h"
#include "gemm.h"
#include "layernorm.h"
#include "workloads/bert/bert.h"
#include "xent.h"

// ---- tensors ----

typedef struct {
    tk_params *P;
    tk_err *e;
    int rc;
} decl;

// A dense tensor; flags beyond DENSE: NO_DECAY | NO_ADAPT for biases and LayerNorm parameters
// (LAMB excludes them from weight decay and the trust ratio, as the MLPerf reference), PACKED to
// follow the tensor before it without a gap (query, key, value as one (3H, H) matrix).
static int add(decl *d, int *idx, int flags, int64_t d0, int64_t d1, const char *fmt, ...) {
    if (d->rc) return d->rc;
    char name[TK_PARAM_NAME];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    int64_t shape[2] = {d0, d1};
    return d->rc = tk_params_add(d->P, name, TK_F32, d1 ? 2 : 1, shape, TK_PARAM_DENSE | flags, -1, idx, d->e);
}

#define NOD (TK_PARAM_NO_DECAY | TK_PARAM_NO_ADAPT)

// The tensors in forward order (the backward finishes them from the last layer to the first, so
// grads_ready can hand the engine the layers' gradients as they complete).
static int declare(tk_bert *m, int *ix, tk_err *e) {
    const tk_bert_config *c = &m->cfg;
    const int H = c->hidden, F = c->ffn;
    decl d = {m->env.params, e, 0};
    int k = 0;
    add(&d, &ix[k++], 0, c->vocab_padded, H, "bert.embeddings.word_embeddings.weight");
    add(&d, &ix[k++], 0, c->max_pos, H, "bert.embeddings.position_embeddings.weight");
    add(&d, &ix[k++], 0, c->types, H, "bert.embeddings.token_type_embeddings.weight");
    add(&d, &ix[k++], NOD, H, 0, "bert.embeddings.LayerNorm.weight");
    add(&d, &ix[k++], NOD, H, 0, "bert.embeddings.LayerNorm.bias");
    for (int l = 0; l < c->layers; l++) {
        const char *p = "bert.encoder.layer";
        add(&d, &ix[k++], 0, H, H, "%s.%d.attention.self.query.weight", p, l);
        add(&d, &ix[k++], TK_PARAM_PACKED, H, H, "%s.%d.attention.self.key.weight", p, l);
        add(&d, &ix[k++], TK_PARAM_PACKED, H, H, "%s.%d.attention.self.value.weight", p, l);
        add(&d, &ix[k++], NOD, H, 0, "%s.%d.attention.self.query.bias", p, l);
        add(&d, &ix[k++], NOD | TK_PARAM_PACKED, H, 0, "%s.%d.attention.self.key.bias", p, l);
        add(&d, &ix[k++], NOD | TK_PARAM_PACKED, H, 0, "%s.%d.attention.self.value.bias", p, l);
        add(&d, &ix[k++], 0, H, H, "%s.%d.attention.output.dense.weight", p, l);
        add(&d, &ix[k++], NOD, H, 0, "%s.%d.attention.output.dense.bias", p, l);
        add(&d, &ix[k++], NOD, H, 0, "%s.%d.attention.output.LayerNorm.weight", p, l);
        add(&d, &ix[k++], NOD, H, 0, "%s.%d.attention.output.LayerNorm.bias", p, l);
        add(&d, &ix[k++], 0, F, H, "%s.%d.intermediate.dense.weight", p, l);
        add(&d, &ix[k++], NOD, F, 0, "%s.%d.intermediate.dense.bias", p, l);
        add(&d, &ix[k++], 0, H, F, "%s.%d.output.dense.weight", p, l);
        add(&d, &ix[k++], NOD, H, 0, "%s.%d.output.dense.bias", p, l);
        add(&d, &ix[k++], NOD, H, 0, "%s.%d.output.LayerNorm.weight", p, l);
        add(&d, &ix[k++], NOD, H, 0, "%s.%d.output.LayerNorm.bias", p, l);
    }
    add(&d, &ix[k++], 0, H, H, "bert.pooler.dense.weight");
    add(&d, &ix[k++], NOD, H, 0, "bert.pooler.dense.bias");
    add(&d, &ix[k++], 0, H, H, "cls.predictions.transform.dense.weight");
    add(&d, &ix[k++], NOD, H, 0, "cls.predictions.transform.dense.bias");
    add(&d, &ix[k++], NOD, H, 0, "cls.predictions.transform.LayerNorm.weight");
    add(&d, &ix[k++], NOD, H, 0, "cls.predictions.transform.LayerNorm.bias");
    add(&d, &ix[k++], NOD, c->vocab_padded, 0, "cls.predictions.bias");
    add(&d, &ix[k++], 0, 2, H, "cls.seq_relationship.weight");
    add(&d, &ix[k++], NOD, 2, 0, "cls.seq_relationship.bias");
    return d.rc;
}

static void bind(tk_bert *m, const int *ix) {
    tk_param *p = m->env.params->p;
    int k = 0;
#define W(dst, gdst) (dst = p[ix[k]].w, gdst = p[ix[k]].g, k++)
    W(m->word, m->dword), W(m->pos, m->dpos), W(m->type, m->dtype), W(m->eg, m->deg), W(m->eb, m->deb);
    for (int l = 0; l < m->cfg.layers; l++) {
        tk_bert_layer *Ly = &m->layer[l];
        Ly->pidx = ix[k];
        Ly->off = (size_t)((float *)p[ix[k]].w - m->env.params->dense_w);
        W(Ly->Wqkv, Ly->dWqkv), k += 2; // key, value: rows H .. 3H - 1 of Wqkv
        W(Ly->bqkv, Ly->dbqkv), k += 2;
        W(Ly->Wo, Ly->dWo), W(Ly->bo, Ly->dbo), W(Ly->g1, Ly->dg1), W(Ly->b1, Ly->db1);
        W(Ly->Wi, Ly->dWi), W(Ly->bi, Ly->dbi), W(Ly->Wo2, Ly->dWo2), W(Ly->bo2, Ly->dbo2);
        W(Ly->g2, Ly->dg2), W(Ly->b2, Ly->db2);
    }
    W(m->Wp, m->dWp), W(m->bp, m->dbp), W(m->Wt, m->dWt), W(m->bt, m->dbt), W(m->tg, m->dtg), W(m->tb, m->dtb);
    W(m->dec_b, m->ddec_b), W(m->Wn, m->dWn), W(m->bn, m->dbn);
#undef W
}

// The global batch's fields, in the order of tk_bert_data_read's arrays (ids, seg, len, pos, mid,
// nmask, nsp), under the names of contrib/peers/bert.py.
int tk_bert_batch(const void *model, tk_wl_field *f) {
    const tk_bert *m = model;
    const int64_t B = m->cfg.batch, L = m->cfg.L, P = m->cfg.P;
    f[0] = (tk_wl_field){"batch.input_ids", TK_I32, 2, {B, L}, m->in_ids};
    f[1] = (tk_wl_field){"batch.segment_ids", TK_U8, 2, {B, L}, m->in_seg};
    f[2] = (tk_wl_field){"batch.seq_len", TK_I32, 1, {B}, m->in_len};
    f[3] = (tk_wl_field){"batch.masked_lm_positions", TK_I32, 2, {B, P}, m->in_pos};
    f[4] = (tk_wl_field){"batch.masked_lm_ids", TK_I32, 2, {B, P}, m->in_mid};
    f[5] = (tk_wl_field){"batch.num_masked", TK_I32, 1, {B}, m->in_nmask};
    f[6] = (tk_wl_field){"batch.next_sentence_labels", TK_I32, 1, {B}, m->in_nsp};
    return 7;
}

// ---- buffers ----

int tk_bert_create(const void *config, const tk_wl_env *env, void **out, tk_err *e) {
    const tk_bert_config *cfg = config;
    tk_bert *m = *out = calloc(1, sizeof *m); // (the engine destroys it if create fails)
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    tk_ctx *c = env->c;
    m->c = c;
    m->cfg = *cfg; // (opt is borrowed: the configuration outlives the model)
    m->env = *env;
    m->rank = env->dist->rank;
    m->world = env->dist->world;
    m->act = cfg->bf16 ? TK_BF16 : TK_F32;
    int64_t per_rank;
    TRY(tk_per_rank_batch("bert", cfg->batch, m->world, &per_rank, e));
    m->b = (int)per_rank;
    const int b = m->b, L = cfg->L, P = cfg->P, H = cfg->hidden, F = cfg->ffn, NH = cfg->heads, Vp = cfg->vocab_padded;
    const int64_t N = (int64_t)b * L, R = (int64_t)b * P;
    m->N = N, m->R = R;
    m->rows = m->slot_rows[0] = m->slot_rows[1] = N;
    if (N * (int64_t)(3 * H > F ? 3 * H : F) > INT32_MAX || (int64_t)b * NH * L * L > ((int64_t)1 << 40) ||
        R * Vp > INT32_MAX)
        return tk_err_set(e, TK_EUSAGE, "bert: a batch of %d sequences of %d is too large for one rank", b, L);
    if (cfg->bf16) m->env.params->copy_type = TK_BF16;
    int ix[16 * TK_BERT_MAX_LAYERS + 32];
    TRY(declare(m, ix, e));
    TRY(tk_params_alloc(m->env.params, e));
    bind(m, ix);

    // Activations, inputs and workspaces: the engine's arena.
    const size_t es = tk_dtype_size(m->act), NHs = (size_t)N * H * es, NFs = (size_t)N * F * es;
    const size_t probs = (size_t)b * NH * L * L * es, heads3 = 3 * NHs;
    tk_wl_field in[7]; // the batch's shapes (its buffers are below)
    size_t bytes[7];
    for (int f = tk_bert_batch(m, in); f-- > 0;) bytes[f] = tk_wl_field_bytes(&in[f]);
    size_t lnws = tk_layernorm_bwd_ws_bytes(c->backend, N, H), lnws2 = tk_layernorm_bwd_ws_bytes(c->backend, R, H);
    size_t sizes[64 + 16 * TK_BERT_MAX_LAYERS];
    void **dst[64 + 16 * TK_BERT_MAX_LAYERS];
    int ns = 0;
#define NEED(ptr, n) (dst[ns] = (void **)&(ptr), sizes[ns++] = (n))
    NEED(m->in_ids, bytes[0]), NEED(m->in_seg, bytes[1]), NEED(m->in_len, bytes[2]), NEED(m->in_pos, bytes[3]);
    NEED(m->in_mid, bytes[4]), NEED(m->in_nmask, bytes[5]), NEED(m->in_nsp, bytes[6]);
    NEED(m->e, NHs), NEED(m->mean0, (size_t)N * 4), NEED(m->rstd0, (size_t)N * 4), NEED(m->x0, NHs);
    NEED(m->tmp, NHs), NEED(m->start, (size_t)(b + 1) * 4);
    if (cfg->unpad) NEED(m->xp, NHs);
    // the attention: the fused path keeps lse a layer and one backward workspace; the unfused one
    // the heads and probabilities a layer (P and Pd: b NH L^2 each) and shared scratch
    const int fused = cfg->fused_attention && tk_attention_fusable(c, m->act, H / NH);
    m->attn.fused = fused;
    if (fused)
        NEED(m->attn.ws, tk_flash_attn_bwd_ws_bytes((int)N, b, NH, H / NH, L));
    else
        NEED(m->attn.S, probs), NEED(m->attn.ctxh, NHs), NEED(m->attn.dqkvh, heads3);
    for (int l = 0; l < cfg->layers; l++) {
        tk_bert_layer *Ly = &m->layer[l];
        NEED(Ly->qkv, heads3), NEED(Ly->ctx, NHs), NEED(Ly->s1, NHs), NEED(Ly->h, NHs);
        if (fused) NEED(Ly->lse, (size_t)b * NH * L * 4);
        else NEED(Ly->qkvh, heads3), NEED(Ly->P, probs);
        if (!fused && cfg->attn_dropout > 0) NEED(Ly->Pd, probs); // (kept: the backward does not redraw it)
        NEED(Ly->mean1, (size_t)N * 4), NEED(Ly->rstd1, (size_t)N * 4);
        NEED(Ly->pre, tk_gemm_gelu_aux_bytes(c, (int)N, F, m->act)), NEED(Ly->inter, NFs);
        NEED(Ly->s2, NHs), NEED(Ly->y, NHs), NEED(Ly->mean2, (size_t)N * 4), NEED(Ly->rstd2, (size_t)N * 4);
    }
    NEED(m->g, (size_t)R * H * es), NEED(m->labels, (size_t)R * 4);
    NEED(m->t_pre, tk_gemm_gelu_aux_bytes(c, (int)R, H, m->act)), NEED(m->t1, (size_t)R * H * es);
    NEED(m->t2, (size_t)R * H * es), NEED(m->mean_t, (size_t)R * 4), NEED(m->rstd_t, (size_t)R * 4);
    NEED(m->logits, (size_t)R * Vp * es);
    NEED(m->cls, (size_t)b * H * es), NEED(m->pooled, (size_t)b * H * es), NEED(m->nsp_logits, (size_t)b * 2 * es);
    NEED(m->dY, NHs), NEED(m->dX, NHs), NEED(m->dH, NHs), NEED(m->dA, NHs), NEED(m->dCtx, NHs);
    NEED(m->dQKV, heads3), NEED(m->dPre, NFs), NEED(m->dg, (size_t)R * H * es), NEED(m->dcls, (size_t)b * H * es);
    NEED(m->ln_ws, lnws > lnws2 ? lnws : lnws2);
    NEED(m->emb_ws, tk_bert_embed_bwd_ws_bytes(c->backend, b, L, H, cfg->types));
    NEED(m->xent_ws, tk_xent_ws_bytes(c->backend, (int)(R > b ? R : b)));
    NEED(m->counts, 16);
#undef NEED
    return tk_wl_acts(env, sizes, dst, ns, e);
}

void tk_bert_destroy(void *model) { free(model); } // (the buffers are the engine's)

// ---- initialization ----

// A distinct Philox stream per tensor (its declaration index).
static uint32_t init_stream(int idx) { return (uint32_t)TK_RNG_INIT | (uint32_t)(idx + 1) << 8; }

// As BERT's reference and Hugging Face's _init_weights: weights (linear and embedding) from
// N(0, initializer_range), biases 0, LayerNorm weight 1 and bias 0; the padding rows of the
// vocabulary 0. A tensor's values depend on the seed and its name's position only, so every rank
// and backend draws the same ones.
int tk_bert_init_weights(void *model, uint64_t seed, tk_err *e) {
    tk_bert *m = model;
    const tk_params *P = m->env.params;
    size_t n = P->dense_n;
    float *h = calloc(n ? n : 1, sizeof(float));
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory for the initialization");
    const int H = m->cfg.hidden;
    for (int i = 0; i < P->ndense; i++) {
        const tk_param *t = &P->p[i];
        float *w = h + ((float *)t->w - P->dense_w);
        int64_t k = tk_param_numel(t);
        const char *nm = t->name;
        int is_ln_w = strstr(nm, "LayerNorm.weight") != NULL;
        int is_bias = t->ndim == 1 && !is_ln_w; // biases, LayerNorm biases, the output bias
        if (is_ln_w) {
            for (int64_t j = 0; j < k; j++) w[j] = 1.0f;
        } else if (!is_bias) {
            if (strcmp(nm, "bert.embeddings.word_embeddings.weight") == 0) k = (int64_t)m->cfg.vocab * H; // pads stay 0
            const double sd = m->cfg.init_std;
            const uint32_t st = init_stream(i);
#pragma omp parallel for schedule(static)
            for (int64_t j = 0; j < k; j++) w[j] = (float)(sd * tk_philox_normal(seed, st, (uint64_t)j));
        }
    }
    int rc = tk_memcpy_h2d(m->c, P->dense_w, h, n * sizeof(float), TK_STREAM_COMPUTE, e);
    free(h);
    return rc;
}

int tk_bert_weights_loaded(void *model, tk_err *e) { return tk_params_refresh_copy(((tk_bert *)model)->env.params, e); }
