// log-check: MLPerf Training compliance verdicts and scores (man 1 log-check).
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compliance/compliance.h"
#include "core/cli.h"
#include "core/jsonl.h"

static const char *PROG = "log-check";
static const char *USAGE = "usage: log-check [--ruleset VERSION] [--strict] [--json] FILE...\n"
                           "       log-check --score [--ruleset VERSION] [--strict] [--json] [--accelerators N] DIR...\n";

static void help(void) {
    printf("%s\n"
           "Check MLPerf Training result logs (:::MLLOG lines) for compliance, with the verdicts of\n"
           "MLCommons' compliance checker, or score benchmark sets as its result summarizer does.\n\n"
           "  -r, --ruleset VERSION   training ruleset: 1.0.0 or 1.1.0 (default 1.1.0)\n"
           "  -s, --strict            also fail the checks later checker versions made errors\n"
           "                          (weights_initialization tensor lists); default: the checker of the round\n"
           "  -j, --json              one JSON object per file (or set) on stdout\n"
           "      --score             score each DIR of result_*.txt files (olympic mean)\n"
           "  -a, --accelerators N    with --score: accelerators of the system (default: from\n"
           "                          DIR/../../systems/<system>.json when present)\n"
           "      --rules DIR         rule directory (default: $TRAINKIT_SHARE/compliance, or the\n"
           "                          share/ next to the program)\n"
           "  -h, --help              this help\n"
           "  -V, --version           version\n\n"
           "Exit status: 0 all compliant, 1 some file not compliant (or a set without a score),\n"
           "2 usage, 3 unreadable input, 4 output error.\n",
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

static int read_file(const char *path, char **buf, size_t *len, tk_err *e) {
    int fd = strcmp(path, "-") ? open(path, O_RDONLY) : dup(0); // "-": standard input
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int err = errno;
        if (fd >= 0) close(fd);
        tk_err_errno(e, err, "cannot read");
        e->code = TK_EDATA; // unreadable input is exit 3 (man 1 log-check)
        return tk_err_where(e, "%s", path);
    }
    if (S_ISDIR(st.st_mode)) {
        close(fd);
        tk_err_set(e, TK_EDATA, "is a directory");
        return tk_err_where(e, "%s", path);
    }
    size_t cap = st.st_size > 0 && S_ISREG(st.st_mode) ? (size_t)st.st_size + 1 : 65536, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (!b) {
            close(fd);
            return tk_err_set(e, TK_EIO, "out of memory reading %s", path);
        }
        if (n == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) free(b);
            b = nb;
            continue;
        }
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int err = errno;
            free(b);
            close(fd);
            tk_err_errno(e, err, "cannot read");
            e->code = TK_EDATA;
            return tk_err_where(e, "%s", path);
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    *buf = b;
    *len = n;
    return 0;
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
    lc_rules *rules;
    lc_arena *arena;
    const char *ruleset;
    int strict, json;
} ctx;

// Check one file. Returns 0 (pass), 1 (fail) or an error code (e filled); res stays valid
// until the arena is reset.
static int check_one(ctx *c, const char *path, lc_result *res, tk_err *e) {
    char *buf = NULL;
    size_t n = 0;
    TRY(read_file(path, &buf, &n, e));
    lc_arena_reset(c->arena);
    int rc = lc_check(c->rules, c->arena, buf, n, c->strict, res, e);
    free(buf);
    if (rc) return rc;
    return res->pass ? 0 : 1;
}

static int cmd_check(ctx *c, int argc, char **argv, tk_err *e) {
    int worst = 0;
    for (int i = 0; i < argc; i++) {
        lc_result res;
        tk_err fe = {0};
        int rc = check_one(c, argv[i], &res, &fe);
        if (rc > 1) {
            if (rc != TK_EDATA) {
                *e = fe;
                return rc;
            }
            tk_cli_fail(PROG, &fe);
            worst = TK_EDATA;
            continue;
        }
        if (rc == 1 && worst == 0) worst = 1;
        if (c->json) {
            json_t *o = json_pack("{s:s,s:o,s:s,s:o,s:o,s:s,s:o,s:o,s:o}", "type", "verdict", "file", jstr(argv[i]), "ruleset",
                                  c->ruleset, "benchmark", jstr(res.benchmark), "division", jstr(res.division), "verdict",
                                  res.pass ? "pass" : "fail", "errors", msgs_json(&res.errors), "warnings",
                                  msgs_json(&res.warnings), "ttt_min", res.has_ttt ? json_real(res.ttt_min) : json_null());
            TRY(tk_jsonl_emit(stdout, o, e));
        } else {
            printf("%s: %s (%s, %s, ruleset %s%s", argv[i], res.pass ? "pass" : "FAIL",
                   res.benchmark ? res.benchmark : "no benchmark", res.division ? res.division : "no division", c->ruleset,
                   c->strict ? ", strict" : "");
            if (res.has_ttt) printf(", %.4f min", res.ttt_min);
            printf(")\n");
            print_msgs(argv[i], &res.errors, "error");
            print_msgs(argv[i], &res.warnings, "warning");
        }
    }
    return worst;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Accelerators of the system a set belongs to: <org>/systems/<system>.json beside <org>/results/<system>/<bench>.
static long system_accelerators(const char *dir) {
    char real[PATH_MAX], path[PATH_MAX + 64];
    if (!realpath(dir, real)) return 0;
    char *b = strrchr(real, '/');
    if (!b) return 0;
    *b = 0; // .../results/<system>
    char *sys = strrchr(real, '/');
    if (!sys) return 0;
    *sys++ = 0;
    char *res = strrchr(real, '/');
    if (!res) return 0;
    *res = 0;
    snprintf(path, sizeof path, "%s/systems/%s.json", real, sys);
    json_t *j = json_load_file(path, 0, NULL);
    if (!j) return 0;
    long v[2] = {0, 0};
    const char *f[2] = {"number_of_nodes", "accelerators_per_node"};
    for (int i = 0; i < 2; i++) {
        json_t *x = json_object_get(j, f[i]);
        if (json_is_integer(x)) v[i] = (long)json_integer_value(x);
        else if (json_is_string(x)) v[i] = strtol(json_string_value(x), NULL, 10);
    }
    json_decref(j);
    return v[0] > 0 ? v[0] * (v[1] > 1 ? v[1] : 1) : 0; // the summarizer's nodes * max(per_node, 1)
}

static int cmd_score(ctx *c, int argc, char **argv, long accel_opt, tk_err *e) {
    int worst = 0;
    for (int d = 0; d < argc; d++) {
        DIR *dp = opendir(argv[d]);
        if (!dp) {
            tk_err fe = {0};
            tk_err_errno(&fe, errno, "cannot open the directory");
            fe.code = TK_EDATA;
            tk_err_where(&fe, "%s", argv[d]);
            tk_cli_fail(PROG, &fe);
            worst = TK_EDATA;
            continue;
        }
        char **names = NULL;
        size_t nn = 0;
        struct dirent *de;
        while ((de = readdir(dp)))
            if (!fnmatch("result_*.txt", de->d_name, FNM_PERIOD)) {
                char **nv = realloc(names, (nn + 1) * sizeof *names);
                if (!nv || !(nv[nn] = strdup(de->d_name))) {
                    closedir(dp);
                    return tk_err_set(e, TK_EIO, "out of memory");
                }
                names = nv;
                nn++;
            }
        closedir(dp);
        qsort(names, nn, sizeof *names, cmp_str);
        double *times = calloc(nn + 1, sizeof *times);
        json_t *counted = json_array(), *notc = json_array();
        int nt = 0, dropped = 0;
        char bench[64] = "";
        for (size_t i = 0; i < nn; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", argv[d], names[i]);
            lc_result res;
            tk_err fe = {0};
            int rc = check_one(c, path, &res, &fe);
            if (rc > 1) { // an unreadable run is not counted, as the summarizer drops it
                tk_cli_fail(PROG, &fe);
                worst = TK_EDATA;
            }
            if (!bench[0] && rc <= 1 && res.benchmark) snprintf(bench, sizeof bench, "%s", res.benchmark);
            if (rc == 0 && res.has_ttt) {
                times[nt++] = res.ttt_min;
                json_array_append_new(counted, json_pack("{s:s,s:f}", "file", names[i], "ttt_min", res.ttt_min));
            } else {
                dropped++;
                json_array_append_new(notc, json_string(names[i]));
            }
        }
        if (!bench[0]) { // the summarizer names the benchmark by its directory
            const char *b = strrchr(argv[d], '/');
            snprintf(bench, sizeof bench, "%s", b && b[1] ? b + 1 : argv[d]);
        }
        lc_score sc;
        lc_olympic(times, nt, dropped, bench, &sc);
        long accel = accel_opt ? accel_opt : system_accelerators(argv[d]);
        double r2 = sc.has_score ? lc_round2(sc.score_min) : 0;
        if (!sc.has_score && worst == 0) worst = 1;
        if (c->json) {
            json_t *o = json_pack("{s:s,s:o,s:s,s:s,s:i,s:o,s:o,s:o,s:o,s:o,s:o}", "type", "score", "dir", jstr(argv[d]),
                                  "ruleset", c->ruleset, "benchmark", bench, "runs", (int)nn, "counted", counted,
                                  "not_counted", notc, "score_min", sc.has_score ? json_real(sc.score_min) : json_null(),
                                  "score_min_rounded", sc.has_score ? json_real(r2) : json_null(), "accelerators",
                                  accel ? json_integer(accel) : json_null(), "per_accelerator_min",
                                  sc.has_score && accel ? json_real(r2 * (double)accel) : json_null());
            TRY(tk_jsonl_emit(stdout, o, e));
        } else {
            if (sc.has_score)
                printf("%s: %s: %.4f min (olympic mean of %d runs, %d not counted)", argv[d], bench, sc.score_min,
                       nt - sc.max_dropped - (sc.max_dropped - dropped), dropped);
            else
                printf("%s: %s: no score (%d of %zu runs not counted, at most %d allowed)", argv[d], bench, dropped, nn,
                       sc.max_dropped);
            if (sc.has_score && accel) printf("; %.2f x %ld accelerators = %.2f accelerator-min", r2, accel, r2 * (double)accel);
            printf("\n");
            json_decref(counted);
            json_decref(notc);
        }
        for (size_t i = 0; i < nn; i++) free(names[i]);
        free(names);
        free(times);
    }
    return worst;
}

int main(int argc, char **argv) {
    static const struct option opts[] = {
        {"ruleset", required_argument, 0, 'r'}, {"strict", no_argument, 0, 's'},
        {"json", no_argument, 0, 'j'},          {"score", no_argument, 0, 'S'},
        {"accelerators", required_argument, 0, 'a'}, {"rules", required_argument, 0, 'R'},
        {"help", no_argument, 0, 'h'},          {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    ctx c = {.ruleset = "1.1.0"};
    int score = 0, opt;
    long accel = 0;
    const char *rules_opt = NULL;
    tk_err e = {0};
    opterr = 0; // our own messages, naming the program without its path
    while ((opt = getopt_long(argc, argv, ":r:sja:hV", opts, NULL)) != -1) {
        switch (opt) {
        case 'r': c.ruleset = optarg; break;
        case 's': c.strict = 1; break;
        case 'j': c.json = 1; break;
        case 'S': score = 1; break;
        case 'a': {
            int64_t v;
            if (tk_parse_i64(optarg, 1, 1000000000, "--accelerators", &v, &e)) return tk_cli_usage_error(PROG, USAGE, "%s", e.what);
            accel = (long)v;
            break;
        }
        case 'R': rules_opt = optarg; break;
        default: return tk_cli_common_option(PROG, USAGE, help, opt, argv);
        }
    }
    if (optind >= argc) return tk_cli_usage_error(PROG, USAGE, "no %s given", score ? "directory" : "file");
    if (accel && !score) return tk_cli_usage_error(PROG, USAGE, "--accelerators goes with --score");
    for (const char *p = c.ruleset; *p; p++)
        if (!((*p >= '0' && *p <= '9') || *p == '.'))
            return tk_cli_usage_error(PROG, USAGE, "--ruleset: expected a version such as 1.1.0, got '%s'", c.ruleset);
    char dir[PATH_MAX];
    if (find_rules(rules_opt, dir, sizeof dir)) return tk_cli_usage_error(PROG, USAGE, "--rules: path too long");
    int rc = lc_rules_open(dir, "training", c.ruleset, &c.rules, &e);
    if (rc) return tk_cli_fail(PROG, &e);
    if (!(c.arena = lc_arena_new())) {
        lc_rules_free(c.rules);
        tk_err_set(&e, TK_EIO, "out of memory");
        return tk_cli_fail(PROG, &e);
    }
    rc = score ? cmd_score(&c, argc - optind, argv + optind, accel, &e) : cmd_check(&c, argc - optind, argv + optind, &e);
    lc_arena_free(c.arena);
    lc_rules_free(c.rules);
    if (rc > 1 && e.code) return tk_cli_fail(PROG, &e);
    tk_err ce = {0};
    if (tk_cli_close_stdout(&ce)) return tk_cli_fail(PROG, &ce);
    return rc;
}
