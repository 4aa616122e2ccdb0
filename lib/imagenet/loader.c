// The ImageNet loader (imagenet.h): .tks shards in, batches of decoded, augmented images out.
// One producer thread assembles batches ahead of the consumer (prefetch slots) and runs the
// decoder on each (the CPU decoder spreads a batch over its threads). The order of an epoch is
// a function of (seed, epoch) only, and each image's crop of (seed, epoch, its record index), so
// a batch is the same whatever the thread count and the prefetch depth.
//
// Order: the records are cut into windows of frames. Train: the frames in a Philox-shuffled
// order, window_frames at a time (0: one window of all frames, kept in memory: a full
// permutation), the records of each window shuffled; batches of exactly `batch` records (the
// remainder of the epoch is dropped). Eval: every frame in file order, one window each, no
// shuffle; the last batch may be short.
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/philox.h"
#include "imagenet/imagenet.h"

typedef struct {
    int file;
    size_t frame;
    uint64_t first;              // global index of its first record
    uint32_t n;
} frame_ref;

typedef struct {
    long id;                     // window number in the epoch, -1 = empty
    size_t nf;                   // frames
    size_t *fidx;                // their indices in L->fr
    tks_frame *fr;               // decoded
    uint64_t n;                  // records
    uint64_t *perm;              // record k of the window -> (frame << 32 | index in frame)
} window;

enum { FREE = 0, BUSY, READY, TAKEN };

typedef struct {
    imagenet_batch b;
    int state;
    unsigned gen;                // epoch generation it was made for
} slot;

#define NWIN 3

struct imagenet_loader {
    imagenet_loader_opts o;
    int train;
    int nfiles;
    tks_reader **r;
    frame_ref *fr;
    size_t nfr;
    uint64_t nrec;
    int fjpeg, flabel;
    const tk_img_decoder_ops *dec;
    tk_img_decoder *d;
    size_t wframes;              // frames per window
    // the epoch
    uint32_t epoch;
    size_t *forder;              // frame order of the epoch
    uint64_t *wstart;            // first sequence position of each window (nwin + 1)
    size_t nwin;
    uint64_t nbatches, produced, consumed;
    unsigned gen;
    // the producer's windows (only it touches them)
    window win[NWIN];
    tk_img_job *jobs;
    // shared state
    pthread_t th;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    slot *slots;
    int nslots, stop, busy, have_epoch;
    int err_code;
    tk_err err;
};

static void *xalloc(imagenet_loader *L, size_t n) { return L->o.alloc ? L->o.alloc(n, L->o.alloc_ctx) : malloc(n); }
static void xfree(imagenet_loader *L, void *p) {
    if (!p) return;
    if (L->o.release) L->o.release(p, L->o.alloc_ctx);
    else free(p);
}
// Image buffers: in the memory the decoder writes (device memory for nvjpeg), else as above.
static int dev_images(const imagenet_loader *L) { return L->dec->version >= 2 && L->dec->alloc_out; }
static void *ialloc(imagenet_loader *L, size_t n) { return dev_images(L) ? L->dec->alloc_out(L->d, n) : xalloc(L, n); }
static void ifree(imagenet_loader *L, void *p) {
    if (!p) return;
    if (dev_images(L)) L->dec->free_out(L->d, p);
    else xfree(L, p);
}

static uint64_t rand64(uint64_t seed, uint64_t a, uint64_t b) {
    tk_philox_ctr c = {{(uint32_t)a, (uint32_t)(a >> 32), TK_RNG_SHUFFLE, (uint32_t)b}};
    tk_philox_key k = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    c = tk_philox4x32(c, k);
    return ((uint64_t)c.v[0] << 32) | c.v[1];
}

// Fisher-Yates with Philox draws keyed (seed; stream, epoch, i).
static void shuffle64(uint64_t *v, uint64_t n, uint64_t seed, uint64_t stream, uint32_t epoch) {
    for (uint64_t i = n; i > 1; i--) {
        uint64_t j = rand64(seed, (stream << 40) ^ i, epoch) % i, t = v[i - 1];
        v[i - 1] = v[j];
        v[j] = t;
    }
}

static void window_clear(window *w) {
    for (size_t i = 0; w->fr && i < w->nf; i++) tks_frame_free(&w->fr[i]);
    free(w->fr);
    free(w->fidx);
    free(w->perm);
    memset(w, 0, sizeof *w);
    w->id = -1;
}

// Loads window `id` of the epoch into w: its frames (in parallel), and its record order.
static int window_load(imagenet_loader *L, window *w, size_t id, tk_err *e) {
    window_clear(w);
    size_t f0 = id * L->wframes, nf = L->nfr - f0 < L->wframes ? L->nfr - f0 : L->wframes;
    w->fidx = malloc(nf * sizeof *w->fidx);
    w->fr = calloc(nf, sizeof *w->fr);
    w->nf = nf;
    if (!w->fidx || !w->fr) return tk_err_errno(e, ENOMEM, "out of memory");
    for (size_t i = 0; i < nf; i++) {
        w->fidx[i] = L->forder[f0 + i];
        w->n += L->fr[w->fidx[i]].n;
    }
    int bad = -1;
    tk_err first;
#pragma omp parallel for num_threads(L->o.dopts.threads > 0 ? L->o.dopts.threads : 1) schedule(dynamic, 1)
    for (size_t i = 0; i < nf; i++) {
        const frame_ref *f = &L->fr[w->fidx[i]];
        tk_err te;
        if (tks_reader_read(L->r[f->file], f->frame, &w->fr[i], &te))
#pragma omp critical(tk_loader_err)
            if (bad < 0 || (int)i < bad) bad = (int)i, first = te;
    }
    if (bad >= 0) {
        *e = first;
        return e->code;
    }
    if (!(w->perm = malloc(w->n * sizeof *w->perm))) return tk_err_errno(e, ENOMEM, "out of memory");
    uint64_t k = 0;
    for (size_t i = 0; i < nf; i++)
        for (uint32_t j = 0; j < L->fr[w->fidx[i]].n; j++) w->perm[k++] = ((uint64_t)i << 32) | j;
    if (L->train) shuffle64(w->perm, w->n, L->o.t.seed, 1 + id, L->epoch);
    w->id = (long)id;
    return 0;
}

// The window that holds sequence position p (loading it, reusing the oldest slot).
static int window_for(imagenet_loader *L, uint64_t p, window **out, uint64_t *off, tk_err *e) {
    size_t lo = 0, hi = L->nwin; // last window with wstart <= p
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (L->wstart[mid] <= p) lo = mid;
        else hi = mid;
    }
    *off = p - L->wstart[lo];
    for (int i = 0; i < NWIN; i++)
        if (L->win[i].id == (long)lo) return *out = &L->win[i], 0;
    // Reuse the slot of the lowest window id (windows are used in increasing order).
    int victim = 0;
    for (int i = 1; i < NWIN; i++)
        if (L->win[i].id < L->win[victim].id) victim = i;
    TRY(window_load(L, &L->win[victim], lo, e));
    *out = &L->win[victim];
    return 0;
}

static size_t image_bytes(const imagenet_loader *L) {
    return (size_t)L->o.t.out_w * L->o.t.out_h * 3 * tk_img_dtype_bytes(L->o.t.dtype);
}

// Makes batch b of the current epoch into s.
static int produce(imagenet_loader *L, uint64_t b, slot *s, tk_err *e) {
    uint64_t B = (uint64_t)L->o.batch, start = b * B, n = L->nrec - start < B ? L->nrec - start : B;
    for (uint64_t i = 0; i < n; i++) {
        window *w;
        uint64_t off;
        TRY(window_for(L, start + i, &w, &off, e));
        uint64_t pk = w->perm[off];
        size_t fi = (size_t)(pk >> 32);
        uint32_t j = (uint32_t)pk;
        const tks_frame *fr = &w->fr[fi];
        const tks_column *jc = &fr->col[L->fjpeg];
        L->jobs[i] = (tk_img_job){(const uint8_t *)jc->data + jc->off[j], (size_t)(jc->off[j + 1] - jc->off[j]),
                                  L->fr[w->fidx[fi]].first + j};
        s->b.labels[i] = ((const int16_t *)fr->col[L->flabel].data)[j];
    }
    // The jobs point into windows: a batch never spans more than NWIN - 1 windows when a window
    // holds at least a batch of records, which open() makes sure of.
    tk_img_transform t = L->o.t;
    t.epoch = L->epoch;
    TRY(L->dec->run(L->d, &t, L->jobs, (size_t)n, s->b.images, e));
    s->b.n = (size_t)n;
    s->b.index = b;
    return 0;
}

static void *producer(void *arg) {
    imagenet_loader *L = arg;
    pthread_mutex_lock(&L->mu);
    for (;;) {
        slot *s = NULL;
        while (!L->stop) {
            s = NULL;
            if (L->have_epoch && !L->err_code && L->produced < L->nbatches)
                for (int i = 0; i < L->nslots && !s; i++)
                    if (L->slots[i].state == FREE) s = &L->slots[i];
            if (s) break;
            pthread_cond_wait(&L->cv, &L->mu);
        }
        if (L->stop) break;
        uint64_t b = L->produced++;
        unsigned gen = L->gen;
        s->state = BUSY;
        s->gen = gen;
        L->busy = 1;
        pthread_mutex_unlock(&L->mu);
        tk_err e;
        tk_err_clear(&e);
        int rc = produce(L, b, s, &e);
        pthread_mutex_lock(&L->mu);
        L->busy = 0;
        if (rc && gen == L->gen) {
            L->err_code = rc;
            L->err = e;
        }
        s->state = !rc && gen == L->gen ? READY : FREE;
        pthread_cond_broadcast(&L->cv);
    }
    pthread_mutex_unlock(&L->mu);
    return NULL;
}

static int check_fields(imagenet_loader *L, const tks_schema *s, const char *path, tk_err *e) {
    int j = tks_schema_field(s, "jpeg"), l = tks_schema_field(s, "label");
    if (j < 0 || l < 0 || !s->f[j].ragged || s->f[j].dtype != TKS_U8 || s->f[j].ndim != 1 || s->f[l].ragged ||
        s->f[l].dtype != TKS_I16 || s->f[l].ndim != 0)
        return tk_err_set(e, TK_EDATA, "%s: not an ImageNet shard (needs fields jpeg u8 [-1] and label i16 [], "
                                       "as prep imagenet writes)", path);
    if ((L->fjpeg >= 0 && L->fjpeg != j) || (L->flabel >= 0 && L->flabel != l))
        return tk_err_set(e, TK_EDATA, "%s: fields in another order than in the first shard", path);
    L->fjpeg = j;
    L->flabel = l;
    return 0;
}

int imagenet_loader_open(imagenet_loader **Lp, char *const *files, int nfiles, const imagenet_loader_opts *o, tk_err *e) {
    *Lp = NULL;
    if (o->batch < 1 || nfiles < 1) return tk_err_set(e, TK_EUSAGE, "imagenet loader: batch >= 1 and at least one file");
    imagenet_loader *L = calloc(1, sizeof *L);
    if (!L) return tk_err_errno(e, ENOMEM, "out of memory");
    L->o = *o;
    L->train = o->t.mode == TK_IMG_TRAIN;
    L->fjpeg = L->flabel = -1;
    L->dec = o->decoder ? o->decoder : &tk_img_decoder_cpu;
    L->nslots = o->prefetch > 0 ? o->prefetch : 2;
    L->r = calloc((size_t)nfiles, sizeof *L->r);
    L->jobs = calloc((size_t)o->batch, sizeof *L->jobs);
    L->slots = calloc((size_t)L->nslots, sizeof *L->slots);
    for (int i = 0; i < NWIN; i++) L->win[i].id = -1;
    pthread_mutex_init(&L->mu, NULL);
    pthread_cond_init(&L->cv, NULL);
    int rc = !L->r || !L->jobs || !L->slots ? tk_err_errno(e, ENOMEM, "out of memory") : 0;
    L->nfiles = nfiles;
    for (int i = 0; i < nfiles && !rc; i++) {
        struct stat st;
        if (stat(files[i], &st) != 0 || !S_ISREG(st.st_mode))
            rc = tk_err_set(e, TK_EUSAGE, "%s: the loader reads shard files (seekable), not streams", files[i]);
        if (!rc) rc = tks_reader_open(&L->r[i], files[i], e);
        if (!rc) rc = check_fields(L, tks_reader_schema(L->r[i]), files[i], e);
        if (!rc) L->nfr += tks_reader_nframes(L->r[i]);
    }
    if (!rc && !(L->fr = calloc(L->nfr + 1, sizeof *L->fr))) rc = tk_err_errno(e, ENOMEM, "out of memory");
    size_t k = 0;
    for (int i = 0; i < nfiles && !rc; i++)
        for (size_t f = 0; f < tks_reader_nframes(L->r[i]); f++, k++) {
            const tks_frame_info *fi = tks_reader_frame(L->r[i], f);
            L->fr[k] = (frame_ref){i, f, L->nrec, fi->nrecords};
            L->nrec += fi->nrecords;
        }
    // Windows of at least a batch of records, so that a batch spans at most two windows (the
    // producer holds three).
    size_t minn = SIZE_MAX;
    for (size_t i = 0; i < L->nfr; i++) minn = L->fr[i].n < minn ? L->fr[i].n : minn;
    size_t need = minn && minn != SIZE_MAX ? ((size_t)o->batch + minn - 1) / minn : 1;
    L->wframes = L->train && !o->window_frames ? (L->nfr ? L->nfr : 1) : L->train ? o->window_frames : 1;
    if (L->wframes < need) L->wframes = need;
    if (!rc && L->nrec == 0) rc = tk_err_set(e, TK_EDATA, "imagenet loader: the shards hold no records");
    if (!rc && L->train && L->nrec < (uint64_t)o->batch)
        rc = tk_err_set(e, TK_EDATA, "imagenet loader: %llu records, fewer than one batch of %d", (unsigned long long)L->nrec, o->batch);
    if (!rc) rc = L->dec->open(&L->d, &o->dopts, e);
    size_t per = image_bytes(L) * (size_t)o->batch;
    for (int i = 0; i < L->nslots && !rc; i++) {
        L->slots[i].b.images = ialloc(L, per);
        L->slots[i].b.labels = xalloc(L, (size_t)o->batch * sizeof(int32_t));
        if (!L->slots[i].b.images || !L->slots[i].b.labels) rc = tk_err_errno(e, ENOMEM, "out of memory for batch buffers");
    }
    if (!rc && pthread_create(&L->th, NULL, producer, L) != 0) rc = tk_err_errno(e, errno, "cannot start the loader thread");
    else if (!rc) L->started = 1;
    if (rc) {
        imagenet_loader_close(L);
        return rc;
    }
    *Lp = L;
    return 0;
}

uint64_t imagenet_loader_records(const imagenet_loader *L) { return L->nrec; }
uint64_t imagenet_loader_batches(const imagenet_loader *L) {
    uint64_t B = (uint64_t)L->o.batch;
    return L->train ? L->nrec / B : (L->nrec + B - 1) / B;
}

int imagenet_loader_epoch(imagenet_loader *L, uint32_t epoch, tk_err *e) {
    pthread_mutex_lock(&L->mu);
    L->gen++;
    L->have_epoch = 0;
    while (L->busy) pthread_cond_wait(&L->cv, &L->mu); // the batch in the making is dropped
    for (int i = 0; i < L->nslots; i++)
        if (L->slots[i].state == READY) L->slots[i].state = FREE;
    pthread_mutex_unlock(&L->mu);
    // The producer is idle now: the epoch's order can change under no one.
    for (int i = 0; i < NWIN; i++) window_clear(&L->win[i]);
    free(L->forder);
    free(L->wstart);
    L->forder = malloc((L->nfr + 1) * sizeof *L->forder);
    L->nwin = (L->nfr + L->wframes - 1) / L->wframes;
    L->wstart = malloc((L->nwin + 1) * sizeof *L->wstart);
    if (!L->forder || !L->wstart) return tk_err_errno(e, ENOMEM, "out of memory");
    uint64_t *tmp = malloc((L->nfr + 1) * sizeof *tmp);
    if (!tmp) return tk_err_errno(e, ENOMEM, "out of memory");
    for (size_t i = 0; i < L->nfr; i++) tmp[i] = i;
    if (L->train) shuffle64(tmp, L->nfr, L->o.t.seed, 0, epoch);
    for (size_t i = 0; i < L->nfr; i++) L->forder[i] = (size_t)tmp[i];
    free(tmp);
    L->wstart[0] = 0;
    for (size_t w = 0; w < L->nwin; w++) {
        uint64_t n = 0;
        for (size_t i = w * L->wframes; i < L->nfr && i < (w + 1) * L->wframes; i++) n += L->fr[L->forder[i]].n;
        L->wstart[w + 1] = L->wstart[w] + n;
    }
    pthread_mutex_lock(&L->mu);
    L->epoch = epoch;
    L->nbatches = imagenet_loader_batches(L);
    L->produced = L->consumed = 0;
    L->err_code = 0;
    L->have_epoch = 1;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
    return 0;
}

int imagenet_loader_next(imagenet_loader *L, imagenet_batch **b, tk_err *e) {
    *b = NULL;
    pthread_mutex_lock(&L->mu);
    int rc = 0;
    if (!L->have_epoch) {
        pthread_mutex_unlock(&L->mu);
        return tk_err_set(e, TK_EINTERNAL, "imagenet loader: next() before epoch()");
    }
    while (L->consumed < L->nbatches) {
        slot *s = NULL;
        for (int i = 0; i < L->nslots && !s; i++)
            if (L->slots[i].state == READY && L->slots[i].gen == L->gen && L->slots[i].b.index == L->consumed) s = &L->slots[i];
        if (s) {
            s->state = TAKEN;
            L->consumed++;
            *b = &s->b;
            break;
        }
        if (L->err_code) {
            *e = L->err;
            rc = L->err_code;
            break;
        }
        pthread_cond_wait(&L->cv, &L->mu);
    }
    pthread_mutex_unlock(&L->mu);
    return rc;
}

void imagenet_loader_done(imagenet_loader *L, imagenet_batch *b) {
    if (!b) return;
    pthread_mutex_lock(&L->mu);
    for (int i = 0; i < L->nslots; i++)
        if (&L->slots[i].b == b) L->slots[i].state = FREE;
    pthread_cond_broadcast(&L->cv);
    pthread_mutex_unlock(&L->mu);
}

void imagenet_loader_close(imagenet_loader *L) {
    if (!L) return;
    if (L->started) {
        pthread_mutex_lock(&L->mu);
        L->stop = 1;
        pthread_cond_broadcast(&L->cv);
        pthread_mutex_unlock(&L->mu);
        pthread_join(L->th, NULL);
    }
    for (int i = 0; i < NWIN; i++) window_clear(&L->win[i]);
    for (int i = 0; L->slots && i < L->nslots; i++) {
        if (L->d) ifree(L, L->slots[i].b.images);
        xfree(L, L->slots[i].b.labels);
    }
    if (L->d) L->dec->close(L->d);
    for (int i = 0; L->r && i < L->nfiles; i++) tks_reader_close(L->r[i]);
    pthread_mutex_destroy(&L->mu);
    pthread_cond_destroy(&L->cv);
    free(L->r);
    free(L->fr);
    free(L->forder);
    free(L->wstart);
    free(L->jobs);
    free(L->slots);
    free(L);
}
