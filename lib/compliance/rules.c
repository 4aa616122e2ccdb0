// Loading rule files (share/compliance/<usage>-<version>/<name>.json, man 5 trainkit-compliance).
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "compliance/rules.h"

static int rfail(tk_err *e, const char *file, const char *path, const char *what) {
    tk_err_set(e, TK_EDATA, "rule file: %s", what);
    tk_err_where(e, "%s: %s", file, path);
    return TK_EDATA;
}

static char *rdup(lc_arena *a, const char *s) {
    size_t n = strlen(s) + 1;
    char *c = lc_alloc(a, n);
    if (c) memcpy(c, s, n);
    return c;
}

static pv *to_pv(lc_arena *a, json_t *j) {
    char *txt = json_dumps(j, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!txt) return NULL;
    // the rule file is UTF-8 while pv_parse_json reads latin-1 bytes; rule constants are ASCII
    pv *v = pv_parse_json(a, txt, strlen(txt), NULL, 0, NULL);
    free(txt);
    return v;
}

static int compile(lc_rules *r, const char *file, const char *path, const char *src, int stmt, lc_expr **out, tk_err *e) {
    char err[160], what[400];
    int col;
    *out = lc_expr_compile(r->a, src, stmt, err, sizeof err, &col);
    if (*out) return 0;
    snprintf(what, sizeof what, "%s at column %d of \"%.120s\"", err, col + 1, src);
    return rfail(e, file, path, what);
}

// An array of strings, or one string (as MLCommons' YAML allows either).
static int str_list(json_t *j, const char ***out, int *n, lc_arena *a) {
    if (!j) { *n = 0; return 0; }
    json_t *arr = json_is_string(j) ? json_pack("[O]", j) : json_incref(j);
    if (!json_is_array(arr)) { json_decref(arr); return -1; }
    *n = (int)json_array_size(arr);
    *out = lc_alloc(a, (size_t)(*n + 1) * sizeof(char *));
    for (int i = 0; i < *n; i++) {
        json_t *s = json_array_get(arr, (size_t)i);
        if (!json_is_string(s)) { json_decref(arr); return -1; }
        (*out)[i] = rdup(a, json_string_value(s));
    }
    json_decref(arr);
    return 0;
}

// A rule file name: letters, digits, '_', '-', '.', at most one '/' (ruleset/file), no "..".
static int plain_name(const char *s) {
    int slashes = 0;
    if (!*s || strstr(s, "..") || strlen(s) > 120) return 0;
    for (const char *p = s; *p; p++) {
        if (*p == '/') slashes++;
        else if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
            return 0;
    }
    return slashes <= 1 && s[0] != '/';
}

static int load_conf(lc_rules *r, const char *name, lc_conf *c, tk_err *e) {
    char file[4400], path[128], target[128];
    snprintf(file, sizeof file, "%s/%s.json", r->dir, name);
    c->name = rdup(r->a, name);
    json_t *root = NULL;
    const char *fmt = NULL;
    // a file whose rules are stored elsewhere: {"same_as": "training-2.0.0/open_bert"} (one hop)
    for (int hop = 0; hop < 2; hop++) {
        FILE *fp = fopen(file, "rb");
        if (!fp) {
            if (hop) return rfail(e, file, "", "the file named by \"same_as\" does not exist");
            c->missing = 1;
            return 0;
        }
        json_error_t je;
        json_decref(root);
        root = json_loadf(fp, 0, &je);
        fclose(fp);
        if (!root) {
            return lc_json_fail(e, "rule file", file, &je);
        }
        fmt = json_string_value(json_object_get(root, "format"));
        const char *same = json_string_value(json_object_get(root, "same_as"));
        if (!same || !json_is_object(root) || !fmt) break;
        if (hop || !plain_name(same) || !strchr(same, '/')) {
            json_decref(root);
            return rfail(e, file, "$.same_as", hop ? "a \"same_as\" file must hold the rules, not point further"
                                                    : "expected a rule file name such as \"training-2.0.0/open_bert\"");
        }
        snprintf(target, sizeof target, "%s", same);
        snprintf(file, sizeof file, "%s/%s.json", r->dir, target);
    }
    int rc = 0;
    if (!json_is_object(root) || !fmt || strcmp(fmt, "trainkit-compliance/1")) {
        rc = rfail(e, file, "$.format", "expected \"trainkit-compliance/1\"");
        goto out;
    }
    json_t *st = json_object_get(root, "state"), *cst = json_object_get(root, "const");
    if ((st && !json_is_object(st)) || (cst && !json_is_object(cst))) {
        rc = rfail(e, file, st && !json_is_object(st) ? "$.state" : "$.const", "expected an object");
        goto out;
    }
    c->state = st ? to_pv(r->a, st) : NULL;
    c->cst = cst ? to_pv(r->a, cst) : NULL;
    json_t *der = json_object_get(root, "derive");
    if (der && !json_is_array(der)) {
        rc = rfail(e, file, "$.derive", "expected an array");
        goto out;
    }
    c->nderive = der ? (int)json_array_size(der) : 0;
    c->derive = lc_alloc(r->a, (size_t)(c->nderive + 1) * sizeof *c->derive);
    for (int i = 0; i < c->nderive; i++) {
        json_t *d = json_array_get(der, (size_t)i);
        lc_derive *dv = &c->derive[i];
        static const char *mem[] = {"name", "from", "group_name", "when", "group", "field"};
        const char *val[6];
        for (int m = 0; m < 6; m++) val[m] = json_string_value(json_object_get(d, mem[m]));
        snprintf(path, sizeof path, "$.derive[%d]", i);
        if (!val[0] || !val[1] || !val[2] || !val[3] || !val[4] || !val[5]) {
            rc = rfail(e, file, path, "a derive rule needs name, from, group_name, when, group and field (strings)");
            goto out;
        }
        dv->name = rdup(r->a, val[0]);
        dv->from = rdup(r->a, val[1]);
        dv->group_name = rdup(r->a, val[2]);
        lc_expr **x[3] = {&dv->when, &dv->group, &dv->field};
        for (int m = 0; m < 3; m++) {
            dv->src[m] = rdup(r->a, val[3 + m]);
            snprintf(path, sizeof path, "$.derive[%d].%s", i, mem[3 + m]);
            if ((rc = compile(r, file, path, val[3 + m], 0, x[m], e))) goto out;
        }
    }
    json_t *keys = json_object_get(root, "keys"), *ends = json_object_get(root, "end");
    if (!json_is_array(keys) || (ends && !json_is_array(ends))) {
        rc = rfail(e, file, json_is_array(keys) ? "$.end" : "$.keys", "expected an array");
        goto out;
    }
    c->nkeys = (int)json_array_size(keys);
    c->keys = lc_alloc(r->a, (size_t)(c->nkeys + 1) * sizeof *c->keys);
    for (int i = 0; i < c->nkeys; i++) {
        json_t *k = json_array_get(keys, (size_t)i);
        lc_keyrule *kr = &c->keys[i];
        const char *nm = json_string_value(json_object_get(k, "name"));
        snprintf(path, sizeof path, "$.keys[%d]", i);
        if (!json_is_object(k) || !nm) { rc = rfail(e, file, path, "a key rule needs a \"name\""); goto out; }
        for (int j = 0; j < i; j++)
            if (!strcmp(c->keys[j].name, nm)) { rc = rfail(e, file, path, "a key has two rules in one file"); goto out; }
        kr->name = rdup(r->a, nm);
        kr->hash = lc_hash(nm, strlen(nm));
        const char *req = json_string_value(json_object_get(k, "req"));
        json_t *jreq = json_object_get(k, "req");
        if (!jreq) kr->req = REQ_NONE;
        else if (req && !strcmp(req, "exactly_one")) kr->req = REQ_EXACTLY_ONE;
        else if (req && !strcmp(req, "at_least_one")) kr->req = REQ_AT_LEAST_ONE;
        else if (req && !strcmp(req, "at_least_one_or")) kr->req = REQ_AT_LEAST_ONE_OR;
        else if (req && !strcmp(req, "optional")) kr->req = REQ_NONE;
        else if (req && sscanf(req, "at_least(%d)", &kr->at_least) == 1 && kr->at_least >= 0) kr->req = REQ_AT_LEAST;
        else { rc = rfail(e, file, path, "\"req\" must be exactly_one, at_least_one, at_least_one_or, at_least(N) or optional"); goto out; }
        if (str_list(json_object_get(k, "or"), &kr->alts, &kr->nalts, r->a) || (kr->req == REQ_AT_LEAST_ONE_OR && !kr->nalts)) {
            rc = rfail(e, file, path, "\"or\" must list the alternative keys of at_least_one_or");
            goto out;
        }
        if (str_list(json_object_get(k, "check"), &kr->chk_src, &kr->nchk, r->a) ||
            str_list(json_object_get(k, "post"), &kr->post_src, &kr->npost, r->a)) {
            rc = rfail(e, file, path, "\"check\" and \"post\" hold a string or an array of strings");
            goto out;
        }
        kr->chk = lc_alloc(r->a, (size_t)(kr->nchk + 1) * sizeof(lc_expr *));
        kr->post = lc_alloc(r->a, (size_t)(kr->npost + 1) * sizeof(lc_expr *));
        for (int j = 0; j < kr->nchk; j++) {
            snprintf(path, sizeof path, "$.keys[%d].check[%d]", i, j);
            if ((rc = compile(r, file, path, kr->chk_src[j], 0, &kr->chk[j], e))) goto out;
        }
        for (int j = 0; j < kr->npost; j++) {
            snprintf(path, sizeof path, "$.keys[%d].post[%d]", i, j);
            if ((rc = compile(r, file, path, kr->post_src[j], 1, &kr->post[j], e))) goto out;
        }
        if (str_list(json_object_get(k, "first_check"), &kr->first_src, &kr->nfirst, r->a)) {
            rc = rfail(e, file, path, "\"first_check\" holds a string or an array of strings");
            goto out;
        }
        kr->first = lc_alloc(r->a, (size_t)(kr->nfirst + 1) * sizeof(lc_expr *));
        for (int j = 0; j < kr->nfirst; j++) {
            snprintf(path, sizeof path, "$.keys[%d].first_check[%d]", i, j);
            if ((rc = compile(r, file, path, kr->first_src[j], 0, &kr->first[j], e))) goto out;
        }
        const char *alo = json_string_value(json_object_get(k, "at_least_one_check"));
        if (alo) {
            kr->alo_src = rdup(r->a, alo);
            snprintf(path, sizeof path, "$.keys[%d].at_least_one_check", i);
            if ((rc = compile(r, file, path, alo, 0, &kr->alo, e))) goto out;
        }
        json_t *jinc = json_object_get(k, "include");
        const char *inc = json_string_value(jinc);
        if (jinc && (!inc || !strstr(inc, "{value}"))) {
            snprintf(path, sizeof path, "$.keys[%d].include", i);
            rc = rfail(e, file, path, "\"include\" is a rule file name holding {value}, e.g. \"closed_{value}\"");
            goto out;
        }
        if (inc) kr->include = rdup(r->a, inc);
        const char *so = json_string_value(json_object_get(k, "strict_only"));
        if (so) kr->strict_only = rdup(r->a, so);
    }
    for (int i = 0; i < c->nkeys; i++) // alternatives must be rules of the same file (counted there)
        for (int j = 0; j < c->keys[i].nalts; j++) {
            int found = 0;
            for (int k = 0; k < c->nkeys; k++) found |= !strcmp(c->keys[k].name, c->keys[i].alts[j]);
            if (!found) {
                snprintf(path, sizeof path, "$.keys[%d].or[%d]", i, j);
                rc = rfail(e, file, path, "an alternative must be a key rule of the same file");
                goto out;
            }
        }
    c->nends = ends ? (int)json_array_size(ends) : 0;
    c->ends = lc_alloc(r->a, (size_t)(c->nends + 1) * sizeof *c->ends);
    for (int i = 0; i < c->nends; i++) {
        json_t *en = json_array_get(ends, (size_t)i);
        const char *nm = json_string_value(json_object_get(en, "name"));
        const char *chk = json_string_value(json_object_get(en, "check"));
        snprintf(path, sizeof path, "$.end[%d]", i);
        if (!nm || !chk) { rc = rfail(e, file, path, "an end rule needs \"name\" and \"check\""); goto out; }
        c->ends[i].name = rdup(r->a, nm);
        c->ends[i].src = rdup(r->a, chk);
        const char *so = json_string_value(json_object_get(en, "strict_only"));
        if (so) c->ends[i].strict_only = rdup(r->a, so);
        snprintf(path, sizeof path, "$.end[%d].check", i);
        if ((rc = compile(r, file, path, chk, 0, &c->ends[i].chk, e))) goto out;
        json_t *diff = json_object_get(en, "diff");
        if (diff) {
            snprintf(path, sizeof path, "$.end[%d].diff", i);
            if (!json_is_array(diff) || json_array_size(diff) != 2 || !json_is_string(json_array_get(diff, 0)) ||
                !json_is_string(json_array_get(diff, 1))) {
                rc = rfail(e, file, path, "\"diff\" holds two expressions: [got, want]");
                goto out;
            }
            for (int j = 0; j < 2; j++)
                if ((rc = compile(r, file, path, json_string_value(json_array_get(diff, (size_t)j)), 0, &c->ends[i].diff[j], e)))
                    goto out;
        }
    }
out:
    json_decref(root);
    return rc;
}

unsigned lc_hash(const char *s, size_t n) {
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

int lc_rules_conf(lc_rules *r, const char *name, lc_conf **out, tk_err *e) {
    for (int i = 0; i < r->nconfs; i++)
        if (!strcmp(r->confs[i]->name, name)) {
            *out = r->confs[i];
            return 0;
        }
    if (r->nconfs == (int)(sizeof r->confs / sizeof *r->confs)) return tk_err_set(e, TK_EINTERNAL, "too many rule files");
    lc_conf *c = lc_alloc(r->a, sizeof *c);
    if (!c) return tk_err_set(e, TK_EIO, "out of memory");
    TRY(load_conf(r, name, c, e));
    r->confs[r->nconfs++] = c;
    *out = c;
    return 0;
}

int lc_rules_open(const char *dir, const char *usage, const char *version, lc_rules **out, tk_err *e) {
    lc_rules *r = calloc(1, sizeof *r);
    if (!r || !(r->a = lc_arena_new())) {
        free(r);
        return tk_err_set(e, TK_EIO, "out of memory");
    }
    snprintf(r->dir, sizeof r->dir, "%s", dir);
    snprintf(r->set, sizeof r->set, "%s-%s", usage, version);
    snprintf(r->root, sizeof r->root, "%s/common", r->set);
    lc_conf *c;
    int rc = lc_rules_conf(r, r->root, &c, e);
    if (!rc && c->missing) {
        tk_err_set(e, TK_EUSAGE, "no rules for %s %s", usage, version);
        tk_err_where(e, "%s/%s.json", dir, r->root);
        tk_err_hint(e, "rulesets are the directories of %s", dir);
        rc = TK_EUSAGE;
    }
    if (rc) {
        lc_rules_free(r);
        return rc;
    }
    *out = r;
    return 0;
}

void lc_rules_free(lc_rules *r) {
    if (!r) return;
    lc_arena_free(r->a);
    free(r);
}
