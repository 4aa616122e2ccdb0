// SSD300's box math on the cpu backend (kernels/ssd_box.h): the default boxes at the places where
// dboxes300_coco's formula is easy to follow by hand, matchings of boxes on a half-unit grid whose
// IoUs are worked out here (a ground truth equal to a default box, ties both ways, IoU exactly at the
// threshold, two ground truths with one best default box, an image without objects), the loss on
// cases small enough to add up by hand (all negatives taken, a tie in the mining, positives ranked
// in as negatives, an image without positives), and the gradients against central differences where
// the mining's selection and the Smooth L1's branch stay put.
//
// Also the C side of tests/cli/ssd-ops-oracle.bats: `test_ssd_box --drive DIR` reads DIR/params.txt
// ("N D C NGT"; D 0: dboxes300_coco, written to DIR/dbox_xywh.f32 and DIR/dbox_ltrb.f32; else
// those two files are inputs), DIR/gt.f32 (NGT, 4) ltrb, DIR/gt_label.i32 (NGT), DIR/gt_off.i32
// (N + 1), DIR/ploc.f32 (N, 4, D) and DIR/plabel.f32 (N, C, D) in the reference's channel-major
// layout; runs tk_ssd_match and tk_ssd_loss on the cpu backend and writes DIR/box.f32 (N, D, 4),
// DIR/label.i32 (N, D), DIR/sel.u8 (N, D), DIR/dloc.f32 (N, 4, D) and DIR/dconf.f32 (N, C, D)
// (channel-major again), and prints "loss L" (%.9g); an error goes to stderr with its code.
#include <math.h>
#include <string.h>

#include "ssd_box.h"

#define main tk_test_main
#include "tk_test.h"
#undef main
#include "tk_test_cpu.h"

// ---- default boxes ----

// Box k of dboxes300_coco, by hand from the formula: (cx, cy, w, h) before the fp32 clamp.
static void expect_box(const float *xywh, const float *ltrb, int k, double cx, double cy, double w, double h,
                       int *tk_failed_) {
    const float want[4] = {(float)cx, (float)cy, (float)w > 1 ? 1.0f : (float)w, (float)h > 1 ? 1.0f : (float)h};
    for (int q = 0; q < 4; q++) CHECK(xywh[k * 4 + q] == want[q]);
    CHECK(ltrb[k * 4 + 0] == want[0] - 0.5f * want[2] && ltrb[k * 4 + 1] == want[1] - 0.5f * want[3]);
    CHECK(ltrb[k * 4 + 2] == want[0] + 0.5f * want[2] && ltrb[k * 4 + 3] == want[1] + 0.5f * want[3]);
}

TK_TEST(dboxes300_by_hand) {
    tk_err e = {0};
    CHECK_EQ_INT(tk_ssd_dbox_count(&tk_ssd300_coco), TK_SSD300_BOXES);
    float *xywh = malloc(TK_SSD300_BOXES * 16), *ltrb = malloc(TK_SSD300_BOXES * 16);
    CHECK_EQ_INT(tk_ssd_dboxes(&tk_ssd300_coco, xywh, ltrb, &e), 0);
    const double s1 = 21 / 300.0, s2 = 45 / 300.0, f0 = 300 / 8.0;
    // map 0 (38 x 38, 4 sizes): cells row by row within each size, sizes in the reference's order
    expect_box(xywh, ltrb, 0, 0.5 / f0, 0.5 / f0, s1, s1, tk_failed_);
    expect_box(xywh, ltrb, 1, 1.5 / f0, 0.5 / f0, s1, s1, tk_failed_);
    expect_box(xywh, ltrb, 38, 0.5 / f0, 1.5 / f0, s1, s1, tk_failed_);
    expect_box(xywh, ltrb, 1444, 0.5 / f0, 0.5 / f0, sqrt(s1 * s2), sqrt(s1 * s2), tk_failed_);
    expect_box(xywh, ltrb, 2888 + 1443, 37.5 / f0, 37.5 / f0, s1 * sqrt(2), s1 / sqrt(2), tk_failed_);
    expect_box(xywh, ltrb, 4332, 0.5 / f0, 0.5 / f0, s1 / sqrt(2), s1 * sqrt(2), tk_failed_);
    CHECK(ltrb[0] < 0); // the clamp is on xywh, not on the ltrb form
    // map 1 (19 x 19, 6 sizes) starts at 4 * 38^2 = 5776; its ratio-3 pair is sizes 4 and 5
    const double f1 = 300 / 16.0;
    expect_box(xywh, ltrb, 5776, 0.5 / f1, 0.5 / f1, s2, s2, tk_failed_);
    expect_box(xywh, ltrb, 5776 + 4 * 361 + 20, 1.5 / f1, 1.5 / f1, s2 * sqrt(3), s2 / sqrt(3), tk_failed_);
    // map 5 (1 x 1) is the last 4: scale 261, s' = sqrt(261 315) / 300, ratio 2 clamps w or h to 1
    const double s5 = 261 / 300.0;
    expect_box(xywh, ltrb, 8728, 0.5, 0.5, s5, s5, tk_failed_);
    expect_box(xywh, ltrb, 8729, 0.5, 0.5, sqrt(s5 * 315 / 300.0), sqrt(s5 * 315 / 300.0), tk_failed_);
    expect_box(xywh, ltrb, 8730, 0.5, 0.5, s5 * sqrt(2), s5 / sqrt(2), tk_failed_);
    expect_box(xywh, ltrb, 8731, 0.5, 0.5, s5 / sqrt(2), s5 * sqrt(2), tk_failed_);
    CHECK(xywh[8730 * 4 + 2] == 1.0f && ltrb[8730 * 4 + 0] == 0.0f && ltrb[8730 * 4 + 2] == 1.0f);
    // map 3 (5 x 5, step 64, scale 153) ends at 5776 + 2166 + 600 + 150: its last cell of its last
    // size (ratio 3, tall), centre (4.5 / (300 / 64), same)
    expect_box(xywh, ltrb, 8691, 4.5 * 64 / 300.0, 4.5 * 64 / 300.0, 153 / 300.0 / sqrt(3), 153 / 300.0 * sqrt(3),
               tk_failed_);
    tk_ssd_dbox_cfg bad = tk_ssd300_coco;
    bad.nar[2] = 5;
    CHECK_EQ_INT(tk_ssd_dbox_count(&bad), -1);
    CHECK_EQ_INT(tk_ssd_dboxes(&bad, xywh, NULL, &e), TK_EINTERNAL);
    free(xywh), free(ltrb);
}

// ---- matching ----

// One image: G ground truths against D default boxes; label and box out (D, 4 xywh).
static int match1(const float *db, int D, const float *gt, const int32_t *lab, int G, int32_t *label, float *box) {
    tk_err e = {0};
    const int32_t off[2] = {0, G};
    return tk_ssd_match(tk_test_cpu(), gt, lab, off, 1, G, db, D, TK_SSD_MATCH_IOU, box, label, NULL, &e);
}

// Quarters of the unit square and the whole: IoUs on this grid are exact or equal by symmetry.
static const float quarters[5][4] = {{0, 0, 0.5f, 0.5f}, {0.5f, 0, 1, 0.5f}, {0, 0.5f, 0.5f, 1}, {0.5f, 0.5f, 1, 1},
                                     {0, 0, 1, 1}};

TK_TEST(match_gt_equal_to_a_default_box) {
    const float gt[4] = {0, 0, 0.5f, 0.5f};
    const int32_t lab[1] = {7};
    int32_t label[5];
    float box[20];
    CHECK_EQ_INT(match1(quarters[0], 5, gt, lab, 1, label, box), 0);
    const int32_t want[5] = {7, 0, 0, 0, 0}; // IoU 1 with box 0; 0.25 with the whole; 0 with the rest
    for (int d = 0; d < 5; d++) CHECK_EQ_INT(label[d], want[d]);
    const float b0[4] = {0.25f, 0.25f, 0.5f, 0.5f}, b1[4] = {0.75f, 0.25f, 0.5f, 0.5f}, b4[4] = {0.5f, 0.5f, 1, 1};
    for (int q = 0; q < 4; q++) CHECK(box[q] == b0[q] && box[4 + q] == b1[q] && box[16 + q] == b4[q]);
}

TK_TEST(match_ties_take_the_first) {
    int32_t label[5];
    float box[20];
    // IoU 1/3 with boxes 0 and 1 (a tie): the ground truth's best is box 0, forced; box 1 stays
    // background (1/3 <= 0.5)
    const float gt[4] = {0.25f, 0, 0.75f, 0.5f};
    const int32_t lab[1] = {5};
    CHECK_EQ_INT(match1(quarters[0], 5, gt, lab, 1, label, box), 0);
    const int32_t want[5] = {5, 0, 0, 0, 0};
    for (int d = 0; d < 5; d++) CHECK_EQ_INT(label[d], want[d]);
    CHECK(box[0] == 0.5f && box[1] == 0.25f && box[2] == 0.5f && box[3] == 0.5f);
    // a default box with IoU 0.75 to two ground truths (each the exact match of another box) takes
    // the first in ground-truth order
    const float db[3][4] = {{0, 0, 1, 0.75f}, {0, 0.25f, 1, 1}, {0, 0, 1, 1}};
    const float ab[8] = {0, 0, 1, 0.75f, 0, 0.25f, 1, 1}, ba[8] = {0, 0.25f, 1, 1, 0, 0, 1, 0.75f};
    const int32_t l12[2] = {1, 2}, l21[2] = {2, 1};
    CHECK_EQ_INT(match1(db[0], 3, ab, l12, 2, label, box), 0);
    CHECK(label[0] == 1 && label[1] == 2 && label[2] == 1);
    CHECK_EQ_INT(match1(db[0], 3, ba, l21, 2, label, box), 0);
    CHECK(label[0] == 1 && label[1] == 2 && label[2] == 2);
    CHECK(box[8] == 0.5f && box[9] == 0.625f && box[10] == 1 && box[11] == 0.75f);
}

TK_TEST(match_threshold_is_strict) {
    // IoU exactly 0.5 with boxes 0, 1 and the whole: only the forced best (box 0) matches
    const float gt[4] = {0, 0, 1, 0.5f};
    const int32_t lab[1] = {4};
    int32_t label[5];
    float box[20];
    CHECK_EQ_INT(match1(quarters[0], 5, gt, lab, 1, label, box), 0);
    const int32_t want[5] = {4, 0, 0, 0, 0};
    for (int d = 0; d < 5; d++) CHECK_EQ_INT(label[d], want[d]);
    // IoU 0.9 (> 0.5) with a second box: both match, the second without forcing
    const float db[2][4] = {{0, 0, 0.5f, 0.5f}, {0, 0, 0.5f, 0.45f}};
    const float g2[4] = {0, 0, 0.5f, 0.5f};
    CHECK_EQ_INT(match1(db[0], 2, g2, lab, 1, label, box), 0);
    CHECK(label[0] == 4 && label[1] == 4);
    CHECK(box[4] == 0.25f && box[5] == 0.25f && box[6] == 0.5f && box[7] == 0.5f); // the ground truth's box
}

TK_TEST(match_shared_best_goes_to_the_later_ground_truth) {
    // both have box 0 as their best (IoU 1 and 0.8); forcing runs in ground-truth order, so the
    // later one takes it and the other is nobody's best (it appears nowhere)
    const float pq[8] = {0, 0, 0.5f, 0.5f, 0, 0, 0.5f, 0.4f}, qp[8] = {0, 0, 0.5f, 0.4f, 0, 0, 0.5f, 0.5f};
    const int32_t l12[2] = {1, 2}, l21[2] = {2, 1};
    int32_t label[5];
    float box[20];
    CHECK_EQ_INT(match1(quarters[0], 5, pq, l12, 2, label, box), 0);
    CHECK(label[0] == 2 && label[1] == 0 && label[2] == 0 && label[3] == 0 && label[4] == 0);
    CHECK(box[0] == 0.25f && box[1] == 0.2f && box[2] == 0.5f && box[3] == 0.4f);
    CHECK_EQ_INT(match1(quarters[0], 5, qp, l21, 2, label, box), 0);
    CHECK(label[0] == 1 && label[1] == 0 && label[4] == 0);
    CHECK(box[0] == 0.25f && box[1] == 0.25f && box[3] == 0.5f);
}

TK_TEST(match_batch_with_an_empty_image) {
    // images: one ground truth, none, two; the batched call equals the single ones
    const float gt[12] = {0, 0, 0.5f, 0.5f, 0, 0, 0.5f, 0.4f, 0.5f, 0.5f, 1, 1};
    const int32_t lab[3] = {3, 8, 9}, off[4] = {0, 1, 1, 3};
    int32_t label[15], one[5];
    float box[60], ob[20];
    tk_err e = {0};
    CHECK_EQ_INT(tk_ssd_match(tk_test_cpu(), gt, lab, off, 3, 3, quarters[0], 5, 0.5f, box, label, NULL, &e), 0);
    CHECK_EQ_INT(match1(quarters[0], 5, gt, lab, 1, one, ob), 0);
    CHECK(memcmp(one, label, sizeof one) == 0 && memcmp(ob, box, sizeof ob) == 0);
    CHECK_EQ_INT(match1(quarters[0], 5, gt + 4, lab + 1, 2, one, ob), 0);
    CHECK(memcmp(one, label + 10, sizeof one) == 0 && memcmp(ob, box + 40, sizeof ob) == 0);
    CHECK(one[0] == 8 && one[3] == 9 && one[1] == 0 && one[4] == 0);
    for (int d = 0; d < 5; d++) { // the empty image: background, each default box's own xywh
        const float *q = quarters[d], *b = box + 20 + d * 4;
        CHECK_EQ_INT(label[5 + d], 0);
        CHECK(b[0] == 0.5f * (q[0] + q[2]) && b[1] == 0.5f * (q[1] + q[3]) && b[2] == q[2] - q[0] &&
              b[3] == q[3] - q[1]);
    }
    const int32_t bad[4] = {0, 2, 1, 3};
    CHECK_EQ_INT(tk_ssd_match(tk_test_cpu(), gt, lab, bad, 3, 3, quarters[0], 5, 0.5f, box, label, NULL, &e),
                 TK_EINTERNAL);
}

// ---- loss ----

typedef struct {
    int N, D, C;
    float *ploc, *pconf, *gbox, *dbox, *dloc, *dconf;
    int32_t *label;
    uint8_t *sel;
} lcase;

static lcase lcase_new(int N, int D, int C) {
    lcase k = {N, D, C, calloc((size_t)N * D * 4, 4), calloc((size_t)N * D * C, 4), calloc((size_t)N * D * 4, 4),
               calloc((size_t)D * 4, 4), calloc((size_t)N * D * 4, 4), calloc((size_t)N * D * C, 4),
               calloc((size_t)N * D, 4), calloc((size_t)N * D, 1)};
    for (int d = 0; d < D; d++) { // every default box (0.5, 0.5, 0.5, 0.25); ground truth the same
        const float a[4] = {0.5f, 0.5f, 0.5f, 0.25f};
        memcpy(k.dbox + d * 4, a, 16);
        for (int n = 0; n < N; n++) memcpy(k.gbox + ((size_t)n * D + d) * 4, a, 16);
    }
    return k;
}
static void lcase_free(lcase *k) {
    free(k->ploc), free(k->pconf), free(k->gbox), free(k->dbox), free(k->dloc), free(k->dconf), free(k->label),
        free(k->sel);
}
static int lcase_run(lcase *k, float *loss) {
    tk_err e = {0};
    return tk_ssd_loss(tk_test_cpu(), TK_F32, k->ploc, k->pconf, k->gbox, k->label, k->dbox, k->N, k->D, k->C, loss,
                       k->dloc, k->dconf, k->sel, NULL, &e);
}

TK_TEST(loss_all_negatives_taken) {
    // one positive (box 0, class 2) whose target is (1.25, 0, 0, 0): ground truth x 0.5625 against
    // the default box's 0.5 and width 0.5; residuals (0.5, -2, 0, 0.25): Smooth L1 0.125 + 1.5 +
    // 0 + 0.03125. Logits 0: every cross-entropy log 3; 3 negatives wanted, 3 there: all weight 1.
    lcase k = lcase_new(1, 4, 3);
    k.label[0] = 2, k.gbox[0] = 0.5625f;
    const float p[4] = {1.75f, -2, 0, 0.25f};
    memcpy(k.ploc, p, 16);
    float loss;
    CHECK_EQ_INT(lcase_run(&k, &loss), 0);
    CHECK_NEAR(loss, 1.65625 + 4 * log(3.0), 1e-6);
    const float dl[4] = {0.5f, -1, 0, 0.25f};
    for (int q = 0; q < 4; q++) CHECK_NEAR(k.dloc[q], dl[q], 1e-7);
    for (int q = 4; q < 16; q++) CHECK(k.dloc[q] == 0);
    for (int d = 0; d < 4; d++) {
        CHECK_EQ_INT(k.sel[d], 1);
        for (int c = 0; c < 3; c++) CHECK_NEAR(k.dconf[d * 3 + c], 1 / 3.0 - (c == k.label[d]), 1e-7);
    }
    lcase_free(&k);
}

TK_TEST(loss_mining_ties_go_by_index) {
    // box 1 positive (class 2); negatives' cross-entropies: boxes 2 and 4 log(2 + e), boxes 0, 3
    // and 5 log 3; 3 negatives: 2 and 4, then of the three tied at log 3 the first, box 0
    lcase k = lcase_new(1, 6, 3);
    k.label[1] = 2;
    k.pconf[2 * 3 + 1] = 1, k.pconf[4 * 3 + 1] = 1;
    float loss;
    CHECK_EQ_INT(lcase_run(&k, &loss), 0);
    const uint8_t want[6] = {1, 1, 1, 0, 1, 0};
    for (int d = 0; d < 6; d++) CHECK_EQ_INT(k.sel[d], want[d]);
    CHECK_NEAR(loss, 2 * log(3.0) + 2 * log(2 + exp(1.0)), 1e-6);
    for (int c = 0; c < 3; c++) CHECK(k.dconf[3 * 3 + c] == 0 && k.dconf[5 * 3 + c] == 0);
    CHECK_NEAR(k.dconf[2 * 3 + 1], exp(1.0) / (2 + exp(1.0)), 1e-7);
    CHECK_NEAR(k.dconf[2 * 3 + 0], 1 / (2 + exp(1.0)) - 1, 1e-7);
    for (int q = 0; q < 24; q++) CHECK(k.dloc[q] == 0); // the positive's residuals are 0
    lcase_free(&k);
}

TK_TEST(loss_positives_ranked_as_negatives_count_twice) {
    // 2 positives of 3 boxes: min(3 * 2, 3) = 3 ranked in, the two positives' keys (0) included:
    // weights 2, 2, 1; all cross-entropies log 2; loss 5 log 2 / 2
    lcase k = lcase_new(1, 3, 2);
    k.label[0] = 1, k.label[1] = 1;
    float loss;
    CHECK_EQ_INT(lcase_run(&k, &loss), 0);
    CHECK(k.sel[0] == 2 && k.sel[1] == 2 && k.sel[2] == 1);
    CHECK_NEAR(loss, 5 * log(2.0) / 2, 1e-6);
    CHECK_NEAR(k.dconf[0], 0.5, 1e-7); // q w (p - y) = (1/2) 2 (0.5 - 0)
    CHECK_NEAR(k.dconf[1], -0.5, 1e-7);
    CHECK_NEAR(k.dconf[4], -0.25, 1e-7); // box 2, background: (1/2) 1 (0.5 - 1)
    CHECK_NEAR(k.dconf[5], 0.25, 1e-7);
    lcase_free(&k);
}

TK_TEST(loss_image_without_positives_counts_zero_in_the_mean) {
    // image 0 as in loss_all_negatives_taken, image 1 without positives (random logits): the mean
    // over 2 images halves image 0's loss and gradients; image 1 has none
    lcase k = lcase_new(2, 4, 3);
    k.label[0] = 2, k.gbox[0] = 0.5625f;
    const float p[4] = {1.75f, -2, 0, 0.25f};
    memcpy(k.ploc, p, 16);
    tk_test_fill(k.pconf + 12, 12, 0x55d, 1, -3, 3);
    tk_test_fill(k.ploc + 16, 16, 0x55d, 2, -3, 3);
    float loss;
    CHECK_EQ_INT(lcase_run(&k, &loss), 0);
    CHECK_NEAR(loss, (1.65625 + 4 * log(3.0)) / 2, 1e-6);
    CHECK_NEAR(k.dloc[1], -0.5, 1e-7);
    CHECK_NEAR(k.dconf[0], 1 / 6.0, 1e-7);
    for (int q = 16; q < 32; q++) CHECK(k.dloc[q] == 0);
    for (int q = 12; q < 24; q++) CHECK(k.dconf[q] == 0);
    for (int d = 4; d < 8; d++) CHECK_EQ_INT(k.sel[d], 0);
    // no positives anywhere: 0, and no gradient
    k.label[0] = 0;
    CHECK_EQ_INT(lcase_run(&k, &loss), 0);
    CHECK(loss == 0);
    for (int q = 0; q < 24; q++) CHECK(k.dconf[q] == 0);
    k.label[5] = 3; // not in 0..2
    tk_err e = {0};
    CHECK_EQ_INT(tk_ssd_loss(tk_test_cpu(), TK_F32, k.ploc, k.pconf, k.gbox, k.label, k.dbox, 2, 4, 3, &loss, NULL,
                             NULL, NULL, NULL, &e),
                 TK_EINTERNAL);
    CHECK(strstr(e.what, "label 3 at box 1 of image 1") != NULL);
    lcase_free(&k);
}

TK_TEST(loss_acc_scales_the_gradients_and_adds_the_loss) {
    // the training step's form: gradients times scale (0.5: exactly half), acc += (scale loss, 1)
    lcase k = lcase_new(2, 4, 3);
    k.label[0] = 2, k.label[6] = 1, k.gbox[0] = 0.5625f;
    tk_test_fill(k.pconf, 24, 0x55d, 4, -3, 3);
    tk_test_fill(k.ploc, 32, 0x55d, 5, -3, 3);
    float loss, half;
    CHECK_EQ_INT(lcase_run(&k, &loss), 0);
    float dl[32], dc[24];
    memcpy(dl, k.dloc, sizeof dl), memcpy(dc, k.dconf, sizeof dc);
    double acc[2] = {1, 2};
    tk_err e = {0};
    CHECK_EQ_INT(tk_ssd_loss_acc(tk_test_cpu(), TK_F32, k.ploc, k.pconf, k.gbox, k.label, k.dbox, 2, 4, 3, 0.5f, acc,
                                 &half, k.dloc, k.dconf, k.sel, NULL, &e),
                 0);
    CHECK(half == loss);
    CHECK_NEAR(acc[0], 1 + 0.5 * loss, 1e-7);
    CHECK(acc[1] == 3);
    for (int q = 0; q < 32; q++) CHECK(k.dloc[q] == 0.5f * dl[q]);
    for (int q = 0; q < 24; q++) CHECK(k.dconf[q] == 0.5f * dc[q]);
    lcase_free(&k);
}

// Central differences (step h, in fp64 from the fp32 loss) against the analytic gradient, on inputs
// where the mining's selection and each residual's Smooth L1 branch do not change within h.
TK_TEST(loss_gradients_match_finite_differences) {
    enum { N = 2, D = 7, C = 4 };
    lcase k = lcase_new(N, D, C);
    tk_test_fill(k.pconf, N * D * C, 0x55d, 3, -2, 2);
    k.label[1] = 2, k.label[D + 3] = 1, k.label[D + 5] = 3; // 1 and 2 positives
    for (int i = 0; i < N * D; i++) {
        float *g = k.gbox + i * 4;
        g[0] = 0.52f, g[1] = 0.47f, g[2] = 0.6f, g[3] = 0.2f;
        const float off[4] = {0.3f, -0.4f, 1.7f, -2.2f}; // residuals away from the kink at +-1
        const double a[4] = {0.5, 0.5, 0.5, 0.25};
        const double t[4] = {10 * (g[0] - a[0]) / a[2], 10 * (g[1] - a[1]) / a[3], 5 * log(g[2] / a[2]),
                             5 * log(g[3] / a[3])};
        for (int q = 0; q < 4; q++) k.ploc[i * 4 + q] = (float)t[q] + off[(q + i) % 4];
    }
    float loss;
    CHECK_EQ_INT(lcase_run(&k, &loss), 0);
    uint8_t sel0[N * D];
    memcpy(sel0, k.sel, sizeof sel0);
    float *dloc = malloc(sizeof(float) * N * D * 4), *dconf = malloc(sizeof(float) * N * D * C);
    memcpy(dloc, k.dloc, sizeof(float) * N * D * 4), memcpy(dconf, k.dconf, sizeof(float) * N * D * C);
    const float h = 1e-2f;
    double worst = 0;
    for (int which = 0; which < 2; which++) {
        float *x = which ? k.pconf : k.ploc, *an = which ? dconf : dloc;
        const int n = which ? N * D * C : N * D * 4;
        for (int i = 0; i < n; i++) {
            const float x0 = x[i];
            float lp, lm;
            x[i] = x0 + h;
            CHECK_EQ_INT(lcase_run(&k, &lp), 0);
            CHECK(memcmp(sel0, k.sel, sizeof sel0) == 0);
            x[i] = x0 - h;
            CHECK_EQ_INT(lcase_run(&k, &lm), 0);
            CHECK(memcmp(sel0, k.sel, sizeof sel0) == 0);
            x[i] = x0;
            const double fd = ((double)lp - lm) / (2.0 * h), err = fabs(fd - an[i]);
            worst = err > worst ? err : worst;
            CHECK_NEAR(fd, an[i], 2e-4);
        }
    }
    printf("# finite differences: worst |fd - analytic| %.2e\n", worst);
    free(dloc), free(dconf);
    lcase_free(&k);
}

// ---- the oracle driver (see the top of the file) ----

static int file_io(const char *dir, const char *name, void *p, size_t bytes, int write, tk_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, write ? "wb" : "rb");
    if (!f) return tk_err_set(e, TK_EIO, "%s: cannot %s", path, write ? "create" : "open");
    if (write) {
        const int bad = fwrite(p, 1, bytes, f) != bytes;
        return fclose(f) || bad ? tk_err_set(e, TK_EIO, "%s: write failed", path) : 0;
    }
    const size_t got = fread(p, 1, bytes, f);
    const int extra = fgetc(f) != EOF;
    fclose(f);
    return got != bytes || extra ? tk_err_set(e, TK_EDATA, "%s: %zu%s bytes, expected %zu", path, got,
                                              extra ? " or more" : "", bytes)
                                 : 0;
}

// (N, R, D) <-> (N, D, R): the reference's channel-major layout and ours.
static void transpose(const float *src, float *dst, int N, int R, int D, int to_box_major) {
    for (int n = 0; n < N; n++)
        for (int r = 0; r < R; r++)
            for (int d = 0; d < D; d++) {
                const size_t cm = ((size_t)n * R + r) * D + d, bm = ((size_t)n * D + d) * R + r;
                if (to_box_major) dst[bm] = src[cm];
                else dst[cm] = src[bm];
            }
}

static int drive(const char *dir, tk_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/params.txt", dir);
    FILE *f = fopen(path, "r");
    if (!f) return tk_err_set(e, TK_EIO, "%s: cannot open", path);
    int N, D, C, ngt;
    const int got = fscanf(f, "%d %d %d %d", &N, &D, &C, &ngt);
    fclose(f);
    if (got != 4 || N < 1 || N > 256 || D < 0 || D > 100000 || C < 2 || C > 1000 || ngt < 0 || ngt > 100000)
        return tk_err_set(e, TK_EDATA, "%s: not \"N D C NGT\" (N 1..256, D 0..100000, C 2..1000)", path);
    const int own = D == 0;
    if (own) D = TK_SSD300_BOXES;
    const size_t nd = (size_t)N * D;
    float *xywh = malloc((size_t)D * 16), *ltrb = malloc((size_t)D * 16), *gt = malloc((size_t)ngt * 16 + 16),
          *ploc = malloc(nd * 16), *pconf = malloc(nd * C * 4), *cm = malloc(nd * C * 4), *box = malloc(nd * 16),
          *dloc = malloc(nd * 16), *dconf = malloc(nd * C * 4);
    int32_t *gl = malloc((size_t)ngt * 4 + 4), *off = malloc((size_t)(N + 1) * 4), *label = malloc(nd * 4);
    uint8_t *sel = malloc(nd);
    int rc = !xywh || !ltrb || !gt || !ploc || !pconf || !cm || !box || !dloc || !dconf || !gl || !off || !label || !sel
                 ? tk_err_set(e, TK_EIO, "out of memory")
                 : 0;
    float loss = 0;
    if (!rc && own) rc = tk_ssd_dboxes(&tk_ssd300_coco, xywh, ltrb, e);
    if (!rc) rc = file_io(dir, "dbox_xywh.f32", xywh, (size_t)D * 16, own, e);
    if (!rc) rc = file_io(dir, "dbox_ltrb.f32", ltrb, (size_t)D * 16, own, e);
    if (!rc) rc = file_io(dir, "gt.f32", gt, (size_t)ngt * 16, 0, e);
    if (!rc) rc = file_io(dir, "gt_label.i32", gl, (size_t)ngt * 4, 0, e);
    if (!rc) rc = file_io(dir, "gt_off.i32", off, (size_t)(N + 1) * 4, 0, e);
    if (!rc && (rc = file_io(dir, "ploc.f32", cm, nd * 16, 0, e)) == 0) transpose(cm, ploc, N, 4, D, 1);
    if (!rc && (rc = file_io(dir, "plabel.f32", cm, nd * C * 4, 0, e)) == 0) transpose(cm, pconf, N, C, D, 1);
    tk_ctx *c = tk_test_cpu();
    if (!rc) rc = tk_ssd_match(c, gt, gl, off, N, ngt, ltrb, D, TK_SSD_MATCH_IOU, box, label, NULL, e);
    if (!rc) rc = tk_ssd_loss(c, TK_F32, ploc, pconf, box, label, xywh, N, D, C, &loss, dloc, dconf, sel, NULL, e);
    if (!rc) rc = file_io(dir, "box.f32", box, nd * 16, 1, e);
    if (!rc) rc = file_io(dir, "label.i32", label, nd * 4, 1, e);
    if (!rc) rc = file_io(dir, "sel.u8", sel, nd, 1, e);
    if (!rc) transpose(dloc, cm, N, 4, D, 0), rc = file_io(dir, "dloc.f32", cm, nd * 16, 1, e);
    if (!rc) transpose(dconf, cm, N, C, D, 0), rc = file_io(dir, "dconf.f32", cm, nd * C * 4, 1, e);
    if (!rc) printf("loss %.9g\n", loss);
    free(xywh), free(ltrb), free(gt), free(ploc), free(pconf), free(cm), free(box), free(dloc), free(dconf), free(gl),
        free(off), free(label), free(sel);
    if (!rc && fflush(stdout)) rc = tk_err_set(e, TK_EIO, "stdout: write failed");
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 3 || strcmp(argv[1], "--drive") != 0) return tk_test_main(argc, argv);
    tk_err e = {0};
    char buf[1200];
    if (!drive(argv[2], &e)) return 0;
    tk_err_format(&e, buf, sizeof buf);
    fprintf(stderr, "test_ssd_box: error: %s\n", buf);
    return e.code;
}
