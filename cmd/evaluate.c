// evaluate: AUC of a DLRM checkpoint on eval shards, once (--checkpoint) or for every checkpoint
// that appears in a directory (--follow DIR, the out-of-process evaluator of train-step
// --eval-dir). See man/man1/evaluate.1 for the protocol.
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/safetensors.h"
#include "core/afile.h"
#include "core/cli.h"
#include "core/json_text.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "workloads/dlrm.h"

static const char *prog = "evaluate";
static const char *usage =
    "usage: evaluate --checkpoint CKPT --eval PATH... [--target AUC] [--backend B]\n"
    "       evaluate --follow DIR --eval PATH... [--target AUC] [--poll SEC] [--timeout SEC]\n";

#define MAX_PATHS 256

typedef struct {
    char *eval[MAX_PATHS];
    int neval;
    const char *ckpt, *follow, *backend;
    double target, poll, timeout;
    int has_target;
} options;

typedef struct {
    tk_ctx *c;
    tk_dlrm *m;
    tk_dlrm_evalset *es;
    char cfg_hash[32];
} evaluator;

static void help(void) {
    printf("%s", usage);
    printf("\nEvaluate DLRM checkpoints (exact ROC AUC on the eval shards); JSON Lines on stdout.\n\n"
           "  -k, --checkpoint CKPT   evaluate one checkpoint\n"
           "  -f, --follow DIR        evaluate each new DIR/*.safetensors, write DIR/NAME.eval.json;\n"
           "                          end when DIR/STOP exists and nothing is left to evaluate\n"
           "  -e, --eval PATH         evaluation shards (files or directories; repeatable)\n"
           "      --target AUC        report \"reached\"; --checkpoint exits 1 below the target\n"
           "  -b, --backend B         cpu, cuda or auto (default auto)\n"
           "      --poll SEC          --follow: directory poll interval (default 0.2)\n"
           "      --timeout SEC       --follow: give up after SEC without a new checkpoint (exit 1;\n"
           "                          default 0 = wait for STOP)\n"
           "  -h, --help              this help\n"
           "  -V, --version           versions of trainkit, CUDA, cuDNN, NCCL\n"
           "\nExit status: 0 ok (target reached, when given), 1 not reached or timed out, 2 usage,\n"
           "3 bad checkpoint or data, 4 I/O error, 5 device error, 70 internal error.\n");
}

// Builds (or reuses) the model for the checkpoint's configuration and loads its weights.
static int load(evaluator *ev, const options *o, const char *path, json_t **meta, tk_err *e) {
    tk_st_file *f;
    TRY(tk_st_open(&f, path, e));
    const char *cfg_text = tk_st_meta(f, "config"), *hash = tk_st_meta(f, "config_hash");
    if (!cfg_text || !hash) {
        tk_st_close(f);
        tk_err_set(e, TK_EDATA, "the metadata lacks 'config' or 'config_hash' (not a train-step checkpoint)");
        tk_err_where(e, "%s: offset 8", path);
        return TK_EDATA;
    }
    int rc = 0;
    if (!ev->m || strcmp(hash, ev->cfg_hash) != 0) {
        tk_dlrm_evalset_free(ev->m, ev->es);
        tk_dlrm_destroy(ev->m);
        ev->es = NULL;
        ev->m = NULL;
        json_error_t je;
        json_t *root = json_loads(cfg_text, 0, &je);
        tk_dlrm_config cfg;
        if (!root) {
            rc = tk_err_set(e, TK_EDATA, "metadata 'config': %s", je.text);
            tk_err_where(e, "%s", path);
        } else {
            rc = tk_dlrm_config_from_json(root, path, NULL, 0, NULL, &cfg, NULL, e);
            json_decref(root);
        }
        if (!rc) rc = tk_dlrm_create(&ev->m, ev->c, &cfg, e);
        if (!rc) rc = tk_dlrm_evalset_load(ev->m, o->eval, o->neval, &ev->es, e);
        if (!rc) snprintf(ev->cfg_hash, sizeof ev->cfg_hash, "%s", hash);
    }
    tk_st_close(f);
    if (!rc) rc = tk_dlrm_load(ev->m, path, meta, e);
    return rc;
}

// Evaluates one checkpoint; *res gets the result object.
static int eval_one(evaluator *ev, const options *o, const char *path, const char *name,
                    json_t **res, tk_err *e) {
    json_t *meta = NULL;
    double t0 = tk_now(), auc;
    TRY(load(ev, o, path, &meta, e));
    int rc = tk_dlrm_evaluate(ev->m, ev->es, &auc, e);
    if (rc) {
        json_decref(meta);
        return rc;
    }
    const char *st = json_string_value(json_object_get(meta, "step"));
    const char *sa = json_string_value(json_object_get(meta, "samples_seen"));
    // JSON has no NaN: the AUC of a one-class eval set is null.
    *res = json_pack("{s:s, s:s, s:s, s:I, s:I, s:o, s:I, s:f}", "type", "eval", "metric", "auc",
                     "checkpoint", name, "step", (json_int_t)(st ? atoll(st) : -1), "samples",
                     (json_int_t)(sa ? atoll(sa) : -1), "auc",
                     isfinite(auc) ? json_real(auc) : json_null(), "eval_samples",
                     (json_int_t)ev->es->n, "eval_s", tk_now() - t0);
    if (o->has_target) {
        json_object_set_new(*res, "target", json_real(o->target));
        json_object_set_new(*res, "reached", json_boolean(auc >= o->target));
    }
    json_decref(meta);
    return 0;
}

// ---- --follow ----

typedef struct { long long step; char name[256]; } entry;

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
        if (nm[0] == '.' || strstr(nm, ".tmp.") || l < 12 || l >= 240 ||
            strcmp(nm + l - 12, ".safetensors") != 0)
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

static int follow(evaluator *ev, const options *o, tk_err *e) {
    entry *list = NULL;
    int n = 0, rc = 0;
    double last_new = tk_now();
    for (;;) {
        if ((rc = scan(o->follow, &list, &n, e))) break;
        if (n == 0) {
            if (exists(o->follow, "STOP")) break;
            if (o->timeout > 0 && tk_now() - last_new > o->timeout) {
                rc = tk_err_set(e, TK_NO, "%s: no new checkpoint for %g s", o->follow, o->timeout);
                break;
            }
            usleep((useconds_t)(o->poll * 1e6));
            continue;
        }
        last_new = tk_now();
        char path[4400], out[4400];
        snprintf(path, sizeof path, "%s/%s", o->follow, list[0].name);
        json_t *res = NULL;
        if ((rc = eval_one(ev, o, path, list[0].name, &res, e))) break;
        snprintf(out, sizeof out, "%s/%.*s.eval.json", o->follow,
                 (int)(strlen(list[0].name) - 12), list[0].name);
        // The result file is written atomically: train-step never sees half a result.
        tk_afile af;
        char *text = tk_json_dumps_compact(res);
        rc = text ? tk_afile_open(&af, out, e) : tk_err_set(e, TK_EINTERNAL, "cannot serialize");
        if (!rc) {
            rc = tk_write_all(af.fp, text, strlen(text), out, e);
            if (!rc) rc = tk_write_all(af.fp, "\n", 1, out, e);
            if (!rc) rc = tk_afile_commit(&af, e);
            else tk_afile_abort(&af);
        }
        free(text);
        if (!rc) rc = tk_jsonl_emit(stdout, res, e);
        else json_decref(res);
        if (rc) break;
    }
    free(list);
    return rc;
}

int main(int argc, char **argv) {
    enum { O_TARGET = 256, O_POLL, O_TIMEOUT };
    static const struct option longopts[] = {
        {"checkpoint", required_argument, 0, 'k'}, {"follow", required_argument, 0, 'f'},
        {"eval", required_argument, 0, 'e'},       {"backend", required_argument, 0, 'b'},
        {"target", required_argument, 0, O_TARGET}, {"poll", required_argument, 0, O_POLL},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},          {0, 0, 0, 0}};
    options o = {.backend = "auto", .poll = 0.2};
    tk_err e;
    tk_err_clear(&e);
    int c, rc = 0;
    while ((c = getopt_long(argc, argv, ":k:f:e:b:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'k': o.ckpt = optarg; break;
        case 'f': o.follow = optarg; break;
        case 'e':
            if (o.neval >= MAX_PATHS) return tk_cli_usage_error(prog, usage, "too many --eval paths");
            o.eval[o.neval++] = optarg;
            break;
        case 'b': o.backend = optarg; break;
        case O_TARGET:
            rc = tk_parse_f64(optarg, 0, 1, "--target", &o.target, &e);
            o.has_target = 1;
            break;
        case O_POLL: rc = tk_parse_f64(optarg, 0.001, 3600, "--poll", &o.poll, &e); break;
        case O_TIMEOUT: rc = tk_parse_f64(optarg, 0, 1e7, "--timeout", &o.timeout, &e); break;
        default: return tk_cli_common_option(prog, usage, help, c, argv);
        }
        if (rc) return tk_cli_usage_error(prog, usage, "%s", e.what);
    }
    if (optind < argc) return tk_cli_usage_error(prog, usage, "unexpected argument '%s'", argv[optind]);
    if (!o.ckpt == !o.follow) return tk_cli_usage_error(prog, usage, "give one of --checkpoint or --follow");
    if (o.neval == 0) return tk_cli_usage_error(prog, usage, "--eval is required");
    evaluator ev = {0};
    tk_backend be;
    rc = tk_backend_parse(o.backend, &be, &e);
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, usage, "%s", e.what);
    if (!rc) rc = tk_ctx_create(&ev.c, be, 0, &e);
    if (!rc && o.ckpt) {
        json_t *res = NULL;
        rc = eval_one(&ev, &o, o.ckpt, o.ckpt, &res, &e);
        int reached = !o.has_target || json_is_true(json_object_get(res, "reached"));
        if (!rc) rc = tk_jsonl_emit(stdout, res, &e);
        if (!rc && !reached) rc = TK_NO;
    } else if (!rc) {
        rc = follow(&ev, &o, &e);
    }
    tk_dlrm_evalset_free(ev.m, ev.es);
    tk_dlrm_destroy(ev.m);
    tk_ctx_destroy(ev.c);
    if (rc && rc != TK_NO) tk_cli_fail(prog, &e);
    else if (rc == TK_NO && e.what[0]) tk_cli_fail(prog, &e);
    tk_err e2;
    if (tk_cli_close_stdout(&e2)) {
        tk_cli_fail(prog, &e2);
        if (!rc || rc == TK_NO) rc = e2.code;
    }
    return rc;
}
