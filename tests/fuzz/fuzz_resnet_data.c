// Fuzz ResNet's data reader (lib/workloads/resnet/data.c): the input is a whole .tks file, opened
// as training data (schema check, labels against the classes, every record read into memory, one
// batch decoded with crops and flips) and as an eval set (center crops). Any input must give
// batches or an error (TK_EDATA, or TK_EIO when memory runs out), never a crash or a hang.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "workloads/resnet/resnet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_resnet_data.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    json_t *root = json_pack("{s:{s:[i], s:i, s:i, s:i}, s:{s:i}}", "model", "layers", 1, "width", 4, "image_size", 8,
                             "classes", 10, "data", "eval_resize", 9);
    tk_run_cfg run = {.batch = 2, .seed = 1};
    rn_config cfg;
    tk_err e;
    char *paths[1] = {path};
    if (rn_config_parse(root, "fuzz.json", &run, &cfg, &e) == 0) {
        void *r = NULL;
        if (rn_reader_open(&cfg, 0, 1, paths, 1, &r, &e) == 0) {
            uint64_t n = rn_reader_count(r);
            uint8_t img[2 * 8 * 8 * 3];
            int32_t lab[2];
            if (n >= 2) rn_reader_batch(r, 1, (int64_t)(n / 2), (void *[]){img, lab}, &e);
            rn_reader_close(r);
        }
        uint8_t *ev = NULL;
        int32_t *el = NULL;
        int64_t all, lo, hi;
        if (rn_decode_eval(&cfg, paths, 1, &all, 0, 1, &ev, &el, &lo, &hi, &e) == 0) free(ev), free(el);
        rn_config_release(&cfg);
    }
    json_decref(root);
    unlink(path);
    return 0;
}
