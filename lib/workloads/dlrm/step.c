// DLRM's training step and forward (step.h): the MLPs, the interaction, the embedding exchange
// of several ranks and of the hybrid embedding.
#include <string.h>

#include "bce.h"
#include "cast2d.h"
#include "dense_log1p.h"
#include "embedding.h"
#include "gemm.h"
#include "interaction.h"
#include "rows.h"
#include "workloads/dlrm/hybrid.h"
#include "workloads/dlrm/model.h"
#include "workloads/dlrm/profile.h"
#include "workloads/dlrm/step.h"

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
static const void *wc(const tk_dlrm *m, const float *p) { return tk_params_copy_of(m->env.params, p); }

static int mlp_forward(tk_dlrm *m, int l0, int l1, int n, float *last_out, tk_err *e) {
    for (int l = l0; l < l1; l++) {
        tk_dlrm_layer *L = &m->L[l];
        int last = l == m->nlayers - 1;
        // On the bf16 path the logits are bf16 in L->y; an fp32 out (eval scores) gets a copy.
        float *y = last && last_out && (!m->cfg.bf16 || last_out == m->logit) ? last_out : L->y;
        const void *x = L->x, *W = wc(m, L->W);
        int K = L->in;
        if (l == 0 && m->cfg.bf16) x = m->x0p, W = m->W0p, K = tk_dlrm_kpad(L->in);
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
    TRY(tk_dlrm_prof_mark(m, "lookup", s, e));
    TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMM, s, e));
    TRY(tk_dlrm_prof_mark(m, NULL, TK_STREAM_COMM, e));
    TRY(tk_all_to_all(m->comm, m->a2a_send, m->a2a_recv, (size_t)bl * tm * D, m->act, TK_STREAM_COMM, e));
    return tk_dlrm_prof_mark(m, "a2a_fwd", TK_STREAM_COMM, e);
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

// The current batch's exchange as the step's kernels see it (hybrid.h): exact,
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

int64_t tk_dlrm_graph_key(void *model) {
    const tk_dlrm_hybrid *h = ((const tk_dlrm *)model)->hy;
    if (!h) return 0;
    return h->cur >= 0 && h->plan[h->cur].fixed ? h->plan[h->cur].cap : -1;
}

int tk_dlrm_graph_per_slot(const void *model) { return ((const tk_dlrm *)model)->hy != NULL; }

int tk_dlrm_step_queued(void *model, tk_err *e) {
    tk_dlrm *m = model;
    tk_dlrm_hybrid *h = m->hy;
    if (!h || h->cur < 0) return 0;
    TRY(tk_event_record(m->c, &h->plan[h->cur].done, TK_STREAM_COMPUTE, e));
    h->plan[h->cur].has_done = 1;
    h->plan[h->cur].state = TK_HPS_FREE; // (the next batch staged there plans once `done`)
    return 0;
}

// The hybrid embedding's forward exchange (hybrid.h): the infrequent uses of
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
    TRY(tk_dlrm_prof_mark(m, "lookup", s, e));
    TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMM, s, e));
    TRY(tk_dlrm_prof_mark(m, NULL, TK_STREAM_COMM, e));
    TRY(hybrid_a2a(m, &x, 1, m->a2a_send, h->pack, e));
    TRY(tk_dlrm_prof_mark(m, "a2a_fwd", TK_STREAM_COMM, e));
    TRY(tk_rows_copy(c, h->fr, td, hp(m, TK_HP_FROW), m->a2a_recv, m->act, hp(m, TK_HP_FPOS), x.n_freq, x.dn_freq, D,
                     e));
    return tk_dlrm_prof_mark(m, "lookup_frequent", s, e);
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
        TRY(tk_cast2d(m->c, m->x0, TK_F32, cfg->num_dense, m->x0p, TK_BF16, tk_dlrm_kpad(cfg->num_dense), bl,
                      cfg->num_dense, e));
    TRY(mlp_forward(m, 0, cfg->nbot, bl, NULL, e));
    TRY(tk_dlrm_prof_mark(m, "bottom_fwd", TK_STREAM_COMPUTE, e));
    if (m->comm) {
        // Join the all-to-all. The received [src rank i][bl][tm][D] is the interaction's emb as it
        // is: the grouped layout with G = tm tables a group (kernels/interaction.h), table t of
        // sample s at group t / tm (its owner), slot t % tm; no re-layout into (bl, T, D).
        TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e));
        TRY(tk_dlrm_prof_mark(m, "wait_a2a_fwd", TK_STREAM_COMPUTE, e));
        if (hybrid) { // the received infrequent vectors to their places
            const hx_view x = hybrid_view(m);
            TRY(tk_rows_copy(m->c, m->hy->pack, m->act, x.recv_src, m->a2a_recv, m->act, hp(m, TK_HP_RECV_POS),
                             x.n_recv, x.dn_recv, cfg->emb_dim, e));
            TRY(tk_dlrm_prof_mark(m, "scatter", TK_STREAM_COMPUTE, e));
        }
    } else {
        TRY(tk_embedding_fwd_act(m->c, m->tables, cfg->table_dtype, m->row_off, cat, bl, cfg->num_tables,
                                 cfg->emb_dim, m->emb, m->act, e));
        TRY(tk_dlrm_prof_mark(m, "lookup", TK_STREAM_COMPUTE, e));
    }
    // Several ranks: the received buffer, grouped by tm; one rank: emb (tm = T, the plain layout).
    TRY(tk_interaction_fwd_act(m->c, m->act, m->L[cfg->nbot - 1].y, m->comm ? m->a2a_recv : m->emb, bl,
                               cfg->num_tables, m->tm, cfg->emb_dim, cfg->interaction_width, m->inter, e));
    TRY(tk_dlrm_prof_mark(m, "interaction_fwd", TK_STREAM_COMPUTE, e));
    TRY(mlp_forward(m, cfg->nbot, m->nlayers, bl, out, e));
    TRY(tk_dlrm_prof_mark(m, "top_fwd", TK_STREAM_COMPUTE, e));
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
            int kp = tk_dlrm_kpad(L->in);
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

// The step over several ranks (step.h). Stream use: the all-to-alls and the
// all-reduces run on the comm stream, forked from and joined back into the compute stream with
// tk_comm_stream_wait, so the whole step is one capturable sequence.
static int train_step_dist(tk_dlrm *m, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    const int B = cfg->batch, T = cfg->num_tables, D = cfg->emb_dim, b = m->b, tm = m->tm, tn = m->tn;
    const int CS = TK_STREAM_COMPUTE, CM = TK_STREAM_COMM;
    const size_t es = tk_dtype_size(m->act); // demb and the exchange buffers are in act
    tk_ctx *c = m->c;
    tk_dlrm_hybrid *h = m->hy;
    if (h && h->cur < 0) return tk_err_set(e, TK_EINTERNAL, "dlrm: hybrid step without a planned batch");
    if (!h && m->world > 1) {
        // The plain exchange looks the owned tables up for all B samples: the ranks' ids, gathered
        // (the hybrid embedding's plan has them already: tk_dlrm_hybrid_stage).
        TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
        TRY(tk_dlrm_prof_mark(m, NULL, CM, e));
        TRY(tk_all_gather(m->comm, m->in_cat, m->cat_all, (size_t)b * T, TK_I32, CM, e));
        TRY(tk_dlrm_prof_mark(m, "all_gather_ids", CM, e));
        TRY(tk_comm_stream_wait(m->comm, CS, CM, e));
        TRY(tk_dlrm_prof_mark(m, "wait_ids", CS, e));
    }
    TRY(forward_rows(m, m->in_dense, m->cat_all, B, b, h != NULL, m->logit, e)); // (in_dense: this rank's b)
    tk_range_push("backward");
    // dlogit = (sigmoid - y) / B: this rank's samples' share of the global mean's gradient.
    TRY(tk_bce_logits_act_n(c, m->act, m->logit, m->in_label, b, B, m->dlogit, m->env.loss_acc, e));
    TRY(mlp_backward(m, cfg->nbot, m->nlayers, m->dlogit, m->dinter, e));
    TRY(tk_dlrm_prof_mark(m, "top_bwd", CS, e));
    // The top MLP's gradients are final: all-reduce their span while the rest of the backward runs.
    float *top_g = m->L[cfg->nbot].dW;
    size_t nbot_g = (size_t)(top_g - m->dense_g), ntop_g = m->dense_n - nbot_g;
    TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
    TRY(tk_dlrm_prof_mark(m, NULL, CM, e));
    TRY(tk_allreduce_sum(m->comm, top_g, top_g, ntop_g, TK_F32, 1.0f, CM, e));
    TRY(tk_dlrm_prof_mark(m, "allreduce_top", CM, e));
    // emb is the forward's a2a_recv [src i][b][tm][D]; demb goes straight to a2a_send in the same
    // grouped layout, [owner i][b][tm][D], ready for the all-to-all back to the tables' owners.
    TRY(tk_interaction_bwd_act(c, m->act, m->L[cfg->nbot - 1].y, m->a2a_recv, m->dinter, b, T, tm, D,
                               cfg->interaction_width, 1, m->dbot, m->a2a_send, e));
    TRY(tk_dlrm_prof_mark(m, "interaction_bwd", CS, e));
    if (h) {
        // Infrequent: the gradients laid out as the forward received their vectors go back to the
        // owners (into emb_own, free in this mode, or gown), in their send order. Frequent: summed
        // per replica row over this rank's samples, then over the ranks.
        const hx_view x = hybrid_view(m);
        TRY(tk_rows_copy(c, m->a2a_send, m->act, hp(m, TK_HP_RECV_POS), h->pack, m->act, x.recv_src, x.n_recv,
                         x.dn_recv, D, e));
        TRY(tk_dlrm_prof_mark(m, "gather", CS, e));
        TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
        TRY(tk_dlrm_prof_mark(m, NULL, CM, e));
        TRY(hybrid_a2a(m, &x, 0, h->pack, x.grads, e));
        TRY(tk_dlrm_prof_mark(m, "a2a_bwd", CM, e));
        TRY(tk_memset0(c, h->dfr, (size_t)h->nf * D * 4, CS, e));
        TRY(tk_rows_segsum(c, m->a2a_send, m->act, hp(m, TK_HP_FPOS), hp(m, TK_HP_SEG_OFF), hp(m, TK_HP_SEG_ROW),
                           (int)x.nseg, x.dn_seg, x.n_freq, D, h->dfr, h->ws_seg, e));
        TRY(tk_dlrm_prof_mark(m, "frequent_sum", CS, e));
        TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
        TRY(tk_dlrm_prof_mark(m, NULL, CM, e));
        TRY(tk_allreduce_sum(m->comm, h->dfr, h->dfr, (size_t)h->nf * D, TK_F32, 1.0f, CM, e));
        TRY(tk_dlrm_prof_mark(m, "allreduce_frequent", CM, e));
    } else {
        TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
        TRY(tk_dlrm_prof_mark(m, NULL, CM, e));
        TRY(tk_all_to_all(m->comm, m->a2a_send, m->a2a_recv, (size_t)b * tm * D, m->act, CM, e));
        TRY(tk_dlrm_prof_mark(m, "a2a_bwd", CM, e));
    }
    TRY(mlp_backward(m, 0, cfg->nbot, m->dbot, NULL, e));
    TRY(tk_dlrm_prof_mark(m, "bottom_bwd", CS, e));
    // Join (the top all-reduce and the all-to-all), then the bottom span's all-reduce overlaps
    // the sparse update.
    TRY(tk_comm_stream_wait(m->comm, CS, CM, e));
    TRY(tk_dlrm_prof_mark(m, "wait_comm", CS, e));
    TRY(tk_comm_stream_wait(m->comm, CM, CS, e));
    TRY(tk_dlrm_prof_mark(m, NULL, CM, e));
    TRY(tk_allreduce_sum(m->comm, m->dense_g, m->dense_g, nbot_g, TK_F32, 1.0f, CM, e));
    TRY(tk_dlrm_prof_mark(m, "allreduce_bottom", CM, e));
    if (h) {
        // The owned tables' infrequent rows, one list over the concatenated tables; the replica
        // with the all-reduced sums (every rank alike); the owners' frequent rows back to the tables.
        const tk_dtype td = cfg->table_dtype;
        const hx_view x = hybrid_view(m);
        if (x.n_send > 0) // fixed: the pads (-1) are skipped
            TRY(tk_embedding_bwd_sgd_act(c, m->tables, td, h->own_off, x.send_rows, (int)x.n_send, 1, D, x.grads,
                                         m->act, m->env.lr, h->ws_own, e));
        TRY(tk_embedding_dense_sgd(c, h->fr, td, h->nf * D, h->dfr, m->env.lr, e));
        TRY(tk_rows_copy(c, h->fr, td, h->own_f, m->tables, td, h->own_rows, h->nf_own, NULL, D, e));
    } else if (tn > 0) { // a2a_recv is (B, tm, D): the gradients of the owned tables' vectors, all B samples
        const void *g = m->a2a_recv;
        if (tn < tm) {
            TRY(tk_memcpy2d(c, m->emb_own, (size_t)tn * D * es, m->a2a_recv, (size_t)tm * D * es, (size_t)tn * D * es,
                            (size_t)B, CS, e));
            g = m->emb_own;
        }
        TRY(tk_embedding_bwd_sgd_act(c, m->tables, cfg->table_dtype, m->row_off, m->cat_own, B, tn, D, g, m->act,
                                     m->env.lr, m->emb_ws, e));
    }
    TRY(tk_dlrm_prof_mark(m, "embedding_bwd_sgd", CS, e));
    TRY(tk_comm_stream_wait(m->comm, CS, CM, e));
    TRY(tk_dlrm_prof_mark(m, "wait_allreduce_bottom", CS, e));
    tk_range_pop();
    // the plan's device arrays are free for the batch after next (a captured step: after its launch)
    if (!c->capturing) TRY(tk_dlrm_step_queued(m, e));
    return 0;
}

static int train_step_one(tk_dlrm *m, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    const int B = cfg->batch, T = cfg->num_tables, D = cfg->emb_dim;
    TRY(forward_rows(m, m->in_dense, m->in_cat, B, B, 0, m->logit, e));
    tk_range_push("backward");
    TRY(tk_bce_logits_act(m->c, m->act, m->logit, m->in_label, B, m->dlogit, m->env.loss_acc, e));
    TRY(mlp_backward(m, cfg->nbot, m->nlayers, m->dlogit, m->dinter, e));
    TRY(tk_dlrm_prof_mark(m, "top_bwd", TK_STREAM_COMPUTE, e));
    TRY(tk_interaction_bwd_act(m->c, m->act, m->L[cfg->nbot - 1].y, m->emb, m->dinter, B, T, T, D,
                               cfg->interaction_width, 1, m->dbot, m->demb, e));
    TRY(tk_dlrm_prof_mark(m, "interaction_bwd", TK_STREAM_COMPUTE, e));
    TRY(tk_embedding_bwd_sgd_act(m->c, m->tables, cfg->table_dtype, m->row_off, m->in_cat, B, T, D,
                                 m->demb, m->act, m->env.lr, m->emb_ws, e));
    TRY(tk_dlrm_prof_mark(m, "embedding_bwd_sgd", TK_STREAM_COMPUTE, e));
    TRY(mlp_backward(m, 0, cfg->nbot, m->dbot, NULL, e));
    TRY(tk_dlrm_prof_mark(m, "bottom_bwd", TK_STREAM_COMPUTE, e));
    tk_range_pop();
    return 0;
}

int tk_dlrm_fwd_bwd(void *model, tk_err *e) {
    tk_dlrm *m = model;
    tk_dlrm_prof_step(m, 1);
    TRY(tk_dlrm_prof_mark(m, NULL, TK_STREAM_COMPUTE, e));
    return m->comm ? train_step_dist(m, e) : train_step_one(m, e);
}

int tk_dlrm_after_update(void *model, tk_err *e) {
    tk_dlrm *m = model;
    tk_range_push("sgd");
    // The bf16 path: the update wrote the bf16 copy; layer 0's padded copy is re-cast.
    int rc = m->cfg.bf16 ? tk_dlrm_cast_w0p(m, e) : 0;
    if (!rc) rc = tk_dlrm_prof_mark(m, "dense_sgd", TK_STREAM_COMPUTE, e);
    tk_dlrm_prof_step(m, 0);
    tk_range_pop();
    return rc;
}

