// Fuzz the optimizer section parser (lib/engine/optim_config.c): the bytes are JSON, taken as the
// optimizer object itself or, when they hold an "optimizer" member, as a whole config. Byte 0
// also picks the steps per epoch: b >> 1 for an odd byte b, else 0 ('{' gives 61, a leading
// space 0). A section the parser accepts must then pass the
// op's own checks (it does so itself and returns TK_EINTERNAL otherwise: abort on that) and give
// a finite, non-negative rate at a spread of update indices, and one reference update of a tiny
// buffer must run.
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "engine/optim_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *root = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!root) return 0;
    const json_t *obj = json_object_get(root, "optimizer") ? json_object_get(root, "optimizer") : root;
    int64_t spe = size > 0 ? data[0] % 2 * (data[0] >> 1) : 0;
    tk_opt_config cfg;
    tk_err e = {0};
    int rc = tk_opt_config_parse(obj, "fuzz.json", "optimizer", spe, &cfg, &e);
    if (rc == TK_EINTERNAL) abort();
    if (rc == 0) {
        static const int64_t at[] = {0, 1, 2, 7, 99, 1000, 123456, (int64_t)1 << 40};
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
            double lr = tk_lr_at(&cfg.lr, at[i]);
            if (!(lr >= 0) || isinf(lr)) abort();
        }
        float w[8] = {1, -2, 3, -4, 0.5f, 0, 7, 1}, g[8] = {1, 1, -1, 2, 0, 3, -2, 1}, st[16] = {0}, lr = 0.01f;
        tk_opt_seg seg[2] = {{0, 3, 0, 0}, {4, 4, TK_SEG_NO_DECAY | TK_SEG_NO_ADAPT, 0}};
        int64_t step = 1;
        if (tk_optim_step_ref(&cfg.hp, w, g, st, 8, seg, 2, &lr, &step, NULL, TK_BF16, &e)) abort();
    }
    json_decref(root);
    return 0;
}
