// BERT as a workload of the training engine (lib/engine/workload.h): the table of functions, the
// data reader the engine's loader threads use, and BERT's MLLOG keys (rulesets 1.0.0 and 1.1.0,
// closed_bert: the LAMB hyperparameters, the warm-up and its start, the training steps, and the
// tensors the rules name).
#include <stdlib.h>
#include <string.h>

#include "engine/workload.h"
#include "workloads/bert/bert.h"

// ---- configuration ----

static int wl_config(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                     tk_err *e) {
    tk_bert_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = tk_bert_config_parse(root, path, run, data_meta, cfg, e);
    if (rc) {
        tk_bert_config_release(cfg);
        free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

static void wl_config_free(void *cfg) {
    tk_bert_config_release(cfg);
    free(cfg);
}

// ---- model ----

static int wl_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e) {
    tk_bert *m;
    TRY(tk_bert_create(&m, cfg, env, e));
    *model = m;
    return 0;
}

static void wl_destroy(void *m) { tk_bert_destroy(m); }
static int wl_init(void *m, uint64_t seed, tk_err *e) { return tk_bert_init_weights(m, seed, e); }
static int wl_loaded(void *m, tk_err *e) { return tk_bert_weights_loaded(m, e); }

// ---- data ----

typedef struct {
    tk_bert_data *d;
    int B;
} reader;

// Every rank reads the whole global batch and trains its rows.
static int wl_reader_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e) {
    (void)rank, (void)world;
    const tk_bert_config *c = cfg;
    reader *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
    r->B = c->batch;
    int rc = tk_bert_data_open(&r->d, paths, npaths, c->L, c->P, c->vocab, c->types, e);
    if (rc) {
        free(r);
        return rc;
    }
    *rd = r;
    return 0;
}

static void wl_reader_close(void *rd) {
    reader *r = rd;
    if (!r) return;
    tk_bert_data_close(r->d);
    free(r);
}

static uint64_t wl_reader_count(void *rd) { return tk_bert_data_count(((reader *)rd)->d); }

// Batch `step` is the global batch of records [s B, s B + B) of the data, s = step within the
// epoch, in the dataset's order (prep bert shuffles the examples it writes, as the reference's
// create_pretraining_data); every rank reads all of it and trains on its own rows.
static int wl_read_batch(void *rd, int64_t step, int64_t spe, void *const *f, tk_err *e) {
    reader *r = rd;
    uint64_t first = (uint64_t)(step % spe) * (uint64_t)r->B;
    return tk_bert_data_read(r->d, first, r->B, f[0], f[1], f[2], f[3], f[4], f[5], f[6], e);
}

static void wl_layout(const void *model, tk_batch_layout *L) {
    L->nfields = 7;
    tk_bert_batch_layout(model, L->bytes);
}

static void wl_inputs(void *model, void **f) {
    tk_bert *m = model;
    f[0] = m->in_ids, f[1] = m->in_seg, f[2] = m->in_len, f[3] = m->in_pos, f[4] = m->in_mid, f[5] = m->in_nmask;
    f[6] = m->in_nsp;
}

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

// ---- step ----

static int wl_step(void *m, tk_err *e) { return tk_bert_fwd_bwd(m, e); }

// After the optimizer, in the step's graph: only --profile's mark (the gradient reduction and the
// update since the backward).
static int wl_after_update(void *model, tk_err *e) {
    tk_bert *m = model;
    int rc = tk_bert_prof_mark(m, "optimizer", e);
    tk_bert_prof_step(m, 0);
    return rc;
}

// ---- evaluation ----

static int wl_evalset_load(void *m, char *const *paths, int npaths, void **es, tk_err *e) {
    return tk_bert_evalset_load(m, paths, npaths, (tk_bert_evalset **)es, e);
}
static int64_t wl_evalset_count(const void *es) { return ((const tk_bert_evalset *)es)->n; }
static void wl_evalset_free(void *m, void *es) { tk_bert_evalset_free(m, es); }
static int wl_evaluate(void *m, void *es, double *acc, tk_err *e) { return tk_bert_evaluate(m, es, acc, e); }

// ---- MLLOG ----

// A number of the optimizer section, or def when absent.
static double opt_num(const tk_bert_config *c, const char *key, double def) {
    json_t *v = json_object_get(c->opt, key);
    return json_is_number(v) ? json_number_value(v) : def;
}

// closed_bert's keys, named and valued as NVIDIA's v1.1 logs have them. LAMB's (opt_lamb_*,
// opt_epsilon) are logged when the optimizer is "lamb" (its defaults: kernels/optim.h, man 5
// trainkit-optimizer); another optimizer leaves them out, and log-check then says the run is not
// closed-division BERT. The schedule's: warmup_poly's warmup_steps, start_warmup_step and
// total_steps (train.max_steps when absent).
static int wl_mllog_hparams(void *model, const tk_run_cfg *run, tk_mllog *L, tk_err *e) {
    const tk_bert *m = model;
    const tk_bert_config *c = &m->cfg;
    const char *name = json_string_value(json_object_get(c->opt, "name"));
    int lamb = name && strcmp(name, "lamb") == 0;
    int64_t warm = (int64_t)opt_num(c, "warmup_steps", 0);
    int64_t total = (int64_t)opt_num(c, "total_steps", (double)run->max_steps);
    TRY(TK_MLLOG_EVENT(L, "max_sequence_length", json_integer(c->L), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "max_predictions_per_seq", json_integer(c->P), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_base_learning_rate", json_real(opt_num(c, "base_lr", 0)), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_learning_rate_training_steps", json_integer(total), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_learning_rate_warmup_steps", json_integer(warm), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "num_warmup_steps", json_integer(warm), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "start_warmup_step", json_integer((int64_t)opt_num(c, "start_warmup_step", 0)), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_lamb_learning_rate_decay_poly_power", json_real(opt_num(c, "poly_power", 1.0)), NULL, e));
    if (!lamb) return 0;
    TRY(TK_MLLOG_EVENT(L, "opt_epsilon", json_real(opt_num(c, "eps", 1e-6)), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_lamb_beta_1", json_real(opt_num(c, "beta1", 0.9)), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_lamb_beta_2", json_real(opt_num(c, "beta2", 0.999)), NULL, e));
    return TK_MLLOG_EVENT(L, "opt_lamb_weight_decay_rate", json_real(opt_num(c, "weight_decay", 0.01)), NULL, e);
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

// ---- extras ----

static int wl_import(void *m, const char *path, tk_err *e) { return tk_bert_import(m, path, e); }
static int wl_dump(void *m, const char *path, tk_err *e) { return tk_bert_dump_step(m, path, e); }
static int wl_prof_start(void *m, tk_err *e) {
    return tk_prof_start(((tk_bert *)m)->c, TK_BERT_PROF_MAX, "bert", &((tk_bert *)m)->prof, e);
}
static int wl_prof_add(void *m, int keep, tk_err *e) { return tk_prof_add(((tk_bert *)m)->prof, ((tk_bert *)m)->c, keep, e); }
static json_t *wl_prof_json(const void *m) { return tk_prof_json(((const tk_bert *)m)->prof); }

const tk_workload tk_workload_bert = {
    .version = TK_WORKLOAD_V1,
    .name = "bert",
    .summary = "BERT-large pre-training (MLPerf Training v1.x language model, Wikipedia), target masked-LM accuracy",
    .metric = "mlm_accuracy",
    .precisions = tk_bert_precisions,
    .config = wl_config,
    .config_free = wl_config_free,
    .create = wl_create,
    .destroy = wl_destroy,
    .init_weights = wl_init,
    .weights_loaded = wl_loaded,
    .reader_open = wl_reader_open,
    .reader_close = wl_reader_close,
    .reader_count = wl_reader_count,
    .read_batch = wl_read_batch,
    .batch_layout = wl_layout,
    .inputs = wl_inputs,
    .host_batch = wl_host_batch,
    .use = wl_use,
    .step = wl_step,
    .graph_key = wl_graph_key,
    .after_update = wl_after_update,
    .evalset_load = wl_evalset_load,
    .evalset_count = wl_evalset_count,
    .evalset_free = wl_evalset_free,
    .evaluate = wl_evaluate,
    .mllog_hparams = wl_mllog_hparams,
    .mllog_weights = wl_mllog_weights,
    .import = wl_import,
    .dump_step = wl_dump,
    .profile_start = wl_prof_start,
    .profile_add = wl_prof_add,
    .profile_json = wl_prof_json,
};
