// ResNet's model: its tensors in the engine's flat buffers, the activations, the convolution
// plans, initialization and the compute copies (resnet.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "gpu/cudnn_conv.h"
#include "workloads/resnet/resnet.h"
#include "xent_smooth.h"

// ---- tensors ----

static int add(tk_params *P, const char *name, int ndim, int64_t d0, int64_t d1, int64_t d2, int64_t d3, int flags,
               int *idx, tk_err *e) {
    int64_t shape[4] = {d0, d1, d2, d3};
    return tk_params_add(P, name, TK_F32, ndim, shape, flags, -1, idx, e);
}

static int declare_conv(rn_model *m, tk_blk_conv *cv, const char *name, tk_err *e) {
    int64_t w[5];
    tk_blk_conv_wshape(cv, w);
    if (cv == &m->u0.c) tk_blk_stem_wshape(&m->stem, w); // 7x7 over the image's 3 channels, whatever runs
    return add(m->P, name, 4, w[0], w[1], w[2], w[3], TK_PARAM_DENSE, &cv->pidx, e);
}

// gamma and beta now (dense: no weight decay, no LARS adaptation, as MLPerf's LARS); the running
// statistics later, after every dense tensor (declare_stats).
static int declare_bn(rn_model *m, tk_blk_norm *bn, const char *prefix, tk_err *e) {
    char name[TK_PARAM_NAME];
    const int f = TK_PARAM_DENSE | TK_PARAM_NO_DECAY | TK_PARAM_NO_ADAPT;
    snprintf(name, sizeof name, "%s.weight", prefix);
    TRY(add(m->P, name, 1, bn->C, 0, 0, 0, f, &bn->pidx, e));
    snprintf(name, sizeof name, "%s.bias", prefix);
    return add(m->P, name, 1, bn->C, 0, 0, 0, f, NULL, e);
}

static int declare_stats(rn_model *m, tk_blk_norm *bn, tk_err *e) {
    char prefix[TK_PARAM_NAME], name[TK_PARAM_NAME];
    snprintf(prefix, sizeof prefix, "%s", m->P->p[bn->pidx].name);
    prefix[strlen(prefix) - strlen(".weight")] = 0;
    snprintf(name, sizeof name, "%s.running_mean", prefix);
    TRY(add(m->P, name, 1, bn->C, 0, 0, 0, 0, NULL, e));
    snprintf(name, sizeof name, "%s.running_var", prefix);
    return add(m->P, name, 1, bn->C, 0, 0, 0, 0, NULL, e);
}

// Every unit of the model, in forward order (the stem, then each block's 1, 2, 3, downsample).
static int all_units(rn_model *m, tk_blk_unit **out) {
    int n = 0;
    out[n++] = &m->u0;
    for (int i = 0; i < m->nblk; i++) {
        rn_block *k = &m->blk[i];
        out[n++] = &k->u1, out[n++] = &k->u2, out[n++] = &k->u3;
        if (k->down) out[n++] = &k->ud;
    }
    return n;
}

static int declare(rn_model *m, tk_err *e) {
    char name[TK_PARAM_NAME];
    TRY(declare_conv(m, &m->u0.c, "conv1.weight", e));
    TRY(declare_bn(m, &m->u0.n, "bn1", e));
    for (int i = 0; i < m->nblk; i++) {
        rn_block *k = &m->blk[i];
        char pre[64];
        snprintf(pre, sizeof pre, "layer%d.%d", k->stage + 1, k->unit);
        tk_blk_unit *u[3] = {&k->u1, &k->u2, &k->u3};
        for (int j = 0; j < 3; j++) {
            snprintf(name, sizeof name, "%s.conv%d.weight", pre, j + 1);
            TRY(declare_conv(m, &u[j]->c, name, e));
            snprintf(name, sizeof name, "%s.bn%d", pre, j + 1);
            TRY(declare_bn(m, &u[j]->n, name, e));
        }
        if (k->down) {
            snprintf(name, sizeof name, "%s.downsample.0.weight", pre);
            TRY(declare_conv(m, &k->ud.c, name, e));
            snprintf(name, sizeof name, "%s.downsample.1", pre);
            TRY(declare_bn(m, &k->ud.n, name, e));
        }
    }
    TRY(add(m->P, "fc.weight", 2, m->cfg.classes, m->Cf, 0, 0, TK_PARAM_DENSE, &m->pfw, e));
    TRY(add(m->P, "fc.bias", 1, m->cfg.classes, 0, 0, 0, TK_PARAM_DENSE | TK_PARAM_NO_DECAY | TK_PARAM_NO_ADAPT,
            &m->pfb, e));
    tk_blk_unit *us[4 * RN_MAX_BLOCKS + 1];
    const int nu = all_units(m, us);
    for (int i = 0; i < nu; i++) TRY(declare_stats(m, &us[i]->n, e));
    if (m->t == TK_BF16) m->P->copy_type = TK_BF16;
    TRY(tk_params_alloc(m->P, e));
    // the views
    tk_params *P = m->P;
    for (int i = 0; i < nu; i++) {
        tk_blk_conv *cv = &us[i]->c;
        tk_blk_norm *b = &us[i]->n;
        int g = b->pidx, rs = P->ndense + 2 * i;
        cv->w = P->p[cv->pidx].w, cv->dw = P->p[cv->pidx].g;
        cv->wc = tk_params_copy_of(P, cv->w);
        b->gamma = P->p[g].w, b->dgamma = P->p[g].g;
        b->beta = P->p[g + 1].w, b->dbeta = P->p[g + 1].g;
        b->rmean = P->p[rs].w, b->rvar = P->p[rs + 1].w;
    }
    m->fcw = P->p[m->pfw].w, m->dfcw = P->p[m->pfw].g;
    m->fcb = P->p[m->pfb].w, m->dfcb = P->p[m->pfb].g;
    return 0;
}

// ---- shapes ----

static int shapes(rn_model *m, tk_err *e) {
    const rn_config *cfg = &m->cfg;
    const int b = m->b;
    const double eps = cfg->bn_eps, mom = cfg->bn_momentum;
    tk_blk_unit *u0 = &m->u0;
    TRY(tk_blk_stem_init(&m->stem, u0, eps, mom, e)); // (its form picked in rn_create)
    m->H0 = u0->c.s.P;
    TRY(tk_blk_pool_init2d(&m->mp, b, m->H0, m->H0, cfg->width, 3, 2, 1, e));
    int H = m->mp.P, Cin = cfg->width;
    m->nblk = 0;
    for (int s = 0; s < cfg->nstages; s++)
        for (int u = 0; u < cfg->layers[s]; u++) {
            rn_block *k = &m->blk[m->nblk++];
            const int planes = cfg->width << s, Cout = planes * cfg->expansion, st = s > 0 && u == 0 ? 2 : 1;
            k->stage = s, k->unit = u;
            k->down = u == 0 && (st != 1 || Cin != Cout);
            TRY(tk_blk_unit_init2d(&k->u1, b, H, H, Cin, planes, 1, 1, 0, 1, TK_BLK_BATCH_NORM, eps, mom, e));
            TRY(tk_blk_unit_init2d(&k->u2, b, H, H, planes, planes, 3, st, 1, 1, TK_BLK_BATCH_NORM, eps, mom, e));
            const int P = k->u2.c.s.P;
            TRY(tk_blk_unit_init2d(&k->u3, b, P, P, planes, Cout, 1, 1, 0, 1, TK_BLK_BATCH_NORM, eps, mom, e));
            if (k->down)
                TRY(tk_blk_unit_init2d(&k->ud, b, H, H, Cin, Cout, 1, st, 0, 0, TK_BLK_BATCH_NORM, eps, mom, e));
            H = P, Cin = Cout;
        }
    m->Cf = Cin;
    return 0;
}

// ---- activations ----

static size_t act_bytes(const rn_model *m, int64_t elems) { return (size_t)elems * tk_dtype_size(m->t); }

// The activations, inputs and workspaces: the engine's arena.
static int activations(rn_model *m, const tk_wl_env *env, tk_err *e) {
    const int b = m->b;
    size_t es = tk_dtype_size(m->t), bn_ws = 0, max_act = 0, max_w = 0;
    void **slot[16 * RN_MAX_BLOCKS + 64];
    size_t size[16 * RN_MAX_BLOCKS + 64];
    int n = 0;
#define NEED(ptr, bytes) (slot[n] = (void **)&(ptr), size[n++] = (bytes))
#define ACT(ptr, elems) (NEED(ptr, act_bytes(m, elems)), max_act = (size_t)(elems) > max_act ? (size_t)(elems) : max_act)
    NEED(m->in_img, (size_t)b * m->S * m->S * 3);
    NEED(m->in_label, (size_t)b * 4);
    ACT(m->stem.x, tk_blk_stem_x_numel(&m->stem));
    ACT(m->u0.y, tk_blk_conv_y_numel(&m->u0.c));
    ACT(m->u0.z, tk_blk_conv_y_numel(&m->u0.c));
    const int64_t npool = tk_blk_pool_y_numel(&m->mp);
    ACT(m->pool, npool);
    NEED(m->pool_idx, (size_t)npool);
    tk_blk_unit *us[4 * RN_MAX_BLOCKS + 1];
    const int nu = all_units(m, us);
    for (int i = 0; i < nu; i++) {
        NEED(us[i]->n.smean, tk_blk_norm_stat_bytes(&us[i]->n));
        NEED(us[i]->n.sinvstd, tk_blk_norm_stat_bytes(&us[i]->n));
    }
    for (int i = 0; i < m->nblk; i++) {
        rn_block *k = &m->blk[i];
        ACT(k->u1.y, tk_blk_conv_y_numel(&k->u1.c));
        ACT(k->u1.z, tk_blk_conv_y_numel(&k->u1.c));
        ACT(k->u2.y, tk_blk_conv_y_numel(&k->u2.c));
        ACT(k->u2.z, tk_blk_conv_y_numel(&k->u2.c));
        ACT(k->u3.y, tk_blk_conv_y_numel(&k->u3.c));
        ACT(k->u3.z, tk_blk_conv_y_numel(&k->u3.c));
        if (tk_bn_mask_ok(m->c->backend, m->t, k->u3.n.C))
            NEED(k->u3.mask, (size_t)(tk_blk_conv_y_numel(&k->u3.c) + 7) / 8);
        if (k->down) {
            ACT(k->ud.y, tk_blk_conv_y_numel(&k->ud.c));
            ACT(k->ud.z, tk_blk_conv_y_numel(&k->ud.c));
        }
    }
    ACT(m->feat, (int64_t)b * m->Cf);
    ACT(m->dfeat, (int64_t)b * m->Cf);
    NEED(m->logits, (size_t)b * m->cfg.classes * 4);
    ACT(m->dlogits, (int64_t)b * m->cfg.classes);
    for (int i = 0; i < RN_NBUF; i++) NEED(m->g[i], max_act * es);
    // workspaces: BN's largest, the loss's, the bf16 weight gradients', the top-1 counter
    for (int i = 0; i < nu; i++) {
        size_t w = tk_blk_norm_ws_bytes(m->c->backend, &us[i]->n);
        bn_ws = w > bn_ws ? w : bn_ws;
    }
    NEED(m->env.norm_ws, bn_ws);
    NEED(m->xent_ws, tk_xent_smooth_ws_bytes(m->c->backend, b));
    for (int i = 0; i < nu; i++) {
        const size_t nw = (size_t)tk_blk_conv_w_numel(&us[i]->c);
        max_w = nw > max_w ? nw : max_w;
    }
    if (m->t == TK_BF16 || tk_blk_stem_wbuf(&m->stem)) NEED(m->env.wbuf, max_w * es);
    if (m->t == TK_BF16) // each weight gradient in bf16, cast into the fp32 span with the others at once
        for (int i = 1; i < nu; i++) NEED(us[i]->c.dwt, (size_t)tk_blk_conv_w_numel(&us[i]->c) * es);
    if (tk_blk_stem_wp_numel(&m->stem)) NEED(m->stem.wp, (size_t)tk_blk_stem_wp_numel(&m->stem) * es);
    for (int i = 0; i < nu; i++) NEED(us[i]->c.sums, (size_t)2 * us[i]->c.s.K * 4);
    NEED(m->top1, 8);
    void *dnn_ws = NULL;
    size_t dnn_bytes = m->dnn ? tk_cudnn_ws_bytes(m->dnn) : 0;
    NEED(dnn_ws, dnn_bytes);
#undef ACT
#undef NEED
    TRY(tk_wl_acts(env, size, slot, n, e));
    if (m->dnn) tk_cudnn_set_ws(m->dnn, dnn_ws, dnn_bytes);
    m->ncasts = 0;
    for (int i = 0; i < nu; i++) m->ncasts += tk_blk_conv_cast_span(&us[i]->c, &m->casts[m->ncasts]);
    tk_blk_stem_bind(&m->stem); // the stem reads its compute copy (rn_refresh_stem fills it)
    // the blocks' inputs
    for (int i = 0; i < m->nblk; i++) m->blk[i].in = i == 0 ? m->pool : m->blk[i - 1].u3.z;
    return 0;
}

// cuDNN's plans for every convolution pass of the model (the stem's: lib/blocks/stem.h), each
// forward fused with its BN's statistics where that pays (lib/blocks), before the workspace is
// sized.
static int plan_convs(rn_model *m, tk_err *e) {
    tk_blk_unit *us[4 * RN_MAX_BLOCKS + 1];
    const int nu = all_units(m, us);
    TRY(tk_blk_stem_plan(&m->env, &m->stem, e));
    for (int i = 1; i < nu; i++) TRY(tk_blk_conv_plan(&m->env, &us[i]->c, 1, 1, e));
    return 0;
}

int rn_create(const void *config, const tk_wl_env *env, void **out, tk_err *e) {
    const rn_config *cfg = config;
    rn_model *m = *out = calloc(1, sizeof *m); // (the engine destroys it if create fails)
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    m->cfg = *cfg;
    m->c = env->c;
    m->P = env->params;
    m->dist = env->dist;
    m->lr = env->lr, m->step = env->step, m->loss_acc = env->loss_acc;
    m->grads = (tk_blk_grads){.ready = env->grads_ready, .arg = env->grads_arg};
    m->t = cfg->bf16 ? TK_BF16 : TK_F32;
    m->S = cfg->image_size;
    const int world = m->dist->world;
    int64_t per_rank;
    TRY(tk_per_rank_batch("resnet", cfg->batch, world, &per_rank, e));
    m->b = (int)per_rank;
    if (m->c->backend == TK_BACKEND_CUDA) TRY(tk_cudnn_create(m->c, 0, &m->dnn, e));
    m->env = (tk_blk_env){.c = m->c, .dnn = m->dnn, .t = m->t}; // (the scratch: activations)
    // the stem's form (lib/blocks/stem.h): on cuda the space-to-depth 4x4 convolution where cuDNN
    // plans it and model.stem allows, else the 7x7 over padded channels; on the cpu the form asked
    TRY(tk_blk_stem_pick(&m->env, &m->stem, m->b, m->S, cfg->width, (tk_blk_stem_form)cfg->stem, e));
    TRY(shapes(m, e));
    TRY(declare(m, e));
    if (m->dnn) TRY(plan_convs(m, e));
    TRY(activations(m, env, e)); // (cuda: the engine's warm-up step follows, workload.h warmup)
    return tk_ctx_sync(m->c, e);
}

void rn_destroy(void *model) { // (the buffers are the engine's)
    rn_model *m = model;
    if (m) tk_cudnn_destroy(m->dnn);
    free(m);
}

// ---- initialization ----

static uint32_t init_stream(int pidx) { return (uint32_t)TK_RNG_INIT | (uint32_t)(pidx + 1) << 8; }

static void fill_const(float *h, size_t n, float v) {
    for (size_t i = 0; i < n; i++) h[i] = v;
}

// torchvision's resnet50() initialization: conv weights kaiming_normal_(mode="fan_out",
// nonlinearity="relu"), N(0, 2 / (K R S)); BN gamma 1, beta 0 (gamma 0 in each block's last BN
// with zero_init_residual); the FC layer as nn.Linear's default, U(-1/sqrt(in), 1/sqrt(in)) for
// weight and bias. "mlperf": NVIDIA's MXNet v1.1 (MLPerfInit: Xavier gaussian, factor "in",
// magnitude 2, i.e. N(0, 2 / (C R S)); fc weight N(0, 0.01), bias 0; gamma 1, beta 0; its runs
// did not pass --bn-gamma-init0).
int rn_init_weights(void *model, uint64_t seed, tk_err *e) {
    rn_model *m = model;
    tk_params *P = m->P;
    float *h = calloc(P->dense_n + 1, sizeof(float));
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory");
    const int mlperf = m->cfg.init == RN_INIT_MLPERF;
    tk_blk_unit *us[4 * RN_MAX_BLOCKS + 1];
    const int nu = all_units(m, us);
    for (int i = 0; i < nu; i++) {
        const tk_blk_conv *cv = &us[i]->c;
        const tk_param *p = &P->p[cv->pidx];
        size_t n = (size_t)tk_param_numel(p);
        double fan = mlperf ? (double)(p->shape[1] * p->shape[2] * p->shape[3]) : (double)(p->shape[0] * p->shape[1] * p->shape[2]);
        tk_blk_fill_normal(h + (cv->w - P->dense_w), n, sqrt(2.0 / fan), seed, init_stream(cv->pidx));
    }
    for (int i = 0; i < nu; i++) {
        int last = 0;
        for (int j = 0; j < m->nblk; j++) last |= us[i] == &m->blk[j].u3;
        const tk_blk_norm *bn = &us[i]->n;
        fill_const(h + (bn->gamma - P->dense_w), (size_t)bn->C, m->cfg.zero_init_residual && last ? 0.0f : 1.0f);
    }
    const size_t nfw = (size_t)m->cfg.classes * m->Cf;
    if (mlperf) {
        tk_blk_fill_normal(h + (m->fcw - P->dense_w), nfw, 0.01, seed, init_stream(m->pfw));
    } else {
        tk_blk_fill_uniform(h + (m->fcw - P->dense_w), nfw, 1.0 / sqrt((double)m->Cf), seed, init_stream(m->pfw));
        tk_blk_fill_uniform(h + (m->fcb - P->dense_w), (size_t)m->cfg.classes, 1.0 / sqrt((double)m->Cf), seed,
                            init_stream(m->pfb));
    }
    int rc = tk_memcpy_h2d(m->c, P->dense_w, h, P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e);
    // running statistics: mean 0, variance 1
    for (int i = 0; !rc && i < nu; i++) rc = tk_blk_norm_reset(m->c, &us[i]->n, h, e);
    free(h);
    return rc;
}

int rn_refresh_stem(void *model, tk_err *e) {
    rn_model *m = model;
    return tk_blk_stem_weight(&m->env, &m->stem, e);
}

int rn_weights_loaded(void *model, tk_err *e) {
    rn_model *m = model;
    if (m->P->copy) TRY(tk_params_refresh_copy(m->P, e));
    return rn_refresh_stem(m, e);
}

// ---- names ----

const char *rn_mlperf_name(const rn_model *m, int pidx, char *buf, size_t n) {
    const char *tv = m->P->p[pidx].name;
    int s, u, k;
    char what[32];
    if (strcmp(tv, "conv1.weight") == 0) return snprintf(buf, n, "conv0_weight"), buf;
    if (strcmp(tv, "bn1.weight") == 0) return snprintf(buf, n, "bn0_gamma"), buf;
    if (strcmp(tv, "bn1.bias") == 0) return snprintf(buf, n, "bn0_beta"), buf;
    if (strcmp(tv, "fc.weight") == 0) return snprintf(buf, n, "fc1_weight"), buf;
    if (strcmp(tv, "fc.bias") == 0) return snprintf(buf, n, "fc1_bias"), buf;
    if (sscanf(tv, "layer%d.%d.conv%d.%31s", &s, &u, &k, what) == 4 && strcmp(what, "weight") == 0)
        return snprintf(buf, n, "stage%d_unit%d_conv%d_weight", s, u + 1, k), buf;
    if (sscanf(tv, "layer%d.%d.bn%d.%31s", &s, &u, &k, what) == 4 && (!strcmp(what, "weight") || !strcmp(what, "bias")))
        return snprintf(buf, n, "stage%d_unit%d_bn%d_%s", s, u + 1, k, what[0] == 'w' ? "gamma" : "beta"), buf;
    if (sscanf(tv, "layer%d.%d.downsample.0.%31s", &s, &u, what) == 3 && strcmp(what, "weight") == 0)
        return snprintf(buf, n, "stage%d_unit%d_conv1sc_weight", s, u + 1), buf;
    if (sscanf(tv, "layer%d.%d.downsample.1.%31s", &s, &u, what) == 3 && (!strcmp(what, "weight") || !strcmp(what, "bias")))
        return snprintf(buf, n, "stage%d_unit%d_bnsc_%s", s, u + 1, what[0] == 'w' ? "gamma" : "beta"), buf;
    return NULL;
}
