// Compiler and evaluator of the rule expression language (see expr.h and trainkit-compliance.5).
#include "compliance/expr.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
    N_CONST, N_NAME, N_SUB, N_CALL, N_NEG, N_NOT, N_AND, N_OR, N_BIN, N_CMP, N_LIST, N_ASSIGN
} ntype;

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN };
static const char *op_text[] = {"+", "-", "*", "/", "==", "!=", "<", "<=", ">", ">=", "in", "not in"};

struct lc_expr {
    ntype t;
    int op;       // N_BIN; N_ASSIGN: 1 for +=
    pv *c;        // N_CONST
    char *name;   // N_NAME, N_CALL
    lc_expr **k;  // operands / arguments / list items
    int nk;
    int *ops;     // N_CMP: nk-1 operators
};

// ---- tokenizer + parser ---------------------------------------------------------------------

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
static int eat(ps *P, const char *tok) {
    skip(P);
    size_t n = strlen(tok);
    if (strncmp(P->p, tok, n)) return 0;
    if (n == 1 && (tok[0] == '<' || tok[0] == '>' || tok[0] == '=' || tok[0] == '+') && P->p[1] == '=') return 0;
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
        lc_expr *e = node(P, N_CONST, 0);
        if (e && !(e->c = pv_str(P->a, buf, n))) return perr(P, "out of memory");
        return e;
    }
    if (isdigit((unsigned char)*q) || (*q == '.' && isdigit((unsigned char)q[1]))) {
        char *end;
        int isf = 0;
        const char *r = q;
        while (isdigit((unsigned char)*r)) r++;
        if (*r == '.' || *r == 'e' || *r == 'E') isf = 1;
        lc_expr *e = node(P, N_CONST, 0);
        if (!e) return NULL;
        if (isf) {
            double d = strtod(q, &end);
            e->c = pv_float(P->a, d);
        } else {
            long long i = strtoll(q, &end, 10);
            e->c = pv_int(P->a, i);
        }
        if (!e->c) return perr(P, "out of memory");
        P->p = end;
        return e;
    }
    if (isalpha((unsigned char)*q) || *q == '_') {
        const char *r = q;
        while (isalnum((unsigned char)*r) || *r == '_') r++;
        size_t n = (size_t)(r - q);
        P->p = r;
        lc_expr *e;
        if (n == 4 && !strncmp(q, "true", 4)) {
            if ((e = node(P, N_CONST, 0))) e->c = pv_bool(P->a, 1);
            return e;
        }
        if (n == 5 && !strncmp(q, "false", 5)) {
            if ((e = node(P, N_CONST, 0))) e->c = pv_bool(P->a, 0);
            return e;
        }
        if (n == 4 && !strncmp(q, "null", 4)) {
            if ((e = node(P, N_CONST, 0))) e->c = pv_new(P->a, PV_NULL);
            return e;
        }
        if (n == 3 && !strncmp(q, "inf", 3)) {
            if ((e = node(P, N_CONST, 0))) e->c = pv_float(P->a, INFINITY);
            return e;
        }
        char *name = lc_alloc(P->a, n + 1);
        if (!name) return perr(P, "out of memory");
        memcpy(name, q, n);
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
            static const char *fns[] = {"is_integer", "is_int", "log2", "len", "sorted", "min"};
            int ok = 0;
            for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) ok |= !strcmp(name, fns[i]);
            if (!ok) return perr(P, "unknown function");
            if ((e = node(P, N_CALL, na))) {
                e->name = name;
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
        lc_expr *s = node(P, N_SUB, 2);
        if (!s) return NULL;
        s->k[0] = e;
        s->k[1] = i;
        e = s;
    }
    return e;
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
    return p_postfix(P);
}

static lc_expr *p_bin(ps *P, int level) { // level 0: + -, level 1: * /
    lc_expr *l = level ? p_unary(P) : p_bin(P, 1);
    while (l) {
        int op;
        if (level == 0 && eat(P, "+")) op = OP_ADD;
        else if (level == 0 && eat(P, "-")) op = OP_SUB;
        else if (level == 1 && eat(P, "*")) op = OP_MUL;
        else if (level == 1 && eat(P, "/")) op = OP_DIV;
        else break;
        lc_expr *r = level ? p_unary(P) : p_bin(P, 1), *e;
        if (!r || !(e = node(P, N_BIN, 2))) return NULL;
        e->op = op;
        e->k[0] = l;
        e->k[1] = r;
        l = e;
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
    while (l && eat_kw(P, is_or ? "or" : "and")) {
        lc_expr *r = is_or ? p_logic(P, 0) : p_not(P), *e;
        if (!r || !(e = node(P, is_or ? N_OR : N_AND, 2))) return NULL;
        e->k[0] = l;
        e->k[1] = r;
        l = e;
    }
    return l;
}

static lc_expr *p_expr(ps *P) {
    if (++P->depth > MAX_NESTING) return perr(P, "expression nested too deeply");
    lc_expr *e = p_logic(P, 1);
    P->depth--;
    return e;
}

lc_expr *lc_expr_compile(lc_arena *a, const char *src, int stmt, char *err, size_t errn, int *col) {
    ps P = {a, src, src, err, errn, 0, 0};
    lc_expr *e = p_expr(&P);
    if (e && stmt) {
        int aug = eat(&P, "+=");
        if (!aug && !eat(&P, "=")) e = perr(&P, "expected '=' or '+=' in a statement");
        else if (e->t != N_SUB) e = perr(&P, "a statement assigns to s['NAME']");
        else {
            lc_expr *r = p_expr(&P), *as;
            if (!r || !(as = node(&P, N_ASSIGN, 2))) e = NULL;
            else {
                as->op = aug;
                as->k[0] = e;
                as->k[1] = r;
                e = as;
            }
        }
    }
    skip(&P);
    if (e && *P.p) e = perr(&P, "unexpected text after the expression");
    if (col) *col = (int)(P.p - src);
    return e;
}

// ---- evaluation -----------------------------------------------------------------------------

typedef struct {
    lc_env *env;
    char *err;
    size_t errn;
} ev;

static int efail(ev *E, const char *fmt, const char *a, const char *b) {
    snprintf(E->err, E->errn, fmt, a, b);
    return -1;
}

static int eval(ev *E, const lc_expr *x, pv **out);

static pv *mk(ev *E, pv *v) {
    if (!v) snprintf(E->err, E->errn, "MemoryError");
    return v;
}

static int arith(ev *E, int op, const pv *a, const pv *b, pv **out) {
    lc_arena *T = E->env->tmp;
    if (pv_is_number(a) && pv_is_number(b)) {
        if (op != OP_DIV && a->t != PV_FLOAT && b->t != PV_FLOAT) {
            long long r;
            int ovf = op == OP_ADD ? __builtin_add_overflow(a->u.i, b->u.i, &r)
                      : op == OP_SUB ? __builtin_sub_overflow(a->u.i, b->u.i, &r)
                                     : __builtin_mul_overflow(a->u.i, b->u.i, &r);
            if (!ovf) return (*out = mk(E, pv_int(T, r))) ? 0 : -1;
        }
        double x = pv_num(a), y = pv_num(b), r;
        if (op == OP_DIV && y == 0) return efail(E, "ZeroDivisionError: division by zero%s%s", "", "");
        r = op == OP_ADD ? x + y : op == OP_SUB ? x - y : op == OP_MUL ? x * y : x / y;
        return (*out = mk(E, pv_float(T, r))) ? 0 : -1;
    }
    if (op == OP_ADD && a->t == PV_STR && b->t == PV_STR) {
        char *c = lc_alloc(T, a->u.s.n + b->u.s.n + 1);
        pv *v = pv_new(T, PV_STR);
        if (!c || !v) return efail(E, "MemoryError%s%s", "", "");
        memcpy(c, a->u.s.s, a->u.s.n);
        memcpy(c + a->u.s.n, b->u.s.s, b->u.s.n);
        v->u.s.s = c;
        v->u.s.n = a->u.s.n + b->u.s.n;
        *out = v;
        return 0;
    }
    if (op == OP_ADD && a->t == PV_LIST && b->t == PV_LIST) {
        pv *v = pv_new(T, PV_LIST);
        if (!v) return efail(E, "MemoryError%s%s", "", "");
        for (size_t i = 0; i < a->u.l.n; i++) if (pv_list_push(T, v, a->u.l.v[i])) return efail(E, "MemoryError%s%s", "", "");
        for (size_t i = 0; i < b->u.l.n; i++) if (pv_list_push(T, v, b->u.l.v[i])) return efail(E, "MemoryError%s%s", "", "");
        *out = v;
        return 0;
    }
    char m[160];
    snprintf(m, sizeof m, "TypeError: unsupported operand type(s) for %s: '%%s' and '%%s'", op_text[op]);
    return efail(E, m, pv_type_name(a), pv_type_name(b));
}

static int compare(ev *E, int op, const pv *a, const pv *b, int *res) {
    if (op == OP_EQ) { *res = pv_eq(a, b); return 0; }
    if (op == OP_NE) { *res = !pv_eq(a, b); return 0; }
    if (op == OP_IN || op == OP_NOTIN) {
        char m[200];
        if (pv_contains(b, a, res, m, sizeof m)) return efail(E, "TypeError: %s%s", m, "");
        if (op == OP_NOTIN) *res = !*res;
        return 0;
    }
    int c;
    char m[200];
    if (pv_cmp(a, b, &c, m, sizeof m)) {
        char f[200];
        snprintf(f, sizeof f, "TypeError: '%s' not supported between instances of '%%s' and '%%s'", op_text[op]);
        return efail(E, f, pv_type_name(a), pv_type_name(b));
    }
    *res = c == 2 ? 0 : op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
    return 0;
}

static int subscript(ev *E, pv *base, pv *idx, pv **out) {
    if (base->t == PV_DICT) {
        if (idx->t == PV_LIST || idx->t == PV_DICT) return efail(E, "TypeError: unhashable type: '%s'%s", pv_type_name(idx), "");
        pv *r = NULL;
        if (idx->t == PV_STR) {
            for (size_t i = 0; i < base->u.d.n; i++)
                if (base->u.d.kv[i].kn == idx->u.s.n && !memcmp(base->u.d.kv[i].k, idx->u.s.s, idx->u.s.n)) r = base->u.d.kv[i].v;
        }
        if (!r) {
            char k[120];
            pv_str_of(idx, k, sizeof k);
            return efail(E, "KeyError: '%s'%s", k, "");
        }
        *out = r;
        return 0;
    }
    if (base->t == PV_LIST || base->t == PV_STR) {
        if (idx->t != PV_INT && idx->t != PV_BOOL)
            return efail(E, "TypeError: %s indices must be integers, not %s", base->t == PV_LIST ? "list" : "string", pv_type_name(idx));
        long long n = base->t == PV_LIST ? (long long)base->u.l.n : (long long)base->u.s.n, i = idx->u.i;
        if (i < 0) i += n;
        if (i < 0 || i >= n) return efail(E, "IndexError: %s index out of range%s", base->t == PV_LIST ? "list" : "string", "");
        if (base->t == PV_LIST) *out = base->u.l.v[i];
        else if (!(*out = mk(E, pv_str(E->env->tmp, base->u.s.s + i, 1)))) return -1;
        return 0;
    }
    return efail(E, "TypeError: '%s' object is not subscriptable%s", pv_type_name(base), "");
}

// Merge sort with Python's ordering; fails like sorted() on incomparable items.
static int msort(ev *E, pv **v, pv **tmp, size_t n) {
    if (n < 2) return 0;
    size_t h = n / 2;
    if (msort(E, v, tmp, h) || msort(E, v + h, tmp, n - h)) return -1;
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) {
        int lt;
        if (compare(E, OP_LT, v[j], v[i], &lt)) return -1;
        tmp[k++] = lt ? v[j++] : v[i++];
    }
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
    return 0;
}

static int call(ev *E, const lc_expr *x, pv **out) {
    pv *a[8];
    lc_arena *T = E->env->tmp;
    for (int i = 0; i < x->nk; i++)
        if (eval(E, x->k[i], &a[i])) return -1;
    const char *f = x->name;
    if (strcmp(f, "min") && x->nk != 1) return efail(E, "TypeError: %s() takes exactly one argument%s", f, "");
    if (!strcmp(f, "is_int")) return (*out = mk(E, pv_bool(T, a[0]->t == PV_INT || a[0]->t == PV_BOOL))) ? 0 : -1;
    if (!strcmp(f, "is_integer") || !strcmp(f, "log2")) {
        if (!pv_is_number(a[0])) return efail(E, "TypeError: must be real number, not %s%s", pv_type_name(a[0]), "");
        double d = pv_num(a[0]);
        if (!strcmp(f, "log2")) {
            if (!(d > 0)) return efail(E, "ValueError: math domain error%s%s", "", "");
            return (*out = mk(E, pv_float(T, log2(d)))) ? 0 : -1;
        }
        if (a[0]->t != PV_FLOAT) return (*out = mk(E, pv_bool(T, 1))) ? 0 : -1;
        if (isnan(d)) return efail(E, "ValueError: cannot convert float NaN to integer%s%s", "", "");
        if (isinf(d)) return efail(E, "OverflowError: cannot convert float infinity to integer%s%s", "", "");
        return (*out = mk(E, pv_bool(T, fabs(nearbyint(d) - d) < 0.00001))) ? 0 : -1; // round() is half-even
    }
    if (!strcmp(f, "len")) {
        size_t n;
        if (a[0]->t == PV_LIST) n = a[0]->u.l.n;
        else if (a[0]->t == PV_DICT) n = a[0]->u.d.n;
        else if (a[0]->t == PV_STR) {
            n = 0;
            for (size_t i = 0; i < a[0]->u.s.n; i++) n += ((unsigned char)a[0]->u.s.s[i] & 0xc0) != 0x80;
        } else return efail(E, "TypeError: object of type '%s' has no len()%s", pv_type_name(a[0]), "");
        return (*out = mk(E, pv_int(T, (long long)n))) ? 0 : -1;
    }
    // sorted(x), min(x) over a list; min(a, b, ...) over its arguments
    pv **items = a;
    size_t n = (size_t)x->nk;
    if (x->nk == 1) {
        if (a[0]->t != PV_LIST) return efail(E, "TypeError: '%s' object is not iterable%s", pv_type_name(a[0]), "");
        items = a[0]->u.l.v;
        n = a[0]->u.l.n;
    }
    if (!strcmp(f, "min")) {
        if (n == 0) return efail(E, "ValueError: min() arg is an empty sequence%s%s", "", "");
        pv *m = items[0];
        for (size_t i = 1; i < n; i++) {
            int lt;
            if (compare(E, OP_LT, items[i], m, &lt)) return -1;
            if (lt) m = items[i];
        }
        *out = m;
        return 0;
    }
    pv *l = pv_new(T, PV_LIST);
    pv **tmp = lc_alloc(T, (n + 1) * sizeof(pv *));
    if (!l || !tmp) return efail(E, "MemoryError%s%s", "", "");
    for (size_t i = 0; i < n; i++) if (pv_list_push(T, l, items[i])) return efail(E, "MemoryError%s%s", "", "");
    if (n && msort(E, l->u.l.v, tmp, n)) return -1;
    *out = l;
    return 0;
}

static int eval(ev *E, const lc_expr *x, pv **out) {
    lc_env *env = E->env;
    switch (x->t) {
    case N_CONST: *out = x->c; return 0;
    case N_NAME:
        if (!strcmp(x->name, "v") && env->v) { *out = env->v; return 0; }
        if (!strcmp(x->name, "s") && env->s) { *out = env->s; return 0; }
        if (!strcmp(x->name, "ts") && env->has_ts) return (*out = mk(E, pv_float(env->tmp, env->ts))) ? 0 : -1;
        if (env->cst && (*out = pv_dict_get(env->cst, x->name))) return 0;
        return efail(E, "NameError: name '%s' is not defined%s", x->name, "");
    case N_SUB: {
        pv *b, *i;
        if (eval(E, x->k[0], &b) || eval(E, x->k[1], &i)) return -1;
        return subscript(E, b, i, out);
    }
    case N_CALL: return call(E, x, out);
    case N_NEG: {
        pv *a;
        if (eval(E, x->k[0], &a)) return -1;
        if (a->t == PV_FLOAT) return (*out = mk(E, pv_float(env->tmp, -a->u.f))) ? 0 : -1;
        if (a->t == PV_INT || a->t == PV_BOOL) return (*out = mk(E, pv_int(env->tmp, -a->u.i))) ? 0 : -1;
        return efail(E, "TypeError: bad operand type for unary -: '%s'%s", pv_type_name(a), "");
    }
    case N_NOT: {
        pv *a;
        if (eval(E, x->k[0], &a)) return -1;
        return (*out = mk(E, pv_bool(env->tmp, !pv_truthy(a)))) ? 0 : -1;
    }
    case N_AND:
    case N_OR: { // Python returns the deciding operand
        pv *a;
        if (eval(E, x->k[0], &a)) return -1;
        if (pv_truthy(a) == (x->t == N_OR)) { *out = a; return 0; }
        return eval(E, x->k[1], out);
    }
    case N_BIN: {
        pv *a, *b;
        if (eval(E, x->k[0], &a) || eval(E, x->k[1], &b)) return -1;
        return arith(E, x->op, a, b, out);
    }
    case N_CMP: {
        pv *l, *r;
        int res = 1;
        if (eval(E, x->k[0], &l)) return -1;
        for (int i = 0; i + 1 < x->nk && res; i++) { // chained: a < b < c
            if (eval(E, x->k[i + 1], &r) || compare(E, x->ops[i], l, r, &res)) return -1;
            l = r;
        }
        return (*out = mk(E, pv_bool(env->tmp, res))) ? 0 : -1;
    }
    case N_LIST: {
        pv *l = pv_new(env->tmp, PV_LIST), *it;
        if (!l) return efail(E, "MemoryError%s%s", "", "");
        for (int i = 0; i < x->nk; i++) {
            if (eval(E, x->k[i], &it)) return -1;
            if (pv_list_push(env->tmp, l, it)) return efail(E, "MemoryError%s%s", "", "");
        }
        *out = l;
        return 0;
    }
    case N_ASSIGN: break;
    }
    return efail(E, "SyntaxError: a statement is not an expression%s%s", "", "");
}

int lc_expr_eval(const lc_expr *x, lc_env *env, pv **out, char *err, size_t errn) {
    ev E = {env, err, errn};
    return eval(&E, x, out);
}

int lc_expr_exec(const lc_expr *x, lc_env *env, char *err, size_t errn) {
    ev E = {env, err, errn};
    if (x->t != N_ASSIGN) {
        pv *ignored;
        return eval(&E, x, &ignored);
    }
    const lc_expr *tgt = x->k[0];
    pv *cont, *key, *val;
    if (eval(&E, tgt->k[0], &cont) || eval(&E, tgt->k[1], &key) || eval(&E, x->k[1], &val)) return -1;
    if (x->op) { // +=
        pv *cur;
        if (subscript(&E, cont, key, &cur) || arith(&E, OP_ADD, cur, val, &val)) return -1;
    }
    if (cont->t != PV_DICT || key->t != PV_STR)
        return efail(&E, "TypeError: can only assign to a string key of a dict, not '%s'[%s]", pv_type_name(cont), pv_type_name(key));
    if (pv_dict_set(env->tmp, cont, key->u.s.s, key->u.s.n, val)) return efail(&E, "MemoryError%s%s", "", "");
    return 0;
}
