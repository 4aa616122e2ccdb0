// DLRM as a workload of the training engine (lib/engine/workload.h): the table of functions, and
// what the engine needs that is DLRM's: its train-step options, its MLLOG keys, the hybrid
// embedding's statistics pass before training.
#include <stdlib.h>
#include <string.h>

#include "core/progress.h" // tk_now
#include "engine/workload.h"
#include "workloads/dlrm/dlrm.h"

// ---- configuration ----

static int wl_config(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                     tk_err *e) {
    tk_dlrm_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = tk_dlrm_config_parse(root, path, run, data_meta, cfg, e);
    if (rc) {
        free(cfg);
        return rc;
    }
    *out = cfg;
    return 0;
}

static void wl_config_free(void *cfg) { free(cfg); }

// One rank: the hybrid embedding (the default) runs in the exchange step over a world of 1 (its
// replica's segment sums and dense update beat the sorted sparse update of the hot rows: 1.42x
// the plain one-rank step on an H100, contrib/bench/NOTES.md), so one command serves every GPU
// count. --no-hybrid-embedding without --force-exchange: the plain one-rank step, no communicator.
static int wl_wants_comm(const void *cfg) {
    const tk_dlrm_config *c = cfg;
    return c->force_exchange || c->hybrid;
}

// ---- model ----

static int wl_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e) {
    tk_dlrm *m;
    TRY(tk_dlrm_create_env(&m, cfg, env, e));
    *model = m;
    return 0;
}

static void wl_destroy(void *m) { tk_dlrm_destroy(m); }
static int wl_init(void *m, uint64_t seed, tk_err *e) { return tk_dlrm_init_weights(m, seed, e); }
static int wl_loaded(void *m, tk_err *e) { return tk_dlrm_weights_loaded(m, e); }

// ---- data ----

typedef struct {
    tk_dlrm_data *d;
    const tk_dlrm_config *cfg;
} reader;

// Every rank reads the whole global batch (the tables' owners look up all of it).
static int wl_reader_open(const void *cfg, int rank, int world, char *const *paths, int npaths, void **rd, tk_err *e) {
    (void)rank, (void)world;
    const tk_dlrm_config *c = cfg;
    reader *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
    r->cfg = c;
    int rc = tk_dlrm_data_open(&r->d, paths, npaths, c->num_dense, c->num_tables, e);
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
    tk_dlrm_data_close(r->d);
    free(r);
}

static uint64_t wl_reader_count(void *rd) { return tk_dlrm_data_count(((reader *)rd)->d); }

static int wl_read_batch(void *rd, int64_t step, int64_t spe, void *const *f, tk_err *e) {
    reader *r = rd;
    return tk_dlrm_data_batch(r->d, step, spe, r->cfg->batch, r->cfg->table_rows, f[0], f[1], f[2], e);
}

static void wl_layout(const void *model, tk_batch_layout *L) {
    const tk_dlrm *m = model;
    const size_t B = (size_t)m->cfg.batch;
    *L = (tk_batch_layout){.nfields = 3, .bytes = {B, B * m->cfg.num_dense * 4, B * m->cfg.num_tables * 4}};
}

static void wl_inputs(void *model, void **f) {
    tk_dlrm *m = model;
    f[0] = m->in_label;
    f[1] = m->in_dense;
    f[2] = m->in_cat;
}

static int wl_staged(void *model, int slot, void *const *dev, int stream, tk_err *e) {
    return tk_dlrm_hybrid_stage(model, slot, dev[2], stream, e);
}

static int wl_use(void *model, int slot, tk_err *e) {
    tk_dlrm *m = model;
    (void)e;
    if (m->hy) m->hy->cur = slot; // the step reads the slot's plan in place (no graph: no fixed address)
    return 0;
}

// --hybrid-embedding: the replicated rows are chosen from the first batches of the training data
// (every rank reads the same ones, so every rank chooses the same rows).
static int wl_prepare(void *model, void *rd, int64_t spe, json_t **line, tk_err *e) {
    tk_dlrm *m = model;
    reader *r = rd;
    const tk_dlrm_config *cfg = &m->cfg;
    (void)spe;
    if (!cfg->hybrid) return 0;
    const int T = cfg->num_tables, B = cfg->batch;
    int64_t want = cfg->hybrid_stat_batches * B, have = (int64_t)tk_dlrm_data_count(r->d);
    int64_t n = want < have ? want : have, got_all = 0;
    uint8_t *hl = malloc((size_t)B);
    int32_t *hd = malloc((size_t)B * cfg->num_dense * 4), *cat = malloc((size_t)n * T * 4 + 4);
    int rc = !hl || !hd || !cat ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
    if (!rc) rc = tk_dlrm_data_seek(r->d, 0, e);
    while (!rc && got_all < n) {
        int k = n - got_all < B ? (int)(n - got_all) : B, got = 0;
        rc = tk_dlrm_data_next(r->d, k, cfg->table_rows, hl, hd, cat + got_all * T, &got, e);
        if (!rc && got == 0) break;
        got_all += got;
    }
    double t0 = tk_now();
    if (!rc) rc = tk_dlrm_hybrid_setup(m, cat, got_all, cfg->hybrid_max_rows, cfg->hybrid_capacity, e);
    if (!rc) {
        json_t *h = tk_dlrm_hybrid_json(m);
        *line = json_pack("{s:s, s:I, s:f, s:o}", "type", "hybrid_embedding", "stat_samples", (json_int_t)got_all,
                          "setup_s", tk_now() - t0, "rows", h ? h : json_null());
    }
    free(hl);
    free(hd);
    free(cat);
    return rc;
}

// ---- step ----

static int wl_step(void *m, tk_err *e) { return tk_dlrm_fwd_bwd(m, e); }
static int wl_after_update(void *m, tk_err *e) { return tk_dlrm_after_update(m, e); }
static int64_t wl_graph_key(void *m) { return tk_dlrm_capturable(m) ? tk_dlrm_capture_key(m) : -1; }
// With the hybrid embedding the step reads its staging slot's exchange plan in place.
static int wl_graph_per_slot(const void *m) { return ((const tk_dlrm *)m)->hy != NULL; }
static int wl_step_queued(void *m, tk_err *e) { return tk_dlrm_step_queued(m, e); }

// ---- evaluation ----

static int wl_evalset_load(void *m, char *const *paths, int npaths, void **es, tk_err *e) {
    return tk_dlrm_evalset_load(m, paths, npaths, (tk_dlrm_evalset **)es, e);
}
static int64_t wl_evalset_count(const void *es) { return ((const tk_dlrm_evalset *)es)->n; }
static void wl_evalset_free(void *m, void *es) { tk_dlrm_evalset_free(m, es); }
static int wl_evaluate(void *m, void *es, double *auc, tk_err *e) { return tk_dlrm_evaluate(m, es, auc, e); }

// ---- MLLOG ----

// The optimizer and schedule keys of closed_dlrm (HugeCTR's names, as NVIDIA's v1.x logs).
static int wl_mllog_hparams(void *model, const tk_run_cfg *run, tk_mllog *L, tk_err *e) {
    (void)model;
    const tk_lr_sched *s = &run->opt.lr;
    TRY(TK_MLLOG_EVENT(L, "opt_base_learning_rate", json_real(s->base_lr), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "sgd_opt_base_learning_rate", json_real(s->base_lr), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_learning_rate_warmup_steps", json_integer(s->warmup_steps), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_learning_rate_warmup_factor", json_real(0.0), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "lr_decay_start_steps", json_integer(s->decay_start), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "sgd_opt_learning_rate_decay_steps", json_integer(s->decay_steps), NULL, e));
    return TK_MLLOG_EVENT(L, "sgd_opt_learning_rate_decay_poly_power", json_real(s->power), NULL, e);
}

// The tensors the MLPerf rules name (closed_dlrm.yaml), in the reference's order.
static int wl_mllog_weights(void *model, tk_mllog *L, tk_err *e) {
    const tk_dlrm *m = model;
    TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", "embeddings"), e));
    for (int l = 0; l < m->nlayers; l++) {
        char name[48];
        int top = l >= m->cfg.nbot;
        snprintf(name, sizeof name, "%s_mlp_dense%d", top ? "top" : "bottom", (top ? l - m->cfg.nbot : l) + 1);
        TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", name), e));
    }
    return 0;
}

// ---- extras ----

static int wl_dump(void *m, const char *path, tk_err *e) { return tk_dlrm_dump_step(m, path, e); }
static int wl_prof_start(void *m, tk_err *e) {
    return tk_prof_start(((tk_dlrm *)m)->c, TK_DLRM_PROF_MAX, "dlrm", &((tk_dlrm *)m)->prof, e);
}
static int wl_prof_add(void *m, int keep, tk_err *e) { return tk_prof_add(((tk_dlrm *)m)->prof, ((tk_dlrm *)m)->c, keep, e); }
static json_t *wl_prof_json(const void *m) { return tk_prof_json(((const tk_dlrm *)m)->prof); }

static json_t *wl_result_extra(const void *m) {
    json_t *h = tk_dlrm_hybrid_json(m);
    return h ? json_pack("{s:o}", "hybrid_embedding", h) : NULL;
}

static const tk_wl_option options[] = {
    {.name = "hybrid-embedding", .key = "parallel.hybrid_embedding", .value = "true",
     .help = "(the default) train the tables' most used rows as a replica: several ranks hold it on every "
             "rank (all-reduced) and exchange only the rest; one rank runs the same step (implies --force-exchange)"},
    {.name = "no-hybrid-embedding", .key = "parallel.hybrid_embedding", .value = "false",
     .help = "the plain step: every row through the sparse update (one rank) or the all-to-all exchange "
             "(several ranks); --dump-step needs it"},
    {.name = "hybrid-max-rows", .has_arg = 1, .key = "parallel.hybrid_max_rows", .lo = 0, .hi = 1 << 30, .arg = "N",
     .help = "... at most N replicated rows (default 1048576)"},
    {.name = "hybrid-stat-batches", .has_arg = 1, .key = "parallel.hybrid_stat_batches", .lo = 1, .hi = 100000,
     .arg = "N", .help = "... chosen from the first N training batches (default 20)"},
    {.name = "hybrid-capacity", .has_arg = 1, .key = "parallel.hybrid_capacity", .lo = 0, .hi = INT32_MAX,
     .word = "auto", .arg = "auto|N",
     .help = "... vectors a rank pair of the fixed-size exchange (CUDA graphs; a batch that does not fit goes "
             "eagerly, exact); 0: none"},
    {.name = "force-exchange", .key = "parallel.force_exchange", .value = "true",
     .help = "one rank: run the several-ranks step anyway (the exchange is a copy, collectives over a world of "
             "1): with --no-hybrid-embedding that code's check on one GPU; slower"},
    {0}};

const tk_workload tk_workload_dlrm = {
    .version = TK_WORKLOAD_V1,
    .name = "dlrm",
    .summary = "DLRM (MLPerf Training v1.x recommendation, Criteo Terabyte), target AUC",
    .metric = "auc",
    .precisions = tk_dlrm_precisions,
    .options = options,
    .sections = tk_dlrm_sections,
    .config = wl_config,
    .config_free = wl_config_free,
    .wants_comm = wl_wants_comm,
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
    .staged = wl_staged,
    .use = wl_use,
    .prepare = wl_prepare,
    .step = wl_step,
    .own_grad_reduce = 1,
    .after_update = wl_after_update,
    .graph_key = wl_graph_key,
    .graph_per_slot = wl_graph_per_slot,
    .step_queued = wl_step_queued,
    .evalset_load = wl_evalset_load,
    .evalset_count = wl_evalset_count,
    .evalset_free = wl_evalset_free,
    .evaluate = wl_evaluate,
    .mllog_hparams = wl_mllog_hparams,
    .mllog_weights = wl_mllog_weights,
    .dump_step = wl_dump,
    .profile_start = wl_prof_start,
    .profile_add = wl_prof_add,
    .profile_json = wl_prof_json,
    .result_extra = wl_result_extra,
};
