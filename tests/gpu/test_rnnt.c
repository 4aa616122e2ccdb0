// The RNN-T joint and loss on the cuda backend against their CPU references (kernels/rnnt.h):
// fresh random lengths, labels and values each run, packed and padded layouts, the MLPerf
// vocabulary (V = 1024, blank 1023) and odd ones. Tolerances (norm-wise relative): fp32 <= 1e-5,
// bf16 <= 1e-2 (loss, per-utterance costs, dz; the joint's backward). Exact: the joint's forward
// (the same fp32 sum and one rounding, the same Philox mask) always; its backward on small
// integers (sums of integers); uniform logits give the loss the path count says; a second run of
// the loss gives the same bits (no atomics).
#include "gpu_test.h"
#include "rnnt.h"

// got vs ref (n values): relative error within tol; prints a table line.
static int within(const char *what, const float *got, const float *ref, size_t n, double tol) {
    const double err = gt_relerr(got, ref, n);
    printf("# table rnnt %-56s rel err %.2e (%zu of %zu differ)%s\n", what, err, gt_ndiff(got, ref, n), n,
           err <= tol ? "" : "  <-- FAIL");
    return err <= tol;
}

// A batch on both sides: lengths drawn in [1, Tmax] x [0, Umax] (utterance 0 at the maxima), the
// host layout for the reference and the device one for the kernels.
typedef struct {
    int B, T[16], U[16];
    int64_t row0[17];
    tk_rnnt_lay host, dev;
    void *dT, *dU, *drow0;
} batch;
// Packed rows past row0[B] (a capacity, as a captured step's), set by rnnt_row_capacity.
static int64_t extra_rows;

// In place: the layouts point at the struct's own arrays (a struct returned by value would leave
// them pointing into this function's frame).
static void batch_init(batch *s, int B, int Tmax, int Umax, int packed) {
    *s = (batch){.B = B};
    for (int b = 0; b < B; b++) {
        s->T[b] = b == 0 ? Tmax : 1 + (int)(gt_u32(2 * b) % (uint32_t)Tmax);
        s->U[b] = b == 0 ? Umax : (int)(gt_u32(2 * b + 1) % (uint32_t)(Umax + 1));
    }
    tk_err e = {0};
    int64_t rows = tk_rnnt_layout(B, Tmax, Umax, s->T, s->U, packed, s->row0, &e);
    if (rows < 1) gt_die_("tk_rnnt_layout", &e);
    if (packed) rows += extra_rows;
    s->dT = gt_dev(B * sizeof(int)), s->dU = gt_dev(B * sizeof(int)), s->drow0 = gt_dev((B + 1) * sizeof(int64_t));
    gt_up(s->dT, s->T, B * sizeof(int)), gt_up(s->dU, s->U, B * sizeof(int)), gt_up(s->drow0, s->row0, (B + 1) * 8);
    s->host = (tk_rnnt_lay){B, Tmax, Umax, packed, rows, s->T, s->U, s->row0};
    s->dev = (tk_rnnt_lay){B, Tmax, Umax, packed, rows, s->dT, s->dU, s->drow0};
}
static void batch_free(batch *s) { tk_free(gt_ctx_, s->dT), tk_free(gt_ctx_, s->dU), tk_free(gt_ctx_, s->drow0); }

// Host bytes of type t from fp32 values (already rounded to t by gt_dev_from).
static void *host_as(const float *x, size_t n, tk_dtype t) {
    void *h = gt_host(n * tk_dtype_size(t));
    for (size_t i = 0; i < n; i++)
        if (t == TK_BF16) ((uint16_t *)h)[i] = tk_f32_to_bf16(x[i]);
        else ((float *)h)[i] = x[i];
    return h;
}
static float *f32_of(const void *h, size_t n, tk_dtype t) {
    float *f = gt_host(n * 4);
    for (size_t i = 0; i < n; i++)
        f[i] = t == TK_BF16 ? tk_bf16_to_f32(((const uint16_t *)h)[i]) : ((const float *)h)[i];
    return f;
}

// ---- loss ----

// uniform: all logits 0.5 (the loss is (T + U) log V - log C(T + U - 1, U) per utterance);
// ints: logits whole numbers in [-4, 4]; else uniform in [-6, 6). in_place: dz is z.
static void loss_case(int B, int Tmax, int Umax, int V, int packed, tk_dtype t, int ints, int uniform, int in_place,
                      int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    batch s;
    batch_init(&s, B, Tmax, Umax, packed);
    const int blank = V - 1;
    const size_t n = (size_t)s.host.rows * V, es = tk_dtype_size(t);
    float *z = gt_host(n * 4);
    if (uniform)
        for (size_t i = 0; i < n; i++) z[i] = 0.5f;
    else gt_fill(z, n, ints ? -4 : -6, ints ? 4 : 6, ints);
    int *labels = gt_host((size_t)B * (Umax ? Umax : 1) * sizeof(int));
    for (size_t i = 0; i < (size_t)B * Umax; i++) labels[i] = (int)(gt_u32(1000 + i) % (uint32_t)(V - 1));
    void *dz_dev = gt_dev_from(z, n, t), *dlab = gt_dev((size_t)B * (Umax ? Umax : 1) * sizeof(int) + 4);
    gt_up(dlab, labels, (size_t)B * (Umax ? Umax : 1) * sizeof(int));
    void *zh = host_as(z, n, t), *dzh = gt_host(n * es);
    void *out = in_place ? dz_dev : gt_dev(n * es + 16);
    if (!in_place) gt_poison(out, n * es, 0xff);
    float *dloss = gt_dev(4 + 4 * (size_t)B), *dcosts = dloss + 1;
    void *ws = gt_dev(tk_rnnt_loss_ws_bytes(TK_BACKEND_CUDA, B, s.host.rows) + 16);
    double acc[2] = {0.5, 4}, gacc[2], *dacc = gt_dev(16);
    gt_up(dacc, acc, 16);
    const float scale = 1.0f / B;
    CHECK_EQ_INT(tk_rnnt_loss(gt_ctx_, t, &s.dev, V, blank, dlab, dz_dev, scale, dacc, dloss, dcosts, out, ws, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    float loss, costs[16];
    CHECK_EQ_INT(tk_rnnt_loss_ref(t, &s.host, V, blank, labels, zh, scale, acc, &loss, costs, dzh, &e), 0);
    float got[17];
    gt_down(got, dloss, 4 * (size_t)(B + 1));
    char what[128];
    const double tol = t == TK_BF16 ? 1e-2 : 1e-5;
    snprintf(what, sizeof what, "loss %s B%d T%d U%d V%d %s%s%s%s", tk_dtype_name(t), B, Tmax, Umax, V,
             packed ? "packed" : "padded", ints ? " ints" : "", uniform ? " uniform" : "", in_place ? " in-place" : "");
    CHECK(within(what, got, &loss, 1, tol));
    CHECK(within("  costs", got + 1, costs, (size_t)B, tol));
    gt_down(gacc, dacc, 16);
    CHECK_NEAR(gacc[0], acc[0], t == TK_BF16 ? 1e-2 : 1e-5);
    CHECK(gacc[1] == 5 && acc[1] == 5);
    float *g = gt_host_from(out, n, t), *r = f32_of(dzh, n, t);
    CHECK(within("  dz", g, r, n, tol));
    if (!in_place) { // deterministic: a second run gives the same bits
        float again[17];
        CHECK_EQ_INT(tk_rnnt_loss(gt_ctx_, t, &s.dev, V, blank, dlab, dz_dev, scale, NULL, dloss, dcosts, out, ws, &e),
                     0);
        gt_down(again, dloss, 4 * (size_t)(B + 1));
        float *g2 = gt_host_from(out, n, t);
        CHECK_EQ_INT(gt_ndiff(again, got, (size_t)B + 1) + gt_ndiff(g2, g, n), 0);
        free(g2);
    }
    if (uniform) {
        for (int b = 0; b < B; b++) {
            double paths = 1; // C(T + U - 1, U)
            for (int k = 1; k <= s.U[b]; k++) paths = paths * (s.T[b] - 1 + k) / k;
            CHECK_NEAR(got[1 + b], (s.T[b] + s.U[b]) * log((double)V) - log(paths), 1e-5);
        }
    }
    void *dev[] = {dz_dev, dlab, dloss, ws, dacc};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    if (!in_place) tk_free(gt_ctx_, out);
    batch_free(&s);
    free(z), free(labels), free(zh), free(dzh), free(g), free(r);
}

TK_TEST(rnnt_loss_vs_reference) {
    static const struct {
        int B, Tmax, Umax, V;
    } cases[] = {{4, 12, 5, 1024}, {3, 40, 17, 29}, {5, 7, 0, 37}, {2, 150, 60, 1024}, {16, 9, 4, 64}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int t = 0; t < 2; t++)
            for (int packed = 0; packed < 2; packed++)
                loss_case(cases[i].B, cases[i].Tmax, cases[i].Umax, cases[i].V, packed, t ? TK_BF16 : TK_F32, 0, 0,
                          packed, tk_failed_);
}

TK_TEST(rnnt_loss_small_integers_and_uniform) {
    loss_case(4, 10, 6, 1024, 1, TK_F32, 1, 0, 1, tk_failed_);
    loss_case(4, 10, 6, 1024, 0, TK_BF16, 1, 0, 0, tk_failed_);
    loss_case(3, 8, 5, 33, 1, TK_F32, 0, 1, 1, tk_failed_);
    loss_case(3, 8, 5, 33, 0, TK_BF16, 0, 1, 0, tk_failed_);
}

// ---- joint ----

// ints: f, g and dh whole numbers in [-4, 4] (with p 0 or 0.5 the backward's sums are exact on
// both sides: integers below 256, exact in bf16 too).
static void joint_case(int B, int Tmax, int Umax, int H, int packed, tk_dtype t, float p, int ints, int *failed_) {
    int *tk_failed_ = failed_;
    tk_err e = {0};
    batch s;
    batch_init(&s, B, Tmax, Umax, packed);
    const size_t nf = (size_t)B * Tmax * H, ng = (size_t)B * (Umax + 1) * H, nh = (size_t)s.host.rows * H,
                 es = tk_dtype_size(t);
    float *f = gt_host(nf * 4), *g = gt_host(ng * 4), *dh = gt_host(nh * 4);
    gt_fill(f, nf, -4, 4, ints), gt_fill(g, ng, -4, 4, ints), gt_fill(dh, nh, -4, 4, ints);
    void *df_ = gt_dev_from(f, nf, t), *dg_ = gt_dev_from(g, ng, t), *ddh = gt_dev_from(dh, nh, t);
    void *h = gt_dev(nh * es + 16), *gf = gt_dev(nf * es + 16), *gg = gt_dev(ng * es + 16);
    gt_poison(h, nh * es, 0xff), gt_poison(gf, nf * es, 0xff), gt_poison(gg, ng * es, 0xff);
    int64_t step = 7 + (int64_t)(gt_u32(5) % 100), *dstep = gt_dev(8);
    gt_up(dstep, &step, 8);
    const uint64_t seed = gt_seed_ ^ 0x5eed;
    tk_dropout dd = {p, seed, 9, dstep, 64 * (int64_t)(gt_u32(6) % 5) + 3}, hd = dd;
    hd.step = &step;
    CHECK_EQ_INT(tk_rnnt_joint_fwd(gt_ctx_, t, &s.dev, H, df_, dg_, &dd, h, &e), 0);
    CHECK_EQ_INT(tk_rnnt_joint_bwd(gt_ctx_, t, &s.dev, H, df_, dg_, &dd, ddh, gf, gg, &e), 0);
    CHECK_EQ_INT(gt_sync(&e), 0);
    void *fh = host_as(f, nf, t), *gh = host_as(g, ng, t), *dhh = host_as(dh, nh, t);
    void *rh = gt_host(nh * es), *rf = gt_host(nf * es), *rg = gt_host(ng * es);
    CHECK_EQ_INT(tk_rnnt_joint_fwd_ref(t, &s.host, H, fh, gh, &hd, rh, &e), 0);
    CHECK_EQ_INT(tk_rnnt_joint_bwd_ref(t, &s.host, H, fh, gh, &hd, dhh, rf, rg, &e), 0);
    char what[128];
    snprintf(what, sizeof what, "joint %s B%d T%d U%d H%d %s p%.2f%s", tk_dtype_name(t), B, Tmax, Umax, H,
             packed ? "packed" : "padded", p, ints ? " ints" : "");
    const double tol = ints ? 0 : t == TK_BF16 ? 1e-2 : 1e-5;
    float *a = gt_host_from(h, nh, t), *ra = f32_of(rh, nh, t);
    CHECK(within(what, a, ra, nh, 0)); // the forward is exact
    float *b = gt_host_from(gf, nf, t), *rb = f32_of(rf, nf, t), *c = gt_host_from(gg, ng, t), *rc = f32_of(rg, ng, t);
    CHECK(within("  df", b, rb, nf, tol));
    CHECK(within("  dg", c, rc, ng, tol));
    void *dev[] = {df_, dg_, ddh, h, gf, gg, dstep};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) tk_free(gt_ctx_, dev[i]);
    batch_free(&s);
    free(f), free(g), free(dh), free(fh), free(gh), free(dhh), free(rh), free(rf), free(rg);
    free(a), free(ra), free(b), free(rb), free(c), free(rc);
}

// Packed rows with a capacity 13 rows past the lattice's (the captured RNN-T step runs its joint
// at fixed rows): loss, dz (0 on the extra rows, poisoned before) and the joint (h 0 there) as the
// reference's, fp32 and bf16, dropout on.
TK_TEST(rnnt_row_capacity) {
    extra_rows = 13;
    for (int t = 0; t < 2; t++) {
        loss_case(3, 9, 4, 29, 1, t ? TK_BF16 : TK_F32, 0, 0, 0, tk_failed_);
        loss_case(3, 9, 4, 29, 1, t ? TK_BF16 : TK_F32, 0, 0, 1, tk_failed_);
        joint_case(3, 9, 4, 24, 1, t ? TK_BF16 : TK_F32, 0.3f, 0, tk_failed_);
    }
    extra_rows = 0;
}

TK_TEST(rnnt_joint_vs_reference) {
    // (B, Tmax, Umax, H): MLPerf's joint width 512 at small lengths, an odd width (the unaligned
    // dropout path), a long utterance
    static const struct {
        int B, Tmax, Umax, H;
    } cases[] = {{4, 12, 5, 512}, {3, 9, 4, 13}, {2, 60, 20, 64}, {6, 5, 0, 24}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int t = 0; t < 2; t++)
            for (int packed = 0; packed < 2; packed++)
                for (int drop = 0; drop < 2; drop++)
                    joint_case(cases[i].B, cases[i].Tmax, cases[i].Umax, cases[i].H, packed, t ? TK_BF16 : TK_F32,
                               drop ? 0.3f : 0.0f, 0, tk_failed_);
    joint_case(4, 12, 5, 512, 1, TK_F32, 0.5f, 1, tk_failed_); // p 0.5: kept values doubled, still integers
    joint_case(3, 9, 4, 13, 0, TK_BF16, 0.5f, 1, tk_failed_);
    joint_case(4, 12, 5, 512, 0, TK_BF16, 0.0f, 1, tk_failed_);
}

// ---- timing (a table line, no check) ----

typedef struct {
    batch *s;
    int V;
    void *z, *lab, *ws;
    float *loss;
} bench_arg;
static void bench_loss(void *p) {
    bench_arg *a = p;
    tk_err e = {0};
    if (tk_rnnt_loss(gt_ctx_, TK_BF16, &a->s->dev, a->V, a->V - 1, a->lab, a->z, 1.0f, NULL, a->loss, NULL, a->z,
                     a->ws, &e))
        gt_die_("tk_rnnt_loss", &e);
}

typedef struct {
    batch *s;
    int H;
    void *f, *g, *h, *df, *dg;
    tk_dropout *d;
} joint_arg;
static void bench_joint(void *p) {
    joint_arg *a = p;
    tk_err e = {0};
    if (tk_rnnt_joint_fwd(gt_ctx_, TK_BF16, &a->s->dev, a->H, a->f, a->g, a->d, a->h, &e) ||
        tk_rnnt_joint_bwd(gt_ctx_, TK_BF16, &a->s->dev, a->H, a->f, a->g, a->d, a->h, a->df, a->dg, &e))
        gt_die_("tk_rnnt_joint", &e);
}

// The loss and its in-place gradient at an MLPerf-like size (8 utterances of up to 200 frames
// after the encoder's time stacking and 60 subword labels, V = 1024, bf16 logits): the logits are
// read twice and written once, so the bytes moved are about 3 rows V 2. Then the joint at H 512.
TK_TEST(rnnt_loss_bench) {
    (void)tk_failed_; // (timing only: the gradient overwrites z, later runs time it on gradients)
    batch s;
    batch_init(&s, 8, 200, 60, 1);
    const int V = 1024;
    const size_t n = (size_t)s.host.rows * V;
    float *z = gt_host(n * 4);
    gt_fill(z, n, -6, 6, 0);
    int *labels = gt_host(8 * 60 * sizeof(int));
    for (int i = 0; i < 8 * 60; i++) labels[i] = i % (V - 1);
    bench_arg a = {&s, V, gt_dev_from(z, n, TK_BF16), gt_dev(8 * 60 * sizeof(int)),
                   gt_dev(tk_rnnt_loss_ws_bytes(TK_BACKEND_CUDA, 8, s.host.rows)), gt_dev(4)};
    gt_up(a.lab, labels, 8 * 60 * sizeof(int));
    const double ms = gt_time_ms(bench_loss, &a, 9);
    printf("# table rnnt bench loss+grad bf16 rows %lld V %d: %.3f ms, %.0f GB/s\n", (long long)s.host.rows, V, ms,
           3.0 * n * 2 / ms / 1e6);
    void *dev[] = {a.z, a.lab, a.ws, a.loss};
    for (size_t i = 0; i < 4; i++) tk_free(gt_ctx_, dev[i]);
    // the joint (H 512, dropout 0.3) forward then backward: h written once and read once (as dh),
    // f and g read (U + 1 and T times, mostly from cache), df and dg written
    const int H = 512;
    const size_t nh = (size_t)s.host.rows * H, nf = (size_t)8 * 200 * H, ng = (size_t)8 * 61 * H;
    float *x = gt_host(nf * 4);
    gt_fill(x, nf, -1, 1, 0);
    int64_t *step = gt_dev(8), zero = 0;
    gt_up(step, &zero, 8);
    tk_dropout d = {0.3f, 1, 0, step, 0};
    joint_arg j = {&s, H, gt_dev_from(x, nf, TK_BF16), gt_dev_from(x, ng, TK_BF16), gt_dev(nh * 2), gt_dev(nf * 2),
                   gt_dev(ng * 2), &d};
    const double jms = gt_time_ms(bench_joint, &j, 9);
    printf("# table rnnt bench joint fwd+bwd bf16 rows %lld H %d p 0.3: %.3f ms, %.0f GB/s\n", (long long)s.host.rows,
           H, jms, 2.0 * nh * 2 / jms / 1e6);
    void *jdev[] = {j.f, j.g, j.h, j.df, j.dg, step};
    for (size_t i = 0; i < 6; i++) tk_free(gt_ctx_, jdev[i]);
    free(x);
    batch_free(&s);
    free(z), free(labels);
}
