// Compiler of the rule expression language (see expr.h and trainkit-compliance.5). The grammar
// is Python's, restricted to what MLCommons' rules use, with Python's precedence (lowest first):
//   a if c else b | or | and | not | comparisons (== != < <= > >= in, not in, is, is not) | '|'
//   | + - | * / % | unary - | ** | x[i], f(...)
// Statements: s['k'] = e, s['k'] += e, and if e: statement.
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compliance/expr_int.h"

const char *const lc_op_text[] = {"+", "-", "*", "/", "%", "**", "|", "==", "!=", "<", "<=", ">", ">=",
                                  "in", "not in", "is", "is not"};
const char *const lc_fn_name[] = {"is_integer", "is_int", "log2", "len", "sorted", "min", "max", "abs",
                                  "int", "ceil", "floor", "get"};

#define MAX_NESTING 64 // brackets, parentheses, calls and unary operators; keeps the stack small

typedef struct {
    lc_arena *a;
    const char *s, *p;
    char *err;
    size_t errn;
    int failed, depth;
} ps;

static lc_expr *perr(ps *P, const char *msg) {
    if (!P->failed) snprintf(P->err, P->errn, "%s", msg);
    P->failed = 1;
    return NULL;
}
static void skip(ps *P) {
    while (*P->p == ' ' || *P->p == '\t' || *P->p == '\n' || *P->p == '\r') P->p++;
}
static int peek_kw(ps *P, const char *kw) {
    skip(P);
    size_t n = strlen(kw);
    return strncmp(P->p, kw, n) == 0 && !(isalnum((unsigned char)P->p[n]) || P->p[n] == '_');
}
static int eat_kw(ps *P, const char *kw) {
    if (!peek_kw(P, kw)) return 0;
    P->p += strlen(kw);
    return 1;
}
// An operator token; a one-character token does not match the start of a longer one
// ("<" in "<=", "*" in "**", "+" in "+=").
static int eat(ps *P, const char *tok) {
    skip(P);
    size_t n = strlen(tok);
    if (strncmp(P->p, tok, n)) return 0;
    if (n == 1 && strchr("<>=+!", tok[0]) && P->p[1] == '=') return 0;
    if (n == 1 && tok[0] == '*' && P->p[1] == '*') return 0;
    P->p += n;
    return 1;
}
static lc_expr *node(ps *P, ntype t, int nk) {
    lc_expr *e = lc_alloc(P->a, sizeof *e);
    if (!e) return perr(P, "out of memory");
    e->t = t;
    e->nk = nk;
    if (nk) {
        e->k = lc_alloc(P->a, (size_t)nk * sizeof(lc_expr *));
        if (!e->k) return perr(P, "out of memory");
    }
    return e;
}
static lc_expr *node2(ps *P, ntype t, int op, lc_expr *l, lc_expr *r) {
    lc_expr *e;
    if (!l || !r || !(e = node(P, t, 2))) return NULL;
    e->op = op;
    e->k[0] = l;
    e->k[1] = r;
    return e;
}
static lc_expr *konst(ps *P, pv *v) {
    lc_expr *e = node(P, N_CONST, 0);
    if (e && !(e->c = v)) return perr(P, "out of memory");
    return e;
}

static const char *const reserved[] = {"and", "or", "not", "in", "is", "if", "else"};

static lc_expr *p_expr(ps *P);

static lc_expr *p_atom(ps *P) {
    skip(P);
    const char *q = P->p;
    if (*q == '(') {
        P->p++;
        lc_expr *e = p_expr(P);
        if (!e) return NULL;
        if (!eat(P, ")")) return perr(P, "expected ')'");
        return e;
    }
    if (*q == '[') {
        P->p++;
        lc_expr **items = NULL;
        int n = 0, cap = 0;
        if (!eat(P, "]")) {
            for (;;) {
                if (n == cap) { // grow in the arena (rule lists can be long)
                    lc_expr **ni = lc_alloc(P->a, (size_t)(cap = cap ? 2 * cap : 16) * sizeof *ni);
                    if (!ni) return perr(P, "out of memory");
                    if (n) memcpy(ni, items, (size_t)n * sizeof *ni);
                    items = ni;
                }
                if (!(items[n++] = p_expr(P))) return NULL;
                if (eat(P, "]")) break;
                if (!eat(P, ",")) return perr(P, "expected ',' or ']'");
                if (eat(P, "]")) break;
            }
        }
        lc_expr *e = node(P, N_LIST, n);
        if (e && n) memcpy(e->k, items, (size_t)n * sizeof *items);
        return e;
    }
    if (*q == '\'' || *q == '"') {
        char quote = *q++, buf[512];
        size_t n = 0;
        while (*q && *q != quote) {
            char c = *q++;
            if (c == '\\') {
                c = *q++;
                if (c == 'n') c = '\n';
                else if (c == 't') c = '\t';
                else if (c == 0) return perr(P, "unterminated string");
            }
            if (n + 1 >= sizeof buf) return perr(P, "string literal too long");
            buf[n++] = c;
        }
        if (*q != quote) return perr(P, "unterminated string");
        P->p = q + 1;
        return konst(P, pv_str(P->a, buf, n));
    }
    if (isdigit((unsigned char)*q) || (*q == '.' && isdigit((unsigned char)q[1]))) {
        char *end;
        const char *r = q;
        while (isdigit((unsigned char)*r)) r++;
        int isf = *r == '.' || *r == 'e' || *r == 'E';
        pv *v;
        if (isf) {
            v = pv_float(P->a, strtod(q, &end));
        } else {
            v = pv_int(P->a, strtoll(q, &end, 10));
        }
        P->p = end;
        return konst(P, v);
    }
    if (isalpha((unsigned char)*q) || *q == '_') {
        const char *r = q;
        while (isalnum((unsigned char)*r) || *r == '_') r++;
        size_t n = (size_t)(r - q);
        for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
            if (strlen(reserved[i]) == n && !strncmp(q, reserved[i], n)) return perr(P, "unexpected keyword");
        P->p = r;
        if (n == 4 && !strncmp(q, "true", 4)) return konst(P, pv_bool(P->a, 1));
        if (n == 5 && !strncmp(q, "false", 5)) return konst(P, pv_bool(P->a, 0));
        if (n == 4 && !strncmp(q, "null", 4)) return konst(P, pv_new(P->a, PV_NULL));
        if (n == 3 && !strncmp(q, "inf", 3)) return konst(P, pv_float(P->a, INFINITY));
        char *name = lc_alloc(P->a, n + 1);
        if (!name) return perr(P, "out of memory");
        memcpy(name, q, n);
        lc_expr *e;
        if (eat(P, "(")) {
            lc_expr *args[8];
            int na = 0;
            if (!eat(P, ")")) {
                for (;;) {
                    if (na == 8) return perr(P, "too many arguments");
                    if (!(args[na++] = p_expr(P))) return NULL;
                    if (eat(P, ")")) break;
                    if (!eat(P, ",")) return perr(P, "expected ',' or ')'");
                }
            }
            int fn = -1;
            for (int i = 0; i < F_COUNT; i++)
                if (!strcmp(name, lc_fn_name[i])) fn = i;
            if (fn < 0) return perr(P, "unknown function");
            if ((e = node(P, N_CALL, na))) {
                e->name = name;
                e->op = fn;
                if (na) memcpy(e->k, args, (size_t)na * sizeof *args);
            }
            return e;
        }
        if ((e = node(P, N_NAME, 0))) e->name = name;
        return e;
    }
    return perr(P, *q ? "unexpected character" : "unexpected end of expression");
}

static lc_expr *p_postfix(ps *P) {
    lc_expr *e = p_atom(P);
    while (e && eat(P, "[")) {
        lc_expr *i = p_expr(P);
        if (!i) return NULL;
        if (!eat(P, "]")) return perr(P, "expected ']'");
        e = node2(P, N_SUB, 0, e, i);
    }
    return e;
}

static lc_expr *p_unary(ps *P);

// x ** y: binds tighter than a unary minus on its left (-2 ** 2 is -4); its right side is a
// unary expression (2 ** -1), so it groups to the right.
static lc_expr *p_power(ps *P) {
    lc_expr *b = p_postfix(P);
    if (b && eat(P, "**")) {
        if (++P->depth > MAX_NESTING) return perr(P, "expression nested too deeply");
        lc_expr *x = p_unary(P);
        P->depth--;
        return node2(P, N_BIN, OP_POW, b, x);
    }
    return b;
}

static lc_expr *p_unary(ps *P) {
    if (eat(P, "-")) {
        if (++P->depth > MAX_NESTING) return perr(P, "expression nested too deeply");
        lc_expr *x = p_unary(P), *e;
        P->depth--;
        if (!x || !(e = node(P, N_NEG, 1))) return NULL;
        e->k[0] = x;
        return e;
    }
    return p_power(P);
}

// Left-associative binary levels: 0 '|', 1 + -, 2 * / %.
static lc_expr *p_bin(ps *P, int level) {
    lc_expr *l = level == 2 ? p_unary(P) : p_bin(P, level + 1);
    while (l) {
        int op;
        if (level == 0 && eat(P, "|")) op = OP_BOR;
        else if (level == 1 && eat(P, "+")) op = OP_ADD;
        else if (level == 1 && eat(P, "-")) op = OP_SUB;
        else if (level == 2 && eat(P, "*")) op = OP_MUL;
        else if (level == 2 && eat(P, "/")) op = OP_DIV;
        else if (level == 2 && eat(P, "%")) op = OP_MOD;
        else break;
        l = node2(P, N_BIN, op, l, level == 2 ? p_unary(P) : p_bin(P, level + 1));
    }
    return l;
}

static int p_cmpop(ps *P) {
    if (eat(P, "==")) return OP_EQ;
    if (eat(P, "!=")) return OP_NE;
    if (eat(P, "<=")) return OP_LE;
    if (eat(P, ">=")) return OP_GE;
    if (eat(P, "<")) return OP_LT;
    if (eat(P, ">")) return OP_GT;
    if (eat_kw(P, "in")) return OP_IN;
    if (eat_kw(P, "is")) return eat_kw(P, "not") ? OP_ISNOT : OP_IS;
    const char *save = P->p;
    if (eat_kw(P, "not")) {
        if (eat_kw(P, "in")) return OP_NOTIN;
        P->p = save;
    }
    return -1;
}

static lc_expr *p_cmp(ps *P) {
    lc_expr *items[16];
    int ops[16], n = 0;
    if (!(items[n++] = p_bin(P, 0))) return NULL;
    int op;
    while ((op = p_cmpop(P)) >= 0) {
        if (n == 16) return perr(P, "comparison chain too long");
        ops[n - 1] = op;
        if (!(items[n++] = p_bin(P, 0))) return NULL;
    }
    if (n == 1) return items[0];
    lc_expr *e = node(P, N_CMP, n);
    if (!e) return NULL;
    memcpy(e->k, items, (size_t)n * sizeof *items);
    e->ops = lc_alloc(P->a, (size_t)(n - 1) * sizeof(int));
    if (!e->ops) return perr(P, "out of memory");
    memcpy(e->ops, ops, (size_t)(n - 1) * sizeof(int));
    return e;
}

static lc_expr *p_not(ps *P) {
    if (eat_kw(P, "not")) {
        if (++P->depth > MAX_NESTING) return perr(P, "expression nested too deeply");
        lc_expr *x = p_not(P), *e;
        P->depth--;
        if (!x || !(e = node(P, N_NOT, 1))) return NULL;
        e->k[0] = x;
        return e;
    }
    return p_cmp(P);
}

static lc_expr *p_logic(ps *P, int is_or) {
    lc_expr *l = is_or ? p_logic(P, 0) : p_not(P);
    while (l && eat_kw(P, is_or ? "or" : "and"))
        l = node2(P, is_or ? N_OR : N_AND, 0, l, is_or ? p_logic(P, 0) : p_not(P));
    return l;
}

static lc_expr *p_expr(ps *P) {
    if (++P->depth > MAX_NESTING) return perr(P, "expression nested too deeply");
    lc_expr *e = p_logic(P, 1);
    if (e && eat_kw(P, "if")) { // body if test else orelse
        lc_expr *test = p_logic(P, 1), *x;
        if (test && !eat_kw(P, "else")) return perr(P, "expected 'else'");
        lc_expr *orelse = test ? p_expr(P) : NULL;
        if (!orelse || !(x = node(P, N_IFEXP, 3))) return NULL;
        x->k[0] = e;
        x->k[1] = test;
        x->k[2] = orelse;
        e = x;
    }
    P->depth--;
    return e;
}

static lc_expr *p_stmt(ps *P) {
    if (eat_kw(P, "if")) {
        if (++P->depth > MAX_NESTING) return perr(P, "statement nested too deeply");
        lc_expr *test = p_expr(P);
        if (test && !eat(P, ":")) return perr(P, "expected ':' after the condition of 'if'");
        lc_expr *body = test ? p_stmt(P) : NULL;
        P->depth--;
        return node2(P, N_IF, 0, test, body);
    }
    lc_expr *e = p_expr(P);
    if (!e) return NULL;
    int aug = eat(P, "+=");
    if (!aug && !eat(P, "=")) return perr(P, "expected '=' or '+=' in a statement");
    if (e->t != N_SUB) return perr(P, "a statement assigns to s['NAME']");
    return node2(P, N_ASSIGN, aug, e, p_expr(P));
}

lc_expr *lc_expr_compile(lc_arena *a, const char *src, int stmt, char *err, size_t errn, int *col) {
    ps P = {a, src, src, err, errn, 0, 0};
    lc_expr *e = stmt ? p_stmt(&P) : p_expr(&P);
    skip(&P);
    if (e && *P.p) e = perr(&P, "unexpected text after the expression");
    if (col) *col = (int)(P.p - src);
    return e;
}
