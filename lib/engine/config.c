// Workload configuration files: loading, --set overrides, the engine's common sections, the
// trajectory hash, and the helpers every section parser uses (config.h).
#include "engine/config.h"

#include "engine/cfg.h"
#include "core/json_text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int tk_config_load(const char *path, json_t **root, tk_err *e) {
    json_error_t je;
    *root = json_load_file(path, 0, &je);
    if (*root) {
        if (json_is_object(*root)) return 0;
        json_decref(*root);
        *root = NULL;
        return tk_cfg_bad(e, path, "", "expected a JSON object");
    }
    FILE *f = fopen(path, "r");
    if (!f) return tk_err_errno(e, errno, "%s: cannot open", path);
    fclose(f);
    char msg[4 * JSON_ERROR_TEXT_LENGTH];
    tk_err_set(e, TK_EDATA, "%s", tk_json_err_text(msg, sizeof msg, &je));
    return tk_err_where(e, "%s: line %d", path, je.line);
}

int tk_config_override(json_t *root, const char *kv, const char *const *creatable, tk_err *e) {
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv) return tk_err_set(e, TK_EUSAGE, "--set: expected KEY=VALUE, got '%s'", kv);
    char key[256];
    snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
    char top[256];
    snprintf(top, sizeof top, "%s", key);
    char *tdot = strchr(top, '.');
    if (tdot) *tdot = 0;
    int create = tdot && tk_cfg_in_list(top, creatable);
    char *dot = strrchr(key, '.');
    json_t *parent = root;
    const char *leaf = key;
    if (dot) {
        *dot = 0;
        parent = tk_cfg_get(root, key);
        if (!parent && create && !strchr(key, '.')) { // a creatable section absent from the file
            parent = json_object();
            json_object_set_new(root, key, parent);
        }
        leaf = dot + 1;
    }
    if (!json_is_object(parent) || (!create && !json_object_get(parent, leaf))) {
        if (dot) *dot = '.';
        return tk_err_set(e, TK_EUSAGE, "--set: unknown configuration key '%s'", key);
    }
    json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
    if (!v) v = json_string(eq + 1);
    json_object_set_new(parent, leaf, v);
    return 0;
}

int tk_run_config_parse(json_t *root, const char *path, const char *workload, const char *metric,
                        const char *const *sections, tk_run_cfg *run, tk_err *e) {
    static const char *const top[] = {"workload", "name", "description", "model", "data", "synthetic",
                                      "train", "optimizer", "target", NULL};
    static const char *const train[] = {"global_batch_size", "max_epochs", "max_steps", "seed", "evals_per_epoch",
                                        "eval_every_samples", "eval_offset_samples", NULL};
    memset(run, 0, sizeof *run);
    json_t *wl = json_object_get(root, "workload");
    if (!json_is_string(wl) || strcmp(json_string_value(wl), workload) != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected \"%s\"", workload);
        return tk_cfg_bad(e, path, "workload", msg);
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) if (!tk_cfg_in_list(k, top) && !tk_cfg_in_list(k, sections)) {
        char msg[160];
        snprintf(msg, sizeof msg, "unknown key \"%s\"", k);
        return tk_cfg_bad(e, path, k, msg);
    }
    int64_t i;
    TRY(tk_cfg_keys(root, path, "train", train, e));
    TRY(tk_cfg_int(root, path, "train.global_batch_size", 1, 1 << 24, &run->batch, e));
    TRY(tk_cfg_int(root, path, "train.max_epochs", 1, 100000, &i, e));
    run->max_epochs = (int)i;
    TRY(tk_cfg_int_opt(root, path, "train.max_steps", 1, INT64_MAX, &run->max_steps, e));
    TRY(tk_cfg_int(root, path, "train.seed", 0, INT64_MAX, &i, e));
    run->seed = (uint64_t)i;
    i = 0;
    TRY(tk_cfg_int_opt(root, path, "train.evals_per_epoch", 1, 100000, &i, e));
    run->evals_per_epoch = (int)i;
    TRY(tk_cfg_int_opt(root, path, "train.eval_every_samples", 1, INT64_MAX, &run->eval_every_samples, e));
    TRY(tk_cfg_int_opt(root, path, "train.eval_offset_samples", 0, INT64_MAX, &run->eval_offset_samples, e));
    if (!run->evals_per_epoch == !run->eval_every_samples)
        return tk_cfg_bad(e, path, "train", "give one of evals_per_epoch or eval_every_samples");
    // "target": {"metric": NAME, NAME: value}
    json_t *t = json_object_get(root, "target");
    const char *m = json_string_value(json_object_get(t, "metric"));
    if (!m || strcmp(m, metric) != 0) {
        char msg[96];
        snprintf(msg, sizeof msg, "expected \"%s\"", metric);
        return tk_cfg_bad(e, path, "target.metric", msg);
    }
    snprintf(run->metric, sizeof run->metric, "%s", metric);
    const char *const tkeys[] = {"metric", metric, NULL};
    TRY(tk_cfg_keys(root, path, "target", tkeys, e));
    char tp[64];
    snprintf(tp, sizeof tp, "target.%s", metric);
    return tk_cfg_num(root, path, tp, -1e300, 1e300, &run->target, e);
}

uint64_t tk_config_hash(const json_t *effective) {
    json_t *train = json_object_get(effective, "train");
    json_t *o = json_pack("{s:O?, s:O?, s:O?, s:O?}", "model", json_object_get(effective, "model"), "optimizer",
                          json_object_get(effective, "optimizer"), "batch", json_object_get(train, "global_batch_size"),
                          "seed", json_object_get(train, "seed"));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    uint64_t h = 1469598103934665603ull;
    for (const char *p = s; p && *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
    free(s);
    return h;
}
