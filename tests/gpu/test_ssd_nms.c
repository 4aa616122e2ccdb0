// SSD's evaluation post-processing (kernels/ssd_nms.h) on the cuda backend against its CPU
// reference: fresh random SSD300 inputs (8732 anchors, 81 classes; one class with more than 200
// candidates so the per-class cap and the bisection for the 200th key run), logits in fp32 and
// bf16, quantised probabilities full of ties, an exact small case, and odd shapes and parameters.
// Both sides share the arithmetic of ssd_nms.h (every fp32 operation rounded once, the same exp),
// so everything must be bit-exact: counts, labels, scores and boxes, and zeros after the count.
#include "gpu_test.h"
#include "ssd_nms.h"
#include "../unit/ssd_nms_case.h"

typedef struct {
    int N, A, C;
    tk_dtype t;
    tk_ssd_nms_params p;
    float *loc, *conf, *dbox; // host fp32 (rounded to t)
} nms_case;

typedef struct {
    float *box, *score;
    int32_t *label, *count;
} nms_out;

static nms_out out_alloc(const nms_case *k) {
    const size_t O = (size_t)k->N * k->p.max_out;
    nms_out o = {gt_host(O * 16), gt_host(O * 4), gt_host(O * 4), gt_host((size_t)k->N * 4)};
    return o;
}
static void out_free(nms_out o) { free(o.box), free(o.score), free(o.label), free(o.count); }

// Runs the case on the device (outputs poisoned first) and on the CPU; 1 when they agree bit for bit.
static int run_case(const char *name, nms_case *k) {
    const size_t nl = (size_t)k->N * k->A * 4, nc = (size_t)k->N * k->A * k->C, O = (size_t)k->N * k->p.max_out;
    void *dl = gt_dev_from(k->loc, nl, k->t), *dc = gt_dev_from(k->conf, nc, k->t);
    float *dd = gt_dev((size_t)k->A * 16);
    gt_up(dd, k->dbox, (size_t)k->A * 16);
    float *db = gt_dev(O * 16), *ds = gt_dev(O * 4);
    int32_t *dla = gt_dev(O * 4), *dcn = gt_dev((size_t)k->N * 4);
    gt_poison(db, O * 16, 0xff), gt_poison(ds, O * 4, 0xff), gt_poison(dla, O * 4, 0xff);
    gt_poison(dcn, (size_t)k->N * 4, 0xff);
    void *ws = gt_dev(tk_ssd_nms_ws_bytes(TK_BACKEND_CUDA, k->N, k->A, k->C, &k->p) + 16);
    tk_err e = {0};
    int rc = tk_ssd_nms(gt_ctx_, k->t, dl, dc, dd, k->N, k->A, k->C, &k->p, db, ds, dla, dcn, ws, &e);
    if (!rc) rc = gt_sync(&e);
    if (rc) gt_die_("tk_ssd_nms", &e);
    nms_out g = out_alloc(k), r = out_alloc(k);
    gt_down(g.box, db, O * 16), gt_down(g.score, ds, O * 4), gt_down(g.label, dla, O * 4);
    gt_down(g.count, dcn, (size_t)k->N * 4);
    // the reference reads the same rounded values (bf16 as bf16)
    void *hl = gt_host(nl * tk_dtype_size(k->t)), *hc = gt_host(nc * tk_dtype_size(k->t));
    gt_down(hl, dl, nl * tk_dtype_size(k->t)), gt_down(hc, dc, nc * tk_dtype_size(k->t));
    if (tk_ssd_nms_ref(k->t, hl, hc, k->dbox, k->N, k->A, k->C, &k->p, r.box, r.score, r.label, r.count, &e))
        gt_die_("tk_ssd_nms_ref", &e);
    size_t bad = 0, dets = 0;
    for (int n = 0; n < k->N; n++) bad += g.count[n] != r.count[n], dets += (size_t)r.count[n];
    bad += (size_t)memcmp(g.label, r.label, O * 4) != 0;
    const size_t db_ = gt_ndiff(g.box, r.box, O * 4), ds_ = gt_ndiff(g.score, r.score, O);
    printf("# table ssd_nms %-34s %6zu detections, %zu boxes / %zu scores differ, rel err %.1e%s\n", name, dets,
           db_ / 4, ds_, gt_relerr(g.box, r.box, O * 4), bad || db_ || ds_ ? "  <-- FAIL" : "");
    tk_free(gt_ctx_, dl), tk_free(gt_ctx_, dc), tk_free(gt_ctx_, dd), tk_free(gt_ctx_, db), tk_free(gt_ctx_, ds);
    tk_free(gt_ctx_, dla), tk_free(gt_ctx_, dcn), tk_free(gt_ctx_, ws);
    free(hl), free(hc), out_free(g), out_free(r);
    return !bad && !db_ && !ds_;
}

static void ssd300_case(nms_case *k, int N, tk_dtype t) {
    k->N = N, k->A = SSD300_ANCHORS, k->C = SSD300_CLASSES, k->t = t, k->p = tk_ssd_nms_defaults();
    k->dbox = gt_host((size_t)k->A * 16);
    ssd_case_dboxes300(k->dbox);
    k->loc = gt_host((size_t)N * k->A * 16), k->conf = gt_host((size_t)N * k->A * k->C * 4);
    gt_fill(k->loc, (size_t)N * k->A * 4, -2, 2, 0);
    gt_fill(k->conf, (size_t)N * k->A * k->C, -3, 3, 0);
    for (size_t i = 0; i < (size_t)N * k->A; i++) k->conf[i * k->C + 1] += 4; // class 1: > 200 candidates
}
static void case_free(nms_case *k) { free(k->loc), free(k->conf), free(k->dbox); }

TK_TEST(ssd300_logits_f32_bit_exact) {
    nms_case k;
    ssd300_case(&k, 4, TK_F32);
    CHECK(run_case("ssd300 f32 N=4", &k));
    case_free(&k);
}

TK_TEST(ssd300_logits_bf16_bit_exact) {
    nms_case k;
    ssd300_case(&k, 3, TK_BF16);
    CHECK(run_case("ssd300 bf16 N=3", &k));
    case_free(&k);
}

TK_TEST(quantised_probabilities_ties_bit_exact) {
    nms_case k;
    ssd300_case(&k, 2, TK_F32);
    k.p.softmax = 0;
    gt_fill(k.conf, (size_t)2 * k.A * k.C, 0, 7, 1);
    for (size_t i = 0; i < (size_t)2 * k.A * k.C; i++) k.conf[i] /= 32; // 0 .. 7/32: ties everywhere
    CHECK(run_case("ssd300 ties (probabilities)", &k));
    case_free(&k);
}

TK_TEST(small_exact_case) {
    // three boxes in eighths (IoU(A, B) = 0.5 exactly, IoU(A, C) = 1/3), zero offsets
    float dbox[3][4] = {{0.375f, 0.125f, 0.75f, 0.25f}, {0.625f, 0.125f, 0.75f, 0.25f}, {0.75f, 0.125f, 0.75f, 0.25f}};
    float loc[12] = {0}, conf[6] = {0, 0.9f, 0, 0.8f, 0, 0.7f};
    nms_case k = {1, 3, 2, TK_F32, tk_ssd_nms_defaults(), loc, conf, &dbox[0][0]};
    k.p.softmax = 0;
    CHECK(run_case("small exact", &k));
}

TK_TEST(odd_shapes_and_parameters) {
    // 37 images of 1000 anchors and 7 classes, 3 candidates a class, 5 detections an image, a
    // higher threshold; and 2 images with nothing above the threshold
    nms_case k = {37, 1000, 7, TK_F32, tk_ssd_nms_defaults(), NULL, NULL, NULL};
    k.p.max_num = 3, k.p.max_out = 5, k.p.score_min = 0.2f, k.p.iou = 0.3f;
    k.dbox = gt_host((size_t)k.A * 16), k.loc = gt_host((size_t)k.N * k.A * 16);
    k.conf = gt_host((size_t)k.N * k.A * k.C * 4);
    gt_fill(k.dbox, (size_t)k.A * 4, 0.05f, 0.5f, 0);
    gt_fill(k.loc, (size_t)k.N * k.A * 4, -1, 1, 0);
    gt_fill(k.conf, (size_t)k.N * k.A * k.C, -2, 2, 0);
    CHECK(run_case("N=37 A=1000 C=7 max_num 3 max_out 5", &k));
    k.N = 2, k.p.score_min = 0.99f;
    CHECK(run_case("nothing above the threshold", &k));
    case_free(&k);
}

typedef struct {
    nms_case *k;
    void *dl, *dc, *dd, *db, *ds, *dla, *dcn, *ws;
} bench_arg;
static void bench_fn(void *a) {
    bench_arg *b = a;
    tk_err e;
    if (tk_ssd_nms(gt_ctx_, b->k->t, b->dl, b->dc, b->dd, b->k->N, b->k->A, b->k->C, &b->k->p, b->db, b->ds, b->dla,
                   b->dcn, b->ws, &e))
        gt_die_("tk_ssd_nms", &e);
}

TK_TEST(ssd300_batch_time) {
    (void)tk_failed_; // a timing, no check
    nms_case k;
    ssd300_case(&k, 32, TK_BF16);
    const size_t O = (size_t)k.N * k.p.max_out;
    bench_arg b = {&k,
                   gt_dev_from(k.loc, (size_t)k.N * k.A * 4, k.t),
                   gt_dev_from(k.conf, (size_t)k.N * k.A * k.C, k.t),
                   gt_dev((size_t)k.A * 16), gt_dev(O * 16), gt_dev(O * 4), gt_dev(O * 4), gt_dev((size_t)k.N * 4),
                   gt_dev(tk_ssd_nms_ws_bytes(TK_BACKEND_CUDA, k.N, k.A, k.C, &k.p))};
    gt_up(b.dd, k.dbox, (size_t)k.A * 16);
    printf("# table ssd_nms time N=32 SSD300 bf16: %.3f ms\n", gt_time_ms(bench_fn, &b, 5));
    void *ps[] = {b.dl, b.dc, b.dd, b.db, b.ds, b.dla, b.dcn, b.ws};
    for (int i = 0; i < 8; i++) tk_free(gt_ctx_, ps[i]);
    case_free(&k);
}
