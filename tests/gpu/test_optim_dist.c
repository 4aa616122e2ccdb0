// The distributed form of the shared optimizer on the device (kernels/optim.cu
// tk_optim_step_dist: k_gsum, k_slots, the distributed k_prep / k_prep2) against the cpu
// reference: world ranks as threads (tests/unit/optim_dist_case.h), rank 0 running the cuda
// kernels (its gathers copy the partial sums down, exchange them, and copy every rank's up), the
// others the reference; each rank updates the floats of its shares only (the engine's layout,
// tensors cut into pieces across chunk, bucket and share boundaries), the owned floats are shared
// out after each update (the engine's all-gather), and the result must equal the one-rank
// reference update. Tolerances: small integers (weights, gradients, lamb's constants powers of two,
// no clipping: the gradient norm and ||w|| exact in any order) 1e-6 relative (||u||'s sums are of
// fractions, whose order can move a rate by an ulp); fresh random inputs fp32 <= 1e-5 relative
// (norm-wise) on w, m and v after 3 updates; the bf16 copy <= 1e-2.
#include <pthread.h>

#include "../unit/optim_dist_case.h"
#include "gpu_test.h"

#define NT 5
#define NF (64 * 3072) // floats: a multiple of 64 x world for 2, 3 and 4 ranks; 12 chunks of 16,384

// Five tensors with a gap and padding after the last, every flag kind; several chunks each.
static const tk_opt_seg tensors[NT] = {{0, 50000, 0, 0},
                                       {50000, 7, TK_SEG_NO_DECAY | TK_SEG_NO_ADAPT, 1},
                                       {50008, 80000, 0, 2},
                                       {130100, 40000, TK_SEG_NO_DECAY, 3},
                                       {170100, 20000, 0, 4}};

typedef struct {
    rank_arg ra;
    float *dw, *dg, *dst, *dlr;
    int64_t *dstep;
    uint16_t *dcp;
    tk_opt_seg *dseg;
    void *dws;
} dev_rank;

// rank 0's gather: the device's partial sums through the host exchange and back.
static int dev_gather(void *arg, const double *mine, double *all, size_t count, tk_err *e) {
    dev_rank *d = arg;
    double m[256], a[256 * MAXW];
    if (count > 256) return tk_err_set(e, TK_EINTERNAL, "test gather: %zu sums", count);
    gt_down(m, mine, count * sizeof *m);
    TRY(host_gather(&d->ra, m, a, count, e));
    gt_up(all, a, count * (size_t)d->ra.x->world * sizeof *a);
    return gt_sync(e);
}

typedef struct {
    const tk_opt_hp *hp;
    int world, rank, rc;
    size_t bucket;
    float *w, *st, lr;
    const float *g;
    uint16_t *cp;
    int64_t step;
    dev_rank *dev; // rank 0
    exch *x;
} job;

static void *run_rank(void *p) {
    job *j = p;
    static __thread tk_opt_seg mine[1024];
    int np = pieces(tensors, NT, NF, j->bucket, j->world, j->rank, mine);
    size_t sf = tk_optim_state_floats(j->hp->kind);
    tk_err e = {0};
    if (!j->dev) {
        rank_arg ra = {j->x, j->rank};
        tk_optim_dist d = {.world = j->world, .nslot = NT, .gather = host_gather, .arg = &ra};
        j->rc = tk_optim_step_dist_ref(j->hp, j->w, j->g, sf ? j->st : NULL, NF, mine, np, &d, &j->lr, &j->step,
                                       j->cp, TK_BF16, &e);
        return NULL;
    }
    dev_rank *v = j->dev;
    tk_optim_dist d = {.world = j->world, .nslot = NT, .gather = dev_gather, .arg = v};
    gt_up(v->dw, j->w, NF * 4), gt_up(v->dg, j->g, NF * 4), gt_up(v->dlr, &j->lr, 4), gt_up(v->dstep, &j->step, 8);
    gt_up(v->dcp, j->cp, NF * 2); // (the floats in no tensor keep their 0 on every rank)
    if (sf) gt_up(v->dst, j->st, sf * NF * 4);
    gt_up(v->dseg, mine, (size_t)(np + 1) * sizeof *mine);
    j->rc = tk_optim_step_dist(gt_ctx_, j->hp, v->dw, v->dg, sf ? v->dst : NULL, NF, v->dseg, mine, np, &d, v->dlr,
                               v->dstep, v->dcp, TK_BF16, v->dws, &e);
    if (j->rc) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("# rank 0: %s\n", buf);
        return NULL;
    }
    gt_down(j->w, v->dw, NF * 4), gt_down(j->cp, v->dcp, NF * 2), gt_down(&j->step, v->dstep, 8);
    if (sf) gt_down(j->st, v->dst, sf * NF * 4);
    return NULL;
}

// steps updates on world ranks (rank 0 on the device) against one reference rank; returns the
// largest norm-wise relative error of w, m, v (and *cperr the copy's), NaN on a failure.
static double run(const tk_opt_hp *hp, int world, int ints, int steps, double *cperr) {
    size_t sf = tk_optim_state_floats(hp->kind), bucket = 64 * (size_t)world * 37; // (37: cuts the chunks)
    float *w1 = gt_host(NF * 4), *s1 = gt_host(2 * NF * 4 + 4), *g = gt_host(NF * 4);
    uint16_t *c1 = gt_host(NF * 2);
    float *wr[MAXW], *sr[MAXW];
    uint16_t *cr[MAXW];
    gt_fill(w1, NF, -1, 1, ints);
    memset(s1, 0, 2 * NF * 4 + 4), memset(c1, 0, NF * 2);
    for (size_t i = 0; i < NF; i++)
        if ((i >= 50007 && i < 50008) || (i >= 130008 && i < 130100) || i >= 190100) w1[i] = 0; // gaps
    for (int r = 0; r < world; r++) {
        wr[r] = gt_host(NF * 4), sr[r] = gt_host(2 * NF * 4 + 4), cr[r] = gt_host(NF * 2);
        memcpy(wr[r], w1, NF * 4), memset(sr[r], 0, 2 * NF * 4 + 4), memset(cr[r], 0, NF * 2);
    }
    dev_rank dev = {0};
    dev.dw = gt_dev(NF * 4), dev.dg = gt_dev(NF * 4), dev.dst = gt_dev(2 * NF * 4 + 4), dev.dlr = gt_dev(4);
    dev.dstep = gt_dev(8), dev.dcp = gt_dev(NF * 2), dev.dseg = gt_dev(1025 * sizeof(tk_opt_seg));
    tk_optim_dist dd = {.world = world, .nslot = NT, .gather = dev_gather};
    dev.dws = gt_dev(tk_optim_ws_bytes_dist(TK_BACKEND_CUDA, 1024, NF, &dd));
    exch x = {.world = world};
    pthread_barrier_init(&x.bar, NULL, (unsigned)world);
    dev.ra = (rank_arg){&x, 0};
    int64_t t1 = 0;
    double worst = 0;
    tk_err e = {0};
    for (int st = 0; st < steps && !isnan(worst); st++) {
        gt_fill(g, NF, ints ? -4 : -0.01f, ints ? 4 : 0.01f, ints);
        float lr = 0.5f;
        t1++;
        if (tk_optim_step_ref(hp, w1, g, sf ? s1 : NULL, NF, tensors, NT, &lr, &t1, c1, TK_BF16, &e)) worst = NAN;
        job j[MAXW];
        for (int r = 0; r < world; r++)
            j[r] = (job){.hp = hp, .world = world, .rank = r, .bucket = bucket, .w = wr[r], .st = sr[r], .lr = lr,
                         .g = g, .cp = cr[r], .step = t1, .dev = r == 0 ? &dev : NULL, .x = &x};
        run_threads(world, run_rank, j, sizeof *j);
        for (int r = 0; r < world; r++)
            if (j[r].rc || j[r].step != t1) worst = NAN;
        share_out(wr, sr, cr, sf, NF, bucket, world);
    }
    for (size_t k = 0; k < sf && !isnan(worst); k++) worst = fmax(worst, gt_relerr(sr[0] + k * NF, s1 + k * NF, NF));
    if (!isnan(worst)) worst = fmax(worst, gt_relerr(wr[0], w1, NF));
    float *a = gt_host(NF * 4), *b = gt_host(NF * 4);
    for (size_t i = 0; i < NF; i++) a[i] = tk_bf16_to_f32(cr[0][i]), b[i] = tk_bf16_to_f32(c1[i]);
    *cperr = gt_relerr(a, b, NF);
    free(a), free(b);
    pthread_barrier_destroy(&x.bar);
    tk_free(gt_ctx_, dev.dw), tk_free(gt_ctx_, dev.dg), tk_free(gt_ctx_, dev.dst), tk_free(gt_ctx_, dev.dlr);
    tk_free(gt_ctx_, dev.dstep), tk_free(gt_ctx_, dev.dcp), tk_free(gt_ctx_, dev.dseg), tk_free(gt_ctx_, dev.dws);
    for (int r = 0; r < world; r++) free(wr[r]), free(sr[r]), free(cr[r]);
    free(w1), free(s1), free(g), free(c1);
    return worst;
}

static const tk_opt_hp lamb = {.kind = TK_OPT_LAMB, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 0.01,
                               .bias_correction = 1, .max_grad_norm = 1.0, .skip_nonfinite = 1};
static const tk_opt_hp adamw = {.kind = TK_OPT_ADAMW, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 0.01, .bias_correction = 1, .max_grad_norm = 1.0};
static const tk_opt_hp mom = {.kind = TK_OPT_MOMENTUM, .momentum = 0.9, .weight_decay = 1e-4, .max_grad_norm = 1.0};

TK_TEST(device_rank_matches_one_rank_small_integers) {
    tk_opt_hp hp = {.kind = TK_OPT_LAMB, .beta1 = 0.5, .beta2 = 0.75, .eps = 0.25, .weight_decay = 0.5,
                    .bias_correction = 1};
    for (int world = 2; world <= 3; world++) {
        double cp, d = run(&hp, world, 1, 3, &cp);
        printf("# table optim_dist lamb ints %d ranks: rel err %.2e, copy %.2e\n", world, d, cp);
        CHECK(d <= 1e-6 && cp <= 1e-2);
    }
}

TK_TEST(device_rank_matches_one_rank_random) {
    const tk_opt_hp *hp[3] = {&lamb, &adamw, &mom};
    for (int k = 0; k < 3; k++)
        for (int world = 2; world <= 4; world += 2) {
            double cp, d = run(hp[k], world, 0, 3, &cp);
            printf("# table optim_dist %s %d ranks: rel err %.2e, copy %.2e%s\n", tk_opt_kind_name(hp[k]->kind), world,
                   d, cp, d <= 1e-5 && cp <= 1e-2 ? "" : "  <-- FAIL");
            CHECK(d <= 1e-5 && cp <= 1e-2);
        }
}
