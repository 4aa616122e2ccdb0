// Fuzz SSD's data reader (lib/workloads/ssd/data.c): the input is a whole .tks file, loaded as COCO
// records (schema check, every record's boxes, labels and size checked), then a training batch
// (the random IoU crop, flip, resize, colour jitter) and the eval batches of every record decoded
// at 8 x 8. Any input must give batches or an error (TK_EDATA naming the file and record, TK_EIO
// when memory runs out), never a crash, a hang or a read outside the records' bytes.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "workloads/ssd/data.h"

enum { S = 8, M = 8, B = 2 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_ssd_data.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    tk_err e;
    ssd_dataset *d = NULL;
    char *paths[1] = {path};
    if (ssd_dataset_load(paths, 1, &d, &e) == 0) {
        static float image[B * S * S * 3], boxes[B * M * 4];
        static int32_t labels[B * M], nbox[B], hw[B * 2];
        static int64_t ids[B];
        ssd_batch out = {image, boxes, labels, nbox, ids, hw, NULL, NULL};
        ssd_data_opts o;
        ssd_data_opts_default(&o);
        o.seed = 1, o.size = S, o.max_boxes = M, o.batch = B, o.threads = 2;
        const int64_t n = ssd_dataset_count(d);
        ssd_reader *r;
        if (n >= B && ssd_reader_open(&o, d, 0, 1, &r, &e) == 0) {
            ssd_reader_batch(r, 1, n / B, &out, &e);
            ssd_reader_close(r);
        }
        for (int64_t k = 0; k < n && k < 64; k += B) {
            int m = n - k < B ? (int)(n - k) : B;
            if (ssd_eval_batch(d, &o, k, m, &out, &e) == 0)
                for (int i = 0; i < m; i++)
                    if (nbox[i] < 0 || nbox[i] > M) abort();
        }
        ssd_dataset_free(d);
    }
    unlink(path);
    return 0;
}
