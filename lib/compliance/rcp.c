// The RCP check (see rcp.h). Reading a log follows rcp_checker.read_submission_file, line by line
// on the raw text (substring tests, as the original does); the statistics follow RCP_Checker with
// numpy's arithmetic: pairwise summation for means (checked against numpy on random data), the
// population standard deviation, np.interp's formula, and scipy's pooled-variance t-test.
#include "compliance/rcp.h"
#include "coco/coco.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TOKEN ":::MLLOG "
#define TOKEN_LEN 9

// ---- reading a log ------------------------------------------------------------------------------

typedef struct {
    pv *step;   // the group's value of the aggregate field
    pv *results; // {metric: value}
} agg_group;

static int rfail(lc_rcp_run *o, long line, const char *fmt, const char *a) {
    if (!o->error[0]) {
        snprintf(o->error, sizeof o->error, fmt, a);
        o->error_line = line;
    }
    return 1;
}

// json[k] for a dict, as the reader subscripts its parsed lines; NULL (and an error) otherwise.
static pv *item(lc_rcp_run *o, long line, const pv *d, const char *k) {
    pv *v = d && d->t == PV_DICT ? pv_dict_get(d, k) : NULL;
    if (!v) rfail(o, line, d && d->t == PV_DICT ? "KeyError: '%s'" : "TypeError: cannot look up '%s' in this value", k);
    return v;
}

static const lc_convergence *conv_of(const lc_ruleset *rs, const pv *bench) {
    const lc_bench *b = bench && bench->t == PV_STR ? lc_ruleset_bench(rs, bench->u.s.s) : NULL;
    return b ? &b->conv : &rs->conv_default;
}

// Python's round(x, nd) of a number: ints stay ints, floats are rounded exactly (ties to even).
static pv *py_round(lc_arena *a, const pv *x, int nd) {
    if (x->t != PV_FLOAT) return pv_int(a, x->u.i);
    if (!isfinite(x->u.f)) return pv_float(a, x->u.f);
    char buf[400];
    snprintf(buf, sizeof buf, "%.*f", nd, x->u.f);
    return pv_float(a, strtod(buf, NULL));
}

static int line_has(const char *s, size_t n, const char *needle) { return memmem(s, n, needle, strlen(needle)) != NULL; }

int lc_rcp_read(const lc_ruleset *rs, lc_arena *a, const char *buf, size_t n, lc_rcp_run *o) {
    const char *name = o->name;
    memset(o, 0, sizeof *o);
    o->name = name;
    o->epochs = 1e9;
    pv *conv = NULL, *subm = NULL; // conv_epoch and subm_epochs of the original
    agg_group *groups = NULL;
    size_t ng = 0, gcap = 0;
    const char *p = buf, *e = buf + n;
    long line = 0;
    while (p < e && !o->error[0]) {
        const char *nl = memchr(p, '\n', (size_t)(e - p)), *le = nl ? nl : e;
        const char *cr = memchr(p, '\r', (size_t)(le - p));
        if (cr) le = cr;
        line++;
        const char *next = le == e ? e : le + 1 + (*le == '\r' && le + 1 < e && le[1] == '\n');
        const char *tok = memmem(p, (size_t)(le - p), TOKEN, TOKEN_LEN), *t2;
        p = next;
        if (!tok) continue;
        while ((t2 = memmem(tok + 1, (size_t)(le - tok - 1), TOKEN, TOKEN_LEN))) tok = t2;
        const char *s = tok + TOKEN_LEN, *se = le;
        while (se > s && lc_py_space((unsigned char)se[-1])) se--;
        if (se == s) continue; // ":::MLLOG" alone: no longer starts with the token once stripped
        size_t sn = (size_t)(se - s);
        pv *j = NULL;
        char what[120];
#define PARSED() (j ? j : (j = pv_parse_json(a, s, sn, what, sizeof what, NULL)) ? j : (rfail(o, line, "JSONDecodeError: %s", what), NULL))
        if (line_has(s, sn, "global_batch_size")) {
            if (!PARSED()) break;
            o->bs = item(o, line, j, "value");
        }
        if (line_has(s, sn, "submission_benchmark")) {
            if (!PARSED()) break;
            o->benchmark = item(o, line, j, "value");
        }
        if (o->error[0]) break;
        if (o->benchmark && (o->benchmark->t == PV_LIST || o->benchmark->t == PV_DICT)) { // `benchmark in {...}`
            rfail(o, line, "TypeError: unhashable type: '%s' (submission_benchmark)", pv_type_name(o->benchmark));
            break;
        }
        const lc_convergence *cv = conv_of(rs, o->benchmark);
        if (line_has(s, sn, "eval_error") || line_has(s, sn, "eval_accuracy")) {
            if (!PARSED()) break;
            pv *md = item(o, line, j, "metadata");
            if (cv->aggregate) { // stable diffusion: results[step][metric] = value
                pv *step = md ? item(o, line, md, cv->aggregate) : NULL;
                pv *metric = step ? item(o, line, md, cv->metric) : NULL;
                pv *val = metric ? item(o, line, j, "value") : NULL;
                if (!val) break;
                if (step->t == PV_LIST || step->t == PV_DICT || metric->t == PV_LIST || metric->t == PV_DICT) {
                    rfail(o, line, "TypeError: unhashable type in %s", "an evaluation result");
                    break;
                }
                size_t g = 0;
                while (g < ng && !pv_eq(groups[g].step, step)) g++;
                if (g == ng) {
                    if (ng == gcap) {
                        agg_group *ngp = lc_alloc(a, (gcap = gcap ? 2 * gcap : 16) * sizeof *ngp);
                        if (!ngp) return -1;
                        if (ng) memcpy(ngp, groups, ng * sizeof *ngp);
                        groups = ngp;
                    }
                    groups[ng].step = step;
                    if (!(groups[ng++].results = pv_new(a, PV_DICT))) return -1;
                }
                // only string metric names can be looked up by the convergence test
                if (metric->t == PV_STR && pv_dict_set(a, groups[g].results, metric->u.s.s, metric->u.s.n, val)) return -1;
            } else {
                pv *x = md ? item(o, line, md, cv->metadata) : NULL;
                if (!x) break;
                if (cv->round >= 0) {
                    if (!pv_is_number(x)) {
                        rfail(o, line, "TypeError: type %s doesn't define __round__ method", pv_type_name(x));
                        break;
                    }
                    if (!(x = py_round(a, x, cv->round))) return -1;
                }
                conv = x;
            }
        }
        if (line_has(s, sn, "run_stop")) {
            if (!PARSED()) break;
            pv *key = item(o, line, j, "key");
            if (!key) break;
            if (key->t != PV_STR || strcmp(key->u.s.s, "run_stop")) continue;
            pv *md = item(o, line, j, "metadata"), *status = md ? item(o, line, md, "status") : NULL;
            if (!status) break;
            if (status->t == PV_STR && !strcmp(status->u.s.s, "success")) {
                o->converged = 1;
                if (cv->aggregate) { // the first (smallest) step whose results pass
                    lc_env env = {.tmp = a};
                    char err[200];
                    pv *best = NULL;
                    for (size_t g = 0; g < ng; g++) {
                        pv *ok;
                        env.v = groups[g].results;
                        if (lc_expr_eval(cv->converged, &env, &ok, err, sizeof err)) {
                            rfail(o, line, "%s", err);
                            break;
                        }
                        int lt = 0;
                        char cerr[200];
                        if (pv_truthy(ok) && best && pv_cmp(groups[g].step, best, &lt, cerr, sizeof cerr)) {
                            rfail(o, line, "TypeError: %s", cerr);
                            break;
                        }
                        if (pv_truthy(ok) && (!best || lt == -1)) best = groups[g].step;
                    }
                    if (o->error[0]) break;
                    if (!best) {
                        rfail(o, line, "ValueError: min() arg is an empty sequence (no evaluation meets %s)", cv->converged_src);
                        break;
                    }
                    conv = best;
                }
                if (!conv) {
                    rfail(o, line, "UnboundLocalError: run_stop with status success before any %s", "evaluation");
                    break;
                }
                subm = conv;
            } else {
                o->converged = 0;
                subm = NULL; // 1e9
            }
        }
#undef PARSED
    }
    if (!o->error[0] && subm) {
        if (!pv_is_number(subm)) rfail(o, 0, "TypeError: the point of convergence is a %s, not a number", pv_type_name(subm));
        else o->epochs = pv_num(subm);
    }
    if (!o->converged) o->epochs = 1e9;
    return 0;
}

// ---- statistics ---------------------------------------------------------------------------------

// np.mean and np.std (population) with numpy's summation (coco_np_sum, shared with coco-eval).
static double np_mean(const double *a, size_t n) { return n ? coco_np_sum(a, n) / (double)n : NAN; }
static double np_std(const double *a, size_t n) {
    if (!n) return NAN;
    double m = np_mean(a, n), *d = malloc(n * sizeof *d);
    if (!d) return NAN;
    for (size_t i = 0; i < n; i++) d[i] = (a[i] - m) * (a[i] - m);
    double s = sqrt(coco_np_sum(d, n) / (double)n);
    free(d);
    return s;
}
static int cmp_d(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

// Continued fraction of the regularized incomplete beta function (modified Lentz).
static double betacf(double a, double b, double x) {
    const double tiny = 1e-300;
    double qab = a + b, qap = a + 1, qam = a - 1, c = 1, d = 1 - qab * x / qap;
    if (fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 1000; m++) {
        int m2 = 2 * m;
        double aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1 + aa * d;
        if (fabs(d) < tiny) d = tiny;
        c = 1 + aa / c;
        if (fabs(c) < tiny) c = tiny;
        d = 1 / d;
        double del = d * c;
        h *= del;
        if (fabs(del - 1) < 1e-16) break;
    }
    return h;
}
static double incbet(double a, double b, double x) {
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    double bt = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
    if (x < (a + 1) / (a + b + 2)) return bt * betacf(a, b, x) / a;
    return 1 - bt * betacf(b, a, 1 - x) / b;
}

// cephes' stdtr: a finite series for integer df and |t| <= 2, the incomplete beta function below.
double lc_stdtr(double df, double t) {
    if (!(df > 0) || isnan(t)) return NAN;
    if (t == 0) return 0.5;
    if (t < -2 || df != floor(df) || df > 1e6) {
        double z = df / (df + t * t), p = 0.5 * incbet(0.5 * df, 0.5, z);
        return t < 0 ? p : 1 - p;
    }
    const double machep = 1.11022302462515654042e-16;
    long k = (long)df;
    double x = fabs(t), z = 1 + x * x / df, p, f = 1, tz = 1;
    if (k & 1) {
        double xsqk = x / sqrt(df);
        p = atan(xsqk);
        if (k > 1) {
            for (long j = 3; j <= k - 2 && tz / f > machep; j += 2) {
                tz *= (double)(j - 1) / (z * (double)j);
                f += tz;
            }
            p += f * xsqk / z;
        }
        p *= 2.0 / M_PI;
    } else {
        for (long j = 2; j <= k - 2 && tz / f > machep; j += 2) {
            tz *= (double)(j - 1) / (z * (double)j);
            f += tz;
        }
        p = f * x / sqrt(z * df);
    }
    if (t < 0) p = -p;
    return 0.5 + 0.5 * p;
}

// RCP_Checker._find_p_value: one-sided p of scipy's ttest_ind_from_stats(equal_var=True).
static double p_value(double m1, double s1, double n1, double m2, double s2, double n2) {
    double v1 = n1 == 1 ? 0 : s1 * s1, v2 = n2 == 1 ? 0 : s2 * s2;
    double df = n1 + n2 - 2.0, svar = ((n1 - 1) * v1 + (n2 - 1) * v2) / df;
    double t = (m1 - m2) / sqrt(svar * (1.0 / n1 + 1.0 / n2));
    double p2 = 2 * lc_stdtr(df, -fabs(t));
    return t < 0 ? p2 / 2 : 1 - p2 / 2;
}

// RCP_Checker._find_min_acceptable_mean: bisection for the smallest mean still not faster than the
// reference at alpha = 0.05 (to 1e-4).
static double min_acceptable(double mean, double stdev, double n_ref, int runs) {
    if (stdev == 0) return mean;
    double n_subm = runs - 2, hi = mean, lo = 0.0, mid = (lo + hi) / 2;
    while (hi - lo > 0.0001) {
        if (p_value(mid, stdev, n_ref, mean, stdev, n_subm) > 0.05) hi = mid;
        else lo = mid;
        mid = (lo + hi) / 2;
    }
    return mid;
}


// The points of an RCP file with their statistics (compute_rcp_stats), sorted by batch size.
static int load_points(lc_catalog *c, const lc_ruleset *rs, const lc_bench *b, lc_arena *a, lc_rcp_point **out, int *np,
                       int *drop, tk_err *e) {
    char file[4500];
    snprintf(file, sizeof file, "%s/%s/rcp/%s.json", c->dir, rs->name, b->rcp);
    json_error_t je;
    json_t *root = json_load_file(file, 0, &je);
    const char *same = json_string_value(json_object_get(root, "same_as"));
    if (root && same) { // an RCP file equal to an earlier round's is stored once
        if (strstr(same, "..") || strchr(same, '/') == NULL || strlen(same) > 200) {
            json_decref(root);
            tk_err_set(e, TK_EDATA, "RCP file: \"same_as\" must name a file such as \"training-5.0.0/rcp/bert\"");
            return tk_err_where(e, "%s", file);
        }
        snprintf(file, sizeof file, "%s/%s.json", c->dir, same);
        json_decref(root);
        root = json_load_file(file, 0, &je);
    }
    if (!root) {
        return lc_json_fail(e, "RCP file", file, &je);
    }
    json_t *pts = json_object_get(root, "points"), *dr = json_object_get(root, "drop");
    const char *fmt = json_string_value(json_object_get(root, "format"));
    int rc = 0;
    if (!fmt || strcmp(fmt, "trainkit-rcp/1") || !json_is_array(pts) || !json_is_integer(dr) || json_integer_value(dr) < 0) {
        tk_err_set(e, TK_EDATA, "RCP file: expected format \"trainkit-rcp/1\" with \"drop\" and \"points\"");
        rc = tk_err_where(e, "%s", file);
        goto out;
    }
    *drop = (int)json_integer_value(dr);
    *np = (int)json_array_size(pts);
    *out = lc_alloc(a, (size_t)(*np + 1) * sizeof **out);
    if (!*out) {
        rc = tk_err_set(e, TK_EIO, "out of memory");
        goto out;
    }
    for (int i = 0; i < *np; i++) {
        json_t *p = json_array_get(pts, (size_t)i), *conv = json_object_get(p, "converge");
        const char *name = json_string_value(json_object_get(p, "name"));
        size_t n = json_array_size(conv);
        double *v = lc_alloc(a, (n + 1) * sizeof *v);
        if (!name || !json_is_number(json_object_get(p, "bs")) || !json_is_array(conv) || !v) {
            tk_err_set(e, TK_EDATA, "RCP file: a point has \"name\", \"bs\" and \"converge\" (numbers)");
            rc = tk_err_where(e, "%s: $.points[%d]", file, i);
            goto out;
        }
        for (size_t k = 0; k < n; k++) {
            if (!json_is_number(json_array_get(conv, k))) {
                tk_err_set(e, TK_EDATA, "RCP file: \"converge\" holds numbers");
                rc = tk_err_where(e, "%s: $.points[%d].converge[%zu]", file, i, k);
                goto out;
            }
            v[k] = json_number_value(json_array_get(conv, k));
        }
        lc_rcp_point *q = &(*out)[i];
        size_t nn = strlen(name) + 1;
        char *nm = lc_alloc(a, nn);
        if (!nm) {
            rc = tk_err_set(e, TK_EIO, "out of memory");
            goto out;
        }
        memcpy(nm, name, nn);
        q->name = nm;
        q->bs = json_number_value(json_object_get(p, "bs"));
        qsort(v, n, sizeof *v, cmp_d);
        size_t lo = (size_t)*drop, hi = n >= (size_t)*drop ? n - (size_t)*drop : 0;
        q->mean = np_mean(v + lo, hi > lo ? hi - lo : 0);
        q->stdev = np_std(v, n);
        q->min_epochs = min_acceptable(q->mean, q->stdev, (double)n - 2.0 * *drop, b->runs);
        q->speedup = q->mean / q->min_epochs;
    }
    for (int i = 1; i < *np; i++) // stable insertion sort by batch size (Python's sorted)
        for (int j = i; j > 0 && (*out)[j - 1].bs > (*out)[j].bs; j--) {
            lc_rcp_point t = (*out)[j];
            (*out)[j] = (*out)[j - 1];
            (*out)[j - 1] = t;
        }
out:
    json_decref(root);
    return rc;
}

// _create_interp_rcp: the point at batch size bs between lo and hi (np.interp).
static lc_rcp_point interp(const lc_rcp_point *lo, const lc_rcp_point *hi, double bs, int runs) {
    lc_rcp_point r = {0};
    r.bs = bs;
    double slope = (hi->mean - lo->mean) / (hi->bs - lo->bs);
    r.mean = slope * (bs - lo->bs) + lo->mean;
    slope = (hi->stdev - lo->stdev) / (hi->bs - lo->bs);
    r.stdev = slope * (bs - lo->bs) + lo->stdev;
    r.min_epochs = min_acceptable(r.mean, r.stdev, runs * 2.0, runs);
    r.speedup = r.mean / r.min_epochs;
    return r;
}

// _prune_rcps: drop points slower than the interpolation of their neighbours, and the points of
// smaller batch size than the fastest. Keeps every point whose batch size survives.
static int prune(lc_rcp_point *p, int n, int runs, lc_arena *a, lc_rcp_point **out, int *nout) {
    int *keep = lc_alloc(a, (size_t)(n + 1) * sizeof *keep), nk = 0;
    *out = lc_alloc(a, (size_t)(n + 1) * sizeof **out);
    if (!keep || !*out) return -1;
    int fast = 0;
    for (int i = 1; i < n; i++)
        if (p[i].mean < p[fast].mean) fast = i;
    for (int i = 0; i < n; i++)
        if (p[i].bs >= p[fast].bs) keep[nk++] = i;
    for (int i = 1; i < nk - 1; i++) {
        lc_rcp_point r = interp(&p[keep[i - 1]], &p[keep[i + 1]], p[keep[i]].bs, runs);
        if (p[keep[i]].mean > r.mean) {
            memmove(&keep[i], &keep[i + 1], (size_t)(nk - i - 1) * sizeof *keep);
            nk--;
            i--;
        }
    }
    *nout = 0;
    for (int i = 0; i < n; i++) p[i].pruned = 1;
    for (int k = 0; k < nk; k++)
        for (int i = 0; i < n; i++)
            if (p[i].bs == p[keep[k]].bs && p[i].pruned) {
                p[i].pruned = 0;
                (*out)[(*nout)++] = p[i];
            }
    return 0;
}

int lc_rcp_points(lc_catalog *c, const lc_ruleset *rs, const lc_bench *b, lc_arena *a, lc_rcp_point **out, int *n,
                  tk_err *e) {
    int drop, np;
    lc_rcp_point *pruned;
    TRY(load_points(c, rs, b, a, out, n, &drop, e));
    return prune(*out, *n, b->runs, a, &pruned, &np) ? tk_err_set(e, TK_EIO, "out of memory") : 0;
}

static double run_bs(const pv *bs) { return bs && pv_is_number(bs) ? pv_num(bs) : NAN; }

static int not_judged(lc_rcp_result *o, const char *fmt, const char *a, const char *b) {
    o->judged = 0;
    snprintf(o->message, sizeof o->message, fmt, a, b);
    return 0;
}

int lc_rcp_check(lc_catalog *c, const lc_ruleset *rs, lc_arena *a, const lc_rcp_run *runs, int n, lc_rcp_result *o,
                 tk_err *e) {
    memset(o, 0, sizeof *o);
    o->judged = 1;
    o->norm = 1.0;
    o->runs = n;
    // get_submission_epochs: one batch size and one benchmark for the set
    const pv *bs = NULL, *bench = NULL;
    double *ep = lc_alloc(a, (size_t)(n + 1) * sizeof *ep);
    if (!ep) return tk_err_set(e, TK_EIO, "out of memory");
    for (int i = 0; i < n && !o->benchmark; i++) // for messages, also when no check is possible
        if (runs[i].benchmark && runs[i].benchmark->t == PV_STR) o->benchmark = runs[i].benchmark->u.s.s;
    for (int i = 0; i < n; i++) {
        char where[300];
        int w = snprintf(where, sizeof where, "%s", runs[i].name ? runs[i].name : "a result file");
        if (runs[i].error_line) snprintf(where + w, sizeof where - (size_t)w, ": line %ld", runs[i].error_line);
        if (runs[i].error[0])
            return not_judged(o, "%.110s: %.220s (MLCommons' RCP checker stops with an exception here)", where, runs[i].error);
        ep[i] = runs[i].epochs;
        o->not_converged += !runs[i].converged;
        int unset = !bs || (pv_is_number(bs) && pv_num(bs) == -1);
        if (unset) bs = runs[i].bs;
        else if (!runs[i].bs || !pv_eq(runs[i].bs, bs))
            return not_judged(o, "%s: the batch sizes of the files differ (MLCommons' RCP checker stops with an exception here)%s", where, "");
        if (!bench || bench->t == PV_NULL) bench = runs[i].benchmark;
        else if (!runs[i].benchmark || !pv_eq(runs[i].benchmark, bench))
            return not_judged(o, "%s: the benchmarks of the files differ (MLCommons' RCP checker stops with an exception here)%s", where, "");
    }
    const lc_bench *b = bench && bench->t == PV_STR ? lc_ruleset_bench(rs, bench->u.s.s) : NULL;
    o->benchmark = bench && bench->t == PV_STR ? bench->u.s.s : NULL;
    if (!b || !b->rcp)
        return not_judged(o, "no RCPs for benchmark '%s' in %s (MLCommons' RCP checker stops with an exception here)",
                          o->benchmark ? o->benchmark : "(none)", rs->name);
    lc_rcp_point *all, *pts;
    int nall, npts, drop;
    TRY(load_points(c, rs, b, a, &all, &nall, &drop, e));
    if (prune(all, nall, b->runs, a, &pts, &npts)) return tk_err_set(e, TK_EIO, "out of memory");
    if (!bs || (pv_is_number(bs) && pv_num(bs) == -1)) {
        o->pass = 0;
        snprintf(o->message, sizeof o->message, "Could not detect global_batch_size");
        return 0;
    }
    o->has_bs = pv_is_number(bs);
    o->bs = run_bs(bs);
    char bs_text[64]; // as Python's str() writes it: 256, 256.0
    pv_str_of(bs, bs_text, sizeof bs_text);
    if (o->not_converged > b->drop) {
        o->pass = 0;
        snprintf(o->message, sizeof o->message, "Insufficient convergence");
        return 0;
    }
    if (!o->has_bs) return not_judged(o, "global_batch_size is a %s, not a number (MLCommons' RCP checker stops with an exception here)%s",
                                      pv_type_name(bs), "");
    // _find_rcp, _find_top_min_rcp, _find_bottom_max_rcp, _find_min_rcp over the pruned points
    const lc_rcp_point *found = NULL, *lo = NULL, *hi = NULL, *min = NULL;
    double lo_bs = 0, hi_bs = 1e9, min_bs = 1e9;
    for (int i = 0; i < npts; i++) {
        const lc_rcp_point *p = &pts[i];
        if (!found && p->bs == o->bs) found = p;
        if (p->bs < o->bs && p->bs > lo_bs) lo_bs = p->bs, lo = p;
        if (p->bs > o->bs && p->bs < hi_bs) hi_bs = p->bs, hi = p;
        if (p->bs < min_bs) min_bs = p->bs, min = p;
    }
    lc_rcp_point use;
    const char *msg;
    int subm_drop = drop; // samples_rejected follows the record's benchmark
    if (found) {
        use = *found;
        msg = "RCP found";
    } else if (lo && hi) {
        use = interp(lo, hi, o->bs, b->runs);
        subm_drop = b->drop;
        msg = "RCP Interpolation";
    } else if (lo && !hi) {
        o->pass = 0;
        snprintf(o->message, sizeof o->message, "Missing RCP, please submit RCP with BS = %s", bs_text);
        return 0;
    } else if (!lo && hi) {
        use = *min;
        msg = NULL; // decided below
    } else {
        o->pass = 0;
        snprintf(o->message, sizeof o->message, "Cannot find any RCPs");
        return 0;
    }
    if (!use.name) {
        char *nm = lc_alloc(a, 200);
        if (!nm) return tk_err_set(e, TK_EIO, "out of memory");
        snprintf(nm, 200, "%s_interp_%s", b->name, bs_text);
        use.name = nm;
    }
    // _eval_submission_record
    if (b->rcp_min_offset) use.speedup = use.mean / (use.min_epochs - b->rcp_min_offset);
    qsort(ep, (size_t)n, sizeof *ep, cmp_d);
    size_t lo_i = (size_t)subm_drop, hi_i = (size_t)n >= (size_t)subm_drop ? (size_t)n - (size_t)subm_drop : 0;
    o->subm_mean = np_mean(ep + lo_i, hi_i > lo_i ? hi_i - lo_i : 0);
    double norm = use.mean / o->subm_mean;
    o->norm = norm < 1 ? 1.0 : norm;
    o->pass = o->subm_mean >= use.mean / use.speedup;
    o->has_stats = 1;
    o->rcp_name = use.name;
    o->rcp_mean = use.mean;
    o->rcp_stdev = use.stdev;
    o->min_epochs = use.min_epochs;
    o->max_speedup = use.speedup;
    if (!msg) msg = o->pass ? "RCP not found but slower convergence on smaller batch size" : NULL;
    if (msg) snprintf(o->message, sizeof o->message, "%s", msg);
    else snprintf(o->message, sizeof o->message, "Missing RCP, please submit RCP with BS = %s", bs_text);
    return 0;
}
