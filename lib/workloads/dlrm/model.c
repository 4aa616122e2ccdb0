// DLRM's model: tensors, initialization, copies, inputs (model.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cast2d.h"
#include "core/bf16.h"
#include "core/philox.h"
#include "embedding.h"
#include "gemm.h"
#include "interaction.h"
#include "workloads/dlrm/hybrid.h"
#include "workloads/dlrm/model.h"
#include "workloads/dlrm/profile.h"

#define STAGE_BYTES ((size_t)16 << 20) // host staging for the initialization

// The model's tensors, in checkpoint order: the MLPs' weights and biases (dense), then the tables
// (each held by its owner rank; this rank's packed into one array).
static void layer_name(const tk_dlrm *m, int l, const char *what, char *buf, size_t n) {
    int top = l >= m->cfg.nbot;
    snprintf(buf, n, "%s_mlp.%d.%s", top ? "top" : "bot", top ? l - m->cfg.nbot : l, what);
}

static int declare(tk_dlrm *m, tk_err *e) {
    tk_params *P = m->env.params;
    char name[96];
    for (int l = 0; l < m->nlayers; l++) {
        tk_dlrm_layer *L = &m->L[l];
        int64_t sw[2] = {L->out, L->in}, sb[1] = {L->out};
        layer_name(m, l, "weight", name, sizeof name);
        TRY(tk_params_add(P, name, TK_F32, 2, sw, TK_PARAM_DENSE, -1, &m->pidx[2 * l], e));
        layer_name(m, l, "bias", name, sizeof name);
        TRY(tk_params_add(P, name, TK_F32, 1, sb, TK_PARAM_DENSE | TK_PARAM_NO_DECAY, -1, &m->pidx[2 * l + 1], e));
    }
    int first = 1;
    for (int t = 0; t < m->cfg.num_tables; t++) {
        int64_t s[2] = {m->cfg.table_rows[t], m->cfg.emb_dim};
        int owner = t / m->tm, mine = owner == m->rank;
        snprintf(name, sizeof name, "emb.%d.weight", t);
        // this rank's tables one after the other, with no gap: one array indexed by row_off
        TRY(tk_params_add(P, name, m->cfg.table_dtype, 2, s, mine && !first ? TK_PARAM_PACKED : 0, owner, NULL, e));
        if (mine) first = 0;
    }
    if (m->cfg.bf16) P->copy_type = TK_BF16;
    TRY(tk_params_alloc(P, e));
    for (int l = 0; l < m->nlayers; l++) {
        tk_dlrm_layer *L = &m->L[l];
        L->W = P->p[m->pidx[2 * l]].w;
        L->b = P->p[m->pidx[2 * l + 1]].w;
        L->dW = P->p[m->pidx[2 * l]].g;
        L->db = P->p[m->pidx[2 * l + 1]].g;
    }
    m->dense_w = P->dense_w;
    m->dense_g = P->dense_g;
    m->dense_n = P->dense_n;
    m->tables = m->tn > 0 ? P->p[P->ndense + m->t0].w : (char *)P->dense_w + P->wbytes;
    return 0;
}

int tk_dlrm_create(const void *config, const tk_wl_env *env, void **model, tk_err *e) {
    const tk_dlrm_config *cfg = config;
    tk_dlrm *m = *model = calloc(1, sizeof *m); // (the engine destroys it if create fails)
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    tk_ctx *c = env->c;
    tk_comm *comm = env->dist->comm;
    m->c = c;
    m->cfg = *cfg;
    m->env = *env;
    const int B = cfg->batch, T = cfg->num_tables, D = cfg->emb_dim;
    m->act = cfg->bf16 ? TK_BF16 : TK_F32;
    m->world = comm ? tk_comm_world(comm) : 1;
    m->rank = comm ? tk_comm_rank(comm) : 0;
    m->comm = comm; // (world 1 included: the exchange step on one rank, a copy for an exchange)
    const int Wr = m->world;
    int64_t per_rank;
    TRY(tk_per_rank_batch("dlrm", B, Wr, &per_rank, e));
    m->b = (int)per_rank;
    m->tm = (T + Wr - 1) / Wr;
    m->t0 = m->rank * m->tm;
    m->tn = m->t0 >= T ? 0 : (T - m->t0 < m->tm ? T - m->t0 : m->tm);
    if (m->t0 > T) m->t0 = T;
    const int b = m->b, tn = m->tn, tm = m->tm;
    if (cfg->bot[cfg->nbot - 1] != D || cfg->top[cfg->ntop - 1] != 1 ||
        cfg->interaction_width < tk_interaction_width(T, D))
        return tk_err_set(e, TK_EUSAGE,
                          "dlrm: the bottom MLP must end in embedding_dim (%d), the top MLP in 1, "
                          "and interaction_width must be >= %d",
                          D, tk_interaction_width(T, D));
    // Layers and sizes.
    m->nlayers = cfg->nbot + cfg->ntop;
    int maxw = cfg->interaction_width;
    for (int l = 0; l < m->nlayers; l++) {
        tk_dlrm_layer *L = &m->L[l];
        int top = l >= cfg->nbot, k = top ? l - cfg->nbot : l;
        L->in = k == 0 ? (top ? cfg->interaction_width : cfg->num_dense) : (top ? cfg->top[k - 1] : cfg->bot[k - 1]);
        L->out = top ? cfg->top[k] : cfg->bot[k];
        L->relu = l != m->nlayers - 1; // MLPerf: ReLU everywhere but the last top layer
        if (L->out > maxw) maxw = L->out;
        if (L->in > maxw) maxw = L->in;
    }
    m->row_off_host[0] = 0;
    for (int t = 0; t < tn; t++) m->row_off_host[t + 1] = m->row_off_host[t] + cfg->table_rows[m->t0 + t];
    m->rows_total = m->row_off_host[tn];
    TRY(declare(m, e));

    // Activations, inputs, workspaces and the AUC: the engine's arena.
    size_t W = (size_t)cfg->interaction_width, es = tk_dtype_size(m->act); // es: an element of emb, demb, the exchange
    size_t sz[26 + 4 * TK_DLRM_MAX_LAYERS];
    void **dst[26 + 4 * TK_DLRM_MAX_LAYERS];
    int n = 0;
#define BUF(p, bytes) (sz[n] = (bytes), dst[n++] = (void **)&(p))
    BUF(m->in_label, (size_t)b); // this rank's samples (the reader decodes only theirs)
    BUF(m->in_dense, (size_t)b * cfg->num_dense * 4);
    BUF(m->in_cat, (size_t)b * T * 4);
    BUF(m->x0, (size_t)b * cfg->num_dense * 4);
    BUF(m->inter, (size_t)b * W * 4);
    BUF(m->dlogit, (size_t)b * 4);
    BUF(m->dy[0], (size_t)b * maxw * 4);
    BUF(m->dy[1], (size_t)b * maxw * 4);
    BUF(m->dinter, (size_t)b * W * 4);
    BUF(m->dbot, (size_t)b * D * 4);
    BUF(m->emb_ws, tk_embedding_bwd_ws_bytes(c->backend, B, tn)); // the owned tables, all B samples
    BUF(m->row_off, (size_t)(tn + 1) * 8);
    BUF(m->auc, 8);
    for (int l = 0; l < m->nlayers; l++) {
        BUF(m->L[l].y, (size_t)b * m->L[l].out * 4);
        BUF(m->L[l].aux, tk_gemm_aux_bytes(c, b, m->L[l].out));
    }
    int kp = tk_dlrm_kpad(cfg->num_dense), o0 = m->L[0].out;
    if (cfg->bf16) {
        BUF(m->x0p, (size_t)b * kp * 2);
        BUF(m->W0p, (size_t)o0 * kp * 2);
        BUF(m->dW0p, (size_t)o0 * kp * 4);
    }
    if (!m->comm) { // the exchange step uses the exchange buffers instead (grouped layout, G = tm)
        BUF(m->emb, (size_t)b * T * D * es);
        BUF(m->demb, (size_t)b * T * D * es);
    } else {
        if (Wr > 1) BUF(m->cat_all, (size_t)B * T * 4); // (one rank: in_cat, below)
        BUF(m->cat_own, (size_t)B * tn * 4);
        BUF(m->emb_own, (size_t)B * tn * D * es);
        BUF(m->a2a_send, (size_t)B * tm * D * es);
        BUF(m->a2a_recv, (size_t)B * tm * D * es);
        BUF(m->ev_dense, (size_t)b * cfg->num_dense * 4);
        BUF(m->ev_logit, (size_t)b * 4);
        BUF(m->ev_score, (size_t)B * 4);
    }
#undef BUF
    TRY(tk_wl_acts(env, sz, dst, n, e));
    for (int l = 0; l < m->nlayers; l++)
        m->L[l].x = l == 0 ? m->x0 : l == cfg->nbot ? m->inter : m->L[l - 1].y;
    m->logit = m->L[m->nlayers - 1].y;
    if (!m->cat_all) m->cat_all = m->in_cat; // (b = B)
    TRY(tk_memcpy_h2d(c, m->row_off, m->row_off_host, (size_t)(tn + 1) * 8, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(c, e);
}

void tk_dlrm_destroy(void *model) { // (the activations are the engine's)
    tk_dlrm *m = model;
    if (m) tk_dlrm_hybrid_destroy(m);
    free(m);
}

// A distinct Philox stream per tensor: id 0.. for the MLP tensors, 1000+t for table t.
static uint32_t init_stream(int id) { return (uint32_t)TK_RNG_INIT | (uint32_t)(id + 1) << 8; }

// The bf16 path: rewrite the compute copies (the tk_params copy, W0p) from the fp32 master
// weights, after anything but the optimizer's update (which writes the former itself) changed them.
int tk_dlrm_cast_w0p(tk_dlrm *m, tk_err *e) { // layer 0's weights, padded to K = 16, in bf16
    const tk_dlrm_layer *L0 = &m->L[0];
    return tk_cast2d(m->c, L0->W, TK_F32, L0->in, m->W0p, TK_BF16, tk_dlrm_kpad(L0->in), L0->out, L0->in, e);
}

int tk_dlrm_refresh_copies(tk_dlrm *m, tk_err *e) {
    if (!m->cfg.bf16) return 0;
    TRY(tk_params_refresh_copy(m->env.params, e));
    return tk_dlrm_cast_w0p(m, e);
}

int tk_dlrm_init_weights(void *model, uint64_t seed, tk_err *e) {
    tk_dlrm *m = model;
    const tk_dlrm_config *cfg = &m->cfg;
    size_t ds = m->dense_n * 4;
    float *h = calloc(1, ds > STAGE_BYTES ? ds : STAGE_BYTES);
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory");
    for (int l = 0; l < m->nlayers; l++) {
        tk_dlrm_layer *L = &m->L[l];
        float *w = h + (L->W - m->dense_w), *b = h + (L->b - m->dense_w);
        double sw = sqrt(2.0 / (L->in + L->out)), sb = sqrt(1.0 / L->out);
        for (size_t i = 0; i < (size_t)L->in * L->out; i++) w[i] = (float)(sw * tk_philox_normal(seed, init_stream(2 * l), i));
        for (int i = 0; i < L->out; i++) b[i] = (float)(sb * tk_philox_normal(seed, init_stream(2 * l + 1), (uint64_t)i));
    }
    int rc = tk_memcpy_h2d(m->c, m->dense_w, h, ds, TK_STREAM_COMPUTE, e);
    // Tables, a staging buffer at a time.
    const int D = cfg->emb_dim;
    size_t esz = tk_dtype_size(cfg->table_dtype), chunk = STAGE_BYTES / esz / (size_t)D * (size_t)D;
    // Table t of the model is this rank's table t - t0: its values come from the Philox stream of
    // the GLOBAL table index, so they are the one-rank model's whatever the world size.
    for (int lt = 0; !rc && lt < m->tn; lt++) {
        int t = m->t0 + lt;
        size_t n = (size_t)cfg->table_rows[t] * D;
        double a = sqrt(1.0 / (double)cfg->table_rows[t]);
        char *dst = (char *)m->tables + (size_t)m->row_off_host[lt] * D * esz;
        for (size_t off = 0; !rc && off < n; off += chunk) {
            size_t k = n - off < chunk ? n - off : chunk;
            rc = tk_ctx_sync(m->c, e); // the previous chunk's copy has left the staging buffer
            if (rc) break;
#pragma omp parallel for schedule(static)
            for (size_t i = 0; i < k; i++) {
                float u = (float)(-a + 2 * a * tk_philox_uniform(seed, init_stream(1000 + t), off + i));
                if (cfg->table_dtype == TK_BF16) ((uint16_t *)h)[i] = tk_f32_to_bf16(u);
                else h[i] = u;
            }
            rc = tk_memcpy_h2d(m->c, dst + off * esz, h, k * esz, TK_STREAM_COMPUTE, e);
        }
    }
    if (!rc) rc = tk_ctx_sync(m->c, e); // (the last chunk's copy has left the staging buffer)
    free(h);
    return rc;
}

int tk_dlrm_batch(const void *model, tk_wl_field *f) {
    const tk_dlrm *m = model;
    const int64_t b = m->b; // this rank's samples (the step all-gathers the ids of all B)
    f[0] = (tk_wl_field){"batch.label", TK_U8, 1, {b}, m->in_label};
    f[1] = (tk_wl_field){"batch.dense", TK_I32, 2, {b, m->cfg.num_dense}, m->in_dense};
    f[2] = (tk_wl_field){"batch.cat", TK_I32, 2, {b, m->cfg.num_tables}, m->in_cat};
    return 3;
}
