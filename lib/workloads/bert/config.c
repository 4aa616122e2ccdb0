// BERT's configuration: the "model" and "data" sections (man/man1/train-step.1, BERT).
#include "workloads/bert/bert.h"

#include <stdlib.h>
#include <string.h>

#include "bert_embed.h" // TK_BERT_MAX_TYPES

const char *const tk_bert_precisions[] = {"fp32", "tf32", "bf16", NULL};

// An integer member that may be "data": then the training data's schema meta gives it (prep bert
// writes vocab_size, max_seq_length, max_predictions_per_seq), and the resolved value is written
// back into the effective config.
static int int_or_data(json_t *root, const char *path, const char *p, const char *meta_key, json_t *meta, int64_t lo,
                       int64_t hi, int *out, tk_err *e) {
    json_t *v = tk_cfg_get(root, p);
    if (json_is_string(v) && strcmp(json_string_value(v), "data") == 0) {
        json_t *m = json_object_get(meta, meta_key);
        if (!json_is_integer(m)) {
            char what[200];
            snprintf(what, sizeof what, "\"data\" needs the training data's schema meta \"%s\" (from prep bert)", meta_key);
            return tk_cfg_bad(e, path, p, what);
        }
        json_object_set_new(json_object_get(root, "model"), strrchr(p, '.') + 1, json_integer(json_integer_value(m)));
    }
    int64_t x;
    TRY(tk_cfg_int(root, path, p, lo, hi, &x, e));
    *out = (int)x;
    return 0;
}

int tk_bert_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                         tk_err *e) {
    static const char *const model_keys[] = {
        "vocab_size", "vocab_pad_multiple", "hidden_size", "num_layers", "num_heads", "intermediate_size",
        "max_position_embeddings", "type_vocab_size", "max_seq_length", "max_predictions_per_seq", "hidden_dropout",
        "attention_dropout", "dropout", "layer_norm_eps", "initializer_range", "precision", "unpad", "unpad_bucket",
        "fused_attention", NULL};
    static const char *const data_keys[] = {"train_samples", "eval_samples", "note", NULL};
    *out = NULL;
    tk_bert_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tk_err_set(e, TK_EIO, "out of host memory");
    json_t *meta = NULL;
    int64_t v;
    int rc = 0;
    if ((rc = tk_cfg_keys(root, path, "model", model_keys, e)) || (rc = tk_cfg_keys(root, path, "data", data_keys, e)))
        goto out;
    if (!json_is_object(tk_cfg_get(root, "model"))) {
        rc = tk_cfg_bad(e, path, "model", "expected an object");
        goto out;
    }
    meta = data_meta ? json_loads(data_meta, 0, NULL) : NULL;
#define INT(p, lo, hi, dst)                                                                                            \
    do {                                                                                                               \
        if ((rc = tk_cfg_int(root, path, p, lo, hi, &v, e))) goto out;                                                 \
        dst = (int)v;                                                                                                  \
    } while (0)
    if ((rc = int_or_data(root, path, "model.vocab_size", "vocab_size", meta, 2, 32768, &cfg->vocab, e))) goto out;
    int mult = 8;
    v = mult;
    if ((rc = tk_cfg_int_opt(root, path, "model.vocab_pad_multiple", 1, 1024, &v, e))) goto out;
    mult = (int)v;
    cfg->vocab_padded = (cfg->vocab + mult - 1) / mult * mult;
    INT("model.hidden_size", 1, 16384, cfg->hidden);
    INT("model.num_layers", 1, TK_BERT_MAX_LAYERS, cfg->layers);
    INT("model.num_heads", 1, 1024, cfg->heads);
    INT("model.intermediate_size", 1, 65536, cfg->ffn);
    INT("model.max_position_embeddings", 1, 32768, cfg->max_pos);
    INT("model.type_vocab_size", 1, TK_BERT_MAX_TYPES, cfg->types);
    if ((rc = int_or_data(root, path, "model.max_seq_length", "max_seq_length", meta, 1, 32767, &cfg->L, e)) ||
        (rc = int_or_data(root, path, "model.max_predictions_per_seq", "max_predictions_per_seq", meta, 1, 32767,
                          &cfg->P, e)))
        goto out;
    if (cfg->hidden % cfg->heads != 0) {
        rc = tk_cfg_bad(e, path, "model.num_heads", "must divide hidden_size");
        goto out;
    }
    if (cfg->L > cfg->max_pos) {
        rc = tk_cfg_bad(e, path, "model.max_seq_length", "must be at most max_position_embeddings");
        goto out;
    }
    if (cfg->P > cfg->L) {
        rc = tk_cfg_bad(e, path, "model.max_predictions_per_seq", "must be at most max_seq_length");
        goto out;
    }
    double hd = 0.1, ad = 0.1, eps = 1e-12, std = 0.02;
    int drop = 1;
    if ((rc = tk_cfg_num_opt(root, path, "model.hidden_dropout", 0, 0.99, &hd, e)) ||
        (rc = tk_cfg_num_opt(root, path, "model.attention_dropout", 0, 0.99, &ad, e)) ||
        (rc = tk_cfg_bool_opt(root, path, "model.dropout", &drop, e)) ||
        (rc = tk_cfg_num_opt(root, path, "model.layer_norm_eps", 0, 1, &eps, e)) ||
        (rc = tk_cfg_num_opt(root, path, "model.initializer_range", 0, 10, &std, e)))
        goto out;
    // "dropout": false turns both dropouts off (the step check against PyTorch, the op tests).
    cfg->hidden_dropout = drop ? (float)hd : 0.0f;
    cfg->attn_dropout = drop ? (float)ad : 0.0f;
    cfg->ln_eps = (float)eps;
    cfg->init_std = std;
    // "precision": what the cuda backend computes in; absent = "fp32". The cpu backend is the
    // fp32 reference (tk_bert_create refuses bf16 there).
    tk_precision pr;
    if ((rc = tk_cfg_precision(root, path, tk_bert_precisions, &pr, e))) goto out;
    cfg->tf32 = pr == TK_PRECISION_TF32;
    cfg->bf16 = pr == TK_PRECISION_BF16;
    // "unpad": the layers on the real tokens only (packed); "unpad_bucket": their rows rounded up
    // to a multiple of it (one CUDA graph a bucket).
    // "fused_attention": the flash kernel where it is built (cuda, bf16, head size 64).
    int unpad = 0, fused = 1;
    v = 128;
    if ((rc = tk_cfg_bool_opt(root, path, "model.unpad", &unpad, e)) ||
        (rc = tk_cfg_int_opt(root, path, "model.unpad_bucket", 1, 1 << 20, &v, e)) ||
        (rc = tk_cfg_bool_opt(root, path, "model.fused_attention", &fused, e)))
        goto out;
    cfg->unpad = unpad;
    cfg->fused_attention = fused;
    cfg->unpad_bucket = (int)v;
    if (run->batch > INT32_MAX / 2) {
        rc = tk_cfg_bad(e, path, "train.global_batch_size", "too large");
        goto out;
    }
    cfg->batch = (int)run->batch;
    cfg->seed = run->seed;
#undef INT
out:
    json_decref(meta);
    if (rc) tk_bert_config_free(cfg);
    else *out = cfg;
    return rc;
}

void tk_bert_config_free(void *p) {
    tk_bert_config *cfg = p;
    free(cfg);
}
