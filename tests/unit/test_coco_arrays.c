// lib/coco's results from arrays (coco_dt_from_arrays, evaluation in process): the metrics equal
// those of the same results read from JSON (coco_dt_load, what coco-eval runs) bit for bit, stats,
// precision and recall, on every case of the shared COCO oracle ($TK_SHARED/coco/cases: the
// result files parsed here into arrays), and equal pycocotools' recorded stats there; the same
// for SSD-style detections (float32 ltrb scaled to pixels the reference's way) written as JSON
// with %.17g; the checks and flags of the JSON path.
#include <dirent.h>
#include <errno.h>
#include <stdint.h>

#include "coco/coco.h"
#include "coco/jscan.h"
#include "core/philox.h"
#include "ssd_nms.h"
#include "tk_test.h"

typedef struct {
    size_t n, cap;
    int64_t *img, *cat;
    double *bbox, *score;
} dets;

static void dets_free(dets *d) { free(d->img), free(d->cat), free(d->bbox), free(d->score); }

static int dets_push(dets *d, int64_t img, int64_t cat, const double bb[4], double score) {
    if (d->n == d->cap) {
        size_t c = d->cap ? 2 * d->cap : 64;
        int64_t *i = realloc(d->img, c * sizeof *i), *k = i ? realloc(d->cat, c * sizeof *k) : NULL;
        if (i) d->img = i;
        if (k) d->cat = k;
        double *b = k ? realloc(d->bbox, 4 * c * sizeof *b) : NULL, *s = b ? realloc(d->score, c * sizeof *s) : NULL;
        if (b) d->bbox = b;
        if (s) d->score = s;
        if (!s) return -1;
        d->cap = c;
    }
    d->img[d->n] = img, d->cat[d->n] = cat, d->score[d->n] = score;
    memcpy(d->bbox + 4 * d->n, bb, 4 * sizeof *bb);
    d->n++;
    return 0;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (b && fread(b, 1, (size_t)n, f) != (size_t)n) free(b), b = NULL;
    fclose(f);
    if (b) b[n] = 0, *len = (size_t)n;
    return b;
}

// path read whole, s set to parse it: the buffer to free (NULL when unreadable).
static char *open_json(const char *path, jscan *s, tk_err *e) {
    size_t len;
    char *buf = slurp(path, &len);
    if (buf) js_init(s, buf, len, path, e);
    return buf;
}

// A results file's boxes as arrays (results without a box are skipped: the case is not a box one).
static int read_results(const char *path, dets *d) {
    tk_err e;
    jscan s;
    char *buf = open_json(path, &s, &e);
    if (!buf) return -1;
    int rc = js_arr_begin(&s);
    while (!rc && (rc = js_arr_next(&s)) == 1) {
        int64_t img = 0, cat = 0;
        double bb[4] = {0}, score = 0;
        int nb = 0;
        const char *k;
        size_t kl;
        rc = js_obj_begin(&s);
        while (!rc && (rc = js_obj_next(&s, &k, &kl)) == 1) {
            if (js_key_is(k, kl, "image_id")) rc = js_int64(&s, &img);
            else if (js_key_is(k, kl, "category_id")) rc = js_int64(&s, &cat);
            else if (js_key_is(k, kl, "score")) rc = js_number(&s, &score);
            else if (js_key_is(k, kl, "bbox")) {
                rc = js_arr_begin(&s);
                while (!rc && (rc = js_arr_next(&s)) == 1) rc = nb < 4 ? js_number(&s, &bb[nb++]) : -1;
                rc = rc < 0 ? -1 : rc;
            } else rc = js_skip(&s);
        }
        if (rc < 0) break;
        rc = nb == 4 ? dets_push(d, img, cat, bb, score) : 0;
    }
    free(buf);
    return rc < 0 ? -1 : rc;
}

// pycocotools' bbox stats recorded in expected.json (the plain run's, or for the error cases the
// workaround's); use_cats from its params. 0 when found.
static int read_expected(const char *path, double stats[12], int *use_cats) {
    tk_err e;
    jscan s;
    char *buf = open_json(path, &s, &e);
    if (!buf) return -1;
    int rc = js_obj_begin(&s), found = 0;
    const char *k;
    size_t kl;
    *use_cats = 1;
    while (!rc && (rc = js_obj_next(&s, &k, &kl)) == 1) {
        if (js_key_is(k, kl, "params")) {
            rc = js_obj_begin(&s);
            while (!rc && (rc = js_obj_next(&s, &k, &kl)) == 1) {
                int64_t v;
                if (js_key_is(k, kl, "useCats") && !(rc = js_int64(&s, &v))) *use_cats = (int)v;
                else if (!js_key_is(k, kl, "useCats")) rc = js_skip(&s);
            }
            rc = rc < 0 ? -1 : 0;
        } else if (js_key_is(k, kl, "bbox")) {
            rc = js_obj_begin(&s);
            while (!rc && (rc = js_obj_next(&s, &k, &kl)) == 1) {
                if ((js_key_is(k, kl, "stats") || js_key_is(k, kl, "stats_empty_result_built_by_hand") ||
                     js_key_is(k, kl, "stats_after_dropping_unknown_images")) && js_peek(&s) == JS_ARRAY) {
                    int n = 0;
                    rc = js_arr_begin(&s);
                    while (!rc && (rc = js_arr_next(&s)) == 1) rc = n < 12 ? js_number(&s, &stats[n++]) : -1;
                    rc = rc < 0 ? -1 : 0;
                    found = n == 12;
                } else rc = js_skip(&s);
            }
            rc = rc < 0 ? -1 : 0;
        } else rc = js_skip(&s);
    }
    free(buf);
    return rc < 0 || !found ? -1 : 0;
}

// Evaluates a and b (boxes, use_cats) and tells whether stats, precision and recall are equal.
static int same_metrics(int *tk_failed_, coco_gt *gt, const coco_dt *a, const coco_dt *b, int use_cats,
                        double stats[12]) {
    coco_params p;
    coco_params_default(&p, COCO_BBOX);
    p.use_cats = use_cats;
    coco_result ra, rb;
    tk_err e;
    CHECK_EQ_INT(coco_evaluate(gt, a, &p, &ra, &e), 0);
    CHECK_EQ_INT(coco_evaluate(gt, b, &p, &rb, &e), 0);
    const size_t np = (size_t)ra.T * ra.R * ra.K * ra.A * ra.M, nr = (size_t)ra.T * ra.K * ra.A * ra.M;
    int same = !memcmp(ra.stats, rb.stats, sizeof ra.stats) && ra.K == rb.K &&
               !memcmp(ra.precision, rb.precision, np * sizeof(double)) &&
               !memcmp(ra.recall, rb.recall, nr * sizeof(double));
    if (stats) memcpy(stats, ra.stats, sizeof ra.stats);
    coco_result_free(&ra), coco_result_free(&rb);
    return same;
}

TK_TEST(oracle_cases_from_arrays_equal_json_and_pycocotools) {
    const char *sh = getenv("TK_SHARED") ? getenv("TK_SHARED") : "../shared";
    char dir[512];
    snprintf(dir, sizeof dir, "%s/coco/cases", sh);
    DIR *dp = opendir(dir);
    if (!dp) {
        printf("# skip: no oracle cases at %s\n", dir);
        return;
    }
    struct dirent *de;
    int cases = 0;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.') continue;
        char gtp[1024], dtp[1024], exp[1024];
        snprintf(gtp, sizeof gtp, "%s/%s/gt.json", dir, de->d_name);
        snprintf(exp, sizeof exp, "%s/%s/expected.json", dir, de->d_name);
        snprintf(dtp, sizeof dtp, "%s/%s/dt_bbox.json", dir, de->d_name);
        FILE *f = fopen(dtp, "r");
        if (f) fclose(f);
        else snprintf(dtp, sizeof dtp, "%s/%s/dt.json", dir, de->d_name);
        coco_gt *gt;
        coco_dt *dj, *da;
        tk_err e;
        if (coco_gt_load(gtp, &gt, &e)) {
            printf("# %s: %s\n", gtp, e.what);
            CHECK(0);
            continue;
        }
        dets d = {0};
        const int flags = COCO_DT_ALLOW_EMPTY | COCO_DT_DROP_UNKNOWN;
        CHECK_EQ_INT(read_results(dtp, &d), 0);
        CHECK_EQ_INT(coco_dt_load(gt, dtp, flags, 0, &dj, &e), 0);
        CHECK_EQ_INT(coco_dt_from_arrays(gt, d.n, d.img, d.cat, d.bbox, d.score, flags, "dets", &da, &e), 0);
        CHECK_EQ_INT(coco_dt_num(da), coco_dt_num(dj));
        CHECK_EQ_INT(coco_dt_num_dropped(da), coco_dt_num_dropped(dj));
        double want[12], got[12];
        int use_cats = 1;
        const int have = read_expected(exp, want, &use_cats) == 0;
        for (int uc = 0; uc < 2; uc++) {
            const int same = same_metrics(tk_failed_, gt, da, dj, uc, got);
            if (!same) printf("# %s: use_cats %d: arrays and JSON differ\n", de->d_name, uc);
            CHECK(same);
            if (have && uc == use_cats && memcmp(got, want, sizeof got)) {
                printf("# %s: stats differ from pycocotools' (AP %.17g vs %.17g)\n", de->d_name, got[0], want[0]);
                CHECK(0);
            }
        }
        cases += have;
        coco_dt_free(dj), coco_dt_free(da), coco_gt_free(gt), dets_free(&d);
    }
    closedir(dp);
    printf("# %d cases against pycocotools' stats\n", cases);
    CHECK(cases >= 16);
}

// SSD-style detections on the images and categories of gt: float32 ltrb boxes in [0, 1] (some
// tied scores), scaled the reference's way, as arrays and as a %.17g JSON file.
TK_TEST(ssd_detections_from_arrays_equal_their_json) {
    const char *sh = getenv("TK_SHARED") ? getenv("TK_SHARED") : "../shared";
    char gtp[512];
    snprintf(gtp, sizeof gtp, "%s/coco/cases/real_gt_cocomini_val2017_synthdt/gt.json", sh);
    coco_gt *gt;
    tk_err e;
    if (coco_gt_load(gtp, &gt, &e)) {
        printf("# skip: %s: %s\n", gtp, e.what);
        return;
    }
    // the images (id, size), category ids and ground-truth boxes, read back with jscan
    jscan s;
    char *buf = open_json(gtp, &s, &e);
    int64_t ids[256], cats[128];
    double W[256], H[256];
    int ni = 0, nc = 0;
    dets g = {0}; // the annotations
    int rc = buf ? js_obj_begin(&s) : -1;
    const char *k;
    size_t kl;
    while (!rc && (rc = js_obj_next(&s, &k, &kl)) == 1) {
        const int im = js_key_is(k, kl, "images"), ca = js_key_is(k, kl, "categories"),
                  an = js_key_is(k, kl, "annotations");
        if (!im && !ca && !an) {
            rc = js_skip(&s);
            continue;
        }
        rc = js_arr_begin(&s);
        while (!rc && (rc = js_arr_next(&s)) == 1) {
            rc = js_obj_begin(&s);
            int64_t id = 0, h = 0, w = 0, img = 0, cat = 0;
            double bb[4] = {0};
            int nb = 0;
            while (!rc && (rc = js_obj_next(&s, &k, &kl)) == 1) {
                if (js_key_is(k, kl, "id")) rc = js_int64(&s, &id);
                else if (im && js_key_is(k, kl, "height")) rc = js_int64(&s, &h);
                else if (im && js_key_is(k, kl, "width")) rc = js_int64(&s, &w);
                else if (an && js_key_is(k, kl, "image_id")) rc = js_int64(&s, &img);
                else if (an && js_key_is(k, kl, "category_id")) rc = js_int64(&s, &cat);
                else if (an && js_key_is(k, kl, "bbox")) {
                    rc = js_arr_begin(&s);
                    while (!rc && (rc = js_arr_next(&s)) == 1) rc = nb < 4 ? js_number(&s, &bb[nb++]) : -1;
                    rc = rc < 0 ? -1 : 0;
                } else rc = js_skip(&s);
            }
            rc = rc < 0 ? -1 : 0;
            if (im && ni < 256) ids[ni] = id, W[ni] = (double)w, H[ni] = (double)h, ni++;
            if (ca && nc < 128) cats[nc++] = id;
            if (an && nb == 4) rc = dets_push(&g, img, cat, bb, 1);
        }
        rc = rc < 0 ? -1 : 0;
    }
    free(buf);
    CHECK(rc >= 0 && ni > 10 && nc > 10 && g.n > 100);
    // per annotation two detections: its box in [0, 1] moved a little (a hit at some IoU
    // thresholds) and a random box of a random category; scores in [0.05, 1), every 7th 0.5
    dets d = {0};
    uint64_t r = 0;
    for (size_t a = 0; a < g.n; a++) {
        int i = 0;
        while (i < ni && ids[i] != g.img[a]) i++;
        if (i == ni) continue;
        for (int j = 0; j < 2; j++, r += 8) {
            float u[8], ltrb[4];
            for (int q = 0; q < 8; q++) u[q] = tk_philox_uniform(3, 0, r + q);
            if (j == 0) {
                const double *b = g.bbox + 4 * a;
                ltrb[0] = (float)(b[0] / W[i]) + 0.05f * (u[0] - 0.5f);
                ltrb[1] = (float)(b[1] / H[i]) + 0.05f * (u[1] - 0.5f);
                ltrb[2] = (float)((b[0] + b[2]) / W[i]) + 0.05f * (u[2] - 0.5f);
                ltrb[3] = (float)((b[1] + b[3]) / H[i]) + 0.05f * (u[3] - 0.5f);
                if (ltrb[2] < ltrb[0]) ltrb[2] = ltrb[0];
                if (ltrb[3] < ltrb[1]) ltrb[3] = ltrb[1];
            } else {
                ltrb[0] = u[0] * 0.8f, ltrb[1] = u[1] * 0.8f;
                ltrb[2] = ltrb[0] + 0.02f + u[2] * 0.5f, ltrb[3] = ltrb[1] + 0.02f + u[3] * 0.5f;
            }
            double bb[4];
            tk_ssd_nms_coco_box(ltrb, W[i], H[i], bb);
            const float sc = (r / 8) % 7 == 0 ? 0.5f : 0.05f + u[4] * 0.95f;
            const int64_t cat = j == 0 ? g.cat[a] : cats[(int)(u[5] * (float)nc) % nc];
            CHECK_EQ_INT(dets_push(&d, g.img[a], cat, bb, (double)sc), 0);
        }
    }
    dets_free(&g);
    const char *path = tk_test_path("test_coco_arrays", "ssd_dets.json");
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fprintf(f, "[");
    for (size_t i = 0; i < d.n; i++)
        fprintf(f,
                "%s{\"image_id\": %lld, \"category_id\": %lld, \"bbox\": [%.17g, %.17g, %.17g, %.17g],"
                " \"score\": %.17g}",
                i ? ",\n" : "", (long long)d.img[i], (long long)d.cat[i], d.bbox[4 * i], d.bbox[4 * i + 1],
                d.bbox[4 * i + 2], d.bbox[4 * i + 3], d.score[i]);
    fprintf(f, "]\n");
    CHECK(fclose(f) == 0);
    coco_dt *dj, *da;
    CHECK_EQ_INT(coco_dt_load(gt, path, 0, 0, &dj, &e), 0);
    CHECK_EQ_INT(coco_dt_from_arrays(gt, d.n, d.img, d.cat, d.bbox, d.score, 0, "dets", &da, &e), 0);
    double st[12];
    CHECK(same_metrics(tk_failed_, gt, da, dj, 1, st));
    if (!(st[0] > 0.1 && st[0] < 0.9)) printf("# AP %.17g\n", st[0]);
    CHECK(st[0] > 0.1 && st[0] < 0.9); // moved boxes and noise: some AP
    // the order decides between tied scores: reversed, the metrics change
    dets rv = {0};
    for (size_t i = d.n; i-- > 0;) CHECK_EQ_INT(dets_push(&rv, d.img[i], d.cat[i], d.bbox + 4 * i, d.score[i]), 0);
    coco_dt *dr;
    CHECK_EQ_INT(coco_dt_from_arrays(gt, rv.n, rv.img, rv.cat, rv.bbox, rv.score, 0, "dets", &dr, &e), 0);
    CHECK(!same_metrics(tk_failed_, gt, dr, dj, 1, NULL));
    coco_dt_free(dj), coco_dt_free(da), coco_dt_free(dr), coco_gt_free(gt), dets_free(&d), dets_free(&rv);
    tk_test_rmdir();
}

TK_TEST(arrays_are_checked_like_json) {
    static const char *GT = "{\"images\": [{\"id\": 1, \"height\": 100, \"width\": 100}],"
                            " \"categories\": [{\"id\": 3, \"name\": \"c\"}],"
                            " \"annotations\": [{\"id\": 1, \"image_id\": 1, \"category_id\": 3, \"area\": 400,"
                            " \"bbox\": [10, 10, 20, 20], \"iscrowd\": 0}]}";
    char *b = malloc(strlen(GT) + 1);
    memcpy(b, GT, strlen(GT) + 1);
    coco_gt *gt;
    coco_dt *dt;
    tk_err e;
    CHECK_EQ_INT(coco_gt_parse(b, strlen(GT), "gt.json", &gt, &e), 0);
    int64_t img[3] = {1, 1, 7}, cat[3] = {3, 3, 3};
    double bb[12] = {10, 10, 20, 20, 0, 0, 5, -1, 1, 1, 1, 1}, sc[3] = {0.9, 0.5, 0.1};
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 3, img, cat, bb, sc, 0, "dets", &dt, &e), TK_EDATA);
    CHECK_STR(e.where, "dets[1].bbox");
    CHECK_STR(e.what, "negative box height -1");
    bb[7] = 5;
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 3, img, cat, bb, sc, 0, "dets", &dt, &e), TK_EDATA);
    CHECK_STR(e.where, "dets[2]");
    CHECK_STR(e.what, "image id 7 is not in the ground truth's images");
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 3, img, cat, bb, sc, COCO_DT_DROP_UNKNOWN, "dets", &dt, &e), 0);
    CHECK(coco_dt_num(dt) == 2 && coco_dt_num_dropped(dt) == 1);
    coco_params p;
    coco_result r;
    coco_params_default(&p, COCO_BBOX);
    CHECK_EQ_INT(coco_evaluate(gt, dt, &p, &r, &e), 0);
    CHECK(r.stats[1] == 0.9999999999999999); // the exact box first: AP50 1 (pycocotools' 1/(1+eps))
    coco_result_free(&r);
    coco_dt_free(dt);
    // an untrained detector's box (as an SSD decoded on an H200: x -2.3e16): taken and scored
    bb[4] = -2.34174e16, bb[6] = 4.7e16;
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 2, img, cat, bb, sc, 0, "dets", &dt, &e), 0);
    CHECK_EQ_INT(coco_evaluate(gt, dt, &p, &r, &e), 0);
    CHECK(r.stats[1] == 0.9999999999999999);
    coco_result_free(&r);
    coco_dt_free(dt);
    bb[4] = 0, bb[6] = 5;
    sc[0] = NAN;
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 2, img, cat, bb, sc, 0, "dets", &dt, &e), TK_EDATA);
    CHECK_STR(e.where, "dets[0].score");
    sc[0] = 0.9, bb[0] = INFINITY;
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 2, img, cat, bb, sc, 0, "dets", &dt, &e), TK_EDATA);
    CHECK_STR(e.where, "dets[0].bbox");
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 0, img, cat, bb, sc, 0, "dets", &dt, &e), TK_EDATA);
    CHECK_STR(e.what, "the result list is empty");
    CHECK_EQ_INT(coco_dt_from_arrays(gt, 0, NULL, NULL, NULL, NULL, COCO_DT_ALLOW_EMPTY, "dets", &dt, &e), 0);
    CHECK_EQ_INT(coco_dt_num(dt), 0);
    coco_dt_free(dt);
    coco_gt_free(gt);
}
