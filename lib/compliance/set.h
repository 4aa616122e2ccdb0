// Result files and benchmark sets as MLCommons' tools read them: a set is a directory of
// result_*.txt (taken in name order), maybe a scaling.json, under
// <org>/results/<system>/<benchmark> beside <org>/systems/<system>.json.
#ifndef TK_COMPLIANCE_SET_H
#define TK_COMPLIANCE_SET_H

#include <limits.h>

#include "compliance/compliance.h"

// The whole file ("-": standard input). Unreadable or a directory: TK_EDATA naming the path.
int lc_read_file(const char *path, char **buf, size_t *len, tk_err *e);

typedef struct lc_set_file {
    char *name;      // "result_3.txt" (first member: the files are sorted by it)
    int readable;    // 0: err says why
    tk_err err;
    char *buf;       // contents
    size_t len;
    lc_log log;      // parsed, in the set's arena
} lc_set_file;

typedef struct lc_set {
    char dir[PATH_MAX];
    lc_set_file *files;
    int n;
    int has_scaling;   // scaling.json present
    double scaling;    // its scaling_factor (1.0 without)
    long accelerators; // nodes * max(accelerators per node, 1) from systems/<system>.json; 0: unknown
    lc_arena *a;
} lc_set;

// Reads a set. A directory that cannot be listed or a broken scaling.json: TK_EDATA; an
// unreadable result file is only marked (readable = 0), as the summarizer skips it.
int lc_set_open(const char *dir, lc_set **out, tk_err *e);
void lc_set_free(lc_set *s);

#endif
