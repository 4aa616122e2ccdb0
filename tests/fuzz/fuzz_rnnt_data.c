// Fuzz RNN-T's records reader and batches (lib/workloads/rnnt/data.c): the input is a whole .tks
// file, loaded with the 16.7 s filter and without it, then read as one training batch of each
// epoch's first global batch and as evaluation batches of every utterance. Any input must give
// utterances that pass the checks (16 kHz, >= 1 sample and token, tokens >= 0) and batches whose
// lengths fit, or TK_EDATA naming the file (and record), never a crash, a hang or an out-of-bounds
// access. Seeds: tests/fuzz/corpus/rnnt_data/ (test_rnnt_data's records: good, another schema, an
// 8 kHz record).
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "workloads/rnnt/data.h"

static void batches(const rnnt_dataset *d, int train) {
    rnnt_data_cfg c;
    rnnt_data_cfg_default(&c);
    c.batch = 2;
    int64_t n = rnnt_dataset_count(d), L;
    int K;
    rnnt_batch_dims(&c, d, &L, &K);
    if (n < 1 || L < 1 || K < 1 || L > (1 << 22)) abort();
    rnnt_batch b = {.pcm = malloc((size_t)L * 2 * sizeof(float)), .len = malloc(8), .utt = malloc(8),
                    .rate = malloc(8), .tokens = malloc((size_t)K * 8), .ntok = malloc(8), .epoch = malloc(4)};
    tk_err e;
    if (train && n >= 2) {
        rnnt_reader *r;
        if (rnnt_reader_open(&c, d, 0, 1, &r, &e)) abort();
        for (int64_t s = 0; s < 2; s++)
            if (rnnt_reader_batch(r, s * (n / 2), n / 2, &b, &e)) abort();
        rnnt_reader_close(r);
    }
    for (int64_t i = 0; i < n && i < 256; i += 2) {
        int k = n - i < 2 ? 1 : 2;
        if (rnnt_eval_batch(d, &c, i, k, L, K, &b, &e)) abort();
        for (int j = 0; j < k; j++)
            if (b.len[j] < 1 || b.len[j] > L || b.ntok[j] < 1 || b.ntok[j] > K) abort();
    }
    free(b.pcm), free(b.len), free(b.utt), free(b.rate), free(b.tokens), free(b.ntok), free(b.epoch);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_rnnt_data.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    char *paths[1] = {path};
    for (int train = 0; train < 2; train++) {
        rnnt_dataset *d;
        tk_err e;
        if (rnnt_dataset_load(paths, 1, train ? 16.7 : 0, &d, &e)) {
            if (e.code != TK_EDATA && e.code != TK_EIO) abort();
            continue;
        }
        batches(d, train);
        rnnt_dataset_free(d);
    }
    unlink(path);
    return 0;
}
