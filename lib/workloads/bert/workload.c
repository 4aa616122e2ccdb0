// BERT as a workload of the training engine (lib/engine/workload.h): the table of functions (most
// of them BERT's own, bert.h), the staging hooks of the packed rows, --profile's timer, and BERT's
// MLLOG keys (rulesets 1.0.0 and 1.1.0, closed_bert: the LAMB hyperparameters, the warm-up and its
// start, the training steps, and the tensors the rules name).
#include <string.h>

#include "engine/evalset.h"
#include "engine/workload.h"
#include "workloads/bert/bert.h"

// ---- staging: the packed rows of a batch ----

// The packed rows of a batch (model.unpad): from the host's lengths (field 2) as it is staged,
// the step's shapes when its slot becomes the input, one CUDA graph per bucket of rows.
static void wl_host_batch(void *model, int slot, void *const *f) {
    tk_bert *m = model;
    m->slot_rows[slot & 1] = tk_bert_rows_for(m, f[2]);
}

static int wl_use(void *model, int slot, tk_err *e) {
    (void)e;
    tk_bert *m = model;
    m->rows = m->slot_rows[slot & 1];
    return 0;
}

static int64_t wl_graph_key(void *model) { return ((tk_bert *)model)->rows; }

// ---- --profile (lib/engine/profile.h) ----

// After the optimizer, in the step's graph: only --profile's mark (the gradient reduction and the
// update since the backward).
static int wl_after_update(void *model, tk_err *e) {
    tk_bert *m = model;
    int rc = tk_bert_prof_mark(m, "optimizer", e);
    tk_bert_prof_step(m, 0);
    return rc;
}


// ---- MLLOG ----

// closed_bert's optimizer keys, named and valued as NVIDIA's v1.1 logs have them, logged by the
// engine (engine/optimizer.h). LAMB's (opt_lamb_*, opt_epsilon) only when the optimizer is "lamb";
// another optimizer leaves them out, and log-check then says the run is not closed-division BERT.
// The schedule's: warmup_poly's warmup_steps, start_warmup_step and total_steps.
static const tk_opt_mllog_key opt_mllog_names[] = {
    {"opt_base_learning_rate", TK_OPTV_BASE_LR, 'r', NULL},
    {"opt_learning_rate_training_steps", TK_OPTV_TOTAL_STEPS, 'i', NULL},
    {"opt_learning_rate_warmup_steps", TK_OPTV_WARMUP_STEPS, 'i', NULL},
    {"num_warmup_steps", TK_OPTV_WARMUP_STEPS, 'i', NULL},
    {"start_warmup_step", TK_OPTV_START_WARMUP, 'i', NULL},
    {"opt_lamb_learning_rate_decay_poly_power", TK_OPTV_POLY_POWER, 'r', NULL},
    {"opt_epsilon", TK_OPTV_EPS, 'r', "lamb"},
    {"opt_lamb_beta_1", TK_OPTV_BETA1, 'r', "lamb"},
    {"opt_lamb_beta_2", TK_OPTV_BETA2, 'r', "lamb"},
    {"opt_lamb_weight_decay_rate", TK_OPTV_WEIGHT_DECAY, 'r', "lamb"},
    {NULL, 0, 0, NULL}};

// The model's keys.
static int wl_mllog_hparams(void *model, const tk_run_cfg *run, tk_mllog *L, tk_err *e) {
    const tk_bert_config *c = &((const tk_bert *)model)->cfg;
    (void)run;
    TRY(TK_MLLOG_EVENT(L, "max_sequence_length", json_integer(c->L), NULL, e));
    return TK_MLLOG_EVENT(L, "max_predictions_per_seq", json_integer(c->P), NULL, e);
}

// The tensors closed_bert names (the reference's TensorFlow names), one weights_initialization
// event each.
static int wl_mllog_weights(void *model, tk_mllog *L, tk_err *e) {
    const tk_bert *m = model;
    static const char *const emb[] = {"word_embeddings", "position_embeddings", "token_type_embeddings",
                                      "LayerNorm/gamma", "LayerNorm/beta"};
    static const char *const lay[] = {
        "attention/self/query/kernel", "attention/self/query/bias", "attention/self/key/kernel",
        "attention/self/key/bias", "attention/self/value/kernel", "attention/self/value/bias",
        "attention/output/dense/kernel", "attention/output/dense/bias", "attention/output/LayerNorm/gamma",
        "attention/output/LayerNorm/beta", "intermediate/dense/kernel", "intermediate/dense/bias",
        "output/dense/kernel", "output/dense/bias", "output/LayerNorm/gamma", "output/LayerNorm/beta"};
    static const char *const tail[] = {"bert/pooler/dense/kernel", "bert/pooler/dense/bias",
                                       "cls/predictions/output_bias", "cls/predictions/transform/dense/kernel",
                                       "cls/predictions/transform/dense/bias", "cls/predictions/transform/LayerNorm/gamma",
                                       "cls/predictions/transform/LayerNorm/beta", "cls/seq_relationship/output_weights",
                                       "cls/seq_relationship/output_bias"};
    char name[96];
    for (size_t i = 0; i < sizeof emb / sizeof *emb; i++) {
        snprintf(name, sizeof name, "bert/embeddings/%s", emb[i]);
        TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", name), e));
    }
    for (int l = 0; l < m->cfg.layers; l++)
        for (size_t i = 0; i < sizeof lay / sizeof *lay; i++) {
            snprintf(name, sizeof name, "bert/encoder/layer_%d/%s", l, lay[i]);
            TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", name), e));
        }
    for (size_t i = 0; i < sizeof tail / sizeof *tail; i++)
        TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", tail[i]), e));
    return 0;
}

const tk_workload tk_workload_bert = {
    .version = TK_WORKLOAD_V6, .name = "bert", .metric = "mlm_accuracy", .precisions = tk_bert_precisions,
    .summary = "BERT-large pre-training (MLPerf Training v1.x language model, Wikipedia), target masked-LM accuracy",
    .config = tk_bert_config_parse, .config_free = tk_bert_config_free,
    .create = tk_bert_create, .destroy = tk_bert_destroy, .init_weights = tk_bert_init_weights,
    .weights_loaded = tk_bert_weights_loaded,
    .reader_open = tk_bert_data_open, .reader_close = tk_bert_data_close, .reader_count = tk_bert_data_count,
    .read_batch = tk_bert_read_batch,
    .batch = tk_bert_batch, .host_batch = wl_host_batch, .use = wl_use,
    .step = tk_bert_fwd_bwd, .after_update = wl_after_update, .graph_key = wl_graph_key,
    .evalset_load = tk_bert_evalset_load, .evalset_count = tk_evalset_count,
    .evalset_free = tk_evalset_free, .evaluate = tk_bert_evaluate,
    .opt_mllog = opt_mllog_names, .mllog_hparams = wl_mllog_hparams, .mllog_weights = wl_mllog_weights,
    .import = tk_bert_import, .profile_marks = TK_BERT_PROF_MAX,
    .dump_describe = tk_bert_dump_describe,
};
