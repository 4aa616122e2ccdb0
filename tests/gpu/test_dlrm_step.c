// Whole DLRM training steps (lib/workloads/dlrm) on the cuda backend against the cpu reference
// backend, and the CUDA-graph replay against eager execution; every model made and trained
// through the engine's instance (tk_instance_step: the schedule, the step, the optimizer), as
// train-step does.
//
// (a) cpu vs cuda, fp32: the tiny config's shapes (13 dense, 26 tables of dim 16, bottom
//     13-64-32-16, top 367-128-64-32-16-1), batch 512, both models from the same initial weights
//     (the init_weights of the table draws them on the host) and the same batch of random counts and ids.
//     The log1p of random counts makes every activation a random float, so no pre-activation is
//     exactly 0 (cuBLASLt's fused ReLU mask sets its bit at exactly 0, the reference clears it).
//     Tolerances: the loss within 1e-5 relative, every parameter tensor after the step within
//     1e-5 relative (norm-wise: the fp32 bound; both backends run the same fp32 ops, the
//     only differences are the summation orders of the GEMMs' K loops and reductions, a few ulps
//     of each activation), and the UPDATE (w_after - w_before) of every tensor within 1e-3
//     relative: the update is lr * gradient, a sum over the 512 samples in different orders,
//     and a pre-activation within an ulp of 0 may fall on different sides of the ReLU on the two
//     backends, which changes one sample's contribution to a few gradient columns.
// (b) cuda graph vs eager: N steps on different batches, once with the step captured in one CUDA
//     graph and replayed (train-step's default), once eagerly (train-step --no-graphs), from the
//     same weights: every loss and every parameter bit-identical. The context runs in
//     deterministic mode (no split-K atomics in cuBLASLt; our kernels never use atomics in sums).
#include "gpu_test.h"
#include "bce.h"
#include "dense_log1p.h"
#include "embedding.h"
#include "interaction.h"
#include "sgd.h"
#include "../unit/dlrm_case.h"

// The tiny config's shapes (13 dense, 26 tables of dim 16, bottom 13-64-32-16, top 367-128-64-32-16-1,
// tables of 50 .. 2475 rows), the plain one-rank step (no hybrid embedding).
static void tiny_config(char *text, size_t size, int batch, const char *table_dtype, const char *precision) {
    char sizes[400];
    int k = 0;
    for (int t = 0; t < 26; t++) k += snprintf(sizes + k, sizeof sizes - (size_t)k, "%s%d", t ? ", " : "", 50 + 97 * t);
    snprintf(text, size,
             "{\"workload\": \"dlrm\", \"name\": \"t\", \"model\": {\"num_dense\": 13, \"embedding_dim\": 16, "
             "\"bottom_mlp\": [64, 32, 16], \"top_mlp\": [128, 64, 32, 16, 1], \"interaction_width\": null, "
             "\"table_sizes\": [%s], \"max_table_rows\": 0, \"table_dtype\": \"%s\", \"precision\": \"%s\"}, "
             "\"train\": {\"global_batch_size\": %d, \"max_epochs\": 1, \"evals_per_epoch\": 1, \"seed\": 7}, "
             "\"optimizer\": {\"name\": \"sgd\", \"base_lr\": 0.5, \"warmup_steps\": 3, \"decay_start_step\": 4, "
             "\"decay_steps\": 8, \"poly_power\": 2.0, \"min_lr\": 0.0}, "
             "\"target\": {\"metric\": \"auc\", \"auc\": 0.8025}, \"parallel\": {\"hybrid_embedding\": false}}",
             sizes, table_dtype, precision, batch);
}

static tk_instance *make_model(tk_ctx *c, int batch, const char *table_dtype, const char *precision) {
    char text[2000];
    tiny_config(text, sizeof text, batch, table_dtype, precision);
    tk_instance *I = calloc(1, sizeof *I);
    tk_err e = {0};
    if (!I || dlrm_make(I, text, NULL, 0, c, NULL, 0, &e)) gt_die_("dlrm instance", &e);
    return I;
}

static void destroy(tk_instance *I) {
    tk_instance_destroy(I);
    free(I);
}

typedef struct {
    uint8_t *label;
    int32_t *dense, *cat;
} batch;

static batch random_batch(const tk_dlrm_config *c) {
    const int B = c->batch;
    batch b = {gt_host((size_t)B), gt_host((size_t)B * c->num_dense * 4), gt_host((size_t)B * c->num_tables * 4)};
    float *u = gt_host((size_t)B * c->num_tables * 4);
    gt_fill(u, (size_t)B, 0, 1, 0);
    for (int i = 0; i < B; i++) b.label[i] = u[i] < 0.3f;
    gt_fill(u, (size_t)B * c->num_dense, 0, 5000, 1);
    for (int i = 0; i < B * c->num_dense; i++) b.dense[i] = (int32_t)u[i];
    gt_fill(u, (size_t)B * c->num_tables, 0, 1, 0);
    for (int i = 0; i < B; i++)
        for (int t = 0; t < c->num_tables; t++) {
            // Skewed ids (u^3), so rows repeat within the batch as in Criteo.
            double x = u[i * c->num_tables + t];
            int64_t r = (int64_t)(x * x * x * (double)c->table_rows[t]);
            b.cat[i * c->num_tables + t] = (int32_t)(r < c->table_rows[t] ? r : c->table_rows[t] - 1);
        }
    free(u);
    return b;
}
static void free_batch(batch *b) { free(b->label), free(b->dense), free(b->cat); }

// All parameters as floats on the host: the dense span, then the tables (widened from bf16).
static size_t nparams(const tk_dlrm *m) { return m->dense_n + (size_t)m->rows_total * m->cfg.emb_dim; }
static float *read_params(tk_dlrm *m) {
    size_t nt = (size_t)m->rows_total * m->cfg.emb_dim;
    float *p = gt_host(nparams(m) * 4);
    tk_err e = {0};
    if (tk_ctx_sync(m->c, &e)) gt_die_("sync", &e);
    if (m->c->backend == TK_BACKEND_CPU) {
        memcpy(p, m->dense_w, m->dense_n * 4);
        if (m->cfg.table_dtype == TK_F32) memcpy(p + m->dense_n, m->tables, nt * 4);
        else
            for (size_t i = 0; i < nt; i++) p[m->dense_n + i] = tk_bf16_to_f32(((uint16_t *)m->tables)[i]);
    } else {
        gt_down(p, m->dense_w, m->dense_n * 4);
        gt_down_as(p + m->dense_n, m->tables, nt, m->cfg.table_dtype);
    }
    return p;
}

static int step(tk_instance *I, const batch *b, tk_graph *g, double *loss) {
    tk_err e = {0};
    int rc = dlrm_put(I, b->label, b->dense, b->cat, (int)I->run.batch, &e);
    if (!rc && g) {
        if (!g->valid) {
            rc = tk_graph_begin(I->c, &e);
            if (!rc) rc = tk_instance_step(I, &e);
            if (!rc) rc = tk_graph_end(I->c, g, &e);
        }
        if (!rc) rc = tk_graph_launch(I->c, g, &e);
    } else if (!rc) {
        rc = tk_instance_step(I, &e);
    }
    if (!rc) rc = tk_instance_read_loss(I, loss, 1, &e);
    if (rc) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        printf("#   step failed: %s\n", buf);
    }
    return rc;
}

// One parameter tensor of the flat host copies: [off, off + n).
typedef struct { char name[32]; size_t off, n; } span;
static int param_spans(const tk_dlrm *m, span *s) {
    int k = 0;
    for (int l = 0; l < m->nlayers; l++) {
        const char *part = l < m->cfg.nbot ? "bot" : "top";
        int i = l < m->cfg.nbot ? l : l - m->cfg.nbot;
        snprintf(s[k].name, sizeof s[k].name, "%s.%d.W", part, i);
        s[k].off = (size_t)(m->L[l].W - m->dense_w), s[k++].n = (size_t)m->L[l].in * m->L[l].out;
        snprintf(s[k].name, sizeof s[k].name, "%s.%d.b", part, i);
        s[k].off = (size_t)(m->L[l].b - m->dense_w), s[k++].n = (size_t)m->L[l].out;
    }
    for (int t = 0; t < m->cfg.num_tables; t++) {
        snprintf(s[k].name, sizeof s[k].name, "emb.%d", t);
        s[k].off = m->dense_n + (size_t)m->row_off_host[t] * m->cfg.emb_dim;
        s[k++].n = (size_t)m->cfg.table_rows[t] * m->cfg.emb_dim;
    }
    return k;
}

// ||(a1 - a0) - (b1 - b0)|| / ||b1 - b0||: how far the cuda update is from the reference update.
static double update_relerr(const float *a0, const float *a1, const float *b0, const float *b1, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double ua = (double)a1[i] - a0[i], ub = (double)b1[i] - b0[i];
        if (ua != ua || ub != ub) return INFINITY;
        num += (ua - ub) * (ua - ub);
        den += ub * ub;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// nsteps on the same random batches on mr (the reference) and mg: the worst relative errors of
// the loss, of the parameters after each step and of each step's update over all parameter tensors.
typedef struct { double loss, params, updates; char wp[32], wu[32]; size_t ndiff; } step_errs;
// Tensors whose update error exceeds loud are printed (at most 12 lines: the diagnosis of a failure).
static int compare_steps(tk_instance *Ir, tk_instance *Ig, int nsteps, const char *what, double loud, step_errs *w) {
    tk_dlrm *mr = Ir->model, *mg = Ig->model;
    memset(w, 0, sizeof *w);
    float *r0 = read_params(mr), *g0 = read_params(mg);
    size_t n = nparams(mr);
    int bad = gt_ndiff(g0, r0, n) != 0, nloud = 0; // the same initial weights
    for (int s = 0; s < nsteps; s++) {
        batch b = random_batch(&mr->cfg);
        double lr_ = 0, lg = 0;
        bad |= step(Ir, &b, NULL, &lr_) != 0;
        bad |= step(Ig, &b, NULL, &lg) != 0;
        double lerr = fabs(lg - lr_) / fabs(lr_);
        w->loss = lerr > w->loss || lerr != lerr ? lerr : w->loss;
        float *r1 = read_params(mr), *g1 = read_params(mg);
        span sp[2 * TK_DLRM_MAX_LAYERS * 2 + TK_DLRM_MAX_TABLES];
        int ns = param_spans(mr, sp);
        for (int i = 0; i < ns; i++) {
            double pe = gt_relerr(g1 + sp[i].off, r1 + sp[i].off, sp[i].n);
            // The update against the reference's, each from its own weights before the step.
            double ue = update_relerr(g0 + sp[i].off, g1 + sp[i].off, r0 + sp[i].off, r1 + sp[i].off, sp[i].n);
            if (ue > loud && nloud++ < 12) {
                double un = 0, gn = 0;
                for (size_t j = 0; j < sp[i].n; j++) {
                    double u = (double)r1[sp[i].off + j] - r0[sp[i].off + j];
                    un += u * u, gn += (double)r0[sp[i].off + j] * r0[sp[i].off + j];
                }
                printf("#   step %d %s: update rel err %.2e, |update| %.3e, |w| %.3e, %zu elements\n", s + 1,
                       sp[i].name, ue, sqrt(un), sqrt(gn), sp[i].n);
            }
            if (pe > w->params) w->params = pe, memcpy(w->wp, sp[i].name, sizeof w->wp);
            if (ue > w->updates) w->updates = ue, memcpy(w->wu, sp[i].name, sizeof w->wu);
        }
        w->ndiff = gt_ndiff(g1, r1, n);
        printf("# %s step %d: loss %.9g vs %.9g (rel %.1e)\n", what, s + 1, lg, lr_, lerr);
        free(r0), free(g0);
        r0 = r1, g0 = g1;
        free_batch(&b);
    }
    free(r0), free(g0);
    return bad;
}

TK_TEST(step_cpu_vs_cuda_fp32) {
    tk_ctx *cpu;
    tk_err e = {0};
    if (tk_ctx_create(&cpu, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    tk_instance *mr = make_model(cpu, 512, "f32", "fp32"), *mg = make_model(gt_ctx_, 512, "f32", "fp32");
    step_errs w;
    CHECK_EQ_INT(compare_steps(mr, mg, 2, "cuda vs cpu", 1e-3, &w), 0);
    printf("# table dlrm step F32 tiny B 512 x2 steps, cuda vs cpu: loss rel %.1e, params rel %.1e (%s), "
           "updates rel %.1e (%s)\n", w.loss, w.params, w.wp, w.updates, w.wu);
    CHECK(w.loss <= 1e-5);
    CHECK(w.params <= 1e-5);
    CHECK(w.updates <= 1e-3);
    destroy(mr), destroy(mg);
    tk_ctx_destroy(cpu);
}

// "precision": "tf32" against fp32, both on the GPU: TF32 keeps 10 mantissa bits of each GEMM
// input (relative rounding 2^-11 = 4.9e-4), accumulation stays fp32. Bounds: the loss within 1e-2
// relative (the low-precision bound), the parameters within 3e-3 (measured 1.5e-4 to
// 5.7e-4 over three seeds), and the two must differ (TF32 really ran). The per-step UPDATE gets a
// loose, empirical bound, 0.8 (a zeroed gradient gives 1, a sign error 2): with random labels the
// batch's mean gradient is a near-cancelling sum of per-sample gradients, which amplifies their relative
// error ~200 times (fp32 cuda vs cpu: 2.5e-05 from ~1e-7 roundings); 2^13 times fp32's rounding
// gives 0.02-0.3, the range measured over three seeds on the H100 (every tensor alike, step 1
// included, where both start from the same weights). A wrong gradient (an epilogue mishandled in
// TF32 mode, say) gives errors of order 1. fp32 tables: with bf16 tables an update is the
// difference of two bf16-rounded values, which tiny gradient differences round either way.
TK_TEST(step_tf32_vs_fp32) {
    tk_instance *mr = make_model(gt_ctx_, 512, "f32", "fp32"), *mg = make_model(gt_ctx_, 512, "f32", "tf32");
    step_errs w;
    CHECK_EQ_INT(compare_steps(mr, mg, 2, "tf32 vs fp32", 0.8, &w), 0);
    printf("# table dlrm step TF32 vs F32 tiny B 512 x2 steps: loss rel %.1e, params rel %.1e (%s), "
           "updates rel %.1e (%s), params differing %zu\n", w.loss, w.params, w.wp, w.updates, w.wu, w.ndiff);
    CHECK(w.loss <= 1e-2);
    CHECK(w.params <= 3e-3);
    CHECK(w.updates <= 0.8);
    CHECK(w.ndiff > 0);
    destroy(mr), destroy(mg);
}

// "precision": "bf16" against fp32, both on the GPU: bf16 activations and weight copies (8-bit
// mantissa, rounding 2^-9 = 2e-3), fp32 accumulation and master weights. Bounds: the loss within
// 1e-2 relative (the bf16 bound), the parameters within 1e-2, and they must differ (bf16
// really ran). Updates are not bounded tightly (see the tf32 test: the near-cancelling batch
// gradient amplifies rounding), only finite and of the right sign on the whole (< 1.5).
TK_TEST(step_bf16_vs_fp32) {
    tk_instance *mr = make_model(gt_ctx_, 512, "f32", "fp32"), *mg = make_model(gt_ctx_, 512, "f32", "bf16");
    step_errs w;
    CHECK_EQ_INT(compare_steps(mr, mg, 2, "bf16 vs fp32", 1.5, &w), 0);
    printf("# table dlrm step BF16 vs F32 tiny B 512 x2 steps: loss rel %.1e, params rel %.1e (%s), "
           "updates rel %.1e (%s), params differing %zu\n", w.loss, w.params, w.wp, w.updates, w.wu, w.ndiff);
    CHECK(w.loss <= 1e-2);
    CHECK(w.params <= 1e-2);
    CHECK(w.updates < 1.5);
    CHECK(w.ndiff > 0);
    destroy(mr), destroy(mg);
}

// The cpu backend is the fp32 reference: precision bf16 there is a usage error.
TK_TEST(step_bf16_refused_on_cpu) {
    char text[2000];
    tiny_config(text, sizeof text, 64, "f32", "bf16");
    tk_ctx *cpu;
    tk_instance I;
    tk_err e = {0};
    if (tk_ctx_create(&cpu, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    CHECK_EQ_INT(dlrm_make(&I, text, NULL, 0, cpu, NULL, 0, &e), TK_EUSAGE);
    CHECK(I.model == NULL);
    tk_instance_destroy(&I);
    tk_ctx_destroy(cpu);
}

// Runs nsteps with the step in a CUDA graph and nsteps eagerly; returns 1 when anything differs.
static int graph_vs_eager(tk_dtype table_dtype, int bf16, int nsteps) {
    const char *td = table_dtype == TK_BF16 ? "bf16" : "f32", *prec = bf16 ? "bf16" : "fp32";
    int saved = gt_ctx_->deterministic, bad = 0;
    gt_ctx_->deterministic = 1;
    tk_instance *I0 = make_model(gt_ctx_, 512, td, prec), *Ia = make_model(gt_ctx_, 512, td, prec);
    tk_instance *Ib = make_model(gt_ctx_, 512, td, prec);
    tk_dlrm *m0 = I0->model, *ma = Ia->model, *mb = Ib->model;
    tk_graph g = {0};
    int loss_diff = 0;
    for (int s = 0; s < nsteps; s++) {
        batch b = random_batch(&ma->cfg);
        double la = 0, lb = 0;
        bad |= step(Ia, &b, &g, &la) != 0;
        bad |= step(Ib, &b, NULL, &lb) != 0;
        loss_diff += memcmp(&la, &lb, sizeof la) != 0;
        free_batch(&b);
    }
    int64_t sa = -1, sb = -1;
    tk_err e = {0};
    bad |= dlrm_read_step(Ia, &sa, &e) != 0 || dlrm_read_step(Ib, &sb, &e) != 0;
    float *pa = read_params(ma), *pb = read_params(mb), *p0 = read_params(m0);
    size_t n = nparams(ma), nd = 0;
    for (size_t i = 0; i < n; i++) nd += memcmp(&pa[i], &pb[i], 4) != 0;
    // The steps did move the weights: the comparison is not between two untouched models.
    size_t moved = gt_ndiff(pa, p0, n);
    printf("# table dlrm graph vs eager %-4s%s x%d steps: losses differing %d, params differing %zu of %zu "
           "(%zu moved), steps %lld/%lld\n",
           tk_dtype_name(table_dtype), bf16 ? " bf16 compute" : "", nsteps, loss_diff, nd, n, moved, (long long)sa, (long long)sb);
    bad |= loss_diff != 0 || nd != 0 || moved < ma->dense_n / 2 || sa != nsteps || sb != nsteps;
    free(pa), free(pb), free(p0);
    tk_graph_destroy(&g);
    destroy(I0), destroy(Ia), destroy(Ib);
    gt_ctx_->deterministic = saved;
    return bad;
}

TK_TEST(step_graph_vs_eager_identical_f32) { CHECK_EQ_INT(graph_vs_eager(TK_F32, 0, 6), 0); }
TK_TEST(step_graph_vs_eager_identical_bf16_tables) { CHECK_EQ_INT(graph_vs_eager(TK_BF16, 0, 6), 0); }
TK_TEST(step_graph_vs_eager_identical_bf16_compute) { CHECK_EQ_INT(graph_vs_eager(TK_BF16, 1, 6), 0); }

// ---- throughput (TK_BENCH=1 only: a benchmark, not a check; check-gpu skips it) ----
// The MLPerf shape from share/workloads/dlrm/config.json, global batch 65,536, tables capped at
// TK_BENCH_CAP rows (default 4,000,000: 24.1 M rows, 6.2 GB in bf16), bf16 tables, one random
// batch already on the device (no data loader): samples/s of the whole step replayed as a CUDA
// graph and run eagerly, and the time of the step's non-GEMM ops run alone (the rest is GEMMs).
//   TK_BENCH=1 [TK_BENCH_CAP=rows] [TK_BENCH_BATCH=B] [TK_BENCH_PRECISION=fp32|tf32|bf16]
//       build/tests/gpu/test_dlrm_step step_throughput_bench
typedef struct { tk_instance *I; tk_graph *g; int which; } bench_arg;
static void bench_fn(void *p) {
    bench_arg *a = p;
    tk_dlrm *m = a->I->model;
    const tk_dlrm_config *c = &m->cfg;
    const int B = c->batch, T = c->num_tables, D = c->emb_dim;
    tk_err e = {0};
    int rc = 0;
    switch (a->which) {
    case 0: rc = tk_graph_launch(m->c, a->g, &e); break;
    case 1: rc = tk_instance_step(a->I, &e); break;
    case 2: rc = tk_dlrm_forward(m, m->in_dense, m->in_cat, B, m->logit, &e); break;
    // emb, demb and the activations are in m->act (f32, or bf16 on the bf16 path)
    case 3: rc = tk_embedding_fwd_act(m->c, m->tables, c->table_dtype, m->row_off, m->in_cat, B, T, D, m->emb, m->act,
                                      &e); break;
    case 4: rc = tk_interaction_fwd_act(m->c, m->act, m->L[c->nbot - 1].y, m->emb, B, T, T, D, c->interaction_width,
                                        m->inter, &e); break;
    case 5: rc = tk_interaction_bwd_act(m->c, m->act, m->L[c->nbot - 1].y, m->emb, m->dinter, B, T, T, D,
                                        c->interaction_width, 1, m->dbot, m->demb, &e); break;
    case 6: rc = tk_embedding_bwd_sgd_act(m->c, m->tables, c->table_dtype, m->row_off, m->in_cat, B, T, D, m->demb,
                                          m->act, m->env.lr, m->emb_ws, &e); break;
    case 7: rc = tk_sgd_update(m->c, m->dense_w, m->dense_g, m->dense_n, m->env.lr,
                               c->bf16 ? m->env.params->copy : NULL, c->bf16 ? TK_BF16 : TK_F32, &e); break;
    case 8: rc = tk_dense_log1p(m->c, m->in_dense, (int64_t)B * c->num_dense, m->x0, &e); break;
    case 9: rc = tk_bce_logits_act(m->c, m->act, m->logit, m->in_label, B, m->dlogit, m->env.loss_acc, &e); break;
    }
    if (rc) gt_die_("bench op", &e);
}

static const char *const bench_prec[] = {"fp32", "tf32", "bf16"};
static void bench_one(int prec, char *o1, char *o2, int *tk_failed_) {
    char o3[32];
    snprintf(o3, sizeof o3, "model.precision=%s", bench_prec[prec]);
    // base_lr 1e-3: keep the weights finite over the repeated steps
    char *ov[] = {o1, o2, "model.table_dtype=bf16", "model.interaction_width=480", o3, "optimizer.base_lr=1e-3",
                  "parallel.hybrid_embedding=false"};
    json_t *root = NULL;
    tk_err e = {0};
    if (tk_config_load("share/workloads/dlrm/config.json", &root, &e)) gt_die_("config", &e);
    char *text = json_dumps(root, 0);
    json_decref(root);
    tk_instance *I = calloc(1, sizeof *I);
    if (!I || !text || dlrm_make(I, text, ov, 7, gt_ctx_, NULL, 0, &e)) gt_die_("dlrm instance", &e);
    free(text);
    tk_dlrm *m = I->model;
    const tk_dlrm_config cfg = m->cfg;
    batch b = random_batch(&cfg);
    double loss;
    tk_graph g = {0};
    CHECK_EQ_INT(step(I, &b, &g, &loss), 0);
    CHECK(isfinite(loss));
    static const char *names[] = {"step (graph)", "step (eager)", "forward", "embedding fwd", "interaction fwd",
                                  "interaction bwd", "embedding bwd+sgd", "sgd (dense)", "dense log1p", "bce"};
    double ms[10];
    for (int w = 0; w < 10; w++) {
        bench_arg a = {I, &g, w};
        ms[w] = gt_time_ms(bench_fn, &a, 11);
    }
    int64_t rows = m->rows_total;
    for (int w = 0; w < 10; w++) {
        printf("# table dlrm bench %s B %d rows %lld bf16 tables: %-18s %8.3f ms", bench_prec[prec], cfg.batch,
               (long long)rows, names[w], ms[w]);
        if (w < 2) printf("  %.0f samples/s", cfg.batch / (ms[w] * 1e-3));
        printf("\n");
    }
    tk_graph_destroy(&g);
    free_batch(&b);
    destroy(I);
}

TK_TEST(step_throughput_bench) {
    const char *on = getenv("TK_BENCH");
    if (!on || strcmp(on, "1") != 0) {
        printf("# SKIP throughput: set TK_BENCH=1\n");
        return;
    }
    const char *cap = getenv("TK_BENCH_CAP"), *bs = getenv("TK_BENCH_BATCH");
    char o1[64], o2[64];
    snprintf(o1, sizeof o1, "model.max_table_rows=%s", cap && *cap ? cap : "4000000");
    snprintf(o2, sizeof o2, "train.global_batch_size=%s", bs && *bs ? bs : "65536");
    const char *only = getenv("TK_BENCH_PRECISION"); // fp32, tf32 or bf16 (default: all three)
    for (int prec = 0; prec < 3; prec++)
        if (!only || !*only || strcmp(only, bench_prec[prec]) == 0) bench_one(prec, o1, o2, tk_failed_);
}
