// MLLOG file parsing with the official parser's quirks (mlperf_logging mlp_parser, ruleset 1.x):
// the file is read as latin-1 with universal newlines, a line counts only when it contains
// ":::MLLOG " anywhere, everything up to the LAST token is dropped, the rest is stripped of
// Python whitespace and must be one JSON object with time_ms, key, value and metadata.
#include <stdio.h>
#include <string.h>

#include "compliance/compliance.h"

#define TOKEN ":::MLLOG "
#define TOKEN_LEN 9

int lc_msgs_add(lc_arena *a, lc_msgs *ms, long line, const char *key, const char *kind, const char *text) {
    if (ms->n == ms->cap) {
        size_t cap = ms->cap ? 2 * ms->cap : 16;
        lc_msg *m = lc_alloc(a, cap * sizeof *m);
        if (!m) return -1;
        if (ms->n) memcpy(m, ms->m, ms->n * sizeof *m);
        ms->m = m;
        ms->cap = cap;
    }
    size_t tn = strlen(text) + 1, kn = strlen(kind) + 1;
    char *t = lc_alloc(a, tn), *k = lc_alloc(a, kn);
    if (!t || !k) return -1;
    memcpy(t, text, tn);
    memcpy(k, kind, kn);
    ms->m[ms->n++] = (lc_msg){line, key, k, t, NULL};
    return 0;
}

int lc_log_add(lc_arena *a, lc_log *log, lc_record r) {
    if (log->n == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 256;
        lc_record *nr = lc_alloc(a, cap * sizeof *nr);
        if (!nr) return -1;
        if (log->n) memcpy(nr, log->rec, log->n * sizeof *nr);
        log->rec = nr;
        log->cap = cap;
    }
    log->rec[log->n++] = r;
    return 0;
}

// One line [ls, end) (without its terminator) whose last token is at tok.
static int parse_line(lc_arena *a, lc_log *log, const char *ls, const char *tok, const char *end, long line) {
    const char *p = tok + TOKEN_LEN;
    while (end > p && lc_py_space((unsigned char)end[-1])) end--;
    char msg[300];
    if (end == p) // ":::MLLOG " alone: strip() eats the token's space and the regex fails
        return lc_msgs_add(a, &log->bad, line, NULL, "PARSE_ERRORS", "nothing after the :::MLLOG token");
    char what[120];
    size_t off;
    pv *m = pv_parse_json(a, p, (size_t)(end - p), what, sizeof what, &off);
    if (!m) {
        snprintf(msg, sizeof msg, "JSON after :::MLLOG does not parse: %s at column %zu", what,
                 (size_t)(p - ls) + off + 1);
        return lc_msgs_add(a, &log->bad, line, NULL, "PARSE_ERRORS", msg);
    }
    // The official parser raises KeyError/TypeError here (a crash, no verdict); we fail the file.
    if (m->t != PV_DICT)
        return lc_msgs_add(a, &log->bad, line, NULL, "BAD_RECORD", "MLLOG record is not a JSON object");
    static const char *need[] = {"time_ms", "key", "value", "metadata"};
    pv *f[4];
    double ts = 0;
    for (int i = 0; i < 4; i++) {
        if (!(f[i] = pv_dict_get(m, need[i]))) {
            snprintf(msg, sizeof msg, "MLLOG record has no \"%s\" member", need[i]);
            return lc_msgs_add(a, &log->bad, line, NULL, "BAD_RECORD", msg);
        }
        if (i > 0) continue;
        // float(time_ms): a string that is no number is a parse error (ValueError), null a crash
        if (f[0]->t == PV_STR) {
            if (lc_py_float(f[0]->u.s.s, f[0]->u.s.n, &ts))
                return lc_msgs_add(a, &log->bad, line, NULL, "PARSE_ERRORS", "time_ms is a string that is not a number");
        } else if (pv_is_number(f[0])) {
            ts = pv_num(f[0]);
        } else {
            snprintf(msg, sizeof msg, "time_ms is %s, not a number", pv_type_name(f[0]));
            return lc_msgs_add(a, &log->bad, line, NULL, "BAD_RECORD", msg);
        }
    }
    pv *v = pv_new(a, PV_DICT);
    if (!v || pv_dict_set(a, v, "value", 5, f[2]) || pv_dict_set(a, v, "metadata", 8, f[3])) return -1;
    return lc_log_add(a, log, (lc_record){f[1], v, ts, line, f[1]->t == PV_STR ? lc_hash(f[1]->u.s.s, f[1]->u.s.n) : 0});
}

int lc_log_parse(lc_arena *a, const char *buf, size_t n, lc_log *log) {
    memset(log, 0, sizeof *log);
    const char *p = buf, *e = buf + n;
    long line = 0;
    while (p < e) {
        // a line ends at \n, \r\n or \r (Python's universal newlines)
        const char *nl = memchr(p, '\n', (size_t)(e - p));
        const char *le = nl ? nl : e;
        const char *cr = memchr(p, '\r', (size_t)(le - p));
        if (cr) le = cr;
        line++;
        const char *tok = memmem(p, (size_t)(le - p), TOKEN, TOKEN_LEN);
        if (tok) {
            const char *t2;
            while ((t2 = memmem(tok + 1, (size_t)(le - tok - 1), TOKEN, TOKEN_LEN))) tok = t2;
            if (parse_line(a, log, p, tok, le, line)) return -1;
        }
        if (le == e) break;
        p = le + 1;
        if (*le == '\r' && p < e && *p == '\n') p++;
    }
    return 0;
}
