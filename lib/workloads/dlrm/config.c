// DLRM configuration: the "model", "data" and "parallel" sections (config.h).
#include "workloads/dlrm/config.h"

#include <stdlib.h>
#include <string.h>

#include "interaction.h"

const char *const tk_dlrm_precisions[] = {"fp32", "tf32", "bf16", NULL};

const char *const tk_dlrm_sections[] = {"parallel", NULL};

static int get_widths(json_t *root, const char *file, const char *p, int *w, int *n, tk_err *e) {
    json_t *a = tk_cfg_get(root, p);
    if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > TK_DLRM_MAX_LAYERS)
        return tk_cfg_bad(e, file, p, "expected an array of 1 to 8 layer widths");
    *n = (int)json_array_size(a);
    for (int i = 0; i < *n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 65536)
            return tk_cfg_bad(e, file, p, "layer widths must be integers in [1, 65536]");
        w[i] = (int)json_integer_value(x);
    }
    return 0;
}

int tk_dlrm_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                         tk_err *e) {
    static const char *const model_keys[] = {"num_dense", "embedding_dim", "bottom_mlp", "top_mlp",
                                             "interaction_width", "table_sizes", "max_table_rows", "table_dtype",
                                             "precision", NULL};
    static const char *const data_keys[] = {"train_samples", "eval_samples", "max_ind_range", "note", NULL};
    static const char *const par_keys[] = {"hybrid_embedding", "hybrid_max_rows", "hybrid_stat_batches",
                                           "hybrid_capacity", "force_exchange", NULL};
    tk_dlrm_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = 0;
    int64_t v;
    if ((rc = tk_cfg_keys(root, path, "model", model_keys, e)) || (rc = tk_cfg_keys(root, path, "data", data_keys, e)) ||
        (rc = tk_cfg_keys(root, path, "parallel", par_keys, e)))
        goto out;
#define INT(p, lo, hi, dst) do { if ((rc = tk_cfg_int(root, path, p, lo, hi, &v, e))) goto out; dst = v; } while (0)
    INT("model.num_dense", 1, 1024, cfg->num_dense);
    INT("model.embedding_dim", 1, 4096, cfg->emb_dim);
    if ((rc = get_widths(root, path, "model.bottom_mlp", cfg->bot, &cfg->nbot, e))) goto out;
    if ((rc = get_widths(root, path, "model.top_mlp", cfg->top, &cfg->ntop, e))) goto out;
    int64_t cap = 0;
    INT("model.max_table_rows", 0, (int64_t)1 << 40, cap);
    json_t *ts = tk_cfg_get(root, "model.table_sizes");
    json_t *sizes = NULL;
    if (json_is_string(ts) && strcmp(json_string_value(ts), "data") == 0) {
        json_t *meta = data_meta ? json_loads(data_meta, 0, NULL) : NULL;
        json_t *card = json_object_get(meta, "cardinalities");
        if (!json_is_array(card)) {
            json_decref(meta);
            rc = tk_cfg_bad(e, path, "model.table_sizes",
                         "\"data\" needs the training data's schema meta \"cardinalities\" (from prep criteo)");
            goto out;
        }
        sizes = json_incref(card);
        json_decref(meta);
    } else if (json_is_array(ts)) {
        sizes = json_incref(ts);
    } else {
        rc = tk_cfg_bad(e, path, "model.table_sizes", "expected an array of table sizes or \"data\"");
        goto out;
    }
    cfg->num_tables = (int)json_array_size(sizes);
    if (cfg->num_tables < 1 || cfg->num_tables > TK_DLRM_MAX_TABLES) {
        json_decref(sizes);
        rc = tk_cfg_bad(e, path, "model.table_sizes", "expected 1 to 64 tables");
        goto out;
    }
    json_t *resolved = json_array();
    for (int t = 0; t < cfg->num_tables; t++) {
        json_t *x = json_array_get(sizes, t);
        if (!json_is_integer(x) || json_integer_value(x) < 1) {
            json_decref(sizes);
            json_decref(resolved);
            rc = tk_cfg_bad(e, path, "model.table_sizes", "table sizes must be positive integers");
            goto out;
        }
        int64_t r = json_integer_value(x);
        if (cap > 0 && r > cap) r = cap;
        cfg->table_rows[t] = r;
        json_array_append_new(resolved, json_integer(r));
    }
    json_decref(sizes);
    json_object_set_new(json_object_get(root, "model"), "table_sizes", resolved);
    int minw = tk_interaction_width(cfg->num_tables, cfg->emb_dim);
    json_t *iw = tk_cfg_get(root, "model.interaction_width");
    if (!iw || json_is_null(iw)) json_object_set_new(json_object_get(root, "model"), "interaction_width", json_integer(minw));
    INT("model.interaction_width", minw, minw + 1024, cfg->interaction_width);
    json_t *dt = tk_cfg_get(root, "model.table_dtype");
    const char *dts = json_string_value(dt);
    if (dts && strcmp(dts, "f32") == 0) cfg->table_dtype = TK_F32;
    else if (dts && strcmp(dts, "bf16") == 0) cfg->table_dtype = TK_BF16;
    else {
        rc = tk_cfg_bad(e, path, "model.table_dtype", "expected \"f32\" or \"bf16\"");
        goto out;
    }
    // "precision": what the cuda backend computes the MLPs in; absent = "fp32". (The cpu
    // backend, the reference, computes in fp32: it accepts fp32 and tf32, and tk_dlrm_create
    // refuses bf16 there.)
    tk_precision pr;
    if ((rc = tk_cfg_precision(root, path, tk_dlrm_precisions, &pr, e))) goto out;
    cfg->tf32 = pr == TK_PRECISION_TF32;
    cfg->bf16 = pr == TK_PRECISION_BF16;
    cfg->batch = (int)run->batch;
    // "parallel": the hybrid embedding and the exchange step on one rank (train-step's
    // --[no-]hybrid-embedding, --hybrid-max-rows, --hybrid-stat-batches, --hybrid-capacity,
    // --force-exchange). The hybrid embedding is the default on every backend and world size: the
    // fastest correct step on one GPU (1.42x the plain step on an H100, contrib/bench/NOTES.md)
    // and on several (85% less exchange traffic on 2 ranks); on the cpu it costs what the plain
    // step does (train-step(1)), so CI runs the path GPUs run.
    cfg->hybrid = 1;
    cfg->hybrid_max_rows = 1 << 20;
    cfg->hybrid_stat_batches = 20;
    cfg->hybrid_capacity = -1;
    if ((rc = tk_cfg_bool_opt(root, path, "parallel.hybrid_embedding", &cfg->hybrid, e)) ||
        (rc = tk_cfg_int_opt(root, path, "parallel.hybrid_max_rows", 0, 1 << 30, &cfg->hybrid_max_rows, e)) ||
        (rc = tk_cfg_int_opt(root, path, "parallel.hybrid_stat_batches", 1, 100000, &cfg->hybrid_stat_batches, e)) ||
        (rc = tk_cfg_bool_opt(root, path, "parallel.force_exchange", &cfg->force_exchange, e)))
        goto out;
    json_t *hcap = tk_cfg_get(root, "parallel.hybrid_capacity");
    if (!json_is_string(hcap) || strcmp(json_string_value(hcap), "auto") != 0)
        if ((rc = tk_cfg_int_opt(root, path, "parallel.hybrid_capacity", 0, INT32_MAX, &cfg->hybrid_capacity, e)))
            goto out;
#undef INT
out:
    if (rc) free(cfg);
    else *out = cfg;
    return rc;
}

void tk_dlrm_config_free(void *cfg) { free(cfg); }

// One rank: the hybrid embedding (the default) runs in the exchange step over a world of 1 (its
// replica's segment sums and dense update beat the sorted sparse update of the hot rows: 1.42x
// the plain one-rank step on an H100, contrib/bench/NOTES.md), so one command serves every GPU
// count. --no-hybrid-embedding without --force-exchange: the plain one-rank step, no communicator.
int tk_dlrm_wants_comm(const void *cfg) {
    const tk_dlrm_config *c = cfg;
    return c->force_exchange || c->hybrid;
}
