#include "coco/jscan.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void js_init(jscan *s, char *buf, size_t len, const char *file, tk_err *e) {
    s->base = s->p = buf;
    s->end = buf + len;
    s->file = file;
    s->e = e;
    s->depth = 0;
}

static inline void ws(jscan *s) {
    char *p = s->p;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') p++;
    s->p = p;
}

int js_fail(jscan *s, const char *fmt, ...) {
    if (!s->e) return TK_EDATA;
    char path[256];
    size_t n = 0;
    path[n++] = '$';
    path[n] = 0;
    for (int i = 0; i < s->depth && n < sizeof path - 32; i++) {
        if (s->lv[i].kind == '[' && s->lv[i].idx >= 0)
            n += (size_t)snprintf(path + n, sizeof path - n, "[%ld]", s->lv[i].idx);
        else if (s->lv[i].kind == '{' && s->lv[i].key) {
            size_t kl = s->lv[i].klen > 48 ? 48 : s->lv[i].klen;
            n += (size_t)snprintf(path + n, sizeof path - n, ".%.*s", (int)kl, s->lv[i].key);
        }
    }
    long line = 1;
    char *stop = s->p < s->end ? s->p : s->end;
    for (char *q = s->base; q < stop; q++) line += *q == '\n';
    char what[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    tk_err_set(s->e, TK_EDATA, "%s", what);
    tk_err_where(s->e, "%s: line %ld: %s", s->file, line, path);
    return TK_EDATA;
}

static const char *type_name(int c) {
    switch (c) {
    case JS_OBJECT: return "an object";
    case JS_ARRAY: return "an array";
    case JS_STRING: return "a string";
    case JS_NUMBER: return "a number";
    case JS_TRUE: case JS_FALSE: return "a boolean";
    case JS_NULL: return "null";
    case JS_EOF: return "the end of the file";
    default: return "an invalid token";
    }
}

int js_peek(jscan *s) {
    ws(s);
    char c = *s->p;
    if (s->p >= s->end) return JS_EOF;
    switch (c) {
    case '{': case '[': case '"': return c;
    case 't': return JS_TRUE;
    case 'f': return JS_FALSE;
    case 'n': return JS_NULL;
    case '-': case '0': case '1': case '2': case '3': case '4': case '5': case '6': case '7':
    case '8': case '9': return JS_NUMBER;
    default: return JS_BAD;
    }
}

static int expect(jscan *s, int want, const char *what) {
    int t = js_peek(s);
    if (t == want) return 0;
    if (t == JS_BAD) {
        unsigned char c = (unsigned char)*s->p;
        if (c == 'N' || c == 'I') return js_fail(s, "NaN and Infinity are not JSON numbers");
        if (c >= 0x20 && c < 0x7f) return js_fail(s, "expected %s, got '%c'", what, c);
        return js_fail(s, "expected %s, got byte 0x%02x", what, c);
    }
    return js_fail(s, "expected %s, got %s", what, type_name(t));
}

static int push(jscan *s, char kind) {
    if (s->depth >= JS_MAX_DEPTH) return js_fail(s, "nested deeper than %d levels", JS_MAX_DEPTH);
    s->lv[s->depth].kind = kind;
    s->lv[s->depth].key = NULL;
    s->lv[s->depth].klen = 0;
    s->lv[s->depth].idx = -1;
    s->depth++;
    s->p++;
    return 0;
}

int js_obj_begin(jscan *s) {
    int rc = expect(s, JS_OBJECT, "an object");
    return rc ? rc : push(s, '{');
}

int js_arr_begin(jscan *s) {
    int rc = expect(s, JS_ARRAY, "an array");
    return rc ? rc : push(s, '[');
}

int js_obj_next(jscan *s, const char **key, size_t *klen) {
    ws(s);
    int first = s->lv[s->depth - 1].idx < 0;
    s->lv[s->depth - 1].key = NULL; // between members the path is the object's
    if (*s->p == '}') {
        s->p++;
        s->depth--;
        return 0;
    }
    if (!first) {
        if (*s->p != ',') return -js_fail(s, "expected ',' or '}' in an object");
        s->p++;
        ws(s);
    }
    if (*s->p != '"') return -js_fail(s, "expected a key (a string)");
    char *k;
    size_t kl;
    int rc = js_string(s, &k, &kl);
    if (rc) return -rc;
    ws(s);
    if (*s->p != ':') return -js_fail(s, "expected ':' after a key");
    s->p++;
    s->lv[s->depth - 1].idx++;
    s->lv[s->depth - 1].key = k;
    s->lv[s->depth - 1].klen = kl;
    *key = k;
    *klen = kl;
    return 1;
}

int js_arr_next(jscan *s) {
    ws(s);
    long *idx = &s->lv[s->depth - 1].idx;
    if (*s->p == ']') {
        s->p++;
        s->depth--;
        return 0;
    }
    if (*idx >= 0) {
        if (*s->p != ',') return -js_fail(s, "expected ',' or ']' in an array");
        s->p++;
    }
    ++*idx;
    return 1;
}

static const double pow10_tab[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

// Validates the JSON number grammar. When the decimal significand has at most 19 digits, is
// below 2^53 and the power of ten is within 10^22, significand and power are both exact
// doubles and one multiplication or division rounds correctly (Clinger's fast path); anything
// else goes to strtod, which rounds correctly too.
static int number(jscan *s, double *out, int *integral) {
    char *p = s->p, *start = p;
    int neg = 0;
    if (*p == '-') {
        neg = 1;
        p++;
    }
    if (*p < '0' || *p > '9') return js_fail(s, "invalid number");
    uint64_t mant = 0;
    int digits = 0, exp10 = 0, isint = 1;
    if (*p == '0') {
        p++;
        if (*p >= '0' && *p <= '9') return js_fail(s, "invalid number (leading zero)");
    } else {
        while (*p >= '0' && *p <= '9') {
            if (digits < 19) mant = mant * 10 + (uint64_t)(*p - '0'), digits += mant != 0;
            else exp10++;
            p++;
        }
    }
    if (*p == '.') {
        isint = 0;
        p++;
        if (*p < '0' || *p > '9') return js_fail(s, "invalid number (digit expected after '.')");
        while (*p >= '0' && *p <= '9') {
            if (digits < 19) {
                mant = mant * 10 + (uint64_t)(*p - '0');
                digits += mant != 0;
                exp10--;
            }
            p++;
        }
    }
    int big_exp = 0;
    if (*p == 'e' || *p == 'E') {
        isint = 0;
        p++;
        int eneg = 0;
        if (*p == '+' || *p == '-') eneg = *p++ == '-';
        if (*p < '0' || *p > '9') return js_fail(s, "invalid number (digit expected in exponent)");
        int ev = 0;
        while (*p >= '0' && *p <= '9') {
            if (ev < 100000) ev = ev * 10 + (*p - '0');
            else big_exp = 1;
            p++;
        }
        exp10 += eneg ? -ev : ev;
    }
    double v;
    if (digits < 19 && !big_exp && mant < (1ull << 53) && exp10 >= -22 && exp10 <= 22) {
        v = (double)mant;
        if (exp10 < 0) v /= pow10_tab[-exp10];
        else v *= pow10_tab[exp10];
        if (neg) v = -v;
    } else {
        char save = *p;
        *p = 0; // the buffer is ours: terminate the number for strtod, then restore
        errno = 0;
        v = strtod(start, NULL);
        *p = save;
    }
    if (!isfinite(v)) return js_fail(s, "number %.*s is out of range", (int)(p - start > 40 ? 40 : p - start), start);
    s->p = p;
    *out = v;
    if (integral) *integral = isint;
    return 0;
}

int js_number(jscan *s, double *out) {
    int rc = expect(s, JS_NUMBER, "a number");
    return rc ? rc : number(s, out, NULL);
}

int js_int64(jscan *s, int64_t *out) {
    int rc = expect(s, JS_NUMBER, "an integer");
    if (rc) return rc;
    char *start = s->p;
    double v;
    int isint;
    if ((rc = number(s, &v, &isint))) return rc;
    if (!isint) {
        s->p = start;
        return js_fail(s, "expected an integer, got %g", v);
    }
    if (v > -9e15 && v < 9e15) {
        *out = (int64_t)v;
        return 0;
    }
    errno = 0;
    long long x = strtoll(start, NULL, 10);
    if (errno) {
        s->p = start;
        return js_fail(s, "integer out of the 64-bit range");
    }
    *out = x;
    return 0;
}

int js_bool(jscan *s, int *out) {
    int t = js_peek(s);
    if (t == JS_TRUE && !strncmp(s->p, "true", 4)) {
        s->p += 4;
        *out = 1;
        return 0;
    }
    if (t == JS_FALSE && !strncmp(s->p, "false", 5)) {
        s->p += 5;
        *out = 0;
        return 0;
    }
    return expect(s, -1, "a boolean");
}

static int hex4(const char *p, unsigned *v) {
    *v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        unsigned d;
        if (c >= '0' && c <= '9') d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') d = (unsigned)(c - 'A' + 10);
        else return -1;
        *v = *v * 16 + d;
    }
    return 0;
}

static char *put_utf8(char *o, unsigned cp) {
    if (cp < 0x80) *o++ = (char)cp;
    else if (cp < 0x800) {
        *o++ = (char)(0xc0 | (cp >> 6));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        *o++ = (char)(0xe0 | (cp >> 12));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    } else {
        *o++ = (char)(0xf0 | (cp >> 18));
        *o++ = (char)(0x80 | ((cp >> 12) & 0x3f));
        *o++ = (char)(0x80 | ((cp >> 6) & 0x3f));
        *o++ = (char)(0x80 | (cp & 0x3f));
    }
    return o;
}

// Length of a valid UTF-8 sequence at p (1..4), or 0.
static int utf8_len(const unsigned char *p) {
    unsigned c = p[0];
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return (p[1] & 0xc0) == 0x80 ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80) return 0;
        if (c == 0xe0 && p[1] < 0xa0) return 0;
        if (c == 0xed && p[1] > 0x9f) return 0; // surrogates
        return 3;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        if ((p[1] & 0xc0) != 0x80 || (p[2] & 0xc0) != 0x80 || (p[3] & 0xc0) != 0x80) return 0;
        if (c == 0xf0 && p[1] < 0x90) return 0;
        if (c == 0xf4 && p[1] > 0x8f) return 0;
        return 4;
    }
    return 0;
}

int js_string(jscan *s, char **out, size_t *len) {
    int rc = expect(s, JS_STRING, "a string");
    if (rc) return rc;
    char *p = s->p + 1, *o = p, *start = p;
    for (;;) {
        unsigned char c = (unsigned char)*p;
        if (c == '"') break;
        if (p >= s->end) {
            s->p = p;
            return js_fail(s, "unterminated string");
        }
        if (c < 0x20) {
            s->p = p;
            return js_fail(s, "control character 0x%02x in a string", c);
        }
        if (c == '\\') {
            char x = p[1];
            unsigned cp;
            switch (x) {
            case '"': *o++ = '"'; p += 2; continue;
            case '\\': *o++ = '\\'; p += 2; continue;
            case '/': *o++ = '/'; p += 2; continue;
            case 'b': *o++ = '\b'; p += 2; continue;
            case 'f': *o++ = '\f'; p += 2; continue;
            case 'n': *o++ = '\n'; p += 2; continue;
            case 'r': *o++ = '\r'; p += 2; continue;
            case 't': *o++ = '\t'; p += 2; continue;
            case 'u':
                if (p + 6 > s->end || hex4(p + 2, &cp)) {
                    s->p = p;
                    return js_fail(s, "bad \\u escape in a string");
                }
                p += 6;
                if (cp >= 0xd800 && cp <= 0xdbff && p[0] == '\\' && p[1] == 'u') {
                    unsigned lo;
                    if (p + 6 <= s->end && !hex4(p + 2, &lo) && lo >= 0xdc00 && lo <= 0xdfff) {
                        cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
                        p += 6;
                    }
                }
                // a lone surrogate (Python keeps it) cannot be UTF-8: write U+FFFD
                if (cp >= 0xd800 && cp <= 0xdfff) cp = 0xfffd;
                o = put_utf8(o, cp);
                continue;
            default:
                s->p = p;
                return js_fail(s, "bad escape in a string");
            }
        }
        if (c < 0x80) {
            *o++ = (char)c;
            p++;
            continue;
        }
        int n = p + 4 <= s->end ? utf8_len((const unsigned char *)p) : 0;
        if (!n) {
            s->p = p;
            return js_fail(s, "invalid UTF-8 in a string (byte 0x%02x)", c);
        }
        for (int i = 0; i < n; i++) *o++ = *p++;
    }
    s->p = p + 1;
    *out = start;
    *len = (size_t)(o - start);
    return 0;
}

int js_skip(jscan *s) {
    int t = js_peek(s), rc;
    const char *k;
    size_t kl;
    switch (t) {
    case JS_OBJECT:
        if ((rc = js_obj_begin(s))) return rc;
        while ((rc = js_obj_next(s, &k, &kl)) == 1)
            if ((rc = js_skip(s))) return rc;
        return rc < 0 ? -rc : 0;
    case JS_ARRAY:
        if ((rc = js_arr_begin(s))) return rc;
        while ((rc = js_arr_next(s)) == 1)
            if ((rc = js_skip(s))) return rc;
        return rc < 0 ? -rc : 0;
    case JS_STRING: {
        char *o;
        size_t n;
        return js_string(s, &o, &n);
    }
    case JS_NUMBER: {
        double v;
        return number(s, &v, NULL);
    }
    case JS_TRUE: case JS_FALSE: {
        int b;
        return js_bool(s, &b);
    }
    case JS_NULL:
        if (!strncmp(s->p, "null", 4)) {
            s->p += 4;
            return 0;
        }
        return js_fail(s, "invalid token");
    default:
        return expect(s, -1, "a value");
    }
}

int js_end(jscan *s) {
    ws(s);
    if (s->p < s->end) return js_fail(s, "unexpected data after the top-level value");
    return 0;
}
