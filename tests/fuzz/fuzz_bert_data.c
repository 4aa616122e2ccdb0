// Fuzz BERT's reader (lib/workloads/bert/data.c): the input is a whole .tks file, opened as BERT
// shards against a small model (L 24, P 4, vocabulary 32) and read record by record. Any input
// must give either records that pass every check or a TK_EDATA error naming the file (and the
// record), never a crash, a hang or an out-of-bounds access. Seeds: tests/fuzz/corpus/bert_data/
// (files of contrib/synth/bert_tks.py, good and with bad records).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "workloads/bert/bert.h"

enum { L = 24, P = 4, V = 32, CAP = 64 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_bert_data.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    void *d;
    tk_err e;
    char *paths[1] = {path};
    const tk_bert_config c = {.L = L, .P = P, .vocab = V, .types = 2, .batch = CAP};
    if (tk_bert_data_open(&c, 0, 1, paths, 1, &d, &e) == 0) {
        static int32_t ids[CAP * L], len[CAP], pos[CAP * P], mid[CAP * P], nm[CAP], nsp[CAP];
        static uint8_t seg[CAP * L];
        uint64_t n = tk_bert_data_count(d);
        for (uint64_t r = 0; r < n && r < 4096; r += CAP) {
            int k = n - r < CAP ? (int)(n - r) : CAP;
            if (tk_bert_data_read(d, r, k, ids, seg, len, pos, mid, nm, nsp, &e)) {
                if (e.code != TK_EDATA) abort(); // a bad record is bad data, nothing else
                break;
            }
            for (int i = 0; i < k; i++) // what passed the checks is in range
                if (len[i] < 1 || len[i] > L || nm[i] < 0 || nm[i] > P || nsp[i] > 1) abort();
        }
        tk_bert_data_close(d);
    }
    unlink(path);
    return 0;
}
