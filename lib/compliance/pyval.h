// Values with the semantics of Python's json module and of the few Python operators MLCommons'
// compliance rules rely on (==, <, in, +, truthiness). MLPerf logs are judged by a Python
// checker, so a C checker that wants the same verdicts must compare, order and test membership
// the way Python does: True == 1, 'a' < 'b', 2 < 'x' is an error, NaN and Infinity parse,
// duplicate JSON keys keep the last value. All memory comes from an arena freed in one go.
#ifndef TK_COMPLIANCE_PYVAL_H
#define TK_COMPLIANCE_PYVAL_H

#include <stddef.h>

typedef struct lc_arena lc_arena;
lc_arena *lc_arena_new(void);
void lc_arena_reset(lc_arena *a); // empties it, keeping up to 64 MB of its blocks for reuse
void lc_arena_free(lc_arena *a);
void *lc_alloc(lc_arena *a, size_t n); // zeroed, 8-byte aligned; NULL on out of memory

typedef enum { PV_NULL, PV_BOOL, PV_INT, PV_FLOAT, PV_STR, PV_LIST, PV_DICT } pv_type;

typedef struct pv pv;
typedef struct pv_kv {
    const char *k; // UTF-8 (JSON keys are strings)
    size_t kn;
    pv *v;
} pv_kv;

struct pv {
    pv_type t;
    union {
        long long i; // PV_BOOL (0/1), PV_INT
        double f;    // PV_FLOAT
        struct {
            const char *s; // UTF-8; lone surrogates are kept as 3-byte sequences
            size_t n;
        } s;
        struct {
            pv **v;
            size_t n, cap;
        } l;
        struct {
            pv_kv *kv;
            size_t n, cap;
        } d;
    } u;
};

pv *pv_new(lc_arena *a, pv_type t);
pv *pv_int(lc_arena *a, long long i);
pv *pv_float(lc_arena *a, double f);
pv *pv_bool(lc_arena *a, int b);
pv *pv_str(lc_arena *a, const char *s, size_t n);
int pv_list_push(lc_arena *a, pv *list, pv *item);                        // 0 or -1 (memory)
int pv_dict_set(lc_arena *a, pv *d, const char *k, size_t kn, pv *v);     // replaces; keeps order
pv *pv_dict_get(const pv *d, const char *k);                              // NULL when absent
pv *pv_deep_copy(lc_arena *a, const pv *v);

// Parse one JSON text exactly as Python's json.loads(str) does, where each input byte is one
// character (the checker reads files as latin-1): bytes >= 0x80 become U+0080..U+00FF.
// Accepts NaN, Infinity, -Infinity; integers beyond 64 bits become floats. Returns NULL on a
// syntax error and writes "what" and the byte offset of the problem.
pv *pv_parse_json(lc_arena *a, const char *p, size_t n, char *what, size_t whatn, size_t *off);

// Python semantics. Functions returning int give -1 on a TypeError and write its message.
int pv_truthy(const pv *v);
int pv_eq(const pv *a, const pv *b);                          // never fails
int pv_cmp(const pv *a, const pv *b, int *out, char *err, size_t errn); // <0 / 0 / >0 in *out
int pv_contains(const pv *container, const pv *item, int *out, char *err, size_t errn);
int pv_is_number(const pv *v); // bool, int or float
double pv_num(const pv *v);
const char *pv_type_name(const pv *v); // Python's: 'NoneType', 'bool', 'int', 'float', 'str', ...

// Python's str(): repr of containers, no quotes for a top-level string. Writes at most n-1 bytes.
void pv_str_of(const pv *v, char *buf, size_t n);

// Python whitespace for str.strip() of a latin-1 decoded line.
static inline int lc_py_space(unsigned char c) {
    return (c >= 0x09 && c <= 0x0d) || (c >= 0x1c && c <= 0x20) || c == 0x85 || c == 0xa0;
}
// Python's float(str) of a UTF-8 string: strip Unicode whitespace, then a decimal literal, inf/infinity/nan (any case, signed).
// Underscores between digits are accepted as Python does. 0 or -1.
int lc_py_float(const char *s, size_t n, double *out);

#endif
