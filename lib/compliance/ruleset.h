// The rulesets a rules directory holds (share/compliance/<usage>-<version>/), with the facts of
// their rounds that are not rules: benchmarks, runs per set and how many the olympic mean drops,
// how the RCP checker reads a log's convergence, and the RCP file (ruleset.json, man 5
// trainkit-compliance). Used to pick a ruleset from a log, to score and for the RCP check.
#ifndef TK_COMPLIANCE_RULESET_H
#define TK_COMPLIANCE_RULESET_H

#include "compliance/compliance.h"
#include "compliance/expr.h"

#define LC_MAX_RULESETS 64

// Where a log's point of convergence is read (mlperf_logging.rcp_checker.read_submission_file).
typedef struct lc_convergence {
    const char *metadata;  // metadata field of the last eval_accuracy before run_stop, or NULL
    int round;             // decimals it is rounded to, or -1
    const char *aggregate; // or: metadata field grouping evaluation results (stable diffusion)
    const char *metric;    //     metadata field naming each result's metric
    lc_expr *converged;    //     the first group satisfying this (v = {metric: value}) converged
    const char *converged_src;
} lc_convergence;

typedef struct lc_bench {
    const char *name;
    int runs;               // result files in a set
    int drop;               // the olympic mean drops this many from each end
    const char *rcp;        // RCP file (rcp/NAME.json) or NULL
    int rcp_only;           // not a benchmark of the round; its RCPs are still used (5.1.0: bert)
    double rcp_min_offset;  // RCP checker's Max Speedup = Mean / (Min Epochs - offset); 0: none
    lc_convergence conv;
} lc_bench;

typedef struct lc_ruleset {
    char name[64];    // "training-5.1.0"
    char version[32]; // "5.1.0"
    int v[3];
    int has_meta;     // ruleset.json was found
    lc_bench *bench;
    int nbench;
    lc_convergence conv_default;
    lc_rules *rules;  // opened on first use
} lc_ruleset;

typedef struct lc_catalog {
    char dir[4096];
    lc_arena *a;
    lc_ruleset sets[LC_MAX_RULESETS]; // oldest first
    int nsets;
} lc_catalog;

// Lists dir/<usage>-X.Y.Z/ holding common.json and reads their ruleset.json (bad data: TK_EDATA).
int lc_catalog_open(const char *dir, const char *usage, lc_catalog **out, tk_err *e);
void lc_catalog_free(lc_catalog *c);
lc_ruleset *lc_catalog_find(lc_catalog *c, const char *version); // NULL when absent
const lc_bench *lc_ruleset_bench(const lc_ruleset *rs, const char *name); // NULL when absent
// The same, for a benchmark of the round (not an rcp_only one).
const lc_bench *lc_ruleset_round_bench(const lc_ruleset *rs, const char *name);
// The rules of a ruleset (opened once, kept by the catalog).
int lc_ruleset_rules(lc_catalog *c, lc_ruleset *rs, lc_rules **out, tk_err *e);
// "1.0.0, 1.1.0, ..." into buf.
void lc_catalog_versions(const lc_catalog *c, char *buf, size_t n);

// The ruleset a log (or the logs of one set) fits best: of the rulesets whose round has the
// benchmark the logs name (every ruleset when they name none), the one under which they have the
// fewest errors, the newest of equals. The logs are checked under each candidate; derived
// records are dropped again. Fails with TK_EUSAGE when the named benchmark is in no ruleset.
typedef struct lc_detect {
    lc_ruleset *chosen;
    const char *benchmark;             // the first submission_benchmark, or NULL
    int ncand;                         // rulesets tried
    int nfit;                          // rulesets with the fewest errors (chosen among them)
    lc_ruleset *fit[LC_MAX_RULESETS];  // oldest first
    long errors;                       // errors under the chosen ruleset (all logs)
} lc_detect;
int lc_detect_ruleset(lc_catalog *c, lc_arena *a, lc_log *logs, int nlogs, int strict, lc_detect *d, tk_err *e);

// The same pick for logs seen one at a time (a set read file by file, without holding its logs):
// lc_detect_begin, lc_detect_add for each log in order, lc_detect_end (0, or TK_EUSAGE as above).
// The first benchmark is copied into keep. A log seen before any log names a benchmark is checked
// under every ruleset, a later one only under the candidates of that benchmark.
typedef struct lc_detector {
    lc_catalog *c;
    lc_arena *keep;
    int strict, has_bench;
    lc_detect d;                 // benchmark, and at the end the pick
    long errs[LC_MAX_RULESETS];  // errors of the logs under each ruleset of the catalog
} lc_detector;
void lc_detect_begin(lc_detector *dt, lc_catalog *c, lc_arena *keep, int strict);
// Checks a log (results in a) under the rulesets it may be judged by; bit k of *checked and
// *passed (either may be NULL): checked under, and passes, the catalog's ruleset k.
int lc_detect_add(lc_detector *dt, lc_arena *a, lc_log *log, unsigned long long *checked, unsigned long long *passed,
                  tk_err *e);
int lc_detect_end(lc_detector *dt, lc_detect *d, tk_err *e);

#endif
