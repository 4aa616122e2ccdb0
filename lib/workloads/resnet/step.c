// ResNet's forward and backward (resnet.h): one fixed sequence of ops on the model's buffers, no
// host reads, no allocation, so the cuda backend captures the training step in a CUDA graph. The
// units, their BN statistics' fusions and the max pool are lib/blocks'.
#include "gemm.h"
#include "gpu/cudnn_conv.h"
#include "img_norm.h"
#include "pool.h"
#include "workloads/resnet/resnet.h"
#include "xent_smooth.h"

int rn_conv_fwd(rn_model *m, const tk_blk_conv *cv, const void *x, void *y, int train, tk_err *e) {
    if (cv == &m->u0.c) return tk_blk_stem_conv_fwd(&m->env, &m->stem, x, y, train, e);
    return tk_blk_conv_fwd(&m->env, cv, x, y, train, e);
}

static int block_fwd(rn_model *m, rn_block *k, int train, tk_err *e) {
    const tk_blk_env *env = &m->env;
    tk_blk_unit *u3 = &k->u3, *ud = &k->ud;
    TRY(tk_blk_unit_fwd(env, &k->u1, k->in, NULL, train, e));
    TRY(tk_blk_unit_fwd(env, &k->u2, k->u1.z, NULL, train, e));
    TRY(tk_blk_conv_fwd(env, &u3->c, k->u2.z, u3->y, train, e));
    const void *res = k->in;
    if (k->down) {
        TRY(tk_blk_conv_fwd(env, &ud->c, k->in, ud->y, train, e));
        if (train && !ud->c.fused && !u3->c.fused) {
            // the shortcut BN's statistics alone: its apply inside bn3's pass (ud.z unwritten)
            TRY(tk_blk_norm_fwd(env, &ud->n, NULL, ud->y, NULL, ud->relu, NULL, NULL, train, e));
            return tk_blk_norm_fwd_res_norm(env, &u3->n, u3->y, ud->y, &ud->n, u3->relu, u3->z, tk_blk_unit_mask(u3),
                                            e);
        }
        TRY(tk_blk_norm_fwd(env, &ud->n, tk_blk_conv_sums(&ud->c), ud->y, NULL, ud->relu, ud->z, NULL, train, e));
        res = ud->z;
    }
    // the residual add and the block's ReLU in the last BN's pass
    return tk_blk_norm_fwd(env, &u3->n, tk_blk_conv_sums(&u3->c), u3->y, res, u3->relu, u3->z, tk_blk_unit_mask(u3),
                           train, e);
}

int rn_stem_input(rn_model *m, const uint8_t *img, tk_err *e) {
    tk_img_norm nrm;
    for (int c = 0; c < 3; c++) nrm.mean[c] = m->cfg.mean[c], nrm.std[c] = m->cfg.std[c];
    return tk_blk_stem_input_u8(&m->env, &m->stem, img, nrm, e);
}

int rn_forward(rn_model *m, const uint8_t *img, int train, tk_err *e) {
    const rn_config *cfg = &m->cfg;
    const int b = m->b;
    tk_range_push("forward");
    TRY(rn_stem_input(m, img, e));
    tk_blk_unit *u0 = &m->u0;
    TRY(rn_conv_fwd(m, &u0->c, m->stem.x, u0->y, train, e));
    if (train && !u0->c.fused) { // the BN's statistics; its apply and ReLU inside the max pool (u0.z unwritten)
        TRY(tk_blk_norm_fwd(&m->env, &u0->n, NULL, u0->y, NULL, u0->relu, NULL, NULL, train, e));
        TRY(tk_blk_maxpool_fwd(&m->env, &m->mp, u0->y, &u0->n, m->pool, m->pool_idx, e));
    } else {
        TRY(tk_blk_norm_fwd(&m->env, &u0->n, tk_blk_conv_sums(&u0->c), u0->y, NULL, u0->relu, u0->z, NULL, train, e));
        TRY(tk_blk_maxpool_fwd(&m->env, &m->mp, u0->z, NULL, m->pool, m->pool_idx, e));
    }
    for (int i = 0; i < m->nblk; i++) TRY(block_fwd(m, &m->blk[i], train, e));
    const rn_block *last = &m->blk[m->nblk - 1];
    TRY(tk_avgpool_fwd(m->c, m->t, last->u3.z, b, (int)tk_blk_conv_rows(&last->u3.c) / b, m->Cf, m->feat, e));
    // logits (b, classes) fp32 = feat fc.weight^T + fc.bias
    tk_gemm_args g = {.M = b, .N = cfg->classes, .K = m->Cf, .transb = 1, .ab_type = m->t, .cd_type = TK_F32,
                      .A = m->feat, .B = tk_params_copy_of(m->P, m->fcw), .D = m->logits, .alpha = 1, .epi = TK_EPI_BIAS,
                      .bias = m->fcb, .stream = TK_STREAM_COMPUTE};
    TRY(tk_gemm(m->c, &g, e));
    tk_range_pop();
    return 0;
}

// Unit u's backward without a residual, from the gradient *g of its output (given back): its BN's,
// then its convolution's; leaves the gradient of its input x in *g.
static int unit_bwd(rn_model *m, tk_blk_scratch *p, const tk_blk_unit *u, const void *x, void **g, tk_err *e) {
    void *d = tk_blk_scratch_take(p);
    TRY(tk_blk_norm_bwd(&m->env, &u->n, u->y, NULL, NULL, u->relu, *g, NULL, d, NULL, e));
    tk_blk_scratch_put(p, *g);
    *g = tk_blk_scratch_take(p);
    TRY(tk_blk_conv_bwd(&m->env, &u->c, x, d, *g, e));
    tk_blk_scratch_put(p, d);
    return 0;
}

// A block's backward, given the gradients of its output from the next block's main path (*gy)
// and shortcut (*gs, NULL after the last block); leaves the gradients of its input in the same
// two.
static int block_bwd(rn_model *m, tk_blk_scratch *p, rn_block *k, void **gy, void **gs, tk_err *e) {
    const tk_blk_unit *u3 = &k->u3;
    void *dz = tk_blk_scratch_take(p), *d3 = tk_blk_scratch_take(p);
    // the residual add's gradient dz too; the ReLU's mask from the forward's bits, or from u3.z
    TRY(tk_blk_norm_bwd(&m->env, &u3->n, u3->y, u3->z, tk_blk_unit_mask(u3), u3->relu, *gy, *gs, d3, dz, e));
    tk_blk_scratch_put(p, *gy), tk_blk_scratch_put(p, *gs);
    void *g = tk_blk_scratch_take(p);
    TRY(tk_blk_conv_bwd(&m->env, &u3->c, k->u2.z, d3, g, e));
    tk_blk_scratch_put(p, d3);
    TRY(unit_bwd(m, p, &k->u2, k->u1.z, &g, e));
    TRY(unit_bwd(m, p, &k->u1, k->in, &g, e));
    *gs = dz; // the identity shortcut passes the masked gradient through; a projection's unit takes it
    if (k->down) TRY(unit_bwd(m, p, &k->ud, k->in, gs, e));
    *gy = g;
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
    // the tensors are declared in forward order (model.c), so after each layer's backward every
    // gradient from its first tensor on is final: several ranks all-reduce them meanwhile
    tk_blk_grads_begin(&m->grads, m->P->dense_g, m->P->dense_n, m->casts, m->ncasts);
    TRY(tk_blk_grads_ready(&m->env, &m->grads, m->dfcw, e));
    tk_gemm_args gx = {.M = b, .N = m->Cf, .K = K, .ab_type = m->t, .cd_type = m->t, .A = m->dlogits,
                       .B = tk_params_copy_of(m->P, m->fcw), .D = m->dfeat, .alpha = 1, .stream = TK_STREAM_COMPUTE};
    TRY(tk_gemm(m->c, &gx, e));
    tk_blk_scratch p = {.buf = m->g, .n = RN_NBUF};  // the backward's scratch buffers
    void *gy = tk_blk_scratch_take(&p), *gs = NULL;
    const rn_block *last = &m->blk[m->nblk - 1];
    TRY(tk_avgpool_bwd(m->c, m->t, m->dfeat, b, (int)tk_blk_conv_rows(&last->u3.c) / b, m->Cf, gy, e));
    for (int i = m->nblk - 1; i >= 0; i--) {
        rn_block *k = &m->blk[i];
        TRY(block_bwd(m, &p, k, &gy, &gs, e));
        TRY(tk_blk_grads_ready(&m->env, &m->grads, k->u1.c.dw, e)); // (u1's conv: the block's first tensor)
    }
    // (the max pool's backward gathered inside the stem BN's, the pool's input gradient never written,
    // measured 2.4 ms against these two passes' 1.4 ms on an H100: contrib/bench/NOTES.md)
    void *dpool = tk_blk_scratch_take(&p);
    TRY(tk_blk_maxpool_bwd(&m->env, &m->mp, gy, gs, m->pool_idx, dpool, e));
    tk_blk_scratch_put(&p, gy), tk_blk_scratch_put(&p, gs);
    void *d0 = tk_blk_scratch_take(&p);
    // bn1's backward, then the stem's weight gradient (its input's unread), in the 7x7 master's
    // layout whatever ran
    TRY(tk_blk_stem_bwd(&m->env, &m->stem, dpool, d0, e));
    // the bf16 weight gradients left into their fp32 spans (all of them on one rank), the rest final
    TRY(tk_blk_grads_end(&m->env, &m->grads, e));
    tk_range_pop();
    return 0;
}

int rn_train_step(void *model, tk_err *e) {
    rn_model *m = model;
    TRY(rn_forward(m, m->in_img, 1, e));
    return rn_backward(m, m->in_label, e);
}
