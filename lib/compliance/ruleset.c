// The rulesets of a rules directory, their ruleset.json facts, and picking the ruleset a log fits
// (see ruleset.h and man 5 trainkit-compliance).
#include "compliance/ruleset.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char *cdup(lc_arena *a, const char *s) {
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *c = lc_alloc(a, n);
    if (c) memcpy(c, s, n);
    return c;
}

static int mfail(tk_err *e, const char *file, const char *path, const char *what) {
    tk_err_set(e, TK_EDATA, "ruleset file: %s", what);
    return tk_err_where(e, "%s: %s", file, path);
}

static int load_conv(lc_arena *a, json_t *j, lc_convergence *cv, const char *file, const char *path, tk_err *e) {
    memset(cv, 0, sizeof *cv);
    cv->round = -1;
    if (!json_is_object(j)) return mfail(e, file, path, "expected an object");
    cv->metadata = cdup(a, json_string_value(json_object_get(j, "metadata")));
    json_t *r = json_object_get(j, "round");
    if (r && (!json_is_integer(r) || json_integer_value(r) < 0 || json_integer_value(r) > 15))
        return mfail(e, file, path, "\"round\" is a number of decimals (0 to 15)");
    if (r) cv->round = (int)json_integer_value(r);
    cv->aggregate = cdup(a, json_string_value(json_object_get(j, "aggregate")));
    cv->metric = cdup(a, json_string_value(json_object_get(j, "metric")));
    const char *conv = json_string_value(json_object_get(j, "converged"));
    if (!cv->metadata == !cv->aggregate || (cv->aggregate && (!cv->metric || !conv)))
        return mfail(e, file, path, "a convergence has \"metadata\", or \"aggregate\" with \"metric\" and \"converged\"");
    if (conv) {
        char err[160];
        int col;
        cv->converged_src = cdup(a, conv);
        if (!(cv->converged = lc_expr_compile(a, conv, 0, err, sizeof err, &col))) {
            char what[300];
            snprintf(what, sizeof what, "%s at column %d of \"converged\"", err, col + 1);
            return mfail(e, file, path, what);
        }
    }
    return 0;
}

static int load_meta(lc_catalog *c, lc_ruleset *rs, tk_err *e) {
    char file[4300], path[160];
    snprintf(file, sizeof file, "%s/%s/ruleset.json", c->dir, rs->name);
    struct stat st;
    if (stat(file, &st) != 0) return 0; // a ruleset without facts: checks only
    json_error_t je;
    json_t *root = json_load_file(file, 0, &je);
    if (!root) {
        return lc_json_fail(e, "ruleset file", file, &je);
    }
    int rc = 0;
    const char *fmt = json_string_value(json_object_get(root, "format"));
    json_t *b = json_object_get(root, "benchmarks");
    if (!fmt || strcmp(fmt, "trainkit-ruleset/1")) {
        rc = mfail(e, file, "$.format", "expected \"trainkit-ruleset/1\"");
        goto out;
    }
    if (!json_is_object(b)) {
        rc = mfail(e, file, "$.benchmarks", "expected an object");
        goto out;
    }
    if ((rc = load_conv(c->a, json_object_get(root, "convergence_default"), &rs->conv_default, file, "$.convergence_default", e)))
        goto out;
    rs->nbench = (int)json_object_size(b);
    rs->bench = lc_alloc(c->a, (size_t)(rs->nbench + 1) * sizeof *rs->bench);
    if (!rs->bench) {
        rc = tk_err_set(e, TK_EIO, "out of memory");
        goto out;
    }
    const char *name;
    json_t *v;
    int i = 0;
    json_object_foreach(b, name, v) {
        lc_bench *bn = &rs->bench[i++];
        snprintf(path, sizeof path, "$.benchmarks.%.100s", name);
        json_t *runs = json_object_get(v, "runs"), *drop = json_object_get(v, "drop"), *off = json_object_get(v, "rcp_min_offset");
        if (!json_is_integer(runs) || !json_is_integer(drop) || json_integer_value(runs) < 1 || json_integer_value(drop) < 0 ||
            json_integer_value(runs) > 100000 || json_integer_value(drop) > 1000 || (off && !json_is_number(off))) {
            rc = mfail(e, file, path, "a benchmark has \"runs\" (>= 1) and \"drop\" (>= 0), numbers");
            goto out;
        }
        bn->name = cdup(c->a, name);
        bn->runs = (int)json_integer_value(runs);
        bn->drop = (int)json_integer_value(drop);
        bn->rcp = cdup(c->a, json_string_value(json_object_get(v, "rcp")));
        bn->rcp_only = json_is_true(json_object_get(v, "rcp_only"));
        bn->rcp_min_offset = off ? json_number_value(off) : 0;
        snprintf(path, sizeof path, "$.benchmarks.%.100s.convergence", name);
        if ((rc = load_conv(c->a, json_object_get(v, "convergence"), &bn->conv, file, path, e))) goto out;
    }
    rs->has_meta = 1;
out:
    json_decref(root);
    return rc;
}

static int cmp_set(const void *x, const void *y) {
    const lc_ruleset *a = x, *b = y;
    for (int i = 0; i < 3; i++)
        if (a->v[i] != b->v[i]) return a->v[i] < b->v[i] ? -1 : 1;
    return 0;
}

int lc_catalog_open(const char *dir, const char *usage, lc_catalog **out, tk_err *e) {
    lc_catalog *c = calloc(1, sizeof *c);
    if (!c || !(c->a = lc_arena_new())) {
        free(c);
        return tk_err_set(e, TK_EIO, "out of memory");
    }
    snprintf(c->dir, sizeof c->dir, "%s", dir);
    DIR *dp = opendir(dir);
    if (!dp) {
        tk_err_errno(e, errno, "cannot open the rules directory");
        e->code = TK_EUSAGE; // a wrong --rules or TRAINKIT_SHARE
        tk_err_where(e, "%s", dir);
        lc_catalog_free(c);
        return TK_EUSAGE;
    }
    struct dirent *de;
    size_t ul = strlen(usage);
    while ((de = readdir(dp))) {
        int v[3], used = 0;
        if (strncmp(de->d_name, usage, ul) || de->d_name[ul] != '-') continue;
        if (sscanf(de->d_name + ul + 1, "%d.%d.%d%n", &v[0], &v[1], &v[2], &used) != 3 || de->d_name[ul + 1 + used]) continue;
        char common[4400];
        struct stat st;
        snprintf(common, sizeof common, "%s/%s/common.json", dir, de->d_name);
        if (stat(common, &st) != 0 || c->nsets == LC_MAX_RULESETS || strlen(de->d_name) >= sizeof c->sets[0].name) continue;
        lc_ruleset *rs = &c->sets[c->nsets++];
        snprintf(rs->name, sizeof rs->name, "%s", de->d_name);
        snprintf(rs->version, sizeof rs->version, "%s", de->d_name + ul + 1);
        memcpy(rs->v, v, sizeof v);
    }
    closedir(dp);
    qsort(c->sets, (size_t)c->nsets, sizeof *c->sets, cmp_set);
    for (int i = 0; i < c->nsets; i++) {
        int rc = load_meta(c, &c->sets[i], e);
        if (rc) {
            lc_catalog_free(c);
            return rc;
        }
    }
    *out = c;
    return 0;
}

void lc_catalog_free(lc_catalog *c) {
    if (!c) return;
    for (int i = 0; i < c->nsets; i++) lc_rules_free(c->sets[i].rules);
    lc_arena_free(c->a);
    free(c);
}

lc_ruleset *lc_catalog_find(lc_catalog *c, const char *version) {
    for (int i = 0; i < c->nsets; i++)
        if (!strcmp(c->sets[i].version, version)) return &c->sets[i];
    return NULL;
}

const lc_bench *lc_ruleset_bench(const lc_ruleset *rs, const char *name) {
    for (int i = 0; name && i < rs->nbench; i++)
        if (!strcmp(rs->bench[i].name, name)) return &rs->bench[i];
    return NULL;
}

const lc_bench *lc_ruleset_round_bench(const lc_ruleset *rs, const char *name) {
    const lc_bench *b = lc_ruleset_bench(rs, name);
    return b && !b->rcp_only ? b : NULL;
}

int lc_ruleset_rules(lc_catalog *c, lc_ruleset *rs, lc_rules **out, tk_err *e) {
    if (!rs->rules) {
        const char *dash = strrchr(rs->name, '-');
        char usage[64];
        snprintf(usage, sizeof usage, "%.*s", (int)(dash - rs->name), rs->name);
        TRY(lc_rules_open(c->dir, usage, rs->version, &rs->rules, e));
    }
    *out = rs->rules;
    return 0;
}

void lc_catalog_versions(const lc_catalog *c, char *buf, size_t n) {
    size_t w = 0;
    if (n) buf[0] = 0;
    for (int i = 0; i < c->nsets && w + 1 < n; i++)
        w += (size_t)snprintf(buf + w, n - w, "%s%s", i ? ", " : "", c->sets[i].version);
}

// All benchmarks of all rulesets, each once, for the message about an unknown one.
static void known_benchmarks(const lc_catalog *c, char *buf, size_t n) {
    size_t w = 0;
    buf[0] = 0;
    for (int i = 0; i < c->nsets; i++)
        for (int j = 0; j < c->sets[i].nbench; j++) {
            const char *b = c->sets[i].bench[j].name;
            int seen = c->sets[i].bench[j].rcp_only;
            for (int k = 0; k < i && !seen; k++) seen = lc_ruleset_round_bench(&c->sets[k], b) != NULL;
            if (!seen && w + strlen(b) + 3 < n) w += (size_t)snprintf(buf + w, n - w, "%s%s", w ? ", " : "", b);
        }
}

// A ruleset may judge the logs: it has its round's facts and, once a log names a benchmark, the benchmark is of its round.
static int candidate(const lc_detector *dt, const lc_ruleset *rs) {
    return rs->has_meta && (!dt->has_bench || lc_ruleset_round_bench(rs, dt->d.benchmark));
}

void lc_detect_begin(lc_detector *dt, lc_catalog *c, lc_arena *keep, int strict) {
    memset(dt, 0, sizeof *dt);
    dt->c = c;
    dt->keep = keep;
    dt->strict = strict;
}

int lc_detect_add(lc_detector *dt, lc_arena *a, lc_log *log, unsigned long long *checked, unsigned long long *passed,
                  tk_err *e) {
    unsigned long long ck = 0, ps = 0;
    for (size_t i = 0; i < log->n && !dt->has_bench; i++) {
        const lc_record *r = &log->rec[i];
        if (r->key->t != PV_STR || strcmp(r->key->u.s.s, "submission_benchmark")) continue;
        pv *val = pv_dict_get(r->v, "value");
        if (!(dt->d.benchmark = cdup(dt->keep, val->t == PV_STR ? val->u.s.s : ""))) return tk_err_set(e, TK_EIO, "out of memory");
        dt->has_bench = 1;
    }
    for (int k = 0; k < dt->c->nsets; k++) {
        lc_ruleset *rs = &dt->c->sets[k];
        if (!candidate(dt, rs)) continue;
        lc_rules *r;
        lc_result res;
        TRY(lc_ruleset_rules(dt->c, rs, &r, e));
        TRY(lc_check_log(r, a, log, dt->strict, &res, e));
        dt->errs[k] += (long)res.errors.n;
        ck |= 1ull << k;
        if (res.pass) ps |= 1ull << k;
    }
    if (checked) *checked = ck;
    if (passed) *passed = ps;
    return 0;
}

int lc_detect_end(lc_detector *dt, lc_detect *d, tk_err *e) {
    lc_catalog *c = dt->c;
    *d = dt->d;
    long best = -1;
    for (int k = 0; k < c->nsets; k++)
        if (candidate(dt, &c->sets[k])) {
            d->ncand++;
            if (best < 0 || dt->errs[k] < best) best = dt->errs[k];
        }
    if (!d->ncand) {
        char known[400];
        known_benchmarks(c, known, sizeof known);
        if (d->benchmark) tk_err_set(e, TK_EUSAGE, "benchmark '%.60s' is in no ruleset (known: %s)", d->benchmark, known);
        else tk_err_set(e, TK_EUSAGE, "no ruleset with a ruleset.json under %.200s", c->dir);
        tk_err_hint(e, "--ruleset checks a log under the ruleset named");
        return TK_EUSAGE;
    }
    for (int k = 0; k < c->nsets; k++)
        if (candidate(dt, &c->sets[k]) && dt->errs[k] == best) d->fit[d->nfit++] = &c->sets[k];
    d->chosen = d->fit[d->nfit - 1];
    d->errors = best;
    return 0;
}

int lc_detect_ruleset(lc_catalog *c, lc_arena *a, lc_log *logs, int nlogs, int strict, lc_detect *d, tk_err *e) {
    lc_detector dt;
    memset(d, 0, sizeof *d);
    lc_detect_begin(&dt, c, a, strict);
    for (int l = 0; l < nlogs; l++) TRY(lc_detect_add(&dt, a, &logs[l], NULL, NULL, e));
    return lc_detect_end(&dt, d, e);
}
