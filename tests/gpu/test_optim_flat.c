// kernels/optim.cu against kernels/optim_ref.c, with the device learning-rate schedule in the
// loop: every optimizer kind on fresh random inputs (fp32 <= 1e-5 relative, state too, bf16 copy
// <= 1e-2) over segments of every shape the kernels distinguish (empty, 1 float, a chunk and one
// more, several chunks, an offset that is not a multiple of 4, gaps between tensors, a total
// that makes the second moment misaligned); small-integer cases where both sides must agree to
// the bit; a skipped non-finite step; the same steps replayed from a CUDA graph and run eagerly
// (bitwise equal: the norms are fixed-order sums); and BERT-large's 398 tensors (336.2 M
// floats), one LAMB step against the reference and the time of each kind.
#include "gpu_test.h"
#include "lr_schedule.h"
#include "optim.h"

// Segments of the random cases: sizes, with the offset of each rounded up to 4 floats (16
// bytes) except the one marked odd, and a gap of 8 floats after every third.
static const int64_t seg_sizes[] = {1, 3, 0, 4, 7, 64, 1000, 16384, 16385, 50000, 5, 300001, 2, 1 << 20, 33};
#define NSEG_R ((int)(sizeof seg_sizes / sizeof seg_sizes[0]))

static int make_segments(tk_opt_seg *seg, int odd_at, int64_t *n) {
    int64_t off = 0;
    for (int s = 0; s < NSEG_R; s++) {
        off = (off + 3) & ~(int64_t)3;
        if (s == odd_at) off += 1;
        seg[s] = (tk_opt_seg){off, seg_sizes[s], s % 4, 0}; // flags cycle 0, NO_DECAY, NO_ADAPT, both
        off += seg_sizes[s] + (s % 3 == 2 ? 8 : 0);
    }
    *n = off;
    return NSEG_R;
}

// One optimizer on both sides: host arrays (the reference's) and their device twins.
typedef struct {
    tk_opt_hp hp;
    tk_lr_sched sched;
    size_t n, ns;
    int nseg;
    tk_opt_seg *seg;
    float *w, *g, *st, lr;
    uint16_t *cp;
    int64_t step;
    tk_dtype ct;
    float *dw, *dg, *dst, *dlr;
    void *dcp, *dws;
    tk_opt_seg *dseg;
    int64_t *dstep;
} fx;

// How fx_init fills the weights and state: random (state too), small integers (state zero), or
// random weights with a zero state (the bench size, where drawing 1.3 G host values would be slow).
enum { FILL_RANDOM, FILL_INTS, FILL_ZERO_STATE };

static void fx_init(fx *f, const tk_opt_hp *hp, const tk_lr_sched *sc, size_t n, const tk_opt_seg *seg, int nseg,
                    tk_dtype ct, int fill) {
    int ints = fill == FILL_INTS;
    memset(f, 0, sizeof *f);
    f->hp = *hp, f->sched = *sc, f->n = n, f->nseg = nseg, f->ct = ct;
    f->ns = tk_optim_state_floats(hp->kind);
    f->seg = gt_host(sizeof *seg * (nseg + 1));
    memcpy(f->seg, seg, sizeof *seg * nseg);
    f->w = gt_host(4 * n), f->g = gt_host(4 * n), f->st = gt_host(4 * n * f->ns + 4), f->cp = gt_host(2 * n);
    if (ints) gt_fill(f->w, n, -8, 8, 1);
    else gt_fill(f->w, n, -1, 1, 0);
    if (f->ns > 0 && fill == FILL_RANDOM) gt_fill(f->st, n, -0.01f, 0.01f, 0);
    if (f->ns > 1 && fill == FILL_RANDOM) gt_fill(f->st + n, n, 0, 1e-4f, 0);
    if (fill != FILL_RANDOM) memset(f->st, 0, 4 * n * f->ns);
    for (size_t i = 0; i < n; i++) f->cp[i] = 0x7777;
    f->dw = gt_dev(4 * n), f->dg = gt_dev(4 * n), f->dst = gt_dev(4 * n * f->ns + 4), f->dcp = gt_dev(2 * n);
    f->dlr = gt_dev(4), f->dstep = gt_dev(8), f->dseg = gt_dev(sizeof *seg * (nseg + 1));
    size_t wsb = tk_optim_ws_bytes(TK_BACKEND_CUDA, nseg, n);
    f->dws = gt_dev(wsb);
    gt_poison(f->dws, wsb, 0xff); // nothing may rely on a zeroed workspace
    gt_up(f->dw, f->w, 4 * n), gt_up(f->dst, f->st, 4 * n * f->ns + 4), gt_up(f->dcp, f->cp, 2 * n);
    gt_up(f->dstep, &f->step, 8), gt_up(f->dseg, f->seg, sizeof *seg * (nseg + 1));
}

static void fx_free(fx *f) {
    void *d[] = {f->dw, f->dg, f->dst, f->dcp, f->dlr, f->dstep, f->dseg, f->dws};
    for (int i = 0; i < 8; i++) tk_free(gt_ctx_, d[i]);
    free(f->seg), free(f->w), free(f->g), free(f->st), free(f->cp);
}

// New gradients on both sides: random in [-1, 1) or nonzero integers in [-8, 8].
static void fx_grads(fx *f, int ints) {
    if (ints) {
        gt_fill(f->g, f->n, 1, 16, 1);
        for (size_t i = 0; i < f->n; i++) f->g[i] = f->g[i] <= 8 ? f->g[i] : 8 - f->g[i];
    } else {
        gt_fill(f->g, f->n, -1, 1, 0);
    }
    gt_up(f->dg, f->g, 4 * f->n);
}

static int dev_step(fx *f, tk_err *e) {
    TRY(tk_lr_schedule(gt_ctx_, &f->sched, f->dstep, f->dlr, e));
    return tk_optim_step(gt_ctx_, &f->hp, f->dw, f->dg, f->dst, f->n, f->dseg, f->seg, f->nseg, f->dlr, f->dstep,
                         f->ct == TK_F32 ? NULL : f->dcp, f->ct, f->dws, e);
}

static void ref_step(fx *f) {
    tk_err e = {0};
    if (tk_lr_schedule_ref(&f->sched, &f->step, &f->lr, &e) ||
        tk_optim_step_ref(&f->hp, f->w, f->g, f->st, f->n, f->seg, f->nseg, &f->lr, &f->step,
                          f->ct == TK_F32 ? NULL : f->cp, f->ct, &e))
        gt_die_("reference step", &e);
}

typedef struct {
    double w_rel, st_rel, cp_rel;
    size_t w_diff, st_diff, cp_diff;
    int64_t step;
} cmp;

static cmp fx_compare(fx *f) {
    cmp r = {0};
    size_t ns = f->n * f->ns;
    float *w = gt_host(4 * f->n), *st = gt_host(4 * ns + 4), *a = gt_host(4 * f->n), *b = gt_host(4 * f->n);
    uint16_t *cp = gt_host(2 * f->n);
    gt_down(w, f->dw, 4 * f->n), gt_down(st, f->dst, 4 * ns + 4), gt_down(cp, f->dcp, 2 * f->n);
    gt_down(&r.step, f->dstep, 8);
    r.w_rel = gt_relerr(w, f->w, f->n), r.w_diff = gt_ndiff(w, f->w, f->n);
    r.st_rel = ns ? gt_relerr(st, f->st, ns) : 0, r.st_diff = ns ? gt_ndiff(st, f->st, ns) : 0;
    for (size_t i = 0; i < f->n; i++) {
        int bf = f->ct == TK_BF16;
        a[i] = bf ? tk_bf16_to_f32(cp[i]) : gt_f16_to_f32(cp[i]);
        b[i] = bf ? tk_bf16_to_f32(f->cp[i]) : gt_f16_to_f32(f->cp[i]);
        r.cp_diff += cp[i] != f->cp[i];
    }
    r.cp_rel = f->ct == TK_F32 ? 0 : gt_relerr(a, b, f->n);
    free(w), free(st), free(cp), free(a), free(b);
    return r;
}

// steps updates on both sides with new gradients each; the worst relative errors and the
// summed counts of differing values over the steps.
static cmp run_steps(fx *f, int steps, int ints, int *tk_failed_) {
    cmp worst = {0};
    tk_err e = {0};
    for (int s = 0; s < steps; s++) {
        fx_grads(f, ints);
        ref_step(f);
        CHECK_EQ_INT(dev_step(f, &e), 0);
        cmp r = fx_compare(f);
        if (r.w_rel > worst.w_rel) worst.w_rel = r.w_rel;
        if (r.st_rel > worst.st_rel) worst.st_rel = r.st_rel;
        if (r.cp_rel > worst.cp_rel) worst.cp_rel = r.cp_rel;
        worst.w_diff += r.w_diff, worst.st_diff += r.st_diff, worst.cp_diff += r.cp_diff;
        CHECK_EQ_INT(r.step, f->step);
        worst.step = r.step;
    }
    return worst;
}

// The configurations the tests run: name, hyperparameters, copy type.
typedef struct {
    const char *name;
    tk_opt_hp hp;
    tk_dtype ct;
} kind_case;

static const kind_case cases[] = {
    {"sgd+wd", {.kind = TK_OPT_SGD, .weight_decay = 1e-2}, TK_BF16},
    {"momentum+damp", {.kind = TK_OPT_MOMENTUM, .momentum = 0.9, .dampening = 0.1, .weight_decay = 1e-4}, TK_F16},
    {"nesterov+clip", {.kind = TK_OPT_MOMENTUM, .momentum = 0.9, .nesterov = 1, .max_grad_norm = 5}, TK_BF16},
    {"adam", {.kind = TK_OPT_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2,
              .bias_correction = 1}, TK_BF16},
    {"adamw+skip", {.kind = TK_OPT_ADAMW, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 1e-2,
                    .bias_correction = 1, .skip_nonfinite = 1}, TK_F32},
    {"lamb", {.kind = TK_OPT_LAMB, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-6, .weight_decay = 1e-2,
              .bias_correction = 1, .max_grad_norm = 1}, TK_BF16},
    {"lamb-noclip", {.kind = TK_OPT_LAMB, .beta1 = 0.83, .beta2 = 0.925, .eps = 1e-6, .weight_decay = 1e-2,
                     .bias_correction = 1}, TK_F16},
    {"lars", {.kind = TK_OPT_LARS, .momentum = 0.9, .weight_decay = 5e-5, .trust_coef = 1e-3}, TK_BF16},
    {"lars+nesterov", {.kind = TK_OPT_LARS, .momentum = 0.9, .nesterov = 1, .weight_decay = 5e-5,
                       .trust_coef = 1e-3}, TK_F32},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

// Cosine with warm-up: every step a different rate.
static const tk_lr_sched cosine = {.kind = TK_LR_COSINE, .base_lr = 0.05, .warmup_steps = 2, .total_steps = 9,
                                   .end_lr = 1e-3};

static void random_case(const kind_case *k, int odd_at, int64_t extra, int steps, int *tk_failed_) {
    tk_opt_seg seg[NSEG_R];
    int64_t n;
    int nseg = make_segments(seg, odd_at, &n);
    n += extra; // floats after the last segment: n % 4 != 0 misaligns the second moment
    fx f;
    fx_init(&f, &k->hp, &cosine, (size_t)n, seg, nseg, k->ct, FILL_RANDOM);
    cmp worst = run_steps(&f, steps, 0, tk_failed_);
    printf("# table optim %-13s n %lld odd %2d x%d steps: w rel %.1e (%zu differ), state rel %.1e (%zu), copy rel %.1e "
           "(%zu)\n",
           k->name, (long long)n, odd_at, steps, worst.w_rel, worst.w_diff, worst.st_rel, worst.st_diff, worst.cp_rel,
           worst.cp_diff);
    CHECK(worst.w_rel <= 1e-5 && worst.st_rel <= 1e-5 && worst.cp_rel <= 1e-2);
    fx_free(&f);
}

TK_TEST(random_every_kind_vs_reference) {
    for (int k = 0; k < NCASES; k++) random_case(&cases[k], 9, 0, 5, tk_failed_);
}

TK_TEST(random_scalar_paths_vs_reference) {
    // Offset of a multi-chunk segment not a multiple of 4, and a total of 4k + 2 floats (the
    // second moment at state + n is then not 16-byte aligned: scalar accesses everywhere).
    for (int k = 0; k < NCASES; k++) random_case(&cases[k], 13, 2, 3, tk_failed_);
}

TK_TEST(small_integers_bitwise_every_kind) {
    // Integer weights and nonzero integer gradients, rate 0.5: the norms are exact sums, so both
    // sides get the same scalars and, with the same IEEE operations, the same bits. LAMB with
    // beta1 0.5, beta2 0.75, eps 0 has u = sign(g) + wd w at t = 1; LAMB and LARS take one step
    // (after it the weights are no longer integers and the norms' order matters).
    static const kind_case ic[] = {
        {"sgd", {.kind = TK_OPT_SGD, .weight_decay = 0.25}, TK_BF16},
        {"momentum", {.kind = TK_OPT_MOMENTUM, .momentum = 0.5, .dampening = 0.5}, TK_F16},
        {"nesterov", {.kind = TK_OPT_MOMENTUM, .momentum = 0.5, .nesterov = 1, .max_grad_norm = 1e9}, TK_BF16},
        {"adam", {.kind = TK_OPT_ADAM, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.25,
                  .bias_correction = 1}, TK_BF16},
        {"adamw", {.kind = TK_OPT_ADAMW, .beta1 = 0.5, .beta2 = 0.75, .weight_decay = 0.25, .bias_correction = 1},
         TK_F16},
        {"lamb", {.kind = TK_OPT_LAMB, .beta1 = 0.5, .beta2 = 0.75, .weight_decay = 0.25, .bias_correction = 1},
         TK_BF16},
        {"lars", {.kind = TK_OPT_LARS, .momentum = 0.5, .weight_decay = 0.25, .trust_coef = 0.5}, TK_BF16},
    };
    const tk_lr_sched flat = {.base_lr = 0.5};
    for (int k = 0; k < (int)(sizeof ic / sizeof ic[0]); k++) {
        tk_opt_seg seg[NSEG_R];
        int64_t n;
        int nseg = make_segments(seg, 9, &n);
        fx f;
        fx_init(&f, &ic[k].hp, &flat, (size_t)n, seg, nseg, ic[k].ct, FILL_INTS);
        int steps = ic[k].hp.kind == TK_OPT_LAMB || ic[k].hp.kind == TK_OPT_LARS ? 1 : 3;
        cmp r = run_steps(&f, steps, 1, tk_failed_);
        size_t diff = r.w_diff + r.st_diff + r.cp_diff;
        printf("# table optim ints %-8s x%d steps: differing %zu\n", ic[k].name, steps, diff);
        CHECK_EQ_INT(diff, 0);
        fx_free(&f);
    }
}

TK_TEST(nonfinite_gradient_is_skipped_on_the_device) {
    const kind_case *k = &cases[4]; // adamw+skip
    tk_opt_seg seg[NSEG_R];
    int64_t n;
    int nseg = make_segments(seg, 9, &n);
    fx f;
    fx_init(&f, &k->hp, &cosine, (size_t)n, seg, nseg, TK_BF16, FILL_RANDOM);
    tk_err e = {0};
    fx_grads(&f, 0);
    ref_step(&f);
    CHECK_EQ_INT(dev_step(&f, &e), 0);
    fx_grads(&f, 0);
    f.g[seg[13].off + 777] = NAN; // in the 1 M-float segment
    gt_up(f.dg, f.g, 4 * f.n);
    ref_step(&f);
    CHECK_EQ_INT(dev_step(&f, &e), 0);
    cmp r = fx_compare(&f);
    CHECK_EQ_INT(f.step, 1); // the reference gave the count back
    CHECK_EQ_INT(r.step, 1);
    CHECK(r.w_rel <= 1e-5 && r.st_rel <= 1e-5);
    printf("# table optim skip adamw: step after the NaN update %lld (device %lld), w rel %.1e\n", (long long)f.step,
           (long long)r.step, r.w_rel);
    fx_free(&f);
}

// K updates captured once in a CUDA graph and replayed, against K eager calls from the same
// start: weights, state, copy, counter and rate must be bitwise equal.
TK_TEST(graph_replay_equals_eager_bitwise) {
    for (int k = 0; k < NCASES; k++) {
        tk_opt_seg seg[NSEG_R];
        int64_t n;
        int nseg = make_segments(seg, 9, &n);
        fx a, b;
        uint64_t seed0 = gt_draws_;
        fx_init(&a, &cases[k].hp, &cosine, (size_t)n, seg, nseg, cases[k].ct, FILL_RANDOM);
        fx_grads(&a, 0);
        gt_draws_ = (uint32_t)seed0; // the same random inputs again
        fx_init(&b, &cases[k].hp, &cosine, (size_t)n, seg, nseg, cases[k].ct, FILL_RANDOM);
        fx_grads(&b, 0);
        tk_err e = {0};
        tk_graph gr = {0};
        CHECK_EQ_INT(tk_graph_begin(gt_ctx_, &e), 0);
        CHECK_EQ_INT(dev_step(&a, &e), 0);
        CHECK_EQ_INT(tk_graph_end(gt_ctx_, &gr, &e), 0);
        const int K = 4;
        for (int s = 0; s < K; s++) {
            CHECK_EQ_INT(tk_graph_launch(gt_ctx_, &gr, &e), 0);
            CHECK_EQ_INT(dev_step(&b, &e), 0);
        }
        size_t ns = a.n * a.ns, diff = 0;
        float *x = gt_host(4 * (a.n + ns + 1)), *y = gt_host(4 * (a.n + ns + 1));
        gt_down(x, a.dw, 4 * a.n), gt_down(y, b.dw, 4 * a.n);
        gt_down(x + a.n, a.dst, 4 * ns), gt_down(y + a.n, b.dst, 4 * ns);
        gt_down(x + a.n + ns, a.dlr, 4), gt_down(y + a.n + ns, b.dlr, 4);
        diff += gt_ndiff(x, y, a.n + ns + 1);
        uint16_t *cx = gt_host(2 * a.n), *cy = gt_host(2 * a.n);
        gt_down(cx, a.dcp, 2 * a.n), gt_down(cy, b.dcp, 2 * a.n);
        for (size_t i = 0; i < a.n; i++) diff += cx[i] != cy[i];
        int64_t sa, sb;
        gt_down(&sa, a.dstep, 8), gt_down(&sb, b.dstep, 8);
        printf("# table optim graph vs eager %-13s x%d steps: differing %zu, steps %lld / %lld\n", cases[k].name, K,
               diff, (long long)sa, (long long)sb);
        CHECK(diff == 0 && sa == K && sb == K);
        tk_graph_destroy(&gr);
        free(x), free(y), free(cx), free(cy);
        fx_free(&a), fx_free(&b);
    }
}

// ---- BERT-large: 398 tensors, each offset rounded up to 64 floats as NVIDIA's flat buffer ----

static int bert_segments(tk_opt_seg *seg, int64_t *n) {
    int ns = 0;
    int64_t off = 0;
#define T(len, flags) (off = (off + 63) & ~(int64_t)63, seg[ns++] = (tk_opt_seg){off, (len), (flags), 0}, off += (len))
    const int H = 1024, F = 4096, V = 30522, ND = TK_SEG_NO_DECAY | TK_SEG_NO_ADAPT;
    T((int64_t)V * H, 0), T(512 * H, 0), T(2 * H, 0), T(H, ND), T(H, ND); // embeddings, LayerNorm
    for (int l = 0; l < 24; l++) {
        for (int q = 0; q < 4; q++) T((int64_t)H * H, 0), T(H, ND); // query, key, value, output + biases
        T(H, ND), T(H, ND);                                         // attention LayerNorm
        T((int64_t)F * H, 0), T(F, ND), T((int64_t)H * F, 0), T(H, ND); // feed-forward
        T(H, ND), T(H, ND);                                         // output LayerNorm
    }
    T((int64_t)H * H, 0), T(H, ND);                // pooler
    T((int64_t)H * H, 0), T(H, ND), T(H, ND), T(H, ND); // cls transform + LayerNorm
    T(V, ND), T(2 * H, 0), T(2, ND);               // cls output bias, seq_relationship
#undef T
    *n = (off + 63) & ~(int64_t)63;
    return ns;
}

// Fills n device floats with values in [lo, hi) by tiling one random host block.
static void dev_fill(float *d, size_t n, float lo, float hi) {
    const size_t B = (size_t)1 << 22;
    float *h = gt_host(4 * B);
    gt_fill(h, B, lo, hi, 0);
    gt_up(d, h, 4 * (n < B ? n : B));
    tk_err e = {0};
    for (size_t o = B; o < n; o += B)
        if (tk_memcpy_d2d(gt_ctx_, d + o, d + o - B, 4 * (n - o < B ? n - o : B), TK_STREAM_COMPUTE, &e))
            gt_die_("d2d", &e);
    free(h);
}

typedef struct {
    fx *f;
} bench_arg;
static void bench_fn(void *p) {
    tk_err e = {0};
    if (dev_step(((bench_arg *)p)->f, &e)) gt_die_("bench step", &e);
}

TK_TEST(bert_large_lamb_vs_reference_and_times) {
    static tk_opt_seg seg[512];
    int64_t n;
    int nseg = bert_segments(seg, &n);
    int64_t params = 0;
    for (int s = 0; s < nseg; s++) params += seg[s].n;
    printf("# BERT-large: %d tensors, %lld parameters, flat buffer %lld floats\n", nseg, (long long)params,
           (long long)n);
    // One LAMB step (MLPerf hyperparameters, bf16 copy) on both sides.
    fx f;
    fx_init(&f, &cases[5].hp, &cosine, (size_t)n, seg, nseg, TK_BF16, FILL_ZERO_STATE);
    fx_grads(&f, 0);
    ref_step(&f);
    tk_err e = {0};
    CHECK_EQ_INT(dev_step(&f, &e), 0);
    cmp r = fx_compare(&f);
    printf("# table optim bert-large lamb x1 step: w rel %.1e (%zu differ), state rel %.1e, copy rel %.1e (%zu)\n",
           r.w_rel, r.w_diff, r.st_rel, r.cp_rel, r.cp_diff);
    CHECK(r.w_rel <= 1e-5 && r.st_rel <= 1e-5 && r.cp_rel <= 1e-2);
    fx_free(&f);
    // Times: bytes moved per update, counted from what each kernel reads and writes (4 bytes per
    // fp32 value, 2 per copy value, the parameters only: padding is not touched).
    static const struct {
        int c;
        double bytes_per_param;
        const char *what;
    } tb[] = {
        {0, 12 + 2, "read w g, write w + bf16 copy"},
        {1, 20 + 2, "read w g m, write w m + copy"},
        {3, 28 + 2, "read w g m v, write w m v + copy"},
        {5, 4 + 24 + 16 + 2, "read g (norm); w g m v -> m v; w m v -> w + copy"},
        {7, 8 + 20 + 2, "read w g (norms); w g m -> w m + copy"},
    };
    tk_lr_sched slow = {.base_lr = 1e-4};
    float *dw = gt_dev(4 * n), *dg = gt_dev(4 * n), *dst = gt_dev(8 * n + 4);
    void *dcp = gt_dev(2 * n);
    dev_fill(dw, n, -0.1f, 0.1f), dev_fill(dg, n, -1e-3f, 1e-3f);
    for (int i = 0; i < (int)(sizeof tb / sizeof tb[0]); i++) {
        fx b = {0};
        b.hp = cases[tb[i].c].hp, b.sched = slow, b.n = n, b.nseg = nseg, b.seg = seg, b.ct = TK_BF16;
        b.dw = dw, b.dg = dg, b.dst = dst, b.dcp = dcp;
        b.dlr = gt_dev(4), b.dstep = gt_dev(8), b.dseg = gt_dev(sizeof seg);
        b.dws = gt_dev(tk_optim_ws_bytes(TK_BACKEND_CUDA, nseg, n));
        int64_t zero = 0;
        gt_up(b.dstep, &zero, 8), gt_up(b.dseg, seg, sizeof seg);
        CHECK_EQ_INT(tk_memset0(gt_ctx_, dst, 8 * n, TK_STREAM_COMPUTE, &e), 0);
        bench_arg a = {&b};
        double ms = gt_time_ms(bench_fn, &a, 11);
        double gb = tb[i].bytes_per_param * (double)params / 1e9;
        printf("# table optim bench bert-large %-13s %7.3f ms/update  %5.2f GB moved  %6.0f GB/s  %4.1f%% of 2.97 TB/s"
               "  (%s)\n",
               cases[tb[i].c].name, ms, gb, gb / ms * 1e3, gb / ms * 1e3 / 2970 * 100, tb[i].what);
        float probe[4];
        gt_down(probe, dw + seg[100].off, 16);
        CHECK(isfinite(probe[0]) && isfinite(probe[3]));
        tk_free(gt_ctx_, b.dlr), tk_free(gt_ctx_, b.dstep), tk_free(gt_ctx_, b.dseg), tk_free(gt_ctx_, b.dws);
    }
    tk_free(gt_ctx_, dw), tk_free(gt_ctx_, dg), tk_free(gt_ctx_, dst), tk_free(gt_ctx_, dcp);
}
