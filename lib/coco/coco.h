// COCO detection evaluation (bbox and segm) with pycocotools' exact semantics: load the ground
// truth once, load and evaluate any number of result sets. Multithreaded with OpenMP; the
// results do not depend on the number of threads (every reduction has a fixed order).
//
//   coco_gt *gt; coco_dt *dt; coco_params p; coco_result r; tk_err e;
//   coco_gt_load("instances_val2017.json", &gt, &e);
//   coco_dt_load(gt, "results.json", 0, 0, &dt, &e);
//   coco_params_default(&p, COCO_SEGM);
//   coco_evaluate(gt, dt, &p, &r, &e);      // r.stats[0] is AP@[.50:.95]
//
// Semantics that differ from pycocotools, all where pycocotools crashes or hangs: an empty
// result list and results for unknown images are errors (TK_EDATA) unless the load flags allow
// them; duplicate ground-truth annotation ids are an error (pycocotools silently evaluates the
// last one twice); results may carry polygons or uncompressed RLE (pycocotools' loadRes
// crashes on those); a missing "iscrowd" reads as 0.
#ifndef TK_COCO_H
#define TK_COCO_H

#include <stddef.h>
#include <stdint.h>

#include "coco/rle.h"
#include "core/err.h"

typedef struct coco_gt coco_gt;
typedef struct coco_dt coco_dt;

typedef enum { COCO_BBOX = 0, COCO_SEGM = 1 } coco_iou_type;

#define COCO_MAX_MAXDETS 16

typedef struct coco_params {
    coco_iou_type iou_type;
    int use_cats;              // 1: per category (default); 0: categories pooled
    const int64_t *img_ids;    // NULL: every image of the ground truth
    size_t n_img_ids;
    const int64_t *cat_ids;    // NULL: every category of the ground truth
    size_t n_cat_ids;
    int max_dets[COCO_MAX_MAXDETS]; // sorted before use; default 1, 10, 100
    int n_max_dets;
    double area_rng[4][2];     // "all", "small", "medium", "large"; inclusive at both ends
    int n_threads;             // 0: OpenMP's default
} coco_params;

void coco_params_default(coco_params *p, coco_iou_type t);

typedef struct coco_result {
    double stats[12];          // pycocotools' COCOeval.stats
    int T, R, K, A, M;         // 10 IoU thresholds, 101 recall thresholds, categories, areas, maxDets
    double *precision;         // [T][R][K][A][M], -1 where no ground truth qualifies
    double *recall;            // [T][K][A][M]
    int64_t *cat_ids;          // [K] the evaluated category ids (-1 when use_cats is 0)
    double *ap, *ap50;         // [K] per category: mean precision over IoU .50:.95 / at .50,
                               // area all, last maxDets (detectron2's way); -1 without GT
    int max_dets[COCO_MAX_MAXDETS];
    double iou_thrs[10], rec_thrs[101];
} coco_result;

// Loading. Files are read whole; path "-" is standard input. Errors name the file, the line
// and the JSON path ("gt.json: line 7: $.annotations[3].bbox: ...") and use TK_EDATA.
int coco_gt_load(const char *path, coco_gt **out, tk_err *e);
// Same from memory: buf holds len bytes plus a NUL at buf[len]; ownership passes to the
// result (freed on failure too). name is used in messages.
int coco_gt_parse(char *buf, size_t len, const char *name, coco_gt **out, tk_err *e);
void coco_gt_free(coco_gt *gt);
size_t coco_gt_num_images(const coco_gt *gt);
size_t coco_gt_num_annotations(const coco_gt *gt);
// Name of a category id, or NULL (not NUL-terminated: *len gets its length).
const char *coco_gt_cat_name(const coco_gt *gt, int64_t cat_id, size_t *len);

enum {
    COCO_DT_ALLOW_EMPTY = 1,   // an empty result list evaluates as no detections
    COCO_DT_DROP_UNKNOWN = 2,  // results for images absent from the ground truth are dropped
};
int coco_dt_load(const coco_gt *gt, const char *path, int flags, int n_threads, coco_dt **out,
                 tk_err *e);
int coco_dt_parse(const coco_gt *gt, char *buf, size_t len, const char *name, int flags,
                  int n_threads, coco_dt **out, tk_err *e);
// Results given as arrays, for evaluation in process (no JSON written or read): result i is image
// img_id[i], category cat_id[i], box bbox[4i .. 4i+3] = x, y, width, height, score[i]. The result
// is the coco_dt that coco_dt_parse makes of the JSON list [{"image_id": .., "category_id": ..,
// "bbox": [x, y, w, h], "score": ..}, ...] holding the same numbers in the same order (pycocotools'
// loadRes, box branch: area = w h, iscrowd 0; the order decides between equal scores): so the
// metrics equal coco-eval's on that file bit for bit, when the file's numbers read back as these
// doubles (written with %.17g, or Python's repr as json.dump does; a float32 printed with %.9g
// is a different double). MLPerf's SSD reference evaluates this way too: loadRes(np.array(rows))
// of float64 rows [image, x, y, w, h, score, category]. The checks and flags are
// coco_dt_parse's but for a box value's magnitude (any finite one is taken, as pycocotools takes it; JSON's
// reader refuses beyond 1e15); non-finite values (which JSON cannot hold) are refused. Errors are
// TK_EDATA naming "name[i]".
int coco_dt_from_arrays(const coco_gt *gt, size_t n, const int64_t *img_id, const int64_t *cat_id, const double *bbox,
                        const double *score, int flags, const char *name, coco_dt **out, tk_err *e);
void coco_dt_free(coco_dt *dt);
size_t coco_dt_num(const coco_dt *dt);
size_t coco_dt_num_dropped(const coco_dt *dt);

// Evaluate (pycocotools' evaluate + accumulate + summarize). gt is not const: the masks of the
// ground truth are rasterized on the first segm evaluation and kept (thread-safe).
int coco_evaluate(coco_gt *gt, const coco_dt *dt, const coco_params *p, coco_result *out,
                  tk_err *e);
void coco_result_free(coco_result *r);

// pycocotools' summarize() text: 12 lines, each ending in '\n'. Returns the length written
// (the text is truncated to n-1 bytes when longer, like snprintf).
size_t coco_format_summary(const coco_result *r, const coco_params *p, char *buf, size_t n);

// numpy's pairwise summation (what np.sum and np.mean use for float64), for exact parity.
double coco_np_sum(const double *a, size_t n);
// numpy.linspace(start, stop, num) element i, computed the way numpy does.
double coco_linspace(double start, double stop, int num, int i);

#endif
