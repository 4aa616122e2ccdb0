// log-check: MLPerf Training compliance verdicts, scores and RCP checks (man 1 log-check).
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compliance/compliance.h"
#include "compliance/rcp.h"
#include "compliance/ruleset.h"
#include "compliance/set.h"
#include "core/cli.h"
#include "core/jsonl.h"

static const char *PROG = "log-check";
static const char *USAGE = "usage: log-check [--ruleset VERSION] [--strict] [--json] FILE...\n"
                           "       log-check --score [--ruleset VERSION] [--strict] [--json] [--accelerators N] DIR...\n"
                           "       log-check --rcp [--ruleset VERSION] [--json] DIR...\n"
                           "       log-check --list\n";

static void help(void) {
    printf("%s\n"
           "Check MLPerf Training result logs (:::MLLOG lines) for compliance, with the verdicts of\n"
           "MLCommons' compliance checker; score benchmark sets as its result summarizer does; check a\n"
           "set's convergence against the reference convergence points as its RCP checker does.\n\n"
           "  -r, --ruleset VERSION   training ruleset, e.g. 5.1.0 (see --list); default: the one each\n"
           "                          log (or set) fits best, the newest of equals (--json says which)\n"
           "  -s, --strict            1.0.0/1.1.0: also fail the checks later checker versions made\n"
           "                          errors (weights_initialization tensor lists)\n"
           "  -j, --json              one JSON object per file (or set) on stdout\n"
           "      --score             score each DIR of result_*.txt files (olympic mean, scaling.json)\n"
           "      --rcp               check each DIR's convergence against the ruleset's RCPs\n"
           "  -a, --accelerators N    with --score: accelerators of the system (default: from\n"
           "                          DIR/../../systems/<system>.json when present)\n"
           "      --list              the rulesets and their benchmarks\n"
           "      --rules DIR         rule directory (default: $TRAINKIT_SHARE/compliance, or the\n"
           "                          share/ next to the program)\n"
           "  -h, --help              this help\n"
           "  -V, --version           version\n\n"
           "Exit status: 0 all compliant, 1 some file not compliant (or a set without a score or\n"
           "failing its RCP check), 2 usage (also: a log's benchmark in no ruleset), 3 unreadable\n"
           "input, 4 output error.\n",
           USAGE);
}

// Rules: --rules, $TRAINKIT_SHARE/compliance, <exe>/../share/trainkit/compliance (installed),
// <exe>/../../share/compliance (a build tree such as build/bin/).
static int find_rules(const char *opt, char *out, size_t n) {
    struct stat st;
    if (opt) return snprintf(out, n, "%s", opt) >= (int)n ? -1 : 0;
    const char *env = getenv("TRAINKIT_SHARE");
    if (env && *env) return snprintf(out, n, "%s/compliance", env) >= (int)n ? -1 : 0;
    char exe[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *cand[] = {"%s/../share/trainkit/compliance", "%s/../../share/compliance"};
        for (int i = 0; i < 2; i++) {
            snprintf(out, n, cand[i], exe);
            if (stat(out, &st) == 0 && S_ISDIR(st.st_mode)) return 0;
        }
    }
    return snprintf(out, n, "/usr/local/share/trainkit/compliance") >= (int)n ? -1 : 0;
}

// Valid UTF-8 for JSON output: invalid bytes (lone surrogates, raw bytes) become U+FFFD.
static json_t *jstr(const char *s) {
    if (!s) return json_null();
    size_t n = strlen(s), o = 0;
    char *b = malloc(3 * n + 1);
    if (!b) return NULL;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        size_t k = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
        int ok = k && i + k <= n;
        for (size_t j = 1; ok && j < k; j++) ok = (p[i + j] & 0xc0) == 0x80;
        if (ok && k == 3) ok = !(c == 0xed && p[i + 1] >= 0xa0) && !(c == 0xe0 && p[i + 1] < 0xa0); // surrogates, overlong
        if (ok && k == 2) ok = c >= 0xc2;
        if (ok && k == 4) ok = c <= 0xf4 && !(c == 0xf0 && p[i + 1] < 0x90) && !(c == 0xf4 && p[i + 1] >= 0x90);
        if (ok) {
            memcpy(b + o, p + i, k);
            o += k;
            i += k;
        } else {
            memcpy(b + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
        }
    }
    json_t *j = json_stringn(b, o);
    free(b);
    return j;
}

static json_t *msgs_json(const lc_msgs *ms) {
    json_t *a = json_array();
    for (size_t i = 0; i < ms->n; i++) {
        const lc_msg *m = &ms->m[i];
        json_array_append_new(a, json_pack("{s:o,s:o,s:o,s:o}", "line", m->line ? json_integer(m->line) : json_null(),
                                           "key", jstr(m->key), "kind", jstr(m->kind), "message", jstr(m->text)));
    }
    return a;
}

static void print_msgs(const char *file, const lc_msgs *ms, const char *sev) {
    for (size_t i = 0; i < ms->n; i++) {
        const lc_msg *m = &ms->m[i];
        if (m->line) printf("%s: line %ld: %s: %s [%s]\n", file, m->line, sev, m->text, m->kind);
        else printf("%s: %s: %s [%s]\n", file, sev, m->text, m->kind);
    }
}

typedef struct {
    lc_catalog *cat;
    lc_ruleset *fixed; // --ruleset, or NULL: each log (set) gets the ruleset it fits best
    lc_arena *arena;
    int strict, json;
} ctx;

// The ruleset for logs: the fixed one, or detected. TK_EUSAGE (e filled) when none can be picked.
static int pick_ruleset(ctx *c, lc_log *logs, int n, lc_ruleset **rs, lc_detect *d, tk_err *e) {
    memset(d, 0, sizeof *d);
    if (c->fixed) {
        *rs = c->fixed;
        return 0;
    }
    TRY(lc_detect_ruleset(c->cat, c->arena, logs, n, c->strict, d, e));
    *rs = d->chosen;
    return 0;
}

// JSON members and text saying how the ruleset was picked (nothing when it was given).
static void add_detection(json_t *o, const lc_detect *d) {
    if (!d->chosen) return;
    json_t *fits = json_array();
    for (int i = 0; i < d->nfit; i++) json_array_append_new(fits, json_string(d->fit[i]->version));
    json_object_set_new(o, "ruleset_detected", json_true());
    json_object_set_new(o, "ruleset_fits", fits);
}
static void print_detection(const lc_detect *d) {
    if (!d->chosen) return;
    printf(" detected");
    for (int i = 0; i < d->nfit - 1; i++) printf("%s%s", i ? " " : ", also fits ", d->fit[i]->version);
}

static int check_file(ctx *c, const char *path, int *worst, tk_err *e) {
    char *buf = NULL;
    size_t n = 0;
    tk_err fe = {0};
    int rc = lc_read_file(path, &buf, &n, &fe);
    if (rc == TK_EDATA) {
        tk_cli_fail(PROG, &fe);
        if (*worst < TK_EDATA) *worst = TK_EDATA;
        return 0;
    }
    if (rc) return *e = fe, rc;
    lc_arena_reset(c->arena);
    lc_log log;
    lc_result res;
    lc_ruleset *rs;
    lc_detect d;
    lc_rules *rules;
    rc = lc_log_parse(c->arena, buf, n, &log);
    free(buf);
    if (rc) return tk_err_set(e, TK_EIO, "out of memory");
    if ((rc = pick_ruleset(c, &log, 1, &rs, &d, &fe)) == TK_EUSAGE) { // concerns this file only
        tk_err_where(&fe, "%s", path);
        tk_cli_fail(PROG, &fe);
        if (*worst < TK_EUSAGE) *worst = TK_EUSAGE;
        return 0;
    }
    if (rc) return *e = fe, rc;
    TRY(lc_ruleset_rules(c->cat, rs, &rules, e));
    TRY(lc_check_log(rules, c->arena, &log, c->strict, &res, e));
    if (!res.pass && *worst == 0) *worst = 1;
    if (c->json) {
        json_t *o = json_pack("{s:s,s:o,s:s,s:o,s:o,s:s,s:o,s:o,s:o}", "type", "verdict", "file", jstr(path), "ruleset",
                              rs->version, "benchmark", jstr(res.benchmark), "division", jstr(res.division), "verdict",
                              res.pass ? "pass" : "fail", "errors", msgs_json(&res.errors), "warnings",
                              msgs_json(&res.warnings), "ttt_min", res.has_ttt ? json_real(res.ttt_min) : json_null());
        add_detection(o, &d);
        return tk_jsonl_emit(stdout, o, e);
    }
    printf("%s: %s (%s, %s, ruleset %s", path, res.pass ? "pass" : "FAIL", res.benchmark ? res.benchmark : "no benchmark",
           res.division ? res.division : "no division", rs->version);
    print_detection(&d);
    if (c->strict) printf(", strict");
    if (res.has_ttt) printf(", %.4f min", res.ttt_min);
    printf(")\n");
    print_msgs(path, &res.errors, "error");
    print_msgs(path, &res.warnings, "warning");
    return 0;
}

// Reads a set under its ruleset; prints and records in *worst what concerns this set only.
// Returns 0 with *s (NULL: skip the set), or a fatal error.
static int open_set(ctx *c, const char *dir, int rcp, lc_set **s, int *worst, tk_err *e) {
    TRY(lc_set_read(c->cat, c->fixed, c->strict, rcp, dir, s, e));
    for (int i = 0; i < (*s)->n; i++)
        if ((*s)->runs[i].err) { // an unreadable run is not counted, as the summarizer drops it
            tk_cli_fail(PROG, (*s)->runs[i].err);
            if (*worst < TK_EDATA) *worst = TK_EDATA;
        }
    if (!(*s)->rs) { // the directory, its scaling.json or no ruleset to pick
        tk_err *why = &(*s)->why;
        if (!why->where[0]) tk_err_where(why, "%s", dir);
        tk_cli_fail(PROG, why);
        if (*worst < why->code) *worst = why->code;
        lc_set_free(*s);
        *s = NULL;
    }
    return 0;
}

// The summarizer's benchmark: the first submission_benchmark of the set, else the directory's name.
static void set_benchmark(const char *dir, const char *first, char *out, size_t n) {
    if (first) {
        snprintf(out, n, "%s", first);
        return;
    }
    const char *b = strrchr(dir, '/');
    snprintf(out, n, "%s", b && b[1] ? b + 1 : dir);
}

static int score_set(ctx *c, const char *dir, long accel_opt, int *worst, tk_err *e) {
    lc_set *s;
    TRY(open_set(c, dir, 0, &s, worst, e));
    if (!s) return 0;
    lc_ruleset *rs = s->rs;
    lc_detect d = s->d;
    double *times = calloc((size_t)s->n + 1, sizeof *times);
    json_t *counted = json_array(), *notc = json_array();
    int nt = 0, dropped = 0, rc = times ? 0 : tk_err_set(e, TK_EIO, "out of memory");
    const char *first = s->benchmark;
    for (int i = 0; i < s->n && !rc; i++) {
        const lc_set_run *r = &s->runs[i];
        if (!r->err && r->pass && r->has_ttt) {
            times[nt++] = r->ttt_min;
            json_array_append_new(counted, json_pack("{s:o,s:f}", "file", jstr(r->name), "ttt_min", r->ttt_min));
        } else {
            dropped++;
            json_array_append_new(notc, jstr(r->name));
        }
    }
    char bench[128];
    set_benchmark(dir, first, bench, sizeof bench);
    const lc_bench *b = lc_ruleset_bench(rs, bench);
    lc_score sc;
    lc_olympic(times, nt, dropped, b ? b->drop : 1, &sc);
    double score = sc.score_min * s->scaling; // the summarizer: score *= scaling_factor
    long accel = accel_opt ? accel_opt : s->accelerators;
    double r2 = sc.has_score ? lc_round2(score) : 0;
    if (!rc && !sc.has_score && *worst == 0) *worst = 1;
    if (!rc && c->json) {
        json_t *o = json_pack("{s:s,s:o,s:s,s:o,s:i,s:o,s:o,s:o,s:o,s:o,s:f,s:o,s:o,s:o}", "type", "score", "dir", jstr(dir),
                              "ruleset", rs->version, "benchmark", jstr(bench), "runs", s->n, "runs_required",
                              b ? json_integer(b->runs) : json_null(), "counted", counted, "not_counted", notc, "score_min",
                              sc.has_score ? json_real(score) : json_null(), "score_unscaled_min",
                              sc.has_score ? json_real(sc.score_min) : json_null(), "scaling_factor", s->scaling,
                              "score_min_rounded", sc.has_score ? json_real(r2) : json_null(), "accelerators",
                              accel ? json_integer(accel) : json_null(), "per_accelerator_min",
                              sc.has_score && accel ? json_real(r2 * (double)accel) : json_null());
        add_detection(o, &d);
        rc = tk_jsonl_emit(stdout, o, e);
    } else if (!rc) {
        // without a benchmark in the logs the summarizer's is the directory's name: not said twice
        char shown[200];
        if (first || !b) snprintf(shown, sizeof shown, "%s", first ? bench : "no benchmark in the logs");
        else snprintf(shown, sizeof shown, "%s (the directory's name; no log names a benchmark)", bench);
        if (sc.has_score) {
            printf("%s: %s: %.4f min (olympic mean of %d runs, %d not counted", dir, shown, score,
                   nt - sc.max_dropped - (sc.max_dropped - dropped), dropped);
            if (s->has_scaling) printf("; unscaled %.4f min x %.6g from scaling.json", sc.score_min, s->scaling);
            printf(")");
        } else {
            printf("%s: %s: no score (%d of %d runs not counted, at most %d allowed)", dir, shown, dropped, s->n, sc.max_dropped);
        }
        if (sc.has_score && accel) printf("; %.2f x %ld accelerators = %.2f accelerator-min", r2, accel, r2 * (double)accel);
        if (b && s->n < b->runs) printf("; %d of the %d result files a set holds", s->n, b->runs);
        if (d.chosen) {
            printf(" [ruleset %s", rs->version);
            print_detection(&d);
            printf("]");
        }
        printf("\n");
    }
    if (rc || !c->json) {
        json_decref(counted);
        json_decref(notc);
    }
    free(times);
    lc_set_free(s);
    return rc;
}

static int rcp_set(ctx *c, const char *dir, int *worst, tk_err *e) {
    lc_set *s;
    TRY(open_set(c, dir, 1, &s, worst, e));
    if (!s) return 0;
    lc_ruleset *rs = s->rs;
    lc_detect d = s->d;
    lc_rcp_run *runs = calloc((size_t)s->n + 1, sizeof *runs);
    int n = 0, rc = runs ? 0 : tk_err_set(e, TK_EIO, "out of memory");
    for (int i = 0; i < s->n && !rc; i++)
        if (!s->runs[i].err) runs[n++] = s->runs[i].rcp;
    lc_rcp_result r;
    lc_arena_reset(c->arena);
    if (!rc) rc = lc_rcp_check(c->cat, rs, c->arena, runs, n, &r, e);
    free(runs);
    if (rc) {
        lc_set_free(s);
        return rc;
    }
    const char *verdict = !r.judged ? "none" : r.pass ? "pass" : "fail";
    if ((!r.judged || !r.pass) && *worst == 0) *worst = 1;
    if (c->json) {
        json_t *o = json_pack("{s:s,s:o,s:s,s:o,s:s,s:o,s:o,s:i,s:i}", "type", "rcp", "dir", jstr(dir), "ruleset", rs->version,
                              "benchmark", jstr(r.benchmark), "verdict", verdict, "message", jstr(r.message),
                              "global_batch_size", r.has_bs ? json_real(r.bs) : json_null(), "runs", r.runs,
                              "not_converged", r.not_converged);
        json_object_set_new(o, "rcp", r.has_stats ? jstr(r.rcp_name) : json_null());
        const char *f[] = {"rcp_mean", "rcp_stdev", "rcp_min_epochs", "rcp_max_speedup", "submission_mean"};
        double v[] = {r.rcp_mean, r.rcp_stdev, r.min_epochs, r.max_speedup, r.subm_mean};
        for (int i = 0; i < 5; i++) json_object_set_new(o, f[i], r.has_stats && isfinite(v[i]) ? json_real(v[i]) : json_null());
        json_object_set_new(o, "norm_factor", r.judged && isfinite(r.norm) ? json_real(r.norm) : json_null());
        add_detection(o, &d);
        rc = tk_jsonl_emit(stdout, o, e);
    } else {
        printf("%s: %s: RCP %s: %s", dir, r.benchmark ? r.benchmark : "no benchmark",
               !r.judged ? "not judged" : r.pass ? "pass" : "FAIL", r.message);
        if (r.has_stats)
            printf(" (%s: mean %.6g, min %.6g; submission mean %.6g of %d runs, %d not converged)", r.rcp_name, r.rcp_mean,
                   r.min_epochs, r.subm_mean, r.runs, r.not_converged);
        if (r.judged) printf(", normalization factor %.6g", r.norm);
        printf(" [ruleset %s", rs->version);
        print_detection(&d);
        printf("]\n");
    }
    lc_set_free(s);
    return rc;
}

static void list_rulesets(const lc_catalog *cat) {
    for (int i = 0; i < cat->nsets; i++) {
        const lc_ruleset *rs = &cat->sets[i];
        printf("%s:", rs->version);
        for (int j = 0; j < rs->nbench; j++)
            printf(" %s%s", rs->bench[j].name, rs->bench[j].rcp_only ? "(RCP only)" : rs->bench[j].rcp ? "" : "(no RCP)");
        printf("\n");
    }
}

// "5.1" and "v5.1" mean 5.1.0; anything but digits and dots is refused.
static int normalize_version(const char *in, char *out, size_t n) {
    int v[3] = {0, 0, 0}, used = 0, k;
    const char *p = in + (*in == 'v');
    for (const char *q = p; *q; q++)
        if (!((*q >= '0' && *q <= '9') || *q == '.')) return -1;
    k = sscanf(p, "%d.%d%n.%d%n", &v[0], &v[1], &used, &v[2], &used);
    if (k < 2 || p[used]) return -1;
    snprintf(out, n, "%d.%d.%d", v[0], v[1], v[2]);
    return 0;
}

int main(int argc, char **argv) {
    enum { O_SCORE = 256, O_RULES, O_RCP, O_LIST };
    static const struct option opts[] = {
        {"ruleset", required_argument, 0, 'r'}, {"strict", no_argument, 0, 's'},
        {"json", no_argument, 0, 'j'},          {"score", no_argument, 0, O_SCORE},
        {"rcp", no_argument, 0, O_RCP},         {"list", no_argument, 0, O_LIST},
        {"accelerators", required_argument, 0, 'a'}, {"rules", required_argument, 0, O_RULES},
        {"help", no_argument, 0, 'h'},          {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    ctx c = {0};
    int score = 0, rcp = 0, list = 0, opt;
    long accel = 0;
    const char *rules_opt = NULL, *ruleset = NULL;
    tk_err e = {0};
    opterr = 0; // our own messages, naming the program without its path
    while ((opt = getopt_long(argc, argv, ":r:sja:hV", opts, NULL)) != -1) {
        switch (opt) {
        case 'r': ruleset = optarg; break;
        case 's': c.strict = 1; break;
        case 'j': c.json = 1; break;
        case O_SCORE: score = 1; break;
        case O_RCP: rcp = 1; break;
        case O_LIST: list = 1; break;
        case 'a': {
            int64_t v;
            if (tk_parse_i64(optarg, 1, 1000000000, "--accelerators", &v, &e)) return tk_cli_usage_error(PROG, USAGE, "%s", e.what);
            accel = (long)v;
            break;
        }
        case O_RULES: rules_opt = optarg; break;
        default: return tk_cli_common_option(PROG, USAGE, help, opt, argv);
        }
    }
    if (score && rcp) return tk_cli_usage_error(PROG, USAGE, "--score and --rcp are separate runs");
    if (optind >= argc && !list) return tk_cli_usage_error(PROG, USAGE, "no %s given", score || rcp ? "directory" : "file");
    if (accel && !score) return tk_cli_usage_error(PROG, USAGE, "--accelerators goes with --score");
    char version[64];
    if (ruleset && normalize_version(ruleset, version, sizeof version))
        return tk_cli_usage_error(PROG, USAGE, "--ruleset: expected a version such as 5.1.0, got '%s'", ruleset);
    char dir[PATH_MAX];
    if (find_rules(rules_opt, dir, sizeof dir)) return tk_cli_usage_error(PROG, USAGE, "--rules: path too long");
    if (lc_catalog_open(dir, "training", &c.cat, &e)) return tk_cli_fail(PROG, &e);
    if (list) {
        list_rulesets(c.cat);
        lc_catalog_free(c.cat);
        return tk_cli_close_stdout(&e) ? tk_cli_fail(PROG, &e) : 0;
    }
    int rc = 0;
    if (ruleset && !(c.fixed = lc_catalog_find(c.cat, version))) {
        char known[1000];
        lc_catalog_versions(c.cat, known, sizeof known);
        tk_err_set(&e, TK_EUSAGE, "no rules for training %s", version);
        tk_err_where(&e, "%s", dir);
        tk_err_hint(&e, "known rulesets: %s", known[0] ? known : "none");
        rc = tk_cli_fail(PROG, &e);
    } else if (!(c.arena = lc_arena_new())) {
        tk_err_set(&e, TK_EIO, "out of memory");
        rc = tk_cli_fail(PROG, &e);
    } else {
        int worst = 0;
        for (int i = optind; i < argc && !rc; i++)
            rc = score ? score_set(&c, argv[i], accel, &worst, &e)
                 : rcp ? rcp_set(&c, argv[i], &worst, &e)
                       : check_file(&c, argv[i], &worst, &e);
        if (rc) rc = tk_cli_fail(PROG, &e);
        else if (tk_cli_close_stdout(&e)) rc = tk_cli_fail(PROG, &e);
        else rc = worst;
    }
    lc_arena_free(c.arena);
    lc_catalog_free(c.cat);
    return rc;
}
