// SSD300-ResNet34's forward and backward (model.h): one fixed sequence of ops on the model's
// buffers, no host reads, no allocation (capturable in a CUDA graph).
#include "cast2d.h"
#include "conv3d_bias.h"
#include "ssd_head.h"
#include "workloads/ssd/model.h"

// Map k's loc (part 0) or conf (part 1) in the head's output and in loc / conf.
static tk_ssd_map head_map(const ssd_model *m, int k, int part) {
    int64_t off = 0;
    for (int j = 0; j < k; j++) off += (int64_t)m->nd[j] * m->side[j] * m->side[j];
    const int A = part ? m->cfg.classes : 4, nd = m->nd[k];
    return (tk_ssd_map){.N = m->b, .HW = m->side[k] * m->side[k], .nd = nd, .A = A, .ld = m->head[k].c.s.K,
                        .c0 = part ? 4 * nd : 0, .total = m->boxes, .off = off, .box_major = m->cfg.box_major};
}

// The six heads' outputs with their loc and conf parts in loc and conf (the backward: dloc, dconf).
static void heads(const ssd_model *m, float *loc, float *conf, tk_ssd_head *hs) {
    for (int k = 0; k < SSD_MAPS; k++)
        hs[k] = (tk_ssd_head){.src = m->head[k].y, .nparts = 2, .part = {head_map(m, k, 0), head_map(m, k, 1)},
                              .out = {loc, conf}};
}

// y = act(conv(x) + bias) in x's place y; a padded head's compute weight and bias refreshed first
// (the padding's filters and bias zero from the arena's start).
static int biased_fwd(ssd_model *m, ssd_conv_b *x, const void *in, int relu, tk_err *e) {
    const int K = x->c.s.K;
    if (x->wp) {
        const int64_t taps = tk_blk_conv_w_numel(&x->c) / K; // R S C
        TRY(tk_cast2d(m->c, x->c.w, TK_F32, taps, x->wp, m->t, taps, x->c.kw, taps, e));
        TRY(tk_cast2d(m->c, x->b, TK_F32, x->c.kw, x->bp, TK_F32, K, 1, x->c.kw, e));
    }
    TRY(tk_blk_conv_fwd(&m->env, &x->c, in, x->y, 0, e));
    return tk_ssd_bias_relu_fwd(m->c, m->t, x->y, tk_blk_conv_rows(&x->c), K, x->bp ? x->bp : x->b, relu, e);
}

int ssd_forward(ssd_model *m, int train, tk_err *e) {
    const tk_blk_env *env = &m->env;
    tk_range_push("forward");
    // the images into the stem's input layout in t, the stem's compute weight from its master
    // (the optimizer's update between steps: lib/blocks/stem.h)
    TRY(tk_blk_stem_input_f32(env, &m->stem, m->in_img, e));
    TRY(tk_blk_stem_weight(env, &m->stem, e));
    TRY(tk_blk_stem_fwd(env, &m->stem, train, e));
    TRY(tk_blk_maxpool_fwd(env, &m->mp, m->u0.z, NULL, m->pool, m->pool_idx, e));
    for (int i = 0; i < SSD_BLOCKS; i++) {
        ssd_block *k = &m->blk[i];
        TRY(tk_blk_unit_fwd(env, &k->u1, k->in, NULL, train, e));
        if (k->down) TRY(tk_blk_unit_fwd(env, &k->ud, k->in, NULL, train, e));
        // bn2, the shortcut's add and the ReLU in one pass
        TRY(tk_blk_unit_fwd(env, &k->u2, k->u1.z, k->down ? k->ud.z : k->in, train, e));
    }
    for (int k = 0; k < SSD_EXTRA; k++) {
        TRY(biased_fwd(m, &m->xa[k], m->feat[k], 1, e));
        TRY(biased_fwd(m, &m->xb[k], m->xa[k].y, 1, e));
    }
    for (int k = 0; k < SSD_MAPS; k++) TRY(biased_fwd(m, &m->head[k], m->feat[k], 0, e));
    tk_ssd_head hs[SSD_MAPS];
    heads(m, m->loc, m->conf, hs);
    TRY(tk_ssd_head_gather_many(m->c, m->t, SSD_MAPS, hs, e)); // all twelve parts in one launch
    tk_range_pop();
    return 0;
}

// The bias's gradient from dy, then the convolution's backward (dx NULL: none).
static int biased_bwd(ssd_model *m, const ssd_conv_b *x, const void *in, const void *dy, void *dx, tk_err *e) {
    const int K = x->c.s.K;
    TRY(tk_conv3d_bias_bwd(m->c, m->t, dy, tk_blk_conv_rows(&x->c), K, x->dbp ? x->dbp : x->db, m->bias_ws, e));
    if (x->dbp) TRY(tk_cast2d(m->c, x->dbp, TK_F32, K, x->db, TK_F32, x->c.kw, 1, x->c.kw, e));
    return tk_blk_conv_bwd(&m->env, &x->c, in, dy, dx, e);
}

// Unit u's backward without a residual from the gradient *g of its output (given back); leaves its
// input's gradient in *g (none when dx is 0).
static int unit_bwd(ssd_model *m, tk_blk_scratch *p, const tk_blk_unit *u, const void *x, void **g, int dx, tk_err *e) {
    void *dn = tk_blk_scratch_take(p), *d = dx ? tk_blk_scratch_take(p) : NULL;
    TRY(tk_blk_unit_bwd(&m->env, u, x, *g, NULL, dn, NULL, d, e));
    tk_blk_scratch_put(p, dn), tk_blk_scratch_put(p, *g);
    *g = d;
    return 0;
}

// A basic block's backward from its output's gradients *gy + *gs; leaves its input's in the same
// two (the main path's, the shortcut's).
static int block_bwd(ssd_model *m, tk_blk_scratch *p, const ssd_block *k, void **gy, void **gs, tk_err *e) {
    void *dn = tk_blk_scratch_take(p), *dz = tk_blk_scratch_take(p), *g = tk_blk_scratch_take(p);
    // bn2's with the add's gradient dz (the ReLU's mask from its output)
    TRY(tk_blk_unit_bwd(&m->env, &k->u2, k->u1.z, *gy, *gs, dn, dz, g, e));
    tk_blk_scratch_put(p, dn), tk_blk_scratch_put(p, *gy), tk_blk_scratch_put(p, *gs);
    TRY(unit_bwd(m, p, &k->u1, k->in, &g, 1, e));
    if (k->down) TRY(unit_bwd(m, p, &k->ud, k->in, &dz, 1, e));
    *gy = g, *gs = dz;
    return 0;
}

int ssd_backward(ssd_model *m, tk_err *e) {
    const tk_blk_env *env = &m->env;
    tk_range_push("backward");
    tk_blk_scratch p = {.buf = m->g, .n = SSD_NBUF};
    tk_blk_grads_begin(&m->grads, m->P->dense_g, m->P->dense_n, m->casts, m->ncasts);
    // the six heads' output gradients, in one launch, into their outputs' buffers (head[k].y: the
    // backward reads a head's input, not its output); a padded head's extra channels written 0
    tk_ssd_head hs[SSD_MAPS];
    heads(m, m->dloc, m->dconf, hs);
    TRY(tk_ssd_head_scatter_many(m->c, m->t, SSD_MAPS, hs, e));
    // map k's gradient: its heads' (gh) plus, below the last, additional block k's input gradient (gx)
    void *gx = NULL, *gh = NULL;
    for (int k = SSD_MAPS - 1; k >= 0; k--) {
        const ssd_conv_b *h = &m->head[k];
        gh = tk_blk_scratch_take(&p);
        TRY(biased_bwd(m, h, m->feat[k], h->y, gh, e));
        TRY(tk_blk_grads_ready(env, &m->grads, h->c.dw, e));
        if (k == 0) break;
        // additional block k - 1: feat[k] = relu(xb(relu(xa(feat[k - 1]))))
        const ssd_conv_b *xa = &m->xa[k - 1], *xb = &m->xb[k - 1];
        TRY(tk_ssd_relu_bwd(m->c, m->t, tk_blk_conv_y_numel(&xb->c), xb->y, gh, gx, gh, e));
        tk_blk_scratch_put(&p, gx);
        void *g2 = tk_blk_scratch_take(&p);
        TRY(biased_bwd(m, xb, xa->y, gh, g2, e));
        tk_blk_scratch_put(&p, gh);
        TRY(tk_ssd_relu_bwd(m->c, m->t, tk_blk_conv_y_numel(&xa->c), xa->y, g2, NULL, g2, e));
        gx = tk_blk_scratch_take(&p);
        TRY(biased_bwd(m, xa, m->feat[k - 1], g2, gx, e));
        tk_blk_scratch_put(&p, g2);
        TRY(tk_blk_grads_ready(env, &m->grads, xa->c.dw, e));
    }
    // the trunk: its output's gradient gx (additional block 0's) + gh (the first heads')
    void *gy = gx, *gs = gh;
    for (int i = SSD_BLOCKS - 1; i >= 0; i--) {
        TRY(block_bwd(m, &p, &m->blk[i], &gy, &gs, e));
        TRY(tk_blk_grads_ready(env, &m->grads, m->blk[i].u1.c.dw, e)); // (conv1: the block's first tensor)
    }
    void *dpool = tk_blk_scratch_take(&p);
    TRY(tk_blk_maxpool_bwd(env, &m->mp, gy, gs, m->pool_idx, dpool, e));
    tk_blk_scratch_put(&p, gy), tk_blk_scratch_put(&p, gs);
    // the stem: bn1's backward, then conv1's weight gradient alone (the images' gradient unread)
    void *d0 = tk_blk_scratch_take(&p);
    TRY(tk_blk_stem_bwd(env, &m->stem, dpool, d0, e));
    tk_blk_scratch_put(&p, dpool), tk_blk_scratch_put(&p, d0);
    TRY(tk_blk_grads_end(env, &m->grads, e));
    tk_range_pop();
    return 0;
}
