// SSD's evaluation (workload.h): COCO bbox AP@[.50:.95] of the eval records, as the v1.x
// reference's coco_eval (mlcommons/training single_stage_detector/ssd train.py): each image
// resized whole to the input size and normalized (data.h ssd_eval_batch, SSDTransformer(val=True)),
// the forward with BatchNorm's running statistics, Encoder.decode_batch (kernels/ssd_nms.h: decode,
// softmax, per-class NMS at eval.nms_iou over scores > eval.score_threshold, the best
// eval.max_output of an image), the boxes scaled by the image's original width and height, the
// labels mapped back to COCO category ids (label k: the k-th smallest category id of the
// annotation file, the reference's inv_map), scored in process against the annotation file
// (lib/coco coco_dt_from_arrays + coco_evaluate: pycocotools' semantics) over every image of the
// ground truth. The ground truth is the config's eval.annotations (the instances_val2017.json the
// eval .tks was made from by prep coco --eval): a path, relative to the working directory.
// Several ranks. First BatchNorm's running statistics are averaged over the ranks, in place (the
// v1.x reference's train.py does so before each evaluation: every running_mean and running_var
// all-reduced and divided by the world size; they stay averaged for the training that follows,
// and the checkpoint written after the evaluation holds them): each rank's own statistics come
// from its share of the batches, and the ranks must evaluate one network. Then (the split of the
// 3D U-Net's evaluation, for detections): rank r of W runs the
// forward, the decoding and the NMS on images [n r / W, n (r + 1) / W) of the n eval records (a
// contiguous share, the sizes differing by at most one image; a rank may have none), in batches of
// its training batch; rank 0 gathers every rank's detections in rank order (engine/dist.h
// tk_dist_gatherv), which is the order one rank makes them in, scores them once, and hands the AP
// to the others. So the same detections are scored in the same order on any number of ranks: one
// AP, bit for bit, when each image's detections are the same (each image's forward is its own:
// BatchNorm with the running statistics, no collective inside). NVIDIA's v1.1 SSD splits the same
// way: each rank its share of the val set, the detections gathered, the COCO scoring once (on
// rank 0), the result broadcast.
// (The reference's coco_eval runs on rank 0 alone over every image, the others waiting for its
// verdict; the split gives that verdict on the same detections, W times sooner.)
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coco/coco.h"
#include "ssd_nms.h"
#include "workloads/ssd/workload.h"

#define SSD_EVAL_ANNOTATIONS "instances_val2017.json"

typedef struct ssd_evalset {
    ssd_dataset *d;
    coco_gt *gt;
    int64_t *cat;                // label k -> category id (cat[k - 1])
    int ncat;
    tk_ctx *c;
    tk_arena ar;                 // the NMS's outputs and workspace (device)
    float *box, *score;
    int32_t *label, *count;
    void *ws;
} ssd_evalset;

void ssd_evalset_free(void *model, void *p) {
    ssd_evalset *es = p;
    (void)model;
    if (!es) return;
    ssd_dataset_free(es->d);
    if (es->ar.base) tk_arena_release(es->c, &es->ar);
    coco_gt_free(es->gt);
    free(es->cat);
    free(es);
}

static int cmp_i64(const void *a, const void *b) {
    const int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

// The annotation file's category ids, sorted (prep coco numbers the labels so).
static int load_categories(const char *path, ssd_evalset *es, tk_err *e) {
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    if (!root) return tk_err_set(e, TK_EDATA, "%s: line %d: %s", path, je.line, je.text);
    json_t *cats = json_object_get(root, "categories");
    int rc = 0;
    if (!json_is_array(cats) || !json_array_size(cats)) rc = tk_err_set(e, TK_EDATA, "%s: $.categories: expected a non-empty array", path);
    if (!rc && !(es->cat = malloc(json_array_size(cats) * sizeof *es->cat))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    for (size_t i = 0; !rc && i < json_array_size(cats); i++) {
        json_t *id = json_object_get(json_array_get(cats, i), "id");
        if (!json_is_integer(id)) rc = tk_err_set(e, TK_EDATA, "%s: $.categories[%zu].id: expected an integer", path, i);
        else es->cat[es->ncat++] = json_integer_value(id);
    }
    if (!rc) qsort(es->cat, (size_t)es->ncat, sizeof *es->cat, cmp_i64);
    json_decref(root);
    return rc;
}

static tk_ssd_nms_params nms_params(const ssd_wl *w) {
    tk_ssd_nms_params np = tk_ssd_nms_defaults();
    np.iou = (float)w->cfg.nms_iou, np.score_min = (float)w->cfg.score_thresh, np.max_out = w->cfg.max_output;
    return np;
}

// The NMS's device buffers for a forward of the network's b images.
static int nms_buffers(const ssd_wl *w, ssd_evalset *es, tk_err *e) {
    const int B = w->b, K = w->cfg.max_output;
    const tk_ssd_nms_params np = nms_params(w);
    const size_t wsb = tk_ssd_nms_ws_bytes(w->c->backend, B, w->D, w->C, &np);
    void **slot[] = {(void **)&es->box, (void **)&es->score, (void **)&es->label, (void **)&es->count, &es->ws};
    const size_t size[] = {(size_t)B * K * 16, (size_t)B * K * 4, (size_t)B * K * 4, (size_t)B * 4, wsb ? wsb : 1};
    size_t total = 256;
    for (int k = 0; k < 5; k++) total += (size[k] + 255) & ~(size_t)255;
    es->c = w->c;
    TRY(tk_arena_init(w->c, &es->ar, total, "ssd eval", e));
    for (int k = 0; k < 5; k++) TRY(tk_arena_take(&es->ar, size[k], slot[k], e));
    return 0;
}

// The ground truth's file: eval.annotations, else instances_val2017.json in the first eval path
// (a directory) or beside it (a file), which evaluate of a checkpoint finds the same way.
static int annotations_path(const ssd_wl *w, char *const *paths, int npaths, char *out, size_t n, tk_err *e) {
    if (w->cfg.eval_annotations[0]) {
        snprintf(out, n, "%s", w->cfg.eval_annotations);
        return 0;
    }
    if (npaths < 1) return tk_err_set(e, TK_EUSAGE, "ssd: no eval data");
    const char *p = paths[0];
    struct stat st;
    if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(out, n, "%s/" SSD_EVAL_ANNOTATIONS, p);
    else {
        const char *slash = strrchr(p, '/');
        if (slash) snprintf(out, n, "%.*s/" SSD_EVAL_ANNOTATIONS, (int)(slash - p), p);
        else snprintf(out, n, SSD_EVAL_ANNOTATIONS);
    }
    if (access(out, R_OK) == 0) return 0;
    return tk_err_set(e, TK_EUSAGE,
                      "ssd: the evaluation needs the eval images' COCO annotation file: no %s (put the file the "
                      "eval .tks was made from there, or set eval.annotations)",
                      out);
}

int ssd_evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    const ssd_wl *w = model;
    *out = NULL;
    char ann[2048];
    TRY(annotations_path(w, paths, npaths, ann, sizeof ann, e));
    ssd_evalset *es = calloc(1, sizeof *es);
    if (!es) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = ssd_dataset_load(paths, npaths, &es->d, e);
    if (!rc) rc = coco_gt_load(ann, &es->gt, e);
    if (!rc) rc = load_categories(ann, es, e);
    if (!rc && es->ncat != w->C - 1)
        rc = tk_err_set(e, TK_EDATA, "%s: %d categories, the network's %d classes need %d", ann, es->ncat, w->C,
                        w->C - 1);
    if (!rc) rc = nms_buffers(w, es, e);
    if (rc) ssd_evalset_free(model, es);
    else *out = es;
    return rc;
}

int64_t ssd_evalset_count(const void *es) { return ssd_dataset_count(((const ssd_evalset *)es)->d); }

// The detections of the whole eval set (host arrays, grown as they come).
typedef struct dets {
    size_t n, cap;
    int64_t *img, *cat;
    double *bbox, *score;
} dets;

static void dets_free(dets *d) { free(d->img), free(d->cat), free(d->bbox), free(d->score); }

static int dets_room(dets *d, size_t more, tk_err *e) {
    if (d->n + more <= d->cap) return 0;
    size_t cap = d->cap ? d->cap : 1024;
    while (cap < d->n + more) cap *= 2;
    int64_t *img = realloc(d->img, cap * sizeof *img);
    if (img) d->img = img;
    int64_t *cat = img ? realloc(d->cat, cap * sizeof *cat) : NULL;
    if (cat) d->cat = cat;
    double *bbox = cat ? realloc(d->bbox, cap * 4 * sizeof *bbox) : NULL;
    if (bbox) d->bbox = bbox;
    double *score = bbox ? realloc(d->score, cap * sizeof *score) : NULL;
    if (score) d->score = score;
    if (!score) return tk_err_set(e, TK_EIO, "out of host memory for %zu detections", cap);
    d->cap = cap;
    return 0;
}

// Rank 0: all = every rank's detections, in rank order (the arrays gathered one by one). Collective.
static int gather_dets(tk_dist *d, const dets *mine, dets *all, tk_err *e) {
    void **field[] = {(void **)&all->img, (void **)&all->cat, (void **)&all->bbox, (void **)&all->score};
    const void *src[] = {mine->img, mine->cat, mine->bbox, mine->score};
    const size_t per[] = {sizeof *mine->img, sizeof *mine->cat, 4 * sizeof *mine->bbox, sizeof *mine->score};
    int64_t sizes[TK_MAX_WORLD];
    for (int f = 0; f < 4; f++) {
        TRY(tk_dist_gatherv(d, 0, src[f], mine->n * per[f], field[f], sizes, e));
        all->n = 0;
        for (int r = 0; r < d->world; r++) all->n += (size_t)sizes[r] / per[f];
    }
    all->cap = all->n;
    return 0;
}

// The COCO bbox AP of the detections (rank 0's).
static int score(const ssd_evalset *es, const dets *dt, double *map, tk_err *e) {
    coco_dt *cd = NULL;
    coco_result res = {0};
    int rc = coco_dt_from_arrays(es->gt, dt->n, dt->img, dt->cat, dt->bbox, dt->score, COCO_DT_ALLOW_EMPTY,
                                 "ssd detections", &cd, e);
    if (!rc) {
        coco_params p;
        coco_params_default(&p, COCO_BBOX);
        rc = coco_evaluate(es->gt, cd, &p, &res, e);
        // no ground truth at all: AP undefined (-1 from pycocotools), reported as 0
        if (!rc) *map = res.stats[0] < 0 ? 0 : res.stats[0];
        if (!rc) coco_result_free(&res);
    }
    coco_dt_free(cd);
    return rc;
}

// Rank 0 scores every rank's detections; the others take its AP, or fail with its error's code.
static int score_agreed(tk_dist *d, const ssd_evalset *es, const dets *mine, double *map, tk_err *e) {
    dets all = {0};
    int rc = gather_dets(d, mine, &all, e);
    if (rc) {
        dets_free(&all);
        return rc;
    }
    tk_err le;
    tk_err_clear(&le);
    const int lrc = d->rank == 0 ? score(es, &all, map, &le) : 0;
    dets_free(&all);
    int64_t got[TK_MAX_WORLD], bits = 0;
    if (!lrc) memcpy(&bits, map, sizeof bits);
    TRY(tk_dist_gather_i64(d, lrc, got, 0, e));
    TRY(tk_dist_gather_i64(d, bits, got + 1, 0, e)); // (got[1] is rank 0's)
    if (lrc) {
        *e = le;
        return lrc;
    }
    if (got[0]) return tk_err_set(e, (int)got[0], "ssd: rank 0 failed to score the detections (its error says why)");
    memcpy(map, &got[1], sizeof *map);
    return 0;
}

// Every running_mean and running_var = its mean over the ranks (on every rank, bit for bit the same).
static int average_bn_stats(const ssd_wl *w, tk_dist *d, tk_err *e) {
    if (d->world == 1 || !d->comm) return 0;
    const tk_params *P = w->net->P;
    for (int i = P->ndense; i < P->n; i++) {
        const tk_param *p = &P->p[i];
        const char *dot = strrchr(p->name, '.');
        if (!dot || (strcmp(dot, ".running_mean") && strcmp(dot, ".running_var"))) continue;
        if (p->dtype != TK_F32 || !p->w)
            return tk_err_set(e, TK_EINTERNAL, "ssd: %s is not an f32 tensor of every rank", p->name);
        TRY(tk_allreduce_sum(d->comm, p->w, p->w, (size_t)tk_param_numel(p), TK_F32, 1.0f / (float)d->world,
                             TK_STREAM_COMPUTE, e));
    }
    return 0;
}

// A default box that matched nothing in training has an untrained loc output, and its decoded
// width or height (exp of it, kernels/ssd_nms.h) overflows to infinity in fp32 early in a run (an
// SSD at base_lr 0.05 on the cpu: "ssd detections[2].bbox: box value -inf is out of range" at its
// first evaluation, exit 3). The reference hands such a row to pycocotools as it is, and
// pycocotools scores it: maskApi's bbIou gives it IoU 0 with every ground truth (fmin drops the
// NaN of -inf + inf; an infinite area makes the union infinite) and its area, beyond every area
// range, makes it an ignored detection when unmatched. An infinity taken as +-FLT_MAX (in double:
// sums and the area stay finite) gives those same outcomes (IoU 0 or below 1e-30, an area beyond
// 1e10), and coco_dt_from_arrays takes any finite box. NaN (a diverged network) stays an error.
void ssd_eval_coco_box(const float ltrb[4], double W, double H, double xywh[4]) {
    tk_ssd_nms_coco_box(ltrb, W, H, xywh);
    for (int k = 0; k < 4; k++)
        if (isinf(xywh[k])) xywh[k] = xywh[k] > 0 ? FLT_MAX : -FLT_MAX;
}

int ssd_evaluate(void *model, void *esp, double *map, tk_err *e) {
    ssd_wl *w = model;
    ssd_evalset *es = esp;
    ssd_model *m = w->net;
    const int S = m->S, B = w->b, K = w->cfg.max_output;
    const tk_ssd_nms_params np = nms_params(w);
    tk_dist *d = w->env.dist;
    // this rank's share of the records: [lo, hi)
    const int64_t n = ssd_dataset_count(es->d), lo = n * d->rank / d->world, hi = n * (d->rank + 1) / d->world;
    ssd_data_opts o = w->cfg.data;
    // host: one batch of inputs and the detections; device: the nms's outputs and workspace
    ssd_batch hb = {0};
    hb.image = malloc((size_t)B * S * S * 3 * sizeof(float));
    hb.boxes = malloc((size_t)B * o.max_boxes * 4 * sizeof(float));
    hb.labels = malloc((size_t)B * o.max_boxes * sizeof(int32_t));
    hb.nbox = malloc((size_t)B * sizeof(int32_t));
    hb.image_id = malloc((size_t)B * sizeof(int64_t));
    hb.size = malloc((size_t)B * 2 * sizeof(int32_t));
    float *hbox = malloc((size_t)B * K * 4 * sizeof(float)), *hscore = malloc((size_t)B * K * sizeof(float));
    int32_t *hlabel = malloc((size_t)B * K * sizeof(int32_t)), *hcount = malloc((size_t)B * sizeof(int32_t));
    dets dt = {0};
    int rc = hb.image && hb.boxes && hb.labels && hb.nbox && hb.image_id && hb.size && hbox && hscore && hlabel &&
                     hcount
                 ? 0
                 : tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = average_bn_stats(w, d, e);
    float *dbox_ = es->box, *dscore = es->score;
    int32_t *dlabel = es->label, *dcount = es->count;
    for (int64_t first = lo; !rc && first < hi; first += B) {
        const int cnt = (int)(hi - first < B ? hi - first : B);
        // the images after cnt keep what they held: each image's forward is its own (BatchNorm
        // with the running statistics)
        rc = ssd_eval_batch(es->d, &o, first, cnt, &hb, e);
        if (!rc) rc = tk_memcpy_h2d(w->c, m->in_img, hb.image, (size_t)cnt * S * S * 3 * sizeof(float), TK_STREAM_COMPUTE, e);
        if (!rc) rc = ssd_forward(m, 0, e);
        if (!rc)
            rc = tk_ssd_nms(w->c, TK_F32, w->ploc, w->pconf, w->dbox_xywh, cnt, w->D, w->C, &np, dbox_, dscore, dlabel,
                            dcount, es->ws, e);
        if (!rc) rc = tk_memcpy_d2h(w->c, hbox, dbox_, (size_t)cnt * K * 16, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_memcpy_d2h(w->c, hscore, dscore, (size_t)cnt * K * 4, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_memcpy_d2h(w->c, hlabel, dlabel, (size_t)cnt * K * 4, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_memcpy_d2h(w->c, hcount, dcount, (size_t)cnt * 4, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_ctx_sync(w->c, e);
        for (int i = 0; !rc && i < cnt; i++) {
            rc = dets_room(&dt, (size_t)hcount[i], e);
            const double H = hb.size[2 * i], W = hb.size[2 * i + 1];
            for (int j = 0; !rc && j < hcount[i]; j++) {
                const size_t s = (size_t)i * K + j;
                const int lab = hlabel[s];
                if (lab < 1 || lab > es->ncat) {
                    rc = tk_err_set(e, TK_EINTERNAL, "ssd: detection label %d outside 1..%d", lab, es->ncat);
                    break;
                }
                dt.img[dt.n] = hb.image_id[i], dt.cat[dt.n] = es->cat[lab - 1], dt.score[dt.n] = hscore[s];
                ssd_eval_coco_box(hbox + s * 4, W, H, dt.bbox + dt.n * 4);
                dt.n++;
            }
        }
    }
    if (!rc) rc = score_agreed(d, es, &dt, map, e);
    dets_free(&dt);
    free(hb.image), free(hb.boxes), free(hb.labels), free(hb.nbox), free(hb.image_id), free(hb.size);
    free(hbox), free(hscore), free(hlabel), free(hcount);
    return rc;
}
