// RLE functions of lib/coco against values computed with pycocotools' mask API (the strings,
// areas and boxes below were printed by pycocotools 2.0.11, not by this code).
#include <stdlib.h>

#include "coco/coco.h"
#include "coco/rle.h"
#include "tk_test.h"

static char *str_of(const coco_rle *r) { return coco_rle_to_string(r); }

TK_TEST(rle_encode_decode_string_round_trip) {
    // 4x5 mask, column-major: rows 1..2 of columns 1..3, and pixel (3, 4)
    uint8_t m[20] = {0}, back[20];
    for (int x = 1; x <= 3; x++)
        for (int y = 1; y <= 2; y++) m[x * 4 + y] = 1;
    m[4 * 4 + 3] = 1;
    coco_rle r, s;
    tk_err e;
    CHECK_EQ_INT(coco_rle_encode(m, 4, 5, &r, &e), 0);
    char *str = str_of(&r);
    CHECK_STR(str, "5220002O");
    CHECK_EQ_INT(coco_rle_area(&r), 7);
    double bb[4];
    coco_rle_to_bbox(&r, bb);
    CHECK(bb[0] == 1 && bb[1] == 1 && bb[2] == 4 && bb[3] == 3);
    CHECK_EQ_INT(coco_rle_fr_string(str, strlen(str), 4, 5, &s, &e), 0);
    CHECK_EQ_INT(s.m, r.m);
    for (size_t i = 0; i < r.m && i < s.m; i++) CHECK_EQ_INT(s.cnts[i], r.cnts[i]);
    coco_rle_decode(&s, back);
    CHECK(memcmp(back, m, sizeof m) == 0);
    free(str);
    coco_rle_free(&r);
    coco_rle_free(&s);
}

TK_TEST(rle_string_large_runs_and_negative_deltas) {
    // pycocotools: frUncompressedRLE counts [5, 1e8, 7, 3e9, 12] -> "5PXh[o27PXod]f25"
    uint32_t c[5] = {5, 100000000, 7, 3000000000u, 12};
    coco_rle r = {1, 3100000024u, 5, c}, s;
    tk_err e;
    char *str = str_of(&r);
    CHECK_STR(str, "5PXh[o27PXod]f25");
    CHECK_EQ_INT(coco_rle_fr_string(str, strlen(str), 1, 3100000024u, &s, &e), 0);
    for (int i = 0; i < 5 && s.m == 5; i++) CHECK_EQ_INT(s.cnts[i], c[i]);
    free(str);
    coco_rle_free(&s);
}

TK_TEST(rle_fr_string_rejects_bad_input) {
    coco_rle r;
    tk_err e;
    CHECK_EQ_INT(coco_rle_fr_string("5 2", 3, 4, 5, &r, &e), TK_EDATA); // byte outside '0'..'o'
    CHECK_EQ_INT(coco_rle_fr_string("5p", 2, 4, 5, &r, &e), TK_EDATA);
    CHECK_EQ_INT(coco_rle_fr_string("5P", 2, 4, 5, &r, &e), TK_EDATA); // ends inside a value
    CHECK_EQ_INT(coco_rle_fr_string("O", 1, 4, 5, &r, &e), TK_EDATA);  // negative run
    CHECK_EQ_INT(coco_rle_fr_string("PPPPPPPPPP0", 11, 4, 5, &r, &e), TK_EDATA); // too long
    CHECK_EQ_INT(coco_rle_fr_string("", 0, 0, 0, &r, &e), 0);
    CHECK_EQ_INT(r.m, 0);
}

TK_TEST(rle_fr_poly_matches_pycocotools) {
    coco_rle r;
    tk_err e;
    double xy[8] = {1.2, 0.7, 7.9, 2.1, 5.5, 8.6, 0.3, 6.0};
    CHECK_EQ_INT(coco_rle_fr_poly(xy, 4, 10, 9, &r, &e), 0);
    char *s = str_of(&r);
    CHECK_STR(s, "5155O001O010OM3M;");
    CHECK_EQ_INT(coco_rle_area(&r), 39);
    double bb[4];
    coco_rle_to_bbox(&r, bb);
    CHECK(bb[0] == 0 && bb[1] == 1 && bb[2] == 8 && bb[3] == 8);
    free(s);
    coco_rle_free(&r);
    // vertices outside the image are clipped the way maskApi does
    double out[6] = {-3, -2, 30, 4, 12, 25};
    CHECK_EQ_INT(coco_rle_fr_poly(out, 3, 12, 10, &r, &e), 0);
    s = str_of(&r);
    CHECK_STR(s, "0482N2N2N1Oa1");
    CHECK_EQ_INT(coco_rle_area(&r), 99);
    coco_rle_to_bbox(&r, bb);
    CHECK(bb[0] == 0 && bb[1] == 0 && bb[2] == 10 && bb[3] == 12);
    free(s);
    coco_rle_free(&r);
    double box[4] = {2, 3, 4, 5};
    CHECK_EQ_INT(coco_rle_fr_bbox(box, 10, 10, &r, &e), 0);
    s = str_of(&r);
    CHECK_STR(s, "g05500000U1");
    CHECK_EQ_INT(coco_rle_area(&r), 20);
    free(s);
    coco_rle_free(&r);
    CHECK_EQ_INT(coco_rle_fr_poly(xy, 4, 0, 9, &r, &e), TK_EDATA);
}

TK_TEST(rle_iou_merge_crowd) {
    coco_rle a, b, u, in;
    tk_err e;
    double pa[8] = {0, 0, 6, 0, 6, 6, 0, 6}, pb[8] = {3, 3, 9, 3, 9, 9, 3, 9};
    CHECK_EQ_INT(coco_rle_fr_poly(pa, 4, 10, 10, &a, &e), 0);
    CHECK_EQ_INT(coco_rle_fr_poly(pb, 4, 10, 10, &b, &e), 0);
    char *s = str_of(&a);
    CHECK_STR(s, "064000000000X1");
    free(s);
    double o;
    uint8_t crowd = 0;
    coco_rle_iou(&a, 1, &b, 1, &crowd, &o);
    CHECK(o == 9.0 / 63.0);
    crowd = 1; // a crowd ground truth: intersection over the detection's area
    coco_rle_iou(&a, 1, &b, 1, &crowd, &o);
    CHECK(o == 0.25);
    CHECK_EQ_INT(coco_rle_merge((coco_rle[]){a, b}, 2, 0, &u, &e), 0);
    CHECK_EQ_INT(coco_rle_merge((coco_rle[]){a, b}, 2, 1, &in, &e), 0);
    s = str_of(&u);
    CHECK_STR(s, "06400003M0003M00007");
    free(s);
    s = str_of(&in);
    CHECK_STR(s, "Q137000U1");
    free(s);
    // masks of different sizes: -1 where the boxes overlap (maskApi)
    coco_rle c;
    CHECK_EQ_INT(coco_rle_fr_poly(pb, 4, 12, 10, &c, &e), 0);
    crowd = 0;
    coco_rle_iou(&a, 1, &c, 1, &crowd, &o);
    CHECK(o == -1);
    coco_rle_free(&a);
    coco_rle_free(&b);
    coco_rle_free(&c);
    coco_rle_free(&u);
    coco_rle_free(&in);
}

TK_TEST(bb_iou_and_crowd) {
    double d[4] = {0, 0, 10, 10}, g[4] = {5, 5, 10, 10}, o;
    uint8_t crowd = 0;
    coco_bb_iou(d, 1, g, 1, &crowd, &o);
    CHECK(o == 25.0 / 175.0);
    crowd = 1;
    coco_bb_iou(d, 1, g, 1, &crowd, &o);
    CHECK(o == 0.25);
    double far[4] = {20, 20, 1, 1};
    coco_bb_iou(d, 1, far, 1, NULL, &o);
    CHECK(o == 0);
}

TK_TEST(numpy_linspace_and_pairwise_sum) {
    // numpy.linspace(.5, .95, 10)[8] is 0.8999999999999999, not 0.9
    CHECK(coco_linspace(.5, .95, 10, 8) == 0.8999999999999999);
    CHECK(coco_linspace(.5, .95, 10, 9) == 0.95);
    CHECK(coco_linspace(0, 1, 101, 57) == 0.5700000000000001);
    CHECK(coco_linspace(0, 1, 101, 100) == 1.0);
    // numpy: np.sum([0.1]*10) == 1.0 (pairwise), a plain loop gives 0.9999999999999999
    double a[10];
    for (int i = 0; i < 10; i++) a[i] = 0.1;
    CHECK(coco_np_sum(a, 10) == 1.0);
    double *big = malloc(20000 * sizeof *big);
    for (int i = 0; i < 20000; i++) big[i] = 0.1;
    // numpy 1.x sums 8192-element buffers pairwise, one after another: a Python model of that
    // order (which reproduces the oracle's stats bit for bit) gives 2000.0000000000005 here;
    // numpy 2's single pairwise pass gives 1999.9999999999998
    CHECK(coco_np_sum(big, 20000) == 2000.0000000000005);
    free(big);
}
