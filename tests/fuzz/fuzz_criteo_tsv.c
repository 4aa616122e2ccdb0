// Fuzz Criteo TSV input: the bytes go through the line reader (plain, gzip or zstd by magic) and
// each line through the parser. Any input must parse or give a TK_EDATA error, never crash.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "criteo/criteo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_criteo_tsv.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    tk_lines *l;
    tk_err e;
    if (tk_lines_open(&l, path, &e) == 0) {
        const char *line;
        size_t len;
        int nl;
        criteo_row row;
        while (tk_lines_next(l, &line, &len, &nl, &e) == 0 && line)
            if (criteo_parse_tsv(line, len, !nl, &row, &e) == 0 && row.label > 1) abort();
        tk_lines_close(l);
    }
    unlink(path);
    return 0;
}
