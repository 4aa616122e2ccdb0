// Result files and benchmark sets as MLCommons' tools read them: a set is a directory of
// result_*.txt (taken in name order), maybe a scaling.json, under
// <org>/results/<system>/<benchmark> beside <org>/systems/<system>.json.
#ifndef TK_COMPLIANCE_SET_H
#define TK_COMPLIANCE_SET_H

#include <limits.h>

#include "compliance/compliance.h"
#include "compliance/rcp.h"
#include "compliance/ruleset.h"

// The whole file ("-": standard input). Unreadable or a directory: TK_EDATA naming the path.
int lc_read_file(const char *path, char **buf, size_t *len, tk_err *e);

// What the score and the RCP check of a set need of one result file, kept while the set is read
// file by file: each log is parsed, checked and dropped before the next is read.
typedef struct lc_set_run {
    char *name;      // "result_3.txt" (first member: the runs are sorted by it)
    tk_err *err;     // unreadable: why (the summarizer skips the file); else NULL
    int has_ttt;
    double ttt_min;  // as lc_result
    int pass;        // passes under the set's ruleset
    lc_rcp_run rcp;  // with rcp: its RCP reading under the set's ruleset (name set; values in the set's arena)
    // while reading: the rulesets it was checked under and passes (bit k: the catalog's ruleset
    // k), with rcp its reading under each of those (in catalog order)
    unsigned long long checked, passed;
    lc_rcp_run *each;
} lc_set_run;

typedef struct lc_set {
    char dir[PATH_MAX];
    lc_set_run *runs;
    int n;
    int has_scaling;       // scaling.json present
    double scaling;        // its scaling_factor (1.0 without)
    long accelerators;     // nodes * max(accelerators per node, 1) from systems/<system>.json; 0: unknown
    const char *benchmark; // the first submission_benchmark (a string) of the logs, or NULL
    lc_ruleset *rs;        // the ruleset: the fixed one, the one detected, or NULL (why says why)
    lc_detect d;           // how it was detected (d.chosen NULL when fixed)
    tk_err why;
    lc_arena *a;
} lc_set;

// Reads a set: result_*.txt in name order, under the fixed ruleset or picking one as
// lc_detect_ruleset does for all its logs; with rcp also each log's RCP reading. Memory holds one
// log at a time. What concerns this set only gives 0 with rs NULL and why filled: a directory that
// cannot be listed or a broken scaling.json (TK_EDATA), no ruleset to pick (TK_EUSAGE, why not
// naming the directory). An unreadable result file is only marked (err), as the summarizer skips
// it. Fails only on broken rule files (TK_EDATA) or out of memory.
int lc_set_read(lc_catalog *c, lc_ruleset *fixed, int strict, int rcp, const char *dir, lc_set **out, tk_err *e);
void lc_set_free(lc_set *s);

#endif
