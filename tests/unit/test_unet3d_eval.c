// The 3D U-Net's evaluation (lib/workloads/unet3d/eval.c) on the cpu backend, with this file's
// stand-ins for the network and the cases (the functions of unet3d.h that eval.c calls): a
// "network" whose logits are -(x - k)^2 for class k (its argmax: the class nearest to the
// image value) over images that hold their label, so the prediction is the label and every
// case's Dice is 1; one whose logits always say kidney, so the Dice are known from the label's
// counts (kidney 2 T1 / (T1 + N), tumor 1e-6 / (T2 + 1e-6): MLPerf's DiceScore with its
// smoothing); windows batched 1, 3 or 64 at a time giving the same bits; volumes the sliding
// window crops (an axis of 70 with stride 16); an eval set without a case.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tk_test.h"
#include "workloads/unet3d/unet3d.h"

struct u3_model {
    u3_config cfg;
    tk_ctx *c;
    int all_kidney;  // the network's answer: the nearest class, or always kidney
    int calls, most; // forwards, and the most windows one got
};

// ---- the stand-ins ----

typedef struct {
    int n;
    int64_t shape[4][3];
} case_set;
static case_set g_cases; // what u3_cases_load gives

// Case i's label: a kidney box, a tumor box inside it (not in case 1), background elsewhere.
static uint8_t label_at(int i, int64_t z, int64_t y, int64_t x) {
    const int64_t o = 4 * i;
    if (i != 1 && z >= 20 + o && z < 30 + o && y >= 20 && y < 28 && x >= 30 && x < 40) return 2;
    return z >= 10 + o && z < 45 + o && y >= 12 && y < 40 && x >= 20 && x < 60 ? 1 : 0;
}

int u3_cases_load(char *const *paths, int npaths, int rank, int world, u3_cases *out, tk_err *e) {
    (void)paths, (void)npaths;
    memset(out, 0, sizeof *out);
    if (rank != 0 || world != 1) return tk_err_set(e, TK_EINTERNAL, "one rank here");
    out->total = out->n = g_cases.n;
    out->c = calloc((size_t)g_cases.n + 1, sizeof *out->c);
    for (int i = 0; i < g_cases.n; i++) {
        u3_case *k = &out->c[i];
        k->id = 100 + i;
        memcpy(k->shape, g_cases.shape[i], sizeof k->shape);
        const size_t n = (size_t)(k->shape[0] * k->shape[1] * k->shape[2]);
        k->image = malloc(n * sizeof(float));
        k->label = malloc(n);
        size_t v = 0;
        for (int64_t z = 0; z < k->shape[0]; z++)
            for (int64_t y = 0; y < k->shape[1]; y++)
                for (int64_t x = 0; x < k->shape[2]; x++, v++)
                    k->label[v] = label_at(i, z, y, x), k->image[v] = (float)k->label[v];
    }
    return 0;
}

void u3_cases_free(u3_cases *cs) {
    for (int i = 0; i < cs->n; i++) free(cs->c[i].image), free(cs->c[i].label);
    free(cs->c);
    memset(cs, 0, sizeof *cs);
}

int u3_forward_eval(void *model, const float *x, int B, void *y, tk_err *e) {
    struct u3_model *m = model;
    const int r = m->cfg.data.crop[0];
    if (B < 1 || B > m->cfg.b) return tk_err_set(e, TK_EINTERNAL, "forward of %d windows, batch %d", B, m->cfg.b);
    m->calls++;
    m->most = B > m->most ? B : m->most;
    float *out = y;
    for (size_t v = 0; v < (size_t)B * r * r * r; v++)
        for (int k = 0; k < U3_CLASSES; k++)
            out[v * U3_CLASSES + k] = m->all_kidney ? (k == 1) : -(x[v] - (float)k) * (x[v] - (float)k);
    return 0;
}

tk_dtype u3_act_type(const void *model) {
    (void)model;
    return TK_F32;
}
const u3_config *u3_model_config(const void *model) { return &((const struct u3_model *)model)->cfg; }
tk_ctx *u3_model_ctx(const void *model) { return ((const struct u3_model *)model)->c; }

// ---- the tests ----

// mean_dice of the cases in g_cases with roi 32, overlap 0.5, b windows a forward at most.
static int run_eval(struct u3_model *m, tk_dist *d, int b, int eval_batch, double *dice, tk_err *e) {
    m->cfg = (u3_config){.width = 4, .batch = b, .b = b, .eval_overlap = 0.5, .eval_batch = eval_batch, .dist = d};
    m->cfg.data.crop[0] = m->cfg.data.crop[1] = m->cfg.data.crop[2] = 32;
    m->calls = m->most = 0;
    char *paths[] = {"eval.tks"};
    void *es = NULL;
    int rc = u3_evalset_load(m, paths, 1, &es, e);
    if (!rc && u3_evalset_count(es) != g_cases.n) rc = tk_err_set(e, TK_EINTERNAL, "count");
    if (!rc) rc = u3_evaluate(m, es, dice, e);
    u3_evalset_free(m, es);
    return rc;
}

// A cpu context and its one rank (NULL on failure).
static tk_ctx *one_rank(tk_dist *d) {
    tk_err e = {0};
    tk_ctx *c = NULL;
    if (tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e)) return NULL;
    if (!tk_dist_init(d, c, NULL, 10, &e)) return c;
    tk_ctx_destroy(c);
    return NULL;
}

TK_TEST(perfect_and_all_kidney_predictions_give_the_known_dice) {
    tk_err e = {0};
    tk_dist d;
    tk_ctx *c = one_rank(&d);
    CHECK(c != NULL);
    if (!c) return;
    // no crop on these axes (multiples of the stride 16), so the Dice count every voxel
    g_cases = (case_set){3, {{64, 48, 80}, {80, 64, 64}, {96, 48, 64}}};
    struct u3_model m = {.c = c};
    double dice = 0;
    CHECK_EQ_INT(run_eval(&m, &d, 4, 0, &dice, &e), 0);
    CHECK(dice == 1.0);
    // windows: 3 x 2 x 4, 4 x 3 x 3, 5 x 2 x 3 = 24 + 36 + 30, 4 a forward (the per-rank batch)
    CHECK_EQ_INT(m.calls, 6 + 9 + 8);
    CHECK_EQ_INT(m.most, 4);
    // always kidney: kidney 2 T1 / (T1 + N), tumor 1e-6 / (T2 + 1e-6) (1 where there is no tumor)
    m.all_kidney = 1;
    CHECK_EQ_INT(run_eval(&m, &d, 4, 0, &dice, &e), 0);
    double want = 0;
    for (int i = 0; i < g_cases.n; i++) {
        const int64_t *s = g_cases.shape[i];
        int64_t t1 = 0, t2 = 0;
        for (int64_t z = 0; z < s[0]; z++)
            for (int64_t y = 0; y < s[1]; y++)
                for (int64_t x = 0; x < s[2]; x++) {
                    const uint8_t l = label_at(i, z, y, x);
                    t1 += l == 1, t2 += l == 2;
                }
        const double kidney = 2.0 * (double)t1 / (double)(t1 + s[0] * s[1] * s[2]), tumor = 1e-6 / ((double)t2 + 1e-6);
        want += (kidney + tumor) / 2 / g_cases.n;
    }
    printf("# all kidney: mean Dice %.9f, by hand %.9f\n", dice, want);
    CHECK(fabs(dice - want) < 1e-6);
    CHECK(dice > 0.05 && dice < 0.6); // a value that tells: not 0, not 1
    tk_dist_release(&d);
    tk_ctx_destroy(c);
}

TK_TEST(window_batches_give_the_same_bits_and_cropped_volumes_evaluate) {
    tk_err e = {0};
    tk_dist d;
    tk_ctx *c = one_rank(&d);
    CHECK(c != NULL);
    if (!c) return;
    // 70 = 4 x 16 + 6: the reference crops 3 voxels in front and 3 behind (kernels/swin.h)
    g_cases = (case_set){2, {{70, 48, 64}, {64, 70, 48}}};
    struct u3_model m = {.c = c, .all_kidney = 1};
    double d1, d3, d64, dp;
    CHECK_EQ_INT(run_eval(&m, &d, 1, 0, &d1, &e), 0);
    CHECK_EQ_INT(m.most, 1);
    CHECK_EQ_INT(run_eval(&m, &d, 8, 3, &d3, &e), 0); // eval.batch 3 of a batch of 8
    CHECK_EQ_INT(m.most, 3);
    CHECK_EQ_INT(run_eval(&m, &d, 64, 0, &d64, &e), 0);
    CHECK_EQ_INT(m.calls, 2); // every window of a case in one forward
    CHECK(d1 == d3 && d1 == d64 && d1 > 0.05 && d1 < 0.6);
    m.all_kidney = 0;
    CHECK_EQ_INT(run_eval(&m, &d, 2, 5, &dp, &e), 0); // eval.batch above the batch: the batch
    CHECK_EQ_INT(m.most, 2);
    CHECK(dp == 1.0);
    // no case at all: a data error naming the file
    g_cases.n = 0;
    CHECK_EQ_INT(run_eval(&m, &d, 2, 0, &dp, &e), TK_EDATA);
    CHECK_STR(e.what, "eval.tks: the eval set holds no case");
    tk_dist_release(&d);
    tk_ctx_destroy(c);
}
