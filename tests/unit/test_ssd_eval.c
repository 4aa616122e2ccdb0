// SSD's evaluation boxes (lib/workloads/ssd/eval.c ssd_eval_coco_box): a detection whose decoded
// width overflowed to infinity is scored as pycocotools scores the reference's row (IoU 0 with
// every ground truth, an area beyond every range: ignored when unmatched) instead of stopping the
// evaluation (and the training) with "box value -inf is out of range" (exit 3), which an SSD at
// base_lr 0.05 on the cpu hit at its first evaluation.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "coco/coco.h"
#include "ssd_nms.h"
#include "tk_test.h"
#include "workloads/ssd/workload.h"

// One 100 x 80 image (id 7) with one object of category 3 at x 20..60, y 10..50.
static const char gt_json[] = "{\"images\":[{\"id\":7,\"width\":100,\"height\":80}],"
                              "\"annotations\":[{\"id\":1,\"image_id\":7,\"category_id\":3,\"bbox\":[20,10,40,40],"
                              "\"area\":1600,\"iscrowd\":0}],\"categories\":[{\"id\":3,\"name\":\"c\"}]}";

TK_TEST(finite_boxes_as_tk_ssd_nms_coco_box) {
    const float ltrb[4] = {0.25f, 0.125f, 0.75f, 0.5f};
    double a[4], b[4];
    ssd_eval_coco_box(ltrb, 100, 80, a);
    tk_ssd_nms_coco_box(ltrb, 100, 80, b);
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(a[0] == 25 && a[1] == 10 && a[2] == 50 && a[3] == 30);
}

TK_TEST(infinite_boxes_scored_as_pycocotools) {
    // decoded: w = exp(large) overflowed, so l = -inf, r = +inf; and one with only r = +inf
    const float wide[4] = {-INFINITY, 0.125f, INFINITY, 0.5f}, right[4] = {0.25f, 0.125f, INFINITY, INFINITY};
    const float hit[4] = {0.2f, 0.125f, 0.6f, 0.625f};
    double bb[12], raw[4];
    ssd_eval_coco_box(wide, 100, 80, bb);
    ssd_eval_coco_box(right, 100, 80, bb + 4);
    ssd_eval_coco_box(hit, 100, 80, bb + 8);
    CHECK(bb[0] == -FLT_MAX && bb[2] == FLT_MAX && bb[1] == 10 && bb[3] == 30);
    CHECK(bb[4] == 25 && bb[6] == FLT_MAX && bb[7] == FLT_MAX);
    for (int k = 0; k < 12; k++) CHECK(isfinite(bb[k]));
    tk_err e = {0};
    char *buf = malloc(sizeof gt_json); // coco_gt_parse owns it
    if (buf) memcpy(buf, gt_json, sizeof gt_json);
    coco_gt *gt = NULL;
    CHECK(buf && coco_gt_parse(buf, strlen(buf), "gt", &gt, &e) == 0);
    if (!gt) return;
    // the box as tk_ssd_nms_coco_box leaves it is refused (the failure this fixes)
    tk_ssd_nms_coco_box(wide, 100, 80, raw);
    const int64_t img[3] = {7, 7, 7}, cat[3] = {3, 3, 3};
    const double score1[1] = {0.9}, score[3] = {0.9, 0.8, 0.5};
    coco_dt *dt = NULL;
    CHECK(coco_dt_from_arrays(gt, 1, img, cat, raw, score1, COCO_DT_ALLOW_EMPTY, "d", &dt, &e) == TK_EDATA);
    dt = NULL;
    // the two overflowed boxes score above the right one and still leave AP 1: pycocotools gives
    // them IoU 0 and, their areas beyond the ranges' 1e10, ignores them unmatched
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 3, img, cat, bb, score, COCO_DT_ALLOW_EMPTY, "d", &dt, &e), 0);
    coco_params p;
    coco_params_default(&p, COCO_BBOX);
    coco_result r = {0};
    CHECK_EQ_INT(coco_evaluate(gt, dt, &p, &r, &e), 0);
    CHECK_NEAR(r.stats[0], 1.0, 1e-12);
    coco_result_free(&r);
    coco_dt_free(dt);
    coco_gt_free(gt);
}
