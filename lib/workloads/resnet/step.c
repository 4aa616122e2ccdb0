// ResNet's forward and backward (resnet.h): one fixed sequence of ops on the model's buffers, no
// host reads, no allocation, so the cuda backend captures the training step in a CUDA graph.
#include "bn.h"
#include "cast2d.h"
#include "gemm.h"
#include "gpu/cudnn_conv.h"
#include "img_norm.h"
#include "pool.h"
#include "stem_conv.h"
#include "stem_s2d.h"
#include "workloads/resnet/resnet.h"
#include "xent_smooth.h"

static int64_t rows(const rn_conv *cv) { return tk_conv_y_numel(&cv->s) / cv->s.K; }

int rn_conv_fwd(rn_model *m, const rn_conv *cv, const void *x, void *y, int train, tk_err *e) {
    if (cv == &m->c0 && m->own_stem) return tk_stem_conv_fwd(m->c, x, m->b, m->S, cv->wc, cv->s.K, m->t, y, e);
    if (train && cv->fused)
        return tk_cudnn_conv_fwd_stats(m->dnn, &cv->s, m->t, x, NULL, NULL, cv->wc, y, cv->sums, cv->sums + cv->s.K, e);
    return tk_conv(m->c, m->dnn, TK_CONV_FWD, &cv->s, m->t, x, cv->wc, y, e);
}

static int conv_dgrad(rn_model *m, const rn_conv *cv, const void *dy, void *dx, tk_err *e) {
    return tk_conv(m->c, m->dnn, TK_CONV_BWD_DATA, &cv->s, m->t, dy, cv->wc, dx, e);
}

// The weight gradient into the fp32 gradient span: directly in fp32; in bf16 into its own cv->dwt,
// cast with the others at the backward's end (one launch instead of 52: ~0.15 ms a ResNet-50 step
// on an H100); the stem's through dwbuf (its padded channels dropped by the cast, or its
// space-to-depth taps mapped back).
static int conv_wgrad(rn_model *m, const rn_conv *cv, const void *x, const void *dy, tk_err *e) {
    const tk_conv_shape *s = &cv->s;
    if (cv->dwt) return tk_conv(m->c, m->dnn, TK_CONV_BWD_FILTER, s, m->t, x, dy, cv->dwt, e); // (cast at the end)
    const int padded = cv == &m->c0 && m->cin != 3;
    if (m->t == TK_F32 && !padded) return tk_conv(m->c, m->dnn, TK_CONV_BWD_FILTER, s, TK_F32, x, dy, cv->dw, e);
    TRY(tk_conv(m->c, m->dnn, TK_CONV_BWD_FILTER, s, m->t, x, dy, m->dwbuf, e));
    if (cv == &m->c0 && m->s2d) return tk_stem_s2d_wgrad(m->c, m->dwbuf, s->K, m->t, cv->dw, e);
    const int C = padded ? 3 : s->C;
    return tk_cast2d(m->c, m->dwbuf, m->t, s->C, cv->dw, TK_F32, C, (int64_t)s->K * s->R * s->S, C, e);
}

// The mask bits bn3 of block k writes in training and its backward reads (NULL: none; not with
// statistics from the convolution's epilogue, whose BN entry writes none).
static uint8_t *mask3(const rn_block *k) { return k->c3.fused ? NULL : k->mask3; }

// The BN after convolution cv (x its output): its statistics from cv's epilogue when it made them;
// mask: the ReLU's mask bits too (training).
static int bn_fwd(rn_model *m, rn_bn *bn, const rn_conv *cv, const void *x, const void *res, int relu, void *y,
                  uint8_t *mask, int train, tk_err *e) {
    const float eps = (float)m->cfg.bn_eps, mom = (float)m->cfg.bn_momentum;
    const int64_t M = rows(cv);
    if (!train)
        return tk_bn_fwd_eval(m->c, m->t, x, M, bn->C, bn->gamma, bn->beta, res, relu, eps, bn->rmean, bn->rvar, y, e);
    if (cv->fused)
        return tk_bn_fwd_train_sums(m->c, m->t, x, M, bn->C, cv->sums, cv->sums + cv->s.K, bn->gamma, bn->beta, res,
                                    relu, eps, mom, bn->rmean, bn->rvar, bn->smean, bn->sinvstd, y, m->bn_ws, e);
    return tk_bn_fwd_train_mask(m->c, m->t, x, M, bn->C, bn->gamma, bn->beta, res, relu, eps, mom, bn->rmean,
                                bn->rvar, bn->smean, bn->sinvstd, y, mask, m->bn_ws, e);
}

// relu: the forward had a ReLU and no residual: its mask is recomputed from x (kernels/bn.h), so
// its output is not read again; y: the output of a forward with a ReLU and a residual.
static int bn_bwd(rn_model *m, const rn_bn *bn, const void *x, const void *y, int relu, const void *dy,
                  const void *dy2, int64_t M, void *dx, void *dz, tk_err *e) {
    return tk_bn_bwd(m->c, m->t, x, y, relu ? bn->beta : NULL, dy, dy2, M, bn->C, bn->gamma, bn->smean, bn->sinvstd,
                     dx, dz, bn->dgamma, bn->dbeta, m->bn_ws, e);
}

static int block_fwd(rn_model *m, rn_block *k, int train, tk_err *e) {
    TRY(rn_conv_fwd(m, &k->c1, k->in, k->y1, train, e));
    TRY(bn_fwd(m, &k->b1, &k->c1, k->y1, NULL, 1, k->z1, NULL, train, e));
    TRY(rn_conv_fwd(m, &k->c2, k->z1, k->y2, train, e));
    TRY(bn_fwd(m, &k->b2, &k->c2, k->y2, NULL, 1, k->z2, NULL, train, e));
    TRY(rn_conv_fwd(m, &k->c3, k->z2, k->y3, train, e));
    const void *res = k->in;
    if (k->down) {
        TRY(rn_conv_fwd(m, &k->cd, k->in, k->yd, train, e));
        if (train && !k->cd.fused && !k->c3.fused) {
            // the shortcut BN's statistics alone: its apply inside bn3's pass (zd unwritten)
            const rn_bn *bd = &k->bd, *b3 = &k->b3;
            TRY(bn_fwd(m, &k->bd, &k->cd, k->yd, NULL, 0, NULL, NULL, train, e));
            const tk_bn_saved sd = {bd->gamma, bd->beta, bd->smean, bd->sinvstd};
            return tk_bn_fwd_train_res_bn(m->c, m->t, k->y3, rows(&k->c3), b3->C, b3->gamma, b3->beta, k->yd, sd, 1,
                                          (float)m->cfg.bn_eps, (float)m->cfg.bn_momentum, b3->rmean, b3->rvar,
                                          b3->smean, b3->sinvstd, k->out, mask3(k), m->bn_ws, e);
        }
        TRY(bn_fwd(m, &k->bd, &k->cd, k->yd, NULL, 0, k->zd, NULL, train, e));
        res = k->zd;
    }
    // the residual add and the block's ReLU in the last BN's pass
    return bn_fwd(m, &k->b3, &k->c3, k->y3, res, 1, k->out, mask3(k), train, e);
}

int rn_stem_input(rn_model *m, const uint8_t *img, tk_err *e) {
    tk_img_norm nrm;
    for (int c = 0; c < 3; c++) nrm.mean[c] = m->cfg.mean[c], nrm.std[c] = m->cfg.std[c];
    if (m->s2d) return tk_stem_s2d_input(m->c, img, m->b, m->S, nrm, m->t, m->x0, e);
    // (pixel - mean) / std, zero channels up to cin (cuDNN's stem layout)
    return tk_img_normalize(m->c, img, (int64_t)m->b * m->S * m->S, nrm, m->t, m->x0, m->cin, e);
}

int rn_forward(rn_model *m, const uint8_t *img, int train, tk_err *e) {
    const rn_config *cfg = &m->cfg;
    const int b = m->b;
    tk_range_push("forward");
    TRY(rn_stem_input(m, img, e));
    TRY(rn_conv_fwd(m, &m->c0, m->x0, m->y0, train, e));
    if (train && !m->c0.fused) { // the BN's statistics; its apply and ReLU inside the max pool (z0 unwritten)
        const rn_bn *b0 = &m->b0;
        TRY(bn_fwd(m, &m->b0, &m->c0, m->y0, NULL, 1, NULL, NULL, train, e));
        const tk_pool_bn pb = {b0->gamma, b0->beta, b0->smean, b0->sinvstd};
        TRY(tk_maxpool_bn_fwd(m->c, m->t, m->y0, pb, b, m->H0, m->H0, cfg->width, 3, 2, 1, m->pool, m->pool_idx, e));
    } else {
        TRY(bn_fwd(m, &m->b0, &m->c0, m->y0, NULL, 1, m->z0, NULL, train, e));
        TRY(tk_maxpool_fwd(m->c, m->t, m->z0, b, m->H0, m->H0, cfg->width, 3, 2, 1, m->pool, m->pool_idx, e));
    }
    for (int i = 0; i < m->nblk; i++) TRY(block_fwd(m, &m->blk[i], train, e));
    const rn_block *last = &m->blk[m->nblk - 1];
    TRY(tk_avgpool_fwd(m->c, m->t, last->out, b, (int)rows(&last->c3) / b, m->Cf, m->feat, e));
    // logits (b, classes) fp32 = feat fc.weight^T + fc.bias
    tk_gemm_args g = {.M = b, .N = cfg->classes, .K = m->Cf, .transb = 1, .ab_type = m->t, .cd_type = TK_F32,
                      .A = m->feat, .B = tk_params_copy_of(m->P, m->fcw), .D = m->logits, .alpha = 1, .epi = TK_EPI_BIAS,
                      .bias = m->fcb, .stream = TK_STREAM_COMPUTE};
    TRY(tk_gemm(m->c, &g, e));
    tk_range_pop();
    return 0;
}

// The backward's scratch buffers (RN_NBUF of the largest activation), handed out and back.
typedef struct {
    rn_model *m;
    unsigned busy;
} pool_t;

static void *take(pool_t *p) {
    for (int i = 0; i < RN_NBUF; i++)
        if (!(p->busy >> i & 1)) {
            p->busy |= 1u << i;
            return p->m->g[i];
        }
    return NULL; // (not reached: a block holds at most 4)
}

static void put(pool_t *p, const void *buf) {
    for (int i = 0; i < RN_NBUF; i++)
        if (buf && p->m->g[i] == buf) p->busy &= ~(1u << i);
}

// A block's backward, given the gradients of its output from the next block's main path (*gy)
// and shortcut (*gs, NULL after the last block); leaves the gradients of its input in the same
// two.
static int block_bwd(rn_model *m, pool_t *p, rn_block *k, void **gy, void **gs, tk_err *e) {
    void *dz = take(p), *d3 = take(p);
    const rn_bn *b3 = &k->b3;
    if (mask3(k)) // the ReLU's mask from the forward's bits instead of out
        TRY(tk_bn_bwd_mask(m->c, m->t, k->y3, mask3(k), *gy, *gs, rows(&k->c3), b3->C, b3->gamma, b3->smean,
                           b3->sinvstd, d3, dz, b3->dgamma, b3->dbeta, m->bn_ws, e));
    else
        TRY(bn_bwd(m, b3, k->y3, k->out, 0, *gy, *gs, rows(&k->c3), d3, dz, e));
    put(p, *gy), put(p, *gs);
    void *g2 = take(p);
    TRY(conv_dgrad(m, &k->c3, d3, g2, e));
    TRY(conv_wgrad(m, &k->c3, k->z2, d3, e));
    put(p, d3);
    void *d2 = take(p);
    TRY(bn_bwd(m, &k->b2, k->y2, NULL, 1, g2, NULL, rows(&k->c2), d2, NULL, e));
    put(p, g2);
    void *g1 = take(p);
    TRY(conv_dgrad(m, &k->c2, d2, g1, e));
    TRY(conv_wgrad(m, &k->c2, k->z1, d2, e));
    put(p, d2);
    void *d1 = take(p);
    TRY(bn_bwd(m, &k->b1, k->y1, NULL, 1, g1, NULL, rows(&k->c1), d1, NULL, e));
    put(p, g1);
    void *ga = take(p);
    TRY(conv_dgrad(m, &k->c1, d1, ga, e));
    TRY(conv_wgrad(m, &k->c1, k->in, d1, e));
    put(p, d1);
    if (k->down) { // the shortcut's BN (no ReLU of its own) and convolution
        void *dd = take(p);
        TRY(bn_bwd(m, &k->bd, k->yd, NULL, 0, dz, NULL, rows(&k->cd), dd, NULL, e));
        put(p, dz);
        void *gsn = take(p);
        TRY(conv_dgrad(m, &k->cd, dd, gsn, e));
        TRY(conv_wgrad(m, &k->cd, k->in, dd, e));
        put(p, dd);
        *gs = gsn;
    } else {
        *gs = dz; // the identity shortcut passes the masked gradient through
    }
    *gy = ga;
    return 0;
}

int rn_backward(rn_model *m, const int32_t *label, tk_err *e) {
    const rn_config *cfg = &m->cfg;
    const int b = m->b, K = cfg->classes;
    tk_range_push("backward");
    // the loss, normalized by the global batch: the ranks' gradients add up to the batch's
    TRY(tk_xent_smooth(m->c, m->logits, label, b, K, (int)cfg->batch, (float)cfg->label_smoothing, m->t, m->dlogits,
                       m->loss_acc, m->xent_ws, e));
    // fc.weight's gradient dlogits^T feat, fc.bias's the column sums of dlogits (fused)
    tk_gemm_args gw = {.M = K, .N = m->Cf, .K = b, .transa = 1, .ab_type = m->t, .cd_type = TK_F32, .A = m->dlogits,
                       .B = m->feat, .D = m->dfcw, .alpha = 1, .epi = TK_EPI_BGRADB, .bgrad = m->dfcb,
                       .stream = TK_STREAM_COMPUTE};
    TRY(tk_gemm(m->c, &gw, e));
    tk_gemm_args gx = {.M = b, .N = m->Cf, .K = K, .ab_type = m->t, .cd_type = m->t, .A = m->dlogits,
                       .B = tk_params_copy_of(m->P, m->fcw), .D = m->dfeat, .alpha = 1, .stream = TK_STREAM_COMPUTE};
    TRY(tk_gemm(m->c, &gx, e));
    pool_t p = {.m = m};
    void *gy = take(&p), *gs = NULL;
    const rn_block *last = &m->blk[m->nblk - 1];
    TRY(tk_avgpool_bwd(m->c, m->t, m->dfeat, b, (int)rows(&last->c3) / b, m->Cf, gy, e));
    for (int i = m->nblk - 1; i >= 0; i--) TRY(block_bwd(m, &p, &m->blk[i], &gy, &gs, e));
    // (the max pool's backward gathered inside the stem BN's, the pool's input gradient never written,
    // measured 2.4 ms against these two passes' 1.4 ms on an H100: contrib/bench/NOTES.md)
    void *dpool = take(&p);
    TRY(tk_maxpool_bwd(m->c, m->t, gy, gs, m->pool_idx, b, m->H0, m->H0, cfg->width, 3, 2, 1, dpool, e));
    put(&p, gy), put(&p, gs);
    void *d0 = take(&p);
    TRY(bn_bwd(m, &m->b0, m->y0, NULL, 1, dpool, NULL, rows(&m->c0), d0, NULL, e));
    TRY(conv_wgrad(m, &m->c0, m->x0, d0, e));
    // the bf16 weight gradients into their fp32 spans, at most TK_CAST_MANY a launch
    for (int i = 0; i < m->ncasts; i += TK_CAST_MANY) {
        const int n = m->ncasts - i < TK_CAST_MANY ? m->ncasts - i : TK_CAST_MANY;
        TRY(tk_cast_many(m->c, m->casts + i, n, m->t, TK_F32, e));
    }
    tk_range_pop();
    return 0;
}

int rn_train_step(void *model, tk_err *e) {
    rn_model *m = model;
    TRY(rn_forward(m, m->in_img, 1, e));
    return rn_backward(m, m->in_label, e);
}
