// BERT's foreign checkpoints and step dumps. Our tensor names are Hugging Face's
// (BertForPreTraining's state dict), so a trainkit checkpoint and an HF safetensors file name the
// same tensors the same way; the word embeddings and the output bias have vocab_padded rows here
// and vocab_size in HF's files (the padding rows are 0).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt.h"
#include "core/bf16.h"
#include "workloads/bert/bert.h"

// ---- --init-checkpoint: Hugging Face BertForPreTraining safetensors ----

// The file's tensor for our tensor `name`: the same name, or another spelling (LayerNorm's
// gamma/beta; the tied decoder weight and bias, which a file keeps under either name; a BertModel
// file without the "bert." prefix).
static const tk_st_tensor *find_hf(const tk_st_file *f, const char *name) {
    const tk_st_tensor *t = tk_st_find(f, name);
    char alt[TK_PARAM_NAME + 16];
    const char *ln = strstr(name, "LayerNorm.");
    if (!t && ln) {
        snprintf(alt, sizeof alt, "%.*sLayerNorm.%s", (int)(ln - name), name,
                 strcmp(ln, "LayerNorm.weight") == 0 ? "gamma" : "beta");
        t = tk_st_find(f, alt);
    }
    if (!t && strcmp(name, "cls.predictions.bias") == 0) t = tk_st_find(f, "cls.predictions.decoder.bias");
    if (!t && strcmp(name, "bert.embeddings.word_embeddings.weight") == 0) // (tied: saved under either name)
        t = tk_st_find(f, "cls.predictions.decoder.weight");
    if (!t && strncmp(name, "bert.", 5) == 0) t = find_hf(f, name + 5);
    return t;
}

// Tensor t of f into dst (rows x cols f32, the first `have` rows from the file, the rest 0).
static int read_tensor(const tk_st_file *f, const tk_st_tensor *t, const tk_param *p, int vocab, float *dst,
                       tk_err *e) {
    int64_t want = tk_param_numel(p), rows = p->shape[0], cols = p->ndim > 1 ? p->shape[1] : 1;
    int64_t have = t->ndim > 0 ? t->shape[0] : 1, tcols = t->ndim > 1 ? t->shape[1] : 1;
    int padded = rows != have && have == vocab && rows > vocab; // the vocabulary rows of ours
    if (t->ndim != p->ndim || tcols != cols || (have != rows && !padded)) {
        tk_err_set(e, TK_EDATA, "tensor %s has shape [%lld, %lld], the model's is [%lld, %lld]", t->name,
                   (long long)have, (long long)(t->ndim > 1 ? tcols : 0), (long long)rows, (long long)(p->ndim > 1 ? cols : 0));
        tk_err_where(e, "%s", f->path);
        return TK_EDATA;
    }
    if (t->dtype != TK_F32 && t->dtype != TK_BF16 && t->dtype != TK_F16) {
        tk_err_set(e, TK_EDATA, "tensor %s is %s (expected F32, BF16 or F16)", t->name, tk_dtype_name(t->dtype));
        tk_err_where(e, "%s", f->path);
        return TK_EDATA;
    }
    size_t n = (size_t)(have * cols), es = tk_dtype_size(t->dtype);
    char *raw = malloc(n * es + 1);
    int rc = !raw ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
    if (!rc) rc = tk_st_read_all(f, t, raw, e);
    for (size_t i = 0; !rc && i < n; i++) {
        if (t->dtype == TK_F32) memcpy(&dst[i], raw + 4 * i, 4);
        else {
            uint16_t h;
            memcpy(&h, raw + 2 * i, 2);
            if (t->dtype == TK_BF16) dst[i] = tk_bf16_to_f32(h);
            else { // IEEE half
                uint32_t sgn = (uint32_t)(h & 0x8000u) << 16, ex = (h >> 10) & 0x1f, mt = h & 0x3ffu, u;
                if (ex == 0) {
                    float v = (float)mt * (1.0f / 16777216.0f);
                    memcpy(&u, &v, 4);
                    u |= sgn;
                } else u = sgn | (ex == 31 ? 0x7f800000u | mt << 13 : (ex + 112) << 23 | mt << 13);
                memcpy(&dst[i], &u, 4);
            }
        }
    }
    for (size_t i = n; !rc && i < (size_t)want; i++) dst[i] = 0;
    free(raw);
    return rc;
}

int tk_bert_import(void *model, const char *path, tk_err *e) {
    tk_bert *m = model;
    tk_st_file *f;
    TRY(tk_st_open(&f, path, e));
    const tk_params *P = m->env.params;
    float *h = malloc(P->dense_n * sizeof(float) + 4);
    int rc = h ? 0 : tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = tk_memcpy_d2h(m->c, h, P->dense_w, P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    int found = 0;
    for (int i = 0; !rc && i < P->ndense; i++) {
        const tk_param *p = &P->p[i];
        const char *nm = p->name;
        // query, key and value: each on its own (they are rows of one matrix here)
        const tk_st_tensor *t = find_hf(f, nm);
        if (!t) continue; // what the file lacks keeps its initialization
        rc = read_tensor(f, t, p, m->cfg.vocab, h + ((float *)p->w - P->dense_w), e);
        found++;
    }
    if (!rc && found == 0) {
        rc = tk_err_set(e, TK_EDATA, "no tensor of a BERT model (e.g. bert.embeddings.word_embeddings.weight)");
        tk_err_where(e, "%s", path);
        tk_err_hint(e, "--init-checkpoint takes a Hugging Face BertForPreTraining safetensors file or a trainkit checkpoint");
    }
    if (!rc) rc = tk_memcpy_h2d(m->c, P->dense_w, h, P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_bert_weights_loaded(m, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    free(h);
    tk_st_close(f);
    return rc;
}

// ---- --dump-step ----

int tk_bert_dump_describe(void *model, tk_wl_dump *d, tk_err *e) {
    const tk_bert *m = model;
    const tk_bert_config *c = &m->cfg;
    char cfgtext[512];
    snprintf(cfgtext, sizeof cfgtext,
             "{\"vocab_size\": %d, \"vocab_padded\": %d, \"hidden_size\": %d, \"num_layers\": %d, \"num_heads\": %d, "
             "\"intermediate_size\": %d, \"max_position_embeddings\": %d, \"type_vocab_size\": %d, "
             "\"layer_norm_eps\": %.9g, \"max_seq_length\": %d, \"max_predictions_per_seq\": %d}",
             c->vocab, c->vocab_padded, c->hidden, c->layers, c->heads, c->ffn, c->max_pos, c->types, c->ln_eps, c->L,
             c->P);
    const char *dropout = c->hidden_dropout > 0 || c->attn_dropout > 0 ? "on" : "off";
    d->meta = json_pack("{s:s, s:s}", "config", cfgtext, "dropout", dropout);
    return d->meta ? 0 : tk_err_set(e, TK_EIO, "out of host memory");
}
