// The reference convergence point (RCP) check of a set of result files, as MLCommons'
// mlperf_logging.rcp_checker does it: each run's point of convergence (epochs or samples) is read
// from its log, the olympic mean of the set is compared with the RCP of its global batch size
// (or one interpolated between the neighbouring batch sizes), and a set converging faster than
// the reference's mean, but within the statistically allowed speed-up, gets a normalisation
// factor for its score. The RCPs and how each benchmark is read are data (ruleset.json and
// rcp/NAME.json, man 5 trainkit-compliance).
#ifndef TK_COMPLIANCE_RCP_H
#define TK_COMPLIANCE_RCP_H

#include "compliance/ruleset.h"

// One result file as the RCP checker reads it (read_submission_file).
typedef struct lc_rcp_run {
    const char *name;     // the file, for messages (set by the caller; kept by lc_rcp_read)
    int converged;        // run_stop with status "success"
    double epochs;        // the point of convergence; 1e9 when not converged
    pv *bs;               // global_batch_size, or NULL when the log has none (-1 in Python)
    pv *benchmark;        // submission_benchmark, or NULL
    char error[300];      // set where the official reader raises an exception (a crash there)
    long error_line;
} lc_rcp_run;

// Reads one log; rs gives the convergence rule of each benchmark. 0, or -1 when out of memory.
int lc_rcp_read(const lc_ruleset *rs, lc_arena *a, const char *buf, size_t n, lc_rcp_run *out);

typedef struct lc_rcp_result {
    int judged;          // 0 where the official checker stops with an exception; why in message
    int pass;
    char message[400];   // the official message ("RCP found", "RCP Interpolation", ...) or the reason
    const char *benchmark;
    int has_bs;
    double bs;
    int runs, not_converged;
    int has_stats;       // the comparison below was made
    const char *rcp_name;        // the RCP used ("bert_ref_256"), or the interpolation's name
    double rcp_mean, rcp_stdev, min_epochs, max_speedup, subm_mean;
    double norm;         // normalisation factor of the score (1.0 unless faster than the RCP mean)
} lc_rcp_result;

// Checks a set; runs in result-file order. Fails only on unreadable RCP data (TK_EDATA) or memory.
int lc_rcp_check(lc_catalog *c, const lc_ruleset *rs, lc_arena *a, const lc_rcp_run *runs, int n, lc_rcp_result *out,
                 tk_err *e);

// The points of a benchmark's RCP file with their statistics, as RCP_Checker computes them
// (compute_rcp_stats, _prune_rcps), sorted by batch size.
typedef struct lc_rcp_point {
    const char *name;
    double bs, mean, stdev, min_epochs, speedup;
    int pruned; // not among the points the check uses
} lc_rcp_point;
int lc_rcp_points(lc_catalog *c, const lc_ruleset *rs, const lc_bench *b, lc_arena *a, lc_rcp_point **out, int *n,
                  tk_err *e);

// Student's t distribution function P(T <= t) with df degrees of freedom (scipy.special.stdtr).
double lc_stdtr(double df, double t);

#endif
