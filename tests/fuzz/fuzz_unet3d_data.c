// Fuzz 3D U-Net's data reader (lib/workloads/unet3d/data.c): the input is a whole .tks file,
// opened as training data (every record checked, the cases and their foreground components read
// into memory, batches cropped, flipped, scaled and noised) and as the eval cases of two ranks.
// Any input must give samples of the cases' voxels or an error (TK_EDATA, or TK_EIO when memory
// runs out), never a crash or a hang.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz_file.h"
#include "workloads/unet3d/unet3d.h"

static void labels_ok(const uint8_t *lab, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (lab[i] > 2) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/fuzz_unet3d_data.XXXXXX";
    if (fuzz_write_file(path, data, size)) return 0;
    tk_err e;
    u3_config cfg = {.batch = 2, .b = 2, .seed = 1};
    if (u3_data_cfg_parse(NULL, "fuzz.json", &cfg.data, &e)) abort();
    cfg.data.crop[0] = cfg.data.crop[1] = cfg.data.crop[2] = 4;
    cfg.data.oversampling = cfg.data.brightness_prob = cfg.data.noise_prob = 0.5;
    char *paths[1] = {path};
    void *r = NULL;
    if (u3_data_open(&cfg, 0, 1, paths, 1, &r, &e) == 0) {
        uint64_t n = u3_data_count(r);
        float img[2 * 64];
        uint8_t lab[2 * 64];
        for (int64_t s = 0; n >= 2 && s < 4; s++) {
            if (u3_data_batch(r, s, (int64_t)(n / 2), (void *[]){img, lab}, &e)) abort();
            labels_ok(lab, sizeof lab);
        }
        u3_data_close(r);
    } else if (e.code != TK_EDATA && e.code != TK_EIO) {
        abort();
    }
    for (int rank = 0; rank < 2; rank++) {
        u3_cases cs;
        if (u3_cases_load(paths, 1, rank, 2, &cs, &e) == 0) {
            for (int i = 0; i < cs.n; i++)
                labels_ok(cs.c[i].label, (size_t)(cs.c[i].shape[0] * cs.c[i].shape[1] * cs.c[i].shape[2]));
            u3_cases_free(&cs);
        } else if (e.code != TK_EDATA && e.code != TK_EIO) {
            abort();
        }
    }
    unlink(path);
    return 0;
}
