// Fuzz prep librispeech --manifests' reader of the MLPerf reference's manifests
// (librispeech-SUBSET-wav.json: ls_manifest_load). Any input must load or give a TK_EDATA error
// naming the file, never crash; a loaded entry has a transcript, a speed-1 file name, and
// numbers >= 0.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "librispeech/librispeech.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_librispeech.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    tk_err e;
    ls_manifest_entry *m;
    size_t n;
    if (ls_manifest_load(path, &m, &n, &e) == 0) {
        for (size_t i = 0; i < n; i++)
            if (!m[i].transcript || !m[i].fname || !m[i].fname[0] || !(m[i].duration >= 0)) abort();
        ls_manifest_free(m, n);
    } else if (e.code != TK_EDATA && e.code != TK_EIO) {
        abort();
    } else if (e.code == TK_EDATA && !strstr(e.where, path)) {
        abort();
    }
    unlink(path);
    return 0;
}
