// Fuzz the COCO loaders and the evaluator: byte 0 picks ground truth (even) or results (odd,
// loaded against a fixed ground truth, then evaluated as bbox and segm with 2 threads).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "coco/coco.h"

static const char *GT =
    "{\"images\": [{\"id\": 1, \"height\": 40, \"width\": 30}, {\"id\": 2, \"height\": 20, \"width\": 20}],"
    " \"categories\": [{\"id\": 1}, {\"id\": 2}], \"annotations\": ["
    " {\"id\": 1, \"image_id\": 1, \"category_id\": 1, \"area\": 100, \"bbox\": [2, 2, 10, 10], \"iscrowd\": 0,"
    "  \"segmentation\": [[2, 2, 12, 2, 12, 12, 2, 12]]},"
    " {\"id\": 2, \"image_id\": 1, \"category_id\": 1, \"area\": 10, \"bbox\": [0, 0, 5, 2], \"iscrowd\": 1,"
    "  \"segmentation\": {\"size\": [40, 30], \"counts\": [0, 2, 38, 2, 38, 2, 38, 2, 38, 2, 1038]}},"
    " {\"id\": 0, \"image_id\": 2, \"category_id\": 2, \"area\": 50, \"bbox\": [1, 1, 5, 10], \"iscrowd\": 0,"
    "  \"segmentation\": {\"size\": [20, 20], \"counts\": \"e0::0000000g8\"}}]}";

static char *copy(const uint8_t *d, size_t n) {
    char *b = malloc(n + 1);
    if (n) memcpy(b, d, n);
    b[n] = 0;
    return b;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    tk_err e;
    coco_gt *gt = NULL;
    if (data[0] % 2 == 0) {
        if (!coco_gt_parse(copy(data + 1, size - 1), size - 1, "fuzz", &gt, &e)) coco_gt_free(gt);
        return 0;
    }
    if (coco_gt_parse(copy((const uint8_t *)GT, strlen(GT)), strlen(GT), "gt", &gt, &e)) abort();
    coco_dt *dt = NULL;
    int flags = (data[0] >> 1) & 3;
    if (!coco_dt_parse(gt, copy(data + 1, size - 1), size - 1, "fuzz", flags, 2, &dt, &e)) {
        for (int t = 0; t < 2; t++) {
            coco_params p;
            coco_result r;
            coco_params_default(&p, (coco_iou_type)t);
            p.n_threads = 2;
            p.use_cats = !(data[0] & 8);
            if (!coco_evaluate(gt, dt, &p, &r, &e)) {
                char text[2048];
                coco_format_summary(&r, &p, text, sizeof text);
                for (int i = 0; i < 12; i++)
                    if (!(r.stats[i] >= -1 && r.stats[i] <= 1)) abort();
                coco_result_free(&r);
            }
        }
        coco_dt_free(dt);
    }
    coco_gt_free(gt);
    return 0;
}
