// Python-compatible JSON text (see json_text.h).
#include "core/json_text.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// A growable string.
typedef struct {
    char *p;
    size_t n, cap;
    int oom;
    int compact; // "," and ":" instead of Python's ", " and ": "
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->oom) return;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *q = realloc(b->p, cap);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void sb_puts(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

// Python repr() of a double: the shortest of %.1g..%.17g that reads back exactly, with ".0"
// added to integral values; json.dumps writes NaN and Infinity for the non-finite ones.
static void put_double(sbuf *b, double d) {
    char tmp[40];
    if (isnan(d)) {
        sb_puts(b, "NaN");
        return;
    }
    if (isinf(d)) {
        sb_puts(b, d > 0 ? "Infinity" : "-Infinity");
        return;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*g", prec, d);
        if (strtod(tmp, NULL) == d) break;
    }
    // Python switches to exponent notation at 1e16 and below 1e-4; %g switches at 10^prec.
    char *ep = strchr(tmp, 'e');
    if (ep) {
        int exp = atoi(ep + 1);
        if (exp >= -4 && exp < 16) { // write positionally, as repr does
            char mant[40];
            snprintf(mant, sizeof mant, "%.17g", d);
            for (int prec = 1; prec <= 17; prec++) {
                snprintf(mant, sizeof mant, "%.*f", prec > exp ? prec - exp - 1 : 0, d);
                if (strtod(mant, NULL) == d) break;
            }
            snprintf(tmp, sizeof tmp, "%s", mant);
        } else {
            // repr writes 1e+16 and 1e-05 exactly as C's %g does
        }
    }
    if (!strpbrk(tmp, ".eEn")) strcat(tmp, ".0");
    sb_puts(b, tmp);
}

static void put_string(sbuf *b, const char *s, size_t n) {
    sb_put(b, "\"", 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        char tmp[16];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\';
            tmp[1] = (char)c;
            sb_put(b, tmp, 2);
            i++;
        } else if (c == '\n') {
            sb_puts(b, "\\n"), i++;
        } else if (c == '\r') {
            sb_puts(b, "\\r"), i++;
        } else if (c == '\t') {
            sb_puts(b, "\\t"), i++;
        } else if (c == '\b') {
            sb_puts(b, "\\b"), i++;
        } else if (c == '\f') {
            sb_puts(b, "\\f"), i++;
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            sb_puts(b, tmp);
            i++;
        } else if (c < 0x80) {
            sb_put(b, (const char *)&s[i], 1);
            i++;
        } else {
            // jansson strings are valid UTF-8: decode and escape as json.dumps(ensure_ascii=True).
            unsigned cp;
            int len = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
            cp = c & (len == 4 ? 0x07 : len == 3 ? 0x0f : 0x1f);
            for (int k = 1; k < len && i + (size_t)k < n; k++) cp = (cp << 6) | (s[i + k] & 0x3f);
            i += (size_t)len;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            sb_puts(b, tmp);
        }
    }
    sb_put(b, "\"", 1);
}

static void put_json(sbuf *b, const json_t *v) {
    char tmp[32];
    switch (json_typeof(v)) {
    case JSON_NULL: sb_puts(b, "null"); break;
    case JSON_TRUE: sb_puts(b, "true"); break;
    case JSON_FALSE: sb_puts(b, "false"); break;
    case JSON_INTEGER:
        snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        sb_puts(b, tmp);
        break;
    case JSON_REAL: put_double(b, json_real_value(v)); break;
    case JSON_STRING: put_string(b, json_string_value(v), json_string_length(v)); break;
    case JSON_ARRAY: {
        sb_puts(b, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) sb_puts(b, b->compact ? "," : ", ");
            put_json(b, json_array_get(v, i));
        }
        sb_puts(b, "]");
        break;
    }
    case JSON_OBJECT: {
        sb_puts(b, "{");
        const char *k;
        json_t *x;
        int first = 1;
        json_object_foreach((json_t *)v, k, x) {
            if (!first) sb_puts(b, b->compact ? "," : ", ");
            first = 0;
            put_string(b, k, strlen(k));
            sb_puts(b, b->compact ? ":" : ": ");
            put_json(b, x);
        }
        sb_puts(b, "}");
        break;
    }
    }
}

static char *dumps(const json_t *v, int compact) {
    sbuf b = {0};
    b.compact = compact;
    put_json(&b, v);
    if (b.oom) {
        free(b.p);
        return NULL;
    }
    return b.p;
}

char *tk_json_dumps_py(const json_t *v) { return dumps(v, 0); }
char *tk_json_dumps_compact(const json_t *v) { return dumps(v, 1); }

char *tk_json_err_text(char *out, size_t n, const json_error_t *je) {
    size_t o = 0;
    if (n == 0) return out;
    for (const unsigned char *p = (const unsigned char *)je->text; *p && o + 8 < n; p++) {
        int c1 = p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f; // U+0080..U+009F: jansson decoded a latin-1 control
        if (c1) o += (size_t)snprintf(out + o, n - o, "\\u%04x", *++p);
        else if (*p < 0x20 || *p == 0x7f) o += (size_t)snprintf(out + o, n - o, "\\x%02x", *p);
        else out[o++] = (char)*p;
    }
    out[o] = 0;
    return out;
}
