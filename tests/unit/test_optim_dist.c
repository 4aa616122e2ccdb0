// The distributed form of the shared optimizer (kernels/optim.h tk_optim_step_dist, its cpu
// reference): W ranks as W threads (optim_dist_case.h), each updating the floats of its shares
// only (its tensors cut into pieces carrying the tensor's slot); the owned floats put together
// must equal the one-rank update.
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "optim_dist_case.h"
#include "tk_test.h"

typedef struct {
    const tk_opt_hp *hp;
    const tk_opt_seg *seg;
    int nseg;
    size_t n, bucket;
    float *w, *state, lr; // this rank's copies
    const float *g;
    int64_t step;
    uint16_t *copy;
    rank_arg ra;
    int rc;
    int npieces;
} job;

static void *run_rank(void *p) {
    job *j = p;
    tk_opt_seg mine[512];
    j->npieces = pieces(j->seg, j->nseg, j->n, j->bucket, j->ra.x->world, j->ra.rank, mine);
    tk_optim_dist d = {.world = j->ra.x->world, .nslot = j->nseg, .gather = host_gather, .arg = &j->ra};
    tk_err e = {0};
    j->rc = tk_optim_step_dist_ref(j->hp, j->w, j->g, j->state, j->n, mine, j->npieces, &d, &j->lr, &j->step,
                                   j->copy, TK_BF16, &e);
    return NULL;
}

// Runs `steps` updates on world ranks and one rank from the same w, state, g (a new g each step
// from gen), and returns the largest relative difference of the assembled owned floats (w, m, v,
// copy) from the one-rank ones (NaN when something failed); *pieces_out: rank 0's piece count.
static double compare(const tk_opt_hp *hp, const tk_opt_seg *seg, int nseg, size_t n, size_t bucket, int world,
                      int steps, const float *w0, float (*gen)(size_t i, int step), int *pieces_out) {
    size_t sf = tk_optim_state_floats(hp->kind);
    float *w1 = malloc(n * 4), *s1 = calloc(sf * n + 1, 4), *g = malloc(n * 4);
    uint16_t *c1 = calloc(n, 2);
    float *wr[MAXW], *sr[MAXW];
    uint16_t *cr[MAXW];
    memcpy(w1, w0, n * 4);
    for (int r = 0; r < world; r++) {
        wr[r] = malloc(n * 4), sr[r] = calloc(sf * n + 1, 4), cr[r] = calloc(n, 2);
        memcpy(wr[r], w0, n * 4);
    }
    exch x = {.world = world};
    pthread_barrier_init(&x.bar, NULL, (unsigned)world);
    int64_t t1 = 0;
    int64_t tr[MAXW] = {0};
    double worst = 0;
    tk_err e = {0};
    for (int st = 0; st < steps && !isnan(worst); st++) {
        for (size_t i = 0; i < n; i++) g[i] = gen(i, st);
        float lr = 0.5f;
        t1++;
        if (tk_optim_step_ref(hp, w1, g, sf ? s1 : NULL, n, seg, nseg, &lr, &t1, c1, TK_BF16, &e)) worst = NAN;
        job j[MAXW];
        for (int r = 0; r < world; r++)
            j[r] = (job){.hp = hp, .seg = seg, .nseg = nseg, .n = n, .bucket = bucket, .w = wr[r],
                         .state = sf ? sr[r] : NULL, .lr = lr, .g = g, .step = tr[r] + 1, .copy = cr[r],
                         .ra = {&x, r}};
        run_threads(world, run_rank, j, sizeof *j);
        for (int r = 0; r < world; r++) {
            tr[r] = j[r].step;
            if (j[r].rc || tr[r] != t1) worst = NAN;
        }
        if (pieces_out) *pieces_out = j[0].npieces;
        share_out(wr, sr, cr, sf, n, bucket, world);
    }
    for (size_t i = 0; i < n && !isnan(worst); i++) {
        const float a[4] = {w1[i], sf > 0 ? s1[i] : 0, sf > 1 ? s1[n + i] : 0, (float)c1[i]};
        const float b[4] = {wr[0][i], sf > 0 ? sr[0][i] : 0, sf > 1 ? sr[0][n + i] : 0, (float)cr[0][i]};
        for (int k = 0; k < 3; k++) {
            double d = fabs((double)a[k] - b[k]) / fmax(fabs((double)a[k]), 1e-6);
            if (!(d <= worst)) worst = d; // (NaN too)
        }
        if (fabsf(a[3] - b[3]) > 1) worst = fmax(worst, 1); // the bf16 copies: one ulp at most
    }
    pthread_barrier_destroy(&x.bar);
    for (int r = 0; r < world; r++) free(wr[r]), free(sr[r]), free(cr[r]);
    free(w1), free(s1), free(g), free(c1);
    return worst;
}

// Five tensors over 1,000 floats with a gap (float 600..609 in none), all flag kinds, then padding
// to N floats (a multiple of 64 x world for 2, 3 and 4 ranks, as the engine pads the span).
#define N 1536
static const tk_opt_seg tensors[5] = {{0, 130, 0, 0},
                                      {130, 7, TK_SEG_NO_DECAY | TK_SEG_NO_ADAPT, 1},
                                      {137, 463, 0, 2},
                                      {610, 300, TK_SEG_NO_DECAY, 3},
                                      {910, 90, 0, 4}};

static float small_int_g(size_t i, int st) { return (float)((int)((i * 7 + (size_t)st * 3) % 9) - 4); }
static uint64_t rng = 88172645463325252ull;
static float rnd(void) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2 - 1);
}
static float rand_g(size_t i, int st) {
    (void)i, (void)st;
    return rnd() * 0.01f;
}

TK_TEST(lamb_small_integers_bit_identical_on_2_and_3_ranks) {
    // integers: every fp64 sum of squares is exact, so the split sums are the whole ones exactly
    tk_opt_hp hp = {.kind = TK_OPT_LAMB, .beta1 = 0.5, .beta2 = 0.75, .eps = 0.25, .weight_decay = 0.5,
                    .bias_correction = 1, .max_grad_norm = 8};
    float w0[N];
    for (int i = 0; i < N; i++) w0[i] = (i >= 600 && i < 610) || i >= 1000 ? 0 : (float)(i % 5 - 2);
    int np = 0;
    CHECK(compare(&hp, tensors, 5, N, 192, 2, 3, w0, small_int_g, &np) == 0);
    CHECK(np > 5); // (the shares cut the tensors into pieces)
    CHECK(compare(&hp, tensors, 5, N, 192, 3, 3, w0, small_int_g, NULL) == 0);
}

TK_TEST(random_lamb_adam_sgd_within_summation_order) {
    // random fp32: the norms' sums differ in order only: 1e-6 relative allowed after 4 updates
    // (measured 0: the fp64 sums of fp32 squares, rounded to an fp32 rate, come out the same;
    // TK_TEST_VERBOSE=1 prints each difference)
    tk_opt_hp lamb = {.kind = TK_OPT_LAMB, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.01,
                      .bias_correction = 1, .max_grad_norm = 0.05};
    tk_opt_hp adamw = {.kind = TK_OPT_ADAMW, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.01,
                       .bias_correction = 1, .max_grad_norm = 0.05};
    tk_opt_hp mom = {.kind = TK_OPT_MOMENTUM, .momentum = 0.9, .weight_decay = 1e-4, .max_grad_norm = 0.05};
    float w0[N];
    for (int i = 0; i < N; i++) w0[i] = (i >= 600 && i < 610) || i >= 1000 ? 0 : rnd();
    const tk_opt_hp *hp[3] = {&lamb, &adamw, &mom};
    for (int k = 0; k < 3; k++)
        for (int world = 2; world <= 4; world++) {
            double d = compare(hp[k], tensors, 5, N, 64 * (size_t)world, world, 4, w0, rand_g, NULL);
            if (getenv("TK_TEST_VERBOSE") || !(d <= 1e-6)) fprintf(stderr, "%s on %d ranks: %g\n", tk_opt_kind_name(hp[k]->kind), world, d);
            CHECK(d <= 1e-6);
        }
}

static float nan_late(size_t i, int st) { return st == 1 && i == 950 ? NAN : small_int_g(i, st); }

TK_TEST(a_nan_on_one_rank_skips_the_update_on_every_rank) {
    tk_opt_hp hp = {.kind = TK_OPT_LAMB, .beta1 = 0.5, .beta2 = 0.75, .eps = 0.25, .bias_correction = 1,
                    .max_grad_norm = 8, .skip_nonfinite = 1};
    float w0[N];
    for (int i = 0; i < N; i++) w0[i] = (float)(i % 3);
    // (compare checks every rank's count against the one rank's, which the skip gave back)
    CHECK(compare(&hp, tensors, 5, N, 192, 2, 3, w0, nan_late, NULL) == 0);
}

TK_TEST(bad_distributed_arguments_are_internal_errors) {
    tk_opt_hp lars = {.kind = TK_OPT_LARS, .momentum = 0.9, .trust_coef = 0.001};
    tk_opt_hp sgd = {.kind = TK_OPT_SGD};
    tk_opt_seg seg[2] = {{0, 2, 0, 1}, {2, 2, 0, 0}};
    tk_optim_dist d = {.world = 2, .nslot = 2, .gather = host_gather};
    tk_err e = {0};
    CHECK_EQ_INT(tk_optim_check_dist(&lars, 4, seg, 1, &d, TK_BF16, &e), TK_EINTERNAL);
    CHECK(strstr(e.what, "lars") != NULL);
    CHECK_EQ_INT(tk_optim_check_dist(&sgd, 4, seg, 2, &d, TK_BF16, &e), TK_EINTERNAL); // slots out of order
    d.nslot = 1;
    CHECK_EQ_INT(tk_optim_check_dist(&sgd, 4, seg, 1, &d, TK_BF16, &e), TK_EINTERNAL); // slot 1 of 1
    d.nslot = 2, d.gather = NULL;
    CHECK_EQ_INT(tk_optim_check_dist(&sgd, 4, seg, 1, &d, TK_BF16, &e), TK_EINTERNAL);
    d.gather = host_gather;
    CHECK_EQ_INT(tk_optim_check_dist(&sgd, 4, seg, 1, &d, TK_BF16, &e), 0);
}

