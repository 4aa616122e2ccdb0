// ImageNet images -> .tks (imagenet.h): the JPEG bytes are kept as they are (MLPerf decodes at
// training time), after checks; PNG files and CMYK JPEGs are converted to RGB JPEGs as the MLPerf
// reference's stage 1 (tensorflow/tpu imagenet_to_gcs.py) does: decoded to RGB, encoded at
// quality 100 with 4:2:0 chroma. Images are checked and converted in windows by the worker
// threads, then written in order by one thread, so the output does not depend on the threads.
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "image/codec.h"
#include "imagenet/imagenet.h"

void imagenet_schema(tks_schema *s, const char *split, const imagenet_synsets *syn, int nclasses) {
    memset(s, 0, sizeof *s);
    const struct { const char *name; tks_dtype t; int ragged; } f[] = {
        {"jpeg", TKS_U8, 1}, {"label", TKS_I16, 0}, {"height", TKS_I32, 0}, {"width", TKS_I32, 0}, {"name", TKS_U8, 1}};
    for (int i = 0; i < 5; i++) {
        snprintf(s->f[i].name, sizeof s->f[i].name, "%s", f[i].name);
        s->f[i].dtype = f[i].t;
        s->f[i].ndim = f[i].ragged;
        s->f[i].shape[0] = TKS_RAGGED;
    }
    s->nfields = 5;
    int n = syn ? syn->n : nclasses;
    int k = snprintf(s->meta_json, sizeof s->meta_json,
                     "{\"source\":\"imagenet\",\"split\":\"%s\",\"classes\":%d,\"label\":\"index of the synset in the "
                     "sorted synsets\"",
                     split ? split : "", n);
    if (syn && syn->n)
        k += snprintf(s->meta_json + k, sizeof s->meta_json - (size_t)k,
                      ",\"synsets_crc32\":\"%08x\",\"first_synset\":\"%s\",\"last_synset\":\"%s\"",
                      imagenet_synsets_crc(syn), syn->id[0], syn->id[syn->n - 1]);
    snprintf(s->meta_json + k, sizeof s->meta_json - (size_t)k, "}");
}

// One image in flight.
typedef struct {
    uint8_t *src;                // the file's (or the Example's) bytes, owned
    size_t n;
    uint8_t *conv;               // the converted JPEG, when converted
    size_t convn;
    const uint8_t *jpeg;         // what goes into the record
    size_t jpegn;
    int h, w, label;
    const char *name;
    size_t namelen;
    int rc, reason;              // 0, or the error and its skip reason
    tk_err err;
    int cmyk, png, gray, progressive, warnings;
} work;

static int reason_of(const tk_err *e) {
    if (strncmp(e->what, "truncated JPEG", 14) == 0 || strstr(e->what, "truncated PNG")) return IMAGENET_SKIP_TRUNCATED;
    if (strncmp(e->what, "image is ", 9) == 0 || strncmp(e->what, "a file larger", 13) == 0) return IMAGENET_SKIP_TOO_LARGE;
    if (strncmp(e->what, "not a ", 6) == 0 || strncmp(e->what, "a PNG file", 10) == 0) return IMAGENET_SKIP_NOT_IMAGE;
    return IMAGENET_SKIP_CORRUPT;
}

// RGB pixels -> the record's JPEG (quality q, 4:2:0), as the reference's encode_jpeg.
static int reencode(work *wk, const uint8_t *px, int w, int h, int q) {
    wk->w = w;
    wk->h = h;
    int rc = tk_jpeg_encode(px, w, h, 3, q, 1, &wk->conv, &wk->convn, &wk->err);
    wk->jpeg = wk->conv;
    wk->jpegn = wk->convn;
    return rc;
}

// Checks, and converts when needed, wk->src. Sets wk->rc/err/reason on failure.
static void process(work *wk, const imagenet_prep_opts *o) {
    tk_err *e = &wk->err;
    tk_img_format fmt = tk_img_sniff(wk->src, wk->n);
    int rc = 0;
    if (fmt == TK_IMG_PNG) {
        uint8_t *px = NULL;
        int w, h;
        rc = tk_png_decode(wk->src, wk->n, &px, &w, &h, e);
        if (!rc) rc = reencode(wk, px, w, h, o->quality);
        free(px);
        wk->png = 1;
    } else {
        tk_jpeg_info info;
        rc = tk_jpeg_info_read(wk->src, wk->n, &info, e);
        if (!rc && info.color == TK_JPEG_CMYK) {
            uint8_t *px = malloc((size_t)info.width * info.height * 3);
            if (!px) rc = tk_err_errno(e, ENOMEM, "out of memory");
            if (!rc) rc = tk_jpeg_decode(wk->src, wk->n, 8, 0, 0, info.width, info.height, px, (size_t)info.width * 3, NULL, e);
            if (!rc) rc = reencode(wk, px, info.width, info.height, o->quality);
            free(px);
            wk->cmyk = 1;
        } else if (!rc) {
            // The whole image decoded at 1/8 scale: every entropy-coded byte is read (a file that
            // ends early fails here), for about a fifth of a full decode's time.
            if (o->check_decode) {
                int w8 = tk_jpeg_scaled(info.width, 1), h8 = tk_jpeg_scaled(info.height, 1);
                uint8_t *px = malloc((size_t)w8 * h8 * 3);
                tk_jpeg_stats js = {0};
                if (!px) rc = tk_err_errno(e, ENOMEM, "out of memory");
                if (!rc) rc = tk_jpeg_decode(wk->src, wk->n, 1, 0, 0, w8, h8, px, (size_t)w8 * 3, &js, e);
                free(px);
                wk->warnings = js.warnings;
            }
            wk->w = info.width;
            wk->h = info.height;
            wk->jpeg = wk->src;
            wk->jpegn = wk->n;
            wk->gray = info.color == TK_JPEG_GRAY;
            wk->progressive = info.progressive;
        }
    }
    if (rc) {
        wk->rc = rc;
        wk->reason = reason_of(e);
    }
}

static int read_file(work *wk, const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return tk_err_errno(&wk->err, errno, "cannot open");
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) rc = tk_err_errno(&wk->err, errno, "cannot stat");
    else if (st.st_size > (off_t)(63 << 20)) rc = tk_err_set(&wk->err, TK_EDATA, "a file larger than 63 MiB");
    if (!rc && !(wk->src = malloc((size_t)st.st_size + 1))) rc = tk_err_errno(&wk->err, ENOMEM, "out of memory");
    size_t got = 0;
    while (!rc && got < (size_t)st.st_size) {
        ssize_t k = read(fd, wk->src + got, (size_t)st.st_size - got);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) rc = k < 0 ? tk_err_errno(&wk->err, errno, "read failed") : tk_err_set(&wk->err, TK_EIO, "the file shrank while read");
        else got += (size_t)k;
    }
    close(fd);
    wk->n = got;
    return rc;
}

static void work_free(work *wk) {
    free(wk->src);
    free(wk->conv);
    memset(wk, 0, sizeof *wk);
}

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Writes the window's good images in order; a failed one is skipped (counted) or ends the run.
static int flush_window(work *win, size_t n, tks_writer *w, const imagenet_prep_opts *o, imagenet_prep_stats *st,
                        tk_err *e) {
    for (size_t i = 0; i < n; i++) {
        work *wk = &win[i];
        if (wk->rc) {
            if (!o->skip_bad || wk->rc != TK_EDATA) {
                *e = wk->err;
                return wk->rc;
            }
            st->skipped[wk->reason]++;
            continue;
        }
        int16_t label = (int16_t)wk->label;
        int32_t h = wk->h, wd = wk->w;
        uint64_t joff[2] = {0, wk->jpegn}, noff[2] = {0, wk->namelen};
        tks_colref ref[5] = {{wk->jpeg, joff}, {&label, NULL}, {&h, NULL}, {&wd, NULL}, {wk->name ? wk->name : "", noff}};
        TRY(tks_writer_append_ref(w, ref, 1, e));
        st->records++;
        st->bytes += wk->jpegn;
        st->converted_cmyk += wk->cmyk;
        st->converted_png += wk->png;
        st->grayscale += wk->gray;
        st->progressive += wk->progressive;
        st->jpeg_warnings += (uint64_t)wk->warnings;
    }
    return 0;
}

static size_t window_size(const imagenet_prep_opts *o) { return (size_t)(o->threads > 0 ? o->threads : 1) * 32; }

int imagenet_prep_files(const imagenet_items *items, const imagenet_synsets *syn, tks_writer *w,
                        const imagenet_prep_opts *o, imagenet_prep_stats *st, tk_err *e) {
    (void)syn;
    double t0 = now();
    size_t W = window_size(o);
    work *win = calloc(W, sizeof *win);
    if (!win) return tk_err_errno(e, ENOMEM, "out of memory");
    int rc = 0, threads = o->threads > 0 ? o->threads : 1;
    for (size_t start = 0; start < items->n && !rc; start += W) {
        size_t n = items->n - start < W ? items->n - start : W;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++) {
            const imagenet_item *it = &items->v[start + i];
            work *wk = &win[i];
            wk->label = it->label;
            wk->name = it->name;
            wk->namelen = strlen(it->name);
            tk_err_clear(&wk->err);
            if ((wk->rc = read_file(wk, it->path))) wk->reason = reason_of(&wk->err);
            else process(wk, o);
            if (wk->rc && !wk->err.where[0]) tk_err_where(&wk->err, "%s", it->path);
        }
        rc = flush_window(win, n, w, o, st, e);
        for (size_t i = 0; i < n; i++) work_free(&win[i]);
        if (o->progress) o->progress(o->progress_ctx, st->records);
    }
    free(win);
    st->seconds = now() - t0;
    return rc;
}

// Reads the next window of Examples from the TFRecord files: copies their bytes into win[].src.
typedef struct {
    char *const *files;
    int nfiles, cur;
    imagenet_tfrecord *t;
} tf_src;

static int tf_fill(tf_src *s, work *win, size_t W, size_t *n, uint64_t *offs, int *fidx, tk_err *e) {
    *n = 0;
    while (*n < W && s->cur < s->nfiles) {
        if (!s->t) TRY(imagenet_tfrecord_open(&s->t, s->files[s->cur], e));
        const uint8_t *data;
        size_t len;
        uint64_t off;
        TRY(imagenet_tfrecord_next(s->t, &data, &len, &off, e));
        if (!data) {
            imagenet_tfrecord_close(s->t);
            s->t = NULL;
            s->cur++;
            continue;
        }
        work *wk = &win[*n];
        if (!(wk->src = malloc(len + 1))) return tk_err_errno(e, ENOMEM, "out of memory");
        memcpy(wk->src, data, len);
        wk->n = len;
        offs[*n] = off;
        fidx[*n] = s->cur;
        (*n)++;
    }
    return 0;
}

// One Example: its image (pointed into, then checked like a file) and label.
static void process_example(work *wk, const imagenet_synsets *syn, const imagenet_prep_opts *o) {
    imagenet_example x;
    if ((wk->rc = imagenet_example_parse(wk->src, wk->n, &x, &wk->err))) {
        wk->reason = IMAGENET_SKIP_CORRUPT;
        return;
    }
    wk->name = (const char *)x.filename;
    wk->namelen = x.filename ? x.filename_len : 0;
    int classes = syn ? syn->n : o->tfrecord_classes;
    if (x.label < 1 || x.label > classes) {
        wk->rc = tk_err_set(&wk->err, TK_EDATA, "image/class/label %lld is outside 1..%d", (long long)x.label, classes);
        wk->reason = IMAGENET_SKIP_LABEL_RANGE;
        return;
    }
    wk->label = (int)(x.label - 1);
    if (syn && x.synset && (x.synset_len >= 16 || strncmp(syn->id[wk->label], (const char *)x.synset, x.synset_len) != 0 ||
                            syn->id[wk->label][x.synset_len])) {
        wk->rc = tk_err_set(&wk->err, TK_EDATA, "image/class/synset is %.*s, but label %lld is %s in the synset list",
                            (int)(x.synset_len > 15 ? 15 : x.synset_len), (const char *)x.synset, (long long)x.label,
                            syn->id[wk->label]);
        wk->reason = IMAGENET_SKIP_UNKNOWN_SYNSET;
        return;
    }
    // The image bytes: process() reads wk->src/n, so point them at the image (the record stays
    // owned through rec).
    uint8_t *rec = wk->src;
    size_t recn = wk->n;
    wk->src = (uint8_t *)x.encoded;
    wk->n = x.encoded_len;
    process(wk, o);
    wk->src = rec;
    wk->n = recn;
}

int imagenet_prep_tfrecords(char *const *files, int nfiles, const imagenet_synsets *syn, tks_writer *w,
                            const imagenet_prep_opts *o, imagenet_prep_stats *st, tk_err *e) {
    double t0 = now();
    size_t W = window_size(o);
    work *win = calloc(W, sizeof *win);
    uint64_t *offs = calloc(W, sizeof *offs);
    int *fidx = calloc(W, sizeof *fidx);
    tf_src src = {files, nfiles, 0, NULL};
    int rc = !win || !offs || !fidx ? tk_err_errno(e, ENOMEM, "out of memory") : 0;
    int threads = o->threads > 0 ? o->threads : 1;
    while (!rc) {
        size_t n = 0;
        rc = tf_fill(&src, win, W, &n, offs, fidx, e);
        if (rc || !n) {
            for (size_t i = 0; i < n; i++) work_free(&win[i]);
            break;
        }
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (size_t i = 0; i < n; i++) {
            tk_err_clear(&win[i].err);
            process_example(&win[i], syn, o);
            if (win[i].rc) tk_err_where(&win[i].err, "%s: offset %llu", files[fidx[i]], (unsigned long long)offs[i]);
            if (win[i].rc && win[i].name) { // say which image the record holds
                char what[sizeof win[i].err.what];
                snprintf(what, sizeof what, "%.*s: %s", (int)(win[i].namelen > 100 ? 100 : win[i].namelen), win[i].name,
                         win[i].err.what);
                memcpy(win[i].err.what, what, sizeof what);
            }
        }
        rc = flush_window(win, n, w, o, st, e);
        for (size_t i = 0; i < n; i++) work_free(&win[i]);
        if (o->progress) o->progress(o->progress_ctx, st->records);
    }
    imagenet_tfrecord_close(src.t);
    free(win);
    free(offs);
    free(fidx);
    st->seconds = now() - t0;
    return rc;
}
