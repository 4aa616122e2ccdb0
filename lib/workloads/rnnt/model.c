// The RNN-T's tensors, initialization and one training step (model.h says what the reference does).
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/philox.h"
#include "gemm.h"
#include "rows.h"

rnnt_model_cfg rnnt_model_cfg_default(int b, int max_frames, int max_labels) {
    rnnt_model_cfg c;
    memset(&c, 0, sizeof c);
    c.in_feats = 240;
    c.enc_n_hid = 1024, c.enc_pre_rnn_layers = 2, c.enc_post_rnn_layers = 3, c.enc_stack_time_factor = 2;
    c.enc_dropout = 0.1f;
    c.pred_n_hid = 512, c.pred_rnn_layers = 2, c.pred_dropout = 0.3f;
    c.joint_n_hid = 512, c.joint_dropout = 0.3f;
    c.n_classes = 1024;
    c.forget_gate_bias = 1.0f, c.hidden_hidden_bias_scale = 0.0f, c.weights_init_scale = 0.5f;
    c.b = b, c.max_frames = max_frames, c.max_labels = max_labels;
    return c;
}

static int64_t lstm_numel(int L, int I, int H) {
    int64_t n = 0;
    for (int k = 0; k < L; k++) n += (int64_t)4 * H * (k ? H : I) + (int64_t)4 * H * H + (int64_t)8 * H;
    return n;
}

int64_t rnnt_model_ref_count(const rnnt_model_cfg *c) {
    const int64_t E = c->enc_n_hid, P = c->pred_n_hid, J = c->joint_n_hid, V = c->n_classes;
    return lstm_numel(c->enc_pre_rnn_layers, c->in_feats, (int)E) +
           lstm_numel(c->enc_post_rnn_layers, (int)(c->enc_stack_time_factor * E), (int)E) + (V - 1) * P +
           lstm_numel(c->pred_rnn_layers, (int)P, (int)P) + (J * P + J) + (J * E + J) + (V * J + V);
}

int64_t rnnt_model_param_count(const rnnt_model *m) {
    int64_t n = 0;
    for (int i = 0; i < m->P->ndense; i++) n += tk_param_numel(&m->P->p[i]);
    return n;
}

static int add(tk_params *P, const char *name, int64_t d0, int64_t d1, int *idx, tk_err *e) {
    const int64_t shape[2] = {d0, d1};
    return tk_params_add(P, name, TK_F32, d1 ? 2 : 1, shape, TK_PARAM_DENSE, -1, idx, e);
}

// The four tensors of each of an LSTM's L layers (the first one's index into *first).
static int add_lstm(tk_params *P, const char *prefix, int L, int I, int H, int *first, tk_err *e) {
    char nm[TK_PARAM_NAME];
    static const char *const kind[4] = {"weight_ih", "weight_hh", "bias_ih", "bias_hh"};
    for (int k = 0; k < L; k++)
        for (int j = 0; j < 4; j++) {
            snprintf(nm, sizeof nm, "%s.lstm.%s_l%d", prefix, kind[j], k);
            int idx;
            if (add(P, nm, (int64_t)4 * H, j == 0 ? (k ? H : I) : j == 1 ? H : 0, &idx, e)) return -1;
            if (k == 0 && j == 0) *first = idx;
        }
    return 0;
}

const void *rnnt_wt(const rnnt_model *m, int idx) { return tk_params_copy_of(m->P, (const float *)m->P->p[idx].w); }
float *rnnt_wf(const rnnt_model *m, int idx) { return (float *)m->P->p[idx].w; }
static float *gf(const rnnt_model *m, int idx) { return m->P->p[idx].g; }

// An LSTM's weights (in t: the compute copy) and their gradients, layers from tensor first on.
void rnnt_lstm_of(const rnnt_model *m, int first, int L, tk_lstm_w *w, tk_lstm_dw *dw) {
    memset(w, 0, sizeof *w);
    memset(dw, 0, sizeof *dw);
    for (int k = 0; k < L; k++) {
        const int p = first + 4 * k;
        w->w_ih[k] = rnnt_wt(m, p), w->w_hh[k] = rnnt_wt(m, p + 1);
        w->b_ih[k] = rnnt_wf(m, p + 2), w->b_hh[k] = rnnt_wf(m, p + 3);
        dw->w_ih[k] = gf(m, p), dw->w_hh[k] = gf(m, p + 1), dw->b_ih[k] = gf(m, p + 2), dw->b_hh[k] = gf(m, p + 3);
    }
}

static tk_lstm_shape shape_of(int L, int T, int B, int I, int H) {
    tk_lstm_shape s = {L, T, B, I, H, 1};
    return s;
}

// The index arrays' regions (int32 offsets into the plan's idx), each sized for the largest step.
enum { R_STACK, R_UNSTACK, R_FT, R_FTB, R_GT, R_GTB, R_EMB, R_POS, R_OFF, R_ROW, R_N };
static void regions(const rnnt_plan_dims *d, size_t *off) {
    const size_t B = (size_t)d->B, Tm = (size_t)d->Tmax, T2 = (size_t)(d->Tmax + 1) / 2, U1 = (size_t)d->Umax + 1,
                 Um = (size_t)d->Umax;
    const size_t n[R_N] = {2 * T2 * B, Tm * B, T2 * B, T2 * B, U1 * B, U1 * B, U1 * B, Um * B + 1, Um * B + 2,
                           Um * B + 1};
    size_t o = 0;
    for (int r = 0; r < R_N; r++) off[r] = o, o += n[r];
    off[R_N] = o;
}

// The plan's arrays: a header of 8 int64 (T, U, Tp, Up, rows, rows_cap, nseg, key), row0 (B + 1)
// int64, the index regions, T2 (B), U (B), labels (B, Up) int32.
enum { H_T, H_U, H_TP, H_UP, H_ROWS, H_CAP, H_NSEG, H_KEY, H_N };
typedef struct {
    int64_t *hdr, *row0;
    int32_t *idx, *T2, *U, *lab;
} plan_ptrs;
static plan_ptrs plan_at(const rnnt_plan_dims *d, const void *base) {
    size_t off[R_N + 1];
    regions(d, off);
    plan_ptrs p;
    p.hdr = (int64_t *)base, p.row0 = p.hdr + H_N;
    p.idx = (int32_t *)(p.row0 + d->B + 1), p.T2 = p.idx + off[R_N], p.U = p.T2 + d->B, p.lab = p.U + d->B;
    return p;
}

rnnt_plan_dims rnnt_model_plan_dims(const rnnt_model_cfg *cfg) {
    rnnt_plan_dims d = {cfg->b, cfg->max_frames, cfg->max_labels, cfg->n_classes, 0};
    d.rows_max = (int64_t)cfg->b * (int64_t)((cfg->max_frames + 1) / 2) * (int64_t)(cfg->max_labels + 1);
    if (cfg->max_rows > 0 && cfg->max_rows < d.rows_max) d.rows_max = cfg->max_rows;
    return d;
}

size_t rnnt_plan_bytes(const rnnt_plan_dims *d) {
    size_t off[R_N + 1];
    regions(d, off);
    const size_t B = (size_t)d->B;
    return (H_N + B + 1) * 8 + (off[R_N] + 2 * B + B * (size_t)(d->Umax ? d->Umax : 1)) * 4;
}

void rnnt_plan_shape_of(const void *plan, rnnt_plan_shape *s) {
    const int64_t *h = plan;
    *s = (rnnt_plan_shape){(int)h[H_T], (int)h[H_U], (int)h[H_TP], (int)h[H_UP], h[H_ROWS], h[H_CAP], h[H_KEY]};
}

int rnnt_model_create(const rnnt_model_cfg *cfg, const tk_wl_env *env, rnnt_model **out, tk_err *e) {
    *out = NULL;
    if (cfg->enc_stack_time_factor != 2)
        return tk_err_set(e, TK_EUSAGE, "rnnt: enc_stack_time_factor %d (only 2 is supported)",
                          cfg->enc_stack_time_factor);
    if (cfg->b < 1 || cfg->max_frames < 1 || cfg->max_labels < 0 || cfg->in_feats < 1 || cfg->enc_n_hid < 1 ||
        cfg->pred_n_hid < 1 || cfg->joint_n_hid < 1 || cfg->n_classes < 2 || cfg->enc_pre_rnn_layers < 1 ||
        cfg->enc_post_rnn_layers < 1 || cfg->pred_rnn_layers < 1 || cfg->enc_pre_rnn_layers > TK_LSTM_MAX_LAYERS ||
        cfg->enc_post_rnn_layers > TK_LSTM_MAX_LAYERS || cfg->pred_rnn_layers > TK_LSTM_MAX_LAYERS)
        return tk_err_set(e, TK_EUSAGE, "rnnt: bad model sizes");
    if (cfg->bf16 && env->c->backend != TK_BACKEND_CUDA)
        return tk_err_set(e, TK_EUSAGE, "rnnt: bf16 needs the cuda backend");
    rnnt_model *m = calloc(1, sizeof *m);
    if (!m) return tk_err_errno(e, ENOMEM, "rnnt: out of memory");
    m->cfg = *cfg, m->c = env->c, m->P = env->params, m->t = cfg->bf16 ? TK_BF16 : TK_F32;
    m->step = env->step, m->loss_acc = env->loss_acc;
    m->V = cfg->n_classes, m->E = cfg->enc_n_hid, m->P_ = cfg->pred_n_hid, m->J = cfg->joint_n_hid;
    m->I = cfg->in_feats, m->B = cfg->b, m->T2max = (cfg->max_frames + 1) / 2;
    m->pd = rnnt_model_plan_dims(cfg);
    m->site_pre = 0, m->site_post = (uint32_t)cfg->enc_pre_rnn_layers;
    m->site_dec = m->site_post + (uint32_t)cfg->enc_post_rnn_layers;
    m->site_joint = m->site_dec + (uint32_t)cfg->pred_rnn_layers;
    tk_params *P = m->P;
    const int E = m->E, Pn = m->P_, J = m->J, V = m->V;
    if (add_lstm(P, "encoder.pre_rnn", cfg->enc_pre_rnn_layers, m->I, E, &m->p_pre, e) ||
        add_lstm(P, "encoder.post_rnn", cfg->enc_post_rnn_layers, 2 * E, E, &m->p_post, e) ||
        add(P, "prediction.embed.weight", V - 1, Pn, &m->p_embed, e) ||
        add_lstm(P, "prediction.dec_rnn", cfg->pred_rnn_layers, Pn, Pn, &m->p_dec, e) ||
        add(P, "joint_pred.weight", J, Pn, &m->p_jp_w, e) || add(P, "joint_pred.bias", J, 0, &m->p_jp_b, e) ||
        add(P, "joint_enc.weight", J, E, &m->p_je_w, e) || add(P, "joint_enc.bias", J, 0, &m->p_je_b, e) ||
        add(P, "joint_net.2.weight", V, J, &m->p_out_w, e) || add(P, "joint_net.2.bias", V, 0, &m->p_out_b, e))
        goto fail;
    if (cfg->bf16) P->copy_type = TK_BF16;
    if (tk_params_alloc(P, e)) goto fail;

    const size_t es = m->t == TK_BF16 ? 2 : 4, B = (size_t)m->B, Tm = (size_t)cfg->max_frames,
                 T2 = (size_t)m->T2max, U1 = (size_t)cfg->max_labels + 1;
    m->rows_max = m->pd.rows_max;
    // the ranks' disjoint ranges of dropout elements (model.h), indices below 2^40 (dropout.h)
    int64_t stride = (int64_t)Tm * (int64_t)B * E;
    if ((int64_t)U1 * (int64_t)B * Pn > stride) stride = (int64_t)U1 * (int64_t)B * Pn;
    if (m->rows_max * J > stride) stride = m->rows_max * J;
    const int rank = env->dist ? env->dist->rank : 0, world = env->dist ? env->dist->world : 1;
    if (stride > (((int64_t)1 << 40) - 1) / (world > 1 ? world : 1)) {
        tk_err_set(e, TK_EUSAGE, "rnnt: %d ranks of %lld dropout elements a call exceed the masks' 2^40 indices",
                   world, (long long)stride);
        goto fail;
    }
    m->drop_offset = (int64_t)rank * stride;
    size_t dmax = T2 * B * 2 * E;
    if (Tm * B * E > dmax) dmax = Tm * B * E;
    if (U1 * B * Pn > dmax) dmax = U1 * B * Pn;
    tk_lstm_shape spre = shape_of(cfg->enc_pre_rnn_layers, (int)Tm, m->B, m->I, E),
                  spost = shape_of(cfg->enc_post_rnn_layers, (int)T2, m->B, 2 * E, E),
                  sdec = shape_of(cfg->pred_rnn_layers, (int)U1, m->B, Pn, Pn);
    if (tk_lstm_check(m->t, &spre, e) || tk_lstm_check(m->t, &spost, e) || tk_lstm_check(m->t, &sdec, e)) goto fail;
    m->ws_loss_bytes = tk_rnnt_loss_ws_bytes(m->c->backend, m->B, m->rows_max);
    m->ws_seg_bytes = tk_rows_segsum_ws_bytes(m->c->backend, (int64_t)cfg->max_labels * m->B + 1, Pn);
    m->plan_bytes = rnnt_plan_bytes(&m->pd);
    const size_t sz[] = {Tm * B * m->I * 4, m->t == TK_F32 ? 0 : Tm * B * m->I * es, Tm * B * E * es,
                         T2 * B * 2 * E * es, T2 * B * E * es, U1 * B * Pn * es, U1 * B * Pn * es, T2 * B * J * es,
                         U1 * B * J * es, T2 * B * J * es, U1 * B * J * es, (size_t)m->rows_max * J * es,
                         (size_t)m->rows_max * V * es, T2 * B * J * es, U1 * B * J * es, dmax * es, dmax * es,
                         tk_lstm_ws_bytes(m->t, &spre), tk_lstm_ws_bytes(m->t, &spost), tk_lstm_ws_bytes(m->t, &sdec),
                         m->ws_loss_bytes, m->ws_seg_bytes, m->plan_bytes, 4, B * 4};
    void **const dst[] = {(void **)&m->feat, &m->x0, &m->y1, &m->x2, &m->y2, &m->emb, &m->gp, &m->fe_tm,
                          &m->gj_tm, &m->f, &m->g, &m->h, &m->z, &m->df, &m->dg, &m->d1, &m->d2, &m->ws_pre,
                          &m->ws_post, &m->ws_dec, &m->ws_loss, &m->ws_seg, &m->plan, (void **)&m->loss,
                          (void **)&m->costs};
    if (tk_wl_acts(env, sz, dst, (int)(sizeof sz / sizeof sz[0]), e)) goto fail;
    if (!(m->h_plan = malloc(m->plan_bytes))) {
        tk_err_errno(e, ENOMEM, "rnnt: out of memory");
        goto fail;
    }
    *out = m;
    return 0;
fail:
    rnnt_model_destroy(m);
    return e->code ? e->code : TK_EINTERNAL;
}

void rnnt_model_destroy(rnnt_model *m) {
    if (!m) return;
    free(m->h_plan);
    free(m);
}

// ---- init ----

static int put(rnnt_model *m, int idx, const float *v, tk_err *e) {
    tk_param *p = &m->P->p[idx];
    return tk_memcpy_h2d(m->c, p->w, v, tk_param_bytes(p), 0, e);
}

static int init_lstm(rnnt_model *m, uint64_t seed, int first, int L, int I, int H, float *buf, tk_err *e) {
    const rnnt_model_cfg *c = &m->cfg;
    for (int k = 0; k < L; k++) {
        const int Ik = k ? H : I, p = first + 4 * k;
        float *wi = buf, *wh = wi + (size_t)4 * H * Ik, *bi = wh + (size_t)4 * H * H, *bh = bi + (size_t)4 * H;
        tk_lstm_init_layer(seed, (uint32_t)p, Ik, H, c->forget_gate_bias, c->hidden_hidden_bias_scale,
                           c->weights_init_scale, wi, wh, bi, bh);
        if (put(m, p, wi, e) || put(m, p + 1, wh, e) || put(m, p + 2, bi, e) || put(m, p + 3, bh, e)) return -1;
    }
    return 0;
}

// torch.nn.Linear's default: weight and bias uniform(+-1/sqrt(in)), the bias drawn after the weight.
static int init_linear(rnnt_model *m, uint64_t seed, int pw, int pb, int out, int in, float *buf, tk_err *e) {
    const uint32_t st = (uint32_t)TK_RNG_INIT | (uint32_t)pw << 8;
    const float a = 1.0f / sqrtf((float)in);
    const size_t nw = (size_t)out * in;
    for (size_t i = 0; i < nw + (size_t)out; i++) buf[i] = -a + 2 * a * tk_philox_uniform(seed, st, i);
    return put(m, pw, buf, e) || put(m, pb, buf + nw, e) ? -1 : 0;
}

int rnnt_model_init(rnnt_model *m, uint64_t seed, tk_err *e) {
    const rnnt_model_cfg *c = &m->cfg;
    size_t big = 0;
    for (int i = 0; i < m->P->ndense; i++) {
        size_t n = (size_t)tk_param_numel(&m->P->p[i]);
        big = n > big ? n : big;
    }
    float *buf = malloc(big * 4 * 4 + 64);
    if (!buf) return tk_err_errno(e, ENOMEM, "rnnt: out of memory");
    int rc = init_lstm(m, seed, m->p_pre, c->enc_pre_rnn_layers, m->I, m->E, buf, e) ||
             init_lstm(m, seed, m->p_post, c->enc_post_rnn_layers, 2 * m->E, m->E, buf, e) ||
             init_lstm(m, seed, m->p_dec, c->pred_rnn_layers, m->P_, m->P_, buf, e);
    if (!rc) { // torch.nn.Embedding's default: N(0, 1)
        const uint32_t st = (uint32_t)TK_RNG_INIT | (uint32_t)m->p_embed << 8;
        const size_t n = (size_t)(m->V - 1) * m->P_;
        for (size_t i = 0; i < n; i++) buf[i] = (float)tk_philox_normal(seed, st, i);
        rc = put(m, m->p_embed, buf, e) || init_linear(m, seed, m->p_jp_w, m->p_jp_b, m->J, m->P_, buf, e) ||
             init_linear(m, seed, m->p_je_w, m->p_je_b, m->J, m->E, buf, e) ||
             init_linear(m, seed, m->p_out_w, m->p_out_b, m->V, m->J, buf, e);
    }
    free(buf);
    if (rc) return e->code ? e->code : TK_EINTERNAL;
    return tk_params_refresh_copy(m->P, e);
}

// ---- the step ----

// D (M, N) in cd = op(A) op(B) (+ bias), A and B in the model's type.
int rnnt_mm(rnnt_model *m, int M, int N, int K, int ta, int tb, const void *A, const void *B, void *D, tk_dtype cd,
              tk_epilogue epi, const void *bias, float *bgrad, tk_err *e) {
    tk_gemm_args g;
    memset(&g, 0, sizeof g);
    g.M = M, g.N = N, g.K = K, g.transa = ta, g.transb = tb;
    g.ab_type = m->t, g.cd_type = cd, g.A = A, g.B = B, g.D = D, g.alpha = 1.0f;
    g.epi = epi, g.bias = bias, g.bgrad = bgrad;
    return tk_gemm(m->c, &g, e);
}

static tk_dropout drop_of(const rnnt_model *m, float p, uint32_t site) {
    tk_dropout d = {p, m->cfg.seed, site, m->step, m->drop_offset};
    return d;
}

// A gather of n rows of D elements through the index array idx (a region of the plan's, in the
// backend's memory); t -> t unless noted.
static int gather(rnnt_model *m, const void *src, tk_dtype st, const int32_t *idx, int64_t n, void *dst, int D,
                  tk_err *e) {
    return tk_rows_copy(m->c, src, st, idx, dst, m->t, NULL, n, NULL, D, e);
}

// The host index arrays of the step's extents (all but the embedding's) into x: T padded frames
// (T2 = ceil(T / 2) stacked), U1 label positions. Frames at or past Tb (the batch's own frames)
// are cut off both ways: StackTime reads zeros for them (the reference pads to an even count with
// zeros there), and the stacked input's gradient does not flow back into them (the reference has
// no such frames; a padded step's later frames must not reach the earlier ones' gradients).
static void fill_shape_idx(const rnnt_plan_dims *d, const size_t *off, int32_t *x, int Tb, int T, int T2, int U1) {
    const int B = d->B;
    for (int t2 = 0; t2 < T2; t2++)
        for (int b = 0; b < B; b++)
            for (int h = 0; h < 2; h++)
                x[off[R_STACK] + ((size_t)t2 * B + b) * 2 + h] = 2 * t2 + h < Tb ? (2 * t2 + h) * B + b : -1;
    for (int t = 0; t < T; t++)
        for (int b = 0; b < B; b++) x[off[R_UNSTACK] + (size_t)t * B + b] = t < Tb ? ((t / 2) * B + b) * 2 + t % 2 : -1;
    for (int t = 0; t < T2; t++)
        for (int b = 0; b < B; b++) {
            x[off[R_FT] + (size_t)b * T2 + t] = t * B + b;
            x[off[R_FTB] + (size_t)t * B + b] = b * T2 + t;
        }
    for (int u = 0; u < U1; u++)
        for (int b = 0; b < B; b++) {
            x[off[R_GT] + (size_t)b * U1 + u] = u * B + b;
            x[off[R_GTB] + (size_t)u * B + b] = b * U1 + u;
        }
}

// The encoder's forward on the uploaded index arrays: feat (in t: x0 on bf16) -> pre_rnn -> the
// stacking -> post_rnn -> joint_enc -> f (B, T2, J); *x gets pre_rnn's input (the backward's).
static int encoder_fwd(rnnt_model *m, const int32_t *idx, const size_t *off, int T, const tk_dropout *Dpre,
                       const tk_dropout *Dpost, const void **x, tk_err *e) {
    const rnnt_model_cfg *c = &m->cfg;
    const int T2 = (T + 1) / 2, B = m->B, E = m->E, J = m->J;
    const tk_dtype t = m->t;
    tk_lstm_shape spre = shape_of(c->enc_pre_rnn_layers, T, B, m->I, E),
                  spost = shape_of(c->enc_post_rnn_layers, T2, B, 2 * E, E);
    tk_lstm_w wpre, wpost;
    tk_lstm_dw gpre, gpost;
    rnnt_lstm_of(m, m->p_pre, c->enc_pre_rnn_layers, &wpre, &gpre);
    rnnt_lstm_of(m, m->p_post, c->enc_post_rnn_layers, &wpost, &gpost);
    *x = m->feat;
    if (t != TK_F32) {
        if (tk_rows_copy(m->c, m->feat, TK_F32, NULL, m->x0, t, NULL, (int64_t)T * B, NULL, m->I, e)) return e->code;
        *x = m->x0;
    }
    if (tk_lstm_fwd(m->c, t, &spre, &wpre, NULL, *x, NULL, NULL, Dpre, m->y1, NULL, NULL, m->ws_pre, e) ||
        gather(m, m->y1, t, idx + off[R_STACK], (int64_t)T2 * B * 2, m->x2, E, e) ||
        tk_lstm_fwd(m->c, t, &spost, &wpost, NULL, m->x2, NULL, NULL, Dpost, m->y2, NULL, NULL, m->ws_post, e) ||
        rnnt_mm(m, T2 * B, J, E, 0, 1, m->y2, rnnt_wt(m, m->p_je_w), m->fe_tm, t, TK_EPI_BIAS, rnnt_wt(m, m->p_je_b),
                NULL, e) ||
        gather(m, m->fe_tm, t, idx + off[R_FT], (int64_t)B * T2, m->f, J, e))
        return e->code ? e->code : TK_EINTERNAL;
    return 0;
}

int rnnt_model_encode(rnnt_model *m, int T, int *T2p, tk_err *e) {
    if (T < 1 || T > m->cfg.max_frames)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: %d frames (1 .. %d)", T, m->cfg.max_frames);
    size_t off[R_N + 1];
    regions(&m->pd, off);
    const plan_ptrs h = plan_at(&m->pd, m->h_plan), d = plan_at(&m->pd, m->plan);
    fill_shape_idx(&m->pd, off, h.idx, T, T, (T + 1) / 2, 1);
    if (tk_memcpy_h2d(m->c, d.idx, h.idx, off[R_N] * 4, 0, e)) return e->code;
    *T2p = (T + 1) / 2;
    const void *x;
    return encoder_fwd(m, d.idx, off, T, NULL, NULL, &x, e);
}

static int64_t round_up(int64_t v, int64_t q) { return q > 1 ? (v + q - 1) / q * q : v; }

int rnnt_plan_fill(const rnnt_plan_dims *d, const rnnt_step_batch *bt, const rnnt_plan_pad *pad, void *plan,
                   rnnt_plan_shape *shape, tk_err *e) {
    const int B = d->B, T = bt->T, U = bt->U, V = d->V;
    if (T < 1 || T > d->Tmax || U < 0 || U > d->Umax)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: batch of %d frames, %d labels (at most %d, %d)", T, U, d->Tmax,
                          d->Umax);
    const plan_ptrs p = plan_at(d, plan);
    for (int b = 0; b < B; b++) {
        if (bt->feat_len[b] < 1 || bt->feat_len[b] > T || bt->lab_len[b] < 0 || bt->lab_len[b] > U)
            return tk_err_set(e, TK_EINTERNAL, "rnnt: utterance %d: %d frames, %d labels (at most %d, %d)", b,
                              bt->feat_len[b], bt->lab_len[b], T, U);
        for (int u = 0; u < bt->lab_len[b]; u++)
            if (bt->labels[(size_t)b * U + u] < 0 || bt->labels[(size_t)b * U + u] >= V - 1)
                return tk_err_set(e, TK_EINTERNAL, "rnnt: utterance %d: label %d at %d (want 0 .. %d)", b,
                                  bt->labels[(size_t)b * U + u], u, V - 2);
        p.T2[b] = rnnt_stacked_len(bt->feat_len[b]);
        p.U[b] = bt->lab_len[b];
    }
    // the padded extents (at most the model's)
    const int Tp = pad ? (int)(round_up(T, pad->T) < d->Tmax ? round_up(T, pad->T) : d->Tmax) : T;
    const int Up = pad ? (int)(round_up(U, pad->U) < d->Umax ? round_up(U, pad->U) : d->Umax) : U;
    const int T2p = (Tp + 1) / 2, U1 = Up + 1;
    size_t off[R_N + 1];
    regions(d, off);
    fill_shape_idx(d, off, p.idx, T, Tp, T2p, U1);
    int32_t *x = p.idx;
    for (int u = 0; u < U1; u++)
        for (int b = 0; b < B; b++)
            x[off[R_EMB] + (size_t)u * B + b] =
                u == 0 || u - 1 >= bt->lab_len[b] ? -1 : bt->labels[(size_t)b * U + u - 1];
    for (int b = 0; b < B; b++)
        for (int u = 0; u < Up; u++) p.lab[(size_t)b * Up + u] = u < U ? bt->labels[(size_t)b * U + u] : 0;
    // The embedding's gradient: the rows (u, b) of each label, labels in ascending order.
    int32_t *pos = x + off[R_POS], *so = x + off[R_OFF], *sr = x + off[R_ROW];
    int nseg = 0, k = 0;
    int *cnt = calloc((size_t)V, sizeof *cnt);
    if (!cnt) return tk_err_errno(e, ENOMEM, "rnnt: out of memory");
    for (int b = 0; b < B; b++)
        for (int u = 0; u < bt->lab_len[b]; u++) cnt[bt->labels[(size_t)b * U + u]]++;
    for (int v = 0; v < V; v++)
        if (cnt[v]) {
            so[nseg] = k, sr[nseg] = v, nseg++;
            const int n = cnt[v];
            cnt[v] = k; // now the next free slot of v
            k += n;
        }
    so[nseg] = k;
    for (int u = 1; u <= U; u++)
        for (int b = 0; b < B; b++)
            if (u - 1 < bt->lab_len[b]) pos[cnt[bt->labels[(size_t)b * U + u - 1]]++] = u * B + b;
    free(cnt);
    const int64_t rows = tk_rnnt_layout(B, T2p, Up, p.T2, p.U, 1, p.row0, e);
    if (rows < 0) return e->code;
    if (rows > d->rows_max)
        return tk_err_set(e, TK_EDATA, "rnnt: a batch of %lld lattice cells, more than the model's %lld", (long long)rows,
                          (long long)d->rows_max);
    // the joint's rows: the lattice's; with pad->levels, the next of `levels` even steps up to the
    // padded extents' whole lattice B T2p (Up + 1), at most rows_max
    int64_t cap = rows, key = -1;
    if (pad && pad->levels > 0) {
        const int64_t full = (int64_t)B * T2p * U1, q = (full + pad->levels - 1) / pad->levels, lev = (rows + q - 1) / q;
        cap = lev * q < d->rows_max ? lev * q : d->rows_max;
        key = ((int64_t)Tp * (d->Umax + 1) + Up) * (pad->levels + 1) + lev;
    }
    const int64_t hdr[H_N] = {T, U, Tp, Up, rows, cap, nseg, key};
    memcpy(p.hdr, hdr, sizeof hdr);
    rnnt_plan_shape_of(plan, shape);
    return 0;
}

int rnnt_model_step(rnnt_model *m, const rnnt_step_batch *bt, float scale, int train, tk_err *e) {
    rnnt_plan_shape s;
    if (rnnt_plan_fill(&m->pd, bt, NULL, m->h_plan, &s, e) ||
        tk_memcpy_h2d(m->c, m->plan, m->h_plan, m->plan_bytes, 0, e))
        return e->code ? e->code : TK_EINTERNAL;
    return rnnt_model_step_plan(m, m->plan, &s, scale, train, e);
}

int rnnt_model_step_plan(rnnt_model *m, const void *plan, const rnnt_plan_shape *s, float scale, int train,
                         tk_err *e) {
    if (s->Tp < 1 || s->Tp > m->cfg.max_frames || s->Up < 0 || s->Up > m->cfg.max_labels || s->rows_cap < 1 ||
        s->rows_cap > m->rows_max)
        return tk_err_set(e, TK_EINTERNAL, "rnnt: a step of %d frames, %d labels, %lld rows (at most %d, %d, %lld)",
                          s->Tp, s->Up, (long long)s->rows_cap, m->cfg.max_frames, m->cfg.max_labels,
                          (long long)m->rows_max);
    size_t off[R_N + 1];
    regions(&m->pd, off);
    const plan_ptrs p = plan_at(&m->pd, plan);
    const int32_t *idx = p.idx;
    m->T = s->Tp, m->U = s->Up, m->T2 = (s->Tp + 1) / 2, m->rows = s->rows_cap;
    const rnnt_model_cfg *c = &m->cfg;
    const int B = m->B, E = m->E, Pn = m->P_, J = m->J, V = m->V, T = m->T, T2 = m->T2, U1 = m->U + 1;
    const tk_dtype t = m->t;
    tk_lstm_shape spre = shape_of(c->enc_pre_rnn_layers, T, B, m->I, E),
                  spost = shape_of(c->enc_post_rnn_layers, T2, B, 2 * E, E),
                  sdec = shape_of(c->pred_rnn_layers, U1, B, Pn, Pn);
    tk_lstm_w wpre, wpost, wdec;
    tk_lstm_dw gpre, gpost, gdec;
    rnnt_lstm_of(m, m->p_pre, c->enc_pre_rnn_layers, &wpre, &gpre);
    rnnt_lstm_of(m, m->p_post, c->enc_post_rnn_layers, &wpost, &gpost);
    rnnt_lstm_of(m, m->p_dec, c->pred_rnn_layers, &wdec, &gdec);
    tk_dropout dpre = drop_of(m, c->enc_dropout, m->site_pre), dpost = drop_of(m, c->enc_dropout, m->site_post),
               ddec = drop_of(m, c->pred_dropout, m->site_dec), djoint = drop_of(m, c->joint_dropout, m->site_joint);
    const tk_dropout *Dpre = train ? &dpre : NULL, *Dpost = train ? &dpost : NULL, *Ddec = train ? &ddec : NULL,
                     *Djoint = train ? &djoint : NULL;
    tk_rnnt_lay L = {B, T2, m->U, 1, m->rows, p.T2, p.U, p.row0};
    const void *x;
    // forward
    if (encoder_fwd(m, idx, off, T, Dpre, Dpost, &x, e) ||
        gather(m, rnnt_wf(m, m->p_embed), TK_F32, idx + off[R_EMB], (int64_t)U1 * B, m->emb, Pn, e) ||
        tk_lstm_fwd(m->c, t, &sdec, &wdec, NULL, m->emb, NULL, NULL, Ddec, m->gp, NULL, NULL, m->ws_dec, e) ||
        rnnt_mm(m, U1 * B, J, Pn, 0, 1, m->gp, rnnt_wt(m, m->p_jp_w), m->gj_tm, t, TK_EPI_BIAS, rnnt_wt(m, m->p_jp_b),
                NULL, e) ||
        gather(m, m->gj_tm, t, idx + off[R_GT], (int64_t)B * U1, m->g, J, e) ||
        tk_rnnt_joint_fwd(m->c, t, &L, J, m->f, m->g, Djoint, m->h, e) ||
        rnnt_mm(m, (int)m->rows, V, J, 0, 1, m->h, rnnt_wt(m, m->p_out_w), m->z, t, TK_EPI_BIAS,
                rnnt_wt(m, m->p_out_b), NULL, e) ||
        tk_rnnt_loss(m->c, t, &L, V, V - 1, p.lab, m->z, scale, m->loss_acc, m->loss, m->costs, m->z, m->ws_loss, e))
        return e->code ? e->code : TK_EINTERNAL;
    // backward (the LSTMs add into their gradients: all zeroed first)
    if (tk_memset0(m->c, m->P->dense_g, m->P->dense_n * 4, 0, e) ||
        rnnt_mm(m, V, J, (int)m->rows, 1, 0, m->z, m->h, gf(m, m->p_out_w), TK_F32, TK_EPI_BGRADB, NULL,
                gf(m, m->p_out_b), e) ||
        rnnt_mm(m, (int)m->rows, J, V, 0, 0, m->z, rnnt_wt(m, m->p_out_w), m->h, t, TK_EPI_NONE, NULL, NULL, e) ||
        tk_rnnt_joint_bwd(m->c, t, &L, J, m->f, m->g, Djoint, m->h, m->df, m->dg, e) ||
        // encoder side
        gather(m, m->df, t, idx + off[R_FTB], (int64_t)T2 * B, m->fe_tm, J, e) ||
        rnnt_mm(m, J, E, T2 * B, 1, 0, m->fe_tm, m->y2, gf(m, m->p_je_w), TK_F32, TK_EPI_BGRADB, NULL,
                gf(m, m->p_je_b), e) ||
        rnnt_mm(m, T2 * B, E, J, 0, 0, m->fe_tm, rnnt_wt(m, m->p_je_w), m->d1, t, TK_EPI_NONE, NULL, NULL, e) ||
        tk_lstm_bwd(m->c, t, &spost, &wpost, NULL, m->x2, Dpost, m->d1, NULL, NULL, m->d2, NULL, NULL, &gpost,
                    m->ws_post, e) ||
        gather(m, m->d2, t, idx + off[R_UNSTACK], (int64_t)T * B, m->d1, E, e) ||
        tk_lstm_bwd(m->c, t, &spre, &wpre, NULL, x, Dpre, m->d1, NULL, NULL, NULL, NULL, NULL, &gpre, m->ws_pre, e) ||
        // prediction side
        gather(m, m->dg, t, idx + off[R_GTB], (int64_t)U1 * B, m->gj_tm, J, e) ||
        rnnt_mm(m, J, Pn, U1 * B, 1, 0, m->gj_tm, m->gp, gf(m, m->p_jp_w), TK_F32, TK_EPI_BGRADB, NULL,
                gf(m, m->p_jp_b), e) ||
        rnnt_mm(m, U1 * B, Pn, J, 0, 0, m->gj_tm, rnnt_wt(m, m->p_jp_w), m->d2, t, TK_EPI_NONE, NULL, NULL, e) ||
        tk_lstm_bwd(m->c, t, &sdec, &wdec, NULL, m->emb, Ddec, m->d2, NULL, NULL, m->d1, NULL, NULL, &gdec,
                    m->ws_dec, e))
        return e->code ? e->code : TK_EINTERNAL;
    // the embedding's rows: the plan's segments, their count read when the op runs (at most one a
    // label position, at most the V - 1 embedded labels)
    const int64_t items = (int64_t)m->U * B;
    const int nseg = (int)(items < V - 1 ? items : V - 1);
    if (nseg > 0 &&
        tk_rows_segsum(m->c, m->d1, t, idx + off[R_POS], idx + off[R_OFF], idx + off[R_ROW], nseg, p.hdr + H_NSEG,
                       items, Pn, gf(m, m->p_embed), m->ws_seg, e))
        return e->code;
    return 0;
}
