// Unit tests of lib/compliance: Python-compatible JSON and operators, the rule expression
// language, the MLLOG line parser, the engine on a small log, olympic scoring, the rule file
// features of the newer rounds (derive, first_check, same_as), and the RCP statistics.
// Expected values come from Python 3 (json.loads, operators, round), scipy, MLCommons' RCP
// checker (a committed table) and the MLPerf rules.
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compliance/compliance.h"
#include "compliance/expr.h"
#include "compliance/rcp.h"
#include "compliance/ruleset.h"
#include "tk_test.h"

static pv *J(lc_arena *a, const char *s) { return pv_parse_json(a, s, strlen(s), NULL, 0, NULL); }

TK_TEST(json_python_semantics) {
    lc_arena *a = lc_arena_new();
    pv *v = J(a, "{\"a\": NaN, \"b\": -Infinity, \"c\": 123456789012345678901234, \"a\": 1}");
    CHECK(v && v->t == PV_DICT && v->u.d.n == 3);
    CHECK(pv_dict_get(v, "a")->t == PV_INT && pv_dict_get(v, "a")->u.i == 1); // last duplicate wins
    CHECK(isinf(pv_dict_get(v, "b")->u.f) && pv_dict_get(v, "b")->u.f < 0);
    CHECK(pv_dict_get(v, "c")->t == PV_FLOAT && pv_dict_get(v, "c")->u.f > 1.2e23);
    const char *bad[] = {"1.", "01", "{\"a\": 1} x", "[1,]", "\"a\x01\"", "{'a': 1}", "+1", "", "tru", "[1 2]"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char what[100];
        size_t off;
        CHECK(pv_parse_json(a, bad[i], strlen(bad[i]), what, sizeof what, &off) == NULL);
        CHECK(what[0] != 0);
    }
    // latin-1 byte 0xE9 and the escape \u00e9 are the same character
    pv *x = J(a, "\"\xe9\""), *y = J(a, "\"\\u00e9\"");
    CHECK(x && y && pv_eq(x, y) && x->u.s.n == 2);
    pv *pair = J(a, "\"\\ud83d\\ude00\"");
    CHECK(pair && pair->u.s.n == 4);
    CHECK(J(a, " \t[1, 2.5e3, true, null] \r\n") != NULL);
    lc_arena_free(a);
}

TK_TEST(python_operators) {
    lc_arena *a = lc_arena_new();
    char err[200];
    int r;
    CHECK(pv_eq(J(a, "true"), J(a, "1")));
    CHECK(pv_eq(J(a, "2"), J(a, "2.0")));
    CHECK(!pv_eq(J(a, "\"1\""), J(a, "1")));
    CHECK(!pv_eq(J(a, "NaN"), J(a, "NaN")));
    CHECK(pv_eq(J(a, "[1, {\"a\": [true]}]"), J(a, "[1.0, {\"a\": [1]}]")));
    CHECK(pv_cmp(J(a, "\"a\""), J(a, "1"), &r, err, sizeof err) == -1);
    CHECK(pv_cmp(J(a, "\"ab\""), J(a, "\"b\""), &r, err, sizeof err) == 0 && r < 0);
    CHECK(pv_contains(J(a, "{\"k\": 1}"), J(a, "\"k\""), &r, err, sizeof err) == 0 && r == 1);
    CHECK(pv_contains(J(a, "\"epoch_num\""), J(a, "\"och\""), &r, err, sizeof err) == 0 && r == 1);
    CHECK(pv_contains(J(a, "null"), J(a, "\"k\""), &r, err, sizeof err) == -1);
    CHECK(pv_contains(J(a, "{}"), J(a, "[1]"), &r, err, sizeof err) == -1); // unhashable
    double d;
    CHECK(lc_py_float(" 1_000.5 ", 9, &d) == 0 && d == 1000.5);
    CHECK(lc_py_float("-Infinity", 9, &d) == 0 && isinf(d));
    CHECK(lc_py_float("12x", 3, &d) == -1);
    CHECK(lc_py_float("\xc2\xa0" "7\xe3\x80\x80", 6, &d) == 0 && d == 7.0); // NBSP, U+3000 are spaces
    CHECK(lc_py_float("1e", 2, &d) == -1);
    CHECK(lc_py_float("1__0", 4, &d) == -1);
    char s[64];
    pv_str_of(J(a, "[\"a\", 1.5, true, null]"), s, sizeof s);
    CHECK_STR(s, "['a', 1.5, True, None]");
    pv_str_of(J(a, "\"dlrm\""), s, sizeof s);
    CHECK_STR(s, "dlrm");
    lc_arena_free(a);
}

// Evaluates src with v = {"value": VALUE, "metadata": META}; returns 1/0 truthiness or -1 (error).
static int ev(lc_arena *a, const char *src, const char *value, const char *meta, char *err) {
    pv *v = pv_new(a, PV_DICT);
    pv_dict_set(a, v, "value", 5, J(a, value));
    pv_dict_set(a, v, "metadata", 8, J(a, meta));
    pv *s = J(a, "{\"init_started\": true, \"first_init_start\": 1000.0, \"list\": []}");
    lc_env env = {.v = v, .s = s, .ts = 2000, .has_ts = 1, .cst = J(a, "{\"names\": [\"b\", \"a\"]}"), .tmp = a};
    char cerr[100];
    int col;
    lc_expr *x = lc_expr_compile(a, src, 0, cerr, sizeof cerr, &col);
    if (!x) {
        snprintf(err, 200, "compile: %s", cerr);
        return -2;
    }
    pv *out;
    if (lc_expr_eval(x, &env, &out, err, 200)) return -1;
    return pv_truthy(out);
}

TK_TEST(expressions) {
    lc_arena *a = lc_arena_new();
    char err[200];
    CHECK_EQ_INT(ev(a, "v['value'] >= 0.8025 and v['value'] < 1.0", "0.81", "{}", err), 1);
    CHECK_EQ_INT(ev(a, "v['value'] >= 0.8025 and v['value'] < 1.0", "0.80", "{}", err), 0);
    CHECK_EQ_INT(ev(a, "v['value'] >= 0.75", "\"0.9\"", "{}", err), -1);
    CHECK(strstr(err, "'>=' not supported between instances of 'str' and 'float'") != NULL);
    CHECK_EQ_INT(ev(a, "'epoch_num' in v['metadata']", "1", "{\"epoch_num\": 3}", err), 1);
    CHECK_EQ_INT(ev(a, "'epoch_num' in v['metadata']", "1", "null", err), -1);
    CHECK_EQ_INT(ev(a, "v['metadata']['tensor']", "1", "{}", err), -1);
    CHECK(strstr(err, "KeyError") != NULL);
    CHECK_EQ_INT(ev(a, "ts - s['first_init_start'] < (30*60*1e3)", "1", "{}", err), 1);
    CHECK_EQ_INT(ev(a, "is_integer(log2(v['value'] / 0.0001))", "0.0008", "{}", err), 1);
    CHECK_EQ_INT(ev(a, "is_integer(log2(v['value'] / 0.0001))", "0.0003", "{}", err), 0);
    CHECK_EQ_INT(ev(a, "log2(v['value'])", "0", "{}", err), -1);
    CHECK_EQ_INT(ev(a, "v['value'] / 0", "1", "{}", err), -1);
    CHECK_EQ_INT(ev(a, "is_int(v['value'])", "true", "{}", err), 1); // isinstance(True, int)
    CHECK_EQ_INT(ev(a, "is_int(v['value'])", "2.0", "{}", err), 0);
    CHECK_EQ_INT(ev(a, "v['value'] in [1, inf]", "Infinity", "{}", err), 1);
    CHECK_EQ_INT(ev(a, "v['value'] not in ['closed', 'open']", "\"open\"", "{}", err), 0);
    CHECK_EQ_INT(ev(a, "len(v['value']) == 2", "[40, 50]", "{}", err), 1);
    CHECK_EQ_INT(ev(a, "sorted(v['value']) == sorted(names)", "[\"a\", \"b\"]", "{}", err), 1);
    CHECK_EQ_INT(ev(a, "sorted(v['value']) == sorted(names)", "[\"a\", 1]", "{}", err), -1);
    CHECK_EQ_INT(ev(a, "1 < v['value'] < 3", "2", "{}", err), 1);
    CHECK_EQ_INT(ev(a, "not s['init_started']", "2", "{}", err), 0);
    CHECK_EQ_INT(ev(a, "undefined_name", "2", "{}", err), -1);
    CHECK_EQ_INT(ev(a, "v['value'] ==", "2", "{}", err), -2);
    CHECK_EQ_INT(ev(a, "nosuchfn(1)", "2", "{}", err), -2);
    // statements
    char cerr[100];
    int col;
    pv *s = J(a, "{\"l\": [], \"m\": 5}");
    lc_env env = {.v = J(a, "{\"value\": 1, \"metadata\": {\"tensor\": \"t\"}}"), .s = s, .tmp = a};
    lc_expr *st = lc_expr_compile(a, "s['l'] += [v['metadata']['tensor']]", 1, cerr, sizeof cerr, &col);
    CHECK(st && lc_expr_exec(st, &env, err, sizeof err) == 0 && lc_expr_exec(st, &env, err, sizeof err) == 0);
    CHECK(pv_dict_get(s, "l")->u.l.n == 2);
    st = lc_expr_compile(a, "s['m']=min(s['m'], 3)", 1, cerr, sizeof cerr, &col);
    CHECK(st && lc_expr_exec(st, &env, err, sizeof err) == 0 && pv_dict_get(s, "m")->u.i == 3);
    CHECK(lc_expr_compile(a, "1 = 2", 1, cerr, sizeof cerr, &col) == NULL);
    char deep[400]; // nesting is bounded (the fuzzer found a stack overflow here)
    memset(deep, '[', 300);
    deep[300] = 0;
    CHECK(lc_expr_compile(a, deep, 0, cerr, sizeof cerr, &col) == NULL && strstr(cerr, "nested too deeply"));
    memset(deep, '-', 300);
    strcpy(deep + 300, "1");
    CHECK(lc_expr_compile(a, deep, 0, cerr, sizeof cerr, &col) == NULL);
    lc_arena_free(a);
}

TK_TEST(line_parser) {
    lc_arena *a = lc_arena_new();
    const char *txt = "junk\r\n"
                      "7: :::MLLOG {\"time_ms\": 5, \"key\": \"a\", \"value\": 1, \"metadata\": {}}\r"
                      ":::MLLOG {\"time_ms\": 1, \"key\": \"x\", \"value\": 1, \"metadata\": {}} :::MLLOG "
                      "{\"time_ms\": \"7\", \"key\": \"b\", \"value\": 2, \"metadata\": {}}\xa0\n"
                      ":::MLLOG \n"
                      ":::MLLOG {\"time_ms\": 1, \"key\": \"c\", \"value\": 1}\n"
                      ":::MLLOG {\"time_ms\": 1, \"key\": \"d\", \"value\": 1, \"metadata\": {}} tail\n"
                      "::MLLOG {}\n"
                      ":::MLLOG {\"time_ms\": 9, \"key\": \"e\", \"value\": 1, \"metadata\": {}}";
    lc_log log;
    CHECK(lc_log_parse(a, txt, strlen(txt), &log) == 0);
    CHECK_EQ_INT(log.n, 3);
    CHECK_STR(log.rec[0].key->u.s.s, "a");
    CHECK_EQ_INT(log.rec[0].line, 2);
    CHECK_STR(log.rec[1].key->u.s.s, "b"); // the last record on a line wins
    CHECK_EQ_INT(log.rec[1].line, 3);
    CHECK(log.rec[1].ts == 7.0);
    CHECK_STR(log.rec[2].key->u.s.s, "e");
    CHECK_EQ_INT(log.rec[2].line, 8);
    CHECK_EQ_INT(log.bad.n, 3);
    CHECK_STR(log.bad.m[0].kind, "PARSE_ERRORS");
    CHECK_EQ_INT(log.bad.m[0].line, 4);
    CHECK_STR(log.bad.m[1].kind, "BAD_RECORD");
    CHECK_EQ_INT(log.bad.m[1].line, 5);
    CHECK_EQ_INT(log.bad.m[2].line, 6);
    lc_arena_free(a);
}

// A minimal passing DLRM log (ruleset 1.1.0), built record by record.
static size_t dlrm_log(char *buf, size_t n, const char *drop) {
    static const char *recs[][2] = {
        {"submission_benchmark", "\"dlrm\""}, {"submission_org", "\"x\""}, {"submission_division", "\"closed\""},
        {"submission_status", "\"onprem\""}, {"submission_platform", "\"p\""}, {"cache_clear", "true"},
        {"init_start", "null"}, {"global_batch_size", "55296"}, {"opt_base_learning_rate", "24.0"},
        {"opt_learning_rate_warmup_steps", "2750"}, {"lr_decay_start_steps", "49315"},
        {"sgd_opt_base_learning_rate", "24.0"}, {"sgd_opt_learning_rate_decay_poly_power", "2"},
        {"sgd_opt_learning_rate_decay_steps", "27772"}, {"gradient_accumulation_steps", "1"},
        {"train_samples", "4195197692"}, {"eval_samples", "89137319"}, {"init_stop", "null"},
        {"run_start", "null"}, {"epoch_start", "null"}, {"eval_start", "null"}, {"eval_stop", "null"},
        {"eval_accuracy", "0.8026"}, {"epoch_stop", "null"}, {"run_stop", "null"}};
    size_t w = 0;
    long t = 1000;
    for (size_t i = 0; i < sizeof recs / sizeof *recs; i++) {
        if (drop && !strcmp(drop, recs[i][0])) continue;
        w += (size_t)snprintf(buf + w, n - w,
                              ":::MLLOG {\"namespace\": \"\", \"time_ms\": %ld, \"event_type\": \"POINT_IN_TIME\", "
                              "\"key\": \"%s\", \"value\": %s, \"metadata\": {\"epoch_num\": 1, \"status\": \"success\"}}\n",
                              t, recs[i][0], recs[i][1]);
        t += 60000;
    }
    return w;
}

TK_TEST(engine_on_small_log) {
    lc_rules *r;
    tk_err e = {0};
    if (lc_rules_open("share/compliance", "training", "1.1.0", &r, &e)) {
        printf("#   cannot open share/compliance (run from the repository root): %s\n", e.what);
        *tk_failed_ = 1;
        return;
    }
    lc_arena *a = lc_arena_new();
    char buf[8192];
    lc_result res;
    size_t n = dlrm_log(buf, sizeof buf, NULL);
    CHECK(lc_check(r, a, buf, n, 0, &res, &e) == 0);
    CHECK(res.pass);
    CHECK_STR(res.benchmark, "dlrm");
    CHECK(res.has_ttt && fabs(res.ttt_min - 6.0) < 1e-12); // run_start..run_stop: 6 records apart
    CHECK(res.warnings.n == 2); // no weights_initialization: REQ + end check, both warnings
    CHECK_STR(res.warnings.m[0].kind, "WEIGHTS_INIT_WARNING");
    CHECK(lc_check(r, a, buf, n, 1, &res, &e) == 0); // strict: the same findings are errors
    CHECK(!res.pass && res.errors.n == 2);
    n = dlrm_log(buf, sizeof buf, "run_stop");
    CHECK(lc_check(r, a, buf, n, 0, &res, &e) == 0);
    CHECK(!res.pass && res.errors.n == 1 && !res.has_ttt);
    CHECK_STR(res.errors.m[0].kind, "REQ_EXACTLY_ONE:run_stop:0");
    n = dlrm_log(buf, sizeof buf, "eval_start");
    CHECK(lc_check(r, a, buf, n, 0, &res, &e) == 0);
    CHECK(!res.pass && res.errors.n == 1);
    CHECK_STR(res.errors.m[0].kind, "REQ_ONE_OF:block_start|eval_start");
    lc_arena_free(a);
    lc_rules_free(r);
}

TK_TEST(olympic_scoring) {
    double t[40];
    lc_score s;
    double a5[] = {5, 1, 4, 2, 3};
    memcpy(t, a5, sizeof a5);
    lc_olympic(t, 5, 0, 1, &s);
    CHECK(s.has_score && s.score_min == 3.0); // mean of 2, 3, 4
    memcpy(t, a5, sizeof a5);
    lc_olympic(t, 4, 1, 1, &s); // 1 failed run: drop the fastest only -> mean of 2, 4, 5
    CHECK(s.has_score && fabs(s.score_min - 11.0 / 3) < 1e-15);
    lc_olympic(t, 3, 2, 1, &s);
    CHECK(!s.has_score);
    for (int i = 0; i < 40; i++) t[i] = i + 1;
    lc_olympic(t, 40, 0, 4, &s); // drop 4 + 4: mean of 5..36
    CHECK(s.has_score && s.score_min == 20.5);
    CHECK(lc_round2(0.125) == 0.12);   // Python: round(0.125, 2) == 0.12 (tie to even)
    CHECK(lc_round2(2.675) == 2.67);   // 2.675 is 2.67499999... in binary
    CHECK(lc_round2(20.003233333333334) * 8 == 160.0);
}

// ---- the language of rulesets from 2.0.0 on ---------------------------------------------------

// str() of src evaluated with v = {"value": 7, "metadata": {"n": 3}} and a state s, or "ERR: ..."
static const char *evs(lc_arena *a, const char *src) {
    static char buf[300];
    pv *s = J(a, "{\"gbs\": 256, \"none\": null, \"l\": [1]}");
    lc_env env = {.v = J(a, "{\"value\": 7, \"metadata\": {\"n\": 3}}"), .s = s, .ts = 5, .has_ts = 1, .tmp = a};
    char err[200];
    int col;
    lc_expr *x = lc_expr_compile(a, src, 0, err, sizeof err, &col);
    pv *out;
    if (!x) snprintf(buf, sizeof buf, "COMPILE: %s", err);
    else if (lc_expr_eval(x, &env, &out, err, sizeof err)) snprintf(buf, sizeof buf, "ERR: %s", err);
    else pv_str_of(out, buf, sizeof buf);
    return buf;
}

TK_TEST(expressions_of_newer_rounds) {
    lc_arena *a = lc_arena_new();
    // every expected value is what Python 3 prints for the same expression
    CHECK_STR(evs(a, "-7 % 3"), "2");
    CHECK_STR(evs(a, "7 % -3"), "-2");
    CHECK_STR(evs(a, "-7.5 % 2"), "0.5");
    CHECK(!strncmp(evs(a, "5 % 0"), "ERR: ZeroDivisionError", 22));
    CHECK_STR(evs(a, "v['metadata']['n'] * 4096 % 8192"), "4096");
    CHECK_STR(evs(a, "2 ** 10"), "1024");
    CHECK_STR(evs(a, "2 ** -1"), "0.5");
    CHECK_STR(evs(a, "-2 ** 2"), "-4");
    CHECK_STR(evs(a, "2 ** 3 ** 2"), "512");
    CHECK_STR(evs(a, "(s['gbs'] / 16384) ** 0.5"), "0.125");
    CHECK(!strncmp(evs(a, "0 ** -1"), "ERR: ZeroDivisionError", 22));
    CHECK(!strncmp(evs(a, "(-8) ** 0.5"), "ERR: ", 5)); // complex in Python: never a plain number
    CHECK_STR(evs(a, "('n' in v['metadata']) | ('x' in v['metadata'])"), "True");
    CHECK_STR(evs(a, "1 | 2"), "3");
    CHECK(!strncmp(evs(a, "1.0 | 2"), "ERR: TypeError", 14));
    CHECK_STR(evs(a, "240 if v['value'] == 'open' else 30"), "30");
    CHECK_STR(evs(a, "1 if false else 2 if true else 3"), "2");
    CHECK_STR(evs(a, "v['metadata']['x'] > 0 if 'x' in v['metadata'] else true"), "True"); // the branch not taken never raises
    CHECK_STR(evs(a, "s['none'] is None"), "ERR: NameError: name 'None' is not defined"); // spelled null here
    CHECK_STR(evs(a, "s['none'] is null"), "True");
    CHECK_STR(evs(a, "get(s, 'lr_min') is not null"), "False");
    CHECK_STR(evs(a, "get(s, 'gbs')"), "256");
    CHECK(!strncmp(evs(a, "get(v['value'], 'x')"), "ERR: AttributeError", 19));
    CHECK_STR(evs(a, "int('  -4_2 ')"), "-42");
    CHECK(!strncmp(evs(a, "int('4.5')"), "ERR: ValueError", 15));
    CHECK_STR(evs(a, "int(-3.9)"), "-3");
    CHECK_STR(evs(a, "int(true)"), "1");
    CHECK(!strncmp(evs(a, "int(null)"), "ERR: TypeError", 14));
    CHECK_STR(evs(a, "ceil(2.1)"), "3");
    CHECK_STR(evs(a, "floor(-2.1)"), "-3");
    CHECK_STR(evs(a, "ceil(5)"), "5");
    CHECK_STR(evs(a, "ceil(0.001 * 2290835423 / 8192) * 8192"), "2293760");
    CHECK(!strncmp(evs(a, "floor('x')"), "ERR: TypeError", 14));
    CHECK_STR(evs(a, "abs(-3)"), "3");
    CHECK_STR(evs(a, "abs(2.4e-05 - 2.4e-05 * (16384 / 16384) ** 0.5) < 1e-9"), "True");
    CHECK_STR(evs(a, "max(1, 3, 2)"), "3");
    CHECK_STR(evs(a, "max(1, 1.0)"), "1"); // the first of equals
    CHECK_STR(evs(a, "0.0 <= v['value'] <= 90.0"), "True");
    CHECK_STR(evs(a, "ts - 1"), "4.0");
    CHECK_STR(evs(a, "if"), "COMPILE: unexpected keyword");
    CHECK_STR(evs(a, "1 if 2"), "COMPILE: expected 'else'");
    // statements: if, and the order of a multi-line action
    char err[200], cerr[100];
    int col;
    pv *s = J(a, "{\"next\": 512, \"gbs\": 256}");
    lc_env env = {.v = J(a, "{\"value\": 0.7, \"metadata\": {\"samples_count\": 512}}"), .s = s, .tmp = a};
    lc_expr *st = lc_expr_compile(a, "if v['metadata']['samples_count'] == s['next']: s['next'] += s['gbs']", 1, cerr,
                                  sizeof cerr, &col);
    CHECK(st && lc_expr_exec(st, &env, err, sizeof err) == 0 && pv_dict_get(s, "next")->u.i == 768);
    CHECK(st && lc_expr_exec(st, &env, err, sizeof err) == 0 && pv_dict_get(s, "next")->u.i == 768); // not equal now
    CHECK(lc_expr_compile(a, "if true s['x'] = 1", 1, cerr, sizeof cerr, &col) == NULL);
    lc_arena_free(a);
}

// A rules directory written here: ruleset 9.0.0 includes closed_{value} relative to itself, and
// its closed_sd.json points at 8.0.0's (same_as), which derives joined FID/CLIP records.
static int write_rules(const char *dir) {
    char p[512];
    const char *files[][2] = {
        {"training-9.0.0/common", "{\"format\": \"trainkit-compliance/1\", \"keys\": [{\"name\": \"submission_benchmark\","
                                  " \"req\": \"exactly_one\", \"include\": \"closed_{value}\"}]}"},
        {"training-9.0.0/closed_sd", "{\"format\": \"trainkit-compliance/1\", \"same_as\": \"training-8.0.0/closed_sd\"}"},
        {"training-8.0.0/common", "{\"format\": \"trainkit-compliance/1\", \"keys\": []}"},
        {"training-8.0.0/closed_sd",
         "{\"format\": \"trainkit-compliance/1\", \"derive\": [{\"name\": \"agg\", \"from\": \"eval_accuracy\", "
         "\"when\": \"'metric' in v['metadata']\", \"group\": \"v['metadata']['samples_count']\", \"group_name\": \"samples_count\", "
         "\"field\": \"v['metadata']['metric']\"}], \"keys\": ["
         "{\"name\": \"eval_accuracy\", \"req\": \"at_least_one\", \"first_check\": \"v['metadata']['samples_count'] == 100\"},"
         "{\"name\": \"agg\", \"req\": \"at_least(2)\", \"check\": \"'FID' in v['value']\","
         " \"at_least_one_check\": \"v['value']['FID'] <= 90.0 and v['value']['CLIP'] >= 0.15\"}]}"}};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        snprintf(p, sizeof p, "mkdir -p %s/%.*s", dir, (int)(strchr(files[i][0], '/') - files[i][0]), files[i][0]);
        if (system(p)) return -1;
        snprintf(p, sizeof p, "%s/%s.json", dir, files[i][0]);
        FILE *f = fopen(p, "w");
        if (!f) return -1;
        fputs(files[i][1], f);
        fclose(f);
    }
    return 0;
}

static size_t sd_log(char *buf, size_t n, int first_samples, int drop_clip) {
    const int sc[] = {first_samples, first_samples, 200, 200};
    const char *metric[] = {"FID", "CLIP", "FID", "CLIP"};
    const double val[] = {100, 0.1, 80, 0.2};
    size_t w = (size_t)snprintf(buf, n, ":::MLLOG {\"time_ms\": 1, \"key\": \"submission_benchmark\", \"value\": \"sd\", \"metadata\": {}}\n");
    for (int i = 0; i < 4; i++) {
        if (drop_clip && i == 3) continue;
        w += (size_t)snprintf(buf + w, n - w, ":::MLLOG {\"time_ms\": %d, \"key\": \"eval_accuracy\", \"value\": %g, "
                              "\"metadata\": {\"samples_count\": %d, \"metric\": \"%s\"}}\n", 2 + i, val[i], sc[i], metric[i]);
    }
    return w;
}

static int has_kind(const lc_result *r, const char *kind) {
    for (size_t i = 0; i < r->errors.n; i++)
        if (!strcmp(r->errors.m[i].kind, kind)) return 1;
    return 0;
}

TK_TEST(derive_first_check_same_as_relative_include) {
    char dir[] = "/tmp/tk-rules-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    CHECK(write_rules(dir) == 0);
    lc_rules *r;
    tk_err e = {0};
    CHECK(lc_rules_open(dir, "training", "9.0.0", &r, &e) == 0);
    lc_arena *a = lc_arena_new();
    char buf[2048];
    lc_result res;
    size_t n = sd_log(buf, sizeof buf, 100, 0);
    CHECK(lc_check(r, a, buf, n, 0, &res, &e) == 0 && res.pass); // 200: FID 80, CLIP 0.2 reach the target
    n = sd_log(buf, sizeof buf, 50, 0);
    CHECK(lc_check(r, a, buf, n, 0, &res, &e) == 0 && !res.pass && has_kind(&res, "FIRST_CHECK_FAILED:eval_accuracy"));
    n = sd_log(buf, sizeof buf, 100, 1); // the group at 200 has no CLIP: Python's KeyError
    CHECK(lc_check(r, a, buf, n, 0, &res, &e) == 0 && !res.pass && has_kind(&res, "ATLEAST_ONE_CHECK_RAISED:agg"));
    lc_arena_free(a);
    lc_rules_free(r);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
}

TK_TEST(student_t_as_scipy) {
    // scipy.special.stdtr(df, t), scipy 1.17
    const double v[][3] = {{1, -0.5, 0.35241638234956674},   {2, -1.5, 0.13619656244550055},
                           {7, -2.5, 0.020496109292876444},  {14, -1.9, 0.039114137487056166},
                           {16, -3.2, 0.002788853152388212}, {18, -0.1, 0.4607248441214552},
                           {38, -2.02, 0.025237337386658423}, {5, 0.7, 0.7424255258425918},
                           {8, -12.0, 1.0719333738443846e-06}};
    for (size_t i = 0; i < sizeof v / sizeof *v; i++) {
        double got = lc_stdtr(v[i][0], v[i][1]);
        if (fabs(got - v[i][2]) > 1e-13 * v[i][2]) {
            printf("#   stdtr(%g, %g) = %.17g, scipy %.17g\n", v[i][0], v[i][1], got, v[i][2]);
            *tk_failed_ = 1;
        }
    }
}

// Every RCP point of every ruleset against the statistics MLCommons' RCP_Checker computes
// (tests/data/logcheck-newer/rcp-stats.jsonl, made by contrib/compliance/rcp_oracle.py stats).
TK_TEST(rcp_statistics_as_rcp_checker) {
    lc_catalog *c;
    tk_err e = {0};
    FILE *f = fopen("tests/data/logcheck-newer/rcp-stats.jsonl", "r");
    CHECK(f != NULL);
    CHECK(lc_catalog_open("share/compliance", "training", &c, &e) == 0);
    if (!f || e.code) return;
    lc_arena *a = lc_arena_new();
    char line[4096];
    int n = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        const char *ver = json_string_value(json_object_get(j, "ruleset")), *bn = json_string_value(json_object_get(j, "benchmark"));
        const char *name = json_string_value(json_object_get(j, "name"));
        lc_ruleset *rs = lc_catalog_find(c, ver);
        const lc_bench *b = rs ? lc_ruleset_bench(rs, bn) : NULL;
        lc_rcp_point *p = NULL;
        int np = 0;
        if (!b || lc_rcp_points(c, rs, b, a, &p, &np, &e)) np = 0;
        const lc_rcp_point *q = NULL;
        for (int i = 0; i < np; i++)
            if (!strcmp(p[i].name, name)) q = &p[i];
        const char *f4[] = {"mean", "stdev", "min_epochs", "max_speedup"};
        double want[4], got[4] = {q ? q->mean : NAN, q ? q->stdev : NAN, q ? q->min_epochs : NAN, q ? q->speedup : NAN};
        int ok = q && q->pruned == json_is_true(json_object_get(j, "pruned"));
        for (int k = 0; k < 4; k++) {
            want[k] = json_number_value(json_object_get(j, f4[k]));
            ok &= got[k] == want[k] || (isnan(got[k]) && isnan(want[k]));
        }
        if (!ok && bad++ < 5)
            printf("#   %s %s %s: got %.17g %.17g %.17g %.17g, RCP_Checker %.17g %.17g %.17g %.17g\n", ver, bn, name, got[0],
                   got[1], got[2], got[3], want[0], want[1], want[2], want[3]);
        n++;
        json_decref(j);
        lc_arena_reset(a);
    }
    fclose(f);
    printf("#   %d RCP points, %d differ\n", n, bad);
    CHECK(n == 539 && bad == 0);
    lc_arena_free(a);
    lc_catalog_free(c);
}
