// Fuzz the .tks reader: the input is a whole file, read both as a seekable file (index, every frame
// by random access) and as a stream through a pipe (block by block). Any input must give either
// records or a TK_EDATA error, never a crash, a hang or an out-of-bounds access.
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "tks/tks.h"

// Any schema (ragged fields included) through the tks_frame calls.
static void drain_frames(tks_reader *r, int random_access) {
    tks_frame fr = {0};
    tk_err e;
    if (random_access) {
        for (size_t i = 0; i < tks_reader_nframes(r); i++)
            if (tks_reader_read(r, i, &fr, &e)) break;
    } else {
        while (tks_reader_next_frame(r, &fr, &e) == 0 && fr.n) {}
    }
    tks_frame_free(&fr);
}

static void drain(tks_reader *r, int random_access) {
    const tks_schema *s = tks_reader_schema(r);
    if (s->nragged || tks_reader_max_frame_records(r) > (1u << 20)) return drain_frames(r, random_access);
    size_t maxr = tks_reader_max_frame_records(r);
    if (maxr > (1u << 20) || maxr * s->record_bytes > ((size_t)64 << 20)) return; // keep memory small
    void *cols[TKS_MAX_FIELDS];
    for (int f = 0; f < s->nfields; f++) cols[f] = malloc(maxr * s->f[f].bytes + 1);
    tk_err e;
    size_t n = 1;
    if (random_access) {
        for (size_t i = 0; i < tks_reader_nframes(r); i++)
            if (tks_reader_read_frame(r, i, cols, &n, &e)) break;
    } else {
        while (n && tks_reader_next(r, cols, &n, &e) == 0) {}
    }
    for (int f = 0; f < s->nfields; f++) free(cols[f]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_tks_reader.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    tks_reader *r;
    tk_err e;
    if (tks_reader_open(&r, path, &e) == 0) {
        drain(r, 1);
        tks_reader_close(r);
    }
    if (tks_reader_open(&r, path, &e) == 0) {
        drain_frames(r, 1);
        tks_reader_close(r);
    }
    unlink(path);
    // As a stream: inputs that fit a pipe's buffer are written whole, then read back.
    int p[2];
    if (size <= 60000 && pipe(p) == 0) {
        ssize_t w = write(p[1], data, size);
        close(p[1]);
        char dev[64];
        snprintf(dev, sizeof dev, "/dev/fd/%d", p[0]);
        if (w == (ssize_t)size && tks_reader_open(&r, dev, &e) == 0) {
            drain(r, 0);
            tks_reader_close(r);
        }
        close(p[0]);
    }
    return 0;
}
