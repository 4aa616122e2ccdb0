// The small expression language of trainkit's compliance rules (man 5 trainkit-compliance).
// Python-like syntax and semantics, so rules read like MLCommons' originals:
//   v['value'] >= 0.8025 and v['value'] < 1.0        'epoch_num' in v['metadata']
//   ts - s['first_init_start'] < 30*60*1e3            is_integer(log2(v['value'] / 0.0001))
// Statements (rule "post" actions):  s['name'] = EXPR   s['name'] += EXPR   if EXPR: STATEMENT
// An evaluation that Python would answer with an exception (a type mismatch, a missing key, a
// division by zero) returns -1 with the message, so the engine can report it the way the
// official checker does ("could not be evaluated") instead of crashing.
#ifndef TK_COMPLIANCE_EXPR_H
#define TK_COMPLIANCE_EXPR_H

#include "compliance/pyval.h"

typedef struct lc_expr lc_expr;

// Names an expression can use besides its literals and functions.
typedef struct lc_env {
    pv *v;         // the record: {"value": ..., "metadata": ...}
    pv *s;         // the rule file's state (a dict)
    double ts;     // the record's time_ms
    int has_ts;    // 0 in end checks (no record)
    const pv *cst; // the rule file's "const" dict, or NULL
    lc_arena *tmp; // temporaries (per checked file)
} lc_env;

// Compile src (an expression, or with stmt=1 a statement). Allocated in a (the rule arena).
// On a syntax error returns NULL and writes the message and the column (0-based).
lc_expr *lc_expr_compile(lc_arena *a, const char *src, int stmt, char *err, size_t errn, int *col);

// Evaluate an expression: 0 and *out, or -1 and err ("TypeError: ..." style message).
int lc_expr_eval(const lc_expr *x, lc_env *env, pv **out, char *err, size_t errn);
// Execute a statement: 0 or -1 and err.
int lc_expr_exec(const lc_expr *x, lc_env *env, char *err, size_t errn);

#endif
