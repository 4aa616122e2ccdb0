// Fuzz the image decode wrappers: the input is one file's bytes, read as a JPEG (header, a full
// decode at 1/8 and full scale, a region, and the whole training transform) and as a PNG. Any
// input must decode or give an error, never crash, hang, read out of bounds or allocate without
// bound (the size limits are checked before any image buffer exists).
#include <stdint.h>
#include <stdlib.h>

#include "image/codec.h"
#include "image/image.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tk_jpeg_info info;
    tk_err e;
    if (tk_jpeg_info_read(data, size, &info, &e) == 0 && (uint64_t)info.width * info.height <= (1u << 22)) {
        for (int num = 1; num <= 8; num *= 8) {
            int w = tk_jpeg_scaled(info.width, num), h = tk_jpeg_scaled(info.height, num);
            uint8_t *px = malloc((size_t)w * h * 3);
            tk_jpeg_stats st;
            if (px) tk_jpeg_decode(data, size, num, 0, 0, w, h, px, (size_t)w * 3, &st, &e);
            if (px && w > 2 && h > 2) tk_jpeg_decode(data, size, num, w / 3, h / 2, w / 2, h - h / 2, px, (size_t)w * 3, NULL, &e);
            free(px);
        }
        tk_img_transform t;
        tk_img_transform_default(&t, TK_IMG_TRAIN);
        t.out_w = t.out_h = 16;
        tk_img_scratch s = {0};
        float out[16 * 16 * 3];
        tk_img_decode_one(&t, data, size, 3, &s, out, NULL, NULL, &e);
        tk_img_scratch_free(&s);
    }
    uint8_t *px = NULL;
    int w, h;
    if (tk_png_decode(data, size, &px, &w, &h, &e) == 0 && (w < 1 || h < 1)) abort();
    free(px);
    return 0;
}
