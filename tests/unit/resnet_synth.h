// Small decoded-image data sets for ResNet's tests (lib/workloads/resnet/data.c's "decoded"
// format: "image" u8 (H, W, 3), "label" i32) with a planted, learnable class signal: each class
// has its own base colour and stripe direction and period, under uniform pixel noise. Image i has
// class i % classes. Used by the unit tests, and by the CLI tests through test_resnet's
// TK_RESNET_SYNTH=DIR mode (tests/cli/resnet.bats).
#ifndef TK_TESTS_RESNET_SYNTH_H
#define TK_TESTS_RESNET_SYNTH_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "tks/tks.h"

static void rn_synth_image(uint64_t seed, int64_t idx, int cls, int classes, int H, int W, uint8_t *px) {
    const double hue = 6.283185307179586 * cls / classes, th = 3.141592653589793 * (cls % 4) / 4;
    const double period = 3.0 + cls % 3, phase = 6.283185307179586 * tk_philox_uniform(seed, TK_RNG_SYNTH, (uint64_t)idx << 20);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            double stripe = sin(6.283185307179586 * (x * cos(th) + y * sin(th)) / period + phase) > 0 ? 25 : -25;
            for (int c = 0; c < 3; c++) {
                double noise = 200 * (tk_philox_uniform(seed, TK_RNG_SYNTH, ((uint64_t)idx << 20) + 1 +
                                                                            ((uint64_t)y * W + x) * 3 + c) - 0.5);
                double v = 128 + 30 * cos(hue + c * 2.0943951023931953) + stripe + noise;
                px[((size_t)y * W + x) * 3 + c] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

// Writes n images (records first .. first + n) of H x W to path (atomically, as every .tks).
static int rn_synth_write(const char *path, int64_t first, int64_t n, int H, int W, int classes, uint64_t seed,
                          tk_err *e) {
    tks_schema s;
    memset(&s, 0, sizeof s);
    s.nfields = 2;
    snprintf(s.f[0].name, sizeof s.f[0].name, "image");
    s.f[0].dtype = TKS_U8;
    s.f[0].ndim = 3;
    s.f[0].shape[0] = H, s.f[0].shape[1] = W, s.f[0].shape[2] = 3;
    snprintf(s.f[1].name, sizeof s.f[1].name, "label");
    s.f[1].dtype = TKS_I32;
    snprintf(s.meta_json, sizeof s.meta_json, "{\"format\": \"resnet-decoded\", \"classes\": %d}", classes);
    TRY(tks_schema_finish(&s, e));
    tks_writer *w;
    tks_writer_opts o = {.records_per_frame = 256};
    TRY(tks_writer_open(&w, path, &s, &o, e));
    enum { CHUNK = 64 }; // images made in parallel, then appended
    uint8_t *img = malloc((size_t)CHUNK * H * W * 3);
    int32_t lab[CHUNK];
    int rc = img ? 0 : tk_err_set(e, TK_EIO, "out of memory");
    for (int64_t i0 = first; !rc && i0 < first + n; i0 += CHUNK) {
        int k = (int)(first + n - i0 < CHUNK ? first + n - i0 : CHUNK);
#pragma omp parallel for schedule(static)
        for (int j = 0; j < k; j++) {
            lab[j] = (int32_t)((i0 + j) % classes);
            rn_synth_image(seed, i0 + j, lab[j], classes, H, W, img + (size_t)j * H * W * 3);
        }
        const void *cols[2] = {img, lab};
        rc = tks_writer_append(w, cols, (size_t)k, e);
    }
    free(img);
    if (rc) {
        tks_writer_abort(w);
        return rc;
    }
    return tks_writer_close(w, e);
}

#endif
