// SSD300's input pipeline (data.h): the reference's SSDCropping, flip, resize, colour jitter and
// normalisation over prep coco's records, keyed random draws, pthreads over a batch.
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "engine/data.h"
#include "image/codec.h"
#include "image/image.h"
#include "img_resize.h"
#include "tks/tks.h"
#include "workloads/ssd/data.h"

// The stream word of SSD's augmentation: TK_RNG_AUGMENT tagged, so that it never shares a
// counter with ResNet's (lib/image/transform.c), whose third word is TK_RNG_AUGMENT itself.
#define SSD_RNG_STREAM (TK_RNG_AUGMENT | 0x55D00000u)
#define SSD_BLOCK_CROP 16u       // the crop's rounds draw from here on

void ssd_data_opts_default(ssd_data_opts *o) {
    static const float mean[3] = {0.485f, 0.456f, 0.406f}, std[3] = {0.229f, 0.224f, 0.225f};
    *o = (ssd_data_opts){.size = 300, .max_boxes = 200, .crop_tries = 1, .crop = 1, .flip = 1, .jitter = 1,
                         .brightness = 0.125, .contrast = 0.5, .saturation = 0.5, .hue = 0.05, .threads = 1,
                         .batch = 32, .shuffle = 1};
    memcpy(o->mean, mean, sizeof mean);
    memcpy(o->std, std, sizeof std);
}

double ssd_crop_min_iou(int k) {
    static const double t[SSD_CROP_OPTIONS] = {0, 0.1, 0.3, 0.5, 0.7, 0.9, -INFINITY};
    return k >= 0 && k < SSD_CROP_OPTIONS ? t[k] : 0;
}

// ---- random draws ----

void ssd_rng_init(ssd_rng *r, uint64_t seed, uint32_t epoch, uint32_t rec, uint32_t block) {
    *r = (ssd_rng){.seed = seed, .epoch = epoch, .rec = rec, .block = block, .used = 4};
}

uint32_t ssd_rng_u32(ssd_rng *r) {
    if (r->used == 4) {
        tk_philox_ctr c = {{r->rec, r->epoch, SSD_RNG_STREAM, r->block++}};
        tk_philox_key k = {{(uint32_t)r->seed, (uint32_t)(r->seed >> 32)}};
        tk_philox_ctr o = tk_philox4x32(c, k);
        memcpy(r->w, o.v, sizeof r->w);
        r->used = 0;
    }
    return r->w[r->used++];
}

double ssd_rng_unit(ssd_rng *r) {
    uint32_t hi = ssd_rng_u32(r);
    return tk_u64_to_unit(hi, ssd_rng_u32(r));
}

// Python's random.uniform(a, b): a + (b - a) * random().
double ssd_rng_uniform(ssd_rng *r, double lo, double hi) { return lo + (hi - lo) * ssd_rng_unit(r); }

// ---- SSDCropping ----

int ssd_crop_accepts(const float *boxes, int n, double min_iou, double left, double top, double w, double h) {
    // calc_iou_tensor(bboxes, tensor([[left, top, right, bottom]])): float32 throughout
    const float cl = (float)left, ct = (float)top, cr = (float)(left + w), cb = (float)(top + h);
    const float carea = (cr - cl) * (cb - ct);
    int center = 0;
    for (int i = 0; i < n; i++) {
        const float *b = boxes + 4 * i;
        float dx = fminf(b[2], cr) - fmaxf(b[0], cl), dy = fminf(b[3], cb) - fmaxf(b[1], ct);
        float inter = (dx < 0 ? 0 : dx) * (dy < 0 ? 0 : dy);
        float iou = inter / ((b[2] - b[0]) * (b[3] - b[1]) + carea - inter);
        // (ious > min_iou).all(): a NaN IoU compares false, as in torch
        if (!(iou > (float)min_iou)) return 0; // torch compares in the tensor's float32
        float xc = 0.5f * (b[0] + b[2]), yc = 0.5f * (b[1] + b[3]);
        if (xc > cl && xc < cr && yc > ct && yc < cb) center = 1;
    }
    return center;
}

void ssd_crop_choose(ssd_rng *r, const float *boxes, int n, int W, int H, int tries, ssd_crop *c) {
    int round = 1;
    for (; round <= SSD_CROP_MAX_ROUNDS; round++) {
        // random.choice over the 7 options
        int k = (int)(ssd_rng_unit(r) * SSD_CROP_OPTIONS);
        if (k == 0) break;
        double min_iou = ssd_crop_min_iou(k);
        for (int t = 0; t < tries; t++) {
            double w = ssd_rng_uniform(r, 0.3, 1.0), h = ssd_rng_uniform(r, 0.3, 1.0);
            if (w / h < 0.5 || w / h > 2) continue;
            double left = ssd_rng_uniform(r, 0, 1.0 - w), top = ssd_rng_uniform(r, 0, 1.0 - h);
            if (!ssd_crop_accepts(boxes, n, min_iou, left, top, w, h)) continue;
            double right = left + w, bottom = top + h;
            *c = (ssd_crop){k, round, left, top, w, h, right, bottom, (int)(left * W), (int)(top * H), (int)(right * W),
                            (int)(bottom * H)};
            // a crop keeps at least a pixel (PIL would fail on an empty one in the reference:
            // only an image under 4 pixels a side can get there)
            if (c->x1 <= c->x0) c->x1 = c->x0 < W ? c->x0 + 1 : W, c->x0 = c->x1 - 1;
            if (c->y1 <= c->y0) c->y1 = c->y0 < H ? c->y0 + 1 : H, c->y0 = c->y1 - 1;
            return;
        }
    }
    *c = (ssd_crop){0, round > SSD_CROP_MAX_ROUNDS ? SSD_CROP_MAX_ROUNDS : round, 0, 0, 1, 1, 1, 1, 0, 0, W, H};
}

int ssd_crop_boxes(const ssd_crop *c, const float *boxes, const int32_t *labels, int n, float *ob, int32_t *ol) {
    if (c->option == 0) {
        memmove(ob, boxes, (size_t)n * 4 * sizeof *ob);
        memmove(ol, labels, (size_t)n * sizeof *ol);
        return n;
    }
    const float l = (float)c->left, t = (float)c->top, r = (float)c->right, b = (float)c->bottom;
    const float w = (float)c->w, h = (float)c->h;
    int m = 0;
    for (int i = 0; i < n; i++) {
        const float *x = boxes + 4 * i;
        float xc = 0.5f * (x[0] + x[2]), yc = 0.5f * (x[1] + x[3]);
        if (!(xc > l && xc < r && yc > t && yc < b)) continue;
        float x1 = x[0] < l ? l : x[0], y1 = x[1] < t ? t : x[1];
        float x2 = x[2] > r ? r : x[2], y2 = x[3] > b ? b : x[3];
        float *o = ob + 4 * m;
        o[0] = (x1 - l) / w, o[1] = (y1 - t) / h, o[2] = (x2 - l) / w, o[3] = (y2 - t) / h;
        ol[m++] = labels[i];
    }
    return m;
}

void ssd_flip_boxes(float *boxes, int n) {
    for (int i = 0; i < n; i++) {
        float *b = boxes + 4 * i, x1 = b[0];
        b[0] = 1.0f - b[2];
        b[2] = 1.0f - x1;
    }
}

void ssd_jitter_draw(ssd_rng *r, const ssd_data_opts *o, tk_img_jitter *j) {
    for (int i = 0; i < 4; i++) j->order[i] = i;
    for (int i = 3; i > 0; i--) { // a uniform permutation (torch.randperm(4)'s distribution)
        int k = (int)(ssd_rng_unit(r) * (i + 1)), t = j->order[i];
        j->order[i] = j->order[k];
        j->order[k] = t;
    }
    j->brightness = ssd_rng_uniform(r, fmax(0, 1 - o->brightness), 1 + o->brightness);
    j->contrast = ssd_rng_uniform(r, fmax(0, 1 - o->contrast), 1 + o->contrast);
    j->saturation = ssd_rng_uniform(r, fmax(0, 1 - o->saturation), 1 + o->saturation);
    j->hue = ssd_rng_uniform(r, -o->hue, o->hue);
}

void ssd_normalize(const uint8_t *px, int S, const ssd_data_opts *o, float *out) {
    const size_t n = (size_t)S * S;
    // ToTensor: p / 255 in float32; Normalize: (x - mean) / std: of a byte, so a table per channel
    float t[3][256];
    for (int c = 0; c < 3; c++)
        for (int p = 0; p < 256; p++) t[c][p] = ((float)p / 255.0f - o->mean[c]) / o->std[c];
    if (o->chw)
        for (int c = 0; c < 3; c++)
            for (size_t i = 0; i < n; i++) out[(size_t)c * n + i] = t[c][px[3 * i + c]];
    else
        for (size_t i = 0; i < n; i++) {
            out[3 * i] = t[0][px[3 * i]];
            out[3 * i + 1] = t[1][px[3 * i + 1]];
            out[3 * i + 2] = t[2][px[3 * i + 2]];
        }
}

// ---- the records ----

enum { F_JPEG, F_ID, F_H, F_W, F_BOXES, F_LABELS, NF };

struct ssd_dataset {
    int64_t n, cap;
    uint8_t *bytes;              // the JPEGs, record i at [joff[i], joff[i + 1])
    int64_t nbytes, bcap;
    uint64_t *joff;
    int64_t *boff;               // boxes of record i: [boff[i], boff[i + 1])
    float *boxes;                // x1 y1 x2 y2 pixels
    int32_t *labels;
    int64_t nboxes, boxcap;
    int64_t *id;
    int32_t *hw;                 // height, width
};

// Grows *cap (doubling from 1024) to at least need and each of the k arrays p[i] (elements of
// elem[i] bytes) to it.
static int grow(void **p[], const size_t elem[], int k, int64_t need, int64_t *cap, tk_err *e) {
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 1024;
    while (nc < need) nc *= 2;
    for (int i = 0; i < k; i++) {
        void *np = realloc(*p[i], (size_t)nc * elem[i]);
        if (!np) return tk_err_errno(e, ENOMEM, "out of host memory for the COCO records");
        *p[i] = np;
    }
    *cap = nc;
    return 0;
}

// Room for recs records (and the offset after the last), boxes boxes and bytes JPEG bytes.
static int reserve(ssd_dataset *d, int64_t recs, int64_t boxes, int64_t bytes, tk_err *e) {
    void **rp[] = {(void **)&d->joff, (void **)&d->boff, (void **)&d->id, (void **)&d->hw};
    const size_t re[] = {sizeof *d->joff, sizeof *d->boff, sizeof *d->id, 2 * sizeof *d->hw};
    void **bp[] = {(void **)&d->boxes, (void **)&d->labels}, **jp[] = {(void **)&d->bytes};
    const size_t be[] = {4 * sizeof *d->boxes, sizeof *d->labels}, je[] = {1};
    TRY(grow(rp, re, 4, recs + 1, &d->cap, e));
    TRY(grow(bp, be, 2, boxes, &d->boxcap, e));
    return grow(jp, je, 1, bytes, &d->bcap, e);
}

void ssd_dataset_free(ssd_dataset *d) {
    if (!d) return;
    free(d->bytes), free(d->joff), free(d->boff), free(d->boxes), free(d->labels), free(d->id), free(d->hw);
    free(d);
}

int64_t ssd_dataset_count(const ssd_dataset *d) { return d->n; }

void ssd_dataset_record(const ssd_dataset *d, int64_t i, ssd_record *r) {
    *r = (ssd_record){.jpeg = d->bytes + d->joff[i], .jpeg_size = d->joff[i + 1] - d->joff[i], .image_id = d->id[i],
                      .height = d->hw[2 * i], .width = d->hw[2 * i + 1], .nbox = (int)(d->boff[i + 1] - d->boff[i]),
                      .boxes = d->boxes + 4 * d->boff[i], .labels = d->labels + d->boff[i]};
}

static int schema_fields(const tks_schema *s, const char *path, int at[NF], tk_err *e) {
    static const struct { const char *name; tks_dtype t; int ragged, cols; } want[NF] = {
        {"jpeg", TKS_U8, 1, 0},   {"image_id", TKS_I64, 0, 0}, {"height", TKS_I32, 0, 0},
        {"width", TKS_I32, 0, 0}, {"boxes", TKS_F32, 1, 4},    {"labels", TKS_I32, 1, 0}};
    for (int i = 0; i < NF; i++) {
        int k = tks_schema_field(s, want[i].name);
        const tks_field *f = k >= 0 ? &s->f[k] : NULL;
        int ok = f && f->dtype == want[i].t && f->ragged == want[i].ragged &&
                 (want[i].ragged ? f->ndim == (want[i].cols ? 2 : 1) && (!want[i].cols || f->shape[1] == want[i].cols)
                                 : f->ndim == 0);
        if (!ok) {
            tk_err_set(e, TK_EDATA, "not COCO records: expected the fields jpeg u8 [-1], image_id i64, height i32, "
                                    "width i32, boxes f32 [-1, 4], labels i32 [-1] (field \"%s\")", want[i].name);
            tk_err_where(e, "%s", path);
            return tk_err_hint(e, "make the records with prep coco");
        }
        at[i] = k;
    }
    return 0;
}

static int bad_record(tk_err *e, const char *path, uint64_t rec, const char *what) {
    tk_err_set(e, TK_EDATA, "%s", what);
    return tk_err_where(e, "%s: record %llu", path, (unsigned long long)rec);
}

// Frame fr's records appended to d, each checked.
static int add_frame(ssd_dataset *d, const tks_frame *fr, const int at[NF], const char *path, uint64_t rec0, tk_err *e) {
    const int64_t n = (int64_t)fr->n;
    const uint64_t *jo = fr->col[at[F_JPEG]].off, *bo = fr->col[at[F_BOXES]].off, *lo = fr->col[at[F_LABELS]].off;
    const int64_t nb = (int64_t)((bo[n] - bo[0]) / 16);
    TRY(reserve(d, d->n + n, d->nboxes + nb, (int64_t)(d->nbytes + (jo[n] - jo[0])), e));
    const int64_t *ids = fr->col[at[F_ID]].data;
    const int32_t *hs = fr->col[at[F_H]].data, *ws = fr->col[at[F_W]].data;
    const float *boxes = fr->col[at[F_BOXES]].data;
    const int32_t *labels = fr->col[at[F_LABELS]].data;
    for (int64_t j = 0; j < n; j++) {
        uint64_t rec = rec0 + (uint64_t)j;
        int64_t k = (int64_t)((bo[j + 1] - bo[j]) / 16);
        if ((int64_t)((lo[j + 1] - lo[j]) / 4) != k) return bad_record(e, path, rec, "boxes and labels of different counts");
        if (hs[j] < 1 || ws[j] < 1 || hs[j] > 65500 || ws[j] > 65500)
            return bad_record(e, path, rec, "height or width outside 1..65500");
        const float *b = boxes + bo[j] / 4;
        const int32_t *l = labels + lo[j] / 4;
        for (int64_t i = 0; i < k; i++) {
            if (!isfinite(b[4 * i]) || !isfinite(b[4 * i + 1]) || !isfinite(b[4 * i + 2]) || !isfinite(b[4 * i + 3]))
                return bad_record(e, path, rec, "a box that is not finite");
            if (l[i] < 1) return bad_record(e, path, rec, "a label below 1 (0 is the background)");
        }
        if (d->n == (int64_t)UINT32_MAX) return bad_record(e, path, rec, "more than 2^32 - 1 records");
        d->joff[d->n] = d->nbytes;
        memcpy(d->bytes + d->nbytes, (const uint8_t *)fr->col[at[F_JPEG]].data + jo[j], jo[j + 1] - jo[j]);
        d->nbytes += jo[j + 1] - jo[j];
        d->boff[d->n] = d->nboxes;
        memcpy(d->boxes + 4 * d->nboxes, b, (size_t)k * 16);
        memcpy(d->labels + d->nboxes, l, (size_t)k * 4);
        d->nboxes += k;
        d->id[d->n] = ids[j];
        d->hw[2 * d->n] = hs[j], d->hw[2 * d->n + 1] = ws[j];
        d->n++;
        d->joff[d->n] = d->nbytes, d->boff[d->n] = d->nboxes;
    }
    return 0;
}

static int load_file(ssd_dataset *d, const char *path, tk_err *e) {
    tks_reader *r;
    TRY(tks_reader_open(&r, path, e));
    int at[NF];
    int rc = schema_fields(tks_reader_schema(r), path, at, e);
    tks_frame fr = {0};
    uint64_t rec = 0;
    for (size_t i = 0; !rc && i < tks_reader_nframes(r); i++) {
        if ((rc = tks_reader_read(r, i, &fr, e))) break;
        rc = add_frame(d, &fr, at, path, rec, e);
        rec += fr.n;
    }
    tks_frame_free(&fr);
    tks_reader_close(r);
    return rc;
}

int ssd_dataset_load(char *const *paths, int npaths, ssd_dataset **out, tk_err *e) {
    *out = NULL;
    char **list;
    int n;
    TRY(tk_data_paths(paths, npaths, &list, &n, e));
    ssd_dataset *d = calloc(1, sizeof *d);
    int rc = d ? 0 : tk_err_errno(e, ENOMEM, "out of host memory");
    if (!rc) rc = reserve(d, 0, 0, 0, e);
    if (!rc) d->joff[0] = 0, d->boff[0] = 0;
    for (int i = 0; !rc && i < n; i++) rc = load_file(d, list[i], e);
    tk_data_paths_free(list, n);
    if (rc) {
        ssd_dataset_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

// ---- one sample ----

void ssd_scratch_free(ssd_scratch *s) {
    tk_img_scratch_free(&s->dec);
    free(s->img), free(s->nb), free(s->nl);
    memset(s, 0, sizeof *s);
}

static int room(void **p, size_t *cap, size_t need, tk_err *e) {
    if (need <= *cap) return 0;
    void *n = realloc(*p, need);
    if (!n) return tk_err_errno(e, ENOMEM, "out of memory for %zu bytes of image buffers", need);
    *p = n;
    *cap = need;
    return 0;
}

// The pixels [c->x0, c->x1) x [c->y0, c->y1) of the JPEG, resized to S x S bytes (Pillow's
// bilinear: lib/image's resampling, rounded to bytes), mirrored when flip, into s->img; decoded at
// the DCT scale o->dct allows (lib/image/image.h tk_img_box_plan_make, as ResNet's training).
static int decode_resize(const ssd_record *R, const ssd_crop *c, int flip, const ssd_data_opts *o, ssd_scratch *s,
                         tk_err *e) {
    const int S = o->size;
    tk_jpeg_info info;
    TRY(tk_jpeg_info_read(R->jpeg, R->jpeg_size, &info, e));
    if (info.width != R->width || info.height != R->height)
        return tk_err_set(e, TK_EDATA, "the JPEG is %d x %d pixels, the record says %d x %d (width x height)",
                          info.width, info.height, R->width, R->height);
    tk_img_box_plan p;
    TRY(ssd_decode_plan(c, info.width, info.height, o, &p, e));
    size_t imgcap = s->img ? (size_t)S * S * 3 : 0;
    int rc = room((void **)&s->img, &imgcap, (size_t)S * S * 3, e);
    tk_img_rs_out ro = {.out_w = S, .out_h = S, .mean = {0, 0, 0}, .std = {1, 1, 1}, .dtype = TK_IMG_U8};
    if (!rc) rc = tk_img_decode_box(R->jpeg, R->jpeg_size, &p, flip, &ro, &s->dec, s->img, e);
    tk_img_box_plan_free(&p);
    return rc;
}

int ssd_decode_plan(const ssd_crop *c, int W, int H, const ssd_data_opts *o, tk_img_box_plan *p, tk_err *e) {
    tk_img_geom g = {.x0 = c->x0, .y0 = c->y0, .x1 = c->x1, .y1 = c->y1, .rw = o->size, .rh = o->size};
    return tk_img_box_plan_make(W, H, &g, o->size, o->size, o->dct, p, e);
}

int ssd_sample(const ssd_dataset *d, const ssd_data_opts *o, int train, uint32_t epoch, int64_t rec, ssd_scratch *s,
               const ssd_batch *out, int k, ssd_sample_info *info, tk_err *e) {
    ssd_record R;
    ssd_dataset_record(d, rec, &R);
    const int S = o->size, M = o->max_boxes, n = R.nbox;
    if (n > s->nbcap) {
        float *nb = realloc(s->nb, (size_t)n * 4 * sizeof *nb);
        if (nb) s->nb = nb;
        int32_t *nl = nb ? realloc(s->nl, (size_t)n * sizeof *nl) : NULL;
        if (nl) s->nl = nl;
        if (!nb || !nl) return tk_err_errno(e, ENOMEM, "out of memory for %d boxes", n);
        s->nbcap = n;
    }
    // COCODetection's l / wtot, ...: double, then a float32 tensor
    for (int i = 0; i < 4 * n; i++)
        s->nb[i] = (float)((double)R.boxes[i] / (i % 2 ? R.height : R.width));
    ssd_sample_info si = {.crop = {0, 0, 0, 0, 1, 1, 1, 1, 0, 0, R.width, R.height}};
    if (train) {
        ssd_rng r;
        ssd_rng_init(&r, o->seed, epoch, (uint32_t)rec, 0);
        si.flip = o->flip && ssd_rng_unit(&r) < 0.5;
        if (o->jitter) ssd_jitter_draw(&r, o, &si.jitter);
        if (o->crop) {
            ssd_rng_init(&r, o->seed, epoch, (uint32_t)rec, SSD_BLOCK_CROP);
            ssd_crop_choose(&r, s->nb, n, R.width, R.height, o->crop_tries, &si.crop);
        }
    }
    int m = ssd_crop_boxes(&si.crop, s->nb, R.labels, n, s->nb, s->nl);
    if (m > M) {
        tk_err_set(e, TK_EDATA, "image %lld has %d boxes, more than max_boxes %d", (long long)R.image_id, m, M);
        return tk_err_where(e, "record %lld", (long long)rec);
    }
    if (si.flip) ssd_flip_boxes(s->nb, m);
    float *ob = out->boxes + (size_t)k * M * 4;
    int32_t *ol = out->labels + (size_t)k * M;
    memset(ob, 0, (size_t)M * 4 * sizeof *ob);
    memset(ol, 0, (size_t)M * sizeof *ol);
    memcpy(ob, s->nb, (size_t)m * 4 * sizeof *ob);
    memcpy(ol, s->nl, (size_t)m * sizeof *ol);
    out->nbox[k] = m;
    out->image_id[k] = R.image_id;
    out->size[2 * k] = R.height, out->size[2 * k + 1] = R.width;
    int rc = decode_resize(&R, &si.crop, si.flip, o, s, e);
    if (rc) return tk_err_where(e, "record %lld (image %lld)", (long long)rec, (long long)R.image_id);
    if (out->image_u8) { // the jitter and the normalisation left to kernels/img_jitter.h
        memcpy(out->image_u8 + (size_t)k * S * S * 3, s->img, (size_t)S * S * 3);
        out->jobs[k] = train && o->jitter ? tk_img_jitter_job_of(&si.jitter) : TK_IMG_JITTER_NONE;
    } else {
        if (train && o->jitter) tk_img_jitter_apply(s->img, (size_t)S * S, &si.jitter);
        ssd_normalize(s->img, S, o, out->image + (size_t)k * S * S * 3);
    }
    if (info) *info = si;
    return 0;
}

// ---- a batch over threads ----

typedef struct {
    const ssd_dataset *d;
    const ssd_data_opts *o;
    int train;
    uint32_t epoch;
    const int64_t *rec;
    int n, threads, t;
    const ssd_batch *out;
    int bad;                     // the first failing sample of this thread (-1 none)
    tk_err err;
} work;

static void *worker(void *arg) {
    work *w = arg;
    ssd_scratch s = {0};
    w->bad = -1;
    for (int k = w->t; k < w->n; k += w->threads)
        if (ssd_sample(w->d, w->o, w->train, w->epoch, w->rec[k], &s, w->out, k, NULL, &w->err)) {
            w->bad = k;
            break;
        }
    ssd_scratch_free(&s);
    return NULL;
}

int ssd_samples(const ssd_dataset *d, const ssd_data_opts *o, int train, uint32_t epoch, const int64_t *rec, int n,
                const ssd_batch *out, tk_err *e) {
    int T = o->threads < 1 ? 1 : o->threads > n ? (n ? n : 1) : o->threads;
    work *w = calloc((size_t)T, sizeof *w);
    pthread_t *tid = calloc((size_t)T, sizeof *tid);
    int *started = calloc((size_t)T, sizeof *started);
    if (!w || !tid || !started) {
        free(w), free(tid), free(started);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    for (int t = 0; t < T; t++) w[t] = (work){d, o, train, epoch, rec, n, T, t, out, -1, {0}};
    for (int t = 1; t < T; t++) started[t] = pthread_create(&tid[t], NULL, worker, &w[t]) == 0;
    // threads that did not start: their samples run here, in order
    for (int t = 0; t < T; t++)
        if (t == 0 || !started[t]) worker(&w[t]);
    for (int t = 1; t < T; t++)
        if (started[t]) pthread_join(tid[t], NULL);
    int bad = -1, rc = 0;
    for (int t = 0; t < T; t++)
        if (w[t].bad >= 0 && (bad < 0 || w[t].bad < w[bad].bad)) bad = t;
    if (bad >= 0) {
        *e = w[bad].err;
        rc = e->code;
    }
    free(w), free(tid), free(started);
    return rc;
}

// ---- the training reader ----

struct ssd_reader {
    ssd_data_opts o;
    const ssd_dataset *d;
    int rank, world, b;
    int64_t *perm, perm_epoch, *rec;
};

int ssd_epoch_order(const ssd_data_opts *o, int64_t n, uint32_t epoch, int64_t *perm, tk_err *e) {
    (void)e;
    for (int64_t i = 0; i < n; i++) perm[i] = i;
    if (!o->shuffle) return 0;
    for (int64_t i = n - 1; i > 0; i--) {
        tk_philox_ctr c = tk_philox_draw(o->seed, TK_RNG_SHUFFLE, (uint64_t)epoch << 40 | (uint64_t)i);
        int64_t j = (int64_t)((((uint64_t)c.v[0] << 32) | c.v[1]) % (uint64_t)(i + 1));
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return 0;
}

int ssd_reader_open(const ssd_data_opts *o, const ssd_dataset *d, int rank, int world, ssd_reader **out, tk_err *e) {
    *out = NULL;
    if (world < 1 || rank < 0 || rank >= world || o->batch < 1 || o->batch % world)
        return tk_err_set(e, TK_EUSAGE, "ssd: a global batch of %d over %d ranks: must divide evenly", o->batch, world);
    if (o->size < 1 || o->size > 4096 || o->max_boxes < 1 || o->crop_tries < 1)
        return tk_err_set(e, TK_EUSAGE, "ssd: size 1..4096, max_boxes and crop_tries >= 1");
    if (d->n < o->batch)
        return tk_err_set(e, TK_EDATA, "ssd: %lld records, fewer than a global batch of %d", (long long)d->n, o->batch);
    ssd_reader *r = calloc(1, sizeof *r);
    if (r) *r = (ssd_reader){.o = *o, .d = d, .rank = rank, .world = world, .b = o->batch / world, .perm_epoch = -1};
    if (r) r->perm = malloc((size_t)d->n * sizeof *r->perm);
    if (r) r->rec = malloc((size_t)r->b * sizeof *r->rec);
    if (!r || !r->perm || !r->rec) {
        ssd_reader_close(r);
        return tk_err_errno(e, ENOMEM, "out of host memory");
    }
    *out = r;
    return 0;
}

void ssd_reader_close(ssd_reader *r) {
    if (!r) return;
    free(r->perm), free(r->rec), free(r);
}

int ssd_reader_per_rank(const ssd_reader *r) { return r->b; }

int ssd_reader_batch(ssd_reader *r, int64_t step, int64_t spe, const ssd_batch *out, tk_err *e) {
    const int64_t epoch = step / spe, i = step % spe, first = i * r->o.batch + (int64_t)r->rank * r->b;
    if (spe < 1 || step < 0 || first + r->b > r->d->n)
        return tk_err_set(e, TK_EINTERNAL, "ssd: batch %lld past the data", (long long)step);
    if (r->perm_epoch != epoch) {
        TRY(ssd_epoch_order(&r->o, r->d->n, (uint32_t)epoch, r->perm, e));
        r->perm_epoch = epoch;
    }
    for (int k = 0; k < r->b; k++) r->rec[k] = r->perm[first + k];
    return ssd_samples(r->d, &r->o, 1, (uint32_t)epoch, r->rec, r->b, out, e);
}

int ssd_eval_batch(const ssd_dataset *d, const ssd_data_opts *o, int64_t first, int n, const ssd_batch *out,
                   tk_err *e) {
    if (first < 0 || n < 0 || first + n > d->n)
        return tk_err_set(e, TK_EINTERNAL, "ssd: eval records [%lld, %lld) past the %lld records", (long long)first,
                          (long long)(first + n), (long long)d->n);
    int64_t *rec = malloc((size_t)(n ? n : 1) * sizeof *rec);
    if (!rec) return tk_err_errno(e, ENOMEM, "out of host memory");
    for (int k = 0; k < n; k++) rec[k] = first + k;
    int rc = ssd_samples(d, o, 0, 0, rec, n, out, e);
    free(rec);
    return rc;
}
