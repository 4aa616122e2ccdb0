// Fuzz the reader of NVIDIA's BERT HDF5 files: the input is a whole file. Any input must give
// records that keep the record rules or a TK_EDATA error, never a crash, a hang or a blow-up of
// memory. libhdf5 1.10 crashes on crafted files: it runs in a child process with limits
// (core/sandbox.h), so its crashes, loops and leaks stay there and come back as TK_EDATA. The
// reader's limits are lowered here (0.25 s of CPU, 256 MiB; at most 10.75 s of waiting) so an input
// that makes libhdf5 spin costs little, ends well inside a -timeout of 30 s, and the corpus replay
// of `make check` stays quick. (Without libhdf5 the reader always refuses; the target then tests
// that.)
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bert/hdf5.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setenv("TK_HDF5_CPU_SECONDS", "0.25", 0); // here, not in LLVMFuzzerInitialize: the replay runs it too
    setenv("TK_HDF5_MEMORY_MIB", "256", 0);
    char path[] = "/tmp/fuzz_bert_hdf5.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    ssize_t w = write(fd, data, size);
    close(fd);
    bert_h5 *h;
    tk_err e;
    bert_records b;
    if (w == (ssize_t)size && bert_records_init(&b, 64, 12, 32, &e) == 0) {
        if (bert_h5_open(&h, path, &e) == 0) {
            uint64_t n = bert_h5_count(h);
            for (uint64_t k = 0; k < n && k < 4096; k += 32) {
                size_t m = n - k < 32 ? (size_t)(n - k) : 32;
                if (bert_h5_read(h, k, m, &b, 1000, &e)) {
                    if (e.code != TK_EDATA && e.code != TK_EIO) abort();
                    break;
                }
                for (size_t i = 0; i < m; i++)
                    if (b.seq_len[i] > 64 || b.num_masked[i] > 12 || bert_records_check(&b, i, 1000, &e)) abort();
            }
            bert_h5_close(h);
        } else if (e.code != TK_EDATA && e.code != TK_EIO && !(e.code == TK_EUSAGE && !bert_h5_available())) {
            abort();
        }
        bert_records_free(&b);
    }
    unlink(path);
    return 0;
}
