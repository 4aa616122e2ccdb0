// DLRM configuration: share/workloads/dlrm/*.json plus "--set key=value" overrides (train-step(1)).
#include <stdlib.h>
#include <string.h>

#include "interaction.h"
#include "workloads/dlrm.h"

static int cfg_bad(tk_err *e, const char *file, const char *jpath, const char *what) {
    tk_err_set(e, TK_EDATA, "%s", what);
    tk_err_where(e, "%s: $.%s", file, jpath);
    return TK_EDATA;
}

// The member at a dotted path ("optimizer.base_lr"), or NULL.
static json_t *get_path(json_t *root, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *v = root;
    for (char *save, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_object_get(v, k);
    return v;
}

static int apply_override(json_t *root, const char *kv, tk_err *e) {
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return tk_err_set(e, TK_EUSAGE, "--set: expected KEY=VALUE, got '%s'", kv);
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    char *dot = strrchr(key, '.');
    json_t *parent = root;
    const char *leaf = key;
    if (dot) {
        *dot = 0;
        parent = get_path(root, key);
        leaf = dot + 1;
    }
    if (!json_is_object(parent) || !json_object_get(parent, leaf)) {
        if (dot) *dot = '.';
        return tk_err_set(e, TK_EUSAGE, "--set: unknown configuration key '%s'", key);
    }
    json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
    if (!v) v = json_string(eq + 1);
    json_object_set_new(parent, leaf, v);
    return 0;
}

static int get_int(json_t *root, const char *file, const char *p, int64_t lo, int64_t hi,
                   int64_t *out, tk_err *e) {
    json_t *v = get_path(root, p);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "expected an integer in [%lld, %lld]", (long long)lo, (long long)hi);
        return cfg_bad(e, file, p, msg);
    }
    *out = json_integer_value(v);
    return 0;
}

static int get_num(json_t *root, const char *file, const char *p, double lo, double hi,
                   double *out, tk_err *e) {
    json_t *v = get_path(root, p);
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        char msg[160];
        snprintf(msg, sizeof msg, "expected a number in [%g, %g]", lo, hi);
        return cfg_bad(e, file, p, msg);
    }
    *out = json_number_value(v);
    return 0;
}

static int get_widths(json_t *root, const char *file, const char *p, int *w, int *n, tk_err *e) {
    json_t *a = get_path(root, p);
    if (!json_is_array(a) || json_array_size(a) < 1 || json_array_size(a) > TK_DLRM_MAX_LAYERS)
        return cfg_bad(e, file, p, "expected an array of 1 to 8 layer widths");
    *n = (int)json_array_size(a);
    for (int i = 0; i < *n; i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_integer(x) || json_integer_value(x) < 1 || json_integer_value(x) > 65536)
            return cfg_bad(e, file, p, "layer widths must be integers in [1, 65536]");
        w[i] = (int)json_integer_value(x);
    }
    return 0;
}

int tk_dlrm_config_load(const char *path, char *const *overrides, int noverrides,
                        const char *data_meta, tk_dlrm_config *cfg, json_t **effective, tk_err *e) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) {
        memset(cfg, 0, sizeof *cfg);
        tk_err_set(e, TK_EDATA, "%s", je.text);
        if (je.line > 0) tk_err_where(e, "%s: line %d", path, je.line);
        else tk_err_where(e, "%s", path);
        return TK_EDATA;
    }
    int rc = tk_dlrm_config_from_json(root, path, overrides, noverrides, data_meta, cfg, effective, e);
    json_decref(root);
    return rc;
}

int tk_dlrm_config_from_json(json_t *root, const char *path, char *const *overrides,
                             int noverrides, const char *data_meta, tk_dlrm_config *cfg,
                             json_t **effective, tk_err *e) {
    memset(cfg, 0, sizeof *cfg);
    if (effective) *effective = NULL;
    int rc = 0;
    int64_t v;
    double d;
    for (int i = 0; !rc && i < noverrides; i++) rc = apply_override(root, overrides[i], e);
    if (rc) goto out;
    json_t *wl = json_object_get(root, "workload");
    if (!json_is_string(wl) || strcmp(json_string_value(wl), "dlrm") != 0) {
        rc = cfg_bad(e, path, "workload", "expected \"dlrm\"");
        goto out;
    }
#define INT(p, lo, hi, dst) do { if ((rc = get_int(root, path, p, lo, hi, &v, e))) goto out; dst = v; } while (0)
#define NUM(p, lo, hi, dst) do { if ((rc = get_num(root, path, p, lo, hi, &d, e))) goto out; dst = d; } while (0)
    INT("model.num_dense", 1, 1024, cfg->num_dense);
    INT("model.embedding_dim", 1, 4096, cfg->emb_dim);
    if ((rc = get_widths(root, path, "model.bottom_mlp", cfg->bot, &cfg->nbot, e))) goto out;
    if ((rc = get_widths(root, path, "model.top_mlp", cfg->top, &cfg->ntop, e))) goto out;
    int64_t cap = 0;
    INT("model.max_table_rows", 0, (int64_t)1 << 40, cap);
    json_t *ts = get_path(root, "model.table_sizes");
    json_t *sizes = NULL;
    if (json_is_string(ts) && strcmp(json_string_value(ts), "data") == 0) {
        json_t *meta = data_meta ? json_loads(data_meta, 0, NULL) : NULL;
        json_t *card = json_object_get(meta, "cardinalities");
        if (!json_is_array(card)) {
            json_decref(meta);
            rc = cfg_bad(e, path, "model.table_sizes",
                         "\"data\" needs the training data's schema meta \"cardinalities\" (from prep criteo)");
            goto out;
        }
        sizes = json_incref(card);
        json_decref(meta);
    } else if (json_is_array(ts)) {
        sizes = json_incref(ts);
    } else {
        rc = cfg_bad(e, path, "model.table_sizes", "expected an array of table sizes or \"data\"");
        goto out;
    }
    cfg->num_tables = (int)json_array_size(sizes);
    if (cfg->num_tables < 1 || cfg->num_tables > TK_DLRM_MAX_TABLES) {
        json_decref(sizes);
        rc = cfg_bad(e, path, "model.table_sizes", "expected 1 to 64 tables");
        goto out;
    }
    json_t *resolved = json_array();
    for (int t = 0; t < cfg->num_tables; t++) {
        json_t *x = json_array_get(sizes, t);
        if (!json_is_integer(x) || json_integer_value(x) < 1) {
            json_decref(sizes);
            json_decref(resolved);
            rc = cfg_bad(e, path, "model.table_sizes", "table sizes must be positive integers");
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
    json_t *iw = get_path(root, "model.interaction_width");
    if (!iw || json_is_null(iw)) json_object_set_new(json_object_get(root, "model"), "interaction_width", json_integer(minw));
    INT("model.interaction_width", minw, minw + 1024, cfg->interaction_width);
    json_t *dt = get_path(root, "model.table_dtype");
    const char *dts = json_string_value(dt);
    if (dts && strcmp(dts, "f32") == 0) cfg->table_dtype = TK_F32;
    else if (dts && strcmp(dts, "bf16") == 0) cfg->table_dtype = TK_BF16;
    else {
        rc = cfg_bad(e, path, "model.table_dtype", "expected \"f32\" or \"bf16\"");
        goto out;
    }
    // "precision": what the cuda backend computes the MLPs in; absent = "fp32". (The cpu
    // backend, the reference, computes in fp32: it accepts fp32 and tf32, and tk_dlrm_create
    // refuses bf16 there.)
    json_t *pr = get_path(root, "model.precision");
    const char *prs = pr ? json_string_value(pr) : "fp32";
    cfg->tf32 = cfg->bf16 = 0;
    if (prs && strcmp(prs, "fp32") == 0) cfg->tf32 = 0;
    else if (prs && strcmp(prs, "tf32") == 0) cfg->tf32 = 1;
    else if (prs && strcmp(prs, "bf16") == 0) cfg->bf16 = 1;
    else {
        rc = cfg_bad(e, path, "model.precision", "expected \"fp32\", \"tf32\" or \"bf16\"");
        goto out;
    }
    INT("train.global_batch_size", 1, 1 << 24, cfg->batch);
    INT("train.max_epochs", 1, 1000, cfg->max_epochs);
    INT("train.evals_per_epoch", 1, 100000, cfg->evals_per_epoch);
    INT("train.seed", 0, INT64_MAX, cfg->seed);
    NUM("optimizer.base_lr", 0, 1e6, cfg->lr.base_lr);
    INT("optimizer.warmup_steps", 0, INT64_MAX, cfg->lr.warmup_steps);
    INT("optimizer.decay_start_step", 0, INT64_MAX, cfg->lr.decay_start);
    INT("optimizer.decay_steps", 0, INT64_MAX, cfg->lr.decay_steps);
    NUM("optimizer.poly_power", 0, 100, cfg->lr.power);
    NUM("optimizer.min_lr", 0, 1e6, cfg->lr.min_lr);
    NUM("target.auc", 0, 1, cfg->target_auc);
#undef INT
#undef NUM
out:
    if (!rc && effective) *effective = json_incref(root);
    return rc;
}

uint64_t tk_dlrm_config_hash(const json_t *effective) {
    // What determines the trajectory: the model, the optimizer, the batch and the seed (not the
    // number of epochs or the evaluation frequency, which a resumed run may change).
    json_t *train = json_object_get(effective, "train");
    json_t *o = json_pack("{s:O?, s:O?, s:O?, s:O?}", "model", json_object_get(effective, "model"),
                          "optimizer", json_object_get(effective, "optimizer"), "batch",
                          json_object_get(train, "global_batch_size"), "seed",
                          json_object_get(train, "seed"));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = s; p && *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    free(s);
    return h;
}
