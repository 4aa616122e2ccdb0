// Fuzz target for log-check's input side: the MLLOG line parser with Python's json.loads
// semantics, the rule engine over whatever records come out (ruleset training 1.1.0, both
// modes), and the rule expression compiler/evaluator on the same bytes.
// Rules are read from $TRAINKIT_SHARE/compliance or ./share/compliance (run from the repository).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compliance/compliance.h"
#include "compliance/expr.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lc_rules *rules;
static int tried;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tried) {
        tried = 1;
        char dir[4096] = "share/compliance";
        const char *env = getenv("TRAINKIT_SHARE");
        if (env && strlen(env) < 4000) strcpy(dir, env), strcat(dir, "/compliance");
        tk_err e = {0};
        if (lc_rules_open(dir, "training", "1.1.0", &rules, &e)) rules = NULL;
    }
    lc_arena *a = lc_arena_new();
    if (!a) return 0;
    lc_log log;
    lc_log_parse(a, (const char *)data, size, &log);
    if (rules) {
        lc_result res;
        tk_err e = {0};
        for (int strict = 0; strict < 2; strict++) {
            lc_arena_reset(a);
            lc_check(rules, a, (const char *)data, size, strict, &res, &e);
        }
    }
    // the same bytes as an expression and as a statement (NUL-terminated copy)
    lc_arena_reset(a);
    char *src = malloc(size + 1);
    if (src) {
        memcpy(src, data, size);
        src[size] = 0;
        char err[200];
        int col;
        pv *v = pv_parse_json(a, "{\"value\": [1, \"a\", 2.5], \"metadata\": {\"epoch_num\": 1}}", 55, NULL, 0, NULL);
        pv *s = pv_parse_json(a, "{\"l\": [], \"x\": 1}", 17, NULL, 0, NULL);
        lc_env env = {.v = v, .s = s, .ts = 1, .has_ts = 1, .tmp = a};
        for (int stmt = 0; stmt < 2; stmt++) {
            lc_expr *x = lc_expr_compile(a, src, stmt, err, sizeof err, &col);
            pv *out;
            if (x && !stmt) lc_expr_eval(x, &env, &out, err, sizeof err);
            if (x && stmt) lc_expr_exec(x, &env, err, sizeof err);
        }
        free(src);
    }
    lc_arena_free(a);
    return 0;
}
