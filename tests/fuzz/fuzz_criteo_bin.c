// Fuzz the Criteo binary reader (criteo_bin_each, lib/criteo/criteo.c; `prep criteo-bin`): the
// input is a FILE_data.bin, read once alone and once as two files in a row. Every sample handed
// over must have a 0/1 label, counts >= 0 and categoricals >= 0, and a whole read must hand over
// size / 160 samples per file. Anything else must be a TK_EDATA error naming the file and an
// offset inside it, never a crash.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "criteo/criteo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int check_row(void *ctx, const criteo_row *r, tk_err *e) {
    (void)e;
    if (r->label > 1) abort();
    for (int j = 0; j < CRITEO_DENSE; j++)
        if (r->dense[j] < 0) abort();
    for (int j = 0; j < CRITEO_CAT; j++)
        if (r->cat[j] > INT32_MAX) abort();
    ++*(size_t *)ctx;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_criteo_bin.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    char *files[2] = {path, path};
    for (int nf = 1; nf <= 2; nf++) {
        size_t n = 0;
        tk_err e = {0};
        int rc = criteo_bin_each(files, nf, check_row, &n, &e);
        if (rc == 0 && n != (size_t)nf * (size / (CRITEO_FIELDS * 4))) abort();
        if (rc && (rc != TK_EDATA || !strstr(e.where, path) || !strstr(e.where, "offset"))) abort();
        if (rc) {
            unsigned long long off = strtoull(strstr(e.where, "offset ") + 7, NULL, 10);
            if (off >= size) abort(); // the offset points into the file
        }
    }
    unlink(path);
    return 0;
}
