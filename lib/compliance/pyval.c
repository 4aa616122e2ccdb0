// Python-compatible values and JSON parsing for the compliance checker (see pyval.h).
#include "compliance/pyval.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// ---- arena ----------------------------------------------------------------------------------

typedef struct lc_block {
    struct lc_block *next;
    size_t cap, used;
    char data[];
} lc_block;

struct lc_arena {
    lc_block *head;
    lc_block *spare; // blocks of the last reset, used again before new ones are allocated
};

// What a reset keeps for reuse: refilling freed blocks page by page cost more time than the work
// itself when a set's logs went through one arena; more than this goes back to the system.
#define LC_ARENA_KEEP ((size_t)64 << 20)

lc_arena *lc_arena_new(void) { return calloc(1, sizeof(lc_arena)); }

static void free_blocks(lc_block *b) {
    for (lc_block *n; b; b = n) {
        n = b->next;
        free(b);
    }
}

void lc_arena_reset(lc_arena *a) {
    if (!a) return;
    size_t kept = 0;
    lc_block *b = a->head, *keep = a->spare;
    for (lc_block *k = keep; k; k = k->next) kept += k->cap;
    while (b) {
        lc_block *n = b->next;
        if (kept + b->cap <= LC_ARENA_KEEP) {
            kept += b->cap;
            b->used = 0;
            b->next = keep;
            keep = b;
        } else {
            free(b);
        }
        b = n;
    }
    a->head = NULL;
    a->spare = keep;
}

void lc_arena_free(lc_arena *a) {
    if (!a) return;
    free_blocks(a->head);
    free_blocks(a->spare);
    free(a);
}

void *lc_alloc(lc_arena *a, size_t n) {
    n = (n + 7) & ~(size_t)7;
    lc_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        lc_block *nb = a->spare;
        if (nb && nb->cap >= n) {
            a->spare = nb->next;
        } else {
            size_t cap = n > (1u << 20) ? n : (1u << 20);
            if (!(nb = malloc(sizeof(lc_block) + cap))) return NULL;
            nb->cap = cap;
        }
        nb->used = 0;
        nb->next = b;
        a->head = b = nb;
    }
    void *p = b->data + b->used;
    b->used += n;
    memset(p, 0, n);
    return p;
}

// ---- constructors ---------------------------------------------------------------------------

pv *pv_new(lc_arena *a, pv_type t) {
    pv *v = lc_alloc(a, sizeof(pv));
    if (v) v->t = t;
    return v;
}
pv *pv_int(lc_arena *a, long long i) {
    pv *v = pv_new(a, PV_INT);
    if (v) v->u.i = i;
    return v;
}
pv *pv_float(lc_arena *a, double f) {
    pv *v = pv_new(a, PV_FLOAT);
    if (v) v->u.f = f;
    return v;
}
pv *pv_bool(lc_arena *a, int b) {
    pv *v = pv_new(a, PV_BOOL);
    if (v) v->u.i = b != 0;
    return v;
}
pv *pv_str(lc_arena *a, const char *s, size_t n) {
    pv *v = pv_new(a, PV_STR);
    char *c = lc_alloc(a, n + 1);
    if (!v || !c) return NULL;
    memcpy(c, s, n);
    v->u.s.s = c;
    v->u.s.n = n;
    return v;
}

int pv_list_push(lc_arena *a, pv *l, pv *item) {
    if (l->u.l.n == l->u.l.cap) {
        size_t cap = l->u.l.cap ? 2 * l->u.l.cap : 8;
        pv **nv = lc_alloc(a, cap * sizeof(pv *));
        if (!nv) return -1;
        if (l->u.l.n) memcpy(nv, l->u.l.v, l->u.l.n * sizeof(pv *));
        l->u.l.v = nv;
        l->u.l.cap = cap;
    }
    l->u.l.v[l->u.l.n++] = item;
    return 0;
}

static pv_kv *dict_find(const pv *d, const char *k, size_t kn) {
    for (size_t i = 0; i < d->u.d.n; i++)
        if (d->u.d.kv[i].kn == kn && memcmp(d->u.d.kv[i].k, k, kn) == 0) return &d->u.d.kv[i];
    return NULL;
}

int pv_dict_set(lc_arena *a, pv *d, const char *k, size_t kn, pv *v) {
    pv_kv *e = dict_find(d, k, kn);
    if (e) { // Python keeps the first position and the last value
        e->v = v;
        return 0;
    }
    if (d->u.d.n == d->u.d.cap) {
        size_t cap = d->u.d.cap ? 2 * d->u.d.cap : 8;
        pv_kv *nkv = lc_alloc(a, cap * sizeof(pv_kv));
        if (!nkv) return -1;
        if (d->u.d.n) memcpy(nkv, d->u.d.kv, d->u.d.n * sizeof(pv_kv));
        d->u.d.kv = nkv;
        d->u.d.cap = cap;
    }
    d->u.d.kv[d->u.d.n++] = (pv_kv){k, kn, v};
    return 0;
}

pv *pv_dict_get(const pv *d, const char *k) {
    if (!d || d->t != PV_DICT) return NULL;
    pv_kv *e = dict_find(d, k, strlen(k));
    return e ? e->v : NULL;
}

pv *pv_deep_copy(lc_arena *a, const pv *v) {
    pv *c = pv_new(a, v->t);
    if (!c) return NULL;
    switch (v->t) {
    case PV_STR: return pv_str(a, v->u.s.s, v->u.s.n);
    case PV_LIST:
        for (size_t i = 0; i < v->u.l.n; i++) {
            pv *x = pv_deep_copy(a, v->u.l.v[i]);
            if (!x || pv_list_push(a, c, x)) return NULL;
        }
        return c;
    case PV_DICT:
        for (size_t i = 0; i < v->u.d.n; i++) {
            pv *x = pv_deep_copy(a, v->u.d.kv[i].v);
            if (!x || pv_dict_set(a, c, v->u.d.kv[i].k, v->u.d.kv[i].kn, x)) return NULL;
        }
        return c;
    default: c->u = v->u; return c;
    }
}

// ---- JSON (Python json.loads) ---------------------------------------------------------------

typedef struct {
    lc_arena *a;
    const unsigned char *p, *s, *e;
    char *what;
    size_t whatn;
    int depth;
} jp;

#define JP_MAX_DEPTH 512 // Python's json gives up near its recursion limit (about 1000)

static pv *jfail(jp *j, const char *msg) {
    if (j->what && !j->what[0]) snprintf(j->what, j->whatn, "%s", msg);
    return NULL;
}
static void jws(jp *j) { // JSON whitespace only: Python's json skips " \t\n\r"
    while (j->p < j->e && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int hex4(const unsigned char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        unsigned c = p[i], d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return -1;
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

static size_t utf8_put(char *o, unsigned cp) {
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xc0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 63));
    o[2] = (char)(0x80 | ((cp >> 6) & 63));
    o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

// Parses a string after its opening quote into (out, outn), allocated in the arena.
static int jstr(jp *j, const char **out, size_t *outn) {
    const unsigned char *q = j->p;
    size_t need = 0;
    int simple = 1;
    while (q < j->e && *q != '"') { // pre-scan: length bound and whether a copy is needed
        if (*q == '\\') { simple = 0; q++; }
        else if (*q >= 0x80) simple = 0;
        else if (*q < 0x20) { j->p = q; jfail(j, "invalid control character in string"); return -1; }
        q++;
        need++;
    }
    if (q >= j->e) { jfail(j, "unterminated string"); return -1; }
    if (simple) {
        char *c = lc_alloc(j->a, need + 1);
        if (!c) return -1;
        memcpy(c, j->p, need);
        *out = c;
        *outn = need;
        j->p = q + 1;
        return 0;
    }
    char *c = lc_alloc(j->a, 4 * need + 4), *o = c;
    if (!c) return -1;
    const unsigned char *p = j->p;
    while (*p != '"') {
        unsigned ch = *p;
        if (ch < 0x20) { j->p = p; jfail(j, "invalid control character in string"); return -1; }
        if (ch != '\\') {
            o += utf8_put(o, ch); // latin-1 byte = code point
            p++;
            continue;
        }
        p++;
        if (p >= j->e) { j->p = p; jfail(j, "unterminated string"); return -1; }
        switch (*p) {
        case '"': *o++ = '"'; p++; break;
        case '\\': *o++ = '\\'; p++; break;
        case '/': *o++ = '/'; p++; break;
        case 'b': *o++ = '\b'; p++; break;
        case 'f': *o++ = '\f'; p++; break;
        case 'n': *o++ = '\n'; p++; break;
        case 'r': *o++ = '\r'; p++; break;
        case 't': *o++ = '\t'; p++; break;
        case 'u': {
            unsigned cp, lo;
            if (j->e - p < 5 || hex4(p + 1, &cp)) { j->p = p; jfail(j, "invalid \\uXXXX escape"); return -1; }
            p += 5;
            // Python joins a high and a low surrogate; a lone one is kept as is.
            if (cp >= 0xd800 && cp <= 0xdbff && j->e - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
                !hex4(p + 2, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                p += 6;
            }
            o += utf8_put(o, cp);
            break;
        }
        default: j->p = p; jfail(j, "invalid escape"); return -1;
        }
    }
    j->p = p + 1;
    *out = c;
    *outn = (size_t)(o - c);
    return 0;
}

static pv *jnum(jp *j) {
    const unsigned char *st = j->p, *p = j->p;
    int isf = 0;
    if (p < j->e && *p == '-') p++;
    if (p < j->e && *p == '0') p++;
    else if (p < j->e && *p >= '1' && *p <= '9') while (p < j->e && *p >= '0' && *p <= '9') p++;
    else return jfail(j, "expecting value");
    if (p + 1 < j->e && *p == '.' && p[1] >= '0' && p[1] <= '9') { // Python's regex wants a digit
        isf = 1;
        p++;
        while (p < j->e && *p >= '0' && *p <= '9') p++;
    }
    if (p < j->e && (*p == 'e' || *p == 'E')) {
        const unsigned char *q = p + 1;
        if (q < j->e && (*q == '+' || *q == '-')) q++;
        if (q < j->e && *q >= '0' && *q <= '9') {
            isf = 1;
            while (q < j->e && *q >= '0' && *q <= '9') q++;
            p = q;
        }
    }
    char buf[64], *big = NULL, *txt = buf;
    size_t n = (size_t)(p - st);
    if (n >= sizeof buf) {
        big = malloc(n + 1);
        if (!big) return NULL;
        txt = big;
    }
    memcpy(txt, st, n);
    txt[n] = 0;
    j->p = p;
    pv *v;
    if (!isf) {
        errno = 0;
        long long i = strtoll(txt, NULL, 10);
        v = errno == ERANGE ? pv_float(j->a, strtod(txt, NULL)) : pv_int(j->a, i);
    } else {
        v = pv_float(j->a, strtod(txt, NULL));
    }
    free(big);
    return v;
}

static int jlit(jp *j, const char *lit) {
    size_t n = strlen(lit);
    if ((size_t)(j->e - j->p) >= n && memcmp(j->p, lit, n) == 0) {
        j->p += n;
        return 1;
    }
    return 0;
}

static pv *jvalue(jp *j) {
    if (j->p >= j->e) return jfail(j, "expecting value");
    unsigned c = *j->p;
    if (c == '{' || c == '[') {
        if (++j->depth > JP_MAX_DEPTH) return jfail(j, "nested too deeply");
        j->p++;
        pv *v = pv_new(j->a, c == '{' ? PV_DICT : PV_LIST);
        if (!v) return NULL;
        jws(j);
        if (j->p < j->e && *j->p == (c == '{' ? '}' : ']')) {
            j->p++;
            j->depth--;
            return v;
        }
        for (;;) {
            if (c == '{') {
                const char *k;
                size_t kn;
                if (j->p >= j->e || *j->p != '"') return jfail(j, "expecting property name enclosed in double quotes");
                j->p++;
                if (jstr(j, &k, &kn)) return NULL;
                jws(j);
                if (j->p >= j->e || *j->p != ':') return jfail(j, "expecting ':' delimiter");
                j->p++;
                jws(j);
                pv *x = jvalue(j);
                if (!x || pv_dict_set(j->a, v, k, kn, x)) return NULL;
            } else {
                pv *x = jvalue(j);
                if (!x || pv_list_push(j->a, v, x)) return NULL;
            }
            jws(j);
            if (j->p < j->e && *j->p == ',') {
                j->p++;
                jws(j);
                continue;
            }
            if (j->p < j->e && *j->p == (c == '{' ? '}' : ']')) {
                j->p++;
                j->depth--;
                return v;
            }
            return jfail(j, "expecting ',' delimiter");
        }
    }
    if (c == '"') {
        pv *v = pv_new(j->a, PV_STR);
        j->p++;
        if (!v || jstr(j, &v->u.s.s, &v->u.s.n)) return NULL;
        return v;
    }
    if (jlit(j, "null")) return pv_new(j->a, PV_NULL);
    if (jlit(j, "true")) return pv_bool(j->a, 1);
    if (jlit(j, "false")) return pv_bool(j->a, 0);
    if (jlit(j, "NaN")) return pv_float(j->a, NAN);
    if (jlit(j, "Infinity")) return pv_float(j->a, INFINITY);
    if (jlit(j, "-Infinity")) return pv_float(j->a, -INFINITY);
    return jnum(j);
}

pv *pv_parse_json(lc_arena *a, const char *p, size_t n, char *what, size_t whatn, size_t *off) {
    jp j = {a, (const unsigned char *)p, (const unsigned char *)p, (const unsigned char *)p + n, what, whatn, 0};
    if (what && whatn) what[0] = 0;
    jws(&j);
    pv *v = jvalue(&j);
    if (v) {
        jws(&j);
        if (j.p != j.e) v = jfail(&j, "extra data");
    } else if (what && !what[0]) {
        snprintf(what, whatn, "out of memory");
    }
    if (off) *off = (size_t)(j.p - j.s);
    return v;
}

// ---- Python operators -----------------------------------------------------------------------

int pv_is_number(const pv *v) { return v->t == PV_BOOL || v->t == PV_INT || v->t == PV_FLOAT; }
double pv_num(const pv *v) { return v->t == PV_FLOAT ? v->u.f : (double)v->u.i; }

const char *pv_type_name(const pv *v) {
    static const char *n[] = {"NoneType", "bool", "int", "float", "str", "list", "dict"};
    return n[v->t];
}

int pv_truthy(const pv *v) {
    switch (v->t) {
    case PV_NULL: return 0;
    case PV_BOOL:
    case PV_INT: return v->u.i != 0;
    case PV_FLOAT: return v->u.f != 0.0;
    case PV_STR: return v->u.s.n != 0;
    case PV_LIST: return v->u.l.n != 0;
    case PV_DICT: return v->u.d.n != 0;
    }
    return 0;
}

int pv_eq(const pv *a, const pv *b) {
    if (a == b && !(a->t == PV_FLOAT && isnan(a->u.f))) return 1;
    if (pv_is_number(a) && pv_is_number(b)) {
        if (a->t != PV_FLOAT && b->t != PV_FLOAT) return a->u.i == b->u.i;
        return pv_num(a) == pv_num(b);
    }
    if (a->t != b->t) return 0;
    switch (a->t) {
    case PV_NULL: return 1;
    case PV_STR: return a->u.s.n == b->u.s.n && memcmp(a->u.s.s, b->u.s.s, a->u.s.n) == 0;
    case PV_LIST:
        if (a->u.l.n != b->u.l.n) return 0;
        for (size_t i = 0; i < a->u.l.n; i++) // Python: identity, then ==
            if (a->u.l.v[i] != b->u.l.v[i] && !pv_eq(a->u.l.v[i], b->u.l.v[i])) return 0;
        return 1;
    case PV_DICT:
        if (a->u.d.n != b->u.d.n) return 0;
        for (size_t i = 0; i < a->u.d.n; i++) {
            pv_kv *e = dict_find(b, a->u.d.kv[i].k, a->u.d.kv[i].kn);
            if (!e || (e->v != a->u.d.kv[i].v && !pv_eq(a->u.d.kv[i].v, e->v))) return 0;
        }
        return 1;
    default: return 0;
    }
}

int pv_cmp(const pv *a, const pv *b, int *out, char *err, size_t errn) {
    if (pv_is_number(a) && pv_is_number(b)) {
        if (a->t != PV_FLOAT && b->t != PV_FLOAT) *out = (a->u.i > b->u.i) - (a->u.i < b->u.i);
        else {
            double x = pv_num(a), y = pv_num(b);
            *out = x < y ? -1 : x > y ? 1 : x == y ? 0 : 2; // 2: unordered (NaN): every test false
        }
        return 0;
    }
    if (a->t == PV_STR && b->t == PV_STR) {
        size_t n = a->u.s.n < b->u.s.n ? a->u.s.n : b->u.s.n;
        int c = memcmp(a->u.s.s, b->u.s.s, n); // UTF-8 byte order = code point order
        *out = c ? (c > 0 ? 1 : -1) : (a->u.s.n > b->u.s.n) - (a->u.s.n < b->u.s.n);
        return 0;
    }
    if (a->t == PV_LIST && b->t == PV_LIST) {
        size_t n = a->u.l.n < b->u.l.n ? a->u.l.n : b->u.l.n;
        for (size_t i = 0; i < n; i++) {
            if (pv_eq(a->u.l.v[i], b->u.l.v[i])) continue;
            return pv_cmp(a->u.l.v[i], b->u.l.v[i], out, err, errn);
        }
        *out = (a->u.l.n > b->u.l.n) - (a->u.l.n < b->u.l.n);
        return 0;
    }
    snprintf(err, errn, "ordering not supported between instances of '%s' and '%s'", pv_type_name(a),
             pv_type_name(b));
    return -1;
}

static int hashable(const pv *v) { return v->t != PV_LIST && v->t != PV_DICT; }

int pv_contains(const pv *c, const pv *item, int *out, char *err, size_t errn) {
    switch (c->t) {
    case PV_LIST:
        *out = 0;
        for (size_t i = 0; i < c->u.l.n && !*out; i++) *out = c->u.l.v[i] == item || pv_eq(c->u.l.v[i], item);
        return 0;
    case PV_DICT:
        if (!hashable(item)) break;
        *out = item->t == PV_STR && dict_find(c, item->u.s.s, item->u.s.n) != NULL;
        return 0;
    case PV_STR:
        if (item->t != PV_STR) {
            snprintf(err, errn, "'in <string>' requires string as left operand, not %s", pv_type_name(item));
            return -1;
        }
        *out = item->u.s.n == 0 || memmem(c->u.s.s, c->u.s.n, item->u.s.s, item->u.s.n) != NULL;
        return 0;
    default: break;
    }
    if (c->t == PV_DICT) snprintf(err, errn, "unhashable type: '%s'", pv_type_name(item));
    else snprintf(err, errn, "argument of type '%s' is not iterable", pv_type_name(c));
    return -1;
}

// ---- str() ----------------------------------------------------------------------------------

typedef struct {
    char *b;
    size_t n, len;
} sbuf;

static void sput(sbuf *s, const char *p, size_t n) {
    for (size_t i = 0; i < n && s->len + 1 < s->n; i++) s->b[s->len++] = p[i];
    if (s->n) s->b[s->len] = 0;
}
static void sputs(sbuf *s, const char *p) { sput(s, p, strlen(p)); }

static void float_repr(double f, char *buf, size_t n) {
    if (isnan(f)) { snprintf(buf, n, "nan"); return; }
    if (isinf(f)) { snprintf(buf, n, f > 0 ? "inf" : "-inf"); return; }
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) { // shortest text that reads back, as Python's repr
        snprintf(tmp, sizeof tmp, "%.*g", prec, f);
        if (strtod(tmp, NULL) == f) break;
    }
    // Python writes 1e+16 as 1e+16 and 100.0 as 100.0 (repr switches to exponent at 1e16)
    int has_dot = strpbrk(tmp, ".e") != NULL || strstr(tmp, "inf") != NULL;
    char *e = strchr(tmp, 'e');
    if (e) { // %g gives 1e-05, Python gives 1e-05 too; 1e+16 likewise
        snprintf(buf, n, "%s", tmp);
        return;
    }
    snprintf(buf, n, has_dot ? "%s" : "%s.0", tmp);
}

static void repr(sbuf *s, const pv *v, int top) {
    char num[48];
    switch (v->t) {
    case PV_NULL: sputs(s, "None"); break;
    case PV_BOOL: sputs(s, v->u.i ? "True" : "False"); break;
    case PV_INT: snprintf(num, sizeof num, "%lld", v->u.i); sputs(s, num); break;
    case PV_FLOAT: float_repr(v->u.f, num, sizeof num); sputs(s, num); break;
    case PV_STR:
        if (top) { sput(s, v->u.s.s, v->u.s.n); break; }
        sputs(s, "'");
        sput(s, v->u.s.s, v->u.s.n);
        sputs(s, "'");
        break;
    case PV_LIST:
        sputs(s, "[");
        for (size_t i = 0; i < v->u.l.n; i++) {
            if (i) sputs(s, ", ");
            repr(s, v->u.l.v[i], 0);
        }
        sputs(s, "]");
        break;
    case PV_DICT:
        sputs(s, "{");
        for (size_t i = 0; i < v->u.d.n; i++) {
            if (i) sputs(s, ", ");
            sputs(s, "'");
            sput(s, v->u.d.kv[i].k, v->u.d.kv[i].kn);
            sputs(s, "': ");
            repr(s, v->u.d.kv[i].v, 0);
        }
        sputs(s, "}");
        break;
    }
}

void pv_str_of(const pv *v, char *buf, size_t n) {
    sbuf s = {buf, n, 0};
    if (n) buf[0] = 0;
    repr(&s, v, 1);
}

// ---- float(str) -----------------------------------------------------------------------------

// Length of the Python whitespace character (str.isspace) starting at s, in UTF-8, or 0.
static size_t u8_space(const unsigned char *s, size_t n) {
    if (n >= 1 && s[0] < 0x80) return lc_py_space(s[0]) ? 1 : 0;
    if (n >= 2 && s[0] == 0xc2 && (s[1] == 0x85 || s[1] == 0xa0)) return 2;
    if (n >= 3 && s[0] == 0xe1 && s[1] == 0x9a && s[2] == 0x80) return 3; // U+1680
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x80 && ((s[2] >= 0x80 && s[2] <= 0x8a) || s[2] == 0xa8 || s[2] == 0xa9 || s[2] == 0xaf))
        return 3; // U+2000..U+200A, U+2028, U+2029, U+202F
    if (n >= 3 && s[0] == 0xe2 && s[1] == 0x81 && s[2] == 0x9f) return 3; // U+205F
    if (n >= 3 && s[0] == 0xe3 && s[1] == 0x80 && s[2] == 0x80) return 3; // U+3000
    return 0;
}

static size_t u8_space_end(const unsigned char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (u8_space(s + n - k, k) == k) return k;
    return 0;
}

int lc_py_float(const char *s, size_t n, double *out) {
    size_t sp;
    while (n && (sp = u8_space((const unsigned char *)s, n))) s += sp, n -= sp;
    while (n && (sp = u8_space_end((const unsigned char *)s, n))) n -= sp;
    if (n == 0 || n > 400) return -1;
    char buf[401];
    size_t k = 0, i = 0;
    int sign = 0;
    if (s[0] == '+' || s[0] == '-') {
        buf[k++] = s[0];
        sign = 1;
        i = 1;
    }
    const char *w = s + i;
    size_t wn = n - i;
    if ((wn == 3 && !strncasecmp(w, "inf", 3)) || (wn == 8 && !strncasecmp(w, "infinity", 8))) {
        *out = (sign && s[0] == '-') ? -INFINITY : INFINITY;
        return 0;
    }
    if (wn == 3 && !strncasecmp(w, "nan", 3)) {
        *out = NAN;
        return 0;
    }
    // digits [. digits] [e [+-] digits], at least one digit in the mantissa; '_' only between digits
    int mant = 0, state = 0; // 0 int part, 1 fraction, 2 exponent sign allowed, 3 exponent digits
    int expdig = 0;
    for (; i < n; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            if (state >= 2) { state = 3; expdig = 1; }
            else mant = 1;
            buf[k++] = c;
        } else if (c == '_') {
            if (i == 0 || i + 1 >= n || !(s[i - 1] >= '0' && s[i - 1] <= '9') || !(s[i + 1] >= '0' && s[i + 1] <= '9'))
                return -1;
        } else if (c == '.' && state == 0) {
            state = 1;
            buf[k++] = c;
        } else if ((c == 'e' || c == 'E') && state <= 1 && mant) {
            state = 2;
            buf[k++] = 'e';
        } else if ((c == '+' || c == '-') && state == 2 && (s[i - 1] == 'e' || s[i - 1] == 'E')) {
            buf[k++] = c;
        } else {
            return -1;
        }
    }
    if (!mant || (state >= 2 && !expdig)) return -1;
    buf[k] = 0;
    *out = strtod(buf, NULL);
    return 0;
}
