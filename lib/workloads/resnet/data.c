// ResNet's training data (resnet.h): .tks files read into memory once, an epoch order, and the
// decoding of each sample into the model's normalized NHWC input. Two record formats:
//   decoded: "image" u8 (H, W, 3) and "label" i16 or i32: images already decoded (a cached,
//            decoded dataset, or small synthetic sets for tests); training takes a random
//            image_size crop (a center crop for eval) and a random horizontal flip;
//   jpeg:    prep imagenet's schema ("jpeg" u8 [-1] ragged, "label" i16, ...): decoded by the
//            image decoder named by data.decoder (lib/image) with torchvision's RandomResizedCrop
//            and flip for training, resize + center crop for eval. Built only with lib/image and
//            the ragged .tks fields (the imagenet branch).
// Samples come out as 8-bit RGB (the model normalizes them on the device: fewer bytes to copy).
// The epoch order is a permutation of all records drawn from (seed, epoch); global batch i of an
// epoch is positions [i B, (i + 1) B) of it, and rank r decodes its b = B / world of them.
// Augmentation draws are keyed by (seed, epoch, record), so any loader thread makes the same
// batch for the same step.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "engine/data.h"
#include "tks/tks.h"
#include "workloads/resnet/resnet.h"

#if defined(TKS_RAGGED) && defined(__has_include)
#if __has_include("image/image.h")
#define RN_HAVE_JPEG 1
#include "image/image.h"
#endif
#endif

enum { RN_DATA_DECODED = 1, RN_DATA_JPEG = 2 };

typedef struct rn_dataset {
    int kind;
    int64_t n;
    int H, W;                    // decoded
    uint8_t *pix;                // decoded: n H W 3
    uint8_t *bytes;              // jpeg: the files' bytes, record i at [off[i], off[i + 1])
    uint64_t *off;
    size_t nbytes, cap;
    int32_t *label;
    int64_t capn;
    // The class numbering: prep imagenet's labels index the sorted synsets, and its schema meta
    // carries "synsets_crc32" of that list. Files without it (decoded records, older shards)
    // are not compared.
    int has_crc;
    uint32_t crc;
    char crc_file[4096];         // the first file that carries it
} rn_dataset;

static void ds_free(rn_dataset *d) {
    if (!d) return;
    free(d->pix);
    free(d->bytes);
    free(d->off);
    free(d->label);
    free(d);
}

static int grow(void **p, size_t need, size_t *cap, size_t elem, tk_err *e) {
    if (need <= *cap) return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need) nc *= 2;
    void *np = realloc(*p, nc * elem);
    if (!np) return tk_err_set(e, TK_EIO, "out of host memory for the images");
    *p = np;
    *cap = nc;
    return 0;
}

// Room for n more records.
static int reserve(rn_dataset *d, int64_t more, tk_err *e) {
    size_t capn = (size_t)d->capn, c2 = (size_t)d->capn, c3 = (size_t)d->capn;
    TRY(grow((void **)&d->label, (size_t)(d->n + more), &capn, sizeof(int32_t), e));
    if (d->kind == RN_DATA_DECODED) TRY(grow((void **)&d->pix, (size_t)(d->n + more), &c2, (size_t)d->H * d->W * 3, e));
    if (d->kind == RN_DATA_JPEG) TRY(grow((void **)&d->off, (size_t)(d->n + more + 1), &c3, sizeof(uint64_t), e));
    d->capn = (int64_t)capn;
    return 0;
}

static int label_at(const tks_field *f, const void *col, size_t j, int classes, int32_t *out, const char *path,
                    uint64_t rec, tk_err *e) {
    int64_t v = f->dtype == TKS_I16 ? ((const int16_t *)col)[j] : ((const int32_t *)col)[j];
    if (v < 0 || v >= classes) {
        tk_err_set(e, TK_EDATA, "record %llu: label %lld outside the model's %d classes", (unsigned long long)rec,
                   (long long)v, classes);
        tk_err_where(e, "%s", path);
        return tk_err_hint(e, "set model.classes to the data's class count");
    }
    *out = (int32_t)v;
    return 0;
}

// The format of a file's schema: its fields' indices, or TK_EDATA saying what is expected.
static int schema_kind(const tks_schema *s, const char *path, int *kind, int *fi, int *fl, tk_err *e) {
    int img = tks_schema_field(s, "image"), jpg = tks_schema_field(s, "jpeg"), lab = tks_schema_field(s, "label");
    const tks_field *L = lab >= 0 ? &s->f[lab] : NULL;
    if (L && L->ndim == 0 && (L->dtype == TKS_I16 || L->dtype == TKS_I32)) {
        const tks_field *I = img >= 0 ? &s->f[img] : NULL;
        if (I && I->dtype == TKS_U8 && I->ndim == 3 && I->shape[2] == 3 && I->shape[0] > 0 && I->shape[1] > 0) {
            if (I->shape[0] > 16384 || I->shape[1] > 16384) {
                tk_err_set(e, TK_EDATA, "decoded images of %lld x %lld pixels: more than 16384 a side",
                           (long long)I->shape[1], (long long)I->shape[0]);
                return tk_err_where(e, "%s", path);
            }
            *kind = RN_DATA_DECODED, *fi = img, *fl = lab;
            return 0;
        }
#ifdef RN_HAVE_JPEG
        if (jpg >= 0 && s->f[jpg].ragged && s->f[jpg].dtype == TKS_U8) {
            *kind = RN_DATA_JPEG, *fi = jpg, *fl = lab;
            return 0;
        }
#endif
    }
    if (jpg >= 0) {
#ifndef RN_HAVE_JPEG
        tk_err_set(e, TK_EDATA, "JPEG records (prep imagenet), but this trainkit was built without the image decoders");
        tk_err_where(e, "%s", path);
        return tk_err_hint(e, "use decoded records (\"image\" u8 (H, W, 3), \"label\")");
#endif
    }
    tk_err_set(e, TK_EDATA, "not ResNet data: expected the fields \"image\" u8 (H, W, 3) or \"jpeg\" u8 [-1] (prep "
                            "imagenet), and \"label\" i16 or i32");
    return tk_err_where(e, "%s", path);
}

// The file's "synsets_crc32" (8 hex digits in its schema meta): *has 0 when it has none.
static int meta_crc(const tks_schema *s, const char *path, int *has, uint32_t *crc, tk_err *e) {
    *has = 0;
    json_t *m = s->meta_json[0] ? json_loads(s->meta_json, 0, NULL) : NULL;
    json_t *v = json_object_get(m, "synsets_crc32");
    const char *t = json_string_value(v);
    char *end = NULL;
    unsigned long c = t ? strtoul(t, &end, 16) : 0;
    int ok = !v || (t && strlen(t) == 8 && !*end && t[0] != '-' && t[0] != '+');
    json_decref(m);
    if (!ok) {
        tk_err_set(e, TK_EDATA, "schema meta synsets_crc32: expected 8 hex digits");
        return tk_err_where(e, "%s", path);
    }
    *has = v != NULL;
    *crc = (uint32_t)c;
    return 0;
}

// Two files whose labels number the classes differently (prep imagenet's synsets_crc32): path's
// and the other's, which `other` names ("the training data FILE").
static int crc_mismatch(const char *path, uint32_t crc, const char *other, uint32_t other_crc, tk_err *e) {
    tk_err_set(e, TK_EDATA, "synsets_crc32 %08x, but %s has %08x: the two number the classes differently", crc,
               other, other_crc);
    tk_err_where(e, "%s", path);
    return tk_err_hint(e, "prep imagenet every split with the same --synsets FILE");
}

static int load_file(rn_dataset *d, const char *path, int classes, tk_err *e) {
    tks_reader *r;
    TRY(tks_reader_open(&r, path, e));
    const tks_schema *s = tks_reader_schema(r);
    int kind = 0, fi = -1, fl = -1, rc = schema_kind(s, path, &kind, &fi, &fl, e);
    int has = 0;
    uint32_t crc = 0;
    if (!rc) rc = meta_crc(s, path, &has, &crc, e);
    if (!rc && has && d->has_crc && crc != d->crc) {
        char other[4200];
        snprintf(other, sizeof other, "%s (read before it)", d->crc_file);
        rc = crc_mismatch(path, crc, other, d->crc, e);
    }
    if (!rc && has && !d->has_crc) {
        d->has_crc = 1, d->crc = crc;
        snprintf(d->crc_file, sizeof d->crc_file, "%s", path);
    }
    if (!rc && d->kind && kind != d->kind) rc = tk_err_set(e, TK_EDATA, "%s: decoded and JPEG records mixed", path);
    if (!rc && kind == RN_DATA_DECODED) {
        int H = (int)s->f[fi].shape[0], W = (int)s->f[fi].shape[1];
        if (d->kind && (H != d->H || W != d->W))
            rc = tk_err_set(e, TK_EDATA, "%s: images of %dx%d after files of %dx%d", path, W, H, d->W, d->H);
        d->H = H, d->W = W;
    }
    d->kind = kind;
    uint64_t rec = 0;
    if (!rc && kind == RN_DATA_DECODED) {
        size_t mf = tks_reader_max_frame_records(r);
        void *cols[TKS_MAX_FIELDS] = {0};
        for (int f = 0; !rc && f < s->nfields; f++)
            if (!(cols[f] = malloc(mf * s->f[f].bytes + 1))) rc = tk_err_set(e, TK_EIO, "out of host memory");
        for (size_t i = 0; !rc && i < tks_reader_nframes(r); i++) {
            size_t n;
            if ((rc = tks_reader_read_frame(r, i, cols, &n, e)) || (rc = reserve(d, (int64_t)n, e))) break;
            memcpy(d->pix + (size_t)d->n * d->H * d->W * 3, cols[fi], n * s->f[fi].bytes);
            for (size_t j = 0; !rc && j < n; j++, rec++)
                rc = label_at(&s->f[fl], cols[fl], j, classes, &d->label[d->n + (int64_t)j], path, rec, e);
            d->n += (int64_t)n;
        }
        for (int f = 0; f < s->nfields; f++) free(cols[f]);
    }
#ifdef RN_HAVE_JPEG
    if (!rc && kind == RN_DATA_JPEG) {
        tks_frame fr = {0};
        for (size_t i = 0; !rc && i < tks_reader_nframes(r); i++) {
            if ((rc = tks_reader_read(r, i, &fr, e)) || (rc = reserve(d, (int64_t)fr.n, e))) break;
            const uint64_t *off = fr.col[fi].off;
            if ((rc = grow((void **)&d->bytes, d->nbytes + off[fr.n], &d->cap, 1, e))) break;
            memcpy(d->bytes + d->nbytes, fr.col[fi].data, off[fr.n]);
            for (size_t j = 0; !rc && j < fr.n; j++, rec++) {
                d->off[d->n + (int64_t)j] = d->nbytes + off[j];
                rc = label_at(&s->f[fl], fr.col[fl].data, j, classes, &d->label[d->n + (int64_t)j], path, rec, e);
            }
            d->nbytes += off[fr.n];
            d->n += (int64_t)fr.n;
            d->off[d->n] = d->nbytes;
        }
        tks_frame_free(&fr);
    }
#endif
    tks_reader_close(r);
    return rc;
}

static int ds_load(char *const *paths, int npaths, const rn_config *cfg, rn_dataset **out, tk_err *e) {
    *out = NULL;
    char **list;
    int n;
    TRY(tk_data_paths(paths, npaths, &list, &n, e));
    rn_dataset *d = calloc(1, sizeof *d);
    int rc = d ? 0 : tk_err_set(e, TK_EIO, "out of host memory");
    for (int i = 0; !rc && i < n; i++) rc = load_file(d, list[i], cfg->classes, e);
    if (!rc && d->kind == RN_DATA_DECODED && (d->H < cfg->image_size || d->W < cfg->image_size)) {
        rc = tk_err_set(e, TK_EDATA, "images of %dx%d, smaller than model.image_size %d", d->W, d->H, cfg->image_size);
        tk_err_where(e, "%s", list[0]);
    }
    tk_data_paths_free(list, n);
    if (rc) {
        ds_free(d);
        return rc;
    }
    *out = d;
    return 0;
}

// ---- decoding ----

// Random words for (epoch, record): the augmentation of decoded images.
static tk_philox_ctr aug(uint64_t seed, uint32_t epoch, int64_t rec) {
    return tk_philox_draw(seed, TK_RNG_SHUFFLE, (uint64_t)1 << 63 | (uint64_t)epoch << 40 | (uint64_t)rec);
}

// A decoded image's S x S window (random for training, centered for eval), flipped at random for
// training, into out.
static void decoded_one(const rn_dataset *d, const rn_config *cfg, int train, uint32_t epoch, int64_t rec,
                        uint8_t *out) {
    const int S = cfg->image_size;
    int ox = (d->W - S) / 2, oy = (d->H - S) / 2, flip = 0;
    if (train) {
        tk_philox_ctr r = aug(cfg->seed, epoch, rec);
        ox = (int)(r.v[0] % (uint32_t)(d->W - S + 1));
        oy = (int)(r.v[1] % (uint32_t)(d->H - S + 1));
        flip = cfg->flip && (r.v[2] & 1);
    }
    const uint8_t *img = d->pix + (size_t)rec * d->H * d->W * 3;
    for (int y = 0; y < S; y++) {
        const uint8_t *row = img + ((size_t)(oy + y) * d->W + (size_t)ox) * 3;
        uint8_t *dst = out + (size_t)y * S * 3;
        if (!flip) {
            memcpy(dst, row, (size_t)S * 3);
            continue;
        }
        for (int x = 0; x < S; x++) memcpy(dst + (size_t)x * 3, row + (size_t)(S - 1 - x) * 3, 3);
    }
}

typedef struct rn_decoder {
#ifdef RN_HAVE_JPEG
    const tk_img_decoder_ops *ops;
    tk_img_decoder *dec;         // opened at the first batch (in the loader thread that decodes it)
    tk_img_job *jobs;
#endif
    int out_device;              // images into device memory of CUDA device `device`
    int device;                  // (rn_reader_device), else host bytes
} rn_decoder;

// data.decoder: "cpu", "nvjpeg" (an error where it is not available) or "auto" (nvjpeg where it
// is, else cpu). The decoder itself opens at the first batch, once it is known where the images
// go: host bytes (nvjpeg copies its output back: host_out), or the device when the engine takes
// device batches (rn_reader_device).
static int decoder_open(const rn_config *cfg, const rn_dataset *d, int n, rn_decoder *dc, tk_err *e) {
    memset(dc, 0, sizeof *dc);
#ifdef RN_HAVE_JPEG
    if (d->kind != RN_DATA_JPEG) return 0;
    char note[512];
    dc->ops = strcmp(cfg->decoder, "auto") == 0 ? tk_img_decoder_pick("auto", note, sizeof note)
                                                 : tk_img_decoder_find(cfg->decoder);
    if (!dc->ops) return tk_err_set(e, TK_EUSAGE, "data.decoder: no image decoder \"%s\" (have: %s)", cfg->decoder,
                                    tk_img_decoder_names());
    // A named decoder that cannot work here fails now with its own message (its open says why),
    // not at the first batch in a loader thread.
    char why[512];
    if (dc->ops->version >= 2 && dc->ops->available && !dc->ops->available(why, sizeof why)) {
        tk_img_decoder_opts o = {.threads = 1, .host_out = 1};
        int rc = dc->ops->open(&dc->dec, &o, e);
        if (!rc) return tk_err_set(e, TK_EINTERNAL, "image decoder %s: opened while unavailable (%s)", dc->ops->name, why);
        return rc;
    }
    dc->jobs = calloc((size_t)n, sizeof *dc->jobs);
    if (!dc->jobs) return tk_err_set(e, TK_EIO, "out of host memory");
#else
    (void)cfg, (void)d, (void)n, (void)e;
#endif
    return 0;
}

#ifdef RN_HAVE_JPEG
static int decoder_start(rn_decoder *dc, tk_err *e) {
    // one thread each: the engine runs several loader threads
    tk_img_decoder_opts o = {.threads = 1, .host_out = !dc->out_device, .device = dc->device};
    return dc->ops->open(&dc->dec, &o, e);
}
#endif

static void decoder_close(rn_decoder *dc) {
#ifdef RN_HAVE_JPEG
    if (dc->dec) dc->ops->close(dc->dec);
    free(dc->jobs);
#endif
    (void)dc;
}

// Records rec[0..n) into img (n, S, S, 3) u8 and label.
static int decode(const rn_dataset *d, const rn_config *cfg, rn_decoder *dc, int train, uint32_t epoch,
                  const int64_t *rec, int n, uint8_t *img, int32_t *label, tk_err *e) {
    const size_t per = (size_t)cfg->image_size * cfg->image_size * 3;
    for (int i = 0; i < n; i++) label[i] = d->label[rec[i]];
    if (d->kind == RN_DATA_DECODED) {
        for (int i = 0; i < n; i++) decoded_one(d, cfg, train, epoch, rec[i], img + (size_t)i * per);
        return 0;
    }
#ifdef RN_HAVE_JPEG
    tk_img_transform tr;
    tk_img_transform_default(&tr, train ? TK_IMG_TRAIN : TK_IMG_EVAL);
    tr.out_w = tr.out_h = cfg->image_size;
    tr.resize = cfg->eval_resize;
    tr.scale_min = cfg->scale_min, tr.scale_max = cfg->scale_max;
    tr.ratio_min = cfg->ratio_min, tr.ratio_max = cfg->ratio_max;
    tr.flip = train && cfg->flip;
    for (int c = 0; c < 3; c++) tr.mean[c] = 0, tr.std[c] = 1; // resampled pixels, 0..255
    tr.dtype = TK_IMG_U8; // rounded and clamped, as DALI's resize hands bytes to its normalization
    tr.seed = cfg->seed;
    tr.epoch = epoch;
    for (int i = 0; i < n; i++)
        dc->jobs[i] = (tk_img_job){.data = d->bytes + d->off[rec[i]], .size = d->off[rec[i] + 1] - d->off[rec[i]],
                                   .sample = (uint64_t)rec[i]};
    if (!dc->dec) TRY(decoder_start(dc, e));
    return dc->ops->run(dc->dec, &tr, dc->jobs, (size_t)n, img, e);
#else
    (void)dc, (void)epoch, (void)train, (void)img;
    return tk_err_set(e, TK_EINTERNAL, "resnet: JPEG records without the image decoders");
#endif
}

// ---- the reader ----

struct rn_reader {
    const rn_config *cfg;
    rn_dataset *ds;
    int own;                     // ds is this reader's (not the shared cache)
    int64_t *perm;               // the order of epoch perm_epoch
    int64_t perm_epoch;
    int64_t *rec;
    rn_decoder dec;
    int rank, world;             // the share of each global batch it decodes:
    int b;                       // b = batch / world records
};

static int same_paths(const rn_shared *sh, char *const *paths, int npaths) {
    if (sh->npaths != npaths) return 0;
    for (int i = 0; i < npaths; i++)
        if (strcmp(sh->paths[i], paths[i]) != 0) return 0;
    return 1;
}

// The training set, loaded by the first reader and shared by the others (the engine opens one
// per loader thread, and one to count the records).
static int shared_load(const rn_config *cfg, char *const *paths, int npaths, rn_dataset **d, int *own, tk_err *e) {
    rn_shared *sh = cfg->sh;
    *own = 0;
    pthread_mutex_lock(&sh->mu);
    int rc = 0;
    if (sh->train && !same_paths(sh, paths, npaths)) {
        rc = ds_load(paths, npaths, cfg, d, e); // other files (a one-off reader): its own copy
        *own = 1;
    } else if (!sh->train) {
        rc = ds_load(paths, npaths, cfg, &sh->train, e);
        if (!rc && !(sh->paths = calloc((size_t)npaths, sizeof *sh->paths))) rc = tk_err_set(e, TK_EIO, "out of memory");
        for (int i = 0; !rc && i < npaths; i++)
            if (!(sh->paths[sh->npaths++] = strdup(paths[i]))) rc = tk_err_set(e, TK_EIO, "out of memory");
        if (!rc) *d = sh->train;
    } else {
        *d = sh->train;
    }
    pthread_mutex_unlock(&sh->mu);
    return rc;
}

void rn_shared_free(rn_shared *sh) {
    ds_free(sh->train);
    for (int i = 0; i < sh->npaths; i++) free(sh->paths[i]);
    free(sh->paths);
    pthread_mutex_destroy(&sh->mu);
    free(sh);
}

int rn_reader_open(const void *config, int rank, int world, char *const *paths, int npaths, void **out, tk_err *e) {
    const rn_config *cfg = config;
    *out = NULL;
    int64_t per_rank;
    TRY(tk_per_rank_batch("resnet", cfg->batch, world, &per_rank, e));
    rn_reader *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
    *r = (rn_reader){.cfg = cfg, .perm_epoch = -1, .rank = rank, .world = world, .b = (int)per_rank};
    int rc = shared_load(cfg, paths, npaths, &r->ds, &r->own, e);
    if (!rc && !(r->rec = malloc((size_t)r->b * sizeof *r->rec))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = decoder_open(cfg, r->ds, r->b, &r->dec, e);
    if (rc) rn_reader_close(r), r = NULL;
    *out = r;
    return rc;
}

void rn_reader_close(void *rd) {
    rn_reader *r = rd;
    if (!r) return;
#ifdef RN_HAVE_JPEG
    if (r->dec.dec && r->dec.ops == &tk_img_decoder_nvjpeg) { // its time, for the result line
        tk_img_decoder_stats st;
        tk_img_nvjpeg_stats(r->dec.dec, &st);
        rn_shared *sh = r->cfg->sh;
        pthread_mutex_lock(&sh->mu);
        sh->dec_batches += st.batches, sh->dec_images += st.images;
        sh->dec_pinned_allocs += st.pinned_allocs, sh->dec_pinned_frees += st.pinned_frees;
        sh->dec_parse_s += st.parse_s, sh->dec_submit_s += st.submit_s, sh->dec_wait_s += st.wait_s;
        sh->dec_decode_gpu_s += st.decode_gpu_s, sh->dec_resize_gpu_s += st.resize_gpu_s;
        pthread_mutex_unlock(&sh->mu);
    }
#endif
    if (r->own) ds_free(r->ds);
    decoder_close(&r->dec);
    free(r->perm);
    free(r->rec);
    free(r);
}

uint64_t rn_reader_count(void *rd) { return (uint64_t)((const rn_reader *)rd)->ds->n; }

unsigned rn_reader_device(void *rd, int device) {
#ifdef RN_HAVE_JPEG
    rn_reader *r = rd;
    rn_decoder *dc = &r->dec;
    if (r->ds->kind != RN_DATA_JPEG || !dc->ops || !dc->ops->out_on_device || dc->dec) return 0;
    dc->out_device = 1;
    dc->device = device;
    return 1u << 0; // the images; the labels stay host bytes
#else
    (void)rd, (void)device;
    return 0;
#endif
}

// The epoch's order: a Fisher-Yates shuffle with Philox draws keyed by (seed, epoch).
static int epoch_order(rn_reader *r, int64_t epoch, tk_err *e) {
    if (r->perm_epoch == epoch) return 0;
    const int64_t n = r->ds->n;
    if (!r->perm && !(r->perm = malloc((size_t)n * sizeof *r->perm))) return tk_err_set(e, TK_EIO, "out of host memory");
    for (int64_t i = 0; i < n; i++) r->perm[i] = i;
    for (int64_t i = n - 1; i > 0; i--) {
        tk_philox_ctr c = tk_philox_draw(r->cfg->seed, TK_RNG_SHUFFLE, (uint64_t)epoch << 40 | (uint64_t)i);
        int64_t j = (int64_t)((((uint64_t)c.v[0] << 32) | c.v[1]) % (uint64_t)(i + 1));
        int64_t tmp = r->perm[i];
        r->perm[i] = r->perm[j];
        r->perm[j] = tmp;
    }
    r->perm_epoch = epoch;
    return 0;
}

int rn_reader_batch(void *rd, int64_t step, int64_t spe, void *const *fields, tk_err *e) {
    rn_reader *r = rd;
    uint8_t *img = fields[0];
    int32_t *label = fields[1];
    const rn_config *cfg = r->cfg;
    const int b = r->b;
    const int64_t epoch = step / spe, i = step % spe, first = i * cfg->batch + (int64_t)r->rank * b;
    if (first + b > r->ds->n) return tk_err_set(e, TK_EINTERNAL, "resnet: batch %lld past the data", (long long)step);
    TRY(epoch_order(r, epoch, e));
    for (int k = 0; k < b; k++) r->rec[k] = r->perm[first + k];
    return decode(r->ds, cfg, &r->dec, 1, (uint32_t)epoch, r->rec, b, img, label, e);
}

// ---- the eval set's images, for eval.c ----

int rn_decode_eval(const rn_config *cfg, char *const *paths, int npaths, int64_t *n_all, int64_t rank, int64_t world,
                   uint8_t **img, int32_t **label, int64_t *lo, int64_t *hi, tk_err *e) {
    rn_dataset *d;
    TRY(ds_load(paths, npaths, cfg, &d, e));
    // Beside training data (train-step), both must number the classes alike: a mistyped synset
    // in a validation label file, without --synsets, adds a class and shifts every label after it.
    const rn_dataset *t = NULL;
    if (cfg->sh) {
        pthread_mutex_lock(&cfg->sh->mu);
        t = cfg->sh->train;
        pthread_mutex_unlock(&cfg->sh->mu);
    }
    if (t && t->has_crc && d->has_crc && t->crc != d->crc) {
        char other[4200];
        snprintf(other, sizeof other, "the training data %s", t->crc_file);
        int rc = crc_mismatch(d->crc_file, d->crc, other, t->crc, e);
        ds_free(d);
        return rc;
    }
    *n_all = d->n;
    *lo = d->n * rank / world;
    *hi = d->n * (rank + 1) / world;
    const int64_t n = *hi - *lo, chunk = 256;
    const size_t per = (size_t)cfg->image_size * cfg->image_size * 3;
    *img = malloc((size_t)n * per + 1);
    *label = malloc((size_t)n * 4 + 4);
    int64_t *rec = malloc((size_t)chunk * sizeof *rec);
    rn_decoder dc = {0};
    int rc = !*img || !*label || !rec ? tk_err_set(e, TK_EIO, "out of host memory for the eval set") : 0;
    if (!rc) rc = decoder_open(cfg, d, (int)chunk, &dc, e);
    for (int64_t o = 0; !rc && o < n; o += chunk) {
        int k = (int)(n - o < chunk ? n - o : chunk);
        for (int j = 0; j < k; j++) rec[j] = *lo + o + j;
        rc = decode(d, cfg, &dc, 0, 0, rec, k, *img + (size_t)o * per, *label + o, e);
    }
    decoder_close(&dc);
    free(rec);
    ds_free(d);
    if (rc) {
        free(*img), free(*label);
        *img = NULL, *label = NULL;
    }
    return rc;
}
