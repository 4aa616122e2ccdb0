// What the SSD network's tests share (tests/unit/test_ssd_model.c, tests/gpu/test_ssd_model.c):
// the model made on its own parameter buffers and arena (the workload table comes later), the
// reference's initialization from a seed, a batch of images and the tests' loss: a fixed random
// weighting of the outputs, L = sum(loc * wl) + sum(conf * wc), so dloc = wl, dconf = wc.
#ifndef TK_TEST_SSD_CASE_H
#define TK_TEST_SSD_CASE_H

#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "workloads/ssd/model.h"

typedef struct ssd_case {
    tk_params P;
    tk_arena acts;
    tk_wl_env env;
    ssd_model *m;
} ssd_case;

// cfg's model on c, its weights from seed (0: left zero); 0, or the error in e.
static inline int ssd_case_make(ssd_case *k, tk_ctx *c, const ssd_config *cfg, uint64_t seed, tk_err *e) {
    memset(k, 0, sizeof *k);
    tk_params_init(&k->P, c, 0);
    k->env = (tk_wl_env){.c = c, .params = &k->P, .acts = &k->acts};
    TRY(ssd_create(cfg, &k->env, &k->m, e));
    return seed ? ssd_init_weights(k->m, seed, e) : 0;
}

static inline void ssd_case_free(ssd_case *k) {
    ssd_destroy(k->m);
    k->m = NULL;
    if (k->acts.base) tk_arena_release(k->P.c, &k->acts);
    tk_params_release(&k->P);
}

// Host arrays of the batch (b S S 3: N(0, 1)) and the loss weights (uniform [-1, 1)) from key.
typedef struct ssd_case_io {
    float *img, *wl, *wc;
    size_t nimg, nl, nc;
} ssd_case_io;

static inline int ssd_case_io_make(const ssd_model *m, uint64_t key, ssd_case_io *io) {
    io->nimg = (size_t)m->b * m->S * m->S * 3;
    io->nl = (size_t)m->b * 4 * m->boxes, io->nc = (size_t)m->b * m->cfg.classes * m->boxes;
    io->img = malloc(io->nimg * 4), io->wl = malloc(io->nl * 4), io->wc = malloc(io->nc * 4);
    if (!io->img || !io->wl || !io->wc) return -1;
    for (size_t i = 0; i < io->nimg; i++) io->img[i] = (float)tk_philox_normal(key, 1, i);
    for (size_t i = 0; i < io->nl; i++) io->wl[i] = 2 * tk_philox_uniform(key, 2, i) - 1;
    for (size_t i = 0; i < io->nc; i++) io->wc[i] = 2 * tk_philox_uniform(key, 3, i) - 1;
    return 0;
}

static inline void ssd_case_io_free(ssd_case_io *io) { free(io->img), free(io->wl), free(io->wc); }

// The batch and the loss's gradients into the model's buffers.
static inline int ssd_case_io_load(ssd_model *m, const ssd_case_io *io, tk_err *e) {
    TRY(tk_memcpy_h2d(m->c, m->in_img, io->img, io->nimg * 4, TK_STREAM_COMPUTE, e));
    TRY(tk_memcpy_h2d(m->c, m->dloc, io->wl, io->nl * 4, TK_STREAM_COMPUTE, e));
    TRY(tk_memcpy_h2d(m->c, m->dconf, io->wc, io->nc * 4, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(m->c, e);
}

// The model (ssd_case_make) with a batch and loss weights from key loaded; 0, or -1 with e's
// error (io then holds nothing to free).
static inline int ssd_case_loaded(ssd_case *k, tk_ctx *c, const ssd_config *cfg, uint64_t seed, uint64_t key,
                                  ssd_case_io *io, tk_err *e) {
    memset(io, 0, sizeof *io);
    if (ssd_case_make(k, c, cfg, seed, e)) return -1;
    if (ssd_case_io_make(k->m, key, io)) {
        ssd_case_io_free(io), memset(io, 0, sizeof *io);
        return tk_err_set(e, TK_EIO, "out of host memory"), -1;
    }
    return ssd_case_io_load(k->m, io, e) ? -1 : 0;
}

// y[n, b, a] = x[n, a, b] for N images of A values a box and B boxes: the reference's layout
// (model.h loc, conf) into the box-major one (ssd_config.box_major) or, swapping A and B, back.
static inline void ssd_case_transpose(const float *x, float *y, int N, int64_t A, int64_t B) {
    for (int n = 0; n < N; n++)
        for (int64_t a = 0; a < A; a++)
            for (int64_t b = 0; b < B; b++) y[((size_t)n * B + b) * A + a] = x[((size_t)n * A + a) * B + b];
}

// How many float elements of x and y differ bit for bit.
static inline size_t ssd_case_ndiff(const float *x, const float *y, size_t n) {
    size_t d = 0;
    for (size_t i = 0; i < n; i++) d += memcmp(x + i, y + i, 4) != 0;
    return d;
}

// cfg's network on c in the reference's layout and box-major (cfg.box_major 0 and 1), the same
// weights (seed) and batch (key), one training forward and backward each, the box-major one's
// loss weights the other's transposed: how many elements of loc and conf (transposed), and of
// the dense gradients, differ bit for bit (*nout, *ngrad: 0 when the layouts hold the same
// numbers); 0, or -1 with e's error.
static inline int ssd_case_layouts(tk_ctx *c, ssd_config cfg, uint64_t seed, uint64_t key, size_t *nout,
                                   size_t *ngrad, tk_err *e) {
    ssd_case k[2] = {0};
    ssd_case_io io[2] = {0};
    float *h[6] = {0};
    int rc = 0;
    for (int j = 0; j < 2 && !rc; j++) {
        cfg.box_major = j;
        rc = ssd_case_loaded(&k[j], c, &cfg, seed, key, &io[j], e);
    }
    ssd_model *a = rc ? NULL : k[0].m, *b = rc ? NULL : k[1].m;
    const size_t nl = io[0].nl, nc = io[0].nc, ng = a ? (size_t)a->P->dense_n : 0;
    const int64_t B = a ? a->boxes : 0, C = cfg.classes;
    if (!rc) { // the box-major model's loss weights: the other's transposed
        ssd_case_transpose(io[0].wl, io[1].wl, a->b, 4, B);
        ssd_case_transpose(io[0].wc, io[1].wc, a->b, C, B);
        rc = ssd_case_io_load(b, &io[1], e);
    }
    for (int j = 0; j < 2 && !rc; j++) {
        ssd_model *m = j ? b : a;
        rc = ssd_forward(m, 1, e);
        if (!rc) rc = ssd_backward(m, e);
    }
    for (int i = 0; i < 6 && !rc; i++)
        if (!(h[i] = malloc((i < 2 ? nl : i < 4 ? nc : ng) * 4 + 4))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = tk_memcpy_d2h(c, h[0], a->loc, nl * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_d2h(c, h[1], b->loc, nl * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_d2h(c, h[2], a->conf, nc * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_d2h(c, h[3], b->conf, nc * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_d2h(c, h[4], a->P->dense_g, ng * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_d2h(c, h[5], b->P->dense_g, ng * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(c, e);
    if (!rc) {
        float *t = malloc((nl > nc ? nl : nc) * 4 + 4);
        if (!t) rc = tk_err_set(e, TK_EIO, "out of host memory");
        else {
            ssd_case_transpose(h[0], t, a->b, 4, B);
            *nout = ssd_case_ndiff(t, h[1], nl);
            ssd_case_transpose(h[2], t, a->b, C, B);
            *nout += ssd_case_ndiff(t, h[3], nc);
            *ngrad = ssd_case_ndiff(h[4], h[5], ng);
            free(t);
        }
    }
    for (int i = 0; i < 6; i++) free(h[i]);
    for (int j = 0; j < 2; j++) {
        ssd_case_io_free(&io[j]);
        if (k[j].P.c) ssd_case_free(&k[j]); // (made)
    }
    return rc ? -1 : 0;
}

// The training forward's ReLU outputs in the order the network applies them (the stem, each
// block's two, each additional block's two): their convolutions (the shapes) and outputs
// (fp32 in the tests that read them); SSD_RELUS of them.
#define SSD_RELUS (1 + 2 * SSD_BLOCKS + 2 * SSD_EXTRA)

static inline void ssd_case_relus(const ssd_model *m, const tk_blk_conv **cv, const void **z) {
    int n = 0;
    cv[n] = &m->u0.c, z[n++] = m->u0.z;
    for (int i = 0; i < SSD_BLOCKS; i++) {
        cv[n] = &m->blk[i].u1.c, z[n++] = m->blk[i].u1.z;
        cv[n] = &m->blk[i].u2.c, z[n++] = m->blk[i].u2.z;
    }
    for (int k = 0; k < SSD_EXTRA; k++) {
        cv[n] = &m->xa[k].c, z[n++] = m->xa[k].y;
        cv[n] = &m->xb[k].c, z[n++] = m->xb[k].y;
    }
}

// The cpu model's units (the stem, each block's two) given ReLU mask bits (host memory, returned
// for the caller to free; NULL: out of memory) that their training forward writes and their
// backward reads instead of recomputing the decisions: bits ssd_case_adopt_relus can set.
static inline uint8_t *ssd_case_give_masks(ssd_model *m) {
    tk_blk_unit *u[1 + 2 * SSD_BLOCKS];
    int n = 0;
    u[n++] = &m->u0;
    for (int i = 0; i < SSD_BLOCKS; i++) u[n++] = &m->blk[i].u1, u[n++] = &m->blk[i].u2;
    size_t total = 0;
    for (int i = 0; i < n; i++) total += (size_t)(tk_blk_conv_y_numel(&u[i]->c) + 7) / 8;
    uint8_t *all = calloc(total, 1), *p = all;
    for (int i = 0; all && i < n; i++) u[i]->mask = p, p += (tk_blk_conv_y_numel(&u[i]->c) + 7) / 8;
    return all;
}

// Another run's ReLU decisions (ref[i]: its fp32 outputs of ReLU i, ssd_case_relus' order) taken
// into the cpu model m (masks given, after its training forward) where the two differ: a unit's
// mask bit, an additional layer's output (its backward reads y > 0). Returns how many.
static inline size_t ssd_case_adopt_relus(ssd_model *m, float *const *ref) {
    const tk_blk_conv *cv[SSD_RELUS];
    const void *z[SSD_RELUS];
    ssd_case_relus(m, cv, z);
    size_t taken = 0;
    for (int i = 0; i < SSD_RELUS; i++) {
        const size_t n = (size_t)tk_blk_conv_y_numel(cv[i]);
        float *a = (float *)z[i];
        const float *b = ref[i];
        const ssd_block *k = i && i <= 2 * SSD_BLOCKS ? &m->blk[(i - 1) / 2] : NULL;
        uint8_t *bits = !i ? m->u0.mask : k ? ((i - 1) % 2 ? k->u2.mask : k->u1.mask) : NULL;
        for (size_t j = 0; j < n; j++)
            if ((a[j] > 0) != (b[j] > 0)) {
                taken++;
                if (!bits) a[j] = b[j] > 0 ? b[j] : 0;
                else if (b[j] > 0) bits[j / 8] |= (uint8_t)(1u << (j % 8));
                else bits[j / 8] &= (uint8_t)~(1u << (j % 8));
            }
    }
    return taken;
}

#endif
