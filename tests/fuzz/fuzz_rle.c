// Fuzz the RLE decoder and friends: bytes 0-1 give the mask size (h, w in 1..64), the rest is a
// compressed RLE string. A string that decodes to a whole mask goes through area, toBbox,
// decode/encode, string round trip, merge and IoU; the bytes are also rasterized as a polygon.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coco/rle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    uint32_t h = data[0] % 64 + 1, w = data[1] % 64 + 1;
    const char *s = (const char *)data + 2;
    size_t n = size - 2;
    tk_err e;
    coco_rle r;
    double bb[4];
    if (!coco_rle_fr_string(s, n, h, w, &r, &e)) {
        uint32_t area;
        uint64_t tot;
        double bb2[4];
        if (coco_rle_string_stats(s, n, h, w, &area, &tot, bb2, &e)) abort();
        coco_rle_to_bbox(&r, bb);
        if (area != coco_rle_area(&r) || tot != coco_rle_total(&r) || memcmp(bb, bb2, sizeof bb)) abort();
        if (tot == (uint64_t)h * w) {
            uint8_t *m = malloc((size_t)h * w);
            coco_rle_decode(&r, m);
            coco_rle back, u;
            if (coco_rle_encode(m, h, w, &back, &e)) abort();
            if (coco_rle_area(&back) != area) abort();
            char *str = coco_rle_to_string(&back);
            coco_rle again;
            if (!str || coco_rle_fr_string(str, strlen(str), h, w, &again, &e)) abort();
            if (again.m != back.m || (back.m && memcmp(again.cnts, back.cnts, back.m * 4))) abort();
            coco_rle pair[2] = {r, back};
            if (!coco_rle_merge(pair, 2, data[0] & 1, &u, &e)) coco_rle_free(&u);
            double o;
            uint8_t crowd = data[1] & 1;
            coco_rle_iou(&r, 1, &back, 1, &crowd, &o); // zero-length runs may skew r's box (as in maskApi)
            coco_rle_iou(&back, 1, &back, 1, &crowd, &o);
            if (area && o != 1) abort();
            free(str);
            free(m);
            coco_rle_free(&back);
            coco_rle_free(&again);
        }
        coco_rle_free(&r);
    }
    // the same bytes as a polygon of signed coordinates around the image
    size_t k = n / 2;
    if (k >= 1) {
        double *xy = malloc(2 * k * sizeof *xy);
        for (size_t i = 0; i < 2 * k; i++) xy[i] = (double)(int8_t)data[2 + i] * 1.37;
        if (!coco_rle_fr_poly(xy, k, h, w, &r, &e)) {
            if (coco_rle_total(&r) != (uint64_t)h * w) abort();
            coco_rle_to_bbox(&r, bb);
            coco_rle_free(&r);
        }
        free(xy);
    }
    return 0;
}
