// kernels/ssd_nms_ref.c, the spec of SSD's evaluation post-processing: exact small cases (boxes
// given as default boxes with zero offsets, so they decode exactly; probabilities given as they
// are), the reference's rules at their edges (IoU exactly 0.5, a score exactly 0.05, ties), the
// shared exp against libm, and invariants on random SSD300-sized inputs.
//
// With TK_SSD_NMS_DRIVE=1 in the environment the binary is instead the C side of
// tests/cli/ssd-nms-oracle.bats (contrib/peers/ssd_eval.py): it reads "N A C softmax max_num
// max_out t" (t: f32 or bf16) and then the default boxes (A, 4), loc (N, A, 4) and conf (N, A, C)
// as numbers from stdin, and writes per image a line "count" and count lines "label score l t r b".
#include <errno.h>
#include <stdint.h>

#include "core/bf16.h"
#include "core/philox.h"
#include "ssd_nms.h"
#include "ssd_nms_case.h"
#include "tk_drive.h"
#include "tk_test.h"

// The output of one image of a small case.
typedef struct {
    float box[TK_SSD_NMS_MAX_OUT][4], score[TK_SSD_NMS_MAX_OUT];
    int32_t label[TK_SSD_NMS_MAX_OUT], count;
} small_out;

// One image: A boxes given ltrb (loc 0: they decode to themselves when the values are dyadic),
// probabilities prob (A, C) as they are.
static int run_small(int A, int C, const float ltrb[][4], const float *prob, const tk_ssd_nms_params *p,
                     small_out *o, tk_err *e) {
    float d[64][4], loc[64][4];
    for (int a = 0; a < A; a++) {
        d[a][0] = (ltrb[a][0] + ltrb[a][2]) / 2, d[a][1] = (ltrb[a][1] + ltrb[a][3]) / 2;
        d[a][2] = ltrb[a][2] - ltrb[a][0], d[a][3] = ltrb[a][3] - ltrb[a][1];
        loc[a][0] = loc[a][1] = loc[a][2] = loc[a][3] = 0;
    }
    memset(o, 0x7f, sizeof *o); // unwritten slots show
    return tk_ssd_nms_ref(TK_F32, loc, prob, &d[0][0], 1, A, C, p, &o->box[0][0], o->score, o->label, &o->count, e);
}

static tk_ssd_nms_params probs_params(void) {
    tk_ssd_nms_params p = tk_ssd_nms_defaults();
    p.softmax = 0;
    return p;
}

TK_TEST(zero_offsets_decode_to_the_default_boxes) {
    const float b[1][4] = {{0.125f, 0.25f, 0.625f, 0.5f}}, prob[2] = {0, 0.75f};
    tk_ssd_nms_params p = probs_params();
    small_out o;
    tk_err e;
    CHECK_EQ_INT(run_small(1, 2, b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 1);
    CHECK(!memcmp(o.box[0], b[0], sizeof b[0]));
    CHECK(o.score[0] == 0.75f && o.label[0] == 1);
    // slots after the count are zero, up to max_out
    CHECK(o.score[1] == 0 && o.label[1] == 0 && o.box[1][3] == 0 && o.score[p.max_out - 1] == 0);
}

// Boxes in eighths: A and B overlap by IoU 8/16 = 0.5 exactly, A and C by 6/18 = 1/3.
static const float A8[4] = {0, 0, 0.75f, 0.25f}, B8[4] = {0.25f, 0, 1, 0.25f}, C8[4] = {0.375f, 0, 1.125f, 0.25f};

TK_TEST(same_class_iou_half_suppresses_below_keeps) {
    CHECK(tk_ssd_iou(A8, B8) == 0.5f && tk_ssd_iou(B8, A8) == 0.5f);
    CHECK(tk_ssd_iou(A8, C8) == 1.0f / 3);
    float b[3][4];
    memcpy(b[0], A8, sizeof A8), memcpy(b[1], B8, sizeof B8), memcpy(b[2], C8, sizeof C8);
    // class 1: A 0.9, B 0.8 (IoU 0.5 with A: suppressed), C 0.7 (IoU with A 1/3, with B 5/7:
    // but B is gone, so C stays)
    const float prob[3 * 2] = {0, 0.9f, 0, 0.8f, 0, 0.7f};
    tk_ssd_nms_params p = probs_params();
    small_out o;
    tk_err e;
    CHECK_EQ_INT(run_small(3, 2, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 2);
    // ascending by score: the best last
    CHECK(o.score[0] == 0.7f && o.score[1] == 0.9f);
    CHECK(!memcmp(o.box[0], C8, sizeof C8) && !memcmp(o.box[1], A8, sizeof A8));
    // a threshold just above 0.5 keeps B
    p.iou = nextafterf(0.5f, 1);
    CHECK_EQ_INT(run_small(3, 2, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 2); // A and B; C goes with B
    CHECK(o.score[0] == 0.8f && !memcmp(o.box[0], B8, sizeof B8) && o.score[1] == 0.9f);
}

TK_TEST(different_classes_do_not_suppress) {
    float b[2][4];
    memcpy(b[0], A8, sizeof A8), memcpy(b[1], A8, sizeof A8);
    // the same box twice: anchor 0 class 1, anchor 1 class 2; and anchor 1 also class 1 lower
    const float prob[2 * 3] = {0, 0.6f, 0.1f, 0, 0.3f, 0.5f};
    tk_ssd_nms_params p = probs_params();
    small_out o;
    tk_err e;
    CHECK_EQ_INT(run_small(2, 3, (const float(*)[4])b, prob, &p, &o, &e), 0);
    // class 1: anchor 0 (0.6) keeps, anchor 1 (0.3, IoU 1) goes; class 2: anchor 1 (0.5) and
    // anchor 0 (0.1, IoU 1 with it) goes
    CHECK_EQ_INT(o.count, 2);
    CHECK(o.score[0] == 0.5f && o.label[0] == 2 && o.score[1] == 0.6f && o.label[1] == 1);
}

TK_TEST(score_threshold_is_strict) {
    float b[3][4] = {{0, 0, 0.25f, 0.25f}, {0.5f, 0.5f, 0.75f, 0.75f}, {0.25f, 0.5f, 0.5f, 0.75f}};
    const float prob[3 * 2] = {0, 0.05f, 0, nextafterf(0.05f, 1), 0, 0.04f};
    tk_ssd_nms_params p = probs_params();
    small_out o;
    tk_err e;
    CHECK_EQ_INT(run_small(3, 2, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 1);
    CHECK(o.score[0] == nextafterf(0.05f, 1) && !memcmp(o.box[0], b[1], sizeof b[1]));
    // nothing above the threshold anywhere: no detections (the reference raises instead)
    p.score_min = 0.5f;
    CHECK_EQ_INT(run_small(3, 2, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 0);
    CHECK(o.score[0] == 0 && o.label[0] == 0);
}

TK_TEST(ties_follow_the_stable_sorts) {
    // four disjoint boxes, all class 1 at 0.5: suppression order is anchor index descending
    float b[5][4];
    for (int a = 0; a < 4; a++) b[a][0] = 0.25f * a, b[a][1] = 0, b[a][2] = 0.25f * a + 0.125f, b[a][3] = 0.125f;
    memcpy(b[4], b[1], sizeof b[1]); // anchor 4: anchor 1's box again, same score
    float prob[5 * 3] = {0};
    for (int a = 0; a < 5; a++) prob[a * 3 + 1] = 0.5f;
    tk_ssd_nms_params p = probs_params();
    small_out o;
    tk_err e;
    CHECK_EQ_INT(run_small(5, 3, (const float(*)[4])b, prob, &p, &o, &e), 0);
    // anchor 4 comes first of the equals, so it is kept and anchor 1 (IoU 1) suppressed; kept
    // order 4 3 2 0, output (stable ascending) in that concatenation order
    CHECK_EQ_INT(o.count, 4);
    CHECK(!memcmp(o.box[0], b[4], sizeof b[4]) && !memcmp(o.box[1], b[3], sizeof b[3]));
    CHECK(!memcmp(o.box[2], b[2], sizeof b[2]) && !memcmp(o.box[3], b[0], sizeof b[0]));
    // max_num 2 keeps the two highest indices of the tie (4 and 3); max_out 3 of the four keeps
    // the last three of the concatenation
    p.max_num = 2;
    CHECK_EQ_INT(run_small(5, 3, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 2);
    CHECK(!memcmp(o.box[0], b[4], sizeof b[4]) && !memcmp(o.box[1], b[3], sizeof b[3]));
    p.max_num = 200, p.max_out = 3;
    CHECK_EQ_INT(run_small(5, 3, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 3);
    CHECK(!memcmp(o.box[0], b[3], sizeof b[3]) && !memcmp(o.box[2], b[0], sizeof b[0]));
    // ties across classes: class 2 gives anchor 0 0.5 too; it follows class 1 in the
    // concatenation, so it is last (and kept by max_out 3 over class 1's first two)
    prob[0 * 3 + 2] = 0.5f;
    CHECK_EQ_INT(run_small(5, 3, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 3);
    CHECK(o.label[0] == 1 && o.label[1] == 1 && o.label[2] == 2);
    CHECK(!memcmp(o.box[0], b[2], sizeof b[2]) && !memcmp(o.box[1], b[0], sizeof b[0]));
}

TK_TEST(fewer_than_max_and_the_per_class_cap) {
    // 40 disjoint boxes in class 1 with distinct scores: all kept, count 40 < 200
    float b[40][4], prob[40 * 2];
    for (int a = 0; a < 40; a++) {
        b[a][0] = (float)(a % 8) / 8, b[a][1] = (float)(a / 8) / 8;
        b[a][2] = b[a][0] + 0.0625f, b[a][3] = b[a][1] + 0.0625f;
        prob[a * 2] = 0, prob[a * 2 + 1] = 0.1f + 0.01f * (float)((a * 7) % 40);
    }
    tk_ssd_nms_params p = probs_params();
    small_out o;
    tk_err e;
    CHECK_EQ_INT(run_small(40, 2, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 40);
    int sorted = 1;
    for (int s = 1; s < 40; s++) sorted &= o.score[s - 1] < o.score[s];
    CHECK(sorted);
    // max_num 10: the 10 best only
    p.max_num = 10;
    CHECK_EQ_INT(run_small(40, 2, (const float(*)[4])b, prob, &p, &o, &e), 0);
    CHECK_EQ_INT(o.count, 10);
    CHECK(o.score[0] == 0.1f + 0.01f * 30 && o.score[9] == 0.1f + 0.01f * 39);
}

TK_TEST(softmax_of_logits) {
    // logits 0, 1, 2 over three classes: p = e^k / (1 + e + e^2)
    const float b[1][4] = {{0, 0, 0.5f, 0.5f}}, z[3] = {0, 1, 2}, d[4] = {0.25f, 0.25f, 0.5f, 0.5f}, loc[4] = {0};
    tk_ssd_nms_params p = tk_ssd_nms_defaults();
    float box[200][4], score[200];
    int32_t label[200], count;
    tk_err e;
    CHECK_EQ_INT(tk_ssd_nms_ref(TK_F32, loc, z, d, 1, 1, 3, &p, &box[0][0], score, label, &count, &e), 0);
    CHECK_EQ_INT(count, 2);
    const double s = 1 + exp(1) + exp(2);
    CHECK_NEAR(score[0], exp(1) / s, 1e-6);
    CHECK_NEAR(score[1], exp(2) / s, 1e-6);
    CHECK(label[0] == 1 && label[1] == 2 && !memcmp(box[1], b[0], sizeof b[0]));
    // the same in bf16 (0, 1, 2 and the box are exact in bf16)
    uint16_t zb[3], lb[4];
    for (int k = 0; k < 3; k++) zb[k] = tk_f32_to_bf16(z[k]);
    for (int k = 0; k < 4; k++) lb[k] = tk_f32_to_bf16(0);
    float box2[200][4], score2[200];
    int32_t label2[200], count2;
    CHECK_EQ_INT(tk_ssd_nms_ref(TK_BF16, lb, zb, d, 1, 1, 3, &p, &box2[0][0], score2, label2, &count2, &e), 0);
    CHECK(count2 == 2 && score2[0] == score[0] && score2[1] == score[1]);
}

TK_TEST(decode_follows_the_reference_formula) {
    // offsets (x, y, w, h) = (5, -10, 5, -5) on (0.5, 0.5, 0.2, 0.4): cx = 0.5 + 0.5 * 0.2,
    // cy = 0.5 - 1 * 0.4, w = e^1 0.2, h = e^-1 0.4
    const float l[4] = {5, -10, 5, -5}, d[4] = {0.5f, 0.5f, 0.2f, 0.4f};
    float o[4];
    tk_ssd_decode(l, d, o);
    const double cx = 0.6, cy = 0.1, w = exp(1) * 0.2, h = exp(-1) * 0.4;
    CHECK_NEAR(o[0], cx - w / 2, 1e-6);
    CHECK_NEAR(o[1], cy - h / 2, 1e-6);
    CHECK_NEAR(o[2], cx + w / 2, 1e-6);
    CHECK_NEAR(o[3], cy + h / 2, 1e-6);
}

static int64_t ulps(float a, float b) {
    union { float f; int32_t i; } x = {a}, y = {b};
    int64_t ia = x.i < 0 ? (int64_t)INT32_MIN - x.i : x.i, ib = y.i < 0 ? (int64_t)INT32_MIN - y.i : y.i;
    return ia > ib ? ia - ib : ib - ia;
}

TK_TEST(shared_exp_within_two_ulps) {
    int64_t worst = 0;
    float at = 0;
    for (float x = -87.0f; x < 88.5f; x += 0.000731f) {
        const int64_t u = ulps(tk_ssd_expf(x), (float)exp((double)x));
        if (u > worst) worst = u, at = x;
    }
    if (worst > 2) printf("# %lld ulps at %.9g\n", (long long)worst, at);
    CHECK(worst <= 2);
    CHECK(tk_ssd_expf(0) == 1.0f && tk_ssd_expf(1) == (float)exp(1));
    CHECK(tk_ssd_expf(89) == INFINITY && tk_ssd_expf(-88) == 0 && isnan(tk_ssd_expf(NAN)));
    CHECK(ulps(tk_ssd_expf(88.7f), (float)exp((double)88.7f)) <= 2); // k = 128: 2^128 in two steps
}

TK_TEST(random_ssd300_invariants) {
    static float d[SSD300_ANCHORS * 4];
    CHECK_EQ_INT(ssd_case_dboxes300(d), SSD300_ANCHORS);
    // spot values of dboxes300_coco: the first box, the last map's (one position, 4 sizes)
    CHECK(d[0] == (float)(0.5 / 37.5) && d[2] == (float)(21 / 300.0));
    CHECK(d[(SSD300_ANCHORS - 1) * 4] == 0.5f && d[(SSD300_ANCHORS - 4) * 4 + 2] == (float)(261 / 300.0));
    enum { N = 2, A = SSD300_ANCHORS, C = SSD300_CLASSES };
    float *loc = malloc(sizeof(float) * N * A * 4), *conf = malloc(sizeof(float) * N * A * C);
    for (size_t i = 0; i < (size_t)N * A * 4; i++) loc[i] = 2 * tk_philox_uniform(7, 1, i) - 1;
    for (size_t i = 0; i < (size_t)N * A * C; i++)
        conf[i] = 4 * tk_philox_uniform(7, 2, i) + (i % C == 1 ? 4 : 0); // class 1: > 200 candidates
    tk_ssd_nms_params p = tk_ssd_nms_defaults();
    float box[N * 200 * 4], score[N * 200];
    int32_t label[N * 200], count[N];
    tk_err e;
    CHECK_EQ_INT(tk_ssd_nms_ref(TK_F32, loc, conf, d, N, A, C, &p, box, score, label, count, &e), 0);
    for (int n = 0; n < N; n++) {
        CHECK(count[n] == 200);
        int bad = 0, c1 = 0;
        for (int s = 0; s < count[n]; s++) {
            const int i = n * 200 + s;
            bad += !(score[i] > 0.05f) || label[i] < 1 || label[i] >= C || (s && score[i - 1] > score[i]);
            c1 += label[i] == 1;
            for (int r = 0; r < s; r++) // no two of one class overlap by IoU >= 0.5
                bad += label[n * 200 + r] == label[i] && !(tk_ssd_iou(box + (n * 200 + r) * 4, box + i * 4) < 0.5f);
        }
        CHECK_EQ_INT(bad, 0);
        CHECK(c1 > 0 && c1 < 200); // class 1 has more than max_num candidates, but suppresses most
    }
    // bad parameters and shapes are internal errors
    p.max_num = TK_SSD_NMS_MAX_NUM + 1;
    CHECK_EQ_INT(tk_ssd_nms_ref(TK_F32, loc, conf, d, N, A, C, &p, box, score, label, count, &e), TK_EINTERNAL);
    p = tk_ssd_nms_defaults();
    CHECK_EQ_INT(tk_ssd_nms_ref(TK_F32, loc, conf, d, N, A, 1, &p, box, score, label, count, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_ssd_nms_ref(TK_U8, loc, conf, d, N, A, C, &p, box, score, label, count, &e), TK_EINTERNAL);
    free(loc), free(conf);
}

// ---- the oracle's driver ----

// The numbers of stdin, read whole (the oracle sends about 1.5 million).
typedef struct { char *buf, *at; } numbers;

static int numbers_read(numbers *nb, tk_err *e) {
    size_t cap = 1 << 20, n = 0, got;
    nb->buf = malloc(cap + 1);
    while (nb->buf && (got = fread(nb->buf + n, 1, cap - n, stdin)) > 0)
        if ((n += got) == cap) {
            char *b = realloc(nb->buf, 2 * cap + 1);
            if (!b) free(nb->buf);
            nb->buf = b, cap *= 2;
        }
    if (!nb->buf) return tk_err_set(e, TK_EIO, "out of memory");
    nb->buf[n] = 0, nb->at = nb->buf;
    return 0;
}

// The next n numbers as floats into a new array (NULL with e filled when they are not there).
static float *numbers_take(numbers *nb, size_t n, const char *what, tk_err *e) {
    float *p = malloc(n * sizeof(float) + 1);
    if (!p) return tk_err_set(e, TK_EIO, "out of memory"), NULL;
    for (size_t i = 0; i < n; i++) {
        char *end;
        p[i] = strtof(nb->at, &end);
        if (end == nb->at) {
            free(p);
            tk_err_set(e, TK_EDATA, "stdin: %s: value %zu of %zu missing", what, i, n);
            return NULL;
        }
        nb->at = end;
    }
    return p;
}

static int drive(tk_err *e) {
    int N, A, C, used = 0;
    char type[8];
    tk_ssd_nms_params p = tk_ssd_nms_defaults();
    numbers nb;
    TRY(numbers_read(&nb, e));
    if (sscanf(nb.buf, "%d %d %d %d %d %d %7s%n", &N, &A, &C, &p.softmax, &p.max_num, &p.max_out, type, &used) != 7 ||
        N < 1 || A < 1 || C < 2 || (double)N * A * C > 1e8) {
        free(nb.buf);
        return tk_err_set(e, TK_EDATA, "stdin: no \"N A C softmax max_num max_out type\" line");
    }
    nb.at += used;
    const tk_dtype t = strcmp(type, "bf16") == 0 ? TK_BF16 : TK_F32;
    if (t == TK_F32 && strcmp(type, "f32")) {
        free(nb.buf);
        return tk_err_set(e, TK_EUSAGE, "type must be f32 or bf16, not %s", type);
    }
    const size_t nl = (size_t)N * A * 4, nc = (size_t)N * A * C;
    float *d = numbers_take(&nb, (size_t)A * 4, "default boxes", e), *loc = d ? numbers_take(&nb, nl, "loc", e) : NULL,
          *conf = loc ? numbers_take(&nb, nc, "conf", e) : NULL;
    free(nb.buf);
    if (!conf) return free(d), free(loc), e->code;
    const size_t O = p.max_out > 0 && p.max_out <= TK_SSD_NMS_MAX_OUT ? (size_t)p.max_out : 1;
    float *box = malloc(N * O * 16), *score = malloc(N * O * 4);
    int32_t *label = malloc(N * O * 4), *count = malloc(N * 4);
    uint16_t *lb = malloc(nl * 2 + 2), *cb = malloc(nc * 2 + 2);
    int rc = !box || !score || !label || !count || !lb || !cb ? tk_err_set(e, TK_EIO, "out of memory") : 0;
    if (!rc && t == TK_BF16) {
        for (size_t i = 0; i < nl; i++) lb[i] = tk_f32_to_bf16(loc[i]);
        for (size_t i = 0; i < nc; i++) cb[i] = tk_f32_to_bf16(conf[i]);
    }
    if (!rc)
        rc = tk_ssd_nms_ref(t, t == TK_BF16 ? (void *)lb : loc, t == TK_BF16 ? (void *)cb : conf, d, N, A, C, &p, box,
                            score, label, count, e);
    for (int n = 0; n < N && !rc; n++) {
        printf("%d\n", count[n]);
        for (int s = 0; s < count[n]; s++) {
            const size_t i = (size_t)n * O + s;
            printf("%d %.9g %.9g %.9g %.9g %.9g\n", label[i], score[i], box[i * 4], box[i * 4 + 1], box[i * 4 + 2],
                   box[i * 4 + 3]);
        }
    }
    free(d), free(loc), free(conf), free(box), free(score), free(label), free(count), free(lb), free(cb);
    return rc;
}

__attribute__((constructor(200))) static void drive_mode(void) {
    if (!getenv("TK_SSD_NMS_DRIVE")) return;
    tk_err e = {0};
    int rc = drive(&e);
    tk_drive_exit("test_ssd_nms", rc, &e);
}
