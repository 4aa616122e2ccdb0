// DLRM: parameters, forward, backward, optimizer step, checkpoints (see dlrm.h).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bce.h"
#include "cast2d.h"
#include "ckpt/safetensors.h"
#include "dense_log1p.h"
#include "embedding.h"
#include "gpu/philox.h"
#include "interaction.h"
#include "rows.h"
#include "sgd.h"
#include "workloads/dlrm.h"
#include "workloads/dlrm_hybrid.h"

#define STAGE_BYTES ((size_t)16 << 20) // host staging for checkpoint I/O and initialization

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

// The bf16 path's first GEMM: the dense features padded to a multiple of 8 (13 -> 16), so rows
// are 16-byte aligned for the tensor cores.
static int kpad(int k) { return (k + 7) / 8 * 8; }

static void layer_name(const tk_dlrm *m, int l, const char *what, char *buf, size_t n) {
    int top = l >= m->cfg.nbot;
    snprintf(buf, n, "%s_mlp.%d.%s", top ? "top" : "bot", top ? l - m->cfg.nbot : l, what);
}

int tk_dlrm_create(tk_dlrm **out, tk_ctx *c, const tk_dlrm_config *cfg, tk_err *e) {
    return tk_dlrm_create_dist(out, c, cfg, NULL, 0, e);
}

int tk_dlrm_create_dist(tk_dlrm **out, tk_ctx *c, const tk_dlrm_config *cfg, tk_comm *comm, double timeout_s,
                        tk_err *e) {
    *out = NULL;
    tk_dlrm *m = calloc(1, sizeof *m);
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    m->c = c;
    m->cfg = *cfg;
    const int B = cfg->batch, T = cfg->num_tables, D = cfg->emb_dim;
    int rc = 0;
    m->act = cfg->bf16 ? TK_BF16 : TK_F32;
    m->world = comm ? tk_comm_world(comm) : 1;
    m->rank = comm ? tk_comm_rank(comm) : 0;
    m->comm = comm; // (world 1 included: the exchange step on one rank, a copy for an exchange)
    m->comm_timeout = timeout_s > 0 ? timeout_s : 300;
    const int Wr = m->world;
    if (B % Wr != 0) {
        rc = tk_err_set(e, TK_EUSAGE, "dlrm: the global batch (%d) must be a multiple of the world size (%d)", B, Wr);
        tk_err_hint(e, "set train.global_batch_size to a multiple of %d", Wr);
        goto fail;
    }
    m->b = B / Wr;
    m->tm = (T + Wr - 1) / Wr;
    m->t0 = m->rank * m->tm;
    m->tn = m->t0 >= T ? 0 : (T - m->t0 < m->tm ? T - m->t0 : m->tm);
    if (m->t0 > T) m->t0 = T;
    const int b = m->b, tn = m->tn, tm = m->tm;
    if (cfg->bf16 && c->backend != TK_BACKEND_CUDA) {
        rc = tk_err_set(e, TK_EUSAGE, "dlrm: precision bf16 needs the cuda backend");
        tk_err_hint(e, "the cpu backend is the fp32 reference: use precision fp32 there");
        goto fail;
    }
    if (cfg->bot[cfg->nbot - 1] != D || cfg->top[cfg->ntop - 1] != 1 ||
        cfg->interaction_width < tk_interaction_width(T, D)) {
        rc = tk_err_set(e, TK_EUSAGE,
                        "dlrm: the bottom MLP must end in embedding_dim (%d), the top MLP in 1, "
                        "and interaction_width must be >= %d",
                        D, tk_interaction_width(T, D));
        goto fail;
    }
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
    size_t dense_bytes = 0;
    for (int l = 0; l < m->nlayers; l++)
        dense_bytes += align256((size_t)m->L[l].in * m->L[l].out * 4) + align256((size_t)m->L[l].out * 4);
    m->row_off_host[0] = 0;
    for (int t = 0; t < tn; t++) m->row_off_host[t + 1] = m->row_off_host[t] + cfg->table_rows[m->t0 + t];
    m->rows_total = m->row_off_host[tn];
    size_t table_bytes = (size_t)m->rows_total * D * tk_dtype_size(cfg->table_dtype);

    TRY(tk_arena_init(c, &m->params, dense_bytes + align256(table_bytes) + 256, "params", e));
    if ((rc = tk_arena_init(c, &m->grads, dense_bytes + 256, "grads", e))) goto fail;
    void *p;
    for (int l = 0; l < m->nlayers; l++) {
        tk_dlrm_layer *L = &m->L[l];
        if ((rc = tk_arena_take(&m->params, (size_t)L->in * L->out * 4, &p, e))) goto fail;
        L->W = p;
        if ((rc = tk_arena_take(&m->params, (size_t)L->out * 4, &p, e))) goto fail;
        L->b = p;
        if ((rc = tk_arena_take(&m->grads, (size_t)L->in * L->out * 4, &p, e))) goto fail;
        L->dW = p;
        if ((rc = tk_arena_take(&m->grads, (size_t)L->out * 4, &p, e))) goto fail;
        L->db = p;
    }
    m->dense_w = m->L[0].W;
    m->dense_g = m->L[0].dW;
    m->dense_n = (size_t)((char *)(m->L[m->nlayers - 1].b + m->L[m->nlayers - 1].out) - (char *)m->dense_w) / 4;
    if ((rc = tk_arena_take(&m->params, table_bytes, &m->tables, e))) goto fail;
    if ((rc = tk_memset0(c, m->params.base, m->params.cap, TK_STREAM_COMPUTE, e))) goto fail;
    if ((rc = tk_memset0(c, m->grads.base, m->grads.cap, TK_STREAM_COMPUTE, e))) goto fail;

    // Activations, inputs, workspaces and device scalars.
    size_t W = (size_t)cfg->interaction_width;
    size_t act = 0, es = tk_dtype_size(m->act); // es: bytes of an element of emb, demb and the exchange
    size_t sizes[64];
    int ns = 0;
#define NEED(bytes) (sizes[ns++] = (bytes), act += align256(bytes))
    NEED((size_t)B);                                 // in_label
    NEED((size_t)B * cfg->num_dense * 4);            // in_dense
    NEED((size_t)B * T * 4);                         // in_cat
    NEED((size_t)b * cfg->num_dense * 4);            // x0
    NEED((size_t)b * W * 4);                         // inter
    NEED((size_t)b * 4);                             // logit
    NEED((size_t)b * 4);                             // dlogit
    NEED((size_t)b * maxw * 4);                      // dy[0]
    NEED((size_t)b * maxw * 4);                      // dy[1]
    NEED((size_t)b * W * 4);                         // dinter
    NEED((size_t)b * D * 4);                         // dbot
    NEED(tk_embedding_bwd_ws_bytes(c->backend, B, tn)); // emb_ws (the owned tables, all B samples)
    NEED((size_t)(tn + 1) * 8);                      // row_off
    NEED(64);                                        // scalars: lr, step, loss_acc[2], auc
    for (int l = 0; l < m->nlayers; l++) {
        NEED((size_t)b * m->L[l].out * 4);           // y
        NEED(tk_gemm_aux_bytes(c, b, m->L[l].out)); // aux
    }
    int kp = kpad(cfg->num_dense), o0 = m->L[0].out;
    if (cfg->bf16) {
        NEED(m->dense_n * 2);                        // wcopy
        NEED((size_t)b * kp * 2);                    // x0p
        NEED((size_t)o0 * kp * 2);                   // W0p
        NEED((size_t)o0 * kp * 4);                   // dW0p
    }
    if (!m->comm) { // the exchange step uses the exchange buffers instead (grouped layout, G = tm)
        NEED((size_t)b * T * D * es);                // emb
        NEED((size_t)b * T * D * es);                // demb
    } else {
        NEED((size_t)B * tn * 4);                    // cat_own
        NEED((size_t)B * tn * D * es);               // emb_own
        NEED((size_t)B * tm * D * es);               // a2a_send
        NEED((size_t)B * tm * D * es);               // a2a_recv
        NEED((size_t)b * cfg->num_dense * 4);        // ev_dense
        NEED((size_t)b * 4);                         // ev_logit
        NEED((size_t)B * 4);                         // ev_score
        NEED((size_t)Wr * 16);                       // acc_all
        NEED((size_t)(Wr + 1) * 8);                  // word_all
    }
#undef NEED
    if ((rc = tk_arena_init(c, &m->acts, act + 256, "activations", e))) goto fail;
    void *v[64];
    for (int i = 0; i < ns; i++)
        if ((rc = tk_arena_take(&m->acts, sizes[i], &v[i], e))) goto fail;
    int i = 0;
    m->in_label = v[i++];
    m->in_dense = v[i++];
    m->in_cat = v[i++];
    m->x0 = v[i++];
    m->inter = v[i++];
    m->logit = v[i++];
    m->dlogit = v[i++];
    m->dy[0] = v[i++];
    m->dy[1] = v[i++];
    m->dinter = v[i++];
    m->dbot = v[i++];
    m->emb_ws = v[i++];
    m->row_off = v[i++];
    char *s = v[i++];
    m->lr = (float *)s;
    m->step = (int64_t *)(s + 8);
    m->loss_acc = (double *)(s + 16);
    m->auc = (double *)(s + 32);
    for (int l = 0; l < m->nlayers; l++) {
        m->L[l].y = v[i++];
        m->L[l].aux = v[i++];
        m->L[l].x = l == 0 ? m->x0 : l == cfg->nbot ? m->inter : m->L[l - 1].y;
    }
    if (cfg->bf16) {
        m->wcopy = v[i++];
        m->x0p = v[i++];
        m->W0p = v[i++];
        m->dW0p = v[i++];
    }
    if (!m->comm) {
        m->emb = v[i++];
        m->demb = v[i++];
    } else {
        m->cat_own = v[i++];
        m->emb_own = v[i++];
        m->a2a_send = v[i++];
        m->a2a_recv = v[i++];
        m->ev_dense = v[i++];
        m->ev_logit = v[i++];
        m->ev_score = v[i++];
        m->acc_all = v[i++];
        m->word_all = v[i++];
    }
    m->logit = m->L[m->nlayers - 1].y;
    if ((rc = tk_memset0(c, m->acts.base, m->acts.cap, TK_STREAM_COMPUTE, e))) goto fail;
    if ((rc = tk_memcpy_h2d(c, m->row_off, m->row_off_host, (size_t)(tn + 1) * 8, TK_STREAM_COMPUTE, e)))
        goto fail;
    for (int k = 0; k < 2; k++) {
        struct tk_dlrm_stage *g = &m->stage[k];
        size_t nd = (size_t)B * cfg->num_dense * 4, nc = (size_t)B * T * 4, nl = align256((size_t)B);
        void *p;
        if ((rc = tk_malloc(c, &p, nl + align256(nd) + nc, e))) goto fail;
        g->label = p;
        g->dense = (int32_t *)((char *)p + nl);
        g->cat = (int32_t *)((char *)p + nl + align256(nd));
        if ((rc = tk_event_create(c, &g->copied, e)) || (rc = tk_event_create(c, &g->taken, e))) goto fail;
    }
    if ((rc = tk_ctx_sync(c, e))) goto fail;
    *out = m;
    return 0;
fail:
    tk_dlrm_destroy(m);
    return rc;
}

// ---- per-phase timing (tk_dlrm_profile_start) ----

#define PROF_MAX 40
struct tk_dlrm_prof {
    tk_event ev[PROF_MAX];
    const char *name[PROF_MAX]; // the phase a mark ends; NULL: a mark that only starts one
    int stream[PROF_MAX];
    int n, in_step;             // marks of the current step; inside tk_dlrm_train_step
    const char *phase[PROF_MAX]; // the phases in the order they first ran, their totals
    double total[PROF_MAX];
    int phases, steps;
};

static void prof_free(tk_dlrm *m) {
    if (!m->prof) return;
    for (int k = 0; k < PROF_MAX; k++) tk_event_destroy(&m->prof->ev[k]);
    free(m->prof);
    m->prof = NULL;
}

int tk_dlrm_profile_start(tk_dlrm *m, tk_err *e) {
    if (m->prof) return 0;
    if (!(m->prof = calloc(1, sizeof *m->prof))) return tk_err_set(e, TK_EIO, "dlrm: out of host memory");
    for (int k = 0; k < PROF_MAX; k++)
        if (tk_event_create_timed(m->c, &m->prof->ev[k], e)) {
            prof_free(m);
            return e->code;
        }
    return 0;
}

// Marks the end of phase `name` (NULL: the start of the next one) on `stream`.
static int prof_mark(tk_dlrm *m, const char *name, int stream, tk_err *e) {
    struct tk_dlrm_prof *P = m->prof;
    if (!P || !P->in_step || m->c->capturing || P->n >= PROF_MAX) return 0;
    P->name[P->n] = name;
    P->stream[P->n] = stream;
    return tk_event_record(m->c, &P->ev[P->n++], stream, e);
}

static void prof_step(tk_dlrm *m, int begin) {
    if (m->prof) {
        m->prof->in_step = begin;
        if (begin) m->prof->n = 0;
    }
}

int tk_dlrm_profile_add(tk_dlrm *m, int keep, tk_err *e) {
    struct tk_dlrm_prof *P = m->prof;
    if (!P) return 0;
    for (int k = 0; keep && k < P->n; k++) {
        if (!P->name[k]) continue;
        int j = k - 1;
        while (j >= 0 && P->stream[j] != P->stream[k]) j--;
        if (j < 0) continue;
        double ms;
        TRY(tk_event_elapsed_ms(m->c, &P->ev[j], &P->ev[k], &ms, e));
        int f = 0;
        while (f < P->phases && strcmp(P->phase[f], P->name[k]) != 0) f++;
        if (f == P->phases) {
            if (f == PROF_MAX) continue;
            P->phase[P->phases++] = P->name[k];
        }
        P->total[f] += ms;
    }
    if (keep && P->n > 0) P->steps++;
    P->n = 0;
    return 0;
}

json_t *tk_dlrm_profile_json(const tk_dlrm *m) {
    const struct tk_dlrm_prof *P = m->prof;
    if (!P) return NULL;
    json_t *ms = json_object();
    for (int f = 0; f < P->phases; f++)
        json_object_set_new(ms, P->phase[f], json_real(P->steps ? P->total[f] / P->steps : 0));
    return json_pack("{s:i, s:o}", "steps", P->steps, "ms", ms);
}

void tk_dlrm_destroy(tk_dlrm *m) {
    if (!m) return;
    tk_arena_release(m->c, &m->params);
    tk_arena_release(m->c, &m->grads);
    tk_arena_release(m->c, &m->acts);
    for (int k = 0; k < 2; k++) {
        tk_event_destroy(&m->stage[k].copied);
        tk_event_destroy(&m->stage[k].taken);
        if (m->stage[k].label) tk_free(m->c, m->stage[k].label);
    }
    prof_free(m);
    tk_dlrm_hybrid_destroy(m);
    free(m);
}

// N(0, 1) from two Philox words (Box-Muller; u1 in (0, 1] so the log is finite).
static float philox_normal(uint64_t seed, uint32_t stream, uint64_t i) {
    tk_philox_ctr r = tk_philox_draw(seed, stream, i >> 1);
    int h = (int)(i & 1) * 2;
    double u1 = 1.0 - tk_u32_to_unit(r.v[h]), u2 = tk_u32_to_unit(r.v[h + 1]);
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

// A distinct Philox stream per tensor: id 0.. for the MLP tensors, 1000+t for table t.
static uint32_t init_stream(int id) { return (uint32_t)TK_RNG_INIT | (uint32_t)(id + 1) << 8; }

// The bf16 path: rewrite the compute copies (wcopy, W0p) from the fp32 master weights, after
// anything but the SGD update (which writes wcopy itself) changed them.
static int cast_w0p(tk_dlrm *m, tk_err *e) { // layer 0's weights, padded to K = 16, in bf16
    const tk_dlrm_layer *L0 = &m->L[0];
    return tk_cast2d(m->c, L0->W, TK_F32, L0->in, m->W0p, TK_BF16, kpad(L0->in), L0->out, L0->in, e);
}

static int refresh_copies(tk_dlrm *m, tk_err *e) {
    if (!m->cfg.bf16) return 0;
    TRY(tk_cast2d(m->c, m->dense_w, TK_F32, (int64_t)m->dense_n, m->wcopy, TK_BF16, (int64_t)m->dense_n, 1,
                  (int64_t)m->dense_n, e));
    return cast_w0p(m, e);
}

int tk_dlrm_init_weights(tk_dlrm *m, uint64_t seed, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    size_t ds = m->dense_n * 4;
    float *h = calloc(1, ds > STAGE_BYTES ? ds : STAGE_BYTES);
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory");
    for (int l = 0; l < m->nlayers; l++) {
        tk_dlrm_layer *L = &m->L[l];
        float *w = h + (L->W - m->dense_w), *b = h + (L->b - m->dense_w);
        double sw = sqrt(2.0 / (L->in + L->out)), sb = sqrt(1.0 / L->out);
        for (size_t i = 0; i < (size_t)L->in * L->out; i++) w[i] = (float)(sw * philox_normal(seed, init_stream(2 * l), i));
        for (int i = 0; i < L->out; i++) b[i] = (float)(sb * philox_normal(seed, init_stream(2 * l + 1), (uint64_t)i));
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
    if (!rc) rc = tk_ctx_sync(m->c, e);
    free(h);
    if (!rc) rc = refresh_copies(m, e);
    if (!rc) rc = tk_dlrm_write_step(m, 0, e);
    if (!rc) rc = tk_memset0(m->c, m->loss_acc, 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_dlrm_hybrid_refresh(m, e);
    return rc;
}

int tk_dlrm_set_batch(tk_dlrm *m, const uint8_t *label, const int32_t *dense, const int32_t *cat,
                      int n, tk_err *e) {
    if (n > m->cfg.batch) return tk_err_set(e, TK_EINTERNAL, "dlrm: batch of %d > %d", n, m->cfg.batch);
    TRY(tk_memcpy_h2d(m->c, m->in_label, label, (size_t)n, TK_STREAM_COMPUTE, e));
    TRY(tk_memcpy_h2d(m->c, m->in_dense, dense, (size_t)n * m->cfg.num_dense * 4, TK_STREAM_COMPUTE, e));
    TRY(tk_memcpy_h2d(m->c, m->in_cat, cat, (size_t)n * m->cfg.num_tables * 4, TK_STREAM_COMPUTE, e));
    if (!m->hy) return 0;
    if (n != m->cfg.batch) return tk_err_set(e, TK_EINTERNAL, "dlrm: the hybrid embedding plans whole batches");
    // on the compute stream, so after any step that read slot 0's plan
    TRY(tk_dlrm_hybrid_plan(m, 0, m->in_cat, TK_STREAM_COMPUTE, e));
    m->hy->cur = 0;
    return 0;
}

int tk_dlrm_stage_batch(tk_dlrm *m, int slot, const uint8_t *label, const int32_t *dense,
                        const int32_t *cat, int n, tk_err *e) {
    if (n > m->cfg.batch || slot < 0 || slot > 1)
        return tk_err_set(e, TK_EINTERNAL, "dlrm: stage slot %d, batch of %d > %d", slot, n, m->cfg.batch);
    struct tk_dlrm_stage *g = &m->stage[slot];
    tk_ctx *c = m->c;
    const int s = TK_STREAM_COPY;
    TRY(tk_event_wait(c, s, &g->taken, e)); // the step before has moved the old contents out
    TRY(tk_memcpy_h2d_async(c, g->label, label, (size_t)n, s, e));
    TRY(tk_memcpy_h2d_async(c, g->dense, dense, (size_t)n * m->cfg.num_dense * 4, s, e));
    TRY(tk_memcpy_h2d_async(c, g->cat, cat, (size_t)n * m->cfg.num_tables * 4, s, e));
    if (m->hy) { // the slot's exchange plan, computed on the copy stream while the device trains
        tk_dlrm_hplan *P = &m->hy->plan[slot];
        if (n != m->cfg.batch) return tk_err_set(e, TK_EINTERNAL, "dlrm: the hybrid embedding plans whole batches");
        if (P->has_done) TRY(tk_event_wait(c, s, &P->done, e)); // the step that read it is over
        TRY(tk_dlrm_hybrid_plan(m, slot, g->cat, s, e));
    }
    TRY(tk_event_record(c, &g->copied, s, e));
    g->n = n;
    return tk_event_sync(c, &g->copied, e);
}

int tk_dlrm_use_batch(tk_dlrm *m, int slot, tk_err *e) {
    if (slot < 0 || slot > 1) return tk_err_set(e, TK_EINTERNAL, "dlrm: stage slot %d", slot);
    struct tk_dlrm_stage *g = &m->stage[slot];
    tk_ctx *c = m->c;
    const int s = TK_STREAM_COMPUTE;
    size_t n = (size_t)g->n;
    TRY(tk_event_wait(c, s, &g->copied, e));
    TRY(tk_memcpy_d2d(c, m->in_label, g->label, n, s, e));
    TRY(tk_memcpy_d2d(c, m->in_dense, g->dense, n * m->cfg.num_dense * 4, s, e));
    TRY(tk_memcpy_d2d(c, m->in_cat, g->cat, n * m->cfg.num_tables * 4, s, e));
    if (m->hy) m->hy->cur = slot; // the step reads the slot's plan in place (no graph: no fixed address)
    return tk_event_record(c, &g->taken, s, e);
}

// ab: the type of A and B (f32, or bf16 on the bf16 path); cd: of D and the bias.
static int gemm(tk_dlrm *m, int M, int N, int K, int ta, int tb, const void *A, const void *B, tk_dtype ab,
                void *Dm, tk_dtype cd, tk_epilogue epi, const void *bias, void *aux, float *bgrad, tk_err *e) {
    tk_gemm_args g = {.M = M, .N = N, .K = K, .transa = ta, .transb = tb, .ab_type = ab,
                      .cd_type = cd, .A = A, .B = B, .D = Dm, .alpha = 1, .beta = 0,
                      .epi = epi, .bias = bias, .aux = aux, .bgrad = bgrad,
                      .stream = TK_STREAM_COMPUTE, .tf32 = m->cfg.tf32};
    return tk_gemm(m->c, &g, e);
}

// The compute copy of a dense parameter: the fp32 master itself, or its bf16 copy.
static const void *wc(const tk_dlrm *m, const float *p) {
    return m->cfg.bf16 ? (const void *)(m->wcopy + (p - m->dense_w)) : (const void *)p;
}

static int mlp_forward(tk_dlrm *m, int l0, int l1, int n, float *last_out, tk_err *e) {
    for (int l = l0; l < l1; l++) {
        tk_dlrm_layer *L = &m->L[l];
        int last = l == m->nlayers - 1;
        // On the bf16 path the logits are bf16 in L->y; an fp32 out (eval scores) gets a copy.
        float *y = last && last_out && (!m->cfg.bf16 || last_out == m->logit) ? last_out : L->y;
        const void *x = L->x, *W = wc(m, L->W);
        int K = L->in;
        if (l == 0 && m->cfg.bf16) x = m->x0p, W = m->W0p, K = kpad(L->in);
        TRY(gemm(m, n, L->out, K, 0, 1, x, W, m->act, y, m->act, L->relu ? TK_EPI_RELU_BIAS : TK_EPI_BIAS,
                 wc(m, L->b), L->relu ? L->aux : NULL, NULL, e));
        if (last && last_out && y != last_out)
            TRY(tk_cast2d(m->c, y, m->act, 1, last_out, TK_F32, 1, n, 1, e));
    }
    return 0;
}

// ---- several ranks: the embedding exchange ----

// Looks up the owned tables for the n samples of cat (n, T) (all ranks' samples, rank j's being
// [j*bl, (j+1)*bl); rows past n are padding with id 0), lays them out [j][bl][tm][D] in a2a_send
// and starts the all-to-all on the comm stream. The compute stream is free meanwhile.
static int exchange_fwd_start(tk_dlrm *m, const int32_t *cat, int n, int bl, tk_err *e) {
    tk_ctx *c = m->c;
    const int T = m->cfg.num_tables, D = m->cfg.emb_dim, tn = m->tn, tm = m->tm, rows = m->world * bl;
    const int s = TK_STREAM_COMPUTE;
    const size_t es = tk_dtype_size(m->act); // the vectors travel in act (bf16 halves the exchange)
    if (tn > 0) {
        TRY(tk_memcpy2d(c, m->cat_own, (size_t)tn * 4, cat + m->t0, (size_t)T * 4, (size_t)tn * 4, (size_t)n, s, e));
        if (n < rows) TRY(tk_memset0(c, m->cat_own + (size_t)n * tn, (size_t)(rows - n) * tn * 4, s, e));
        void *dst = tn == tm ? m->a2a_send : m->emb_own;
        TRY(tk_embedding_fwd_act(c, m->tables, m->cfg.table_dtype, m->row_off, m->cat_own, rows, tn, D, dst, m->act,
                                 e));
        // A rank with fewer tables than tm leaves the last slots of each sample alone: zero since
        // tk_dlrm_create, and no rank ever reads them.
        if (tn < tm)
            TRY(tk_memcpy2d(c, m->a2a_send, (size_t)tm * D * es, m->emb_own, (size_t)tn * D * es, (size_t)tn * D * es,
                            (size_t)rows, s, e));
    }
    TRY(prof_mark(m, "lookup", s, e));
    TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMM, s, e));
    TRY(prof_mark(m, NULL, TK_STREAM_COMM, e));
    TRY(tk_all_to_all(m->comm, m->a2a_send, m->a2a_recv, (size_t)bl * tm * D, m->act, TK_STREAM_COMM, e));
    return prof_mark(m, "a2a_fwd", TK_STREAM_COMM, e);
}

// A region of the current batch's plan (kernels/hybrid_plan.h), and its sizes.
static const int32_t *hp(const tk_dlrm *m, int region) { return m->hy->plan[m->hy->cur].d + m->hy->off[region]; }
static int64_t hp_n(const tk_dlrm *m, int which) { // 0 n_send, 1 n_recv, 2 n_freq, 3 nseg
    return m->hy->plan[m->hy->cur].counts[2 * m->world + which];
}

// The plan's vector counts as element counts for tk_all_to_allv: fwd gives the forward's send and
// receive counts, !fwd the backward's (the same pairs, reversed).
static void hybrid_counts(const tk_dlrm *m, int fwd, size_t *send, size_t *recv) {
    const int64_t *k = m->hy->plan[m->hy->cur].counts, W = m->world;
    for (int j = 0; j < W; j++) {
        send[j] = (size_t)(fwd ? k[j] : k[W + j]) * (size_t)m->cfg.emb_dim;
        recv[j] = (size_t)(fwd ? k[W + j] : k[j]) * (size_t)m->cfg.emb_dim;
    }
}

// The current batch's exchange as the step's kernels see it (lib/workloads/dlrm_hybrid.h): exact,
// every size from the host; or fixed, cap vectors a rank pair and the other sizes read on the
// device by kernels launched at capacity (so a CUDA graph replays it for any batch that fits).
typedef struct {
    int64_t cap;              // fixed: vectors a rank pair; 0: exact
    const int32_t *send_rows; // the owned rows looked up for the peers, in send order
    int64_t n_send;           // n_send, or W cap (the pads are -1: zero rows, no update)
    const int32_t *recv_src;  // fixed: where each received vector sits in pack (NULL: in order)
    int64_t n_recv, n_freq, nseg;   // the host counts, or the capacity b*T with
    const int64_t *dn_recv, *dn_freq, *dn_seg; // the device counts (fixed; NULL when exact)
    void *grads;              // where the backward's gradients for send_rows arrive
} hx_view;

static hx_view hybrid_view(const tk_dlrm *m) {
    const tk_dlrm_hybrid *h = m->hy;
    const tk_dlrm_hplan *P = &h->plan[h->cur];
    const int64_t *dc = P->dcounts + 2 * m->world;
    if (P->fixed) {
        int64_t bT = (int64_t)m->b * m->cfg.num_tables;
        return (hx_view){.cap = P->cap, .send_rows = P->send_pad, .n_send = (int64_t)m->world * P->cap,
                         .recv_src = P->recv_src, .n_recv = bT, .n_freq = bT, .nseg = bT, .dn_recv = dc + 1,
                         .dn_freq = dc + 2, .dn_seg = dc + 3, .grads = h->gown};
    }
    return (hx_view){.send_rows = hp(m, TK_HP_SEND_ROWS), .n_send = hp_n(m, 0), .n_recv = hp_n(m, 1),
                     .n_freq = hp_n(m, 2), .nseg = hp_n(m, 3), .grads = m->emb_own};
}

// The all-to-all of the current batch's infrequent vectors (fwd) or their gradients (!fwd), on
// the comm stream: x's cap a pair (fixed) or the plan's counts.
static int hybrid_a2a(tk_dlrm *m, const hx_view *x, int fwd, const void *send, void *recv, tk_err *e) {
    if (x->cap) return tk_all_to_all(m->comm, send, recv, (size_t)x->cap * m->cfg.emb_dim, m->act, TK_STREAM_COMM, e);
    size_t sc[TK_HY_MAX_WORLD], rc[TK_HY_MAX_WORLD];
    hybrid_counts(m, fwd, sc, rc);
    return tk_all_to_allv(m->comm, send, sc, recv, rc, m->act, TK_STREAM_COMM, e);
}

int tk_dlrm_capturable(const tk_dlrm *m) { return !m->hy || (m->hy->cur >= 0 && m->hy->plan[m->hy->cur].fixed); }

int64_t tk_dlrm_capture_key(const tk_dlrm *m) { return m->hy && m->hy->cur >= 0 ? m->hy->plan[m->hy->cur].cap : 0; }

int tk_dlrm_step_queued(tk_dlrm *m, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    if (!h || h->cur < 0) return 0;
    TRY(tk_event_record(m->c, &h->plan[h->cur].done, TK_STREAM_COMPUTE, e));
    h->plan[h->cur].has_done = 1;
    return 0;
}

// The hybrid embedding's forward exchange (lib/workloads/dlrm_hybrid.h): the infrequent uses of
// the owned tables are looked up packed, peer-major, into a2a_send and go by the variable
// all-to-all into hy->pack; meanwhile the frequent uses of this rank's samples are looked up in the
// replica straight into their places in the grouped layout (a2a_recv). forward_rows' join then
// scatters the received vectors to theirs.
static int hybrid_fwd_start(tk_dlrm *m, tk_err *e) {
    tk_ctx *c = m->c;
    tk_dlrm_hybrid *h = m->hy;
    const int D = m->cfg.emb_dim, s = TK_STREAM_COMPUTE;
    const tk_dtype td = m->cfg.table_dtype;
    const hx_view x = hybrid_view(m);
    TRY(tk_rows_copy(c, m->tables, td, x.send_rows, m->a2a_send, m->act, NULL, x.n_send, NULL, D, e));
    TRY(prof_mark(m, "lookup", s, e));
    TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMM, s, e));
    TRY(prof_mark(m, NULL, TK_STREAM_COMM, e));
    TRY(hybrid_a2a(m, &x, 1, m->a2a_send, h->pack, e));
    TRY(prof_mark(m, "a2a_fwd", TK_STREAM_COMM, e));
    TRY(tk_rows_copy(c, h->fr, td, hp(m, TK_HP_FROW), m->a2a_recv, m->act, hp(m, TK_HP_FPOS), x.n_freq, x.dn_freq, D,
                     e));
    return prof_mark(m, "lookup_frequent", s, e);
}

// The forward of bl local rows: dense (bl, num_dense) this rank's samples; cat (n, T) all ranks'.
// hybrid: the training step's forward with the hybrid embedding (the batch's plan; n = B, bl = b).
static int forward_rows(tk_dlrm *m, const int32_t *dense, const int32_t *cat, int n, int bl, int hybrid,
                        float *out, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    tk_range_push("forward");
    if (hybrid) TRY(hybrid_fwd_start(m, e));
    else if (m->comm) TRY(exchange_fwd_start(m, cat, n, bl, e));
    TRY(tk_dense_log1p(m->c, dense, (int64_t)bl * cfg->num_dense, m->x0, e));
    if (cfg->bf16)
        TRY(tk_cast2d(m->c, m->x0, TK_F32, cfg->num_dense, m->x0p, TK_BF16, kpad(cfg->num_dense), bl,
                      cfg->num_dense, e));
    TRY(mlp_forward(m, 0, cfg->nbot, bl, NULL, e));
    TRY(prof_mark(m, "bottom_fwd", TK_STREAM_COMPUTE, e));
    if (m->comm) {
        // Join the all-to-all. The received [src rank i][bl][tm][D] is the interaction's emb as it
        // is: the grouped layout with G = tm tables a group (kernels/interaction.h), table t of
        // sample s at group t / tm (its owner), slot t % tm; no re-layout into (bl, T, D).
        TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e));
        TRY(prof_mark(m, "wait_a2a_fwd", TK_STREAM_COMPUTE, e));
        if (hybrid) { // the received infrequent vectors to their places
            const hx_view x = hybrid_view(m);
            TRY(tk_rows_copy(m->c, m->hy->pack, m->act, x.recv_src, m->a2a_recv, m->act, hp(m, TK_HP_RECV_POS),
                             x.n_recv, x.dn_recv, cfg->emb_dim, e));
            TRY(prof_mark(m, "scatter", TK_STREAM_COMPUTE, e));
        }
    } else {
        TRY(tk_embedding_fwd_act(m->c, m->tables, cfg->table_dtype, m->row_off, cat, bl, cfg->num_tables,
                                 cfg->emb_dim, m->emb, m->act, e));
        TRY(prof_mark(m, "lookup", TK_STREAM_COMPUTE, e));
    }
    // Several ranks: the received buffer, grouped by tm; one rank: emb (tm = T, the plain layout).
    TRY(tk_interaction_fwd_act(m->c, m->act, m->L[cfg->nbot - 1].y, m->comm ? m->a2a_recv : m->emb, bl,
                               cfg->num_tables, m->tm, cfg->emb_dim, cfg->interaction_width, m->inter, e));
    TRY(prof_mark(m, "interaction_fwd", TK_STREAM_COMPUTE, e));
    TRY(mlp_forward(m, cfg->nbot, m->nlayers, bl, out, e));
    TRY(prof_mark(m, "top_fwd", TK_STREAM_COMPUTE, e));
    tk_range_pop();
    return 0;
}

int tk_dlrm_forward(tk_dlrm *m, const int32_t *dense, const int32_t *cat, int n, float *out,
                    tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    if (n > cfg->batch || n < 0) return tk_err_set(e, TK_EINTERNAL, "dlrm: forward of %d > %d samples", n, cfg->batch);
    if (m->comm) {
        // Rank r's share of the n samples: [r*bl, r*bl + nr); the rows up to bl are padding (zero
        // features), computed and dropped, so every rank runs the same shapes in lockstep.
        const int W = m->world, bl = (n + W - 1) / W, nd = cfg->num_dense;
        int nr = n - m->rank * bl;
        nr = nr < 0 ? 0 : nr > bl ? bl : nr;
        if (bl == 0) return 0;
        TRY(tk_memset0(m->c, m->ev_dense, (size_t)bl * nd * 4, TK_STREAM_COMPUTE, e));
        if (nr > 0)
            TRY(tk_memcpy_d2d(m->c, m->ev_dense, dense + (size_t)m->rank * bl * nd, (size_t)nr * nd * 4,
                              TK_STREAM_COMPUTE, e));
        TRY(forward_rows(m, m->ev_dense, cat, n, bl, 0, m->ev_logit, e));
        TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMM, TK_STREAM_COMPUTE, e));
        TRY(tk_all_gather(m->comm, m->ev_logit, m->ev_score, (size_t)bl, TK_F32, TK_STREAM_COMM, e));
        TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e));
        return tk_memcpy_d2d(m->c, out, m->ev_score, (size_t)n * 4, TK_STREAM_COMPUTE, e);
    }
    return forward_rows(m, dense, cat, n, n, 0, out, e);
}

// Backward through layers [l0, l1) (descending), starting from dy = the gradient of the
// pre-activation of layer l1-1. The input gradient of layer l0 goes to dx0 (NULL: not needed).
// Weight and bias gradients are fp32 on every path.
static int mlp_backward(tk_dlrm *m, int l0, int l1, const void *dy, void *dx0, tk_err *e) {
    const int B = m->b; // this rank's rows
    int pp = 0;
    for (int l = l1 - 1; l >= l0; l--) {
        tk_dlrm_layer *L = &m->L[l];
        // dW = dy^T @ x with the bias gradient fused (sum of dy over the batch).
        if (l == 0 && m->cfg.bf16) { // K padded to 16: the gradient of the pad columns is dropped
            int kp = kpad(L->in);
            TRY(gemm(m, L->out, kp, B, 1, 0, dy, m->x0p, m->act, m->dW0p, TK_F32, TK_EPI_BGRADB, NULL, NULL, L->db, e));
            TRY(tk_cast2d(m->c, m->dW0p, TK_F32, kp, L->dW, TK_F32, L->in, L->out, L->in, e));
        } else {
            TRY(gemm(m, L->out, L->in, B, 1, 0, dy, L->x, m->act, L->dW, TK_F32, TK_EPI_BGRADB, NULL, NULL, L->db, e));
        }
        if (l == l0 && !dx0) break;
        void *dx = l == l0 ? dx0 : m->dy[pp];
        // dx = dy @ W, times the ReLU mask of the layer below (its pre-activation gradient).
        int below_relu = l > l0;
        TRY(gemm(m, B, L->in, L->out, 0, 0, dy, wc(m, L->W), m->act, dx, m->act,
                 below_relu ? TK_EPI_DRELU : TK_EPI_NONE, NULL, below_relu ? m->L[l - 1].aux : NULL, NULL, e));
        dy = dx;
        pp ^= 1;
    }
    return 0;
}

// The step over several ranks (see tk_dlrm_create_dist). Stream use: the all-to-alls and the
// all-reduces run on the comm stream, forked from and joined back into the compute stream with
// tk_comm_stream_wait, so the whole step is one capturable sequence.
static int train_step_dist(tk_dlrm *m, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    const int B = cfg->batch, T = cfg->num_tables, D = cfg->emb_dim, b = m->b, tm = m->tm, tn = m->tn;
    const int CS = TK_STREAM_COMPUTE, CM = TK_STREAM_COMM;
    const size_t es = tk_dtype_size(m->act); // demb and the exchange buffers are in act
    tk_ctx *c = m->c;
    TRY(tk_lr_schedule(c, &cfg->lr, m->step, m->lr, e));
    tk_dlrm_hybrid *h = m->hy;
    if (h && h->cur < 0) return tk_err_set(e, TK_EINTERNAL, "dlrm: hybrid step without a planned batch");
    TRY(forward_rows(m, m->in_dense + (size_t)m->rank * b * cfg->num_dense, m->in_cat, B, b, h != NULL, m->logit,
                     e));
    tk_range_push("backward");
    // dlogit = (sigmoid - y) / B: this rank's samples' share of the global mean's gradient.
    TRY(tk_bce_logits_act_n(c, m->act, m->logit, m->in_label + (size_t)m->rank * b, b, B, m->dlogit,
                            m->loss_acc, e));
    TRY(mlp_backward(m, cfg->nbot, m->nlayers, m->dlogit, m->dinter, e));
    TRY(prof_mark(m, "top_bwd", CS, e));
    // The top MLP's gradients are final: all-reduce their span while the rest of the backward runs.
    float *top_g = m->L[cfg->nbot].dW;
    size_t nbot_g = (size_t)(top_g - m->dense_g), ntop_g = m->dense_n - nbot_g;
    TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
    TRY(prof_mark(m, NULL, CM, e));
    TRY(tk_allreduce_sum(m->comm, top_g, top_g, ntop_g, TK_F32, 1.0f, CM, e));
    TRY(prof_mark(m, "allreduce_top", CM, e));
    // emb is the forward's a2a_recv [src i][b][tm][D]; demb goes straight to a2a_send in the same
    // grouped layout, [owner i][b][tm][D], ready for the all-to-all back to the tables' owners.
    TRY(tk_interaction_bwd_act(c, m->act, m->L[cfg->nbot - 1].y, m->a2a_recv, m->dinter, b, T, tm, D,
                               cfg->interaction_width, 1, m->dbot, m->a2a_send, e));
    TRY(prof_mark(m, "interaction_bwd", CS, e));
    if (h) {
        // Infrequent: the gradients laid out as the forward received their vectors go back to the
        // owners (into emb_own, free in this mode, or gown), in their send order. Frequent: summed
        // per replica row over this rank's samples, then over the ranks.
        const hx_view x = hybrid_view(m);
        TRY(tk_rows_copy(c, m->a2a_send, m->act, hp(m, TK_HP_RECV_POS), h->pack, m->act, x.recv_src, x.n_recv,
                         x.dn_recv, D, e));
        TRY(prof_mark(m, "gather", CS, e));
        TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
        TRY(prof_mark(m, NULL, CM, e));
        TRY(hybrid_a2a(m, &x, 0, h->pack, x.grads, e));
        TRY(prof_mark(m, "a2a_bwd", CM, e));
        TRY(tk_memset0(c, h->dfr, (size_t)h->nf * D * 4, CS, e));
        TRY(tk_rows_segsum(c, m->a2a_send, m->act, hp(m, TK_HP_FPOS), hp(m, TK_HP_SEG_OFF), hp(m, TK_HP_SEG_ROW),
                           (int)x.nseg, x.dn_seg, x.n_freq, D, h->dfr, h->ws_seg, e));
        TRY(prof_mark(m, "frequent_sum", CS, e));
        TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
        TRY(prof_mark(m, NULL, CM, e));
        TRY(tk_allreduce_sum(m->comm, h->dfr, h->dfr, (size_t)h->nf * D, TK_F32, 1.0f, CM, e));
        TRY(prof_mark(m, "allreduce_frequent", CM, e));
    } else {
        TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
        TRY(prof_mark(m, NULL, CM, e));
        TRY(tk_all_to_all(m->comm, m->a2a_send, m->a2a_recv, (size_t)b * tm * D, m->act, CM, e));
        TRY(prof_mark(m, "a2a_bwd", CM, e));
    }
    TRY(mlp_backward(m, 0, cfg->nbot, m->dbot, NULL, e));
    TRY(prof_mark(m, "bottom_bwd", CS, e));
    // Join (the top all-reduce and the all-to-all), then the bottom span's all-reduce overlaps
    // the sparse update.
    TRY(tk_comm_stream_wait(m->comm, CS, CM, e));
    TRY(prof_mark(m, "wait_comm", CS, e));
    TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
    TRY(prof_mark(m, NULL, CM, e));
    TRY(tk_allreduce_sum(m->comm, m->dense_g, m->dense_g, nbot_g, TK_F32, 1.0f, CM, e));
    TRY(prof_mark(m, "allreduce_bottom", CM, e));
    if (h) {
        // The owned tables' infrequent rows, one list over the concatenated tables; the replica
        // with the all-reduced sums (every rank alike); the owners' frequent rows back to the tables.
        const tk_dtype td = cfg->table_dtype;
        const hx_view x = hybrid_view(m);
        if (x.n_send > 0) // fixed: the pads (-1) are skipped
            TRY(tk_embedding_bwd_sgd_act(c, m->tables, td, h->own_off, x.send_rows, (int)x.n_send, 1, D, x.grads,
                                         m->act, m->lr, h->ws_own, e));
        TRY(tk_embedding_dense_sgd(c, h->fr, td, h->nf * D, h->dfr, m->lr, e));
        TRY(tk_rows_copy(c, h->fr, td, h->own_f, m->tables, td, h->own_rows, h->nf_own, NULL, D, e));
    } else if (tn > 0) { // a2a_recv is (B, tm, D): the gradients of the owned tables' vectors, all B samples
        const void *g = m->a2a_recv;
        if (tn < tm) {
            TRY(tk_memcpy2d(c, m->emb_own, (size_t)tn * D * es, m->a2a_recv, (size_t)tm * D * es, (size_t)tn * D * es,
                            (size_t)B, CS, e));
            g = m->emb_own;
        }
        TRY(tk_embedding_bwd_sgd_act(c, m->tables, cfg->table_dtype, m->row_off, m->cat_own, B, tn, D, g, m->act,
                                     m->lr, m->emb_ws, e));
    }
    TRY(prof_mark(m, "embedding_bwd_sgd", CS, e));
    TRY(tk_comm_stream_wait(m->comm, CS, CM, e));
    TRY(prof_mark(m, "wait_allreduce_bottom", CS, e));
    tk_range_pop();
    tk_range_push("sgd");
    TRY(tk_sgd_update(c, m->dense_w, m->dense_g, m->dense_n, m->lr, cfg->bf16 ? m->wcopy : NULL,
                      cfg->bf16 ? TK_BF16 : TK_F32, e));
    if (cfg->bf16) TRY(cast_w0p(m, e));
    TRY(prof_mark(m, "dense_sgd", CS, e));
    tk_range_pop();
    // the plan's device arrays are free for the batch after next (a captured step: after its launch)
    if (!c->capturing) TRY(tk_dlrm_step_queued(m, e));
    return 0;
}

static int train_step_one(tk_dlrm *m, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    const int B = cfg->batch, T = cfg->num_tables, D = cfg->emb_dim;
    TRY(tk_lr_schedule(m->c, &cfg->lr, m->step, m->lr, e));
    TRY(forward_rows(m, m->in_dense, m->in_cat, B, B, 0, m->logit, e));
    tk_range_push("backward");
    TRY(tk_bce_logits_act(m->c, m->act, m->logit, m->in_label, B, m->dlogit, m->loss_acc, e));
    TRY(mlp_backward(m, cfg->nbot, m->nlayers, m->dlogit, m->dinter, e));
    TRY(prof_mark(m, "top_bwd", TK_STREAM_COMPUTE, e));
    TRY(tk_interaction_bwd_act(m->c, m->act, m->L[cfg->nbot - 1].y, m->emb, m->dinter, B, T, T, D,
                               cfg->interaction_width, 1, m->dbot, m->demb, e));
    TRY(prof_mark(m, "interaction_bwd", TK_STREAM_COMPUTE, e));
    TRY(tk_embedding_bwd_sgd_act(m->c, m->tables, cfg->table_dtype, m->row_off, m->in_cat, B, T, D,
                                 m->demb, m->act, m->lr, m->emb_ws, e));
    TRY(prof_mark(m, "embedding_bwd_sgd", TK_STREAM_COMPUTE, e));
    TRY(mlp_backward(m, 0, cfg->nbot, m->dbot, NULL, e));
    TRY(prof_mark(m, "bottom_bwd", TK_STREAM_COMPUTE, e));
    tk_range_pop();
    tk_range_push("sgd");
    // The bf16 path: the update also writes the bf16 copy; layer 0's padded copy is re-cast.
    TRY(tk_sgd_update(m->c, m->dense_w, m->dense_g, m->dense_n, m->lr, m->cfg.bf16 ? m->wcopy : NULL,
                      m->cfg.bf16 ? TK_BF16 : TK_F32, e));
    if (cfg->bf16) TRY(cast_w0p(m, e));
    TRY(prof_mark(m, "dense_sgd", TK_STREAM_COMPUTE, e));
    tk_range_pop();
    return 0;
}

int tk_dlrm_train_step(tk_dlrm *m, tk_err *e) {
    prof_step(m, 1);
    int rc = prof_mark(m, NULL, TK_STREAM_COMPUTE, e);
    if (!rc) rc = m->comm ? train_step_dist(m, e) : train_step_one(m, e);
    prof_step(m, 0);
    return rc;
}

int tk_dlrm_sync(tk_dlrm *m, tk_err *e) {
    if (m->comm) TRY(tk_comm_wait(m->comm, TK_STREAM_COMPUTE, m->comm_timeout, e));
    return tk_ctx_sync(m->c, e);
}

int tk_dlrm_sync_lagged(tk_dlrm *m, tk_err *e) {
    return m->comm ? tk_comm_wait_lagged(m->comm, TK_STREAM_COMPUTE, m->comm_timeout, e) : 0;
}

int tk_dlrm_read_loss(tk_dlrm *m, double *mean_loss, int reset, tk_err *e) {
    double acc[2];
    if (m->comm) {
        // Each rank accumulated (its samples' loss sum) / B per step: the ranks' accumulators add
        // up to the global mean's. Gathered as bytes (no fp64 sum in the collectives) and summed
        // here in rank order, so every rank logs the same value.
        double all[2 * TK_DLRM_MAX_WORLD];
        if (m->world > TK_DLRM_MAX_WORLD)
            return tk_err_set(e, TK_EINTERNAL, "dlrm: world size %d > %d", m->world, TK_DLRM_MAX_WORLD);
        TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMM, TK_STREAM_COMPUTE, e));
        TRY(tk_all_gather(m->comm, m->loss_acc, m->acc_all, 16, TK_U8, TK_STREAM_COMM, e));
        TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e));
        TRY(tk_dlrm_sync(m, e));
        TRY(tk_memcpy_d2h(m->c, all, m->acc_all, (size_t)m->world * 16, TK_STREAM_COMPUTE, e));
        acc[0] = 0;
        acc[1] = all[1];
        for (int i = 0; i < m->world; i++) acc[0] += all[2 * i];
    } else {
        TRY(tk_memcpy_d2h(m->c, acc, m->loss_acc, sizeof acc, TK_STREAM_COMPUTE, e));
    }
    TRY(tk_ctx_sync(m->c, e));
    *mean_loss = acc[1] > 0 ? acc[0] / acc[1] : NAN;
    if (reset) TRY(tk_memset0(m->c, m->loss_acc, sizeof acc, TK_STREAM_COMPUTE, e));
    return 0;
}

int tk_dlrm_read_step(tk_dlrm *m, int64_t *step, tk_err *e) {
    TRY(tk_dlrm_sync(m, e));
    TRY(tk_memcpy_d2h(m->c, step, m->step, 8, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(m->c, e);
}

int tk_dlrm_write_step(tk_dlrm *m, int64_t step, tk_err *e) {
    TRY(tk_memcpy_h2d(m->c, m->step, &step, 8, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(m->c, e);
}

// ---- checkpoints ----

typedef struct {
    tk_st_tensor t;
    const void *src;   // data
    int dev;           // src is in the backend's memory (staged through the host)
    int owner;         // the rank holding the data (several ranks; src is NULL on the others)
} ck_entry;

#define MAX_ENTRIES (4 * TK_DLRM_MAX_LAYERS + TK_DLRM_MAX_TABLES + 16)

static void set2(tk_st_tensor *t, const char *name, tk_dtype dt, int ndim, int64_t d0, int64_t d1) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->dtype = dt;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
}

// The model's parameter tensors in checkpoint order (data pointers into params): the dense ones
// and this rank's tables (all tables when all = 1, with NULL data for the other ranks' ones).
static int entries(const tk_dlrm *m, ck_entry *ent, int all) {
    int n = 0;
    char name[128];
    for (int l = 0; l < m->nlayers; l++) {
        layer_name(m, l, "weight", name, sizeof name);
        set2(&ent[n].t, name, TK_F32, 2, m->L[l].out, m->L[l].in);
        ent[n].src = m->L[l].W;
        ent[n].owner = 0;
        ent[n++].dev = 1;
        layer_name(m, l, "bias", name, sizeof name);
        set2(&ent[n].t, name, TK_F32, 1, m->L[l].out, 0);
        ent[n].src = m->L[l].b;
        ent[n].owner = 0;
        ent[n++].dev = 1;
    }
    size_t esz = tk_dtype_size(m->cfg.table_dtype);
    for (int t = 0; t < m->cfg.num_tables; t++) {
        int lt = t - m->t0, mine = lt >= 0 && lt < m->tn;
        if (!mine && !all) continue;
        snprintf(name, sizeof name, "emb.%d.weight", t);
        set2(&ent[n].t, name, m->cfg.table_dtype, 2, m->cfg.table_rows[t], m->cfg.emb_dim);
        ent[n].src = mine ? (const char *)m->tables + (size_t)m->row_off_host[lt] * m->cfg.emb_dim * esz : NULL;
        ent[n].owner = t / m->tm;
        ent[n++].dev = 1;
    }
    return n;
}

static int param_entries(const tk_dlrm *m, ck_entry *ent) { return entries(m, ent, 0); }

static int write_entries(tk_dlrm *m, const char *path, const ck_entry *ent, int n,
                         const json_t *meta, tk_err *e) {
    tk_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    char *stage = malloc(STAGE_BYTES);
    if (!stage || !t) {
        free(t);
        free(stage);
        return tk_err_set(e, TK_EIO, "out of host memory");
    }
    for (int i = 0; i < n; i++) t[i] = ent[i].t;
    tk_st_writer *w = NULL;
    int rc = tk_st_writer_open(&w, path, t, n, meta, e);
    free(t);
    for (int i = 0; !rc && i < n; i++) {
        uint64_t nb = tk_st_nbytes(&ent[i].t);
        for (uint64_t off = 0; !rc && off < nb; off += STAGE_BYTES) {
            size_t k = nb - off < STAGE_BYTES ? (size_t)(nb - off) : STAGE_BYTES;
            const char *src = (const char *)ent[i].src + off;
            if (ent[i].dev) {
                rc = tk_memcpy_d2h(m->c, stage, src, k, TK_STREAM_COMPUTE, e);
                if (!rc) rc = tk_ctx_sync(m->c, e);
                src = stage;
            }
            if (!rc) rc = tk_st_writer_put(w, src, k, e);
        }
    }
    free(stage);
    if (rc) {
        if (w) tk_st_writer_abort(w);
        return rc;
    }
    return tk_st_writer_commit(w, e);
}

#define CK_CHUNK ((size_t)4 << 20) // bytes of a table a rank sends to rank 0 at a time

// Several ranks: rank 0 writes; a table of rank s != 0 reaches it in chunks of CK_CHUNK bytes
// through all-gathers (every rank takes part, only block s is used: the collectives have no
// point-to-point send), so the memory needed is (W + 1) chunks whatever the table sizes. A local
// I/O error on rank 0 does not stop the collective sequence (the peers would be left waiting):
// the ranks agree on the outcome at the end.
static int save_dist(tk_dlrm *m, const char *path, const json_t *meta, tk_err *e) {
    tk_ctx *c = m->c;
    const int W = m->world, r = m->rank, CS = TK_STREAM_COMPUTE;
    ck_entry ent[MAX_ENTRIES];
    int n = entries(m, ent, 1);
    tk_err le;
    tk_err_clear(&le);
    int lrc = 0; // a local failure (rank 0's file), reported after the agreement
    char *stage = malloc(CK_CHUNK);
    tk_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    if (!stage || !t) lrc = tk_err_set(&le, TK_EIO, "out of host memory");
    char *dbuf = NULL;
    int rc = tk_malloc(c, (void **)&dbuf, CK_CHUNK * (size_t)(W + 1), e);
    if (rc) {
        free(stage);
        free(t);
        return rc;
    }
    char *send = dbuf, *recv = dbuf + CK_CHUNK;
    tk_st_writer *w = NULL;
    if (r == 0 && !lrc) {
        for (int i = 0; i < n; i++) t[i] = ent[i].t;
        lrc = tk_st_writer_open(&w, path, t, n, meta, &le);
    }
    for (int i = 0; !rc && i < n; i++) {
        uint64_t nb = tk_st_nbytes(&ent[i].t);
        int s = ent[i].owner;
        if (s == 0 && r != 0) continue; // rank 0 has it: nothing to exchange
        for (uint64_t off = 0; !rc && off < nb; off += CK_CHUNK) {
            size_t k = nb - off < CK_CHUNK ? (size_t)(nb - off) : CK_CHUNK;
            const char *src = (const char *)ent[i].src + off;
            if (s != 0) {
                if (r == s) rc = tk_memcpy_d2d(c, send, src, k, CS, e);
                if (!rc) rc = tk_all_gather(m->comm, send, recv, k, TK_U8, CS, e);
                src = recv + (size_t)s * k;
            }
            if (!rc && r == 0 && !lrc) {
                rc = tk_dlrm_sync(m, e);
                if (!rc) lrc = tk_memcpy_d2h(c, stage, src, k, CS, &le);
                if (!lrc) lrc = tk_ctx_sync(c, &le);
                if (!lrc) lrc = tk_st_writer_put(w, stage, k, &le);
            }
        }
    }
    if (w) {
        if (rc || lrc) tk_st_writer_abort(w);
        else lrc = tk_st_writer_commit(w, &le);
    }
    // Agree on the outcome: every rank returns an error when one failed.
    int64_t all[TK_DLRM_MAX_WORLD];
    if (!rc) rc = tk_dlrm_gather_word(m, lrc ? 1 : 0, all, 0, e);
    tk_free(c, dbuf);
    free(stage);
    free(t);
    if (rc) return rc;
    if (lrc) {
        *e = le;
        return lrc;
    }
    for (int i = 0; i < W; i++)
        if (all[i]) return tk_err_set(e, TK_EIO, "rank %d failed to write the checkpoint %s", i, path);
    return 0;
}

int tk_dlrm_gather_word(tk_dlrm *m, int64_t mine, int64_t *all, double timeout_s, tk_err *e) {
    if (m->world == 1) {
        all[0] = mine;
        return 0;
    }
    if (m->world > TK_DLRM_MAX_WORLD)
        return tk_err_set(e, TK_EINTERNAL, "dlrm: world size %d > %d", m->world, TK_DLRM_MAX_WORLD);
    const int CS = TK_STREAM_COMPUTE;
    TRY(tk_memcpy_h2d(m->c, m->word_all, &mine, 8, CS, e));
    TRY(tk_all_gather(m->comm, m->word_all, m->word_all + 1, 8, TK_U8, CS, e));
    TRY(tk_comm_wait(m->comm, CS, timeout_s > 0 ? timeout_s : m->comm_timeout, e));
    TRY(tk_memcpy_d2h(m->c, all, m->word_all + 1, (size_t)m->world * 8, CS, e));
    return tk_ctx_sync(m->c, e);
}

int tk_dlrm_save(tk_dlrm *m, const char *path, const json_t *meta, tk_err *e) {
    if (m->world > 1) return save_dist(m, path, meta, e);
    ck_entry ent[MAX_ENTRIES];
    int n = param_entries(m, ent);
    return write_entries(m, path, ent, n, meta, e);
}

static void shape_str(const tk_st_tensor *t, char *buf, size_t n) {
    size_t o = (size_t)snprintf(buf, n, "%s [", tk_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && o < n; d++)
        o += (size_t)snprintf(buf + o, n - o, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (o < n) snprintf(buf + o, n - o, "]");
}

int tk_dlrm_load(tk_dlrm *m, const char *path, json_t **meta, tk_err *e) {
    if (meta) *meta = NULL;
    tk_st_file *f;
    TRY(tk_st_open(&f, path, e));
    ck_entry ent[MAX_ENTRIES];
    int n = param_entries(m, ent), rc = 0;
    char *stage = malloc(STAGE_BYTES);
    if (!stage) rc = tk_err_set(e, TK_EIO, "out of host memory");
    for (int i = 0; !rc && i < n; i++) {
        const tk_st_tensor *t = tk_st_find(f, ent[i].t.name);
        char want[96], got[96];
        shape_str(&ent[i].t, want, sizeof want);
        if (!t) {
            rc = tk_err_set(e, TK_EDATA, "%s: tensor '%s' (%s) is missing", path, ent[i].t.name, want);
            break;
        }
        shape_str(t, got, sizeof got);
        if (strcmp(want, got) != 0) {
            rc = tk_err_set(e, TK_EDATA, "%s: tensor '%s' is %s, the model has %s", path, t->name, got, want);
            tk_err_hint(e, "the checkpoint was written with another configuration");
            break;
        }
        uint64_t nb = tk_st_nbytes(t);
        for (uint64_t off = 0; !rc && off < nb; off += STAGE_BYTES) {
            size_t k = nb - off < STAGE_BYTES ? (size_t)(nb - off) : STAGE_BYTES;
            rc = tk_st_read(f, t, off, stage, k, e);
            if (!rc) rc = tk_memcpy_h2d(m->c, (char *)ent[i].src + off, stage, k, TK_STREAM_COMPUTE, e);
            if (!rc) rc = tk_ctx_sync(m->c, e);
        }
    }
    free(stage);
    if (!rc) rc = refresh_copies(m, e);
    if (!rc) rc = tk_dlrm_hybrid_refresh(m, e); // collective; a rank that failed above is missed within the timeout
    if (!rc && meta) *meta = json_incref(f->meta);
    tk_st_close(f);
    return rc;
}

int tk_dlrm_dump_step(tk_dlrm *m, const char *path, tk_err *e) {
    if (m->comm) return tk_err_set(e, TK_EUSAGE, "dlrm: the step dump is not supported with the exchange step yet");
    const tk_dlrm_config *cfg = &m->cfg;
    const int B = cfg->batch, T = cfg->num_tables, D = cfg->emb_dim;
    ck_entry ent[MAX_ENTRIES * 2];
    int n = param_entries(m, ent), np = n;
    // Snapshot the weights before the step (the step updates them in place).
    size_t pbytes = (size_t)((char *)m->tables - (char *)m->dense_w) +
                    (size_t)m->rows_total * D * tk_dtype_size(cfg->table_dtype);
    char *snap = malloc(pbytes);
    float *loss = malloc(4);
    if (!snap || !loss) {
        free(snap);
        free(loss);
        return tk_err_set(e, TK_EIO, "out of host memory");
    }
    int rc = tk_memcpy_d2h(m->c, snap, m->dense_w, pbytes, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    for (int i = 0; i < np; i++) {
        ent[i].src = snap + ((const char *)ent[i].src - (const char *)m->dense_w);
        ent[i].dev = 0;
    }
    set2(&ent[n].t, "batch.label", TK_U8, 1, B, 0), ent[n].src = m->in_label, ent[n++].dev = 1;
    set2(&ent[n].t, "batch.dense", TK_I32, 2, B, cfg->num_dense), ent[n].src = m->in_dense, ent[n++].dev = 1;
    set2(&ent[n].t, "batch.cat", TK_I32, 2, B, T), ent[n].src = m->in_cat, ent[n++].dev = 1;
    double acc[2] = {0, 0};
    if (!rc) rc = tk_memset0(m->c, m->loss_acc, 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_dlrm_train_step(m, e);
    if (!rc) rc = tk_memcpy_d2h(m->c, acc, m->loss_acc, 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    *loss = (float)acc[0];
    set2(&ent[n].t, "loss", TK_F32, 1, 1, 0), ent[n].src = loss, ent[n++].dev = 0;
    char name[128];
    for (int l = 0; l < m->nlayers; l++) {
        char pn[96];
        layer_name(m, l, "weight", pn, sizeof pn);
        snprintf(name, sizeof name, "grad.%s", pn);
        set2(&ent[n].t, name, TK_F32, 2, m->L[l].out, m->L[l].in), ent[n].src = m->L[l].dW, ent[n++].dev = 1;
        layer_name(m, l, "bias", pn, sizeof pn);
        snprintf(name, sizeof name, "grad.%s", pn);
        set2(&ent[n].t, name, TK_F32, 1, m->L[l].out, 0), ent[n].src = m->L[l].db, ent[n++].dev = 1;
    }
    ent[n].t = (tk_st_tensor){.name = "grad.emb_out", .dtype = TK_F32, .ndim = 3, .shape = {B, T, D}};
    ent[n].src = m->demb, ent[n].dev = 1;
    // The bf16 path keeps demb in bf16: the dump's format is F32, so widen it (exactly) on the host.
    float *demb32 = NULL;
    if (!rc && m->act == TK_BF16) {
        size_t ne = (size_t)B * T * D;
        demb32 = malloc(ne * sizeof(float) + 1);
        if (!demb32) rc = tk_err_set(e, TK_EIO, "out of host memory");
        if (!rc) rc = tk_memcpy_d2h(m->c, demb32, m->demb, ne * 2, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_ctx_sync(m->c, e);
        // In place from the back: element i (2 bytes at 2i) becomes 4 bytes at 4i >= 2i.
        for (size_t i = ne; !rc && i-- > 0;) {
            uint16_t h;
            memcpy(&h, (const char *)demb32 + 2 * i, 2);
            demb32[i] = tk_bf16_to_f32(h);
        }
        ent[n].src = demb32, ent[n].dev = 0;
    }
    n++;
    json_t *meta = json_pack("{s:s, s:s}", "format", "trainkit-step-dump-1", "workload", "dlrm");
    if (!rc) rc = write_entries(m, path, ent, n, meta, e);
    json_decref(meta);
    free(demb32);
    free(snap);
    free(loss);
    return rc;
}
