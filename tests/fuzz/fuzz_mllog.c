// Fuzz target for log-check's input side: the MLLOG line parser with Python's json.loads
// semantics; the rule engine over whatever records come out (ruleset 1.1.0 in both modes, 4.1.0
// whose stable diffusion rules derive records, 6.1.0 with first_check and if-statements); picking
// a ruleset across all of them for the input's two halves as a set; the RCP reader and check on
// the bytes as a one-file set; and the rule expression compiler/evaluator on the same bytes.
// Rules are read from $TRAINKIT_SHARE/compliance or ./share/compliance (run from the repository).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compliance/compliance.h"
#include "compliance/expr.h"
#include "compliance/rcp.h"
#include "compliance/ruleset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static lc_catalog *cat;
static int tried;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!tried) {
        tried = 1;
        char dir[4096] = "share/compliance";
        const char *env = getenv("TRAINKIT_SHARE");
        if (env && strlen(env) < 4000) strcpy(dir, env), strcat(dir, "/compliance");
        tk_err e = {0};
        if (lc_catalog_open(dir, "training", &cat, &e)) cat = NULL;
    }
    lc_arena *a = lc_arena_new();
    if (!a) return 0;
    lc_log log;
    tk_err e = {0};
    if (cat && !lc_log_parse(a, (const char *)data, size, &log)) {
        lc_result res;
        const char *versions[] = {"1.1.0", "4.1.0", "6.1.0"};
        for (int i = 0; i < 3; i++) {
            lc_ruleset *rs = lc_catalog_find(cat, versions[i]);
            lc_rules *r;
            if (!rs || lc_ruleset_rules(cat, rs, &r, &e)) continue;
            for (int strict = 0; strict < (i ? 1 : 2); strict++) lc_check_log(r, a, &log, strict, &res, &e);
        }
        // picking a ruleset for a set of two logs (the bytes cut at the line nearest their middle): a
        // benchmark the first log names narrows the rulesets the second is checked under
        const char *cut = memchr(data + size / 2, '\n', size - size / 2);
        size_t n0 = cut ? (size_t)(cut - (const char *)data) + 1 : size;
        lc_log two[2];
        lc_detect d = {0};
        if (!lc_log_parse(a, (const char *)data, n0, &two[0]) && !lc_log_parse(a, (const char *)data + n0, size - n0, &two[1]))
            lc_detect_ruleset(cat, a, two, 2, 0, &d, &e);
        lc_ruleset *rs = d.chosen ? d.chosen : lc_catalog_find(cat, "5.1.0");
        lc_rcp_run run = {0}; // a nameless run: lc_rcp_check names it "a result file"
        lc_rcp_result rr;
        if (rs && !lc_rcp_read(rs, a, (const char *)data, size, &run)) lc_rcp_check(cat, rs, a, &run, 1, &rr, &e);
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
        pv *s = pv_parse_json(a, "{\"l\": [], \"x\": 1, \"n\": null}", 28, NULL, 0, NULL);
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
