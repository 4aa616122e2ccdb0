// The compliance rule engine. It runs rule files over a parsed log the way MLCommons'
// mlp_compliance.ComplianceChecker does, so that verdicts are the same:
//  - rule files run one after another, starting at <ruleset>/common; a key rule's "include"
//    queues another file (division, then benchmark). Each file has its own state s.
//  - a file that defines a key drops the earlier files' pending findings about that key
//    (benchmark rules override the common ones); findings about one key replace each other.
//  - checks and actions of submission_* keys run on their first record only.
//  - requirement counts, at-least-one checks and end checks are judged after all records.
// Where the official checker crashes (a record without metadata, an at-least-one check that
// raises, an unknown benchmark), the file fails with an error naming the line instead.
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "compliance/rules.h"

static int oom(tk_err *e) { return tk_err_set(e, TK_EIO, "out of memory"); }

typedef struct {
    lc_arena *a;
    const char *set; // the ruleset being checked, for includes without a '/'
    int strict;
    lc_msgs ow;   // findings a later rule file may replace (keyed by okey)
    lc_msgs fix;  // findings that stay
    lc_msgs warn; // warnings (keyed)
} eng;

static int add_keyed(eng *g, lc_msgs *ms, const char *okey, long line, const char *key, const char *kind, const char *text) {
    for (size_t i = 0; i < ms->n; i++)
        if (ms->m[i].okey && !strcmp(ms->m[i].okey, okey)) { // Python dict: same slot, new text
            lc_msgs tmp = {0};
            if (lc_msgs_add(g->a, &tmp, line, key, kind, text)) return -1;
            ms->m[i] = tmp.m[0];
            ms->m[i].okey = okey;
            return 0;
        }
    if (lc_msgs_add(g->a, ms, line, key, kind, text)) return -1;
    ms->m[ms->n - 1].okey = okey;
    return 0;
}

// A finding of a rule: keyed (okey != NULL) or not; strict-only rules warn unless strict.
static int finding(eng *g, const char *strict_only, const char *okey, long line, const char *key, const char *kind,
                   const char *text) {
    if (strict_only && !g->strict) {
        char k[96], t[900];
        snprintf(k, sizeof k, "%s_WARNING", strict_only);
        snprintf(t, sizeof t, "%s (an error only with --strict, as in MLCommons' checkers after March 2022)", text);
        return add_keyed(g, &g->warn, okey ? okey : kind, line, key, k, t);
    }
    if (okey) return add_keyed(g, &g->ow, okey, line, key, kind, text);
    return lc_msgs_add(g->a, &g->fix, line, key, kind, text);
}

static const char *key_str(const lc_record *r) { return r->key->t == PV_STR ? r->key->u.s.s : NULL; }

// str(v['value']) for an include name; -1 unless a plain file name. A pattern without '/' names
// a file of the ruleset being checked.
static int include_name(const char *set, const char *pattern, const pv *val, char *out, size_t n) {
    char s[128];
    pv_str_of(val, s, sizeof s);
    if (!s[0] || strlen(s) > 64 || strstr(s, "..")) return -1;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-' || *p == '.'))
            return -1;
    const char *ph = strstr(pattern, "{value}");
    if (!ph) return -1; // the rule loader requires it
    return snprintf(out, n, "%s%s%.*s%s%s", strchr(pattern, '/') ? "" : set, strchr(pattern, '/') ? "" : "/",
                    (int)(ph - pattern), pattern, s, ph + 7) >= (int)n ? -1 : 0;
}

typedef struct {
    pv *vals;  // values reported for the key (PV_LIST)
    long last_line;
    int alo_seen, alo_ok, alo_raised, executed, first_done;
} keystate;

// Appends "(missing: a, b; unexpected: c)" for an end rule with "diff": [got, want].
static void explain_diff(const lc_endrule *er, lc_env *env, char *out, size_t n) {
    pv *l[2];
    char err[200];
    for (int i = 0; i < 2; i++)
        if (lc_expr_eval(er->diff[i], env, &l[i], err, sizeof err) || l[i]->t != PV_LIST) return;
    const char *label[2] = {"missing", "unexpected"};
    size_t w = 0;
    for (int side = 0; side < 2; side++) { // missing: in want, not in got; unexpected: the reverse
        const pv *from = l[side == 0 ? 1 : 0], *in = l[side == 0 ? 0 : 1];
        int count = 0;
        for (size_t i = 0; i < from->u.l.n && w + 100 < n; i++) {
            int found;
            if (pv_contains(in, from->u.l.v[i], &found, err, sizeof err) || found) continue;
            if (count++ < 5) {
                char vs[80];
                pv_str_of(from->u.l.v[i], vs, sizeof vs);
                w += (size_t)snprintf(out + w, n - w, "%s%s%s%s", count == 1 ? (w ? "; " : " (") : ", ",
                                      count == 1 ? label[side] : "", count == 1 ? ": " : "", vs);
            }
        }
        if (count > 5 && w + 20 < n) w += (size_t)snprintf(out + w, n - w, " and %d more", count - 5);
    }
    if (w && w + 2 < n) snprintf(out + w, n - w, ")");
}

// Appends the records of a derive rule to the log: per distinct value of `group` over the
// records of key `from` satisfying `when`, one record {"value": {group_name: g, field: value, ...},
// "metadata": {}} stamped with the latest time of its group, in order of first appearance.
// MLCommons' checker runs this as Python code that crashes on an error; here the file fails.
static int derive(eng *g, const lc_derive *d, lc_env *env, lc_log *log, tk_err *e) {
    char err[300], text[900], kind[200];
    size_t n0 = log->n, first = log->n;
    unsigned from = lc_hash(d->from, strlen(d->from));
    pv **groups = lc_alloc(g->a, (n0 + 1) * sizeof *groups); // the group of derived record first + i
    if (!groups) return oom(e);
    for (size_t ri = 0; ri < n0; ri++) {
        const lc_record *rec = &log->rec[ri];
        if (rec->hash != from || rec->key->t != PV_STR || strcmp(rec->key->u.s.s, d->from)) continue;
        env->v = rec->v;
        env->ts = rec->ts;
        env->has_ts = 1;
        pv *ok, *grp, *fld;
        int which = 0;
        if (lc_expr_eval(d->when, env, &ok, err, sizeof err)) goto raised;
        if (!pv_truthy(ok)) continue;
        which = 1;
        if (lc_expr_eval(d->group, env, &grp, err, sizeof err)) goto raised;
        if (grp->t == PV_LIST || grp->t == PV_DICT) {
            snprintf(err, sizeof err, "TypeError: unhashable type: '%s'", pv_type_name(grp));
            goto raised;
        }
        lc_record *agg = NULL;
        for (size_t i = first; i < log->n && !agg; i++) // the group itself: a field may overwrite its entry
            if (pv_eq(groups[i - first], grp)) agg = &log->rec[i];
        if (!agg) {
            pv *v = pv_new(g->a, PV_DICT), *val = pv_new(g->a, PV_DICT), *meta = pv_new(g->a, PV_DICT);
            pv *key = pv_str(g->a, d->name, strlen(d->name));
            if (!v || !val || !meta || !key || pv_dict_set(g->a, val, d->group_name, strlen(d->group_name), grp) ||
                pv_dict_set(g->a, v, "value", 5, val) || pv_dict_set(g->a, v, "metadata", 8, meta) ||
                lc_log_add(g->a, log, (lc_record){key, v, rec->ts, rec->line, lc_hash(d->name, strlen(d->name))}))
                return oom(e);
            agg = &log->rec[log->n - 1];
            groups[log->n - 1 - first] = grp;
        }
        if (!(agg->ts > rec->ts)) agg->ts = rec->ts; // Python's max(line.timestamp, agg.timestamp)
        which = 2;
        if (lc_expr_eval(d->field, env, &fld, err, sizeof err)) goto raised;
        if (fld->t == PV_LIST || fld->t == PV_DICT) {
            snprintf(err, sizeof err, "TypeError: unhashable type: '%s'", pv_type_name(fld));
            goto raised;
        }
        // only string names can be looked up by rules; others are left out
        if (fld->t == PV_STR && pv_dict_set(g->a, pv_dict_get(agg->v, "value"), fld->u.s.s, fld->u.s.n, pv_dict_get(rec->v, "value")))
            return oom(e);
        continue;
    raised:
        snprintf(kind, sizeof kind, "DERIVE_RAISED:%s", d->name);
        snprintf(text, sizeof text, "'%s' records cannot be derived from the '%s' record here: %s: %s "
                 "(MLCommons' checker stops with an exception here)", d->name, d->from, d->src[which], err);
        return lc_msgs_add(g->a, &g->fix, rec->line, d->from, kind, text) ? oom(e) : 0;
    }
    return 0;
}

// Runs a key rule's checks on one record; each false or failing check is a finding filed under the
// key (KIND_FAILED:key, KIND_RAISED:key). 0, or -1 when out of memory.
static int run_checks(eng *g, const lc_keyrule *kr, lc_env *env, long line, lc_expr *const *chk, const char *const *src,
                      int n, const char *kind_prefix, const char *which) {
    char err[300], text[1200], kind[200];
    for (int j = 0; j < n; j++) {
        pv *res;
        if (lc_expr_eval(chk[j], env, &res, err, sizeof err)) {
            snprintf(kind, sizeof kind, "%s_RAISED:%s", kind_prefix, kr->name);
            snprintf(text, sizeof text, "check of %s'%s' could not be evaluated: %s: %s", which, kr->name, src[j], err);
        } else if (!pv_truthy(res)) {
            snprintf(kind, sizeof kind, "%s_FAILED:%s", kind_prefix, kr->name);
            snprintf(text, sizeof text, "check of %s'%s' failed: %s", which, kr->name, src[j]);
        } else continue;
        if (finding(g, kr->strict_only, kr->name, line, kr->name, kind, text)) return -1;
    }
    return 0;
}

static int run_conf(eng *g, lc_conf *c, lc_log *log, char queue[][128], long *qline, int *nq, tk_err *e) {
    char err[300], text[1200], kind[200];
    lc_env env = {0};
    env.tmp = g->a;
    env.cst = c->cst;
    env.s = c->state ? pv_deep_copy(g->a, c->state) : pv_new(g->a, PV_DICT);
    keystate *ks = lc_alloc(g->a, (size_t)(c->nkeys + 1) * sizeof *ks);
    if (!env.s || !ks) return oom(e);
    for (int i = 0; i < c->nderive; i++) TRY(derive(g, &c->derive[i], &env, log, e));
    for (int i = 0; i < c->nkeys; i++)
        if (!(ks[i].vals = pv_new(g->a, PV_LIST))) return oom(e);
    // this file's keys override what earlier files said about them
    for (size_t i = 0; i < g->ow.n;) {
        int drop = 0;
        for (int k = 0; k < c->nkeys && !drop; k++) drop = !strcmp(g->ow.m[i].okey, c->keys[k].name);
        if (drop) memmove(&g->ow.m[i], &g->ow.m[i + 1], (g->ow.n - i - 1) * sizeof(lc_msg)), g->ow.n--;
        else i++;
    }
    for (size_t ri = 0; ri < log->n; ri++) {
        const lc_record *rec = &log->rec[ri];
        const char *key = key_str(rec);
        if (!key) continue;
        int k = -1;
        for (int j = 0; j < c->nkeys; j++)
            if (c->keys[j].hash == rec->hash && !strcmp(c->keys[j].name, key)) { k = j; break; }
        if (k < 0) continue;
        lc_keyrule *kr = &c->keys[k];
        keystate *st = &ks[k];
        pv *value = pv_dict_get(rec->v, "value");
        if (pv_list_push(g->a, st->vals, value)) return oom(e);
        st->last_line = rec->line;
        env.v = rec->v;
        env.ts = rec->ts;
        env.has_ts = 1;
        if (!st->executed) {
            if (run_checks(g, kr, &env, rec->line, kr->chk, kr->chk_src, kr->nchk, "CHECK", "")) return oom(e);
            for (int j = 0; j < kr->npost; j++)
                if (lc_expr_exec(kr->post[j], &env, err, sizeof err)) {
                    snprintf(kind, sizeof kind, "POST_RAISED:%s", key);
                    snprintf(text, sizeof text, "action of '%s' failed: %s: %s", key, kr->post_src[j], err);
                    if (finding(g, kr->strict_only, kr->name, rec->line, kr->name, kind, text)) return oom(e);
                    break; // the rest of the action is not run (an exception in Python)
                }
            if (kr->include) {
                char name[128];
                if (include_name(g->set, kr->include, value, name, sizeof name) || *nq >= 64) {
                    char vs[100];
                    pv_str_of(value, vs, sizeof vs);
                    snprintf(kind, sizeof kind, "CONFIG_NOT_FOUND:%s", kr->include);
                    snprintf(text, sizeof text, "no rules for %s '%s' (MLCommons' checker stops with an exception here)", key, vs);
                    if (lc_msgs_add(g->a, &g->fix, rec->line, kr->name, kind, text)) return oom(e);
                } else {
                    qline[*nq] = rec->line;
                    snprintf(queue[(*nq)++], 128, "%s", name);
                }
            }
        }
        if (kr->nfirst && !st->first_done) { // checks of the first record of the key
            st->first_done = 1;
            if (run_checks(g, kr, &env, rec->line, kr->first, kr->first_src, kr->nfirst, "FIRST_CHECK", "the first "))
                return oom(e);
        }
        if (kr->alo) {
            pv *res;
            st->alo_seen = 1;
            if (lc_expr_eval(kr->alo, &env, &res, err, sizeof err)) {
                if (!st->alo_raised) {
                    st->alo_raised = 1;
                    snprintf(kind, sizeof kind, "ATLEAST_ONE_CHECK_RAISED:%s", key);
                    snprintf(text, sizeof text, "'%s' cannot be judged: %s: %s (MLCommons' checker stops with an exception here)",
                             key, kr->alo_src, err);
                    if (lc_msgs_add(g->a, &g->fix, rec->line, kr->name, kind, text)) return oom(e);
                }
            } else if (pv_truthy(res)) {
                st->alo_ok++;
            }
        }
        if (strstr(key, "submission_")) st->executed = 1;
    }
    for (int k = 0; k < c->nkeys; k++)
        if (c->keys[k].alo && ks[k].alo_seen && !ks[k].alo_ok) {
            snprintf(kind, sizeof kind, "ATLEAST_ONE_CHECK_FAILED:%s", c->keys[k].name);
            snprintf(text, sizeof text, "no '%s' record satisfies %s (last one at line %ld)", c->keys[k].name,
                     c->keys[k].alo_src, ks[k].last_line);
            if (lc_msgs_add(g->a, &g->fix, 0, c->keys[k].name, kind, text)) return oom(e);
        }
    // requirements on the number of records
    for (int k = 0; k < c->nkeys; k++) {
        lc_keyrule *kr = &c->keys[k];
        size_t n = ks[k].vals->u.l.n;
        pv **vals = ks[k].vals->u.l.v;
        if (kr->req == REQ_EXACTLY_ONE && n != 1) {
            int same = n > 0;
            for (size_t i = 1; i < n && same; i++) same = pv_eq(vals[i], vals[0]);
            if (same) { // the official checker only warns about repeats of one value
                snprintf(kind, sizeof kind, "REQ_EXACTLY_ONE_DUPLICATE_SAME_VALUE:%s:%zu", kr->name, n);
                snprintf(text, sizeof text, "exactly one '%s' record required, found %zu with the same value (last at line %ld)",
                         kr->name, n, ks[k].last_line);
                if (add_keyed(g, &g->warn, kr->name, ks[k].last_line, kr->name, kind, text)) return oom(e);
                continue;
            }
            snprintf(kind, sizeof kind, "REQ_EXACTLY_ONE:%s:%zu", kr->name, n);
            int w = snprintf(text, sizeof text, "exactly one '%s' record required, found %zu", kr->name, n);
            for (size_t i = 0; i < n && w < (int)sizeof text - 120; i++) {
                char vs[100];
                pv_str_of(vals[i], vs, sizeof vs);
                w += snprintf(text + w, sizeof text - (size_t)w, "%s%s", i ? ", " : " with different values: ", vs);
            }
            if (finding(g, kr->strict_only, kr->name, 0, kr->name, kind, text)) return oom(e);
        } else if ((kr->req == REQ_AT_LEAST_ONE && n < 1) || (kr->req == REQ_AT_LEAST && n < (size_t)kr->at_least)) {
            if (kr->req == REQ_AT_LEAST_ONE) snprintf(kind, sizeof kind, "REQ_AT_LEAST_ONE:%s", kr->name);
            else snprintf(kind, sizeof kind, "REQ_AT_LEAST:%s:%d", kr->name, kr->at_least);
            snprintf(text, sizeof text, "at least %d '%s' record%s required, found %zu", kr->req == REQ_AT_LEAST ? kr->at_least : 1,
                     kr->name, kr->req == REQ_AT_LEAST && kr->at_least != 1 ? "s" : "", n);
            if (finding(g, kr->strict_only, kr->name, 0, kr->name, kind, text)) return oom(e);
        } else if (kr->req == REQ_AT_LEAST_ONE_OR) {
            // the set {key, alternatives...}: one finding per distinct set
            int idx[16], ni = 0;
            idx[ni++] = k;
            for (int j = 0; j < kr->nalts && ni < 16; j++)
                for (int m = 0; m < c->nkeys; m++)
                    if (!strcmp(c->keys[m].name, kr->alts[j])) idx[ni++] = m;
            // sort the names to name the set; skip if an earlier key produced the same set
            const char *names[16];
            for (int i = 0; i < ni; i++) names[i] = c->keys[idx[i]].name;
            for (int i = 1; i < ni; i++)
                for (int j = i; j > 0 && strcmp(names[j - 1], names[j]) > 0; j--) {
                    const char *t = names[j];
                    names[j] = names[j - 1];
                    names[j - 1] = t;
                }
            int w = snprintf(kind, sizeof kind, "REQ_ONE_OF:");
            for (int i = 0; i < ni; i++) if (!i || strcmp(names[i], names[i - 1])) w += snprintf(kind + w, sizeof kind - (size_t)w, "%s%s", i ? "|" : "", names[i]);
            int any = 0, dup = 0;
            for (int i = 0; i < ni; i++) any |= ks[idx[i]].vals->u.l.n > 0;
            for (size_t i = 0; i < g->fix.n; i++) dup |= !strcmp(g->fix.m[i].kind, kind);
            if (any || dup) continue;
            w = snprintf(text, sizeof text, "at least one record required of");
            for (int i = 0; i < ni; i++) if (!i || strcmp(names[i], names[i - 1])) w += snprintf(text + w, sizeof text - (size_t)w, "%s'%s'", i ? " or " : " ", names[i]);
            if (lc_msgs_add(g->a, &g->fix, 0, kr->name, kind, text)) return oom(e);
        }
    }
    env.v = NULL;
    env.has_ts = 0;
    for (int i = 0; i < c->nends; i++) {
        lc_endrule *er = &c->ends[i];
        pv *res;
        if (lc_expr_eval(er->chk, &env, &res, err, sizeof err)) {
            snprintf(kind, sizeof kind, "END_CHECK_RAISED:%s", er->name);
            snprintf(text, sizeof text, "end check '%s' could not be evaluated: %s", er->name, err);
        } else if (!pv_truthy(res)) {
            snprintf(kind, sizeof kind, "END_CHECK_FAILED:%s", er->name);
            int w = snprintf(text, sizeof text, "end check '%s' failed: %s", er->name, er->src);
            if (er->diff[0]) explain_diff(er, &env, text + w, sizeof text - (size_t)w);
        } else continue;
        if (finding(g, er->strict_only, NULL, 0, NULL, kind, text)) return oom(e);
    }
    return 0;
}

// Warnings beyond the official checker; they never change the verdict.
static int extra_warnings(eng *g, const lc_log *log, lc_result *res, long start_line, long stop_line) {
    char text[400];
    const char *names[2] = {"run_start", "run_stop"};
    for (int w = 0; w < 2; w++) {
        long lines[4];
        int n = 0;
        for (size_t i = 0; i < log->n; i++) {
            const char *k = key_str(&log->rec[i]);
            if (k && !strcmp(k, names[w])) {
                if (n < 4) lines[n] = log->rec[i].line;
                n++;
            }
        }
        if (n > 1) {
            char kind[64];
            snprintf(kind, sizeof kind, "DUPLICATE_%s", w ? "RUN_STOP" : "RUN_START");
            snprintf(text, sizeof text, "%d %s records (lines %ld, %ld%s); the score uses the %s", n, names[w], lines[0], lines[1],
                     n > 2 ? ", ..." : "", w ? "first run_stop" : "last run_start before it");
            if (lc_msgs_add(g->a, &g->warn, lines[1], names[w], kind, text)) return -1;
        }
    }
    // Time going backwards: a record after run_start stamped more than a second before it. (Plain
    // non-monotonic time_ms is normal: ranks interleave, and MiniGo logs its evaluations late.)
    size_t rs = log->n;
    for (size_t i = 0; i < log->n && rs == log->n; i++) {
        const char *k = key_str(&log->rec[i]);
        if (k && !strcmp(k, "run_start")) rs = i;
    }
    size_t back = 0;
    long first = 0;
    for (size_t i = rs + 1; i < log->n; i++)
        if (log->rec[i].ts < log->rec[rs].ts - 1000 && !back++) {
            first = log->rec[i].line;
            snprintf(text, sizeof text, "time_ms goes backwards: the record at line %ld is %.0f ms before run_start (line %ld)",
                     first, log->rec[rs].ts - log->rec[i].ts, log->rec[rs].line);
        }
    if (back) {
        size_t l = strlen(text);
        if (back > 1) snprintf(text + l, sizeof text - l, " (%zu records in all)", back);
        if (lc_msgs_add(g->a, &g->warn, first, NULL, "CLOCK_BACKWARDS", text)) return -1;
    }
    if (res->has_ttt && res->ttt_min < 0) {
        snprintf(text, sizeof text, "negative time to train (%.4f min): run_stop at line %ld is before run_start at line %ld",
                 res->ttt_min, stop_line, start_line);
        if (lc_msgs_add(g->a, &g->warn, stop_line, "run_stop", "NEGATIVE_TTT", text)) return -1;
    }
    if (res->pass && res->stop_status && !strcmp(res->stop_status, "aborted")) {
        snprintf(text, sizeof text, "run_stop at line %ld has status 'aborted', yet the run passes and would be scored", stop_line);
        if (lc_msgs_add(g->a, &g->warn, stop_line, "run_stop", "ABORTED_BUT_COUNTED", text)) return -1;
    }
    return 0;
}

// The facts that do not depend on the rules; the lines of the run_start and run_stop they use.
static void log_facts(const lc_log *log, lc_result *res, long *start_line, long *stop_line) {
    double start = 0, stop = 0;
    int has_start = 0, has_stop = 0;
    for (size_t i = 0; i < log->n; i++) {
        const lc_record *r = &log->rec[i];
        const char *k = key_str(r);
        if (!k) continue;
        pv *val = pv_dict_get(r->v, "value");
        if (!res->benchmark && !strcmp(k, "submission_benchmark") && val->t == PV_STR) res->benchmark = val->u.s.s;
        if (!res->division && !strcmp(k, "submission_division") && val->t == PV_STR) res->division = val->u.s.s;
        // the result summarizer: last run_start, and run_stop, until it has both
        if (!(has_start && has_stop)) {
            if (!strcmp(k, "run_start")) { start = r->ts; *start_line = r->line; has_start = 1; }
            if (!strcmp(k, "run_stop")) {
                stop = r->ts;
                *stop_line = r->line;
                has_stop = 1;
                pv *st = pv_dict_get(pv_dict_get(r->v, "metadata"), "status");
                res->stop_status = st && st->t == PV_STR ? st->u.s.s : NULL;
            }
        }
    }
    if (has_start && has_stop) {
        res->has_ttt = 1;
        res->ttt_min = (stop - start) / 60 / 1000; // the summarizer's order of operations
    }
}

void lc_log_facts(const lc_log *log, lc_result *res) {
    long start_line = 0, stop_line = 0;
    memset(res, 0, sizeof *res);
    log_facts(log, res, &start_line, &stop_line);
}

// Runs the ruleset over a copy of the log header: records derived by its rules are appended to
// the copy only, so the caller's log is the same afterwards.
static int check_log(lc_rules *R, lc_arena *a, lc_log log, int strict, lc_result *res, tk_err *e) {
    memset(res, 0, sizeof *res);
    eng g = {.a = a, .set = R->set, .strict = strict};
    for (size_t i = 0; i < log.bad.n; i++)
        if (lc_msgs_add(a, &g.fix, log.bad.m[i].line, NULL, log.bad.m[i].kind, log.bad.m[i].text)) return oom(e);
    if (log.n == 0 && lc_msgs_add(a, &g.fix, 0, NULL, "NO_LOG_LINES", "no :::MLLOG records in the file"))
        return oom(e);
    long start_line = 0, stop_line = 0;
    log_facts(&log, res, &start_line, &stop_line);
    char queue[64][128];
    long qline[64] = {0};
    int nq = 0, head = 0;
    snprintf(queue[nq++], 128, "%s", R->root);
    while (head < nq) {
        lc_conf *c;
        long line = qline[head];
        TRY(lc_rules_conf(R, queue[head++], &c, e));
        if (c->missing) {
            char kind[200], text[300];
            snprintf(kind, sizeof kind, "CONFIG_NOT_FOUND:%s", c->name);
            snprintf(text, sizeof text, "no rule file %s.json for the division or benchmark the log names "
                     "(MLCommons' checker stops with an exception here)", c->name);
            if (lc_msgs_add(a, &g.fix, line, NULL, kind, text)) return oom(e);
            continue;
        }
        TRY(run_conf(&g, c, &log, queue, qline, &nq, e));
    }
    // errors in the official order: keyed findings, then the others
    for (size_t i = 0; i < g.ow.n; i++) {
        lc_msg *m = &g.ow.m[i];
        if (lc_msgs_add(a, &res->errors, m->line, m->key, m->kind, m->text)) return oom(e);
    }
    for (size_t i = 0; i < g.fix.n; i++) {
        lc_msg *m = &g.fix.m[i];
        if (lc_msgs_add(a, &res->errors, m->line, m->key, m->kind, m->text)) return oom(e);
    }
    res->pass = res->errors.n == 0;
    if (extra_warnings(&g, &log, res, start_line, stop_line)) return oom(e);
    res->warnings = g.warn;
    return 0;
}

int lc_check_log(lc_rules *R, lc_arena *a, lc_log *log, int strict, lc_result *res, tk_err *e) {
    return check_log(R, a, *log, strict, res, e);
}

int lc_check(lc_rules *R, lc_arena *a, const char *buf, size_t n, int strict, lc_result *res, tk_err *e) {
    lc_log log;
    if (lc_log_parse(a, buf, n, &log)) return oom(e);
    return check_log(R, a, log, strict, res, e);
}
