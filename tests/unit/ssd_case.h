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

#endif
