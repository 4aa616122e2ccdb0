// The stem block (stem.h): the form's choice, its shapes, its input and weight maps, its forward
// and filter gradient. Moved out of ResNet-50's model (the ninth session's space-to-depth stem)
// so that SSD's ResNet-34 trunk runs the same code.
#include <stdlib.h>
#include <string.h>

#include "blocks/stem.h"
#include "gpu/cudnn_conv.h"
#include "stem_conv.h"
#include "stem_s2d.h"

// Whether cuDNN plans the forward and the filter gradient of s (the error in *pe where not).
static int plans(const tk_blk_env *env, const tk_conv_shape *s, tk_err *pe) {
    int rc = tk_cudnn_plan(env->dnn, TK_CONV_FWD, s, env->t, pe);
    if (!rc) rc = tk_cudnn_plan(env->dnn, TK_CONV_BWD_FILTER, s, env->t, pe);
    return rc;
}

int tk_blk_stem_pick(const tk_blk_env *env, tk_blk_stem *st, int N, int S, int K, tk_blk_stem_form form, tk_err *e) {
    *st = (tk_blk_stem){.N = N, .S = S, .K = K, .cin = 3};
    if (form == TK_BLK_STEM_S2D && S % 2)
        return tk_err_set(e, TK_EUSAGE, "stem: the space-to-depth form needs an even image side (%d)", S);
    if (!env->dnn) { // the cpu reference of the same computation (tests)
        if (form == TK_BLK_STEM_S2D) st->s2d = 1, st->cin = TK_S2D_C;
        return 0;
    }
    // cuda: the 4x4 convolution over the space-to-depth input (~2.5x faster than the 7x7 at
    // ResNet-50's shape) where cuDNN plans it and the form allows
    if (form != TK_BLK_STEM_DIRECT && S % 2 == 0) {
        tk_conv_shape s;
        tk_err pe = {0};
        const int hs = tk_s2d_side(S);
        TRY(tk_conv_shape_init(&s, N, hs, hs, TK_S2D_C, K, 4, 4, 1, 0, e));
        if (!plans(env, &s, &pe)) {
            st->s2d = 1, st->cin = TK_S2D_C;
            const char *sc = getenv("TK_STEM_CONV");
            st->own = tk_stem_conv_ok(env->t, S, K) && !(sc && strcmp(sc, "cudnn") == 0);
            return 0;
        }
        if (form == TK_BLK_STEM_S2D) {
            *e = pe;
            return tk_err_hint(e, "model.stem \"auto\" or \"direct\" runs the 7x7 convolution instead");
        }
    }
    // the 7x7 one: 3 channels zero-padded to 4, or 8 when no engine runs 4, else as they are
    static const int tries[] = {4, 8, 3};
    tk_err first = {0};
    for (int i = 0; i < 3; i++) {
        tk_conv_shape s;
        tk_err pe = {0};
        TRY(tk_conv_shape_init(&s, N, S, S, tries[i], K, 7, 7, 2, 3, e));
        if (!plans(env, &s, &pe)) {
            st->cin = tries[i];
            return 0;
        }
        if (i == 0) first = pe;
    }
    *e = first;
    return first.code;
}

int tk_blk_stem_init(tk_blk_stem *st, tk_blk_unit *u, double eps, double momentum, tk_err *e) {
    st->u = u;
    const int hs = tk_s2d_side(st->S);
    if (st->s2d)
        TRY(tk_blk_unit_init2d(u, st->N, hs, hs, TK_S2D_C, st->K, 4, 1, 0, 1, TK_BLK_BATCH_NORM, eps, momentum, e));
    else
        TRY(tk_blk_unit_init2d(u, st->N, st->S, st->S, st->cin, st->K, 7, 2, 3, 1, TK_BLK_BATCH_NORM, eps, momentum,
                               e));
    if (st->cin != 3) u->c.cw = 3; // the image's channels: the padding's (or the map's) gradient dropped
    return 0;
}

int tk_blk_stem_wshape(const tk_blk_stem *st, int64_t *shape) {
    shape[0] = st->K, shape[1] = 7, shape[2] = 7, shape[3] = 3;
    return 4;
}

int tk_blk_stem_plan(const tk_blk_env *env, tk_blk_stem *st, tk_err *e) {
    return tk_blk_conv_plan(env, &st->u->c, 0, !st->own, e);
}

void tk_blk_stem_bind(tk_blk_stem *st) {
    if (st->wp) st->u->c.wc = st->wp;
}

int tk_blk_stem_input_u8(const tk_blk_env *env, const tk_blk_stem *st, const uint8_t *img, tk_img_norm nrm,
                         tk_err *e) {
    if (st->s2d) return tk_stem_s2d_input(env->c, img, st->N, st->S, nrm, env->t, st->x, e);
    // (pixel - mean) / std, zero channels up to cin
    return tk_img_normalize(env->c, img, (int64_t)st->N * st->S * st->S, nrm, env->t, st->x, st->cin, e);
}

int tk_blk_stem_input_f32(const tk_blk_env *env, const tk_blk_stem *st, const float *img, tk_err *e) {
    if (st->s2d) return tk_stem_s2d_input_f32(env->c, img, st->N, st->S, env->t, st->x, e);
    // into t, zero channels up to cin
    return tk_cast2d(env->c, img, TK_F32, 3, st->x, env->t, st->cin, (int64_t)st->N * st->S * st->S, 3, e);
}

int tk_blk_stem_weight(const tk_blk_env *env, const tk_blk_stem *st, tk_err *e) {
    if (!st->wp) return 0;
    const tk_blk_conv *cv = &st->u->c;
    if (st->s2d) return tk_stem_s2d_weight(env->c, cv->w, st->K, env->t, st->wp, e);
    // (K R S, 3) fp32 -> (K R S, cin) in t, the pad columns zero
    return tk_cast2d(env->c, cv->w, TK_F32, 3, st->wp, env->t, st->cin, (int64_t)st->K * 7 * 7, 3, e);
}

int tk_blk_stem_conv_fwd(const tk_blk_env *env, const tk_blk_stem *st, const void *x, void *y, int train, tk_err *e) {
    const tk_blk_conv *cv = &st->u->c;
    if (st->own) return tk_stem_conv_fwd(env->c, x, st->N, st->S, cv->wc, st->K, env->t, y, e);
    return tk_blk_conv_fwd(env, cv, x, y, train, e);
}

int tk_blk_stem_wgrad(const tk_blk_env *env, const tk_blk_stem *st, const void *dy, tk_err *e) {
    const tk_blk_conv *cv = &st->u->c;
    if (!st->s2d) return tk_blk_conv_wgrad(env, cv, st->x, dy, e); // (padded channels dropped by the cast)
    // the space-to-depth filter's gradient through env->wbuf, its taps mapped back to the 7x7's
    TRY(tk_conv(env->c, env->dnn, TK_CONV_BWD_FILTER, &cv->s, env->t, st->x, dy, env->wbuf, e));
    return tk_stem_s2d_wgrad(env->c, env->wbuf, st->K, env->t, cv->dw, e);
}

int tk_blk_stem_fwd(const tk_blk_env *env, const tk_blk_stem *st, int train, tk_err *e) {
    tk_blk_unit *u = st->u;
    TRY(tk_blk_stem_conv_fwd(env, st, st->x, u->y, train, e));
    return tk_blk_norm_fwd(env, &u->n, tk_blk_conv_sums(&u->c), u->y, NULL, u->relu, u->z,
                           train ? tk_blk_unit_mask(u) : NULL, train, e);
}

int tk_blk_stem_bwd(const tk_blk_env *env, const tk_blk_stem *st, const void *dz, void *dn, tk_err *e) {
    const tk_blk_unit *u = st->u;
    // (no residual: the ReLU's mask from its bits, or recomputed from y)
    TRY(tk_blk_norm_bwd(env, &u->n, u->y, NULL, tk_blk_unit_mask(u), u->relu, dz, NULL, dn, NULL, e));
    return tk_blk_stem_wgrad(env, st, dn, e);
}
