// Results from arrays (coco.h coco_dt_from_arrays): the box branch of load.c's result parsing,
// fed by the caller's numbers instead of a JSON list, so an evaluation loop hands its detections
// over without writing a file. Every field gets what coco_dt_parse gives the same result read
// from JSON: the image and category as indices (an unknown category as -1), the area w h, no
// segmentation, the file index i (messages only), and the has_bbox_branch of a box result list.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coco/coco_int.h"

// read_bbox's checks (load.c) on a value that came from an array, but for its magnitude: any
// finite value (pycocotools takes any; a detector that is not trained yet decodes boxes of 1e16
// pixels and more, and its evaluation must score them, not stop the training: load.c's bound of
// 1e15 guards what a JSON file may claim)
static int check_box(const double bb[4], const char *name, size_t i, tk_err *e) {
    for (int k = 0; k < 4; k++) {
        if (!isfinite(bb[k]))
            tk_err_set(e, TK_EDATA, "box value %g is out of range", bb[k]);
        else if (k >= 2 && bb[k] < 0)
            tk_err_set(e, TK_EDATA, "negative box %s %g", k == 2 ? "width" : "height", bb[k]);
        else
            continue;
        tk_err_where(e, "%s[%zu].bbox", name, i);
        return TK_EDATA;
    }
    return 0;
}

int coco_dt_from_arrays(const coco_gt *gt, size_t n, const int64_t *img_id, const int64_t *cat_id, const double *bbox,
                        const double *score, int flags, const char *name, coco_dt **out, tk_err *e) {
    if (n > UINT32_MAX) return tk_err_set(e, TK_EDATA, "%s: %zu results (at most %u)", name, n, UINT32_MAX);
    coco_dt *dt = calloc(1, sizeof *dt);
    if (!dt) return tk_err_errno(e, ENOMEM, "%s", name);
    snprintf(dt->name, sizeof dt->name, "%s", name);
    dt->gt = gt;
    dt->has_bbox_branch = 1;
    int rc = 0;
    if (n) {
        dt->anns = calloc(n, sizeof *dt->anns);
        dt->owned = calloc(n, sizeof *dt->owned);
        dt->rbb = calloc(n * 4, sizeof *dt->rbb);
        if (!dt->anns || !dt->owned || !dt->rbb) rc = tk_err_errno(e, ENOMEM, "%s", name);
    }
    for (size_t i = 0; i < n && !rc; i++) {
        if ((rc = check_box(bbox + 4 * i, name, i, e))) break;
        if (!isfinite(score[i])) {
            tk_err_set(e, TK_EDATA, "score %g is not a number JSON can hold", score[i]);
            tk_err_where(e, "%s[%zu].score", name, i);
            rc = TK_EDATA;
            break;
        }
        int32_t ii = coco_map_get(&gt->img_map, img_id[i]);
        if (ii < 0 || !gt->img_declared[ii]) {
            if (flags & COCO_DT_DROP_UNKNOWN) {
                dt->dropped++;
                continue;
            }
            tk_err_set(e, TK_EDATA, "image id %lld is not in the ground truth's images", (long long)img_id[i]);
            tk_err_where(e, "%s[%zu]", name, i);
            tk_err_hint(e, "pycocotools stops here too; drop such results (COCO_DT_DROP_UNKNOWN)");
            rc = TK_EDATA;
            break;
        }
        coco_dt_ann *a = &dt->anns[dt->nanns++];
        a->img = ii;
        a->cat = coco_map_get(&gt->cat_map, cat_id[i]);
        a->score = score[i];
        memcpy(a->bbox, bbox + 4 * i, sizeof a->bbox);
        a->area = a->bbox[2] * a->bbox[3];
        a->seg.kind = SEG_NONE;
        a->file_idx = (uint32_t)i;
    }
    if (!rc) rc = coco_dt_check_empty(dt, flags, "COCO_DT_ALLOW_EMPTY", e);
    if (!rc) rc = coco_dt_index(dt, e);
    if (rc) {
        coco_dt_free(dt);
        return rc;
    }
    *out = dt;
    return 0;
}
