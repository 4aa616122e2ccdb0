// Loading COCO annotation files (ground truth) and result files (detections) into flat arrays,
// with pycocotools' loadRes rules: the first result decides whether areas come from boxes or
// from masks, results get ids 1..N, "iscrowd" of results is 0.
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coco/coco_int.h"
#include "coco/jscan.h"

// ---- growable arrays ----

static int grow(void **p, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 0;
    size_t c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}
#define GROW(arr, cap, need) grow((void **)&(arr), &(cap), (need), sizeof *(arr))

static void store_free(coco_store *st) {
    free(st->buf);
    free(st->polys);
    free(st->coords);
    free(st->counts);
    memset(st, 0, sizeof *st);
}

// ---- shared value readers ----

static int read_bbox(jscan *s, double bb[4], int *present) {
    int rc = js_arr_begin(s), n = 0;
    if (rc) return rc;
    while ((rc = js_arr_next(s)) == 1) {
        if (n == 4) return js_fail(s, "a box has 4 numbers [x, y, width, height]");
        if ((rc = js_number(s, &bb[n]))) return rc;
        if (fabs(bb[n]) > 1e15) return js_fail(s, "box value %g is out of range", bb[n]);
        if (n >= 2 && bb[n] < 0) return js_fail(s, "negative box %s %g", n == 2 ? "width" : "height", bb[n]);
        n++;
    }
    if (rc < 0) return -rc;
    if (n == 0) { // pycocotools treats an empty box as none (loadRes: bbox == [])
        *present = 0;
        return 0;
    }
    if (n != 4) return js_fail(s, "a box has 4 numbers [x, y, width, height], got %d", n);
    *present = 1;
    return 0;
}

static int read_u32(jscan *s, uint32_t max, uint32_t *out) {
    int64_t v;
    int rc = js_int64(s, &v);
    if (rc) return rc;
    if (v < 0 || (uint64_t)v > max) return js_fail(s, "expected an integer in [0, %u], got %lld", max, (long long)v);
    *out = (uint32_t)v;
    return 0;
}

static int read_seg(jscan *s, coco_store *st, coco_seg *seg) {
    int rc, t = js_peek(s);
    memset(seg, 0, sizeof *seg);
    if (t == JS_NULL) return js_skip(s);
    if (t == JS_ARRAY) {
        if ((rc = js_arr_begin(s))) return rc;
        seg->kind = SEG_POLY;
        seg->off = st->npolys;
        while ((rc = js_arr_next(s)) == 1) {
            if ((rc = js_arr_begin(s))) return rc;
            size_t start = st->ncoords;
            while ((rc = js_arr_next(s)) == 1) {
                if (GROW(st->coords, st->cap_coords, st->ncoords + 1)) return tk_err_errno(s->e, ENOMEM, "polygons");
                double v;
                if ((rc = js_number(s, &v))) return rc;
                if (fabs(v) > 1e8) return js_fail(s, "polygon coordinate %g is out of range", v);
                st->coords[st->ncoords++] = v;
            }
            if (rc < 0) return -rc;
            size_t n = st->ncoords - start;
            if (n < 6) return js_fail(s, "a polygon needs at least 3 points, got %zu numbers", n);
            if (n % 2) return js_fail(s, "a polygon needs an even number of coordinates, got %zu", n);
            if (GROW(st->polys, st->cap_polys, st->npolys + 1)) return tk_err_errno(s->e, ENOMEM, "polygons");
            st->polys[st->npolys++] = (coco_poly){start, n};
            seg->n++;
        }
        if (rc < 0) return -rc;
        if (!seg->n) seg->kind = SEG_EMPTY;
        return 0;
    }
    if (t != JS_OBJECT) return js_fail(s, "a segmentation is a list of polygons or an RLE object");
    if ((rc = js_obj_begin(s))) return rc;
    const char *k;
    size_t kl;
    int have_size = 0, have_counts = 0;
    while ((rc = js_obj_next(s, &k, &kl)) == 1) {
        if (js_key_is(k, kl, "size")) {
            if ((rc = js_arr_begin(s))) return rc;
            int n = 0;
            while ((rc = js_arr_next(s)) == 1) {
                if (n == 2) return js_fail(s, "an RLE size is [height, width]");
                if ((rc = read_u32(s, 1u << 30, n ? &seg->w : &seg->h))) return rc;
                n++;
            }
            if (rc < 0) return -rc;
            if (n != 2) return js_fail(s, "an RLE size is [height, width]");
            if ((uint64_t)seg->h * seg->w > INT_MAX) return js_fail(s, "RLE size %ux%u is too large", seg->h, seg->w);
            have_size = 1;
        } else if (js_key_is(k, kl, "counts")) {
            have_counts = 1;
            if (js_peek(s) == JS_STRING) {
                char *str;
                size_t len;
                if ((rc = js_string(s, &str, &len))) return rc;
                seg->kind = SEG_STRING;
                seg->off = (size_t)(str - st->buf);
                seg->n = len;
            } else {
                if ((rc = js_arr_begin(s))) return rc;
                seg->kind = SEG_COUNTS;
                seg->off = st->ncounts;
                while ((rc = js_arr_next(s)) == 1) {
                    if (GROW(st->counts, st->cap_counts, st->ncounts + 1)) return tk_err_errno(s->e, ENOMEM, "RLE counts");
                    if ((rc = read_u32(s, UINT32_MAX, &st->counts[st->ncounts]))) return rc;
                    st->ncounts++;
                    seg->n++;
                }
                if (rc < 0) return -rc;
            }
        } else if ((rc = js_skip(s))) return rc;
    }
    if (rc < 0) return -rc;
    if (!have_size || !have_counts) return js_fail(s, "an RLE object needs \"size\" and \"counts\"");
    return 0;
}

// Checks an RLE segmentation against its size (what pycocotools would hang or read garbage on).
static int check_rle(const coco_store *st, const coco_seg *sg, coco_rle *r, tk_err *e) {
    int rc;
    if (sg->kind == SEG_STRING) {
        if ((rc = coco_rle_fr_string(st->buf + sg->off, sg->n, sg->h, sg->w, r, e))) return rc;
    } else {
        r->h = sg->h;
        r->w = sg->w;
        r->m = sg->n;
        r->cnts = coco_seg_counts(st, sg);
    }
    uint64_t tot = coco_rle_total(r);
    if (tot != (uint64_t)sg->h * sg->w) {
        if (sg->kind == SEG_STRING) coco_rle_free(r);
        return tk_err_set(e, TK_EDATA, "RLE counts sum to %llu pixels, the mask has %ux%u = %llu",
                          (unsigned long long)tot, sg->h, sg->w, (unsigned long long)sg->h * sg->w);
    }
    return 0;
}

int coco_seg_to_rle(const coco_store *st, const coco_seg *s, uint32_t h, uint32_t w, coco_rle *out,
                    tk_err *e) {
    int rc = 0;
    memset(out, 0, sizeof *out);
    switch (s->kind) {
    case SEG_STRING:
        return coco_rle_fr_string(st->buf + s->off, s->n, s->h, s->w, out, e);
    case SEG_COUNTS: {
        coco_rle r = {s->h, s->w, s->n, coco_seg_counts(st, s)};
        return coco_rle_merge(&r, 1, 0, out, e);
    }
    case SEG_POLY: {
        coco_rle *parts = calloc(s->n, sizeof *parts);
        if (!parts) return tk_err_errno(e, ENOMEM, "polygons");
        size_t i;
        for (i = 0; i < s->n && !rc; i++) {
            const coco_poly *pl = &st->polys[s->off + i];
            rc = coco_rle_fr_poly(st->coords + pl->start, pl->n / 2, h, w, &parts[i], e);
        }
        if (!rc) rc = coco_rle_merge(parts, s->n, 0, out, e);
        for (size_t j = 0; j < s->n; j++) coco_rle_free(&parts[j]);
        free(parts);
        return rc;
    }
    case SEG_EMPTY:
        return tk_err_set(e, TK_EDATA, "empty segmentation (a list without polygons)");
    default:
        return tk_err_set(e, TK_EDATA, "no segmentation");
    }
}

// Group annotation indices by image (counting sort, stable), then by category id within each
// image. GT and DT annotations are different structs, read in place: recs is the array, stride
// its record size, img_off and cat_off the offsets of the two int32 index fields.
#define FIELD(recs, stride, off, i) (*(const int32_t *)((const char *)(recs) + (size_t)(i) * (stride) + (off)))
typedef struct { const int64_t *cat_id; const void *recs; size_t stride, cat_off; } cat_ctx;
static int cmp_cat(uint32_t a, uint32_t b, const void *c) {
    const cat_ctx *x = c;
    int32_t ca = FIELD(x->recs, x->stride, x->cat_off, a), cb = FIELD(x->recs, x->stride, x->cat_off, b);
    int64_t ka = ca >= 0 ? x->cat_id[ca] : INT64_MAX;
    int64_t kb = cb >= 0 ? x->cat_id[cb] : INT64_MAX;
    return ka < kb ? -1 : ka > kb;
}

static int group_by_image(size_t nimg, size_t n, const void *recs, size_t stride, size_t img_off,
                          size_t cat_off, const int64_t *cat_id, size_t **start_out, uint32_t **order_out,
                          tk_err *e) {
    size_t *start = calloc(nimg + 2, sizeof *start);
    uint32_t *order = malloc((n ? n : 1) * sizeof *order), *tmp = malloc((n ? n : 1) * sizeof *tmp);
    if (!start || !order || !tmp) {
        free(start);
        free(order);
        free(tmp);
        return tk_err_errno(e, ENOMEM, "indexing annotations");
    }
    for (size_t i = 0; i < n; i++) start[FIELD(recs, stride, img_off, i) + 2]++;
    for (size_t i = 0; i < nimg; i++) start[i + 2] += start[i + 1];
    for (size_t i = 0; i < n; i++) order[start[FIELD(recs, stride, img_off, i) + 1]++] = (uint32_t)i;
    cat_ctx ctx = {cat_id, recs, stride, cat_off};
    for (size_t i = 0; i < nimg; i++)
        coco_stable_sort(order + start[i], tmp, start[i + 1] - start[i], cmp_cat, &ctx);
    free(tmp);
    *start_out = start;
    *order_out = order;
    return 0;
}

// ---- ground truth ----

static int gt_add_image(coco_gt *gt, int64_t id, int declared, int32_t *idx) {
    int32_t i = coco_map_get(&gt->img_map, id);
    if (i < 0) {
        if (gt->nimg >= INT32_MAX / 2) return -1;
        size_t c1 = gt->cap_img, c2 = gt->cap_img, c3 = gt->cap_img, c4 = gt->cap_img, c5 = gt->cap_img,
               c6 = gt->cap_img;
        if (GROW(gt->img_id, c1, gt->nimg + 1) || GROW(gt->img_h, c2, gt->nimg + 1) ||
            GROW(gt->img_w, c3, gt->nimg + 1) || GROW(gt->img_declared, c4, gt->nimg + 1) ||
            GROW(gt->img_file, c5, gt->nimg + 1) || GROW(gt->img_file_len, c6, gt->nimg + 1))
            return -1;
        gt->cap_img = c1;
        i = (int32_t)gt->nimg++;
        gt->img_id[i] = id;
        gt->img_h[i] = gt->img_w[i] = 0;
        gt->img_declared[i] = 0;
        gt->img_file[i] = NULL;
        gt->img_file_len[i] = 0;
        if (coco_map_put(&gt->img_map, id, i)) return -1;
    }
    if (declared) gt->img_declared[i] = 1;
    *idx = i;
    return 0;
}

static int gt_add_cat(coco_gt *gt, int64_t id, int declared, int32_t *idx) {
    int32_t i = coco_map_get(&gt->cat_map, id);
    if (i < 0) {
        size_t c1 = gt->cap_cat, c2 = gt->cap_cat, c3 = gt->cap_cat, c4 = gt->cap_cat;
        if (GROW(gt->cat_id, c1, gt->ncat + 1) || GROW(gt->cat_name, c2, gt->ncat + 1) ||
            GROW(gt->cat_name_len, c3, gt->ncat + 1) || GROW(gt->cat_declared, c4, gt->ncat + 1))
            return -1;
        gt->cap_cat = c1;
        i = (int32_t)gt->ncat++;
        gt->cat_id[i] = id;
        gt->cat_name[i] = NULL;
        gt->cat_name_len[i] = 0;
        gt->cat_declared[i] = 0;
        if (coco_map_put(&gt->cat_map, id, i)) return -1;
    }
    if (declared) gt->cat_declared[i] = 1;
    *idx = i;
    return 0;
}

static int parse_images(jscan *s, coco_gt *gt) {
    int rc = js_arr_begin(s);
    long at = 0;
    if (rc) return rc;
    for (; (rc = js_arr_next(s)) == 1; at++) {
        if ((rc = js_obj_begin(s))) return rc;
        const char *k;
        size_t kl;
        int64_t id = 0;
        int have_id = 0;
        uint32_t h = 0, w = 0;
        char *file = NULL;
        size_t flen = 0;
        while ((rc = js_obj_next(s, &k, &kl)) == 1) {
            if (js_key_is(k, kl, "id")) {
                if ((rc = js_int64(s, &id))) return rc;
                have_id = 1;
            } else if (js_key_is(k, kl, "file_name") && js_peek(s) == JS_STRING) {
                if ((rc = js_string(s, &file, &flen))) return rc;
            } else if (js_key_is(k, kl, "height")) {
                if ((rc = read_u32(s, 1u << 30, &h))) return rc;
            } else if (js_key_is(k, kl, "width")) {
                if ((rc = read_u32(s, 1u << 30, &w))) return rc;
            } else if ((rc = js_skip(s))) return rc;
        }
        if (rc < 0) return -rc;
        if (!have_id) return js_fail(s, "an image needs an \"id\"");
        int32_t i;
        int32_t before = coco_map_get(&gt->img_map, id);
        if (before >= 0 && gt->img_declared[before] && gt->dup_img < 0) {
            gt->dup_img = at;
            gt->dup_img_id = id;
        }
        if (gt_add_image(gt, id, 1, &i)) return tk_err_errno(s->e, ENOMEM, "images");
        gt->img_h[i] = h; // a repeated id keeps the last entry, as pycocotools' dict does
        gt->img_w[i] = w;
        gt->img_file[i] = file;
        gt->img_file_len[i] = flen;
    }
    return rc < 0 ? -rc : 0;
}

static int parse_categories(jscan *s, coco_gt *gt) {
    int rc = js_arr_begin(s);
    if (rc) return rc;
    while ((rc = js_arr_next(s)) == 1) {
        if ((rc = js_obj_begin(s))) return rc;
        const char *k;
        size_t kl;
        int64_t id = 0;
        int have_id = 0;
        char *name = NULL;
        size_t nlen = 0;
        while ((rc = js_obj_next(s, &k, &kl)) == 1) {
            if (js_key_is(k, kl, "id")) {
                if ((rc = js_int64(s, &id))) return rc;
                have_id = 1;
            } else if (js_key_is(k, kl, "name") && js_peek(s) == JS_STRING) {
                if ((rc = js_string(s, &name, &nlen))) return rc;
            } else if ((rc = js_skip(s))) return rc;
        }
        if (rc < 0) return -rc;
        if (!have_id) return js_fail(s, "a category needs an \"id\"");
        int32_t i;
        if (gt_add_cat(gt, id, 1, &i)) return tk_err_errno(s->e, ENOMEM, "categories");
        gt->cat_name[i] = name;
        gt->cat_name_len[i] = nlen;
    }
    return rc < 0 ? -rc : 0;
}

// Image and category ids are resolved after the whole file is read (keys come in any order).
typedef struct { int64_t img, cat; } raw_ids;

static int parse_gt_anns(jscan *s, coco_gt *gt, raw_ids **raw, size_t *cap_raw) {
    int rc = js_arr_begin(s);
    if (rc) return rc;
    while ((rc = js_arr_next(s)) == 1) {
        if (GROW(gt->anns, gt->cap_anns, gt->nanns + 1) || GROW(*raw, *cap_raw, gt->nanns + 1))
            return tk_err_errno(s->e, ENOMEM, "annotations");
        coco_gt_ann *a = &gt->anns[gt->nanns];
        memset(a, 0, sizeof *a);
        a->file_idx = (uint32_t)gt->nanns;
        if ((rc = js_obj_begin(s))) return rc;
        const char *k;
        size_t kl;
        unsigned have = 0;
        while ((rc = js_obj_next(s, &k, &kl)) == 1) {
            if (js_key_is(k, kl, "id")) {
                if ((rc = js_int64(s, &a->id))) return rc;
                have |= 1;
            } else if (js_key_is(k, kl, "image_id")) {
                if ((rc = js_int64(s, &(*raw)[gt->nanns].img))) return rc;
                have |= 2;
            } else if (js_key_is(k, kl, "category_id")) {
                if ((rc = js_int64(s, &(*raw)[gt->nanns].cat))) return rc;
                have |= 4;
            } else if (js_key_is(k, kl, "area")) {
                if ((rc = js_number(s, &a->area))) return rc;
                have |= 8;
            } else if (js_key_is(k, kl, "bbox")) {
                int present = 0;
                if ((rc = read_bbox(s, a->bbox, &present))) return rc;
                if (present) have |= 16;
            } else if (js_key_is(k, kl, "iscrowd")) {
                int t = js_peek(s), b;
                double v;
                if (t == JS_TRUE || t == JS_FALSE) {
                    if ((rc = js_bool(s, &b))) return rc;
                    a->crowd = (uint8_t)b;
                } else {
                    if ((rc = js_number(s, &v))) return rc;
                    a->crowd = v != 0;
                }
            } else if (js_key_is(k, kl, "segmentation")) {
                if ((rc = read_seg(s, &gt->st, &a->seg))) return rc;
            } else if ((rc = js_skip(s))) return rc;
        }
        if (rc < 0) return -rc;
        static const char *names[] = {"id", "image_id", "category_id", "area", "bbox"};
        for (int i = 0; i < 5; i++)
            if (!(have & (1u << i))) return js_fail(s, "an annotation needs \"%s\"", names[i]);
        if (a->seg.kind == SEG_STRING || a->seg.kind == SEG_COUNTS) {
            coco_rle r;
            if ((rc = check_rle(&gt->st, &a->seg, &r, s->e))) {
                char what[sizeof s->e->what];
                memcpy(what, s->e->what, sizeof what);
                return js_fail(s, "segmentation: %.300s", what);
            }
            if (a->seg.kind == SEG_STRING) coco_rle_free(&r);
        }
        gt->nanns++;
    }
    return rc < 0 ? -rc : 0;
}

void coco_gt_free(coco_gt *gt) {
    if (!gt) return;
    store_free(&gt->st);
    free(gt->img_id);
    free(gt->img_h);
    free(gt->img_w);
    free(gt->img_declared);
    free(gt->img_file);
    free(gt->img_file_len);
    coco_map_free(&gt->img_map);
    free(gt->cat_id);
    free(gt->cat_name);
    free(gt->cat_name_len);
    free(gt->cat_declared);
    coco_map_free(&gt->cat_map);
    free(gt->anns);
    free(gt->img_start);
    free(gt->by_img);
    if (gt->rle)
        for (size_t i = 0; i < gt->nanns; i++) coco_rle_free(&gt->rle[i]);
    free(gt->rle);
    free(gt->rle_bb);
    pthread_mutex_destroy(&gt->lock);
    free(gt);
}

int coco_gt_parse(char *buf, size_t len, const char *name, coco_gt **out, tk_err *e) {
    coco_gt *gt = calloc(1, sizeof *gt);
    if (!gt) {
        free(buf);
        return tk_err_errno(e, ENOMEM, "%s", name);
    }
    pthread_mutex_init(&gt->lock, NULL);
    snprintf(gt->name, sizeof gt->name, "%s", name);
    gt->dup_img = -1;
    gt->st.buf = buf;
    gt->st.len = len;
    jscan s;
    js_init(&s, buf, len, gt->name, e);
    raw_ids *raw = NULL;
    size_t cap_raw = 0;
    int rc = js_obj_begin(&s), seen = 0;
    const char *k;
    size_t kl;
    if (!rc) {
        while ((rc = js_obj_next(&s, &k, &kl)) == 1) {
            if (js_key_is(k, kl, "images")) rc = parse_images(&s, gt), seen |= 1;
            else if (js_key_is(k, kl, "categories")) rc = parse_categories(&s, gt), seen |= 2;
            else if (js_key_is(k, kl, "annotations")) rc = parse_gt_anns(&s, gt, &raw, &cap_raw);
            else rc = js_skip(&s);
            if (rc) break;
        }
        if (rc < 0) rc = -rc;
    }
    if (!rc) rc = js_end(&s);
    if (!rc && !(seen & 1)) rc = js_fail(&s, "no \"images\" list");
    if (!rc && !(seen & 2)) rc = js_fail(&s, "no \"categories\" list");
    coco_map ids = {0};
    for (size_t i = 0; !rc && i < gt->nanns; i++) {
        coco_gt_ann *a = &gt->anns[i];
        if (gt_add_image(gt, raw[i].img, 0, &a->img) || gt_add_cat(gt, raw[i].cat, 0, &a->cat) ||
            coco_map_put(&ids, a->id, (int32_t)i)) {
            rc = tk_err_errno(e, ENOMEM, "%s: annotations", name);
            break;
        }
        if (ids.n != i + 1) {
            tk_err_set(e, TK_EDATA, "annotation id %lld is used twice", (long long)a->id);
            tk_err_where(e, "%s: $.annotations[%zu].id", name, i);
            tk_err_hint(e, "pycocotools would silently evaluate the last one in place of both");
            rc = TK_EDATA;
        }
    }
    coco_map_free(&ids);
    free(raw);
    if (!rc)
        rc = group_by_image(gt->nimg, gt->nanns, gt->anns, sizeof(*gt->anns), offsetof(coco_gt_ann, img),
                            offsetof(coco_gt_ann, cat), gt->cat_id, &gt->img_start, &gt->by_img, e);
    if (rc) {
        coco_gt_free(gt);
        return rc;
    }
    *out = gt;
    return 0;
}

int coco_gt_load(const char *path, coco_gt **out, tk_err *e) {
    char *buf;
    size_t len;
    int rc = coco_read_file(path, &buf, &len, e);
    return rc ? rc : coco_gt_parse(buf, len, path, out, e);
}

size_t coco_gt_num_images(const coco_gt *gt) {
    size_t n = 0;
    for (size_t i = 0; i < gt->nimg; i++) n += gt->img_declared[i];
    return n;
}

size_t coco_gt_num_annotations(const coco_gt *gt) { return gt->nanns; }

const char *coco_gt_cat_name(const coco_gt *gt, int64_t cat_id, size_t *len) {
    int32_t i = coco_map_get(&gt->cat_map, cat_id);
    if (i < 0 || !gt->cat_name[i]) return NULL;
    *len = gt->cat_name_len[i];
    return gt->cat_name[i];
}

// ---- results ----

void coco_dt_free(coco_dt *dt) {
    if (!dt) return;
    store_free(&dt->st);
    if (dt->owned)
        for (size_t i = 0; i < dt->nanns; i++) coco_rle_free(&dt->owned[i]);
    free(dt->owned);
    free(dt->rbb);
    free(dt->anns);
    free(dt->img_start);
    free(dt->by_img);
    free(dt);
}

size_t coco_dt_num(const coco_dt *dt) { return dt->nanns; }
size_t coco_dt_num_dropped(const coco_dt *dt) { return dt->dropped; }

enum { HAS_IMG = 1, HAS_CAT = 2, HAS_SCORE = 4, HAS_BBOX = 8, HAS_SEG = 16 };

static int parse_dt_list(jscan *s, coco_dt *dt, int flags, uint8_t **has, size_t *cap_has) {
    const coco_gt *gt = dt->gt;
    int rc = js_arr_begin(s);
    if (rc) return rc;
    while ((rc = js_arr_next(s)) == 1) {
        if (GROW(dt->anns, dt->cap_anns, dt->nanns + 1) || GROW(*has, *cap_has, dt->nanns + 1))
            return tk_err_errno(s->e, ENOMEM, "results");
        coco_dt_ann *a = &dt->anns[dt->nanns];
        memset(a, 0, sizeof *a);
        a->file_idx = (uint32_t)(dt->nanns + dt->dropped);
        if ((rc = js_obj_begin(s))) return rc;
        const char *k;
        size_t kl;
        unsigned h = 0;
        int64_t img = 0, cat = 0;
        int present;
        while ((rc = js_obj_next(s, &k, &kl)) == 1) {
            if (js_key_is(k, kl, "image_id")) {
                if ((rc = js_int64(s, &img))) return rc;
                h |= HAS_IMG;
            } else if (js_key_is(k, kl, "category_id")) {
                if ((rc = js_int64(s, &cat))) return rc;
                h |= HAS_CAT;
            } else if (js_key_is(k, kl, "score")) {
                if ((rc = js_number(s, &a->score))) return rc;
                h |= HAS_SCORE;
            } else if (js_key_is(k, kl, "bbox")) {
                if ((rc = read_bbox(s, a->bbox, &present))) return rc;
                if (present) h |= HAS_BBOX;
            } else if (js_key_is(k, kl, "segmentation")) {
                if ((rc = read_seg(s, &dt->st, &a->seg))) return rc;
                if (a->seg.kind != SEG_NONE) h |= HAS_SEG;
                if (a->seg.kind == SEG_EMPTY) return js_fail(s, "empty segmentation");
            } else if ((rc = js_skip(s))) return rc;
        }
        if (rc < 0) return -rc;
        if (!(h & HAS_IMG)) return js_fail(s, "a result needs \"image_id\"");
        if (!(h & HAS_CAT)) return js_fail(s, "a result needs \"category_id\"");
        if (!(h & HAS_SCORE)) return js_fail(s, "a result needs \"score\"");
        int32_t ii = coco_map_get(&gt->img_map, img);
        if (ii < 0 || !gt->img_declared[ii]) {
            if (flags & COCO_DT_DROP_UNKNOWN) {
                dt->dropped++;
                continue;
            }
            js_fail(s, "image id %lld is not in the ground truth's images", (long long)img);
            tk_err_hint(s->e, "pycocotools stops here too; drop such results (coco-eval --drop-unknown-images)");
            return TK_EDATA;
        }
        a->img = ii;
        a->cat = coco_map_get(&gt->cat_map, cat);
        (*has)[dt->nanns] = (uint8_t)h;
        dt->nanns++;
    }
    return rc < 0 ? -rc : 0;
}

// Per result: the checks of its mask, its area and box (toBbox, also kept for the IoU's box
// test), computed without keeping the decoded runs.
static int dt_finish_one(coco_dt *dt, size_t i, tk_err *e) {
    coco_dt_ann *a = &dt->anns[i];
    const coco_gt *gt = dt->gt;
    double *rbb = dt->rbb + 4 * i;
    uint32_t area = 0;
    int rc;
    if (a->seg.kind == SEG_STRING) {
        uint64_t tot;
        if ((rc = coco_rle_string_stats(dt->st.buf + a->seg.off, a->seg.n, a->seg.h, a->seg.w, &area, &tot, rbb, e)))
            return rc;
        if (tot != (uint64_t)a->seg.h * a->seg.w)
            return tk_err_set(e, TK_EDATA, "RLE counts sum to %llu pixels, the mask has %ux%u = %llu",
                              (unsigned long long)tot, a->seg.h, a->seg.w, (unsigned long long)a->seg.h * a->seg.w);
    } else if (a->seg.kind == SEG_COUNTS) {
        coco_rle r;
        if ((rc = check_rle(&dt->st, &a->seg, &r, e))) return rc;
        area = coco_rle_area(&r);
        coco_rle_to_bbox(&r, rbb);
    } else if (a->seg.kind == SEG_POLY) { // our extension: pycocotools' loadRes cannot take these
        uint32_t h = gt->img_h[a->img], w = gt->img_w[a->img];
        if ((rc = coco_seg_to_rle(&dt->st, &a->seg, h, w, &dt->owned[i], e))) return rc;
        area = coco_rle_area(&dt->owned[i]);
        coco_rle_to_bbox(&dt->owned[i], rbb);
    } else
        return 0;
    if (!dt->has_bbox_branch) {
        a->area = area;
        if (!(a->bbox[2] >= 0)) memcpy(a->bbox, rbb, 4 * sizeof *rbb); // no box given
    }
    return 0;
}

int coco_dt_check_empty(const coco_dt *dt, int flags, const char *allow, tk_err *e) {
    if (dt->nanns || (flags & COCO_DT_ALLOW_EMPTY)) return 0;
    tk_err_set(e, TK_EDATA, "the result list is empty%s",
               dt->dropped ? " after dropping results for unknown images" : "");
    tk_err_where(e, "%s", dt->name);
    tk_err_hint(e, "pycocotools fails on this too; %s scores it as no detections", allow);
    return TK_EDATA;
}

int coco_dt_index(coco_dt *dt, tk_err *e) {
    return group_by_image(dt->gt->nimg, dt->nanns, dt->anns, sizeof(*dt->anns), offsetof(coco_dt_ann, img),
                          offsetof(coco_dt_ann, cat), dt->gt->cat_id, &dt->img_start, &dt->by_img, e);
}

int coco_dt_parse(const coco_gt *gt, char *buf, size_t len, const char *name, int flags,
                  int n_threads, coco_dt **out, tk_err *e) {
    coco_dt *dt = calloc(1, sizeof *dt);
    if (!dt) {
        free(buf);
        return tk_err_errno(e, ENOMEM, "%s", name);
    }
    snprintf(dt->name, sizeof dt->name, "%s", name);
    dt->gt = gt;
    dt->st.buf = buf;
    dt->st.len = len;
    jscan s;
    js_init(&s, buf, len, dt->name, e);
    uint8_t *has = NULL;
    size_t cap_has = 0;
    int rc = parse_dt_list(&s, dt, flags, &has, &cap_has);
    if (!rc) rc = js_end(&s);
    if (!rc) rc = coco_dt_check_empty(dt, flags, "coco-eval --allow-empty", e);
    if (!rc && dt->nanns) {
        dt->has_bbox_branch = (has[0] & HAS_BBOX) != 0;
        for (size_t i = 0; i < dt->nanns; i++) {
            coco_dt_ann *a = &dt->anns[i];
            const char *miss = dt->has_bbox_branch ? (has[i] & HAS_BBOX ? NULL : "bbox")
                                                   : (has[i] & HAS_SEG ? NULL : "segmentation");
            if (!dt->has_bbox_branch && !(has[0] & HAS_SEG)) miss = "bbox\" or \"segmentation";
            if (miss) {
                tk_err_set(e, TK_EDATA, "result has no \"%s\" (the first result decides whether results are boxes or masks)", miss);
                tk_err_where(e, "%s: $[%u]", name, a->file_idx);
                rc = TK_EDATA;
                break;
            }
            if (dt->has_bbox_branch) a->area = a->bbox[2] * a->bbox[3];
            else if (!(has[i] & HAS_BBOX)) a->bbox[2] = -1; // to be derived from the mask
        }
    }
    free(has);
    if (!rc && dt->nanns) {
        dt->owned = calloc(dt->nanns, sizeof *dt->owned);
        dt->rbb = calloc(dt->nanns * 4, sizeof *dt->rbb);
        if (!dt->owned || !dt->rbb) rc = tk_err_errno(e, ENOMEM, "%s", name);
    }
    if (!rc && dt->nanns) {
        // masks are checked (and measured) in parallel; the first failing result by index is
        // reported, so the message does not depend on the thread count
        size_t bad = SIZE_MAX;
        long n = (long)dt->nanns;
#pragma omp parallel for schedule(dynamic, 1024) num_threads(n_threads > 0 ? n_threads : omp_get_max_threads())
        for (long i = 0; i < n; i++) {
            tk_err le;
            if (dt_finish_one(dt, (size_t)i, &le)) {
#pragma omp critical(coco_dt_bad)
                if ((size_t)i < bad) bad = (size_t)i;
            }
        }
        if (bad != SIZE_MAX) {
            coco_rle_free(&dt->owned[bad]);
            rc = dt_finish_one(dt, bad, e);
            char what[sizeof e->what];
            memcpy(what, e->what, sizeof what);
            tk_err_set(e, rc ? rc : TK_EINTERNAL, "segmentation: %.400s", what);
            tk_err_where(e, "%s: $[%u].segmentation", name, dt->anns[bad].file_idx);
            rc = rc ? rc : TK_EINTERNAL;
        }
    }
    if (!rc) rc = coco_dt_index(dt, e);
    if (rc) {
        coco_dt_free(dt);
        return rc;
    }
    *out = dt;
    return 0;
}

int coco_dt_load(const coco_gt *gt, const char *path, int flags, int n_threads, coco_dt **out,
                 tk_err *e) {
    char *buf;
    size_t len;
    int rc = coco_read_file(path, &buf, &len, e);
    return rc ? rc : coco_dt_parse(gt, buf, len, path, flags, n_threads, out, e);
}
