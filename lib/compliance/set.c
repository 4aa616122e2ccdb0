// Reading result files and benchmark sets (a directory of result_*.txt, as MLCommons' result
// summarizer and RCP checker see it): file contents, the set's scaling.json and the size of the
// system it ran on. See set.h.
#include "compliance/set.h"
#include "core/json_text.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int lc_read_file(const char *path, char **buf, size_t *len, tk_err *e) {
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

int lc_json_fail(tk_err *e, const char *what, const char *path, const json_error_t *je) {
    char text[4 * JSON_ERROR_TEXT_LENGTH];
    tk_json_err_text(text, sizeof text, je);
    tk_err_set(e, TK_EDATA, "%s: %s", what, text);
    FILE *fp = fopen(path, "rb");
    int c = ' ';
    while (fp && (c = getc(fp)) != EOF && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) {}
    if (fp) fclose(fp);
    if (fp && c == EOF) tk_err_hint(e, "the file is empty or white space");
    else if (fp && c != '{') tk_err_hint(e, "the file does not start with '{' (byte 0x%02x): not a JSON object", (unsigned)c);
    return tk_err_where(e, "%s: line %d, offset %d", path, je->line, je->position);
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

// scaling.json: {"scaling_factor": x}, which the summarizer multiplies the score by.
static int read_scaling(lc_set *s, tk_err *e) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/scaling.json", s->dir);
    struct stat st;
    s->scaling = 1.0;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return 0;
    json_error_t je;
    json_t *j = json_load_file(path, JSON_DECODE_ANY, &je);
    if (!j) {
        return lc_json_fail(e, "scaling.json does not parse", path, &je);
    }
    json_t *f = json_object_get(j, "scaling_factor");
    if (!json_is_number(f)) {
        json_decref(j);
        tk_err_set(e, TK_EDATA, "scaling.json has no number \"scaling_factor\"");
        return tk_err_where(e, "%s", path);
    }
    s->has_scaling = 1;
    s->scaling = json_number_value(f);
    json_decref(j);
    return 0;
}

static int oom(tk_err *e) { return tk_err_set(e, TK_EIO, "out of memory"); }

// The result_*.txt of s->dir, sorted by name. A directory that cannot be listed: TK_EDATA.
static int list_runs(lc_set *s, tk_err *e) {
    DIR *dp = opendir(s->dir);
    if (!dp) {
        tk_err_errno(e, errno, "cannot open the directory");
        e->code = TK_EDATA;
        return tk_err_where(e, "%s", s->dir);
    }
    struct dirent *de;
    size_t cap = 0;
    int rc = 0;
    while (!rc && (de = readdir(dp))) {
        if (fnmatch("result_*.txt", de->d_name, FNM_PERIOD)) continue;
        if ((size_t)s->n == cap) {
            cap = cap ? 2 * cap : 16;
            lc_set_run *nr = realloc(s->runs, cap * sizeof *nr);
            if (!nr) {
                rc = oom(e);
                break;
            }
            s->runs = nr;
        }
        memset(&s->runs[s->n], 0, sizeof *s->runs);
        if (!(s->runs[s->n++].name = strdup(de->d_name))) rc = oom(e);
    }
    closedir(dp);
    if (!rc) qsort(s->runs, (size_t)s->n, sizeof *s->runs, cmp_str); // name first in the struct
    return rc;
}

// The RCP reading of buf under ruleset rs, its values copied into keep (tmp is reset per log).
static int rcp_keep(const lc_ruleset *rs, lc_arena *tmp, lc_arena *keep, const char *buf, size_t len, lc_rcp_run *o) {
    o->name = NULL;
    if (lc_rcp_read(rs, tmp, buf, len, o)) return -1;
    if (o->bs && !(o->bs = pv_deep_copy(keep, o->bs))) return -1;
    if (o->benchmark && !(o->benchmark = pv_deep_copy(keep, o->benchmark))) return -1;
    return 0;
}

// Reads one result file, checks it (under the fixed ruleset, or under those it may be judged by)
// and keeps what the set needs; the log itself lives in tmp until the next file.
static int read_run(lc_set *s, lc_catalog *c, lc_ruleset *fixed, lc_detector *dt, int strict, int rcp, lc_arena *tmp,
                    lc_set_run *r, tk_err *e) {
    char path[PATH_MAX + 300], *buf = NULL;
    size_t len = 0;
    tk_err fe = {0};
    snprintf(path, sizeof path, "%s/%s", s->dir, r->name);
    int rc = lc_read_file(path, &buf, &len, &fe);
    if (rc == TK_EDATA) {
        if (!(r->err = malloc(sizeof *r->err))) return oom(e);
        *r->err = fe;
        return 0;
    }
    if (rc) return *e = fe, rc;
    lc_arena_reset(tmp);
    lc_log log;
    lc_result res;
    if (lc_log_parse(tmp, buf, len, &log)) rc = oom(e);
    if (!rc && fixed) {
        lc_rules *rules;
        int k = (int)(fixed - c->sets);
        if (!(rc = lc_ruleset_rules(c, fixed, &rules, e)) && !(rc = lc_check_log(rules, tmp, &log, strict, &res, e))) {
            r->checked = 1ull << k;
            r->passed = res.pass ? 1ull << k : 0;
        }
    } else if (!rc) {
        rc = lc_detect_add(dt, tmp, &log, &r->checked, &r->passed, e);
    }
    if (!rc) {
        lc_log_facts(&log, &res);
        r->has_ttt = res.has_ttt;
        r->ttt_min = res.ttt_min;
        pv *b = !s->benchmark && res.benchmark ? pv_str(s->a, res.benchmark, strlen(res.benchmark)) : NULL;
        if (b) s->benchmark = b->u.s.s;
        else if (!s->benchmark && res.benchmark) rc = oom(e);
    }
    int nrcp = rcp ? __builtin_popcountll(r->checked) : 0;
    if (!rc && nrcp && !(r->each = lc_alloc(s->a, (size_t)nrcp * sizeof *r->each))) rc = oom(e);
    for (int k = 0, j = 0; !rc && j < nrcp; k++)
        if (r->checked >> k & 1 && rcp_keep(&c->sets[k], tmp, s->a, buf, len, &r->each[j++])) rc = oom(e);
    free(buf);
    return rc;
}

int lc_set_read(lc_catalog *c, lc_ruleset *fixed, int strict, int rcp, const char *dir, lc_set **out, tk_err *e) {
    lc_set *s = calloc(1, sizeof *s);
    lc_arena *tmp = lc_arena_new();
    if (!s || !tmp || !(s->a = lc_arena_new())) {
        free(s);
        lc_arena_free(tmp);
        return oom(e);
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir);
    lc_detector dt;
    lc_detect_begin(&dt, c, s->a, strict);
    int rc = list_runs(s, &s->why), bad = rc == TK_EDATA || (!rc && read_scaling(s, &s->why) == TK_EDATA);
    if (rc && !bad) *e = s->why;
    else rc = 0;
    for (int i = 0; i < s->n && !rc && !bad; i++) rc = read_run(s, c, fixed, &dt, strict, rcp, tmp, &s->runs[i], e);
    lc_arena_free(tmp);
    if (!rc && !bad && fixed) s->rs = fixed;
    else if (!rc && !bad && !lc_detect_end(&dt, &s->d, &s->why)) s->rs = s->d.chosen;
    for (int i = 0; !rc && s->rs && i < s->n; i++) { // what holds under the set's ruleset
        lc_set_run *r = &s->runs[i];
        int k = (int)(s->rs - c->sets), j = __builtin_popcountll(r->checked & ((1ull << k) - 1));
        r->pass = (int)(r->passed >> k & 1);
        if (rcp && r->checked >> k & 1) r->rcp = r->each[j];
        r->rcp.name = r->name;
    }
    if (rc) {
        lc_set_free(s);
        return rc;
    }
    s->accelerators = system_accelerators(dir);
    *out = s;
    return 0;
}

void lc_set_free(lc_set *s) {
    if (!s) return;
    for (int i = 0; i < s->n; i++) {
        free(s->runs[i].name);
        free(s->runs[i].err);
    }
    free(s->runs);
    lc_arena_free(s->a);
    free(s);
}
