// Fuzz DLRM's data reader (lib/workloads/dlrm/data.c over the engine's record cursor): the input
// is a whole .tks file, opened as training data of 13 counts and 26 categoricals. A file that
// opens is read to the end in uneven pieces with the ids folded into small tables, read again
// from a seek to its middle, and a few training batches are taken, by one rank and by rank 2 of 3
// (which decodes only its share: the same bytes of it when one rank reads the batch, and an error
// only if one rank has one too). Every record handed over must
// have a 0/1 label and ids inside their tables; anything else must be a TK_EDATA error (TK_EIO for
// memory), never a crash, a hang or a read out of bounds.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "workloads/dlrm/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

enum { ND = 13, NC = 26, MAXN = 64 };

static void check_code(int rc) {
    if (rc && rc != TK_EDATA && rc != TK_EIO) abort();
}

static void check_records(int got, const int64_t *rows, const uint8_t *label, const int32_t *cat) {
    for (int i = 0; i < got; i++) {
        if (label[i] > 1) abort();
        for (int f = 0; f < NC; f++)
            if (cat[i * NC + f] < 0 || cat[i * NC + f] >= rows[f]) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_dlrm_data.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    char *paths[1] = {path};
    tk_dlrm_config cfg = {.num_dense = ND, .num_tables = NC, .batch = 3};
    const int64_t *rows = cfg.table_rows;
    for (int f = 0; f < NC; f++) cfg.table_rows[f] = f % 3 == 0 ? 1 : f % 3 == 1 ? 7 + f : 1000003; // some fold, some not
    void *d;
    tk_err e = {0};
    int rc = tk_dlrm_data_open(&cfg, 0, 1, paths, 1, &d, &e);
    check_code(rc);
    if (!rc) {
        static uint8_t label[MAXN];
        static int32_t dense[MAXN * ND], cat[MAXN * NC];
        uint64_t count = tk_dlrm_data_count(d), seen = 0;
        for (int k = 1; !rc && seen < count; k = k % (MAXN - 5) + 5) { // pieces of 1, 6, 11, ... records
            int got = 0;
            rc = tk_dlrm_data_next(d, k, label, dense, cat, &got, &e);
            check_code(rc);
            if (rc) break;
            if (got > k || (got < k && seen + (uint64_t)got != count) || got == 0) abort();
            check_records(got, rows, label, cat);
            seen += (uint64_t)got;
        }
        if (!rc && count) {
            int got = 0;
            rc = tk_dlrm_data_seek(d, count / 2, &e);
            if (!rc) rc = tk_dlrm_data_next(d, MAXN, label, dense, cat, &got, &e);
            check_code(rc);
            if (!rc && (uint64_t)got != (count - count / 2 < MAXN ? count - count / 2 : MAXN)) abort();
        }
        // Training batches as one rank reads them, and as rank 2 of 3 (its one sample, the batch's
        // last): the same bytes, and no error where one rank has none.
        int B = count >= 3 ? 3 : 0;
        void *const f[3] = {label, dense, cat};
        void *d3 = NULL;
        if (!rc && B) rc = tk_dlrm_data_open(&cfg, 2, 3, paths, 1, &d3, &e);
        check_code(rc);
        for (int64_t step = 0; !rc && B && step < 4; step++) {
            rc = tk_dlrm_data_batch(d, step, (int64_t)(count / (uint64_t)B), f, &e);
            check_code(rc);
            uint8_t l3[2];
            int32_t d3n[2 * ND], c3[2 * NC];
            void *const f3[3] = {l3, d3n, c3};
            int rc3 = tk_dlrm_data_batch(d3, step, (int64_t)(count / (uint64_t)B), f3, &e);
            check_code(rc3);
            if (rc3 && !rc) abort();
            if (!rc) {
                check_records(B, rows, label, cat);
                if (l3[0] != label[2] || memcmp(d3n, dense + 2 * ND, ND * 4) || memcmp(c3, cat + 2 * NC, NC * 4)) abort();
            }
        }
        tk_dlrm_data_close(d3);
        tk_dlrm_data_close(d);
    }
    unlink(path);
    return 0;
}
