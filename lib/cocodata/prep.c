// COCO -> .tks (cocodata/prep.h): the annotation file is read with the ground-truth loader that
// coco-eval uses (load.c), checked, and each kept image becomes one record.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coco/coco_int.h"
#include "cocodata/prep.h"
#include "image/codec.h"
#include "tks/tks.h"

enum { F_JPEG, F_ID, F_H, F_W, F_BOXES, F_LABELS, F_CROWD, F_AREA, F_SEGM, NF };

static void schema(tks_schema *s, const coco_gt *gt, const int32_t *sorted, int ncat, int eval) {
    memset(s, 0, sizeof *s);
    static const struct { const char *name; tks_dtype t; int ndim, cols; } f[NF] = {
        {"jpeg", TKS_U8, 1, 0},   {"image_id", TKS_I64, 0, 0}, {"height", TKS_I32, 0, 0},
        {"width", TKS_I32, 0, 0}, {"boxes", TKS_F32, 2, 4},    {"labels", TKS_I32, 1, 0},
        {"iscrowd", TKS_U8, 1, 0}, {"area", TKS_F32, 1, 0},     {"segm", TKS_U8, 1, 0}};
    for (int i = 0; i < NF; i++) {
        snprintf(s->f[i].name, sizeof s->f[i].name, "%s", f[i].name);
        s->f[i].dtype = f[i].t;
        s->f[i].ndim = f[i].ndim;
        if (f[i].ndim) s->f[i].shape[0] = TKS_RAGGED;
        if (f[i].ndim == 2) s->f[i].shape[1] = f[i].cols;
    }
    s->nfields = NF;
    size_t k = (size_t)snprintf(s->meta_json, sizeof s->meta_json,
                                "{\"source\":\"coco\",\"split\":\"%s\",\"classes\":%d,\"boxes\":\"x1 y1 x2 y2 "
                                "pixels\",\"label\":\"rank of the category id among the sorted ids, from 1\","
                                "\"category_ids\":[",
                                eval ? "eval" : "train", ncat);
    int i = 0;
    for (; i < ncat && k < sizeof s->meta_json - 40; i++)
        k += (size_t)snprintf(s->meta_json + k, sizeof s->meta_json - k, "%s%lld", i ? "," : "",
                              (long long)gt->cat_id[sorted[i]]);
    if (i == ncat) snprintf(s->meta_json + k, sizeof s->meta_json - k, "]}");
    else // too many categories to list
        snprintf(s->meta_json, sizeof s->meta_json, "{\"source\":\"coco\",\"classes\":%d}", ncat);
}

static const coco_gt *sort_gt;
static int cmp_cat_id(const void *a, const void *b) {
    int64_t x = sort_gt->cat_id[*(const int32_t *)a], y = sort_gt->cat_id[*(const int32_t *)b];
    return x < y ? -1 : x > y;
}

// The checks the evaluator does not need: image ids are unique, every annotation names a listed
// image and category, every listed image has a file name. Fills label[cat index] = 1..K.
static int check_gt(coco_gt *gt, int32_t *label, int *ncat, tk_err *e) {
    if (gt->dup_img >= 0) {
        tk_err_set(e, TK_EDATA, "image id %lld is listed twice", (long long)gt->dup_img_id);
        return tk_err_where(e, "%s: $.images[%ld].id", gt->name, gt->dup_img);
    }
    for (size_t i = 0; i < gt->nanns; i++) {
        const coco_gt_ann *a = &gt->anns[i];
        if (!gt->img_declared[a->img]) {
            tk_err_set(e, TK_EDATA, "image id %lld is not in $.images", (long long)gt->img_id[a->img]);
            return tk_err_where(e, "%s: $.annotations[%u].image_id", gt->name, a->file_idx);
        }
        if (!gt->cat_declared[a->cat]) {
            tk_err_set(e, TK_EDATA, "category id %lld is not in $.categories", (long long)gt->cat_id[a->cat]);
            return tk_err_where(e, "%s: $.annotations[%u].category_id", gt->name, a->file_idx);
        }
    }
    for (size_t i = 0; i < gt->nimg; i++)
        if (!gt->img_file[i] || !gt->img_file_len[i] || memchr(gt->img_file[i], 0, gt->img_file_len[i])) {
            tk_err_set(e, TK_EDATA, "image id %lld has no \"file_name\"", (long long)gt->img_id[i]);
            return tk_err_where(e, "%s: $.images[%zu]", gt->name, i); // listed images come first, in order
        }
    int32_t *sorted = malloc((gt->ncat ? gt->ncat : 1) * sizeof *sorted);
    if (!sorted) return tk_err_errno(e, ENOMEM, "categories");
    int n = 0;
    for (size_t i = 0; i < gt->ncat; i++) sorted[n++] = (int32_t)i; // all declared after the loop above
    sort_gt = gt;
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_cat_id);
    for (int r = 0; r < n; r++) label[sorted[r]] = r + 1;
    memcpy(label + gt->ncat, sorted, (size_t)n * sizeof *sorted); // the sorted order, for the schema
    free(sorted);
    *ncat = n;
    return 0;
}

// A growable byte buffer for one record's ragged fields.
typedef struct { uint8_t *p; size_t n, cap; } bytes;
static int put(bytes *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t c = b->cap ? b->cap : 4096;
        while (c < b->n + n) c *= 2;
        uint8_t *q = realloc(b->p, c);
        if (!q) return -1;
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
    return 0;
}
static int put_u32(bytes *b, uint32_t v) {
    uint8_t le[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return put(b, le, 4);
}
static int put_f32(bytes *b, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    return put_u32(b, v);
}

// One annotation's segmentation in the segm encoding (cocodata/prep.h).
static int put_segm(bytes *b, const coco_gt *gt, const coco_gt_ann *a, coco_prep_stats *st, tk_err *e) {
    const coco_seg *sg = &a->seg;
    const coco_store *s = &gt->st;
    uint8_t kind = sg->kind == SEG_POLY || sg->kind == SEG_EMPTY ? 1 : sg->kind == SEG_NONE ? 0 : 2;
    int bad = put(b, &kind, 1);
    if (kind == 1) {
        bad |= put_u32(b, (uint32_t)(sg->kind == SEG_POLY ? sg->n : 0));
        for (size_t i = 0; sg->kind == SEG_POLY && i < sg->n; i++) {
            const coco_poly *pl = &s->polys[sg->off + i];
            bad |= put_u32(b, (uint32_t)pl->n);
            for (size_t j = 0; j < pl->n; j++) bad |= put_f32(b, (float)s->coords[pl->start + j]);
        }
        st->polygons++;
    } else if (kind == 2) {
        coco_rle r = {0};
        if (sg->kind == SEG_STRING) TRY(coco_rle_fr_string(s->buf + sg->off, sg->n, sg->h, sg->w, &r, e));
        const uint32_t *c = sg->kind == SEG_STRING ? r.cnts : coco_seg_counts(s, sg);
        size_t m = sg->kind == SEG_STRING ? r.m : sg->n;
        bad |= put_u32(b, sg->h) | put_u32(b, sg->w) | put_u32(b, (uint32_t)m);
        for (size_t j = 0; j < m; j++) bad |= put_u32(b, c[j]);
        coco_rle_free(&r);
        st->rle++;
    }
    return bad ? tk_err_errno(e, ENOMEM, "segmentation") : 0;
}

// The image's bytes, checked: a JPEG (SOI at the start, EOI at the end, a header libjpeg reads)
// of the size the annotation file gives.
static int read_jpeg(const char *path, coco_gt *gt, size_t i, char **buf, size_t *len, tk_err *e) {
    int rc = coco_read_file(path, buf, len, e);
    if (rc) return tk_err_where(e, "image id %lld", (long long)gt->img_id[i]);
    const uint8_t *p = (const uint8_t *)*buf;
    size_t n = *len;
    while (n > 2 && p[n - 1] == 0) n--; // zero padding after the EOI marker is common and harmless
    tk_jpeg_info info;
    if (n < 4 || p[0] != 0xFF || p[1] != 0xD8) rc = tk_err_set(e, TK_EDATA, "not a JPEG file (no SOI marker)");
    else if (p[n - 2] != 0xFF || p[n - 1] != 0xD9) rc = tk_err_set(e, TK_EDATA, "truncated JPEG (no EOI marker at the end)");
    else if (!(rc = tk_jpeg_info_read(p, *len, &info, e)) && gt->img_h[i] && gt->img_w[i] &&
             ((uint32_t)info.height != gt->img_h[i] || (uint32_t)info.width != gt->img_w[i]))
        rc = tk_err_set(e, TK_EDATA, "the JPEG is %d x %d pixels, the annotations say %u x %u (width x height)",
                        info.width, info.height, gt->img_w[i], gt->img_h[i]);
    if (!rc && (!gt->img_h[i] || !gt->img_w[i])) { // no size in the file: the JPEG's
        gt->img_h[i] = (uint32_t)info.height;
        gt->img_w[i] = (uint32_t)info.width;
    }
    if (rc) {
        free(*buf);
        *buf = NULL;
        tk_err_where(e, "%s (image id %lld)", path, (long long)gt->img_id[i]);
    }
    return rc;
}

// Is the image kept? Training drops images without annotations and those whose boxes all have a
// side of at most one pixel (the reference's _has_only_empty_bbox); evaluation keeps every image.
static int keep(const coco_gt *gt, const uint32_t *ann, size_t n, int eval, coco_prep_stats *st) {
    if (eval) return 1;
    if (!n) {
        st->dropped_no_annotations++;
        return 0;
    }
    for (size_t j = 0; j < n; j++)
        if (gt->anns[ann[j]].bbox[2] > 1 && gt->anns[ann[j]].bbox[3] > 1) return 1;
    st->dropped_empty_boxes++;
    return 0;
}

typedef struct { bytes boxes, labels, crowd, area, segm; } recbuf;

static int write_image(tks_writer *w, coco_gt *gt, size_t i, const uint32_t *ann, size_t n,
                       const int32_t *label, const char *dir, recbuf *rb, coco_prep_stats *st, tk_err *e) {
    char path[8192];
    int pl = snprintf(path, sizeof path, "%s/%.*s", dir, (int)gt->img_file_len[i], gt->img_file[i]);
    if (pl < 0 || (size_t)pl >= sizeof path) return tk_err_set(e, TK_EDATA, "image id %lld: file name too long", (long long)gt->img_id[i]);
    rb->boxes.n = rb->labels.n = rb->crowd.n = rb->area.n = rb->segm.n = 0;
    int bad = 0;
    for (size_t j = 0; j < n; j++) {
        const coco_gt_ann *a = &gt->anns[ann[j]];
        float bx[4] = {(float)a->bbox[0], (float)a->bbox[1], (float)(a->bbox[0] + a->bbox[2]),
                       (float)(a->bbox[1] + a->bbox[3])};
        int32_t lb = label[a->cat];
        float ar = (float)a->area;
        bad |= put(&rb->boxes, bx, sizeof bx) | put(&rb->labels, &lb, 4) | put(&rb->crowd, &a->crowd, 1) |
               put(&rb->area, &ar, 4);
        TRY(put_segm(&rb->segm, gt, a, st, e));
        st->crowd += a->crowd;
    }
    if (bad) return tk_err_errno(e, ENOMEM, "annotations");
    char *jpeg;
    size_t jn;
    TRY(read_jpeg(path, gt, i, &jpeg, &jn, e));
    int64_t id = gt->img_id[i];
    int32_t h = (int32_t)gt->img_h[i], wd = (int32_t)gt->img_w[i];
    uint64_t off[NF][2] = {{0, jn}, {0}, {0}, {0}, {0, rb->boxes.n}, {0, rb->labels.n}, {0, rb->crowd.n},
                           {0, rb->area.n}, {0, rb->segm.n}};
    static const uint8_t none = 0;
    tks_colref ref[NF] = {{jpeg, off[F_JPEG]},
                          {&id, NULL},
                          {&h, NULL},
                          {&wd, NULL},
                          {rb->boxes.p ? rb->boxes.p : &none, off[F_BOXES]},
                          {rb->labels.p ? rb->labels.p : &none, off[F_LABELS]},
                          {rb->crowd.p ? rb->crowd.p : &none, off[F_CROWD]},
                          {rb->area.p ? rb->area.p : &none, off[F_AREA]},
                          {rb->segm.p ? rb->segm.p : &none, off[F_SEGM]}};
    int rc = tks_writer_append_ref(w, ref, 1, e);
    free(jpeg);
    if (!rc) {
        st->records++;
        st->annotations += n;
        st->jpeg_bytes += jn;
    }
    return rc;
}

int coco_prep(const char *ann_path, const char *image_dir, const char *out_path, const coco_prep_opts *o,
              coco_prep_stats *st, tk_err *e) {
    memset(st, 0, sizeof *st);
    coco_gt *gt;
    TRY(coco_gt_load(ann_path, &gt, e));
    int32_t *label = calloc(2 * (gt->ncat ? gt->ncat : 1), sizeof *label);
    size_t *start = calloc(gt->nimg + 2, sizeof *start);
    uint32_t *order = malloc((gt->nanns ? gt->nanns : 1) * sizeof *order);
    int ncat = 0, rc = !label || !start || !order ? tk_err_errno(e, ENOMEM, "%s", ann_path) : 0;
    if (!rc) rc = check_gt(gt, label, &ncat, e);
    if (!rc) { // annotations by image, in file order (counting sort)
        for (size_t i = 0; i < gt->nanns; i++) start[gt->anns[i].img + 2]++;
        for (size_t i = 0; i < gt->nimg; i++) start[i + 2] += start[i + 1];
        for (size_t i = 0; i < gt->nanns; i++) order[start[gt->anns[i].img + 1]++] = (uint32_t)i;
    }
    tks_writer *w = NULL;
    tks_schema s;
    if (!rc) {
        schema(&s, gt, label + gt->ncat, ncat, o->eval);
        rc = tks_writer_open(&w, out_path, &s, NULL, e);
    }
    st->images = gt->nimg;
    st->categories = ncat;
    recbuf rb = {0};
    for (size_t i = 0; !rc && i < gt->nimg; i++) {
        const uint32_t *ann = order + start[i];
        size_t n = start[i + 1] - start[i];
        if (!keep(gt, ann, n, o->eval, st)) continue;
        rc = write_image(w, gt, i, ann, n, label, image_dir, &rb, st, e);
        if (o->progress && !(i % 256)) o->progress(o->progress_ctx, st->records);
    }
    if (w) {
        if (!rc) rc = tks_writer_close(w, e);
        else tks_writer_abort(w);
    }
    free(rb.boxes.p);
    free(rb.labels.p);
    free(rb.crowd.p);
    free(rb.area.p);
    free(rb.segm.p);
    free(label);
    free(start);
    free(order);
    coco_gt_free(gt);
    return rc;
}
