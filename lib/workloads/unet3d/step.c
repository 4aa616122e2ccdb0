// The 3D U-Net's forward and backward (model.h): one fixed sequence of ops on the model's buffers,
// no host reads, no allocation (the cuda backend captures the training step in a CUDA graph).
#include "colcat.h"
#include "conv3d_bias.h"
#include "dice_ce.h"
#include "workloads/unet3d/model.h"

// The padded compute copies (cuda, where cuDNN wants more than 1 input channel or 3 classes):
// from the master weights each step, the padding zero from the arena's start.
static int refresh_padded(u3_model *m, tk_err *e) {
    if (m->w0p) {
        const tk_blk_conv *c0 = &m->enc[0].c;
        TRY(tk_cast2d(m->c, c0->w, TK_F32, 1, m->w0p, m->t, m->cin, tk_blk_conv_w_numel(c0) / m->cin, 1, e));
    }
    if (m->wop) {
        const int W = m->cfg.width;
        TRY(tk_cast2d(m->c, m->oc.w, TK_F32, W, m->wop, m->t, W, U3_CLASSES, W, e));
        TRY(tk_cast2d(m->c, m->ob, TK_F32, U3_CLASSES, m->obp, TK_F32, m->ld, 1, U3_CLASSES, e));
    }
    return 0;
}

int u3_forward(u3_model *m, tk_err *e) {
    const tk_blk_env *env = &m->env;
    tk_range_push("forward");
    TRY(refresh_padded(m, e));
    for (int i = 0; i < U3_ENC; i++) TRY(tk_blk_unit_fwd(env, &m->enc[i], i ? m->enc[i - 1].z : m->x0, NULL, 1, e));
    for (int j = 0; j < U3_UP; j++) {
        u3_up *u = &m->up[j];
        TRY(tk_blk_conv_fwd(env, &u->tc, u->in, u->ty, 1, e));
        // [ty + bias, skip]: the upsampling's bias added as it is copied
        TRY(tk_colcat(m->c, m->t, u->ty, u->cout, u->b, u->skip, u->cout, u->rows, u->cat, e));
        TRY(tk_blk_unit_fwd(env, &u->u1, u->cat, NULL, 1, e));
        TRY(tk_blk_unit_fwd(env, &u->u2, u->u1.z, NULL, 1, e));
    }
    TRY(tk_blk_conv_fwd(env, &m->oc, m->up[U3_UP - 1].u2.z, m->logits, 1, e));
    TRY(tk_conv3d_bias_fwd(m->c, m->t, m->logits, (int64_t)m->b * m->S, m->ld, m->obp ? m->obp : m->ob, e));
    tk_range_pop();
    return 0;
}

// Unit u's backward from the gradient *g of its output (+ g2, a skip's other gradient), given
// back; leaves its input's gradient in *g (none when dx is 0).
static int unit_bwd(u3_model *m, tk_blk_scratch *p, const tk_blk_unit *u, const void *x, void **g, const void *g2, int dx,
                    tk_err *e) {
    void *dn = tk_blk_scratch_take(p), *d = dx ? tk_blk_scratch_take(p) : NULL;
    TRY(tk_blk_unit_bwd(&m->env, u, x, *g, g2, dn, NULL, d, e));
    tk_blk_scratch_put(p, dn), tk_blk_scratch_put(p, *g);
    *g = d;
    return 0;
}

static int backward(u3_model *m, tk_err *e) {
    const tk_blk_env *env = &m->env;
    const int64_t M0 = (int64_t)m->b * m->S;
    tk_range_push("backward");
    tk_blk_scratch p = {.buf = m->g, .n = U3_NBUF};  // the backward's scratch buffers
    // the loss, this rank's share of the global batch's mean (the ranks' gradients add up to it)
    void *dl = tk_blk_scratch_take(&p);
    const float share = (float)((double)m->b / (double)(m->cfg.batch > 0 ? m->cfg.batch : m->b));
    TRY(tk_dice_ce_acc(m->c, m->t, m->logits, m->in_label, m->b, m->S, m->ld, share, m->loss_acc, m->loss, m->dice,
                       dl, m->dice_ws, e));
    TRY(tk_conv3d_bias_bwd(m->c, m->t, dl, M0, m->ld, m->dobp ? m->dobp : m->dob, m->bias_ws, e));
    if (m->dobp) TRY(tk_cast2d(m->c, m->dobp, TK_F32, m->ld, m->dob, TK_F32, U3_CLASSES, 1, U3_CLASSES, e));
    void *g = tk_blk_scratch_take(&p);
    TRY(tk_blk_conv_bwd(env, &m->oc, m->up[U3_UP - 1].u2.z, dl, g, e));
    tk_blk_scratch_put(&p, dl);
    // the tensors are declared in forward order (model.c), so after each block's backward every
    // gradient from its first tensor on is final: several ranks all-reduce them meanwhile (a
    // skip's second gradient is an activation's, the encoder's tensors untouched before their turn)
    tk_blk_grads_begin(&m->grads, m->P->dense_g, m->P->dense_n, m->casts, m->ncasts);
    TRY(tk_blk_grads_ready(env, &m->grads, m->oc.dw, e)); // (the output's weight, then its bias)
    // the decoder: each skip's gradient kept in the cat buffer's skip half... copied out into the
    // cat buffer itself (unread after the block's backward) for the encoder's norm (its dy2)
    for (int j = U3_UP - 1; j >= 0; j--) {
        u3_up *u = &m->up[j];
        TRY(unit_bwd(m, &p, &u->u2, u->u1.z, &g, NULL, 1, e));
        TRY(unit_bwd(m, &p, &u->u1, u->cat, &g, NULL, 1, e)); // g: the concatenation's gradient
        void *dty = tk_blk_scratch_take(&p);
        TRY(tk_colsplit(m->c, m->t, g, u->cout, u->cout, u->rows, dty, u->cat, e)); // cat: the skip's
        tk_blk_scratch_put(&p, g);
        TRY(tk_conv3d_bias_bwd(m->c, m->t, dty, u->rows, u->cout, u->db, m->bias_ws, e));
        g = tk_blk_scratch_take(&p);
        TRY(tk_blk_conv_bwd(env, &u->tc, u->in, dty, g, e));
        tk_blk_scratch_put(&p, dty);
        TRY(tk_blk_grads_ready(env, &m->grads, u->tc.dw, e)); // (the block's first tensor)
    }
    // the encoder, from the bottleneck's output; skip l (enc[2 l + 1]'s output) also gets its
    // gradient through the concatenation of upsampling block 4 - l
    for (int i = U3_ENC - 1; i >= 0; i--) {
        const void *g2 = i % 2 && i < U3_ENC - 1 ? m->up[4 - (i - 1) / 2].cat : NULL;
        TRY(unit_bwd(m, &p, &m->enc[i], i ? m->enc[i - 1].z : m->x0, &g, g2, i > 0, e));
        TRY(tk_blk_grads_ready(env, &m->grads, m->enc[i].c.dw, e));
    }
    // the bf16 weight gradients left into their fp32 spans (all of them on one rank), the rest final
    TRY(tk_blk_grads_end(env, &m->grads, e));
    tk_range_pop();
    return 0;
}

int u3_train_step(void *model, tk_err *e) {
    u3_model *m = model;
    // the images (b, S) f32 into x0 (b, S, cin) in t (the padding channels 0)
    TRY(tk_cast2d(m->c, m->in_img, TK_F32, 1, m->x0, m->t, m->cin, (int64_t)m->b * m->S, 1, e));
    TRY(u3_forward(m, e));
    return backward(m, e);
}

int u3_forward_eval(void *model, const float *x, int B, void *y, tk_err *e) {
    u3_model *m = model;
    if (B < 1 || B > m->b) return tk_err_set(e, TK_EINTERNAL, "unet3d: %d windows a forward (1 to %d)", B, m->b);
    // every sample is computed alone (convolutions, instance norms): the b - B after the windows,
    // whatever they hold, change nothing in theirs
    TRY(tk_cast2d(m->c, x, TK_F32, 1, m->x0, m->t, m->cin, (int64_t)B * m->S, 1, e));
    TRY(u3_forward(m, e));
    return tk_cast2d(m->c, m->logits, m->t, m->ld, y, m->t, U3_CLASSES, (int64_t)B * m->S, U3_CLASSES, e);
}
