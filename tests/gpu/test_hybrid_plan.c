// kernels/hybrid_plan.cu against kernels/hybrid_plan_ref.c, bitwise: random batches (ids drawn
// Zipf-like, so rows repeat heavily and runs of one replica row are long) over tables of random
// sizes, some with no frequent rows (hbits 0), some with every row frequent, the others a random
// subset holding most of the head; B in {240, 4096, 65536}, T in {26, 5, 1}, every W in
// {1, 2, 3, 4, 8} dividing B and every rank (ranks 0 and W - 1 of W = 2 and 8 for B = 65536).
// Every int32 of the six regions up to its count and all 2W + 4 counts must match, and so must
// the exchange matrix and the fixed-size layout (at the capacity that fits and at half of it);
// the outputs and the workspace are poisoned first. Then the hand-made case of tests/unit/test_ops_dlrm.c, and
// the time of a step-sized plan (B = 65536, T = 26, W = 2).
#include "gpu_test.h"
#include "hybrid_plan.h"
#include "../unit/hybrid_plan_case.h"

static uint64_t rnd_n_;
static uint32_t rnd_below(uint32_t m) { return (uint32_t)(((uint64_t)gt_u32(rnd_n_++) * m) >> 32); }
static double rnd_unit(void) { return (double)gt_u32(rnd_n_++) * (1.0 / 4294967296.0); }

// A batch and its frequent-row hash sets, on the host.
typedef struct {
    int B, T, W, tm;
    int64_t *rows;            // (T) table sizes
    int32_t *cat;             // (B, T)
    uint64_t *hset;           // all sets
    int64_t *hoff, *fbase, nf, nslots;
    int32_t *hbits;
} batch;

// The ids of table t: rows * u^3 (Zipf-like: a quarter of the draws fall in the first 1/64 of
// the rows), and one draw in 8 uniform.
static int32_t draw_id(int64_t rows) {
    double u = rnd_unit();
    if (rnd_below(8)) u = u * u * u;
    int64_t id = (int64_t)(u * (double)rows);
    return (int32_t)(id < rows ? id : rows - 1);
}

// maxlog2: tables of 1 .. 2^maxlog2 rows. A table's frequent set: none (1 in 5), all (1 in 5), or
// each of the first rows/64 with probability 0.9 and every row with probability p (0.02 .. 0.5);
// the local rows are numbered in a shuffled order, so replica rows do not follow the ids.
static batch make_batch(int B, int T, int W, int maxlog2) {
    batch h = {.B = B, .T = T, .W = W, .tm = (T + W - 1) / W};
    h.rows = gt_host(8 * (size_t)T), h.cat = gt_host(4 * (size_t)B * T);
    h.hoff = gt_host(8 * (size_t)T), h.fbase = gt_host(8 * (size_t)T), h.hbits = gt_host(4 * (size_t)T);
    int32_t **fr = gt_host(sizeof(int32_t *) * (size_t)T);
    int64_t *nfr = gt_host(8 * (size_t)T);
    for (int t = 0; t < T; t++) {
        h.rows[t] = 1 + (int64_t)rnd_below((uint32_t)1 << rnd_below((uint32_t)maxlog2 + 1));
        int64_t rows = h.rows[t];
        uint32_t kind = rnd_below(5);
        double p = 0.02 + 0.48 * rnd_unit();
        fr[t] = gt_host(4 * (size_t)rows);
        nfr[t] = 0;
        for (int64_t r = 0; r < rows; r++) {
            int in = kind == 0 ? 0 : kind == 1 ? 1 : (r < rows / 64 && rnd_below(10) < 9) || rnd_unit() < p;
            if (in) fr[t][nfr[t]++] = (int32_t)r;
        }
        for (int64_t i = nfr[t] - 1; i > 0; i--) { // shuffle: the local row order
            int64_t j = rnd_below((uint32_t)(i + 1));
            int32_t x = fr[t][i];
            fr[t][i] = fr[t][j], fr[t][j] = x;
        }
    }
    h.nf = 0, h.nslots = 0;
    for (int t = 0; t < T; t++) {
        int bits = 0;
        if (nfr[t]) {
            bits = 4;
            while (((int64_t)1 << bits) < 2 * nfr[t]) bits++;
        }
        h.hbits[t] = bits, h.hoff[t] = h.nslots, h.fbase[t] = h.nf;
        h.nslots += bits ? (int64_t)1 << bits : 0;
        h.nf += nfr[t];
    }
    h.hset = gt_host(8 * (size_t)(h.nslots ? h.nslots : 1));
    memset(h.hset, 0, 8 * (size_t)(h.nslots ? h.nslots : 1));
    for (int t = 0; t < T; t++) {
        for (int64_t i = 0; i < nfr[t]; i++) hpc_hset_add(h.hset + h.hoff[t], h.hbits[t], fr[t][i], (uint32_t)i);
        free(fr[t]);
    }
    free(fr), free(nfr);
    for (int64_t s = 0; s < B; s++)
        for (int t = 0; t < T; t++) h.cat[s * T + t] = draw_id(h.rows[t]);
    return h;
}

static void free_batch(batch *h) { free(h->rows), free(h->cat), free(h->hset), free(h->hoff), free(h->fbase), free(h->hbits); }

// The batch on the device, with rank r's own_off and room for its plan.
typedef struct {
    tk_hybrid_plan_args a;
    size_t off[7], ws_bytes;
    void *bufs[9];
} dev_plan;

static void *up(const void *h, size_t bytes) {
    void *d = gt_dev(bytes ? bytes : 1);
    if (bytes) gt_up(d, h, bytes);
    return d;
}

static dev_plan dev_setup(const batch *h, int rank, const int64_t *own_off, int tn, int stream) {
    dev_plan d = {0};
    tk_hybrid_plan_layout(h->B, h->T, h->W, rank, h->tm, d.off);
    d.ws_bytes = tk_hybrid_plan_ws_bytes(TK_BACKEND_CUDA, h->B, h->T, h->W, h->nf);
    tk_hybrid_plan_args *a = &d.a;
    *a = (tk_hybrid_plan_args){.B = h->B, .T = h->T, .W = h->W, .rank = rank, .tm = h->tm, .nf = h->nf, .stream = stream};
    void **b = d.bufs;
    a->cat = b[0] = up(h->cat, 4 * (size_t)h->B * h->T);
    a->hset = b[1] = up(h->hset, 8 * (size_t)h->nslots);
    a->hoff = b[2] = up(h->hoff, 8 * (size_t)h->T);
    a->hbits = b[3] = up(h->hbits, 4 * (size_t)h->T);
    a->fbase = b[4] = up(h->fbase, 8 * (size_t)h->T);
    a->own_off = b[5] = up(own_off, 8 * ((size_t)tn + 1));
    a->out = b[6] = gt_dev(4 * d.off[6]);
    a->counts = b[7] = gt_dev(8 * (2 * (size_t)h->W + 4));
    a->ws = b[8] = gt_dev(d.ws_bytes ? d.ws_bytes : 1);
    gt_poison(a->out, 4 * d.off[6], 0xff);
    gt_poison(a->counts, 8 * (2 * (size_t)h->W + 4), 0xff);
    gt_poison(a->ws, d.ws_bytes, 0xff);
    return d;
}

static void dev_free(dev_plan *d) {
    for (int i = 0; i < 9; i++) tk_free(gt_ctx_, d->bufs[i]);
}

// Rank `rank`'s plan on both sides; returns the number of differing counts and entries.
static int64_t plan_case(const batch *h, int rank, int stream) {
    int tn;
    tk_hybrid_plan_args probe = {.B = h->B, .T = h->T, .W = h->W, .rank = rank, .tm = h->tm, .nf = h->nf};
    tk_err e = {0};
    if (tk_hybrid_plan_check(&probe, &tn, &e)) gt_die_("hybrid_plan check", &e);
    int t0 = rank * h->tm;
    int64_t *own_off = gt_host(8 * ((size_t)tn + 1));
    own_off[0] = 0;
    for (int lt = 0; lt < tn; lt++) own_off[lt + 1] = own_off[lt] + h->rows[t0 + lt];
    // the reference
    size_t off[7];
    tk_hybrid_plan_layout(h->B, h->T, h->W, rank, h->tm, off);
    int nc = 2 * h->W + 4;
    int32_t *ro = gt_host(4 * off[6]), *go = gt_host(4 * off[6]);
    int64_t *rc = gt_host(8 * (size_t)nc), *gc = gt_host(8 * (size_t)nc);
    void *rws = gt_host(tk_hybrid_plan_ws_bytes(TK_BACKEND_CPU, h->B, h->T, h->W, h->nf));
    tk_hybrid_plan_args a = probe;
    a.cat = h->cat, a.hset = h->hset, a.hoff = h->hoff, a.hbits = h->hbits, a.fbase = h->fbase;
    a.own_off = own_off, a.out = ro, a.counts = rc, a.ws = rws;
    if (tk_hybrid_plan_ref(&a, &e)) gt_die_("hybrid_plan ref", &e);
    // the device
    dev_plan d = dev_setup(h, rank, own_off, tn, stream);
    if (tk_hybrid_plan(gt_ctx_, &d.a, &e) || gt_sync(&e)) gt_die_("hybrid_plan cuda", &e);
    gt_down(go, d.a.out, 4 * off[6]);
    gt_down(gc, d.a.counts, 8 * (size_t)nc);
    int64_t bad = 0;
    for (int k = 0; k < nc; k++) bad += gc[k] != rc[k];
    int64_t len[6];
    hpc_region_len(rc, h->W, len);
    if (!bad)
        for (int g = 0; g < 6; g++)
            for (int64_t k = 0; k < len[g]; k++) bad += go[off[g] + k] != ro[off[g] + k];
    // The exchange matrix, and the fixed layout at the capacity that fits the whole exchange and
    // at half of it (parts cut), both sides.
    const int W = h->W;
    int64_t *rm = gt_host(8 * (size_t)W * W), *gm = gt_host(8 * (size_t)W * W), *dm = gt_dev(8 * (size_t)W * W);
    gt_poison(dm, 8 * (size_t)W * W, 0xff);
    if (tk_hybrid_exchange_counts_ref(&a, rm, &e) || tk_hybrid_exchange_counts(gt_ctx_, &d.a, dm, &e) || gt_sync(&e))
        gt_die_("hybrid_exchange_counts", &e);
    gt_down(gm, dm, 8 * (size_t)W * W);
    int64_t cap = 0;
    for (int k = 0; k < W * W; k++) bad += gm[k] != rm[k], cap = rm[k] > cap ? rm[k] : cap;
    int64_t bT = (int64_t)(h->B / W) * h->T;
    for (int half = 0; half < 2; half++) {
        int64_t cp = half ? cap / 2 : cap;
        size_t ns = (size_t)(W * cp + 1) * 4, nr = (size_t)(bT + 1) * 4;
        int32_t *rs = gt_host(ns), *rr = gt_host(nr), *gs = gt_host(ns), *gr = gt_host(nr);
        int32_t *ds = gt_dev(ns), *dr = gt_dev(nr);
        gt_poison(ds, ns, 0xff), gt_poison(dr, nr, 0xff);
        if (tk_hybrid_plan_fixed_ref(&a, cp, 7, rs, rr, &e) || tk_hybrid_plan_fixed(gt_ctx_, &d.a, cp, 7, ds, dr, &e) ||
            gt_sync(&e))
            gt_die_("hybrid_plan_fixed", &e);
        gt_down(gs, ds, ns), gt_down(gr, dr, nr);
        for (int64_t k = 0; k < W * cp; k++) bad += gs[k] != rs[k];
        for (int64_t k = 0; k < rc[2 * W + 1]; k++) bad += gr[k] != rr[k];
        tk_free(gt_ctx_, ds), tk_free(gt_ctx_, dr);
        free(rs), free(rr), free(gs), free(gr);
    }
    tk_free(gt_ctx_, dm);
    free(rm), free(gm);
    printf("# table hybrid_plan B %d T %d W %d rank %d nf %lld: send %lld recv %lld freq %lld nseg %lld: %s\n", h->B,
           h->T, h->W, rank, (long long)h->nf, (long long)rc[2 * h->W], (long long)rc[2 * h->W + 1],
           (long long)rc[2 * h->W + 2], (long long)rc[2 * h->W + 3], bad ? "DIFFER" : "identical");
    dev_free(&d);
    free(own_off), free(ro), free(go), free(rc), free(gc), free(rws);
    return bad;
}

TK_TEST(hybrid_plan_random) {
    int Bs[3] = {240, 4096, 65536}, Ts[3] = {26, 5, 1}, Ws[5] = {1, 2, 3, 4, 8};
    int ncase = 0;
    for (int ib = 0; ib < 3; ib++)
        for (int it = 0; it < 3; it++)
            for (int iw = 0; iw < 5; iw++) {
                int B = Bs[ib], T = Ts[it], W = Ws[iw], big = B == 65536;
                if (B % W || (big && W != 2 && W != 8)) continue;
                batch h = make_batch(B, T, W, big ? 20 : 16);
                for (int r = 0; r < W; r++) {
                    if (big && r != 0 && r != W - 1) continue;
                    CHECK_EQ_INT(plan_case(&h, r, ncase++ % 2 ? TK_STREAM_COMM : TK_STREAM_COMPUTE), 0);
                }
                free_batch(&h);
            }
}

// The case worked out by hand (tests/unit/hybrid_plan_case.h), on the device.
TK_TEST(hybrid_plan_exact) {
    batch h = {.B = 4, .T = 3, .W = 2, .tm = 2, .nf = 4, .nslots = 32};
    int64_t rows[3], hoff[3], fbase[3], own[2][3];
    int32_t hbits[3], cat[12];
    uint64_t hset[32];
    memcpy(rows, hpc_rows, sizeof rows), memcpy(hoff, hpc_hoff, sizeof hoff), memcpy(fbase, hpc_fbase, sizeof fbase);
    memcpy(hbits, hpc_hbits, sizeof hbits), memcpy(cat, hpc_cat, sizeof cat);
    memcpy(own[0], hpc_own0, sizeof hpc_own0), memcpy(own[1], hpc_own1, sizeof hpc_own1);
    hpc_sets(hset);
    h.rows = rows, h.hoff = hoff, h.fbase = fbase, h.hbits = hbits, h.cat = cat, h.hset = hset;
    for (int r = 0; r < 2; r++) {
        dev_plan d = dev_setup(&h, r, own[r], r ? 1 : 2, TK_STREAM_COMM);
        tk_err e = {0};
        CHECK_EQ_INT(tk_hybrid_plan(gt_ctx_, &d.a, &e), 0);
        int32_t out[64];
        int64_t counts[8];
        gt_down(out, d.a.out, 4 * d.off[6]);
        gt_down(counts, d.a.counts, sizeof counts);
        CHECK_EQ_INT(hpc_mismatches(r, out, d.off, counts), 0);
        int64_t mat[4], *dmat = gt_dev(sizeof mat);
        CHECK_EQ_INT(tk_hybrid_exchange_counts(gt_ctx_, &d.a, dmat, &e), 0);
        gt_down(mat, dmat, sizeof mat);
        for (int k = 0; k < 4; k++) CHECK_EQ_INT(mat[k], hpc_mat[k]);
        int32_t send_pad[6], recv_src[3], *dsend = gt_dev(sizeof send_pad), *drecv = gt_dev(sizeof recv_src);
        for (int cap = 1; cap <= 3; cap += 2) {
            CHECK_EQ_INT(tk_hybrid_plan_fixed(gt_ctx_, &d.a, cap, 9, dsend, drecv, &e), 0);
            gt_down(send_pad, dsend, sizeof send_pad), gt_down(recv_src, drecv, sizeof recv_src);
            CHECK_EQ_INT(hpc_fixed_mismatches(r, cap, send_pad, recv_src), 0);
        }
        tk_free(gt_ctx_, dmat), tk_free(gt_ctx_, dsend), tk_free(gt_ctx_, drecv);
        dev_free(&d);
    }
}

TK_TEST(hybrid_plan_bad_arguments) {
    tk_err e = {0};
    tk_hybrid_plan_args a = {.B = 6, .T = 3, .W = 4, .rank = 0, .tm = 1, .nf = 0};
    CHECK_EQ_INT(tk_hybrid_plan(gt_ctx_, &a, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "hybrid_plan: bad shape B 6 T 3 W 4 rank 0 tm 1 nf 0");
    a.B = 8, a.stream = TK_NSTREAMS;
    CHECK_EQ_INT(tk_hybrid_plan(gt_ctx_, &a, &e), TK_EINTERNAL);
}

// A step-sized plan: B = 65536, T = 26, W = 2, rank 0; the mean of 20 runs after a warm-up,
// timed with events on the plan's stream.
TK_TEST(hybrid_plan_bench) {
    batch h = make_batch(65536, 26, 2, 20);
    int tn = 13;
    int64_t *own_off = gt_host(8 * (size_t)(tn + 1));
    own_off[0] = 0;
    for (int lt = 0; lt < tn; lt++) own_off[lt + 1] = own_off[lt] + h.rows[lt];
    dev_plan d = dev_setup(&h, 0, own_off, tn, TK_STREAM_COMM);
    cudaStream_t s = (cudaStream_t)gt_ctx_->stream[TK_STREAM_COMM];
    tk_err e = {0};
    for (int i = 0; i < 3; i++)
        if (tk_hybrid_plan(gt_ctx_, &d.a, &e)) gt_die_("hybrid_plan bench", &e);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    cudaEventRecord(e0, s);
    enum { N = 20 };
    for (int i = 0; i < N; i++)
        if (tk_hybrid_plan(gt_ctx_, &d.a, &e)) gt_die_("hybrid_plan bench", &e);
    cudaEventRecord(e1, s);
    float ms = 0;
    CHECK(cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess);
    int64_t counts[8];
    gt_down(counts, d.a.counts, sizeof counts);
    printf("# table bench hybrid_plan B 65536 T 26 W 2 rank 0 nf %lld (freq %lld of %d uses, nseg %lld): %.1f us "
           "(mean of %d)\n",
           (long long)h.nf, (long long)counts[6], 65536 / 2 * 26, (long long)counts[7], 1000.0 * ms / N, N);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    dev_free(&d);
    free(own_off);
    free_batch(&h);
}
