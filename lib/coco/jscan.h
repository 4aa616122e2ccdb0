// A small pull parser for large JSON documents (COCO annotation and result files). It reads a
// mutable, NUL-terminated buffer in place (strings are unescaped where they lie), keeps the JSON
// path of the value being read, and reports errors as "FILE: line N: $.annotations[3].bbox: ...".
// It accepts exactly RFC 8259 JSON (UTF-8 checked; NaN and Infinity are refused) and parses
// numbers to the same double Python's json module gives (correctly rounded).
#ifndef TK_COCO_JSCAN_H
#define TK_COCO_JSCAN_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define JS_MAX_DEPTH 64

typedef struct jscan {
    char *base, *p, *end; // buffer, cursor, end (*end == 0)
    const char *file;     // for messages
    tk_err *e;
    int depth;            // containers open
    struct { const char *key; size_t klen; long idx; char kind; } lv[JS_MAX_DEPTH];
} jscan;

enum { JS_OBJECT = '{', JS_ARRAY = '[', JS_STRING = '"', JS_NUMBER = '0', JS_TRUE = 't',
       JS_FALSE = 'f', JS_NULL = 'n', JS_EOF = 0, JS_BAD = '?' };

void js_init(jscan *s, char *buf, size_t len, const char *file, tk_err *e);
// Type of the next value (after whitespace), without consuming it.
int js_peek(jscan *s);
// Fail at the current position: sets TK_EDATA with the path and line, returns TK_EDATA.
int js_fail(jscan *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Objects: js_obj_begin, then while ((r = js_obj_next(s, &k, &kl)) == 1) { read the value };
// r == 0 at '}', r < 0 on error (filled). Arrays likewise with js_arr_next.
int js_obj_begin(jscan *s);
int js_obj_next(jscan *s, const char **key, size_t *klen);
int js_arr_begin(jscan *s);
int js_arr_next(jscan *s);
// Scalars. js_number accepts a JSON number only; js_int64 also requires an integral value in
// int64 range; js_bool accepts true/false; js_string unescapes in place (not NUL-terminated).
int js_number(jscan *s, double *out);
int js_int64(jscan *s, int64_t *out);
int js_bool(jscan *s, int *out);
int js_string(jscan *s, char **out, size_t *len);
// Skip any value (checked for syntax).
int js_skip(jscan *s);
// After the top-level value: only whitespace may follow.
int js_end(jscan *s);
// Key comparison helper.
static inline int js_key_is(const char *k, size_t kl, const char *lit) {
    size_t n = 0;
    while (lit[n]) n++;
    if (n != kl) return 0;
    for (size_t i = 0; i < n; i++)
        if (k[i] != lit[i]) return 0;
    return 1;
}

#endif
