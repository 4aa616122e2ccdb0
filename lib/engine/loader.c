// Loader threads and staging slots (loader.h).
#include "engine/loader.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct loader_slot {
    struct tk_loader *l;
    int w;
    void *rd;
    void *buf[TK_BATCH_MAX_FIELDS];
    unsigned dev;  // the fields whose buf is device memory (the reader writes there)
    int64_t step;  // the batch in the slot (state 1 or 2), or the next one to decode
    int state;     // 0: to decode, 1: ready, 2: failed (err)
    tk_err err;
    pthread_t th;
    int started;
} loader_slot;

struct tk_loader {
    tk_ctx *c;
    tk_batch_source src;
    tk_batch_layout L;
    int nw;
    int64_t first, last;
    int stop;
    pthread_mutex_t mu;
    pthread_cond_t ready, work;
    loader_slot *slot;
};

static void *loader_main(void *arg) {
    loader_slot *s = arg;
    struct tk_loader *l = s->l;
    for (int64_t step = l->first + s->w; step < l->last; step += l->nw) {
        pthread_mutex_lock(&l->mu);
        while (!l->stop && s->state != 0) pthread_cond_wait(&l->work, &l->mu);
        int stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) break;
        tk_err e;
        tk_err_clear(&e);
        int rc = l->src.read(s->rd, step, s->buf, &e);
        pthread_mutex_lock(&l->mu);
        s->step = step;
        s->state = rc ? 2 : 1;
        if (rc) s->err = e;
        pthread_cond_broadcast(&l->ready);
        pthread_mutex_unlock(&l->mu);
        if (rc) break;
    }
    return NULL;
}

int tk_loader_start(tk_loader **out, tk_ctx *c, const tk_batch_source *src, const tk_batch_layout *L, int64_t first,
                    int64_t last, int nworkers, tk_err *e) {
    *out = NULL;
    if (nworkers < 1 || L->nfields < 1 || L->nfields > TK_BATCH_MAX_FIELDS)
        return tk_err_set(e, TK_EINTERNAL, "loader: bad arguments");
    struct tk_loader *l = calloc(1, sizeof *l);
    loader_slot *sl = calloc((size_t)nworkers, sizeof *sl);
    if (!l || !sl) {
        free(l);
        free(sl);
        return tk_err_set(e, TK_EIO, "out of host memory");
    }
    *l = (struct tk_loader){.c = c, .src = *src, .L = *L, .nw = nworkers, .first = first, .last = last, .slot = sl};
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->ready, NULL);
    pthread_cond_init(&l->work, NULL);
    int rc = 0;
    for (int w = 0; !rc && w < nworkers; w++) {
        loader_slot *s = &sl[w];
        s->l = l;
        s->w = w;
        s->step = first + w;
        rc = src->open(src->arg, &s->rd, e);
        s->dev = !rc && src->on_device ? src->on_device(s->rd) & ((1u << L->nfields) - 1) : 0;
        for (int f = 0; !rc && f < L->nfields; f++)
            rc = (s->dev >> f & 1 ? tk_malloc : tk_host_alloc_pinned)(c, &s->buf[f], L->bytes[f] + 1, e);
    }
    for (int w = 0; !rc && w < nworkers; w++) {
        if (pthread_create(&sl[w].th, NULL, loader_main, &sl[w]) != 0)
            rc = tk_err_set(e, TK_EIO, "loader: cannot start a thread");
        else
            sl[w].started = 1;
    }
    if (rc) {
        tk_loader_stop(l);
        return rc;
    }
    *out = l;
    return 0;
}

int tk_loader_get(tk_loader *l, int64_t step, void *const **bufs, unsigned *dev_mask, tk_err *e) {
    if (step < l->first || step >= l->last)
        return tk_err_set(e, TK_EINTERNAL, "loader: step %lld outside [%lld, %lld)", (long long)step,
                          (long long)l->first, (long long)l->last);
    loader_slot *s = &l->slot[(step - l->first) % l->nw];
    pthread_mutex_lock(&l->mu);
    while (s->state == 0 || (s->state == 1 && s->step != step)) pthread_cond_wait(&l->ready, &l->mu);
    int failed = s->state == 2;
    if (failed) *e = s->err;
    pthread_mutex_unlock(&l->mu);
    if (failed) return e->code;
    *bufs = s->buf;
    if (dev_mask) *dev_mask = s->dev;
    return 0;
}

void tk_loader_put(tk_loader *l, int64_t step) {
    loader_slot *s = &l->slot[(step - l->first) % l->nw];
    pthread_mutex_lock(&l->mu);
    if (s->state == 1 && s->step == step) s->state = 0;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
}

int tk_loader_device_workers(const tk_loader *l) {
    int n = 0;
    for (int w = 0; l && w < l->nw; w++) n += l->slot[w].dev != 0;
    return n;
}

void tk_loader_stop(tk_loader *l) {
    if (!l) return;
    pthread_mutex_lock(&l->mu);
    l->stop = 1;
    pthread_cond_broadcast(&l->work);
    pthread_mutex_unlock(&l->mu);
    for (int w = 0; w < l->nw; w++) {
        loader_slot *s = &l->slot[w];
        if (s->started) pthread_join(s->th, NULL);
        if (s->rd) l->src.close(s->rd);
        for (int f = 0; f < l->L.nfields; f++) {
            if (s->dev >> f & 1) tk_free(l->c, s->buf[f]);
            else tk_host_free_pinned(l->c, s->buf[f]);
        }
    }
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->ready);
    pthread_cond_destroy(&l->work);
    free(l->slot);
    free(l);
}

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

int tk_stager_init(tk_stager *s, tk_ctx *c, const tk_batch_layout *L, int nslots, tk_err *e) {
    memset(s, 0, sizeof *s);
    if (nslots < 2 || nslots > TK_STAGE_MAX_SLOTS) return tk_err_set(e, TK_EINTERNAL, "stager: %d slots", nslots);
    s->c = c;
    s->L = *L;
    s->n = nslots;
    size_t total = 0;
    for (int f = 0; f < L->nfields; f++) total += align256(L->bytes[f]);
    for (int k = 0; k < nslots; k++) {
        TRY(tk_malloc(c, &s->mem[k], total + 256, e));
        size_t off = 0;
        for (int f = 0; f < L->nfields; f++) {
            s->dev[k][f] = (char *)s->mem[k] + off;
            off += align256(L->bytes[f]);
        }
        TRY(tk_event_create(c, &s->copy_done[k], e));
        TRY(tk_event_create(c, &s->copied[k], e));
        TRY(tk_event_create(c, &s->taken[k], e));
    }
    return 0;
}

void tk_stager_release(tk_stager *s) {
    for (int k = 0; k < TK_STAGE_MAX_SLOTS; k++) {
        tk_event_destroy(&s->copy_done[k]);
        tk_event_destroy(&s->copied[k]);
        tk_event_destroy(&s->taken[k]);
        if (s->mem[k]) tk_free(s->c, s->mem[k]);
        s->mem[k] = NULL;
    }
}

int tk_stager_stage(tk_stager *s, int slot, void *const *src, unsigned dev_mask, tk_stage_hook hook, void *arg,
                    tk_err *e) {
    if (slot < 0 || slot >= s->n) return tk_err_set(e, TK_EINTERNAL, "stager: slot %d", slot);
    tk_ctx *c = s->c;
    const int cs = TK_STREAM_COPY;
    TRY(tk_event_wait(c, cs, &s->taken[slot], e)); // the step before has moved the old contents out
    for (int f = 0; f < s->L.nfields; f++)
        TRY((dev_mask >> f & 1 ? tk_memcpy_d2d : tk_memcpy_h2d_async)(c, s->dev[slot][f], src[f], s->L.bytes[f], cs, e));
    TRY(tk_event_record(c, &s->copy_done[slot], cs, e));
    if (hook) TRY(hook(arg, slot, s->dev[slot], cs, e));
    TRY(tk_event_record(c, &s->copied[slot], cs, e));
    // (the src buffers are free once the copy is done: the hook's work may go on, a collective
    // that waits for steps still queued, say)
    return tk_event_sync(c, &s->copy_done[slot], e);
}

int tk_stager_use(tk_stager *s, int slot, void *const *inputs, tk_err *e) {
    if (slot < 0 || slot >= s->n) return tk_err_set(e, TK_EINTERNAL, "stager: slot %d", slot);
    tk_ctx *c = s->c;
    const int cs = TK_STREAM_COMPUTE;
    TRY(tk_event_wait(c, cs, &s->copied[slot], e));
    for (int f = 0; f < s->L.nfields; f++) TRY(tk_memcpy_d2d(c, inputs[f], s->dev[slot][f], s->L.bytes[f], cs, e));
    return tk_event_record(c, &s->taken[slot], cs, e);
}
