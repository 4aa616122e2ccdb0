// The compiled form of rule expressions, shared by the compiler (expr.c) and the evaluator
// (eval.c). Internal to lib/compliance.
#ifndef TK_COMPLIANCE_EXPR_INT_H
#define TK_COMPLIANCE_EXPR_INT_H

#include "compliance/expr.h"

typedef enum {
    N_CONST, N_NAME, N_SUB, N_CALL, N_NEG, N_NOT, N_AND, N_OR, N_BIN, N_CMP, N_LIST, N_IFEXP, N_ASSIGN, N_IF
} ntype;

enum {
    OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_POW, OP_BOR,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN, OP_IS, OP_ISNOT
};
extern const char *const lc_op_text[];

// Functions an expression may call; the compiler maps names to these ids.
enum { F_IS_INTEGER, F_IS_INT, F_LOG2, F_LEN, F_SORTED, F_MIN, F_MAX, F_ABS, F_INT, F_CEIL, F_FLOOR, F_GET, F_COUNT };
extern const char *const lc_fn_name[];

struct lc_expr {
    ntype t;
    int op;      // N_BIN: OP_*; N_ASSIGN: 1 for +=; N_CALL: F_*
    pv *c;       // N_CONST
    char *name;  // N_NAME, N_CALL
    lc_expr **k; // operands / arguments / list items; N_IFEXP: body, test, orelse; N_IF: test, statement
    int nk;
    int *ops;    // N_CMP: nk-1 operators
};

#endif
