// Fuzz the sentencepiece vocabulary readers (.vocab text, .model protobuf) and the decode
// (lib/speech/wer.c), which RNN-T's WER reads from the files beside the records: any input must
// parse into pieces whose decode of every id (and of ids past the end) gives a NUL-terminated
// text no longer than the pieces, or fail with TK_EDATA, never crash or read out of bounds.
// Seeds: tests/fuzz/corpus/spm_vocab/ (a .vocab and a .model spm_train wrote, edge cases of both).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "speech/wer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tk_spm_vocab *v;
    tk_err e;
    if (tk_spm_vocab_parse((const char *)data, size, "fuzz.vocab", &v, &e)) {
        if (e.code != TK_EDATA) abort();
        return 0;
    }
    int n = tk_spm_vocab_size(v);
    if (n < 1) abort();
    int32_t ids[64];
    int k = 0;
    for (int i = 0; i < n && k < 64; i++) ids[k++] = i;
    char *s;
    size_t len;
    if (tk_spm_decode(v, ids, k, &s, &len, &e)) abort();
    // a piece loses bytes ("▁" becomes one space) or is the 5-byte <unk> surface
    if (strlen(s) != len || len > size + 5 * (size_t)k) abort();
    free(s);
    int32_t bad[2] = {0, n};
    if (tk_spm_decode(v, bad, 2, &s, &len, &e) != TK_EDATA) abort();
    int64_t d, w;
    if (tk_wer_distance((const char *)data, size, (const char *)data, size / 2, &d, &w, &e) == 0 && (d < 0 || w < 0))
        abort();
    tk_spm_vocab_free(v);
    return 0;
}
