// DLRM's input path alone (no training): what one rank's loader thread spends on a global batch.
// Built and run by contrib/bench/dlrm_input.sh against a build's libtrainkit.a (so the same
// driver times an old library and a new one).
//   dlrm_input [--batch B] [--world W] [--rank R] [--rows N] [--steps S] SHARD...
// For steps 1..S-1 (step 0 warms the page cache and the reader's buffers): the reader's
// read_batch (tk_dlrm_data_batch, as the engine's loader threads call it, with rank R of W), and
// the record cursor alone over rank R's share of the global batch, its B/W records (engine/data.h:
// the decompression of the frames that hold them, no copy, no fold; what a reader that decodes
// only its share must decompress), in CPU time of this thread (the machine may be shared: the
// wall clock says less) and wall time. Prints one JSON line: the fastest of those batches (a
// shared machine's other load only ever adds time) and the median wall time, per global batch,
// and the rest (read_batch less the cursor, fastest each) per categorical id of the share: the
// copy, the fold and the checks (a reader that decodes more than its share counts it here too).
// Tables: 26 of N rows (default 4000000): ids of data prepared with --max-ind-range N need no
// fold, with a larger one most do.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "engine/data.h"
#include "workloads/dlrm/data.h"

static double cpu_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double wall_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static double least(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return v[0];
}

static int fail(tk_err *e) {
    char buf[1024];
    tk_err_format(e, buf, sizeof buf);
    fprintf(stderr, "dlrm_input: %s\n", buf);
    return e->code ? e->code : 1;
}

int main(int argc, char **argv) {
    int B = 262144, W = 1, R = 0, steps = 8;
    long long rows = 4000000;
    static const struct option lo[] = {{"batch", 1, 0, 'b'}, {"world", 1, 0, 'w'}, {"rank", 1, 0, 'r'},
                                       {"rows", 1, 0, 'n'},  {"steps", 1, 0, 's'}, {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        if (c == 'b') B = atoi(optarg);
        else if (c == 'w') W = atoi(optarg);
        else if (c == 'r') R = atoi(optarg);
        else if (c == 'n') rows = atoll(optarg);
        else if (c == 's') steps = atoi(optarg);
        else return 2;
    }
    if (optind >= argc || B < 1 || W < 1 || R < 0 || R >= W || B % W || rows < 1 || steps < 2) {
        fprintf(stderr, "usage: dlrm_input [--batch B] [--world W] [--rank R] [--rows N] [--steps S>=2] SHARD...\n");
        return 2;
    }
    tk_dlrm_config cfg = {.num_dense = 13, .num_tables = 26, .batch = B};
    for (int t = 0; t < cfg.num_tables; t++) cfg.table_rows[t] = rows;
    tk_err e;
    tk_err_clear(&e);
    void *rd;
    tk_records *rec;
    const tk_record_field f[3] = {{"label", TKS_U8, 0}, {"dense", TKS_I32, 13}, {"cat", TKS_I32, 26}};
    if (tk_dlrm_data_open(&cfg, R, W, argv + optind, argc - optind, &rd, &e)) return fail(&e);
    if (tk_records_open(&rec, argv + optind, argc - optind, f, 3, "a DLRM record", &e)) return fail(&e);
    int64_t spe = (int64_t)(tk_dlrm_data_count(rd) / (uint64_t)B);
    if (spe < 1) {
        fprintf(stderr, "dlrm_input: fewer records than one batch\n");
        return 3;
    }
    // Buffers of the whole batch (a reader of a rank's share fills the first B/W rows).
    void *buf[3] = {malloc((size_t)B), malloc((size_t)B * 13 * 4), malloc((size_t)B * 26 * 4)};
    double *rc = calloc((size_t)steps, sizeof *rc), *rw = calloc((size_t)steps, sizeof *rw);
    double *cc = calloc((size_t)steps, sizeof *cc), *cw = calloc((size_t)steps, sizeof *cw);
    if (!buf[0] || !buf[1] || !buf[2] || !rc || !rw || !cc || !cw) return 4;
    uint64_t sum = 0;
    for (int s = 0; s < steps; s++) {
        double c0 = cpu_now(), w0 = wall_now();
        if (tk_dlrm_data_batch(rd, s, spe, buf, &e)) return fail(&e);
        rc[s] = cpu_now() - c0, rw[s] = wall_now() - w0;
        for (int i = 0; i < B / W; i++) sum += ((uint8_t *)buf[0])[i];
        c0 = cpu_now(), w0 = wall_now();
        if (tk_records_seek(rec, (uint64_t)(s % spe) * (uint64_t)B + (uint64_t)R * (uint64_t)(B / W), &e))
            return fail(&e);
        for (size_t got = 0; got < (size_t)(B / W);) {
            const void *col[3];
            size_t n;
            if (tk_records_next(rec, (size_t)(B / W) - got, col, &n, NULL, NULL, &e)) return fail(&e);
            if (n == 0) break;
            got += n;
        }
        cc[s] = cpu_now() - c0, cw[s] = wall_now() - w0;
    }
    double read_c = least(rc + 1, steps - 1), read_w = median(rw + 1, steps - 1);
    double cur_c = least(cc + 1, steps - 1), cur_w = median(cw + 1, steps - 1);
    double ids = (double)(B / W) * 26;
    printf("{\"batch\": %d, \"world\": %d, \"rank\": %d, \"rows\": %lld, \"steps\": %d, \"read_cpu_ms\": %.2f, "
           "\"read_wall_median_ms\": %.2f, \"cursor_cpu_ms\": %.2f, \"cursor_wall_median_ms\": %.2f, \"rest_cpu_ns_per_id\": %.3f, "
           "\"label_sum\": %llu}\n",
           B, W, R, rows, steps - 1, read_c * 1e3, read_w * 1e3, cur_c * 1e3, cur_w * 1e3,
           (read_c - cur_c) * 1e9 / ids, (unsigned long long)sum);
    tk_records_close(rec);
    tk_dlrm_data_close(rd);
    for (int i = 0; i < 3; i++) free(buf[i]);
    free(rc), free(rw), free(cc), free(cw);
    return 0;
}
