// SSD300-ResNet34's model (model.h): its shapes, its tensors in the engine's flat buffers, the
// activations, cuDNN's plans, the reference's initialization and torchvision's trunk weights.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv3d_bias.h"
#include "core/philox.h"
#include "engine/ckpt.h"
#include "gpu/cudnn_conv.h"
#include "workloads/ssd/model.h"

ssd_config ssd_config_default(int b) {
    return (ssd_config){.b = b, .size = 300, .classes = 81, .width = 64, .bn_eps = 1e-5, .bn_momentum = 0.1};
}

// ---- shapes ----

static const int stage_blocks[3] = {3, 4, 6}; // resnet34's layer1..layer3
static const int boxes_at[SSD_MAPS] = {4, 6, 6, 6, 4, 4};

static int unit(ssd_model *m, tk_blk_unit *u, int H, int C, int K, int R, int stride, int pad, int relu, tk_err *e) {
    return tk_blk_unit_init2d(u, m->b, H, H, C, K, R, stride, pad, relu, TK_BLK_BATCH_NORM, m->cfg.bn_eps,
                              m->cfg.bn_momentum, e);
}

static int shapes(ssd_model *m, tk_err *e) {
    const int w = m->cfg.width, b = m->b;
    TRY(tk_blk_stem_init(&m->stem, &m->u0, m->cfg.bn_eps, m->cfg.bn_momentum, e)); // (its form: ssd_create)
    const int H0 = m->u0.c.s.P;
    TRY(tk_blk_pool_init2d(&m->mp, b, H0, H0, w, 3, 2, 1, e));
    int H = m->mp.P, Cin = w, n = 0;
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < stage_blocks[s]; i++) {
            ssd_block *k = &m->blk[n++];
            // layer2's first block at stride 2; layer3's at 1 (the reference's _ModifyBlock)
            const int planes = w << s, st = s == 1 && i == 0 ? 2 : 1;
            k->down = i == 0 && (st != 1 || Cin != planes);
            TRY(unit(m, &k->u1, H, Cin, planes, 3, st, 1, 1, e));
            const int P = k->u1.c.s.P;
            TRY(unit(m, &k->u2, P, planes, planes, 3, 1, 1, 1, e));
            if (k->down) TRY(unit(m, &k->ud, H, Cin, planes, 1, st, 0, 0, e));
            H = P, Cin = planes;
        }
    const int chan[SSD_MAPS] = {4 * w, 8 * w, 8 * w, 4 * w, 4 * w, 4 * w}, mid[SSD_EXTRA] = {4 * w, 4 * w, 2 * w, 2 * w, 2 * w};
    memcpy(m->chan, chan, sizeof chan), memcpy(m->mid, mid, sizeof mid), memcpy(m->nd, boxes_at, sizeof boxes_at);
    m->side[0] = H;
    for (int k = 0; k < SSD_EXTRA; k++) {
        TRY(tk_blk_conv_init2d(&m->xa[k].c, b, H, H, chan[k], mid[k], 1, 1, 1, 0, e));
        // conv8_2 .. conv10_2 3x3 stride 2 padding 1; conv10_2, conv11_2 3x3 without padding
        TRY(tk_blk_conv_init2d(&m->xb[k].c, b, H, H, mid[k], chan[k + 1], 3, 3, k < 3 ? 2 : 1, k < 3 ? 1 : 0, e));
        H = m->side[k + 1] = m->xb[k].c.s.P;
    }
    m->boxes = 0;
    for (int k = 0; k < SSD_MAPS; k++) {
        const int K = m->nd[k] * (4 + m->cfg.classes), al = m->cfg.head_align ? m->cfg.head_align : m->dnn ? 8 : 1;
        const int Kp = (K + al - 1) / al * al;
        TRY(tk_blk_conv_init2d(&m->head[k].c, b, m->side[k], m->side[k], chan[k], Kp, 3, 3, 1, 1, e));
        if (Kp != K) m->head[k].c.kw = K;
        m->boxes += (int64_t)m->nd[k] * m->side[k] * m->side[k];
    }
    return 0;
}

// ---- tensors ----

static int add(ssd_model *m, const char *name, int ndim, const int64_t *shape, int flags, int *idx, tk_err *e) {
    return tk_params_add(m->P, name, TK_F32, ndim, shape, flags, -1, idx, e);
}

static int declare_w(ssd_model *m, const tk_blk_conv *cv, int K, const char *name, int packed, int *idx, tk_err *e) {
    int64_t w[5];
    tk_blk_conv_wshape(cv, w);
    if (cv == &m->u0.c) tk_blk_stem_wshape(&m->stem, w); // the reference's 7x7 over 3 channels, whatever runs
    w[0] = K;
    return add(m, name, 4, w, TK_PARAM_DENSE | (packed ? TK_PARAM_PACKED : 0), idx, e);
}

static int declare_vec(ssd_model *m, const char *name, int64_t n, int packed, int *idx, tk_err *e) {
    return add(m, name, 1, &n, TK_PARAM_DENSE | TK_PARAM_NO_DECAY | TK_PARAM_NO_ADAPT | (packed ? TK_PARAM_PACKED : 0),
               idx, e);
}

// A unit's convolution CONV.weight and its norm BN.weight, BN.bias.
static int declare_unit(ssd_model *m, tk_blk_unit *u, const char *conv, const char *bn, tk_err *e) {
    char name[TK_PARAM_NAME];
    snprintf(name, sizeof name, "%s.weight", conv);
    TRY(declare_w(m, &u->c, u->c.s.K, name, 0, &u->c.pidx, e));
    snprintf(name, sizeof name, "%s.weight", bn);
    TRY(declare_vec(m, name, u->n.C, 0, &u->n.pidx, e));
    snprintf(name, sizeof name, "%s.bias", bn);
    return declare_vec(m, name, u->n.C, 0, NULL, e);
}

static int declare_biased(ssd_model *m, ssd_conv_b *x, const char *pre, tk_err *e) {
    char name[TK_PARAM_NAME];
    snprintf(name, sizeof name, "%s.weight", pre);
    TRY(declare_w(m, &x->c, x->c.s.K, name, 0, &x->c.pidx, e));
    snprintf(name, sizeof name, "%s.bias", pre);
    return declare_vec(m, name, x->c.s.K, 0, &x->pb, e);
}

// Every unit in forward order (the stem; each block's u1, u2, ud).
static int all_units(ssd_model *m, tk_blk_unit **out) {
    int n = 0;
    out[n++] = &m->u0;
    for (int i = 0; i < SSD_BLOCKS; i++) {
        out[n++] = &m->blk[i].u1, out[n++] = &m->blk[i].u2;
        if (m->blk[i].down) out[n++] = &m->blk[i].ud;
    }
    return n;
}

// Every biased convolution in declaration order (head 0, extra 0's two, head 1, ..., head 5).
static int all_biased(ssd_model *m, ssd_conv_b **out) {
    int n = 0;
    for (int k = 0; k < SSD_MAPS; k++) {
        out[n++] = &m->head[k];
        if (k < SSD_EXTRA) out[n++] = &m->xa[k], out[n++] = &m->xb[k];
    }
    return n;
}

// The trunk's name prefix of block i: model.layer1.4.I (torchvision's layer1), model.layer1.5.I
// (layer2), model.layer2.0.I (layer3): base_model.py's Sequential(children[:6]) and
// Sequential(children[6:7]).
static void block_prefix(int i, char *buf, size_t n) {
    if (i < 3) snprintf(buf, n, "model.layer1.4.%d", i);
    else if (i < 7) snprintf(buf, n, "model.layer1.5.%d", i - 3);
    else snprintf(buf, n, "model.layer2.0.%d", i - 7);
}

// The tensors in the order the backward completes them last to first (the trunk, then head 0,
// additional block 0, head 1, ..., head 5), so that after each layer's backward every gradient
// from its first tensor on is final (tk_blk_grads).
static int declare(ssd_model *m, tk_err *e) {
    char a[TK_PARAM_NAME], b[TK_PARAM_NAME], pre[64];
    TRY(declare_unit(m, &m->u0, "model.layer1.0", "model.layer1.1", e));
    for (int i = 0; i < SSD_BLOCKS; i++) {
        ssd_block *k = &m->blk[i];
        block_prefix(i, pre, sizeof pre);
        for (int j = 1; j <= 2; j++) {
            snprintf(a, sizeof a, "%s.conv%d", pre, j), snprintf(b, sizeof b, "%s.bn%d", pre, j);
            TRY(declare_unit(m, j == 1 ? &k->u1 : &k->u2, a, b, e));
        }
        if (k->down) {
            snprintf(a, sizeof a, "%s.downsample.0", pre), snprintf(b, sizeof b, "%s.downsample.1", pre);
            TRY(declare_unit(m, &k->ud, a, b, e));
        }
    }
    for (int k = 0; k < SSD_MAPS; k++) {
        ssd_conv_b *h = &m->head[k];
        const int nl = 4 * m->nd[k], nc = m->cfg.classes * m->nd[k];
        // loc.k and conf.k packed: one (nd (4 + classes), 3, 3, C) weight and one bias
        snprintf(a, sizeof a, "loc.%d.weight", k);
        TRY(declare_w(m, &h->c, nl, a, 0, &h->c.pidx, e));
        snprintf(a, sizeof a, "conf.%d.weight", k);
        TRY(declare_w(m, &h->c, nc, a, 1, &m->pconf[k], e));
        snprintf(a, sizeof a, "loc.%d.bias", k);
        TRY(declare_vec(m, a, nl, 0, &h->pb, e));
        snprintf(a, sizeof a, "conf.%d.bias", k);
        TRY(declare_vec(m, a, nc, 1, NULL, e));
        if (k == SSD_EXTRA) break;
        snprintf(pre, sizeof pre, "additional_blocks.%d.0", k);
        TRY(declare_biased(m, &m->xa[k], pre, e));
        snprintf(pre, sizeof pre, "additional_blocks.%d.2", k);
        TRY(declare_biased(m, &m->xb[k], pre, e));
    }
    tk_blk_unit *us[3 * SSD_BLOCKS + 1];
    const int nu = all_units(m, us);
    for (int i = 0; i < nu; i++) { // running statistics, after the dense tensors
        const char *w = m->P->p[us[i]->n.pidx].name;
        const int len = (int)(strlen(w) - strlen(".weight"));
        int64_t C = us[i]->n.C;
        snprintf(a, sizeof a, "%.*s.running_mean", len, w);
        TRY(add(m, a, 1, &C, 0, NULL, e));
        snprintf(a, sizeof a, "%.*s.running_var", len, w);
        TRY(add(m, a, 1, &C, 0, NULL, e));
    }
    if (m->t == TK_BF16) m->P->copy_type = TK_BF16;
    TRY(tk_params_alloc(m->P, e));
    // the views
    tk_params *P = m->P;
    for (int i = 0; i < nu; i++) {
        tk_blk_conv *cv = &us[i]->c;
        tk_blk_norm *n = &us[i]->n;
        const int g = n->pidx, rs = P->ndense + 2 * i;
        cv->w = P->p[cv->pidx].w, cv->dw = P->p[cv->pidx].g, cv->wc = tk_params_copy_of(P, cv->w);
        n->gamma = P->p[g].w, n->dgamma = P->p[g].g;
        n->beta = P->p[g + 1].w, n->dbeta = P->p[g + 1].g;
        n->rmean = P->p[rs].w, n->rvar = P->p[rs + 1].w;
    }
    ssd_conv_b *xs[3 * SSD_MAPS];
    const int nx = all_biased(m, xs);
    for (int i = 0; i < nx; i++) {
        tk_blk_conv *cv = &xs[i]->c;
        cv->w = P->p[cv->pidx].w, cv->dw = P->p[cv->pidx].g, cv->wc = tk_params_copy_of(P, cv->w);
        xs[i]->b = P->p[xs[i]->pb].w, xs[i]->db = P->p[xs[i]->pb].g;
    }
    for (int k = 0; k < SSD_MAPS; k++) // (the packing's promise, checked)
        if ((float *)P->p[m->pconf[k]].w != m->head[k].c.w + tk_param_numel(&P->p[m->head[k].c.pidx]) ||
            (float *)P->p[m->head[k].pb + 1].w != m->head[k].b + tk_param_numel(&P->p[m->head[k].pb]))
            return tk_err_set(e, TK_EINTERNAL, "ssd: loc.%d and conf.%d are not packed", k, k);
    return 0;
}

int64_t ssd_param_count(const ssd_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->P->ndense; i++) n += tk_param_numel(&m->P->p[i]);
    return n;
}

// ---- activations ----

static size_t umax(size_t a, size_t b) { return a > b ? a : b; }

static int activations(ssd_model *m, const tk_wl_env *wenv, tk_err *e) {
    const tk_backend be = m->c->backend;
    const size_t es = tk_dtype_size(m->t);
    size_t max_act = 0, norm_ws = 0, max_w = 0, bias_ws = 0;
    void **slot[16 * SSD_MAX_CONVS];
    size_t size[16 * SSD_MAX_CONVS];
    int n = 0;
#define NEED(ptr, bytes) (slot[n] = (void **)&(ptr), size[n] = (bytes), n++)
#define ACT(ptr, elems) (NEED(ptr, (size_t)(elems) * es), max_act = umax(max_act, (size_t)(elems)))
    const int64_t px = (int64_t)m->b * m->S * m->S;
    NEED(m->in_img, (size_t)px * 3 * 4);
    ACT(m->stem.x, tk_blk_stem_x_numel(&m->stem));
    tk_blk_unit *us[3 * SSD_BLOCKS + 1];
    const int nu = all_units(m, us);
    for (int i = 0; i < nu; i++) {
        ACT(us[i]->y, tk_blk_conv_y_numel(&us[i]->c));
        ACT(us[i]->z, tk_blk_conv_y_numel(&us[i]->c));
        NEED(us[i]->n.smean, tk_blk_norm_stat_bytes(&us[i]->n));
        NEED(us[i]->n.sinvstd, tk_blk_norm_stat_bytes(&us[i]->n));
        NEED(us[i]->c.sums, (size_t)2 * us[i]->c.s.K * 4);
        norm_ws = umax(norm_ws, tk_blk_norm_ws_bytes(be, &us[i]->n));
    }
    const int64_t npool = tk_blk_pool_y_numel(&m->mp);
    ACT(m->pool, npool);
    NEED(m->pool_idx, (size_t)npool);
    ssd_conv_b *xs[3 * SSD_MAPS];
    const int nx = all_biased(m, xs);
    int padded = tk_blk_stem_wbuf(&m->stem);
    for (int i = 0; i < nx; i++) {
        ACT(xs[i]->y, tk_blk_conv_y_numel(&xs[i]->c));
        bias_ws = umax(bias_ws, tk_conv3d_bias_ws_bytes(be, tk_blk_conv_rows(&xs[i]->c), xs[i]->c.s.K));
        if (xs[i]->c.kw) {
            NEED(xs[i]->wp, (size_t)tk_blk_conv_w_numel(&xs[i]->c) * es);
            NEED(xs[i]->bp, (size_t)xs[i]->c.s.K * 4);
            NEED(xs[i]->dbp, (size_t)xs[i]->c.s.K * 4);
            padded = 1;
        }
    }
    const size_t nloc = (size_t)m->b * 4 * m->boxes * 4, nconf = (size_t)m->b * m->cfg.classes * m->boxes * 4;
    NEED(m->loc, nloc), NEED(m->conf, nconf), NEED(m->dloc, nloc), NEED(m->dconf, nconf);
    for (int i = 0; i < SSD_NBUF; i++) NEED(m->g[i], max_act * es);
    NEED(m->env.norm_ws, norm_ws);
    NEED(m->bias_ws, bias_ws);
    tk_blk_conv *cs[SSD_MAX_CONVS];
    int nc = 0;
    for (int i = 0; i < nu; i++) cs[nc++] = &us[i]->c;
    for (int i = 0; i < nx; i++) cs[nc++] = &xs[i]->c;
    for (int i = 0; i < nc; i++) max_w = umax(max_w, (size_t)tk_blk_conv_w_numel(cs[i]));
    if (m->t == TK_BF16 || padded) NEED(m->env.wbuf, max_w * es);
    if (m->t == TK_BF16) // each weight gradient in bf16, cast into the fp32 span with the others at once
        for (int i = 0; i < nc; i++)
            if (!cs[i]->cw && !cs[i]->kw) NEED(cs[i]->dwt, (size_t)tk_blk_conv_w_numel(cs[i]) * es);
    if (tk_blk_stem_wp_numel(&m->stem)) NEED(m->stem.wp, (size_t)tk_blk_stem_wp_numel(&m->stem) * es);
    void *dnn_ws = NULL;
    const size_t dnn_bytes = m->dnn ? tk_cudnn_ws_bytes(m->dnn) : 0;
    NEED(dnn_ws, dnn_bytes);
#undef ACT
#undef NEED
    TRY(tk_wl_acts(wenv, size, slot, n, e)); // (zeroed: the stem's padding channels stay 0)
    if (m->dnn) tk_cudnn_set_ws(m->dnn, dnn_ws, dnn_bytes);
    m->ncasts = 0;
    for (int i = 0; i < nc; i++) m->ncasts += tk_blk_conv_cast_span(cs[i], &m->casts[m->ncasts]);
    tk_blk_stem_bind(&m->stem);
    for (int i = 0; i < nx; i++)
        if (xs[i]->wp) xs[i]->c.wc = xs[i]->wp;
    for (int i = 0; i < SSD_BLOCKS; i++) m->blk[i].in = i == 0 ? m->pool : m->blk[i - 1].u2.z;
    m->feat[0] = m->blk[SSD_BLOCKS - 1].u2.z;
    for (int k = 0; k < SSD_EXTRA; k++) m->feat[k + 1] = m->xb[k].y;
    return 0;
}

// ---- cuDNN ----

static int plan_convs(ssd_model *m, tk_err *e) {
    tk_blk_unit *us[3 * SSD_BLOCKS + 1];
    const int nu = all_units(m, us);
    TRY(tk_blk_stem_plan(&m->env, &m->stem, e));
    for (int i = 1; i < nu; i++) TRY(tk_blk_conv_plan(&m->env, &us[i]->c, 1, 1, e));
    ssd_conv_b *xs[3 * SSD_MAPS];
    const int nx = all_biased(m, xs);
    for (int i = 0; i < nx; i++) TRY(tk_blk_conv_plan(&m->env, &xs[i]->c, 1, 0, e));
    return 0;
}

// ---- create ----

int ssd_create(const ssd_config *cfg, const tk_wl_env *env, ssd_model **out, tk_err *e) {
    *out = NULL;
    if (cfg->head_align < 0 || cfg->head_align > 64)
        return tk_err_set(e, TK_EUSAGE, "ssd: head alignment %d: 0 to 64", cfg->head_align);
    if (cfg->b < 1 || cfg->width < 1 || cfg->classes < 1)
        return tk_err_set(e, TK_EUSAGE, "ssd: batch %d, width %d, classes %d must be positive", cfg->b, cfg->width,
                          cfg->classes);
    if (cfg->size < 257 || cfg->size > 4096)
        return tk_err_set(e, TK_EUSAGE, "ssd: input size %d: 257 to 4096 (below 257 the sixth map vanishes)",
                          cfg->size);
    if (cfg->bf16 && env->c->backend != TK_BACKEND_CUDA)
        return tk_err_set(e, TK_EUSAGE, "ssd: bf16 runs on the cuda backend only");
    ssd_model *m = calloc(1, sizeof *m);
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    m->cfg = *cfg;
    m->c = env->c;
    m->P = env->params;
    m->t = cfg->bf16 ? TK_BF16 : TK_F32;
    m->b = cfg->b, m->S = cfg->size;
    m->grads = (tk_blk_grads){.ready = env->grads_ready, .arg = env->grads_arg};
    m->env = (tk_blk_env){.c = m->c, .t = m->t}; // (the scratch: activations)
    int rc = 0;
    if (m->c->backend == TK_BACKEND_CUDA) {
        rc = tk_cudnn_create(m->c, 0, &m->dnn, e);
        m->env.dnn = m->dnn;
    }
    // the stem's form: on cuda the space-to-depth 4x4 convolution where cuDNN plans it (auto), else
    // the 7x7 over padded channels; on the cpu the form asked
    if (!rc) rc = tk_blk_stem_pick(&m->env, &m->stem, m->b, m->S, m->cfg.width, (tk_blk_stem_form)cfg->stem, e);
    if (!rc) rc = shapes(m, e);
    if (!rc) rc = declare(m, e);
    if (!rc && m->dnn) rc = plan_convs(m, e);
    if (!rc) rc = activations(m, env, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    if (rc) {
        ssd_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
}

void ssd_destroy(ssd_model *m) { // (the buffers are the engine's, or the caller's)
    if (!m) return;
    tk_cudnn_destroy(m->dnn);
    free(m);
}

// ---- initialization ----

int ssd_init_weights(ssd_model *m, uint64_t seed, tk_err *e) {
    tk_params *P = m->P;
    float *h = calloc(P->dense_n + 1, sizeof(float));
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = 0;
    for (int i = 0; !rc && i < P->ndense; i++) {
        const tk_param *p = &P->p[i];
        const size_t n = (size_t)tk_param_numel(p);
        float *v = h + ((float *)p->w - P->dense_w);
        const uint32_t stream = (uint32_t)TK_RNG_INIT | (uint32_t)(i + 1) << 8;
        const int trunk = strncmp(p->name, "model.", 6) == 0;
        if (p->ndim == 4) {
            const double fan_out = (double)(p->shape[0] * p->shape[1] * p->shape[2]), fan_in = (double)n / p->shape[0];
            if (trunk) tk_blk_fill_normal(v, n, sqrt(2.0 / fan_out), seed, stream); // kaiming_normal_, fan_out
            else tk_blk_fill_uniform(v, n, sqrt(6.0 / (fan_in + fan_out)), seed, stream); // xavier_uniform_
        } else if (trunk) { // BatchNorm: weight 1, bias 0
            const int w = strcmp(strrchr(p->name, '.'), ".weight") == 0;
            for (size_t k = 0; k < n; k++) v[k] = w ? 1.0f : 0.0f;
        } else { // a conv's bias: nn.Conv2d's default from its weight's fan_in
            char wn[TK_PARAM_NAME];
            snprintf(wn, sizeof wn, "%.*s.weight", (int)(strlen(p->name) - strlen(".bias")), p->name);
            const int wi = tk_params_find(P, wn);
            if (wi < 0) rc = tk_err_set(e, TK_EINTERNAL, "ssd: %s without %s", p->name, wn);
            else {
                const tk_param *pw = &P->p[wi];
                tk_blk_fill_uniform(v, n, 1.0 / sqrt((double)tk_param_numel(pw) / pw->shape[0]), seed, stream);
            }
        }
    }
    if (!rc) rc = tk_memcpy_h2d(m->c, P->dense_w, h, P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e);
    tk_blk_unit *us[3 * SSD_BLOCKS + 1];
    const int nu = all_units(m, us);
    for (int i = 0; !rc && i < nu; i++) rc = tk_blk_norm_reset(m->c, &us[i]->n, h, e);
    free(h);
    if (!rc) rc = ssd_weights_loaded(m, e);
    return rc ? rc : tk_ctx_sync(m->c, e);
}

int ssd_weights_loaded(ssd_model *m, tk_err *e) {
    if (m->P->copy) TRY(tk_params_refresh_copy(m->P, e));
    return tk_blk_stem_weight(&m->env, &m->stem, e);
}

// ---- torchvision's trunk ----

// Our trunk name -> torchvision's resnet34 name (buf), or NULL for a name outside the trunk.
static const char *tv_name(const char *ours, char *buf, size_t n) {
    static const char *const map[][2] = {{"model.layer1.0.", "conv1."}, {"model.layer1.1.", "bn1."},
                                         {"model.layer1.4.", "layer1."}, {"model.layer1.5.", "layer2."},
                                         {"model.layer2.0.", "layer3."}};
    for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
        const size_t k = strlen(map[i][0]);
        if (strncmp(ours, map[i][0], k) == 0) return snprintf(buf, n, "%s%s", map[i][1], ours + k), buf;
    }
    return NULL;
}

int ssd_import_torchvision(ssd_model *m, const char *path, tk_err *e) {
    tk_st_file *f;
    TRY(tk_st_open(&f, path, e));
    const char *fmt = tk_st_meta(f, "format");
    if (fmt && strcmp(fmt, TK_CKPT_FORMAT) == 0) { // ours: every tensor, our layouts, as the engine loads it
        tk_st_close(f);
        TRY(tk_ckpt_load(m->P, path, TK_CKPT_MODEL_ONLY, NULL, NULL, e));
        TRY(ssd_weights_loaded(m, e));
        return tk_ctx_sync(m->c, e);
    }
    const tk_params *P = m->P;
    float *h = NULL, *t = NULL;
    size_t cap = 0;
    int rc = 0, got = 0;
    for (int i = 0; !rc && i < P->n; i++) {
        const tk_param *p = &P->p[i];
        if (p->flags & TK_PARAM_EXTERN) continue;
        char tv[TK_PARAM_NAME];
        const tk_st_tensor *st = tk_st_find(f, p->name);
        if (!st && tv_name(p->name, tv, sizeof tv)) st = tk_st_find(f, tv);
        if (!st) continue;
        const int conv = p->ndim == 4;
        int64_t want[4] = {p->shape[0], p->shape[1], p->shape[2], p->shape[3]};
        if (conv) want[1] = p->shape[3], want[2] = p->shape[1], want[3] = p->shape[2]; // (K, C, R, S)
        int ok = st->dtype == TK_F32 && st->ndim == p->ndim;
        for (int d = 0; ok && d < p->ndim; d++) ok = st->shape[d] == want[d];
        if (!ok) {
            rc = tk_err_set(e, TK_EDATA, "tensor %s: %s of %d dimensions, expected F32 of %lld x %lld x %lld x %lld "
                            "(PyTorch's layout; trainkit's %s)", st->name, tk_dtype_name(st->dtype), st->ndim,
                            (long long)want[0], (long long)(p->ndim > 1 ? want[1] : 1),
                            (long long)(p->ndim > 2 ? want[2] : 1), (long long)(p->ndim > 3 ? want[3] : 1), p->name);
            tk_err_where(e, "%s", path);
            break;
        }
        const size_t n = (size_t)tk_param_numel(p);
        if (n > cap) {
            free(h), free(t);
            h = malloc(n * 4), t = malloc(n * 4), cap = n;
            if (!h || !t) {
                rc = tk_err_set(e, TK_EIO, "out of host memory");
                break;
            }
        }
        if ((rc = tk_st_read_all(f, st, h, e))) break;
        const float *src = h;
        if (conv) {
            const int64_t K = p->shape[0], R = p->shape[1], S = p->shape[2], C = p->shape[3];
            for (int64_t k = 0; k < K; k++)
                for (int64_t r = 0; r < R; r++)
                    for (int64_t s = 0; s < S; s++)
                        for (int64_t c = 0; c < C; c++) t[((k * R + r) * S + s) * C + c] = h[((k * C + c) * R + r) * S + s];
            src = t;
        }
        if ((rc = tk_memcpy_h2d(m->c, p->w, src, n * 4, TK_STREAM_COMPUTE, e))) break;
        got++;
    }
    tk_st_close(f);
    if (!rc) rc = tk_ctx_sync(m->c, e); // (h and t read by the copies)
    free(h), free(t);
    if (!rc && !got) {
        rc = tk_err_set(e, TK_EDATA, "no tensor of torchvision's resnet34 (conv1.weight, layer1.0.conv1.weight, ...) "
                        "nor of SSD300 (model.layer1.0.weight, ...)");
        tk_err_where(e, "%s", path);
    }
    if (!rc) rc = ssd_weights_loaded(m, e);
    return rc ? rc : tk_ctx_sync(m->c, e);
}
