// lib/coco loading and evaluation: hand-checked tiny cases, error messages with JSON paths,
// one ground truth evaluated many times, and thread-count independence.
#include <stdlib.h>

#include "coco/coco.h"
#include "tk_test.h"

static char *dup_str(const char *s) {
    size_t n = strlen(s);
    char *b = malloc(n + 1);
    memcpy(b, s, n + 1);
    return b;
}

static const char *GT =
    "{\"images\": [{\"id\": 1, \"height\": 100, \"width\": 100}, {\"id\": 2, \"height\": 50, \"width\": 80}],"
    " \"categories\": [{\"id\": 1, \"name\": \"a\"}, {\"id\": 2, \"name\": \"b\"}],"
    " \"annotations\": ["
    "  {\"id\": 1, \"image_id\": 1, \"category_id\": 1, \"area\": 400, \"bbox\": [10, 10, 20, 20], \"iscrowd\": 0,"
    "   \"segmentation\": [[10, 10, 30, 10, 30, 30, 10, 30]]},"
    "  {\"id\": 2, \"image_id\": 2, \"category_id\": 2, \"area\": 2000, \"bbox\": [0, 0, 40, 50], \"iscrowd\": 0,"
    "   \"segmentation\": [[0, 0, 40, 0, 40, 50, 0, 50]]}]}";

static coco_gt *load_gt(const char *text) {
    coco_gt *gt = NULL;
    tk_err e;
    if (coco_gt_parse(dup_str(text), strlen(text), "gt.json", &gt, &e)) {
        printf("# %s: %s\n", e.where, e.what);
        return NULL;
    }
    return gt;
}

static int load_dt(coco_gt *gt, const char *text, int flags, coco_dt **dt, tk_err *e) {
    return coco_dt_parse(gt, dup_str(text), strlen(text), "dt.json", flags, 0, dt, e);
}

TK_TEST(perfect_detections_score_one) {
    coco_gt *gt = load_gt(GT);
    CHECK(gt != NULL);
    if (!gt) return;
    CHECK_EQ_INT(coco_gt_num_images(gt), 2);
    coco_dt *dt;
    tk_err e;
    CHECK_EQ_INT(load_dt(gt, "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [10, 10, 20, 20], \"score\": 0.9},"
                             " {\"image_id\": 2, \"category_id\": 2, \"bbox\": [0, 0, 40, 50], \"score\": 0.8}]",
                         0, &dt, &e), 0);
    coco_params p;
    coco_result r;
    for (int t = 0; t < 2; t++) { // the same GT, evaluated as boxes and as masks
        coco_params_default(&p, t ? COCO_SEGM : COCO_BBOX);
        CHECK_EQ_INT(coco_evaluate(gt, dt, &p, &r, &e), 0);
        // pycocotools' values: precision 1/(1+eps) below 1, recall exactly 1
        CHECK(r.stats[0] == 0.9999999999999998 && r.stats[1] == 0.9999999999999999);
        CHECK(r.stats[8] == 1.0);
        CHECK(r.stats[3] == 0.9999999999999998); // area 400 is small, 2000 medium
        CHECK(r.stats[5] == -1.0);               // no large objects: -1
        CHECK_EQ_INT(r.K, 2);
        CHECK(r.ap[0] == 0.9999999999999998 && r.ap[1] == 0.9999999999999998);
        char text[2048];
        coco_format_summary(&r, &p, text, sizeof text);
        CHECK(strstr(text, " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000\n") == text);
        CHECK(strstr(text, " Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000\n") != NULL);
        coco_result_free(&r);
    }
    coco_dt_free(dt);
    coco_gt_free(gt);
}

TK_TEST(half_overlap_and_false_positive) {
    coco_gt *gt = load_gt(GT);
    if (!gt) return;
    coco_dt *dt;
    tk_err e;
    // image 1: a box shifted by half (IoU 1/3) scored above an exact one; image 2: nothing
    CHECK_EQ_INT(load_dt(gt, "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [20, 10, 20, 20], \"score\": 0.9},"
                             " {\"image_id\": 1, \"category_id\": 1, \"bbox\": [10, 10, 20, 20], \"score\": 0.5}]",
                         0, &dt, &e), 0);
    coco_params p;
    coco_params_default(&p, COCO_BBOX);
    coco_result r;
    CHECK_EQ_INT(coco_evaluate(gt, dt, &p, &r, &e), 0);
    // category 1: precision 1/2 at every recall for every threshold -> AP 0.5 (interpolated
    // precision at recall 0..1 is 0.5); category 2 has GT and no detections -> AP 0
    CHECK(r.ap[0] == 0.5);
    CHECK(r.ap[1] == 0.0);
    CHECK(r.stats[0] == 0.25);
    CHECK(r.stats[6] == 0.0); // maxDets 1 keeps only the shifted box: recall 0
    CHECK(r.stats[7] == 0.5);
    CHECK(r.stats[9] == 1.0 && r.stats[10] == 0.0 && r.stats[11] == -1.0); // as pycocotools
    coco_result_free(&r);
    coco_dt_free(dt);
    coco_gt_free(gt);
}

static unsigned lcg(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return *s >> 8;
}

TK_TEST(results_are_independent_of_threads) {
    // 40 images with random boxes, evaluated with 1, 2 and 7 threads: identical bits
    char *gt_text = malloc(1 << 20), *dt_text = malloc(1 << 21);
    size_t g = 0, d = 0;
    unsigned s = 12345;
#define RND() lcg(&s)
    g += (size_t)sprintf(gt_text + g, "{\"categories\": [{\"id\": 1}, {\"id\": 2}, {\"id\": 3}], \"images\": [");
    for (int i = 0; i < 40; i++) g += (size_t)sprintf(gt_text + g, "%s{\"id\": %d, \"height\": 200, \"width\": 200}", i ? "," : "", i);
    g += (size_t)sprintf(gt_text + g, "], \"annotations\": [");
    d += (size_t)sprintf(dt_text + d, "[");
    int aid = 1;
    for (int i = 0; i < 40; i++)
        for (int j = 0; j < 6; j++) {
            double x = RND() % 150, y = RND() % 150, w = 5 + RND() % 45, h = 5 + RND() % 45;
            g += (size_t)sprintf(gt_text + g, "%s{\"id\": %d, \"image_id\": %d, \"category_id\": %u, \"area\": %g,"
                                 " \"bbox\": [%g, %g, %g, %g], \"iscrowd\": %d}", aid > 1 ? "," : "", aid,
                                 i, 1 + RND() % 3, w * h, x, y, w, h, RND() % 20 == 0);
            aid++;
            for (int k = 0; k < 3; k++)
                d += (size_t)sprintf(dt_text + d, "%s{\"image_id\": %d, \"category_id\": %u, \"score\": %.1f,"
                                     " \"bbox\": [%g, %g, %g, %g]}", d > 1 ? "," : "", i, 1 + RND() % 3,
                                     (RND() % 10) / 10.0, x + (double)(RND() % 9) - 4, y + (double)(RND() % 9) - 4, w, h);
        }
    g += (size_t)sprintf(gt_text + g, "]}");
    d += (size_t)sprintf(dt_text + d, "]");
    coco_gt *gt = load_gt(gt_text);
    CHECK(gt != NULL);
    coco_dt *dt = NULL;
    tk_err e;
    CHECK_EQ_INT(load_dt(gt, dt_text, 0, &dt, &e), 0);
    double ref[12];
    for (int th = 1; th <= 7 && dt; th += 3) {
        coco_params p;
        coco_params_default(&p, COCO_BBOX);
        p.n_threads = th;
        coco_result r;
        CHECK_EQ_INT(coco_evaluate(gt, dt, &p, &r, &e), 0);
        if (th == 1) memcpy(ref, r.stats, sizeof ref);
        else CHECK(memcmp(ref, r.stats, sizeof ref) == 0);
        CHECK(r.stats[0] > 0 && r.stats[0] < 1);
        coco_result_free(&r);
    }
    coco_dt_free(dt);
    coco_gt_free(gt);
    free(gt_text);
    free(dt_text);
}

static void expect_gt_error(int *tk_failed_, const char *text, const char *where, const char *what) {
    coco_gt *gt = NULL;
    tk_err e = {0};
    CHECK_EQ_INT(coco_gt_parse(dup_str(text), strlen(text), "gt.json", &gt, &e), TK_EDATA);
    CHECK_STR(e.where, where);
    CHECK_STR(e.what, what);
    coco_gt_free(gt);
}

TK_TEST(bad_ground_truth_names_the_json_path) {
    expect_gt_error(tk_failed_, "{\"images\": [{\"id\": 1}], \"categories\": [], \"annotations\": [{\"id\": 1, \"image_id\": 1, "
                    "\"category_id\": 1, \"area\": 4, \"bbox\": [1, 2, -3, 4]}]}",
                    "gt.json: line 1: $.annotations[0].bbox[2]", "negative box width -3");
    expect_gt_error(tk_failed_, "{\"images\": [{\"id\": 1}],\n \"categories\": [], \"annotations\": [{\"id\": 1, \"image_id\": 1, "
                    "\"category_id\": 1, \"area\": 4, \"bbox\": [1, 2, 3, 4], \"segmentation\": [[1, 2, 3, 4]]}]}",
                    "gt.json: line 2: $.annotations[0].segmentation[0]", "a polygon needs at least 3 points, got 4 numbers");
    expect_gt_error(tk_failed_, "{\"images\": [{\"id\": \"x\"}]}", "gt.json: line 1: $.images[0].id",
                    "expected an integer, got a string");
    expect_gt_error(tk_failed_, "{\"images\": [{\"id\": 1, \"height\": NaN}]}", "gt.json: line 1: $.images[0].height",
                    "NaN and Infinity are not JSON numbers");
    expect_gt_error(tk_failed_, "{\"images\": [], \"categories\": [{\"id\": 1, \"name\": \"\xff\"}]}",
                    "gt.json: line 1: $.categories[0].name", "invalid UTF-8 in a string (byte 0xff)");
    expect_gt_error(tk_failed_, "{\"images\": [], \"categories\": [], \"annotations\": [{\"id\": 1, \"image_id\": 1, "
                    "\"category_id\": 1, \"area\": 1e999, \"bbox\": [1, 2, 3, 4]}]}",
                    "gt.json: line 1: $.annotations[0].area", "number 1e999 is out of range");
    expect_gt_error(tk_failed_, "{\"images\": [], \"categories\": [], \"annotations\": [{\"id\": 1, \"image_id\": 1, "
                    "\"category_id\": 1, \"area\": 1, \"bbox\": [1, 2, 3, 4], \"iscrowd\": 1, "
                    "\"segmentation\": {\"size\": [2, 2], \"counts\": [1, 5]}}]}",
                    "gt.json: line 1: $.annotations[0]", "segmentation: RLE counts sum to 6 pixels, the mask has 2x2 = 4");
    expect_gt_error(tk_failed_, "{\"images\": [], \"categories\": [] ", "gt.json: line 1: $",
                    "expected ',' or '}' in an object");
    expect_gt_error(tk_failed_, "[1, 2]", "gt.json: line 1: $", "expected an object, got an array");
}

TK_TEST(bad_results_and_workarounds) {
    coco_gt *gt = load_gt(GT);
    if (!gt) return;
    coco_dt *dt = NULL;
    tk_err e;
    CHECK_EQ_INT(load_dt(gt, "[]", 0, &dt, &e), TK_EDATA);
    CHECK_STR(e.what, "the result list is empty");
    CHECK_EQ_INT(load_dt(gt, "[]", COCO_DT_ALLOW_EMPTY, &dt, &e), 0);
    coco_params p;
    coco_params_default(&p, COCO_BBOX);
    coco_result r;
    CHECK_EQ_INT(coco_evaluate(gt, dt, &p, &r, &e), 0);
    CHECK(r.stats[0] == 0 && r.stats[3] == 0 && r.stats[5] == -1);
    coco_result_free(&r);
    coco_dt_free(dt);
    const char *unk = "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [10, 10, 20, 20], \"score\": 0.9},"
                      " {\"image_id\": 7, \"category_id\": 1, \"bbox\": [1, 1, 2, 2], \"score\": 0.5}]";
    CHECK_EQ_INT(load_dt(gt, unk, 0, &dt, &e), TK_EDATA);
    CHECK_STR(e.where, "dt.json: line 1: $[1]");
    CHECK_STR(e.what, "image id 7 is not in the ground truth's images");
    CHECK_EQ_INT(load_dt(gt, unk, COCO_DT_DROP_UNKNOWN, &dt, &e), 0);
    CHECK_EQ_INT(coco_dt_num(dt), 1);
    CHECK_EQ_INT(coco_dt_num_dropped(dt), 1);
    coco_dt_free(dt);
    CHECK_EQ_INT(load_dt(gt, "[{\"image_id\": 1, \"category_id\": 1, \"score\": 0.9, \"segmentation\": "
                             "{\"size\": [100, 100], \"counts\": \"0PPPPPPPPPPPPPP\"}}]", 0, &dt, &e), TK_EDATA);
    CHECK_STR(e.where, "dt.json: $[0].segmentation");
    CHECK_EQ_INT(load_dt(gt, "[{\"image_id\": 1, \"category_id\": 1, \"score\": 0.9, \"segmentation\": "
                             "{\"size\": [100, 100], \"counts\": \"0\"}}]", 0, &dt, &e), TK_EDATA);
    CHECK_STR(e.what, "segmentation: RLE counts sum to 0 pixels, the mask has 100x100 = 10000");
    CHECK_EQ_INT(load_dt(gt, "[{\"image_id\": 1, \"category_id\": 1, \"score\": 0.9}]", 0, &dt, &e), TK_EDATA);
    CHECK_EQ_INT(load_dt(gt, "[{\"image_id\": 1, \"category_id\": 1, \"bbox\": [1, 1, 2, 2]}]", 0, &dt, &e), TK_EDATA);
    CHECK_STR(e.what, "a result needs \"score\"");
    coco_gt_free(gt);
}

TK_TEST(duplicate_annotation_ids_are_refused) {
    expect_gt_error(tk_failed_, "{\"images\": [{\"id\": 1}], \"categories\": [{\"id\": 1}], \"annotations\": ["
                    "{\"id\": 5, \"image_id\": 1, \"category_id\": 1, \"area\": 4, \"bbox\": [1, 2, 3, 4]},"
                    "{\"id\": 5, \"image_id\": 1, \"category_id\": 1, \"area\": 4, \"bbox\": [1, 2, 3, 4]}]}",
                    "gt.json: $.annotations[1].id", "annotation id 5 is used twice");
}
