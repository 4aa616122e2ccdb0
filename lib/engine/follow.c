// Evaluation of checkpoints out of the training process, both halves of the directory protocol
// (follow.h).
#include "engine/follow.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "core/afile.h"
#include "core/json_text.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "engine/ckpt.h"
#include "engine/instance.h"

struct tk_evaluator {
    tk_ctx *c;
    tk_eval_opts o;
    tk_instance I;
    int made;
    void *es;
    char key[48];           // the model's: the configuration's hash and the training's ranks
    int cfg_ema;            // the model's configuration has optimizer.ema > 0
};

int tk_evaluator_create(tk_evaluator **out, tk_ctx *c, const tk_eval_opts *o, tk_err *e) {
    tk_evaluator *ev = calloc(1, sizeof *ev);
    if (!ev) return tk_err_set(e, TK_EIO, "out of host memory");
    ev->c = c;
    ev->o = *o;
    *out = ev;
    return 0;
}

static void drop_model(tk_evaluator *ev) {
    if (ev->es) ev->I.wl->evalset_free(ev->I.model, ev->es);
    ev->es = NULL;
    if (ev->made) tk_instance_destroy(&ev->I);
    ev->made = 0;
}

void tk_evaluator_destroy(tk_evaluator *ev) {
    if (!ev) return;
    drop_model(ev);
    free(ev);
}

// The model's batch: one training rank's (the global batch / the metadata's world_size), what fit
// one device, not the whole global batch a model of one rank would hold; a file without
// world_size (an older trainkit's) keeps the global batch. *set gets the override (empty: none).
static int rank_batch(json_t *root, const tk_ckpt_meta *m, const char *path, char *set, size_t n, tk_err *e) {
    *set = 0;
    if (m->world_size < 0 || m->world_size == 1) return 0;
    const json_int_t gb = json_integer_value(tk_cfg_get(root, "train.global_batch_size"));
    if (m->world_size == 0 || gb % m->world_size) {
        tk_err_set(e, TK_EDATA, "checkpoint metadata 'world_size': %lld ranks do not divide the global batch %lld",
                   (long long)m->world_size, (long long)gb);
        return tk_err_where(e, "%s", path);
    }
    snprintf(set, n, "train.global_batch_size=%lld", (long long)(gb / m->world_size));
    return 0;
}

// Whether the weights to load are f's moving average (follow.h tk_eval_weights): auto follows the
// configuration, as the in-process evaluation did (engine.c swaps the average in around it when
// optimizer.ema > 0). Asked for, the average must be there: TK_EDATA naming the file.
static int pick_ema(const tk_evaluator *ev, const tk_st_file *f, const char *path, int *ema, tk_err *e) {
    *ema = ev->o.weights == TK_EVAL_WEIGHTS_EMA || (ev->o.weights == TK_EVAL_WEIGHTS_AUTO && ev->cfg_ema);
    if (!*ema) return 0;
    for (int i = 0; i < f->n; i++)
        if (strncmp(f->t[i].name, "ema.", 4) == 0) return 0;
    tk_err_set(e, TK_EDATA, "the checkpoint has no moving average of the weights (no ema.NAME tensors)%s",
               ev->cfg_ema ? "" : ": it was trained with optimizer.ema 0");
    tk_err_where(e, "%s", path);
    return tk_err_hint(e, "--weights raw evaluates the trained weights");
}

// Makes (or keeps) the model for the checkpoint's configuration and loads its weights (*ema: the
// moving average was loaded in their place); *m gets its metadata's counts (its strings die with
// the file).
static int load(tk_evaluator *ev, const char *path, tk_ckpt_meta *m, int *ema, tk_err *e) {
    tk_st_file *f;
    TRY(tk_st_open(&f, path, e));
    if (tk_ckpt_meta_parse(f->meta, path, m, e)) {
        tk_st_close(f);
        return TK_EDATA;
    }
    const char *cfg_text = m->config, *hash = m->config_hash;
    if (!cfg_text || !hash) {
        tk_st_close(f);
        tk_err_set(e, TK_EDATA, "the metadata lacks 'config' or 'config_hash' (not a train-step checkpoint)");
        tk_err_where(e, "%s: offset 8", path);
        return TK_EDATA;
    }
    int rc = 0;
    char key[sizeof ev->key];
    snprintf(key, sizeof key, "%s/%lld", hash, (long long)m->world_size);
    if (!ev->made || strcmp(key, ev->key) != 0) {
        drop_model(ev);
        json_error_t je;
        json_t *root = json_loads(cfg_text, 0, &je);
        char set[64], *sets[] = {set};
        if (!root) {
            rc = tk_err_set(e, TK_EDATA, "metadata 'config': %s", je.text);
            tk_err_where(e, "%s", path);
        } else if (!(rc = rank_batch(root, m, path, set, sizeof set, e))) {
            ev->cfg_ema = json_number_value(tk_cfg_get(root, "optimizer.ema")) > 0;
            rc = tk_instance_config(&ev->I, root, path, sets, *set ? 1 : 0, NULL, e);
            ev->made = 1; // (destroyed as a whole, whatever failed)
        }
        json_decref(root);
        if (!rc) rc = tk_instance_create(&ev->I, ev->c, NULL, 0, e);
        if (!rc) rc = ev->I.wl->evalset_load(ev->I.model, ev->o.eval, ev->o.neval, &ev->es, e);
        if (!rc) snprintf(ev->key, sizeof ev->key, "%s", key);
        if (rc) drop_model(ev);
    }
    if (!rc) rc = pick_ema(ev, f, path, ema, e);
    tk_st_close(f);
    m->format = m->workload = m->config_hash = m->rng = m->config = NULL; // (the file's)
    int verified = 1, flags = TK_CKPT_MODEL_ONLY | (*ema ? TK_CKPT_EMA : 0);
    if (!rc) rc = tk_instance_load(&ev->I, path, flags, NULL, &verified, e);
    if (!rc && !verified && ev->o.note) {
        char msg[4400];
        snprintf(msg, sizeof msg, "%s: no tensor checksums (a file of another writer): loaded unverified", path);
        ev->o.note(ev->o.note_arg, msg);
    }
    return rc;
}

int tk_evaluator_run(tk_evaluator *ev, const char *path, const char *name, json_t **res, tk_err *e) {
    tk_ckpt_meta m;
    double t0 = tk_now(), v;
    int ema = 0;
    TRY(load(ev, path, &m, &ema, e));
    const char *metric = ev->I.wl->metric;
    TRY(ev->I.wl->evaluate(ev->I.model, ev->es, &v, e));
    // JSON has no NaN: an undefined metric (the AUC of a one-class eval set) is null.
    *res = json_pack("{s:s, s:s, s:s, s:I, s:I}", "type", "eval", "metric", metric, "checkpoint", name, "step",
                     (json_int_t)m.step, "samples", (json_int_t)m.samples_seen);
    json_object_set_new(*res, metric, isfinite(v) ? json_real(v) : json_null());
    json_object_set_new(*res, "eval_samples", json_integer(ev->I.wl->evalset_count(ev->es)));
    json_object_set_new(*res, "batch", json_integer(ev->I.run.batch));
    json_object_set_new(*res, "weights", json_string(ema ? "ema" : "raw"));
    json_object_set_new(*res, "eval_s", json_real(tk_now() - t0));
    if (ev->o.has_target) {
        int reached = tk_wl_reaches(ev->I.wl, v, ev->o.target);
        json_object_set_new(*res, "target", json_real(ev->o.target));
        json_object_set_new(*res, "reached", json_boolean(reached));
    }
    return 0;
}

// ---- --follow ----

typedef struct {
    long long step;
    char name[256];
} entry;

static int cmp_entry(const void *a, const void *b) {
    const entry *x = a, *y = b;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int exists(const char *dir, const char *name) {
    char p[4400];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return stat(p, &st) == 0;
}

// Checkpoints in dir without a result yet, oldest step first. Temporary files of an atomic
// write ("NAME.tmp.PID.N") and hidden files are never picked up.
static int scan(const char *dir, entry **out, int *n, tk_err *e) {
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return tk_err_errno(e, errno, "%s: cannot open directory", dir);
    int cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        size_t l = strlen(nm);
        if (nm[0] == '.' || strstr(nm, ".tmp.") || l < 12 || l >= 240 || strcmp(nm + l - 12, ".safetensors") != 0)
            continue;
        char res[300];
        snprintf(res, sizeof res, "%.*s.eval.json", (int)(l - 12), nm);
        if (exists(dir, res)) continue;
        if (*n == cap) {
            cap = cap * 2 + 16;
            entry *ne = realloc(*out, (size_t)cap * sizeof *ne);
            if (!ne) {
                closedir(d);
                return tk_err_set(e, TK_EIO, "out of memory");
            }
            *out = ne;
        }
        entry *en = &(*out)[(*n)++];
        snprintf(en->name, sizeof en->name, "%s", nm);
        en->step = sscanf(nm, "step-%lld", &en->step) == 1 ? en->step : -1;
    }
    closedir(d);
    qsort(*out, (size_t)*n, sizeof **out, cmp_entry);
    return 0;
}

int tk_follow(tk_evaluator *ev, const char *dir, double poll, double timeout, FILE *out, tk_err *e) {
    entry *list = NULL;
    int n = 0, rc = 0;
    double last_new = tk_now();
    // A follower killed mid-write left temporaries of results behind: ours to remove.
    if ((rc = tk_afile_remove_stale(dir, ".eval.json", NULL, e))) return rc;
    for (;;) {
        if ((rc = scan(dir, &list, &n, e))) break;
        if (n == 0) {
            if (exists(dir, "STOP")) break;
            if (timeout > 0 && tk_now() - last_new > timeout) {
                rc = tk_err_set(e, TK_NO, "%s: no new checkpoint for %g s", dir, timeout);
                break;
            }
            usleep((useconds_t)(poll * 1e6));
            continue;
        }
        last_new = tk_now();
        char path[4400], res_path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, list[0].name);
        json_t *res = NULL;
        if ((rc = tk_evaluator_run(ev, path, list[0].name, &res, e))) break;
        snprintf(res_path, sizeof res_path, "%s/%.*s.eval.json", dir, (int)(strlen(list[0].name) - 12), list[0].name);
        // The result file is written atomically: train-step never sees half a result.
        tk_afile af;
        char *text = tk_json_dumps_compact(res);
        rc = text ? tk_afile_open(&af, res_path, e) : tk_err_set(e, TK_EINTERNAL, "cannot serialize");
        if (!rc) {
            rc = tk_write_all(af.fp, text, strlen(text), res_path, e);
            if (!rc) rc = tk_write_all(af.fp, "\n", 1, res_path, e);
            if (!rc) rc = tk_afile_commit(&af, e);
            else tk_afile_abort(&af);
        }
        free(text);
        if (!rc) rc = tk_jsonl_emit(out, res, e);
        else json_decref(res);
        if (rc) break;
    }
    free(list);
    return rc;
}

int tk_follow_stop(const char *dir, tk_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/STOP", dir);
    tk_afile f;
    TRY(tk_afile_open(&f, path, e));
    return tk_afile_commit(&f, e);
}

// ---- the trainer's half ----

int tk_eval_dir_push(tk_eval_dir *d, int64_t step, tk_err *e) {
    if (d->npend == d->cap) {
        int64_t *np = realloc(d->pend, (size_t)(d->cap * 2 + 16) * sizeof *np);
        if (!np) return tk_err_set(e, TK_EIO, "out of host memory");
        d->pend = np;
        d->cap = d->cap * 2 + 16;
    }
    d->pend[d->npend++] = step;
    return 0;
}

int tk_eval_dir_next(tk_eval_dir *d, double wait_s, int64_t *step, json_t **res, tk_err *e) {
    *res = NULL;
    if (d->npend == 0) return 0;
    int64_t s = d->pend[0];
    char path[4200];
    snprintf(path, sizeof path, "%s/step-%lld.eval.json", d->dir, (long long)s);
    struct stat st;
    if (stat(path, &st) != 0) {
        if (wait_s <= 0) return 0;
        double t0 = tk_now();
        while (stat(path, &st) != 0 && tk_now() - t0 < wait_s) usleep(50000);
        if (stat(path, &st) != 0) {
            tk_err_set(e, TK_EIO, "no evaluation result after %.0f s", wait_s);
            tk_err_where(e, "%s", path);
            return tk_err_hint(e, "is `evaluate --follow %s` running?", d->dir);
        }
    }
    json_error_t je;
    json_t *r = json_load_file(path, 0, &je);
    if (!json_is_number(json_object_get(r, d->metric))) {
        json_decref(r);
        if (r) tk_err_set(e, TK_EDATA, "$.%s: expected a number", d->metric);
        else tk_err_set(e, TK_EDATA, "%s", je.text);
        tk_err_where(e, "%s: line %d", path, r ? 1 : je.line);
        return TK_EDATA;
    }
    memmove(d->pend, d->pend + 1, (size_t)--d->npend * sizeof *d->pend);
    *step = s;
    *res = r;
    return 0;
}

void tk_eval_dir_free(tk_eval_dir *d) {
    free(d->pend);
    d->pend = NULL;
    d->npend = d->cap = 0;
}
