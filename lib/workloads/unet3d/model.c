// The 3D U-Net's model (model.h): its tensors in the engine's flat buffers, the shapes of its
// blocks, the activations, cuDNN's plans, the reference's initialization and the MLLOG names.
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conv3d_bias.h"
#include "core/philox.h"
#include "dice_ce.h"
#include "gpu/cudnn_conv.h"
#include "instnorm.h"
#include "workloads/unet3d/model.h"

// ---- shapes ----

// The unit of a conv block: Conv3d 3x3x3 padding 1 (stride 1 or 2) + InstanceNorm3d + ReLU.
static int block(tk_blk_unit *u, int b, const int *dim, int C, int K, int stride, tk_err *e) {
    return tk_blk_unit_init3d(u, b, dim[0], dim[1], dim[2], C, K, 3, stride, 1, 1, TK_BLK_INSTANCE_NORM,
                              TK_INSTNORM_EPS, 0, e);
}

static int shapes(u3_model *m, tk_err *e) {
    const int W = m->cfg.width, b = m->b;
    int dim[6][3]; // the volume at each level: the crop, then halved five times
    for (int l = 0; l < 6; l++)
        for (int a = 0; a < 3; a++) dim[l][a] = m->cfg.data.crop[a] >> l;
    TRY(block(&m->enc[0], b, dim[0], m->cin, W, 1, e));
    if (m->cin != 1) m->enc[0].c.cw = 1;
    TRY(block(&m->enc[1], b, dim[0], W, W, 1, e));
    for (int i = 0; i < 5; i++) { // downsample 0..3, the bottleneck
        const int ci = u3_filters(W, i), co = u3_filters(W, i < 4 ? i + 1 : 4);
        TRY(block(&m->enc[2 + 2 * i], b, dim[i], ci, co, 2, e));
        TRY(block(&m->enc[3 + 2 * i], b, dim[i + 1], co, co, 1, e));
    }
    for (int j = 0; j < U3_UP; j++) {
        u3_up *u = &m->up[j];
        const int l = 4 - j, cin = j == 0 ? u3_filters(W, 4) : m->up[j - 1].cout;
        u->cout = u3_filters(W, l);
        TRY(tk_blk_conv_init3d_transposed(&u->tc, b, dim[l + 1][0], dim[l + 1][1], dim[l + 1][2], cin, u->cout, 2, 2,
                                          0, e));
        TRY(block(&u->u1, b, dim[l], 2 * u->cout, u->cout, 1, e));
        TRY(block(&u->u2, b, dim[l], u->cout, u->cout, 1, e));
        u->rows = tk_blk_conv_rows(&u->tc);
    }
    TRY(tk_blk_conv_init3d(&m->oc, b, dim[0][0], dim[0][1], dim[0][2], W, m->ld, 1, 1, 0, e));
    if (m->ld != U3_CLASSES) m->oc.kw = U3_CLASSES;
    return 0;
}

// ---- tensors ----

static int add(u3_model *m, const char *name, int ndim, const int64_t *shape, int flags, const char *ml, int *idx,
               tk_err *e) {
    int i;
    TRY(tk_params_add(m->P, name, TK_F32, ndim, shape, flags, -1, &i, e));
    if (i < U3_NTENSORS) snprintf(m->mlname[i], sizeof m->mlname[i], "%s", ml);
    if (idx) *idx = i;
    return 0;
}

static int declare_conv(u3_model *m, tk_blk_conv *cv, const char *name, const char *ml, tk_err *e) {
    int64_t shape[TK_PARAM_MAX_DIMS];
    const int nd = tk_blk_conv_wshape(cv, shape);
    return add(m, name, nd, shape, TK_PARAM_DENSE, ml, &cv->pidx, e);
}

static int declare_vec(u3_model *m, const char *name, int64_t n, const char *ml, int *idx, tk_err *e) {
    return add(m, name, 1, &n, TK_PARAM_DENSE | TK_PARAM_NO_DECAY | TK_PARAM_NO_ADAPT, ml, idx, e);
}

// A conv block's three tensors: PREFIX.0.weight, PREFIX.1.weight, PREFIX.1.bias (MLLOG: ML_conv,
// ML_instancenorm).
static int declare_unit(u3_model *m, tk_blk_unit *u, const char *prefix, const char *ml, tk_err *e) {
    char name[TK_PARAM_NAME], mn[32];
    snprintf(name, sizeof name, "%s.0.weight", prefix), snprintf(mn, sizeof mn, "%s_conv", ml);
    TRY(declare_conv(m, &u->c, name, mn, e));
    snprintf(mn, sizeof mn, "%s_instancenorm", ml);
    snprintf(name, sizeof name, "%s.1.weight", prefix);
    TRY(declare_vec(m, name, u->n.C, mn, &u->n.pidx, e));
    snprintf(name, sizeof name, "%s.1.bias", prefix);
    return declare_vec(m, name, u->n.C, mn, NULL, e);
}

// Every unit in forward order (the encoder's, then each upsampling block's two).
static int all_units(u3_model *m, tk_blk_unit **out) {
    int n = 0;
    for (int i = 0; i < U3_ENC; i++) out[n++] = &m->enc[i];
    for (int j = 0; j < U3_UP; j++) out[n++] = &m->up[j].u1, out[n++] = &m->up[j].u2;
    return n;
}

// Every convolution in forward order (the units', the transposed ones inside, the output).
static int all_convs(u3_model *m, tk_blk_conv **out) {
    int n = 0;
    for (int i = 0; i < U3_ENC; i++) out[n++] = &m->enc[i].c;
    for (int j = 0; j < U3_UP; j++) out[n++] = &m->up[j].tc, out[n++] = &m->up[j].u1.c, out[n++] = &m->up[j].u2.c;
    out[n++] = &m->oc;
    return n;
}

static int declare(u3_model *m, tk_err *e) {
    char pre[64], ml[32];
    for (int i = 0; i < U3_ENC; i++) {
        const int blk = i / 2, k = i % 2 + 1;
        if (blk == 0) snprintf(pre, sizeof pre, "input_block.conv%d", k), snprintf(ml, sizeof ml, "input_block_%d", k - 1);
        else if (blk == 5) snprintf(pre, sizeof pre, "bottleneck.conv%d", k), snprintf(ml, sizeof ml, "down4_block_%d", k - 1);
        else
            snprintf(pre, sizeof pre, "downsample.%d.conv%d", blk - 1, k),
                snprintf(ml, sizeof ml, "down%d_block_%d", blk - 1, k - 1);
        TRY(declare_unit(m, &m->enc[i], pre, ml, e));
    }
    for (int j = 0; j < U3_UP; j++) {
        u3_up *u = &m->up[j];
        char name[TK_PARAM_NAME];
        snprintf(ml, sizeof ml, "up%d_deconv", j);
        snprintf(name, sizeof name, "upsample.%d.upsample_conv.0.weight", j);
        TRY(declare_conv(m, &u->tc, name, ml, e));
        snprintf(name, sizeof name, "upsample.%d.upsample_conv.0.bias", j);
        TRY(declare_vec(m, name, u->cout, ml, &u->pb, e));
        for (int k = 1; k <= 2; k++) {
            snprintf(pre, sizeof pre, "upsample.%d.conv%d", j, k), snprintf(ml, sizeof ml, "up%d_block_%d", j, k - 1);
            TRY(declare_unit(m, k == 1 ? &u->u1 : &u->u2, pre, ml, e));
        }
    }
    TRY(declare_conv(m, &m->oc, "output.conv.weight", "output_conv", e));
    TRY(declare_vec(m, "output.conv.bias", U3_CLASSES, "output_conv", &m->pob, e));
    if (m->t == TK_BF16) m->P->copy_type = TK_BF16;
    TRY(tk_params_alloc(m->P, e));
    // the views
    tk_params *P = m->P;
    tk_blk_conv *cs[U3_NTENSORS];
    const int nc = all_convs(m, cs);
    for (int i = 0; i < nc; i++) {
        cs[i]->w = P->p[cs[i]->pidx].w, cs[i]->dw = P->p[cs[i]->pidx].g;
        cs[i]->wc = tk_params_copy_of(P, cs[i]->w);
    }
    tk_blk_unit *us[U3_NTENSORS];
    const int nu = all_units(m, us);
    for (int i = 0; i < nu; i++) {
        tk_blk_norm *n = &us[i]->n;
        n->gamma = P->p[n->pidx].w, n->dgamma = P->p[n->pidx].g;
        n->beta = P->p[n->pidx + 1].w, n->dbeta = P->p[n->pidx + 1].g;
    }
    for (int j = 0; j < U3_UP; j++) m->up[j].b = P->p[m->up[j].pb].w, m->up[j].db = P->p[m->up[j].pb].g;
    m->ob = P->p[m->pob].w, m->dob = P->p[m->pob].g;
    return 0;
}

// ---- activations ----

static size_t umax(size_t a, size_t b) { return a > b ? a : b; }

static int activations(u3_model *m, const tk_wl_env *wenv, tk_err *e) {
    const tk_backend be = m->c->backend;
    const size_t es = tk_dtype_size(m->t);
    const int64_t M0 = (int64_t)m->b * m->S;
    size_t max_act = 0, norm_ws = 0, max_w = 0, bias_ws = 0;
    void **slot[8 * U3_NTENSORS + 64];
    size_t size[8 * U3_NTENSORS + 64];
    int n = 0;
#define NEED(ptr, bytes) (slot[n] = (void **)&(ptr), size[n] = (bytes), n++)
#define ACT(ptr, elems) (NEED(ptr, (size_t)(elems) * es), max_act = umax(max_act, (size_t)(elems)))
    NEED(m->in_img, (size_t)M0 * 4);
    NEED(m->in_label, (size_t)M0);
    ACT(m->x0, M0 * m->cin);
    tk_blk_unit *us[U3_NTENSORS];
    const int nu = all_units(m, us);
    for (int i = 0; i < nu; i++) {
        ACT(us[i]->y, tk_blk_conv_y_numel(&us[i]->c));
        ACT(us[i]->z, tk_blk_conv_y_numel(&us[i]->c));
        NEED(us[i]->n.smean, tk_blk_norm_stat_bytes(&us[i]->n));
        NEED(us[i]->n.sinvstd, tk_blk_norm_stat_bytes(&us[i]->n));
        norm_ws = umax(norm_ws, tk_blk_norm_ws_bytes(be, &us[i]->n));
    }
    for (int j = 0; j < U3_UP; j++) {
        u3_up *u = &m->up[j];
        ACT(u->ty, tk_blk_conv_y_numel(&u->tc));
        ACT(u->cat, u->rows * 2 * u->cout);
        bias_ws = umax(bias_ws, tk_conv3d_bias_ws_bytes(be, u->rows, u->cout));
    }
    ACT(m->logits, M0 * m->ld);
    bias_ws = umax(bias_ws, tk_conv3d_bias_ws_bytes(be, M0, m->ld));
    NEED(m->loss, 4);
    NEED(m->dice, (size_t)m->b * 2 * 4);
    NEED(m->dice_ws, tk_dice_ce_ws_bytes(be, m->b, m->S));
    NEED(m->bias_ws, bias_ws);
    NEED(m->env.norm_ws, norm_ws);
    for (int i = 0; i < U3_NBUF; i++) NEED(m->g[i], max_act * es);
    tk_blk_conv *cs[U3_NTENSORS];
    const int nc = all_convs(m, cs);
    for (int i = 0; i < nc; i++) max_w = umax(max_w, (size_t)tk_blk_conv_w_numel(cs[i]));
    const int padded = m->cin != 1 || m->ld != U3_CLASSES;
    if (m->t == TK_BF16 || padded) NEED(m->env.wbuf, max_w * es);
    if (m->t == TK_BF16) // each weight gradient in bf16, cast into the fp32 span with the others at once
        for (int i = 0; i < nc; i++)
            if (!cs[i]->cw && !cs[i]->kw) NEED(cs[i]->dwt, (size_t)tk_blk_conv_w_numel(cs[i]) * es);
    if (m->cin != 1) NEED(m->w0p, (size_t)tk_blk_conv_w_numel(&m->enc[0].c) * es);
    if (m->ld != U3_CLASSES) {
        NEED(m->wop, (size_t)tk_blk_conv_w_numel(&m->oc) * es);
        NEED(m->obp, (size_t)m->ld * 4);
        NEED(m->dobp, (size_t)m->ld * 4);
    }
    void *dnn_ws = NULL;
    const size_t dnn_bytes = m->dnn ? tk_cudnn_ws_bytes(m->dnn) : 0;
    NEED(dnn_ws, dnn_bytes);
#undef ACT
#undef NEED
    TRY(tk_wl_acts(wenv, size, slot, n, e)); // (the engine's arena, zeroed)
    if (m->dnn) tk_cudnn_set_ws(m->dnn, dnn_ws, dnn_bytes);
    m->ncasts = 0;
    for (int i = 0; i < nc; i++) m->ncasts += tk_blk_conv_cast_span(cs[i], &m->casts[m->ncasts]);
    if (m->w0p) m->enc[0].c.wc = m->w0p;
    if (m->wop) m->oc.wc = m->wop;
    // the blocks' inputs and skips
    for (int j = 0; j < U3_UP; j++) {
        m->up[j].in = j == 0 ? m->enc[U3_ENC - 1].z : m->up[j - 1].u2.z;
        m->up[j].skip = m->enc[2 * (4 - j) + 1].z;
    }
    return 0;
}

// ---- cuDNN ----

// The channels cuDNN runs the input block's convolution (input: 1 channel) or the output layer's
// (3 classes) with (*ch): of want, 4 and 8 (zero channels, their gradient dropped), the one whose
// passes autotuned fastest together (bf16 at batch 2 of 128^3 on an H100, the single input
// channel ran cuDNN's legacy implicit GEMM: 0.8 ms forward and 0.8 ms weight gradient, plus its
// layout transposes); when the passes were not all timed (deterministic contexts; engines already
// remembered), the first that plans, want first. The choice is remembered for the process, like
// cuDNN's engines (cudnn_conv.cu): every model of the process computes the same way (graph vs
// eager tests, evaluation beside training). The error of want when none plans.
typedef struct pad_memo {
    int input, b, W, crop[3];
    tk_dtype t;
    int ch;
} pad_memo;
static pthread_mutex_t pad_mu = PTHREAD_MUTEX_INITIALIZER;
static pad_memo pad_memos[16];
static int npad_memos;

static int pad_find(const pad_memo *k) {
    int ch = 0;
    pthread_mutex_lock(&pad_mu);
    for (int i = 0; i < npad_memos && !ch; i++) {
        const pad_memo *q = &pad_memos[i];
        if (q->input == k->input && q->b == k->b && q->W == k->W && q->t == k->t && !memcmp(q->crop, k->crop, sizeof q->crop))
            ch = q->ch;
    }
    pthread_mutex_unlock(&pad_mu);
    return ch;
}

static void pad_keep(const pad_memo *k) {
    pthread_mutex_lock(&pad_mu);
    if (npad_memos < (int)(sizeof pad_memos / sizeof *pad_memos)) pad_memos[npad_memos++] = *k;
    pthread_mutex_unlock(&pad_mu);
}

static int pick_pad(u3_model *m, int input, int want, int *ch, tk_err *e) {
    const int W = m->cfg.width, *crop = m->cfg.data.crop, tries[3] = {want, 4, 8};
    pad_memo k = {input, m->b, W, {crop[0], crop[1], crop[2]}, m->t, 0};
    const int memo = pad_find(&k);
    tk_err first = {0};
    int firstok = 0, best = 0, timed = 1;
    float best_ms = 0;
    for (int i = 0; i < 3; i++) {
        const int c = tries[i];
        if ((memo && c != memo) || (i && c == want)) continue;
        tk_blk_conv cv = {0};
        TRY(tk_blk_conv_init3d(&cv, m->b, crop[0], crop[1], crop[2], input ? c : W, input ? W : c, input ? 3 : 1, 1,
                               input ? 1 : 0, e));
        tk_err pe = {0};
        if (tk_blk_conv_plan(&m->env, &cv, !input, 0, &pe)) {
            if (!first.code) first = pe;
            continue;
        }
        if (!firstok) firstok = c;
        float ms = 0;
        for (int p = 0; p < 3; p++) {
            const float t = p == TK_CONV_BWD_DATA && input ? 0 : tk_cudnn_plan3d_ms(m->dnn, (tk_conv_pass)p, &cv.s3, m->t);
            if (t < 0) timed = 0;
            ms += t;
        }
        if (!best || ms < best_ms) best = c, best_ms = ms;
    }
    if (!firstok) {
        *e = first;
        return first.code ? first.code : tk_err_set(e, TK_EINTERNAL, "unet3d: no channel count planned");
    }
    *ch = memo ? memo : timed ? best : firstok;
    k.ch = *ch;
    if (!memo) pad_keep(&k);
    return 0;
}

static int plan_convs(u3_model *m, tk_err *e) {
    tk_blk_conv *cs[U3_NTENSORS];
    const int nc = all_convs(m, cs);
    for (int i = 0; i < nc; i++) TRY(tk_blk_conv_plan(&m->env, cs[i], i != 0, 0, e));
    return 0;
}

// ---- create ----

int u3_create(const void *config, const tk_wl_env *env, void **out, tk_err *e) {
    const u3_config *cfg = config;
    u3_model *m = *out = calloc(1, sizeof *m); // (the engine destroys it if create fails)
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    m->cfg = *cfg;
    m->c = env->c;
    m->P = env->params;
    m->dist = env->dist;
    m->lr = env->lr, m->step = env->step, m->loss_acc = env->loss_acc;
    m->grads = (tk_blk_grads){.ready = env->grads_ready, .arg = env->grads_arg};
    m->t = cfg->bf16 ? TK_BF16 : TK_F32;
    m->cin = 1, m->ld = U3_CLASSES;
    m->b = cfg->b;
    if (m->b < 1) {
        int64_t per_rank;
        TRY(tk_per_rank_batch("unet3d", cfg->batch, m->dist->world, &per_rank, e));
        m->b = (int)per_rank;
    }
    const int *crop = cfg->data.crop;
    for (int a = 0; a < 3; a++)
        if (crop[a] < 32 || crop[a] % 32)
            return tk_err_set(e, TK_EUSAGE, "unet3d: data.crop %dx%dx%d: each side must be a multiple of 32", crop[0],
                              crop[1], crop[2]);
    if (crop[0] < 64 && crop[1] < 64 && crop[2] < 64)
        return tk_err_set(e, TK_EUSAGE, "unet3d: data.crop %dx%dx%d: one side must be at least 64 (the bottleneck's "
                          "instance norm needs 2 voxels)", crop[0], crop[1], crop[2]);
    if (cfg->width < 1) return tk_err_set(e, TK_EUSAGE, "unet3d: model.width %d must be positive", cfg->width);
    m->S = (int64_t)crop[0] * crop[1] * crop[2];
    m->env = (tk_blk_env){.c = m->c, .t = m->t}; // (the scratch: activations)
    if (m->c->backend == TK_BACKEND_CUDA) {
        TRY(tk_cudnn_create(m->c, 0, &m->dnn, e));
        m->env.dnn = m->dnn;
        TRY(pick_pad(m, 1, 1, &m->cin, e));
        TRY(pick_pad(m, 0, U3_CLASSES, &m->ld, e));
    }
    TRY(shapes(m, e));
    TRY(declare(m, e));
    if (m->dnn) TRY(plan_convs(m, e));
    TRY(activations(m, env, e)); // (cuda: the engine's warm-up step follows, workload.h warmup)
    return tk_ctx_sync(m->c, e);
}

void u3_destroy(void *model) { // (the buffers are the engine's)
    u3_model *m = model;
    if (!m) return;
    tk_cudnn_destroy(m->dnn);
    free(m);
}

// ---- initialization ----

// The reference's (PyTorch's module defaults): every convolution's weight and bias U(-1/sqrt(fan_in),
// 1/sqrt(fan_in)) with fan_in the weight's size(1) times its kernel volume as PyTorch stores it:
// C k^3 of a Conv3d (K, C, k, k, k), Cout 8 of a ConvTranspose3d (Cin, Cout, 2, 2, 2); here in
// either layout the weight's elements over its first dimension. Instance norm weight 1, bias 0.
int u3_init_weights(void *model, uint64_t seed, tk_err *e) {
    u3_model *m = model;
    tk_params *P = m->P;
    float *h = calloc(P->dense_n + 1, sizeof(float));
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory");
    for (int i = 0; i < P->ndense; i++) {
        const tk_param *p = &P->p[i];
        const size_t n = (size_t)tk_param_numel(p);
        float *v = h + ((float *)p->w - P->dense_w);
        const char *dot = strrchr(p->name, '.');
        const int isbias = strcmp(dot, ".bias") == 0;
        // the norms: "X.1.weight" / "X.1.bias" (a conv's bias is "X.0.bias" or "output.conv.bias")
        if (strncmp(dot - 2, ".1", 2) == 0) {
            for (size_t k = 0; k < n; k++) v[k] = isbias ? 0.0f : 1.0f;
            continue;
        }
        const tk_param *w = isbias ? &P->p[i - 1] : p; // (a conv's bias follows its weight)
        const double fan = (double)tk_param_numel(w) / (double)w->shape[0];
        tk_blk_fill_uniform(v, n, 1.0 / sqrt(fan), seed, (uint32_t)TK_RNG_INIT | (uint32_t)(i + 1) << 8);
    }
    int rc = tk_memcpy_h2d(m->c, P->dense_w, h, P->dense_n * sizeof(float), TK_STREAM_COMPUTE, e);
    free(h);
    return rc;
}

int u3_weights_loaded(void *model, tk_err *e) {
    u3_model *m = model;
    return m->P->copy ? tk_params_refresh_copy(m->P, e) : 0;
}

// ---- the table's small members ----

int u3_batch(const void *model, tk_wl_field *f) {
    const u3_model *m = model;
    const int *crop = m->cfg.data.crop;
    f[0] = (tk_wl_field){"batch.image", TK_F32, 5, {m->b, crop[0], crop[1], crop[2], 1}, m->in_img};
    f[1] = (tk_wl_field){"batch.label", TK_U8, 5, {m->b, crop[0], crop[1], crop[2], 1}, m->in_label};
    return 2;
}

tk_dtype u3_act_type(const void *model) { return ((const u3_model *)model)->t; }
const u3_config *u3_model_config(const void *model) { return &((const u3_model *)model)->cfg; }
tk_ctx *u3_model_ctx(const void *model) { return ((const u3_model *)model)->c; }

const char *u3_mlperf_name(const void *model, int i) {
    const u3_model *m = model;
    return i >= 0 && i < m->P->ndense && i < U3_NTENSORS && m->mlname[i][0] ? m->mlname[i] : NULL;
}

int u3_dump_describe(void *model, tk_wl_dump *d, tk_err *e) {
    u3_model *m = model;
    const int *crop = m->cfg.data.crop; // (the batch is dumped as read: u3_batch)
    char crops[64];
    snprintf(crops, sizeof crops, "%d,%d,%d", crop[0], crop[1], crop[2]);
    d->meta = json_pack("{s:s, s:s, s:s, s:s, s:s}", "model", "unet3d", "width", "", "layout", "ktrsc", "crop", crops,
                        "precision", m->t == TK_BF16 ? "bf16" : "fp32");
    if (!d->meta) return tk_err_set(e, TK_EIO, "out of host memory");
    json_object_set_new(d->meta, "width", json_sprintf("%d", m->cfg.width));
    return 0;
}
