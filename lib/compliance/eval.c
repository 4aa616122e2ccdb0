// Evaluator of the rule expression language (see expr.h and trainkit-compliance.5), with the
// semantics of the Python operators and builtins MLCommons' rules use. What Python answers with an
// exception is an error here (-1 and a "TypeError: ..." style message), never a crash.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compliance/expr_int.h"

typedef struct {
    lc_env *env;
    char *err;
    size_t errn;
} ev;

static int efail(ev *E, const char *fmt, const char *a, const char *b) {
    snprintf(E->err, E->errn, fmt, a, b);
    return -1;
}
#define OOM(E) efail(E, "MemoryError%s%s", "", "")

static int eval(ev *E, const lc_expr *x, pv **out);

static int ret(ev *E, pv *v, pv **out) {
    if (!v) return OOM(E);
    *out = v;
    return 0;
}
static int ret_int(ev *E, long long i, pv **out) { return ret(E, pv_int(E->env->tmp, i), out); }
static int ret_float(ev *E, double f, pv **out) { return ret(E, pv_float(E->env->tmp, f), out); }
static int ret_bool(ev *E, int b, pv **out) { return ret(E, pv_bool(E->env->tmp, b), out); }

// An integral double as a Python int: exact within long long, else kept as a float of the same
// value (Python's int is unbounded; comparisons with it are then still right to the double).
static int ret_integral(ev *E, double d, pv **out) {
    if (d >= -9223372036854775808.0 && d < 9223372036854775808.0) return ret_int(E, (long long)d, out);
    return ret_float(E, d, out);
}

static int float_to_int_error(ev *E, double d) {
    if (isnan(d)) return efail(E, "ValueError: cannot convert float NaN to integer%s%s", "", "");
    return efail(E, "OverflowError: cannot convert float infinity to integer%s%s", "", "");
}

static int is_intlike(const pv *v) { return v->t == PV_INT || v->t == PV_BOOL; }

// x ** y as Python computes it for ints and floats.
static int power(ev *E, const pv *a, const pv *b, pv **out) {
    if (is_intlike(a) && is_intlike(b) && b->u.i >= 0) {
        long long r = 1, base = a->u.i, e = b->u.i;
        int ovf = 0;
        while (e && !ovf) { // square and multiply; on overflow fall back to the float power
            if (e & 1) ovf |= __builtin_mul_overflow(r, base, &r);
            e >>= 1;
            if (e) ovf |= __builtin_mul_overflow(base, base, &base);
        }
        if (!ovf) return ret_int(E, r, out);
    }
    double x = pv_num(a), y = pv_num(b);
    if (x == 0 && y < 0) return efail(E, "ZeroDivisionError: 0.0 cannot be raised to a negative power%s%s", "", "");
    if (x < 0 && isfinite(y) && y != floor(y)) // Python returns a complex number here
        return efail(E, "ValueError: a negative number to a fractional power is complex%s%s", "", "");
    double r = pow(x, y);
    if (isinf(r) && isfinite(x) && isfinite(y)) return efail(E, "OverflowError: (34, 'Numerical result out of range')%s%s", "", "");
    return ret_float(E, r, out);
}

// x % y: the result has the sign of y (Python), for ints and floats.
static int modulo(ev *E, const pv *a, const pv *b, pv **out) {
    if (is_intlike(a) && is_intlike(b)) {
        long long x = a->u.i, y = b->u.i;
        if (y == 0) return efail(E, "ZeroDivisionError: integer modulo by zero%s%s", "", "");
        if (y == -1) return ret_int(E, 0, out); // also avoids LLONG_MIN % -1
        long long r = x % y;
        if (r != 0 && ((r < 0) != (y < 0))) r += y;
        return ret_int(E, r, out);
    }
    double x = pv_num(a), y = pv_num(b);
    if (y == 0) return efail(E, "ZeroDivisionError: float modulo%s%s", "", "");
    double m = fmod(x, y);
    if (m != 0) {
        if ((y < 0) != (m < 0)) m += y;
    } else {
        m = copysign(0.0, y);
    }
    return ret_float(E, m, out);
}

static int arith(ev *E, int op, const pv *a, const pv *b, pv **out) {
    lc_arena *T = E->env->tmp;
    if (op == OP_BOR) { // bool | bool is a bool, with ints an int; nothing else
        if (a->t == PV_BOOL && b->t == PV_BOOL) return ret_bool(E, a->u.i | b->u.i, out);
        if (is_intlike(a) && is_intlike(b)) return ret_int(E, a->u.i | b->u.i, out);
    } else if (pv_is_number(a) && pv_is_number(b)) {
        if (op == OP_POW) return power(E, a, b, out);
        if (op == OP_MOD) return modulo(E, a, b, out);
        if (op != OP_DIV && a->t != PV_FLOAT && b->t != PV_FLOAT) {
            long long r;
            int ovf = op == OP_ADD ? __builtin_add_overflow(a->u.i, b->u.i, &r)
                      : op == OP_SUB ? __builtin_sub_overflow(a->u.i, b->u.i, &r)
                                     : __builtin_mul_overflow(a->u.i, b->u.i, &r);
            if (!ovf) return ret_int(E, r, out);
        }
        double x = pv_num(a), y = pv_num(b), r;
        if (op == OP_DIV && y == 0) return efail(E, "ZeroDivisionError: division by zero%s%s", "", "");
        r = op == OP_ADD ? x + y : op == OP_SUB ? x - y : op == OP_MUL ? x * y : x / y;
        return ret_float(E, r, out);
    } else if (op == OP_ADD && a->t == PV_STR && b->t == PV_STR) {
        char *c = lc_alloc(T, a->u.s.n + b->u.s.n + 1);
        pv *v = pv_new(T, PV_STR);
        if (!c || !v) return OOM(E);
        memcpy(c, a->u.s.s, a->u.s.n);
        memcpy(c + a->u.s.n, b->u.s.s, b->u.s.n);
        v->u.s.s = c;
        v->u.s.n = a->u.s.n + b->u.s.n;
        *out = v;
        return 0;
    } else if (op == OP_ADD && a->t == PV_LIST && b->t == PV_LIST) {
        pv *v = pv_new(T, PV_LIST);
        if (!v) return OOM(E);
        for (size_t i = 0; i < a->u.l.n; i++) if (pv_list_push(T, v, a->u.l.v[i])) return OOM(E);
        for (size_t i = 0; i < b->u.l.n; i++) if (pv_list_push(T, v, b->u.l.v[i])) return OOM(E);
        *out = v;
        return 0;
    }
    char m[160];
    snprintf(m, sizeof m, "TypeError: unsupported operand type(s) for %s: '%%s' and '%%s'", lc_op_text[op]);
    return efail(E, m, pv_type_name(a), pv_type_name(b));
}

// Python's `is`: None and the two booleans are singletons; other values are only themselves.
static int identical(const pv *a, const pv *b) {
    if (a->t == PV_NULL || b->t == PV_NULL) return a->t == b->t;
    if (a->t == PV_BOOL && b->t == PV_BOOL) return a->u.i == b->u.i;
    return a == b;
}

static int compare(ev *E, int op, const pv *a, const pv *b, int *res) {
    if (op == OP_EQ) { *res = pv_eq(a, b); return 0; }
    if (op == OP_NE) { *res = !pv_eq(a, b); return 0; }
    if (op == OP_IS) { *res = identical(a, b); return 0; }
    if (op == OP_ISNOT) { *res = !identical(a, b); return 0; }
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
        snprintf(f, sizeof f, "TypeError: '%s' not supported between instances of '%%s' and '%%s'", lc_op_text[op]);
        return efail(E, f, pv_type_name(a), pv_type_name(b));
    }
    *res = c == 2 ? 0 : op == OP_LT ? c < 0 : op == OP_LE ? c <= 0 : op == OP_GT ? c > 0 : c >= 0;
    return 0;
}

// d[k] for a dict: Python's lookup (string keys; an unhashable key is a TypeError).
static int dict_lookup(ev *E, const pv *d, const pv *k, pv **out) {
    if (k->t == PV_LIST || k->t == PV_DICT) return efail(E, "TypeError: unhashable type: '%s'%s", pv_type_name(k), "");
    *out = NULL;
    if (k->t == PV_STR)
        for (size_t i = 0; i < d->u.d.n; i++)
            if (d->u.d.kv[i].kn == k->u.s.n && !memcmp(d->u.d.kv[i].k, k->u.s.s, k->u.s.n)) *out = d->u.d.kv[i].v;
    return 0;
}

static int subscript(ev *E, pv *base, pv *idx, pv **out) {
    if (base->t == PV_DICT) {
        if (dict_lookup(E, base, idx, out)) return -1;
        if (!*out) {
            char k[120];
            pv_str_of(idx, k, sizeof k);
            return efail(E, "KeyError: '%s'%s", k, "");
        }
        return 0;
    }
    if (base->t == PV_LIST || base->t == PV_STR) {
        if (!is_intlike(idx))
            return efail(E, "TypeError: %s indices must be integers, not %s", base->t == PV_LIST ? "list" : "string", pv_type_name(idx));
        long long n = base->t == PV_LIST ? (long long)base->u.l.n : (long long)base->u.s.n, i = idx->u.i;
        if (i < 0) i += n;
        if (i < 0 || i >= n) return efail(E, "IndexError: %s index out of range%s", base->t == PV_LIST ? "list" : "string", "");
        if (base->t == PV_LIST) *out = base->u.l.v[i];
        else return ret(E, pv_str(E->env->tmp, base->u.s.s + i, 1), out);
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

// int(str) in base 10: Python whitespace around, a sign, digits with single '_' between them.
static int parse_int(const pv *s, long long *out) {
    char buf[64];
    size_t k = 0, n = s->u.s.n;
    const char *p = s->u.s.s;
    while (n && lc_py_space((unsigned char)*p)) p++, n--;
    while (n && lc_py_space((unsigned char)p[n - 1])) n--;
    size_t i = 0;
    if (n && (p[0] == '+' || p[0] == '-')) buf[k++] = p[i++];
    if (i == n) return -1;
    for (; i < n; i++) {
        if (p[i] >= '0' && p[i] <= '9') {
            if (k + 1 >= sizeof buf) return -1;
            buf[k++] = p[i];
        } else if (!(p[i] == '_' && i > 0 && p[i - 1] >= '0' && p[i - 1] <= '9' && i + 1 < n && p[i + 1] >= '0' && p[i + 1] <= '9')) {
            return -1;
        }
    }
    buf[k] = 0;
    char *end;
    *out = strtoll(buf, &end, 10);
    return *end ? -1 : 0;
}

static int call(ev *E, const lc_expr *x, pv **out) {
    pv *a[8] = {0};
    lc_arena *T = E->env->tmp;
    if (x->nk == 0) return efail(E, "TypeError: %s() takes at least one argument%s", x->name, "");
    for (int i = 0; i < x->nk; i++)
        if (eval(E, x->k[i], &a[i])) return -1;
    const char *f = x->name;
    int fn = x->op;
    if (fn == F_GET) {
        if (x->nk != 2) return efail(E, "TypeError: get() takes exactly two arguments%s%s", "", "");
        if (a[0]->t != PV_DICT) return efail(E, "AttributeError: '%s' object has no attribute 'get'%s", pv_type_name(a[0]), "");
        if (dict_lookup(E, a[0], a[1], out)) return -1;
        return *out ? 0 : ret(E, pv_new(T, PV_NULL), out);
    }
    if (fn != F_MIN && fn != F_MAX && x->nk != 1) return efail(E, "TypeError: %s() takes exactly one argument%s", f, "");
    switch (fn) {
    case F_IS_INT: return ret_bool(E, is_intlike(a[0]), out);
    case F_IS_INTEGER:
    case F_LOG2:
    case F_CEIL:
    case F_FLOOR: {
        if (!pv_is_number(a[0])) return efail(E, "TypeError: must be real number, not %s%s", pv_type_name(a[0]), "");
        double d = pv_num(a[0]);
        if (fn == F_LOG2) {
            if (!(d > 0)) return efail(E, "ValueError: math domain error%s%s", "", "");
            return ret_float(E, log2(d), out);
        }
        if (is_intlike(a[0])) return fn == F_IS_INTEGER ? ret_bool(E, 1, out) : ret_int(E, a[0]->u.i, out);
        if (!isfinite(d)) return float_to_int_error(E, d);
        if (fn == F_CEIL) return ret_integral(E, ceil(d), out);
        if (fn == F_FLOOR) return ret_integral(E, floor(d), out);
        return ret_bool(E, fabs(nearbyint(d) - d) < 0.00001, out); // is_integer: round() is half-even
    }
    case F_INT:
        if (is_intlike(a[0])) return ret_int(E, a[0]->u.i, out);
        if (a[0]->t == PV_FLOAT) return isfinite(a[0]->u.f) ? ret_integral(E, trunc(a[0]->u.f), out) : float_to_int_error(E, a[0]->u.f);
        if (a[0]->t == PV_STR) {
            long long i;
            if (parse_int(a[0], &i)) {
                char s[80];
                pv_str_of(a[0], s, sizeof s);
                return efail(E, "ValueError: invalid literal for int() with base 10: '%s'%s", s, "");
            }
            return ret_int(E, i, out);
        }
        return efail(E, "TypeError: int() argument must be a string, a bytes-like object or a real number, not '%s'%s",
                     pv_type_name(a[0]), "");
    case F_ABS:
        if (a[0]->t == PV_FLOAT) return ret_float(E, fabs(a[0]->u.f), out);
        if (is_intlike(a[0])) return a[0]->u.i == -9223372036854775807LL - 1 ? ret_float(E, 9223372036854775808.0, out)
                                                                             : ret_int(E, llabs(a[0]->u.i), out);
        return efail(E, "TypeError: bad operand type for abs(): '%s'%s", pv_type_name(a[0]), "");
    case F_LEN: {
        size_t n;
        if (a[0]->t == PV_LIST) n = a[0]->u.l.n;
        else if (a[0]->t == PV_DICT) n = a[0]->u.d.n;
        else if (a[0]->t == PV_STR) {
            n = 0;
            for (size_t i = 0; i < a[0]->u.s.n; i++) n += ((unsigned char)a[0]->u.s.s[i] & 0xc0) != 0x80;
        } else return efail(E, "TypeError: object of type '%s' has no len()%s", pv_type_name(a[0]), "");
        return ret_int(E, (long long)n, out);
    }
    default: break;
    }
    // sorted(x), min(x)/max(x) over a list; min(a, b, ...)/max(...) over the arguments
    pv **items = a;
    size_t n = (size_t)x->nk;
    if (x->nk == 1) {
        if (a[0]->t != PV_LIST) return efail(E, "TypeError: '%s' object is not iterable%s", pv_type_name(a[0]), "");
        items = a[0]->u.l.v;
        n = a[0]->u.l.n;
    }
    if (fn == F_MIN || fn == F_MAX) {
        if (n == 0) return efail(E, "ValueError: %s() arg is an empty sequence%s", f, "");
        pv *m = items[0];
        for (size_t i = 1; i < n; i++) { // the first of equal extremes wins, as in Python
            int better;
            if (compare(E, fn == F_MIN ? OP_LT : OP_GT, items[i], m, &better)) return -1;
            if (better) m = items[i];
        }
        *out = m;
        return 0;
    }
    pv *l = pv_new(T, PV_LIST);
    pv **tmp = lc_alloc(T, (n + 1) * sizeof(pv *));
    if (!l || !tmp) return OOM(E);
    for (size_t i = 0; i < n; i++) if (pv_list_push(T, l, items[i])) return OOM(E);
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
        if (!strcmp(x->name, "ts") && env->has_ts) return ret_float(E, env->ts, out);
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
        if (a->t == PV_FLOAT) return ret_float(E, -a->u.f, out);
        if (is_intlike(a)) return a->u.i == -9223372036854775807LL - 1 ? ret_float(E, 9223372036854775808.0, out)
                                                                      : ret_int(E, -a->u.i, out);
        return efail(E, "TypeError: bad operand type for unary -: '%s'%s", pv_type_name(a), "");
    }
    case N_NOT: {
        pv *a;
        if (eval(E, x->k[0], &a)) return -1;
        return ret_bool(E, !pv_truthy(a), out);
    }
    case N_AND:
    case N_OR: { // Python returns the deciding operand
        pv *a;
        if (eval(E, x->k[0], &a)) return -1;
        if (pv_truthy(a) == (x->t == N_OR)) { *out = a; return 0; }
        return eval(E, x->k[1], out);
    }
    case N_IFEXP: {
        pv *t;
        if (eval(E, x->k[1], &t)) return -1;
        return eval(E, x->k[pv_truthy(t) ? 0 : 2], out);
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
        return ret_bool(E, res, out);
    }
    case N_LIST: {
        pv *l = pv_new(env->tmp, PV_LIST), *it;
        if (!l) return OOM(E);
        for (int i = 0; i < x->nk; i++) {
            if (eval(E, x->k[i], &it)) return -1;
            if (pv_list_push(env->tmp, l, it)) return OOM(E);
        }
        *out = l;
        return 0;
    }
    case N_ASSIGN:
    case N_IF: break;
    }
    return efail(E, "SyntaxError: a statement is not an expression%s%s", "", "");
}

int lc_expr_eval(const lc_expr *x, lc_env *env, pv **out, char *err, size_t errn) {
    ev E = {env, err, errn};
    return eval(&E, x, out);
}

static int exec_stmt(ev *E, const lc_expr *x) {
    lc_env *env = E->env;
    if (x->t == N_IF) {
        pv *t;
        if (eval(E, x->k[0], &t)) return -1;
        return pv_truthy(t) ? exec_stmt(E, x->k[1]) : 0;
    }
    if (x->t != N_ASSIGN) {
        pv *ignored;
        return eval(E, x, &ignored);
    }
    const lc_expr *tgt = x->k[0];
    pv *cont, *key, *val;
    // Python evaluates the right side first, then the target's container and key
    if (!x->op && eval(E, x->k[1], &val)) return -1;
    if (eval(E, tgt->k[0], &cont) || eval(E, tgt->k[1], &key)) return -1;
    if (x->op) { // +=: target, then the right side
        pv *cur, *rhs;
        if (subscript(E, cont, key, &cur) || eval(E, x->k[1], &rhs) || arith(E, OP_ADD, cur, rhs, &val)) return -1;
    }
    if (cont->t != PV_DICT || key->t != PV_STR)
        return efail(E, "TypeError: can only assign to a string key of a dict, not '%s'[%s]", pv_type_name(cont), pv_type_name(key));
    if (pv_dict_set(env->tmp, cont, key->u.s.s, key->u.s.n, val)) return OOM(E);
    return 0;
}

int lc_expr_exec(const lc_expr *x, lc_env *env, char *err, size_t errn) {
    ev E = {env, err, errn};
    return exec_stmt(&E, x);
}
