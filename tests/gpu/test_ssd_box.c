// SSD300's box math (kernels/ssd_box.h) on the cuda backend against the CPU references: fresh
// random inputs each run, and inputs where the results must be exact. Matching: labels and boxes
// bit for bit always (both sides round the same fp32 operations), on dboxes300_coco with random
// ground truths (some repeated, some equal to a default box, an image without any) and on ground
// truths on a 1/8 grid (many exact IoU ties). Loss: the mining weights identical, the loss within
// 1e-5, the gradients within 1e-5 (fp32) or 1e-2 (bf16, rounded once on each side); random
// logits are redrawn for an image whose mining threshold has a near-tie (the two sides compute the
// cross-entropy in fp32 and fp64 and may then pick different boxes, both right); small cases with
// exactly tied cross-entropies (all logits 0, weight-2 positives) check the tie order; widths of
// 2, 3, 40, 81 and 130 classes cover the per-box kernel's register forms and its loop form.
#include <math.h>

#include "gpu_test.h"
#include "ssd_box.h"

// got vs ref (n values): relative error within tol; prints a table line.
static int close_enough(const char *what, const float *got, const float *ref, size_t n, double tol) {
    const double err = gt_relerr(got, ref, n);
    printf("# table ssd %-44s rel err %.2e (%zu of %zu differ)%s\n", what, err, gt_ndiff(got, ref, n), n,
           err <= tol ? "" : "  <-- FAIL");
    return err <= tol;
}

static float *dbox_xywh, *dbox_ltrb; // dboxes300_coco, host
static void need_dboxes(void) {
    if (dbox_xywh) return;
    tk_err e = {0};
    dbox_xywh = gt_host(TK_SSD300_BOXES * 16), dbox_ltrb = gt_host(TK_SSD300_BOXES * 16);
    if (tk_ssd_dboxes(&tk_ssd300_coco, dbox_xywh, dbox_ltrb, &e)) gt_die_("tk_ssd_dboxes", &e);
}

typedef struct {
    int N, D;
    int64_t ngt;
    float *gt, *db;
    int32_t *lab, *off;
} gts;

// count[n] ground truths for image n: random boxes (grid: corners on multiples of 1/8), labels
// 1..80; from the third on, box 1 repeated under another label and box 2 a default box's own.
static gts make_gts(int N, const int *count, const float *db, int D, int grid) {
    gts g = {N, D, 0, NULL, (float *)db, NULL, gt_host((size_t)(N + 1) * 4)};
    g.off[0] = 0;
    for (int n = 0; n < N; n++) g.off[n + 1] = g.off[n] + count[n];
    g.ngt = g.off[N];
    g.gt = gt_host((size_t)g.ngt * 16 + 16), g.lab = gt_host((size_t)g.ngt * 4 + 4);
    float *u = gt_host((size_t)g.ngt * 16 + 16);
    gt_fill(u, (size_t)g.ngt * 4, 0, 1, 0);
    for (int64_t j = 0; j < g.ngt; j++) {
        float *b = g.gt + j * 4, *r = u + j * 4;
        if (grid) {
            b[0] = floorf(r[0] * 7) / 8, b[1] = floorf(r[1] * 7) / 8;
            b[2] = fminf(1, b[0] + (1 + floorf(r[2] * 4)) / 8), b[3] = fminf(1, b[1] + (1 + floorf(r[3] * 4)) / 8);
        } else {
            b[0] = 0.8f * r[0], b[1] = 0.8f * r[1];
            b[2] = fminf(1, b[0] + 0.02f + 0.6f * r[2]), b[3] = fminf(1, b[1] + 0.02f + 0.6f * r[3]);
        }
        g.lab[j] = 1 + (int32_t)(gt_u32((uint64_t)j) % 80);
    }
    for (int n = 0; n < N; n++)
        if (count[n] >= 3) {
            float *b = g.gt + (size_t)g.off[n] * 4;
            memcpy(b + 4, b, 16), g.lab[g.off[n] + 1] = g.lab[g.off[n]] % 80 + 1;
            memcpy(b + 8, db + (size_t)(gt_u32(1000 + n) % (uint32_t)D) * 4, 16);
        }
    free(u);
    return g;
}
static void gts_free(gts *g) { free(g->gt), free(g->lab), free(g->off); }

// Matches g on both sides; the reference's labels and boxes into label / box (host) when not NULL.
static void match_case(const char *name, gts *g, int32_t *label, float *box, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const size_t nd = (size_t)g->N * g->D;
    float *dgt = gt_dev((size_t)g->ngt * 16 + 16), *ddb = gt_dev((size_t)g->D * 16), *dbox = gt_dev(nd * 16);
    int32_t *dlab = gt_dev((size_t)g->ngt * 4 + 4), *doff = gt_dev((size_t)(g->N + 1) * 4), *dlabel = gt_dev(nd * 4);
    void *ws = gt_dev(tk_ssd_match_ws_bytes(TK_BACKEND_CUDA, g->ngt));
    gt_up(dgt, g->gt, (size_t)g->ngt * 16), gt_up(ddb, g->db, (size_t)g->D * 16);
    gt_up(dlab, g->lab, (size_t)g->ngt * 4), gt_up(doff, g->off, (size_t)(g->N + 1) * 4);
    gt_poison(dbox, nd * 16, 0xff), gt_poison(dlabel, nd * 4, 0xff);
    CHECK_EQ_INT(tk_ssd_match(gt_ctx_, dgt, dlab, doff, g->N, g->ngt, ddb, g->D, TK_SSD_MATCH_IOU, dbox, dlabel, ws,
                              &e),
                 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    int32_t *rl = gt_host(nd * 4), *gl = gt_host(nd * 4);
    float *rb = gt_host(nd * 16), *gb = gt_host(nd * 16);
    CHECK_EQ_INT(tk_ssd_match_ref(g->gt, g->lab, g->off, g->N, g->ngt, g->db, g->D, TK_SSD_MATCH_IOU, rb, rl, &e), 0);
    gt_down(gl, dlabel, nd * 4), gt_down(gb, dbox, nd * 16);
    size_t dl = 0, pos = 0;
    for (size_t i = 0; i < nd; i++) dl += gl[i] != rl[i], pos += rl[i] > 0;
    const size_t db = gt_ndiff(gb, rb, nd * 4);
    printf("# table ssd match %-28s N%d D%d gts %lld: %zu positives, labels %zu differ, boxes %zu differ%s\n", name,
           g->N, g->D, (long long)g->ngt, pos, dl, db, dl || db ? "  <-- FAIL" : "");
    CHECK(dl == 0 && db == 0);
    if (label) memcpy(label, rl, nd * 4);
    if (box) memcpy(box, rb, nd * 16);
    void *dev[] = {dgt, ddb, dbox, dlab, doff, dlabel, ws};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    free(rl), free(gl), free(rb), free(gb);
}

TK_TEST(match_vs_reference) {
    need_dboxes();
    static const int counts[8] = {1, 3, 0, 10, 40, 93, 5, 2};
    gts g = make_gts(8, counts, dbox_ltrb, TK_SSD300_BOXES, 0);
    match_case("random", &g, NULL, NULL, tk_failed_);
    gts_free(&g);
    gts h = make_gts(8, counts, dbox_ltrb, TK_SSD300_BOXES, 1);
    match_case("grid-1/8", &h, NULL, NULL, tk_failed_);
    gts_free(&h);
    // quarters of the unit square: IoU ties everywhere
    static const float q[5][4] = {{0, 0, 0.5f, 0.5f}, {0.5f, 0, 1, 0.5f}, {0, 0.5f, 0.5f, 1}, {0.5f, 0.5f, 1, 1},
                                  {0, 0, 1, 1}};
    static const int c4[4] = {3, 0, 7, 4};
    gts k = make_gts(4, c4, q[0], 5, 1);
    match_case("quarters", &k, NULL, NULL, tk_failed_);
    gts_free(&k);
}

// Cross-entropy of box i (fp64) and the mining's margin of an image: the gap between the keys
// ranked nneg-1 and nneg (descending); 1 when nothing or everything is taken.
static double logit(const void *pconf, tk_dtype t, size_t j) {
    return t == TK_BF16 ? tk_bf16_to_f32(((const uint16_t *)pconf)[j]) : ((const float *)pconf)[j];
}
static double key_of(const void *pconf, tk_dtype t, size_t i, int C, int y) {
    double mx = -INFINITY, s = 0;
    for (int c = 0; c < C; c++) mx = fmax(mx, logit(pconf, t, i * C + c));
    for (int c = 0; c < C; c++) s += exp(logit(pconf, t, i * C + c) - mx);
    return y > 0 ? 0 : mx + log(s) - logit(pconf, t, i * C + y);
}
static int by_desc(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x < y) - (x > y);
}
static double margin(const void *pconf, tk_dtype t, const int32_t *label, int n, int D, int C) {
    double *k = gt_host((size_t)D * 8);
    int P = 0;
    for (int d = 0; d < D; d++) {
        const size_t i = (size_t)n * D + d;
        P += label[i] > 0, k[d] = key_of(pconf, t, i, C, label[i]);
    }
    qsort(k, (size_t)D, 8, by_desc);
    const int nneg = 3 * P < D ? 3 * P : D;
    const double m = nneg == 0 || nneg == D ? 1 : (k[nneg - 1] - k[nneg]) / (1 + fabs(k[nneg]));
    free(k);
    return m;
}

// x (n fp32) as type t in a new host array, the values rounded in place to what both sides see.
static void *as_type(float *x, size_t n, tk_dtype t) {
    gt_round(x, n, t);
    void *h = gt_host(n * tk_dtype_size(t));
    for (size_t i = 0; i < n; i++)
        if (t == TK_BF16) ((uint16_t *)h)[i] = tk_f32_to_bf16(x[i]);
        else ((float *)h)[i] = x[i];
    return h;
}

// n host values of type t as a new fp32 array.
static float *host_f32(const void *h, size_t n, tk_dtype t) {
    float *f = gt_host(n * 4);
    for (size_t i = 0; i < n; i++)
        f[i] = t == TK_BF16 ? tk_bf16_to_f32(((const uint16_t *)h)[i]) : ((const float *)h)[i];
    return f;
}

// The loss on both sides; ploc (N, D, 4) and pconf (N, D, C) host values in type t.
static void loss_case(const char *name, tk_dtype t, const void *ploc, const void *pconf, const float *gbox,
                      const int32_t *label, const float *dbox, int N, int D, int C, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    const size_t nd = (size_t)N * D, es = tk_dtype_size(t);
    void *dpl = gt_dev(nd * 4 * es), *dpc = gt_dev(nd * C * es), *dgl = gt_dev(nd * 4 * es), *dgc = gt_dev(nd * C * es);
    float *dgb = gt_dev(nd * 16), *ddb = gt_dev((size_t)D * 16), *dloss = gt_dev(4);
    int32_t *dlab = gt_dev(nd * 4);
    uint8_t *dsel = gt_dev(nd);
    void *ws = gt_dev(tk_ssd_loss_ws_bytes(TK_BACKEND_CUDA, N, D));
    gt_up(dpl, ploc, nd * 4 * es), gt_up(dpc, pconf, nd * C * es), gt_up(dgb, gbox, nd * 16);
    gt_up(ddb, dbox, (size_t)D * 16), gt_up(dlab, label, nd * 4);
    gt_poison(dgl, nd * 4 * es, 0xff), gt_poison(dgc, nd * C * es, 0xff), gt_poison(dsel, nd, 0xff);
    CHECK_EQ_INT(tk_ssd_loss(gt_ctx_, t, dpl, dpc, dgb, dlab, ddb, N, D, C, dloss, dgl, dgc, dsel, ws, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    float rl, gl, gl2;
    void *rgl = gt_host(nd * 4 * es), *rgc = gt_host(nd * C * es);
    uint8_t *rs = gt_host(nd), *gs = gt_host(nd);
    CHECK_EQ_INT(tk_ssd_loss_ref(t, ploc, pconf, gbox, label, dbox, N, D, C, &rl, rgl, rgc, rs, &e), 0);
    gt_down(&gl, dloss, 4), gt_down(gs, dsel, nd);
    size_t ds = 0, w2 = 0;
    for (size_t i = 0; i < nd; i++) ds += gs[i] != rs[i], w2 += rs[i] == 2;
    printf("# table ssd loss %s %s N%d D%d C%d: weights %zu differ (%zu of weight 2)%s\n", name, tk_dtype_name(t), N,
           D, C, ds, w2, ds ? "  <-- FAIL" : "");
    CHECK(ds == 0);
    char what[96];
    snprintf(what, sizeof what, "loss %s %s", name, tk_dtype_name(t));
    CHECK(close_enough(what, &gl, &rl, 1, 1e-5));
    const double tol = t == TK_BF16 ? 1e-2 : 1e-5;
    float *a = gt_host_from(dgl, nd * 4, t), *b = host_f32(rgl, nd * 4, t);
    snprintf(what, sizeof what, "dploc %s %s", name, tk_dtype_name(t));
    CHECK(close_enough(what, a, b, nd * 4, tol));
    free(a), free(b);
    a = gt_host_from(dgc, nd * C, t), b = host_f32(rgc, nd * C, t);
    snprintf(what, sizeof what, "dpconf %s %s", name, tk_dtype_name(t));
    CHECK(close_enough(what, a, b, nd * C, tol));
    free(a), free(b);
    // the training step's form: acc += (scale loss, 1) on the device, gradients times scale
    double acc[2] = {1, 2}, racc[2] = {1, 2}, *dacc = gt_dev(16);
    gt_up(dacc, acc, 16);
    CHECK_EQ_INT(tk_ssd_loss_acc(gt_ctx_, t, dpl, dpc, dgb, dlab, ddb, N, D, C, 0.25f, dacc, dloss, dgl, dgc, NULL, ws,
                                 &e),
                 0);
    CHECK_EQ_INT(tk_ssd_loss_acc_ref(t, ploc, pconf, gbox, label, dbox, N, D, C, 0.25f, racc, &rl, rgl, rgc, NULL, &e),
                 0);
    gt_down(acc, dacc, 16);
    CHECK(acc[1] == 3 && fabs(acc[0] - racc[0]) <= 1e-5 * fabs(racc[0]));
    a = gt_host_from(dgc, nd * C, t), b = host_f32(rgc, nd * C, t);
    snprintf(what, sizeof what, "dpconf scale 0.25 %s %s", name, tk_dtype_name(t));
    CHECK(close_enough(what, a, b, nd * C, tol));
    free(a), free(b);
    tk_free(gt_ctx_, dacc);
    // the value alone (no gradients, no weights) is the same number
    CHECK_EQ_INT(tk_ssd_loss(gt_ctx_, t, dpl, dpc, dgb, dlab, ddb, N, D, C, dloss, NULL, NULL, NULL, ws, &e), 0);
    gt_down(&gl2, dloss, 4);
    CHECK(gl2 == gl);
    void *dev[] = {dpl, dpc, dgl, dgc, dgb, ddb, dloss, dlab, dsel, ws};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    free(rgl), free(rgc), free(rs), free(gs);
}

TK_TEST(loss_vs_reference) {
    need_dboxes();
    enum { N = 8, D = TK_SSD300_BOXES, C = 81 };
    static const int counts[N] = {1, 3, 0, 10, 40, 93, 5, 2};
    gts g = make_gts(N, counts, dbox_ltrb, D, 0);
    int32_t *label = gt_host((size_t)N * D * 4);
    float *gbox = gt_host((size_t)N * D * 16);
    match_case("for-loss", &g, label, gbox, tk_failed_);
    for (int tt = 0; tt < 2; tt++) {
        const tk_dtype t = tt ? TK_BF16 : TK_F32;
        float *pl = gt_host((size_t)N * D * 16), *pc = gt_host((size_t)N * D * C * 4);
        gt_fill(pl, (size_t)N * D * 4, -3, 3, 0);
        void *hl = as_type(pl, (size_t)N * D * 4, t), *hc = NULL;
        int redrawn = 0;
        for (int n = 0; n < N; n++) // redraw an image's logits while its mining threshold is a near-tie
            for (int tries = 0;; tries++) {
                gt_fill(pc + (size_t)n * D * C, (size_t)D * C, -4, 4, 0);
                free(hc);
                hc = as_type(pc, (size_t)N * D * C, t);
                if (margin(hc, t, label, n, D, C) > 1e-4 || tries == 20) break;
                redrawn++;
            }
        printf("# %d image(s) redrawn for a near-tie at the mining threshold\n", redrawn);
        loss_case("random", t, hl, hc, gbox, label, dbox_xywh, N, D, C, tk_failed_);
        // all logits 0: every cross-entropy log 81, tied; the mining takes negatives by index
        for (size_t i = 0; i < (size_t)N * D * C; i++) pc[i] = 0;
        free(hc);
        hc = as_type(pc, (size_t)N * D * C, t);
        loss_case("tied", t, hl, hc, gbox, label, dbox_xywh, N, D, C, tk_failed_);
        free(pl), free(pc), free(hl), free(hc);
    }
    // 2 positives of 3 boxes: all three ranked in, the positives with weight 2; and 5 positives
    // of 8 with small-integer logits
    const float a[4] = {0.5f, 0.5f, 0.5f, 0.25f};
    float db[8 * 4], gb[8 * 4], pl[8 * 4] = {0}, pc[8 * 3];
    for (int d = 0; d < 8; d++) memcpy(db + d * 4, a, 16), memcpy(gb + d * 4, a, 16);
    gt_fill(pl, 32, -2, 2, 1);
    gt_fill(pc, 24, -2, 2, 1);
    const int32_t l3[3] = {1, 1, 0}, l8[8] = {1, 0, 2, 2, 0, 1, 0, 2};
    float z[6] = {0};
    loss_case("weight-2", TK_F32, pl, z, gb, l3, db, 1, 3, 2, tk_failed_);
    loss_case("ints", TK_F32, pl, pc, gb, l8, db, 1, 8, 3, tk_failed_);
    // the terms kernel's forms by width: 40 classes (two values a lane held in registers) and 130
    // (wider than the register form: the row read once per pass); 8 boxes, not a multiple of the
    // gradient's 32 boxes a warp
    for (int wide = 0; wide < 2; wide++) {
        const int cw = wide ? 130 : 40;
        float *pw = gt_host((size_t)8 * cw * 4);
        gt_fill(pw, (size_t)8 * cw, -4, 4, 0);
        loss_case(wide ? "130-classes" : "40-classes", TK_F32, pl, pw, gb, l8, db, 1, 8, cw, tk_failed_);
        free(pw);
    }
    gts_free(&g);
    free(label), free(gbox);
}

// The matching and the loss with its gradients at a batch of 32 (bf16): time per call.
static struct {
    void *pl, *pc, *gl, *gc, *ws, *mws;
    float *gb, *db, *dbl, *loss, *gt;
    int32_t *lab, *glab, *off;
    int64_t ngt;
} bm;
static void match_run(void *arg) {
    (void)arg;
    tk_err e = {0};
    tk_ssd_match(gt_ctx_, bm.gt, bm.glab, bm.off, 32, bm.ngt, bm.dbl, TK_SSD300_BOXES, TK_SSD_MATCH_IOU, bm.gb, bm.lab,
                 bm.mws, &e);
}
static void loss_run(void *arg) {
    (void)arg;
    tk_err e = {0};
    tk_ssd_loss(gt_ctx_, TK_BF16, bm.pl, bm.pc, bm.gb, bm.lab, bm.db, 32, TK_SSD300_BOXES, 81, bm.loss, bm.gl, bm.gc,
                NULL, bm.ws, &e);
}
TK_TEST(ssd_box_timing) {
    need_dboxes();
    enum { N = 32, D = TK_SSD300_BOXES, C = 81 };
    int counts[N];
    for (int n = 0; n < N; n++) counts[n] = 1 + (int)(gt_u32(77 + n) % 20);
    gts g = make_gts(N, counts, dbox_ltrb, D, 0);
    const size_t nd = (size_t)N * D;
    bm.ngt = g.ngt;
    bm.gt = gt_dev((size_t)g.ngt * 16), bm.glab = gt_dev((size_t)g.ngt * 4), bm.off = gt_dev((N + 1) * 4);
    gt_up(bm.gt, g.gt, (size_t)g.ngt * 16), gt_up(bm.glab, g.lab, (size_t)g.ngt * 4), gt_up(bm.off, g.off, (N + 1) * 4);
    bm.dbl = gt_dev(D * 16), bm.db = gt_dev(D * 16), bm.gb = gt_dev(nd * 16), bm.lab = gt_dev(nd * 4);
    gt_up(bm.dbl, dbox_ltrb, D * 16), gt_up(bm.db, dbox_xywh, D * 16);
    bm.mws = gt_dev(tk_ssd_match_ws_bytes(TK_BACKEND_CUDA, g.ngt));
    bm.ws = gt_dev(tk_ssd_loss_ws_bytes(TK_BACKEND_CUDA, N, D));
    float *x = gt_host(nd * C * 4);
    gt_fill(x, nd * C, -4, 4, 0);
    bm.pc = gt_dev_from(x, nd * C, TK_BF16), bm.pl = gt_dev_from(x, nd * 4, TK_BF16);
    bm.gl = gt_dev(nd * 8), bm.gc = gt_dev(nd * C * 2), bm.loss = gt_dev(4);
    const double mm = gt_time_ms(match_run, NULL, 9), ml = gt_time_ms(loss_run, NULL, 9);
    printf("# table ssd match N32 D8732 (%lld gts): %.3f ms; loss fwd+bwd bf16 C81: %.3f ms, %.0f GB/s counted\n",
           (long long)g.ngt, mm, ml, (double)nd * C * 2 * 3 / ml / 1e6); // logits read twice, gradient written
    CHECK(mm > 0 && ml > 0);
    tk_err e = {0};
    CHECK_EQ_INT(gt_sync(&e), 0);
    void *dev[] = {bm.pl, bm.pc, bm.gl, bm.gc, bm.ws, bm.mws, bm.gb, bm.db, bm.dbl, bm.loss, bm.gt, bm.lab, bm.glab,
                   bm.off};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    free(x);
    gts_free(&g);
}
