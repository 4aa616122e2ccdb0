// MLPerf Training compliance: MLLOG parsing, the rule engine, and scoring.
// Verdicts follow MLCommons' mlperf_logging compliance_checker; the rules are data
// (share/compliance/<usage>-<version>/*.json, man 5 trainkit-compliance).
#ifndef TK_COMPLIANCE_H
#define TK_COMPLIANCE_H

#include <stddef.h>

#include "compliance/pyval.h"
#include "core/err.h"

// One `:::MLLOG {...}` record. Only lines holding the token count; of several tokens on one line
// the last wins (the official parser's `re.sub(".*:::MLLOG ", ...)`).
typedef struct lc_record {
    pv *key;   // usually a string; records with other keys match no rule
    pv *v;     // {"value": ..., "metadata": ...}, what rules call v
    double ts; // float(time_ms)
    long line; // physical line in the file (1-based; CR, LF and CRLF end a line)
    unsigned hash; // lc_hash of the key when it is a string, else 0
} lc_record;

// A finding: an error (fails the file) or a warning (never changes the verdict).
typedef struct lc_msg {
    long line;       // 0: not about one line
    const char *key; // the MLLOG key concerned, or NULL
    const char *kind; // normalised category, e.g. "REQ_EXACTLY_ONE:run_stop:0", "PARSE_ERRORS"
    const char *text; // one sentence
    const char *okey; // rule messages that a later rule file may replace (internal), or NULL
} lc_msg;

typedef struct lc_msgs {
    lc_msg *m;
    size_t n, cap;
} lc_msgs;

// Append a finding (text is copied into a). 0, or -1 when out of memory.
int lc_msgs_add(lc_arena *a, lc_msgs *ms, long line, const char *key, const char *kind, const char *text);

typedef struct lc_log {
    lc_record *rec;
    size_t n, cap;
    lc_msgs bad; // lines with the token that do not parse, and records the official parser chokes on
} lc_log;

// Parse a whole file image into records, allocated in a. 0, or -1 when out of memory.
int lc_log_parse(lc_arena *a, const char *buf, size_t n, lc_log *log);
// Append a record (rules may derive records from others). 0, or -1 when out of memory.
int lc_log_add(lc_arena *a, lc_log *log, lc_record r);
// FNV-1a of a key, to find the rule of a record quickly.
unsigned lc_hash(const char *s, size_t n);

typedef struct lc_rules lc_rules;

// Open the ruleset `usage-version` under dir (e.g. dir/training-1.1.0/common.json must exist).
int lc_rules_open(const char *dir, const char *usage, const char *version, lc_rules **out, tk_err *e);
void lc_rules_free(lc_rules *r);

typedef struct lc_result {
    int pass;
    const char *benchmark; // first submission_benchmark value as text, or NULL
    const char *division;
    lc_msgs errors, warnings;
    int has_ttt;
    double ttt_min; // as the result summarizer computes it (first run_stop, last run_start before)
    const char *stop_status; // metadata.status of that run_stop, or NULL
} lc_result;

// Check one file image. strict=1 turns the rules marked strict_only into errors (MLCommons'
// current checker); 0 reports them as warnings (the checker in force for rounds 1.0/1.1).
// Everything is allocated in a (reset it between files). Fails only on a broken rule file
// (TK_EDATA naming it) or out of memory.
int lc_check(lc_rules *r, lc_arena *a, const char *buf, size_t n, int strict, lc_result *res, tk_err *e);
// The same on a parsed log (to check one log under several rulesets); the log is not changed.
int lc_check_log(lc_rules *r, lc_arena *a, lc_log *log, int strict, lc_result *res, tk_err *e);

// The fields of res that do not depend on the rules (benchmark, division, has_ttt, ttt_min,
// stop_status) as lc_check_log fills them; the others are zeroed.
void lc_log_facts(const lc_log *log, lc_result *res);

// A JSON file jansson cannot load (rule, ruleset and RCP files, scaling.json): TK_EDATA with
// "WHAT: jansson's message" (control characters of the text it quotes written as \xNN or
// \uNNNN), where "PATH: line L, offset B", and a hint when the file holds nothing but white space
// or does not start with '{'. Returns TK_EDATA.
struct json_error_t;
int lc_json_fail(tk_err *e, const char *what, const char *path, const struct json_error_t *je);

// Scoring of a benchmark set as the result summarizer does (olympic mean of the times to train).
typedef struct lc_score {
    int runs;        // files seen
    int dropped;     // files that did not pass
    int max_dropped; // dropped from each end: the benchmark's "drop" (ruleset.json)
    int has_score;
    double score_min;
} lc_score;
// times: the times of the passing runs in minutes (sorted in place); dropped: runs that did not
// pass, counted as the slowest. Returns the summarizer's score.
void lc_olympic(double *times, int n, int dropped, int max_dropped, lc_score *out);
// Python's round(x, 2) (exact decimal rounding of the binary value, ties to even).
double lc_round2(double x);

#endif
