// The hybrid embedding's host side (hybrid.h): choosing the frequent rows, planning each batch's
// exchange, the replica's buffers and its refresh from the tables. The step that uses a plan is
// in step.c (train_step_dist).
#include <stdlib.h>
#include <string.h>

#include "core/progress.h" // tk_now
#include "embedding.h"
#include "hybrid_plan.h"
#include "rows.h"
#include "workloads/dlrm/data.h"
#include "workloads/dlrm/hybrid.h"

// ---- choosing the frequent rows ----

typedef struct {
    int32_t t, id;
    int64_t uses;
} cand;

static int cand_cmp(const void *a, const void *b) { // most uses first, then table, then id
    const cand *x = a, *y = b;
    if (x->uses != y->uses) return x->uses > y->uses ? -1 : 1;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

static int cand_cmp_row(const void *a, const void *b) { // replica order: table, then id
    const cand *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

// Sorts v (n ids < 2^31) with two 16-bit LSD radix passes through tmp.
static void radix_sort_ids(uint32_t *v, uint32_t *tmp, int64_t n) {
    static const int SH[2] = {0, 16};
    for (int p = 0; p < 2; p++) {
        int64_t cnt[65536 + 1] = {0};
        for (int64_t i = 0; i < n; i++) cnt[(v[i] >> SH[p] & 0xffff) + 1]++;
        for (int k = 0; k < 65536; k++) cnt[k + 1] += cnt[k];
        for (int64_t i = 0; i < n; i++) tmp[cnt[v[i] >> SH[p] & 0xffff]++] = v[i];
        memcpy(v, tmp, (size_t)n * 4);
    }
}

// Rows of table t used at least `need` times among the n samples: appended to *out (grown).
static int table_candidates(const int32_t *cat, int64_t n, int T, int t, int64_t need, cand **out, int64_t *nout,
                            int64_t *cap) {
    uint32_t *v = malloc((size_t)n * 4), *tmp = malloc((size_t)n * 4);
    if (!v || !tmp) {
        free(v);
        free(tmp);
        return -1;
    }
    for (int64_t i = 0; i < n; i++) v[i] = (uint32_t)cat[i * T + t];
    radix_sort_ids(v, tmp, n);
    free(tmp);
    for (int64_t i = 0; i < n;) {
        int64_t j = i;
        while (j < n && v[j] == v[i]) j++;
        if (j - i >= need) {
            if (*nout == *cap) {
                int64_t nc = *cap ? *cap * 2 : 4096;
                cand *g = realloc(*out, (size_t)nc * sizeof *g);
                if (!g) {
                    free(v);
                    return -1;
                }
                *out = g;
                *cap = nc;
            }
            (*out)[(*nout)++] = (cand){t, (int32_t)v[i], j - i};
        }
        i = j;
    }
    free(v);
    return 0;
}

static void hybrid_free(tk_dlrm *m) {
    tk_dlrm_hybrid *h = m->hy;
    if (!h) return;
    for (int k = 0; k < TK_DLRM_PLAN_SLOTS; k++) {
        tk_event_destroy(&h->plan[k].done);
        tk_event_destroy(&h->plan[k].ready);
    }
    tk_arena_release(m->c, &h->mem);
    tk_arena_release(m->c, &h->xmem);
    free(h);
    m->hy = NULL;
}

void tk_dlrm_hybrid_destroy(tk_dlrm *m) { hybrid_free(m); }

// The hash set of table t's frequent ids (kernels/hybrid_plan.h): 2^bits slots, bits >= 4 and
// 2^bits >= twice the rows, so probes stay short.
static int hset_bits(int64_t rows) {
    int bits = 4;
    while (((int64_t)1 << bits) < 2 * rows) bits++;
    return bits;
}

// Device buffers, one allocation: the replica, its gradient, the static index arrays, the hash
// sets, the workspaces, the plans.
static int hybrid_alloc(tk_dlrm *m, const cand *rows, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    const tk_dlrm_config *cfg = &m->cfg;
    const int D = cfg->emb_dim, T = cfg->num_tables, W = m->world;
    const size_t ts = tk_dtype_size(cfg->table_dtype);
    const int64_t nf = h->nf, B = cfg->batch;
    // The hash sets, built on the host.
    int64_t hoff[TK_DLRM_MAX_TABLES], nhs = 0;
    int32_t hbits[TK_DLRM_MAX_TABLES];
    for (int t = 0; t < T; t++) {
        int64_t n = h->fbase[t + 1] - h->fbase[t];
        hbits[t] = n ? hset_bits(n) : 0;
        hoff[t] = nhs;
        nhs += n ? (int64_t)1 << hbits[t] : 0;
    }
    tk_hybrid_plan_layout((int)B, T, W, m->rank, m->tm, h->off);
    size_t sz[] = {
        (size_t)nf * D * ts,                                                          // fr
        (size_t)nf * D * 4,                                                           // dfr
        16,                                                                           // own_off
        (size_t)h->nf_own * 4,                                                        // own_f
        (size_t)h->nf_own * 4,                                                        // own_rows
        tk_embedding_bwd_ws_bytes(m->c->backend, (int)(B * m->tm), 1),               // ws_own (B*tm >= W*cap)
        tk_hybrid_plan_ws_bytes(m->c->backend, (int)B, T, W, nf),                      // ws_plan
        tk_rows_segsum_ws_bytes(m->c->backend, (int64_t)m->b * T, D),                  // ws_seg (n_freq <= b T)
        (size_t)(nhs ? nhs : 1) * 8,                                                  // hset
        (size_t)T * 8,                                                                // hoff
        (size_t)T * 8,                                                                // dfbase
        (size_t)T * 4,                                                                // hbits
        h->off[TK_HP_TOTAL] * 4, h->off[TK_HP_TOTAL] * 4, h->off[TK_HP_TOTAL] * 4,    // plan[0..2].d
        (size_t)(2 * W + 4 + W * W) * 8, (size_t)(2 * W + 4 + W * W) * 8,             // plan[0..2].dcounts
        (size_t)(2 * W + 4 + W * W) * 8,
    };
    void **dst[] = {&h->fr, (void **)&h->dfr, (void **)&h->own_off, (void **)&h->own_f, (void **)&h->own_rows,
                    &h->ws_own, &h->ws_plan, &h->ws_seg,
                    (void **)&h->hset, (void **)&h->hoff, (void **)&h->dfbase, (void **)&h->hbits,
                    (void **)&h->plan[0].d, (void **)&h->plan[1].d, (void **)&h->plan[2].d,
                    (void **)&h->plan[0].dcounts, (void **)&h->plan[1].dcounts, (void **)&h->plan[2].dcounts};
    _Static_assert(TK_DLRM_PLAN_SLOTS == 3, "the plans' buffers above");
    TRY(tk_dlrm_carve(m, &h->mem, "hybrid embedding", sz, dst, (int)(sizeof sz / sizeof sz[0]), e));
    for (int s = 0; s < TK_DLRM_PLAN_SLOTS; s++) {
        TRY(tk_event_create(m->c, &h->plan[s].done, e));
        TRY(tk_event_create(m->c, &h->plan[s].ready, e));
    }
    // The static arrays, staged through one host buffer.
    size_t nh = 2 * (size_t)h->nf_own;
    int32_t *hb = malloc((nh ? nh : 1) * 4);
    uint64_t *hs = calloc(nhs ? (size_t)nhs : 1, 8);
    if (!hb || !hs) {
        free(hb);
        free(hs);
        return tk_err_set(e, TK_EIO, "dlrm: out of host memory");
    }
    int32_t *own_f = hb, *own_rows = own_f + h->nf_own;
    int64_t k = 0;
    for (int64_t f = 0; f < nf; f++) {
        int t = rows[f].t, lt = t - m->t0;
        if (lt >= 0 && lt < m->tn) {
            own_f[k] = (int32_t)f;
            own_rows[k++] = (int32_t)(m->row_off_host[lt] + rows[f].id);
        }
        uint64_t *set = hs + hoff[t];
        const uint32_t mask = ((uint32_t)1 << hbits[t]) - 1;
        uint32_t i = tk_hset_slot(rows[f].id, hbits[t]);
        while (set[i]) i = (i + 1) & mask;
        set[i] = (uint64_t)(uint32_t)(rows[f].id + 1) << 32 | (uint32_t)(f - h->fbase[t]);
    }
    int64_t own_off[2] = {0, m->rows_total}; // the owned tables, as one
    int rc = tk_memcpy_h2d(m->c, h->own_f, own_f, (size_t)h->nf_own * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->own_rows, own_rows, (size_t)h->nf_own * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->own_off, own_off, 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->hset, hs, (size_t)nhs * 8, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->hoff, hoff, (size_t)T * 8, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->dfbase, h->fbase, (size_t)T * 8, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->hbits, hbits, (size_t)T * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    free(hb);
    free(hs);
    h->cur = h->pending = -1;
    return rc;
}

// The buffers that depend on the capacity, one allocation.
static int hybrid_alloc_exchange(tk_dlrm *m, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    const int D = m->cfg.emb_dim, W = m->world;
    const size_t es = tk_dtype_size(m->act), bT = (size_t)m->b * m->cfg.num_tables, wc = (size_t)W * h->cap_max;
    size_t sz[] = {(bT > wc ? bT : wc) * D * es, wc * D * es, wc * 4, wc * 4, wc * 4, bT * 4, bT * 4, bT * 4};
    void **dst[] = {&h->pack, &h->gown, (void **)&h->plan[0].send_pad, (void **)&h->plan[1].send_pad,
                    (void **)&h->plan[2].send_pad, (void **)&h->plan[0].recv_src, (void **)&h->plan[1].recv_src,
                    (void **)&h->plan[2].recv_src};
    return tk_dlrm_carve(m, &h->xmem, "hybrid exchange", sz, dst, (int)(sizeof sz / sizeof sz[0]), e);
}

// The plan arguments of this rank for the global batch cat (device) on stream, into slot's plan.
static tk_hybrid_plan_args plan_args(const tk_dlrm *m, int slot, const int32_t *cat, int stream) {
    const tk_dlrm_hybrid *h = m->hy;
    return (tk_hybrid_plan_args){.B = m->cfg.batch, .T = m->cfg.num_tables, .W = m->world, .rank = m->rank,
                                 .tm = m->tm, .cat = cat, .hset = h->hset, .hoff = h->hoff, .hbits = h->hbits,
                                 .fbase = h->dfbase, .own_off = m->row_off, .nf = h->nf, .out = h->plan[slot].d,
                                 .counts = h->plan[slot].dcounts, .ws = h->ws_plan, .stream = stream};
}

// The largest entry of a W x W exchange matrix (0 for none).
static int64_t matrix_max(const int64_t *mat, int W) {
    int64_t most = 0;
    for (int k = 0; k < W * W; k++) most = mat[k] > most ? mat[k] : most;
    return most;
}

// The capacity that fits a largest pair count of `most`: plus 5% and 32, rounded up to 32, at
// most b*tm (where the fixed exchange is the plain one's size).
static int64_t capacity_for(const tk_dlrm *m, int64_t most) {
    const int64_t full = (int64_t)m->b * m->tm, cap = (most + most / 20 + 32 + 31) / 32 * 32;
    return cap < full ? cap : full;
}

// The fixed exchange's capacity: given (clamped to b*tm), or -1: fitting the exchange matrices of
// the whole batches among the n statistics samples (capacity_for), and growing later.
static int choose_capacity(tk_dlrm *m, const int32_t *cat, int64_t n, int64_t capacity, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    const int T = m->cfg.num_tables, W = m->world;
    const int64_t B = m->cfg.batch, full = (int64_t)m->b * m->tm;
    h->grow = capacity < 0;
    h->cap_max = h->grow ? full : capacity < full ? capacity : full;
    if (!h->grow) {
        h->cap = h->cap_max;
        return 0;
    }
    int64_t most = -1;
    for (int64_t s0 = 0; s0 + B <= n; s0 += B) {
        TRY(tk_memcpy_h2d(m->c, m->cat_all, cat + s0 * T, (size_t)B * T * 4, TK_STREAM_COMPUTE, e));
        tk_hybrid_plan_args a = plan_args(m, 0, m->cat_all, TK_STREAM_COMPUTE);
        int64_t *dmat = h->plan[0].dcounts + 2 * W + 4, *mat = h->plan[0].counts;
        TRY(tk_hybrid_exchange_counts(m->c, &a, dmat, e));
        TRY(tk_memcpy_d2h(m->c, mat, dmat, (size_t)W * W * 8, TK_STREAM_COMPUTE, e));
        int64_t here = matrix_max(mat, W);
        most = here > most ? here : most;
    }
    h->cap = most < 0 ? full : capacity_for(m, most); // (fewer samples than a batch: the plain size)
    return 0;
}

// Collective: every rank passes the same n samples' ids cat (n, T) host, folded into the tables
// (the first batches of the training data), from which the replicated rows are chosen (at most
// max_rows). Refreshes the replica from the tables; tk_dlrm_weights_loaded (after a load or
// init_weights) refreshes it again. capacity: vectors a rank pair of the fixed exchange
// (clamped to b*tm, the plain exchange's block), -1: chosen from those batches' exchange matrices
// and grown when a batch does not fit, 0: every batch exact.
static int hybrid_setup(tk_dlrm *m, const int32_t *cat, int64_t n, int64_t max_rows, int64_t capacity, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    const int T = cfg->num_tables, W = m->world;
    if (!m->comm) // (one rank through a communicator is fine: the exchange step at world size 1)
        return tk_err_set(e, TK_EUSAGE, "dlrm: the hybrid embedding needs the exchange step (several ranks)");
    if (W > TK_HY_MAX_WORLD)
        return tk_err_set(e, TK_EUSAGE, "dlrm: the hybrid embedding supports at most %d ranks", TK_HY_MAX_WORLD);
    if (m->rows_total >= INT32_MAX) // the plan's rows of the owned tables are int32
        return tk_err_set(e, TK_EUSAGE, "dlrm: the hybrid embedding needs at most %d rows of tables a rank (%lld)",
                          INT32_MAX, (long long)m->rows_total);
    if (n <= 0 || max_rows < 0) return tk_err_set(e, TK_EUSAGE, "dlrm: hybrid embedding statistics need samples");
    if (max_rows > INT32_MAX / 2) max_rows = INT32_MAX / 2;
    hybrid_free(m);
    if (!(m->hy = calloc(1, sizeof *m->hy))) return tk_err_set(e, TK_EIO, "dlrm: out of host memory");
    tk_dlrm_hybrid *h = m->hy;
    // A row is frequent at u uses a global batch with u * es >= 4 (the header): in the n samples
    // that is uses >= 4 / es * n / B.
    const double es = (double)tk_dtype_size(m->act);
    h->min_uses = 4.0 / es;
    double need_d = h->min_uses * (double)n / (double)cfg->batch;
    int64_t need = (int64_t)need_d;
    if ((double)need < need_d) need++;
    if (need < 1) need = 1;
    cand *c = NULL;
    int64_t nc = 0, cap = 0;
    int rc = 0;
    for (int t = 0; t < T && !rc; t++)
        if (table_candidates(cat, n, T, t, need, &c, &nc, &cap))
            rc = tk_err_set(e, TK_EIO, "dlrm: out of host memory");
    if (!rc && nc > max_rows) {
        qsort(c, (size_t)nc, sizeof *c, cand_cmp);
        nc = max_rows;
    }
    if (!rc) qsort(c, (size_t)nc, sizeof *c, cand_cmp_row);
    h->nf = nc;
    for (int64_t f = 0, t = 0; !rc && t < T; t++) {
        h->fbase[t] = f;
        int64_t f0 = f;
        while (f < nc && c[f].t == t) f++;
        if (f == f0) continue;
        if (t >= m->t0 && t < m->t0 + m->tn) h->nf_own += f - f0;
    }
    h->fbase[T] = nc;
    if (!rc) rc = hybrid_alloc(m, c, e);
    free(c);
    if (!rc) rc = choose_capacity(m, cat, n, capacity, e);
    if (!rc) rc = hybrid_alloc_exchange(m, e);
    if (!rc) rc = tk_dlrm_hybrid_refresh(m, e);
    if (rc) hybrid_free(m);
    return rc;
}

// The replica from the tables: each owner copies its tables' frequent rows in, zeros elsewhere,
// and the sum over ranks gives every rank every row (x + 0 is exact in any type).
int tk_dlrm_hybrid_refresh(tk_dlrm *m, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    if (!h) return 0;
    const int D = m->cfg.emb_dim;
    const tk_dtype td = m->cfg.table_dtype;
    TRY(tk_memset0(m->c, h->fr, (size_t)h->nf * D * tk_dtype_size(td), TK_STREAM_COMPUTE, e));
    TRY(tk_rows_copy(m->c, m->tables, td, h->own_rows, h->fr, td, h->own_f, h->nf_own, NULL, D, e));
    TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMM, TK_STREAM_COMPUTE, e));
    TRY(tk_allreduce_sum(m->comm, h->fr, h->fr, (size_t)h->nf * D, td, 1.0f, TK_STREAM_COMM, e));
    TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e));
    return tk_dist_sync(m->env.dist, e);
}

// ---- planning a batch ----

// Plans the exchange of the global batch cat (B, T) (device) into plan slot `slot` on stream,
// and waits for its counts (the host needs them to queue the exchange).
static int hybrid_plan(tk_dlrm *m, int slot, const int32_t *cat, int stream, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    tk_dlrm_hplan *P = &h->plan[slot];
    const int W = m->world, b = m->b, tm = m->tm, r = m->rank;
    double t_start = tk_now();
    tk_hybrid_plan_args a = plan_args(m, slot, cat, stream);
    const int nc = 2 * W + 4;
    TRY(tk_hybrid_plan(m->c, &a, e));
    TRY(tk_hybrid_exchange_counts(m->c, &a, P->dcounts + nc, e));
    if (h->cap > 0) TRY(tk_hybrid_plan_fixed(m->c, &a, h->cap, -1, P->send_pad, P->recv_src, e));
    // the counts and the matrix (waits for the plan)
    TRY(tk_memcpy_d2h(m->c, P->counts, P->dcounts, (size_t)(nc + W * W) * 8, stream, e));
    // Two computations of this rank's counts: the plan's and the whole batch's matrix.
    const int64_t *mat = P->counts + nc;
    for (int j = 0; j < W; j++)
        if (P->counts[j] != mat[r * W + j] || P->counts[W + j] != mat[j * W + r])
            return tk_err_set(e, TK_EINTERNAL,
                              "dlrm: rank %d: the hybrid plan's counts disagree with the exchange matrix", r);
    const int64_t most = matrix_max(mat, W);
    if (most > h->cap && h->grow) { // (the same on every rank: the matrix is)
        h->cap = capacity_for(m, most);
        h->growths++;
        TRY(tk_hybrid_plan_fixed(m->c, &a, h->cap, -1, P->send_pad, P->recv_src, e));
    }
    P->cap = h->cap;
    P->fixed = h->cap > 0 && most <= h->cap; // the same decision on every rank: the matrix is
    // Traffic of this rank (bytes it sends): vectors to other ranks forward, gradients back, and
    // its share of the replica gradient's ring all-reduce; against the plain exchange's blocks.
    const double vb = (double)m->cfg.emb_dim * (double)tk_dtype_size(m->act);
    double a2a = 0;
    for (int j = 0; j < W; j++)
        if (j != r) a2a += P->fixed ? 2.0 * (double)P->cap : (double)P->counts[j] + (double)P->counts[W + j];
    h->a2a_bytes += a2a * vb;
    h->a2a_bytes_plain += 2.0 * (W - 1) * (double)b * tm * vb;
    h->ar_bytes += 2.0 * (W - 1) / W * (double)h->nf * m->cfg.emb_dim * 4;
    h->batches++;
    h->fixed_batches += P->fixed;
    h->plan_s += tk_now() - t_start;
    return 0;
}

static json_t *hybrid_json(const tk_dlrm *m) {
    const tk_dlrm_hybrid *h = m->hy;
    if (!h) return NULL;
    double n = h->batches > 0 ? (double)h->batches : 1, plain = h->a2a_bytes_plain / n;
    double hy = (h->a2a_bytes + h->ar_bytes) / n;
    // (one rank exchanges nothing: no fraction saved, null)
    return json_pack("{s:I, s:I, s:f, s:I, s:I, s:I, s:I, s:f, s:f, s:f, s:o, s:f}", "frequent_rows", (json_int_t)h->nf,
                     "frequent_rows_own", (json_int_t)h->nf_own, "min_uses_per_batch", h->min_uses, "capacity",
                     (json_int_t)h->cap, "capacity_growths", (json_int_t)h->growths, "batches", (json_int_t)h->batches,
                     "fixed_batches", (json_int_t)h->fixed_batches, "a2a_bytes_per_step", h->a2a_bytes / n,
                     "allreduce_bytes_per_step", h->ar_bytes / n, "plain_a2a_bytes_per_step", plain, "saved_fraction",
                     plain > 0 ? json_real(1.0 - hy / plain) : json_null(), "plan_ms_per_batch", h->plan_s / n * 1e3);
}

json_t *tk_dlrm_result_extra(const void *model) {
    json_t *h = hybrid_json(model);
    return h ? json_pack("{s:o}", "hybrid_embedding", h) : NULL;
}

// Plans slot's staged batch (its ids all-gathered by tk_dlrm_hybrid_stage, on the same stream)
// once the step that read the slot's previous plan is done, and waits for its counts. The host
// waits for the all-gather first, within the timeout (a rank that stopped makes it fail, not
// hang): the all-gather was issued before the step queued last, so on the device it runs after
// the collectives of the step before that one.
static int hybrid_finish(tk_dlrm *m, int slot, int stream, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    tk_dlrm_hplan *P = &h->plan[slot];
    if (h->pending != slot || P->state != TK_HPS_STAGED)
        return tk_err_set(e, TK_EINTERNAL, "dlrm: rank %d: plan slot %d has no staged batch to plan", m->rank, slot);
    if (m->world > 1) TRY(tk_comm_wait(m->comm, stream, m->env.dist->timeout, e));
    if (P->has_done) TRY(tk_event_wait(m->c, stream, &P->done, e)); // the step that read it is over
    TRY(hybrid_plan(m, slot, P->cat, stream, e));
    TRY(tk_event_record(m->c, &P->ready, stream, e));
    P->state = TK_HPS_PLANNED;
    h->pending = -1;
    return 0;
}

// The deeper pipeline (workload.h stage_depth 3): the engine stages batch n + 2 right after it
// queued step n. This call first plans batch n + 1, staged (its ids all-gathered) before step n
// was queued: its all-gather ran after step n - 1's collectives, so the host waits for it while
// step n is queued behind, and the device does not wait between two steps for an all-gather, a
// plan, its counts' copy and a launch (what two slots cost: contrib/bench/NOTES.md). Then it
// all-gathers batch n + 2's ids, and returns without waiting for them (the all-gather runs after
// step n's collectives). The batches are planned in the order staged, each at the latest in use.
int tk_dlrm_hybrid_stage(void *model, int slot, void *const *dev, int stream, tk_err *e) {
    tk_dlrm *m = model;
    tk_dlrm_hybrid *h = m->hy;
    if (!h) return 0;
    if (slot < 0 || slot >= TK_DLRM_PLAN_SLOTS || h->plan[slot].state != TK_HPS_FREE)
        return tk_err_set(e, TK_EINTERNAL, "dlrm: rank %d: staging slot %d reused before its batch's step was queued",
                          m->rank, slot);
    if (h->pending >= 0) TRY(hybrid_finish(m, h->pending, stream, e));
    tk_dlrm_hplan *P = &h->plan[slot];
    P->cat = dev[2]; // this rank's b samples' ids (one rank: all B)
    if (m->world > 1) {
        // Every sample's, from the ranks' shares, on this (the copy) stream over the step's own
        // communicator: NCCL runs a communicator's collectives in the order the host issued them,
        // captured or not, whatever the stream (comm.h), and every rank issues this one after the
        // step before's, so it runs after that step's last collective, never beside it. cat_all
        // is read only by the plans, on this stream: the one above (queued before this
        // all-gather) and the next finish's.
        TRY(tk_all_gather(m->comm, dev[2], m->cat_all, (size_t)m->b * m->cfg.num_tables, TK_I32, stream, e));
        P->cat = m->cat_all;
    }
    P->state = TK_HPS_STAGED;
    h->pending = slot;
    return 0;
}

int tk_dlrm_hybrid_use(void *model, int slot, tk_err *e) {
    tk_dlrm *m = model;
    tk_dlrm_hybrid *h = m->hy;
    if (!h) return 0;
    if (slot < 0 || slot >= TK_DLRM_PLAN_SLOTS)
        return tk_err_set(e, TK_EINTERNAL, "dlrm: staging slot %d", slot);
    tk_dlrm_hplan *P = &h->plan[slot];
    if (P->state == TK_HPS_STAGED) TRY(hybrid_finish(m, slot, TK_STREAM_COPY, e)); // (not planned yet)
    if (P->state != TK_HPS_PLANNED)
        return tk_err_set(e, TK_EINTERNAL, "dlrm: rank %d: staging slot %d used without a planned batch", m->rank, slot);
    if (h->cur >= 0 && h->plan[h->cur].state == TK_HPS_INPUT)
        return tk_err_set(e, TK_EINTERNAL, "dlrm: rank %d: a batch used before the step of the one before was queued",
                          m->rank);
    TRY(tk_event_wait(m->c, TK_STREAM_COMPUTE, &P->ready, e)); // (the step reads the plan in place)
    P->state = TK_HPS_INPUT;
    h->cur = slot; // (a graph per slot: the step reads the slot's plan at its fixed address)
    return 0;
}

int tk_dlrm_hybrid_depth(const void *model) {
    // the hybrid embedding: three slots (the all-gather of a batch's ids a step before its plan)
    return ((const tk_dlrm *)model)->hy ? 3 : 2;
}

// ---- before training ----

int tk_dlrm_prepare(void *model, void *rd, int64_t steps_per_epoch, json_t **line, tk_err *e) {
    tk_dlrm *m = model;
    const tk_dlrm_config *cfg = &m->cfg;
    (void)steps_per_epoch;
    if (!cfg->hybrid) return 0;
    const int T = cfg->num_tables, B = cfg->batch;
    int64_t want = cfg->hybrid_stat_batches * B, have = (int64_t)tk_dlrm_data_count(rd);
    int64_t n = want < have ? want : have, got_all = 0;
    uint8_t *hl = malloc((size_t)B);
    int32_t *hd = malloc((size_t)B * cfg->num_dense * 4), *cat = malloc((size_t)n * T * 4 + 4);
    int rc = !hl || !hd || !cat ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
    if (!rc) rc = tk_dlrm_data_seek(rd, 0, e);
    while (!rc && got_all < n) {
        int k = n - got_all < B ? (int)(n - got_all) : B, got = 0;
        rc = tk_dlrm_data_next(rd, k, hl, hd, cat + got_all * T, &got, e);
        if (!rc && got == 0) break;
        got_all += got;
    }
    double t0 = tk_now();
    if (!rc) rc = hybrid_setup(m, cat, got_all, cfg->hybrid_max_rows, cfg->hybrid_capacity, e);
    if (!rc) {
        json_t *h = hybrid_json(m);
        *line = json_pack("{s:s, s:I, s:f, s:o}", "type", "hybrid_embedding", "stat_samples", (json_int_t)got_all,
                          "setup_s", tk_now() - t0, "rows", h ? h : json_null());
    }
    free(hl);
    free(hd);
    free(cat);
    return rc;
}
