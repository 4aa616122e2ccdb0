// The hybrid embedding's host side (lib/workloads/dlrm_hybrid.h): choosing the frequent rows,
// planning each batch's exchange, the replica's buffers and its refresh from the tables. The step
// that uses a plan is in dlrm.c (train_step_dist).
#include <stdlib.h>
#include <string.h>

#include "core/progress.h" // tk_now
#include "embedding.h"
#include "rows.h"
#include "workloads/dlrm_hybrid.h"

static size_t align256(size_t n) { return (n + 255) & ~(size_t)255; }

// The replica row of id in table t, or -1 when the row is not frequent: an open-addressing hash
// set per table of entries (id + 1) << 32 | (row - fbase[t]), 0 empty, at most half full. Small
// (16 bytes a frequent row), so all tables' sets stay in cache while a batch is planned.
static inline uint32_t hy_slot(int32_t id, int bits) { return (uint32_t)id * 0x9E3779B1u >> (32 - bits); }

static inline int32_t hy_row(const tk_dlrm_hybrid *h, int t, int32_t id) {
    const uint64_t *hs = h->hset[t];
    if (!hs) return -1;
    const uint32_t mask = ((uint32_t)1 << h->hbits[t]) - 1;
    const uint64_t key = (uint64_t)(uint32_t)(id + 1) << 32;
    for (uint32_t i = hy_slot(id, h->hbits[t]);; i = (i + 1) & mask) {
        uint64_t v = hs[i];
        if (!v) return -1;
        if ((v & ~(uint64_t)0xffffffffu) == key) return (int32_t)(h->fbase[t] + (uint32_t)v);
    }
}

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
    for (int t = 0; t < TK_DLRM_MAX_TABLES; t++) free(h->hset[t]);
    for (int k = 0; k < 2; k++) {
        if (h->plan[k].h) tk_host_free_pinned(m->c, h->plan[k].h);
        if (h->plan[k].d) tk_free(m->c, h->plan[k].d);
        tk_event_destroy(&h->plan[k].done);
    }
    if (h->fr) tk_free(m->c, h->fr);
    free(h->fidx);
    free(h->fscratch);
    free(h->fcount);
    free(h);
    m->hy = NULL;
}

void tk_dlrm_hybrid_destroy(tk_dlrm *m) { hybrid_free(m); }

// Device buffers: one allocation for the replica, its gradient and the static index arrays.
static int hybrid_alloc(tk_dlrm *m, const cand *rows, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    const tk_dlrm_config *cfg = &m->cfg;
    const int D = cfg->emb_dim, T = cfg->num_tables;
    const size_t es = tk_dtype_size(m->act), ts = tk_dtype_size(cfg->table_dtype);
    const int64_t nf = h->nf, B = cfg->batch;
    size_t sz[9] = {
        (size_t)nf * D * ts,                                                     // fr
        (size_t)nf * D * 4,                                                      // dfr
        (size_t)nf * 4,                                                          // fr_ident
        16,                                                                      // fr_off
        16,                                                                      // own_off
        (size_t)h->nf_own * 4,                                                   // own_f
        (size_t)h->nf_own * 4,                                                   // own_rows
        tk_embedding_bwd_ws_bytes(m->c->backend, (int)(nf > 0 ? nf : 1), 1),     // ws_fr
        tk_embedding_bwd_ws_bytes(m->c->backend, (int)(B * (m->tn > 0 ? m->tn : 1)), 1), // ws_own
    };
    size_t total = 0;
    for (int k = 0; k < 9; k++) total += align256(sz[k]);
    size_t pack = align256((size_t)m->b * T * D * es);
    char *p;
    TRY(tk_malloc(m->c, (void **)&p, total + pack, e));
    h->fr = p;
    void **dst[10] = {&h->fr, (void **)&h->dfr, (void **)&h->fr_ident, (void **)&h->fr_off, (void **)&h->own_off,
                      (void **)&h->own_f, (void **)&h->own_rows, &h->ws_fr, &h->ws_own, &h->pack};
    for (int k = 0; k < 10; k++) {
        *dst[k] = p;
        p += k < 9 ? align256(sz[k]) : pack;
    }
    // The static index arrays, staged through one host buffer.
    size_t nh = (size_t)nf + 2 * (size_t)h->nf_own;
    int32_t *hb = malloc((nh ? nh : 1) * 4);
    if (!hb) return tk_err_set(e, TK_EIO, "dlrm: out of host memory");
    int32_t *ident = hb, *own_f = hb + nf, *own_rows = own_f + h->nf_own;
    int64_t k = 0;
    for (int64_t f = 0; f < nf; f++) {
        ident[f] = (int32_t)f;
        int lt = rows[f].t - m->t0;
        if (lt >= 0 && lt < m->tn) {
            own_f[k] = (int32_t)f;
            own_rows[k++] = (int32_t)(m->row_off_host[lt] + rows[f].id);
        }
    }
    int64_t offs[4] = {0, nf, 0, m->rows_total};
    int rc = tk_memcpy_h2d(m->c, h->fr_ident, ident, (size_t)nf * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->own_f, own_f, (size_t)h->nf_own * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->own_rows, own_rows, (size_t)h->nf_own * 4, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->fr_off, offs, 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(m->c, h->own_off, offs + 2, 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    free(hb);
    if (rc) return rc;
    (void)T;
    // The plans: the largest batch plan is B*tn sends and b*T uses (each either received or frequent).
    size_t cap = (size_t)B * m->tn + 2 * (size_t)m->b * T + 2 * (size_t)(nf < (int64_t)m->b * T ? nf : (int64_t)m->b * T) + 64;
    for (int s = 0; s < 2; s++) {
        tk_dlrm_hplan *P = &h->plan[s];
        P->cap = cap;
        TRY(tk_host_alloc_pinned(m->c, (void **)&P->h, cap * 4, e));
        TRY(tk_malloc(m->c, (void **)&P->d, cap * 4, e));
        TRY(tk_event_create(m->c, &P->done, e));
    }
    h->fidx = malloc((size_t)B * T * 4);
    h->fscratch = malloc((size_t)2 * m->b * T * 4 + 4);
    h->fcount = malloc(((size_t)nf + 1) * 4);
    if (!h->fidx || !h->fscratch || !h->fcount) return tk_err_set(e, TK_EIO, "dlrm: out of host memory");
    h->cur = -1;
    return 0;
}

int tk_dlrm_hybrid_setup(tk_dlrm *m, const int32_t *cat, int64_t n, int64_t max_rows, tk_err *e) {
    const tk_dlrm_config *cfg = &m->cfg;
    const int T = cfg->num_tables, W = m->world;
    if (W < 2) return tk_err_set(e, TK_EUSAGE, "dlrm: the hybrid embedding needs several ranks (world size %d)", W);
    if (W > TK_HY_MAX_WORLD)
        return tk_err_set(e, TK_EUSAGE, "dlrm: the hybrid embedding supports at most %d ranks", TK_HY_MAX_WORLD);
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
        int bits = 4;
        while (((int64_t)1 << bits) < 2 * (f - f0)) bits++;
        h->hbits[t] = bits;
        if (!(h->hset[t] = calloc((size_t)1 << bits, 8))) {
            rc = tk_err_set(e, TK_EIO, "dlrm: out of host memory");
            break;
        }
        const uint32_t mask = ((uint32_t)1 << bits) - 1;
        for (int64_t k = f0; k < f; k++) {
            uint32_t i = hy_slot(c[k].id, bits);
            while (h->hset[t][i]) i = (i + 1) & mask;
            h->hset[t][i] = (uint64_t)(uint32_t)(c[k].id + 1) << 32 | (uint32_t)(k - f0);
        }
        if (t >= m->t0 && t < m->t0 + m->tn) h->nf_own += f - f0;
    }
    h->fbase[T] = nc;
    if (!rc) rc = hybrid_alloc(m, c, e);
    free(c);
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
    TRY(tk_rows_copy(m->c, m->tables, td, h->own_rows, h->fr, td, h->own_f, h->nf_own, D, e));
    TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMM, TK_STREAM_COMPUTE, e));
    TRY(tk_allreduce_sum(m->comm, h->fr, h->fr, (size_t)h->nf * D, td, 1.0f, TK_STREAM_COMM, e));
    TRY(tk_comm_stream_wait(m->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e));
    return tk_dlrm_sync(m, e);
}

// ---- planning a batch ----

int tk_dlrm_hybrid_plan(tk_dlrm *m, int slot, const int32_t *cat, tk_err *e) {
    tk_dlrm_hybrid *h = m->hy;
    tk_dlrm_hplan *P = &h->plan[slot];
    const int T = m->cfg.num_tables, W = m->world, b = m->b, tm = m->tm, tn = m->tn, r = m->rank;
    int32_t *send_rows = P->h;
    int64_t k = 0;
    double t_start = tk_now();
    // The replica row (or -1) of every use either side needs: this rank's tables for all B samples
    // and every table for its own b samples.
    int32_t *fidx = h->fidx;
    const int64_t B = m->cfg.batch, s0 = (int64_t)r * b;
#pragma omp parallel for schedule(static)
    for (int64_t s = 0; s < B; s++) {
        int mine = s >= s0 && s < s0 + b, ta = mine ? 0 : m->t0, tz = mine ? T : m->t0 + tn;
        for (int t = ta; t < tz; t++) fidx[s * T + t] = hy_row(h, t, cat[s * T + t]);
    }
    // Owner side: the infrequent uses of this rank's tables, peer-major (peer j's samples are
    // [j*b, (j+1)*b)), then sample, then table: the order in which peer j lists them (below).
    for (int j = 0; j < W; j++) {
        int64_t k0 = k;
        for (int64_t s = (int64_t)j * b; s < (int64_t)(j + 1) * b; s++)
            for (int lt = 0; lt < tn; lt++) {
                if (fidx[s * T + m->t0 + lt] < 0)
                    send_rows[k++] = (int32_t)(m->row_off_host[lt] + cat[s * T + m->t0 + lt]);
            }
        P->send_cnt[j] = (size_t)(k - k0);
    }
    P->n_send = k;
    // Receiver side: this rank's samples, owner-major. An infrequent use arrives from its owner and
    // goes to its place in the grouped layout; a frequent one is looked up in the replica there.
    P->o_send_rows = 0;
    P->o_recv_pos = (size_t)k;
    int32_t *recv_pos = P->h + P->o_recv_pos;
    int32_t *fpos_u = h->fscratch, *frow_u = h->fscratch + (size_t)b * T; // unsorted, then sorted below
    int64_t nr = 0, nq = 0;
    for (int i = 0; i < W; i++) {
        int64_t r0 = nr;
        int ti0 = i * tm, tni = T - ti0 < tm ? T - ti0 : tm;
        for (int64_t sl = 0; sl < b && tni > 0; sl++) {
            const int32_t *row = fidx + (s0 + sl) * T;
            for (int q = 0; q < tni; q++) {
                int32_t pos = (int32_t)(((int64_t)i * b + sl) * tm + q);
                int32_t f = row[ti0 + q];
                if (f < 0) {
                    recv_pos[nr++] = pos;
                } else {
                    fpos_u[nq] = pos;
                    frow_u[nq++] = f;
                }
            }
        }
        P->recv_cnt[i] = (size_t)(nr - r0);
    }
    P->n_recv = nr;
    P->n_freq = nq;
    // The frequent uses sorted by replica row (stable: the grouped-layout order within a row), so
    // each row's gradient is one run summed in a fixed order.
    P->o_fpos = P->o_recv_pos + (size_t)nr;
    P->o_frow = P->o_fpos + (size_t)nq;
    P->o_seg_row = P->o_frow + (size_t)nq;
    int32_t *fpos = P->h + P->o_fpos, *frow = P->h + P->o_frow, *seg_row = P->h + P->o_seg_row;
    // A counting sort by replica row.
    int32_t *cnt = h->fcount;
    memset(cnt, 0, ((size_t)h->nf + 1) * 4);
    for (int64_t q = 0; q < nq; q++) cnt[frow_u[q] + 1]++;
    int nseg = 0;
    for (int64_t f = 0; f < h->nf; f++) {
        if (cnt[f + 1]) seg_row[nseg++] = (int32_t)f;
        cnt[f + 1] += cnt[f];
    }
    P->nseg = nseg;
    P->o_seg_off = P->o_seg_row + (size_t)nseg;
    int32_t *seg_off = P->h + P->o_seg_off;
    for (int g = 0; g < nseg; g++) seg_off[g] = cnt[seg_row[g]];
    seg_off[nseg] = (int32_t)nq;
    for (int64_t q = 0; q < nq; q++) {
        int32_t at = cnt[frow_u[q]]++;
        fpos[at] = fpos_u[q];
        frow[at] = frow_u[q];
    }
    P->used = P->o_seg_off + (size_t)nseg + 1;
    if (P->used > P->cap) return tk_err_set(e, TK_EINTERNAL, "dlrm: hybrid plan of %zu > %zu entries", P->used, P->cap);
    // Traffic of this rank (bytes it sends): vectors to other ranks forward, gradients back, and
    // its share of the replica gradient's ring all-reduce; against the plain exchange's blocks.
    const double vb = (double)m->cfg.emb_dim * (double)tk_dtype_size(m->act);
    double a2a = 0;
    for (int j = 0; j < W; j++)
        if (j != r) a2a += (double)P->send_cnt[j] + (double)P->recv_cnt[j];
    h->a2a_bytes += a2a * vb;
    h->a2a_bytes_plain += 2.0 * (W - 1) * (double)b * tm * vb;
    h->ar_bytes += 2.0 * (W - 1) / W * (double)h->nf * m->cfg.emb_dim * 4;
    h->batches++;
    h->plan_s += tk_now() - t_start;
    return 0;
}

json_t *tk_dlrm_hybrid_json(const tk_dlrm *m) {
    const tk_dlrm_hybrid *h = m->hy;
    if (!h) return NULL;
    double n = h->batches > 0 ? (double)h->batches : 1, plain = h->a2a_bytes_plain / n;
    double hy = (h->a2a_bytes + h->ar_bytes) / n;
    return json_pack("{s:I, s:I, s:f, s:I, s:f, s:f, s:f, s:f, s:f}", "frequent_rows", (json_int_t)h->nf,
                     "frequent_rows_own", (json_int_t)h->nf_own, "min_uses_per_batch", h->min_uses, "batches",
                     (json_int_t)h->batches, "a2a_bytes_per_step", h->a2a_bytes / n, "allreduce_bytes_per_step",
                     h->ar_bytes / n, "plain_a2a_bytes_per_step", plain, "saved_fraction",
                     plain > 0 ? 1.0 - hy / plain : 0.0, "plan_ms_per_batch", h->plan_s / n * 1e3);
}
