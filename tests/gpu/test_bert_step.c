// Whole BERT training steps (lib/workloads/bert) on the cuda backend against the cpu reference,
// made through the engine's instance (tk_instance: the config, the flat buffers, the optimizer),
// and CUDA-graph replay against eager execution.
//
// (a) cpu vs cuda: the same config (dropout ON: both backends draw the same Philox masks), the
//     same initial weights (drawn on the host), the same batch and update counter; one forward
//     and backward. The loss and every parameter's gradient, norm-wise per tensor: fp32 within
//     1e-4 (every op is within 1e-5 of its reference, tests/gpu/test_bert_ops.c; the whole step
//     adds the layers' rounding differences), bf16 within 5e-2 (bf16 activations and weight copy
//     against the fp32 reference). Two shapes: the tiny config's and a mid-size one with BERT's
//     vocabulary (30522, padded to 30528), 128 tokens and 20 masked positions.
// (b) determinism and graphs: on cuda, two eager steps give bit-identical gradients, and the step
//     captured in a CUDA graph (tk_instance_step: schedule, forward, backward, optimizer) and
//     replayed gives bit-identical weights to the eager steps over 3 updates.
// (c) model.unpad (the real tokens packed, rows rounded up to a bucket of 64): (a) with both sides
//     unpadded (the same packed rows, so the same hidden-dropout masks; tests/unit/test_bert.c
//     shows the unpadded step equal to the padded one on the cpu), and (b) with the three batches'
//     different token counts under one graph of the largest bucket (the rows past each batch's
//     tokens are found on the device).
// (d) model.fused_attention: the mid shape (head size 64) in bf16 takes the fused attention
//     (kernels/flash_attn.h; checked, not assumed); fp32 and the tiny shape (head size 16) the
//     unfused one. (a) in bf16 and the graph cases run with it; (a) and (c) in bf16 again without.
#include "engine/instance.h"
#include "gpu_test.h"
#include "workloads/bert/bert.h"

typedef struct {
    int B, L, P, V, H, NH, F, layers;
    const char *precision;
    int unpad;
    int unfused; // model.fused_attention false
} shape;

static json_t *config(const shape *s) {
    char buf[2048];
    snprintf(buf, sizeof buf,
             "{\"workload\": \"bert\", \"model\": {\"vocab_size\": %d, \"hidden_size\": %d, \"num_layers\": %d, "
             "\"num_heads\": %d, \"intermediate_size\": %d, \"max_position_embeddings\": %d, \"type_vocab_size\": 2, "
             "\"max_seq_length\": %d, \"max_predictions_per_seq\": %d, \"hidden_dropout\": 0.1, "
             "\"attention_dropout\": 0.1, \"precision\": \"%s\", \"unpad\": %s, \"unpad_bucket\": 64, "
             "\"fused_attention\": %s}, "
             "\"train\": {\"global_batch_size\": %d, \"max_epochs\": 1, \"evals_per_epoch\": 1, \"seed\": 5}, "
             "\"optimizer\": {\"name\": \"sgd\", \"base_lr\": 0.1, \"warmup_steps\": 2, \"decay_start_step\": 0, "
             "\"decay_steps\": 0, \"poly_power\": 1.0, \"min_lr\": 0.0}, "
             "\"target\": {\"metric\": \"mlm_accuracy\", \"mlm_accuracy\": 0.7}}",
             s->V, s->H, s->layers, s->NH, s->F, s->L + 8, s->L, s->P, s->precision, s->unpad ? "true" : "false",
             s->unfused ? "false" : "true", s->B);
    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    if (!j) gt_die_(je.text, NULL);
    return j;
}

static tk_instance *make(tk_ctx *c, const shape *s) {
    tk_instance *I = calloc(1, sizeof *I);
    json_t *root = config(s);
    tk_err e = {0};
    if (tk_instance_config(I, root, "test", NULL, 0, NULL, &e) || tk_instance_create(I, c, NULL, 0, &e) ||
        tk_instance_optimizer(I, 1, &e) || tk_instance_init_weights(I, I->run.seed, &e))
        gt_die_("bert instance", &e);
    json_decref(root);
    return I;
}

// Whether s on the cuda backend should take the fused attention (stated here, not asked of the
// code under test): bf16, head size 64, not switched off.
static int wants_fused(const shape *s) { return !strcmp(s->precision, "bf16") && s->H / s->NH == 64 && !s->unfused; }
static int is_fused(const tk_instance *I) { return ((const tk_bert *)I->model)->attn.fused; }

// A batch like prep bert's: [CLS] ... [SEP] ... [SEP] of random lengths, distinct masked positions.
typedef struct {
    int32_t *ids, *len, *pos, *mid, *nm, *nsp;
    uint8_t *seg;
} batch;

static batch make_batch(const shape *s, uint32_t salt) {
    const int B = s->B, L = s->L, P = s->P;
    batch b = {gt_host((size_t)B * L * 4), gt_host(B * 4), gt_host((size_t)B * P * 4), gt_host((size_t)B * P * 4),
               gt_host(B * 4), gt_host(B * 4), gt_host((size_t)B * L)};
    memset(b.ids, 0, (size_t)B * L * 4), memset(b.seg, 0, (size_t)B * L);
    memset(b.pos, 0, (size_t)B * P * 4), memset(b.mid, 0, (size_t)B * P * 4);
    for (int i = 0; i < B; i++) {
        int n = L / 2 + (int)(gt_u32(salt + 7 * i) % (uint32_t)(L / 2 + 1)), a = 1 + n / 3;
        b.len[i] = n;
        for (int t = 0; t < n; t++) {
            b.ids[i * L + t] = t == 0 ? 2 : t == a || t == n - 1 ? 3 : 5 + (int32_t)(gt_u32(salt + 1000 + i * L + t) % (uint32_t)(s->V - 5));
            b.seg[i * L + t] = t > a;
        }
        int k = 0;
        for (int t = 1; t < n - 1 && k < P; t += 1 + (int)(gt_u32(salt + 99 * i + t) % 5))
            if (t != a) {
                b.pos[i * P + k] = t, b.mid[i * P + k] = b.ids[i * L + t], k++;
                b.ids[i * L + t] = 4; // [MASK]
            }
        b.nm[i] = k;
        b.nsp[i] = (int32_t)(gt_u32(salt + 5 * i) & 1);
    }
    return b;
}

static void put_batch(tk_instance *I, const batch *b, const shape *s) {
    tk_bert *m = I->model;
    tk_err e = {0};
    m->rows = tk_bert_rows_for(m, b->len);
    const size_t B = (size_t)s->B, L = (size_t)s->L, P = (size_t)s->P;
    if (tk_memcpy_h2d(I->c, m->in_ids, b->ids, B * L * 4, TK_STREAM_COMPUTE, &e) ||
        tk_memcpy_h2d(I->c, m->in_seg, b->seg, B * L, TK_STREAM_COMPUTE, &e) ||
        tk_memcpy_h2d(I->c, m->in_len, b->len, B * 4, TK_STREAM_COMPUTE, &e) ||
        tk_memcpy_h2d(I->c, m->in_pos, b->pos, B * P * 4, TK_STREAM_COMPUTE, &e) ||
        tk_memcpy_h2d(I->c, m->in_mid, b->mid, B * P * 4, TK_STREAM_COMPUTE, &e) ||
        tk_memcpy_h2d(I->c, m->in_nmask, b->nm, B * 4, TK_STREAM_COMPUTE, &e) ||
        tk_memcpy_h2d(I->c, m->in_nsp, b->nsp, B * 4, TK_STREAM_COMPUTE, &e) || tk_ctx_sync(I->c, &e))
        gt_die_("batch", &e);
}

static void free_batch(batch *b) { free(b->ids), free(b->len), free(b->pos), free(b->mid), free(b->nm), free(b->nsp), free(b->seg); }

// The dense gradients (or weights) of I to the host.
static float *span(tk_instance *I, int grads) {
    size_t n = I->P.dense_n;
    float *h = gt_host(n * 4);
    tk_err e = {0};
    if (tk_ctx_sync(I->c, &e) || tk_memcpy_d2h(I->c, h, grads ? I->P.dense_g : I->P.dense_w, n * 4, TK_STREAM_COMPUTE, &e) ||
        tk_ctx_sync(I->c, &e))
        gt_die_("span", &e);
    return h;
}

static double loss_of(tk_instance *I) {
    double acc[2];
    tk_err e = {0};
    if (tk_ctx_sync(I->c, &e) || tk_memcpy_d2h(I->c, acc, I->loss_acc, 16, TK_STREAM_COMPUTE, &e) || tk_ctx_sync(I->c, &e))
        gt_die_("loss", &e);
    return acc[0];
}

static void fwd_bwd(tk_instance *I, int64_t step) {
    tk_err e = {0};
    if (tk_instance_write_step(I, step, &e) || tk_memset0(I->c, I->loss_acc, 16, TK_STREAM_COMPUTE, &e) ||
        I->wl->step(I->model, &e) || tk_ctx_sync(I->c, &e))
        gt_die_("step", &e);
}

static void destroy(tk_instance *I) {
    tk_instance_destroy(I);
    free(I);
}

static int cpu_vs_cuda(const shape *s, double tol, int *tk_failed_) {
    tk_ctx *cpu;
    tk_err e = {0};
    if (tk_ctx_create(&cpu, TK_BACKEND_CPU, 0, &e)) gt_die_("cpu context", &e);
    shape ref = *s;
    ref.precision = "fp32"; // the reference is fp32 whatever the device computes in
    tk_instance *A = make(cpu, &ref), *G = make(gt_ctx_, s);
    batch b = make_batch(s, 17);
    put_batch(A, &b, s), put_batch(G, &b, s);
    fwd_bwd(A, 3), fwd_bwd(G, 3);
    double la = loss_of(A), lg = loss_of(G);
    float *ga = span(A, 1), *gg = span(G, 1);
    // Per tensor, ||cuda - cpu|| over max(||cpu||, the tensor's share of the whole gradient's norm,
    // ||all|| sqrt(n / N)): rounding (bf16) leaves absolute errors on the scale of the gradients
    // around a tensor, so one whose own gradient nearly cancels (the pooler's bias over 8
    // sequences) would show any relative error without a fault; a wrong gradient is off by its own
    // size, which the share does not hide. And the whole gradient's relative error. In bf16, tensors
    // of fewer than 64 values (the next-sentence head's bias: 2 sums of B terms of +-0.5 that
    // cancel) are printed, not judged: their rounding noise reached 8% of their norm on one seed
    // (TK_SEED=33) with every other tensor within 1%; the whole-gradient bound still covers them.
    double all = 0;
    for (size_t i = 0; i < A->P.dense_n; i++) all += (double)ga[i] * ga[i];
    all = sqrt(all);
    double worst = 0, small = 0, whole = gt_relerr(gg, ga, A->P.dense_n);
    const char *wname = "", *sname = "";
    int bf16 = strcmp(s->precision, "bf16") == 0;
    for (int i = 0; i < A->P.ndense; i++) {
        const tk_param *p = &A->P.p[i];
        size_t off = (size_t)((float *)p->w - A->P.dense_w), n = (size_t)tk_param_numel(p);
        // a tensor whose gradient is 0 in exact arithmetic (attention's key bias) holds noise
        if (strstr(p->name, "key.bias")) continue;
        double num = 0, den = 0;
        for (size_t k = 0; k < n; k++) {
            double d = (double)gg[off + k] - ga[off + k];
            num += d * d, den += (double)ga[off + k] * ga[off + k];
        }
        double share = all * sqrt((double)n / (double)A->P.dense_n);
        double err = gg[off] != gg[off] ? INFINITY : sqrt(num) / fmax(sqrt(den), share);
        if (bf16 && n < 64) {
            if (!(err <= small)) small = err, sname = p->name;
        } else if (!(err <= worst)) {
            worst = err, wname = p->name;
        }
    }
    float fa = (float)la, fg = (float)lg;
    double lerr = gt_relerr(&fg, &fa, 1);
    char note[300] = "";
    if (bf16) snprintf(note, sizeof note, "; under 64 values, not judged: %.2e (%s)", small, sname);
    printf("# table bert step cpu vs cuda %-4s%s%s B%d L%d H%d V%d: loss %.6f vs %.6f (rel %.1e), whole gradient %.2e, "
           "worst tensor %.2e (%s)%s\n",
           s->precision, s->unpad ? " unpad" : "", is_fused(G) ? " fused" : " unfused", s->B, s->L, s->H, s->V, la, lg,
           lerr, whole, worst, wname, note);
    int bad = !(lerr <= tol) || !(worst <= tol) || !(whole <= tol / 5) || is_fused(G) != wants_fused(s) || is_fused(A);
    CHECK(!bad);
    free(ga), free(gg), free_batch(&b);
    destroy(A), destroy(G);
    tk_ctx_destroy(cpu);
    return bad;
}

static const shape tiny = {8, 32, 5, 64, 32, 2, 64, 2, "fp32", 0, 0};
static const shape mid = {8, 128, 20, 30522, 256, 4, 1024, 2, "fp32", 0, 0};

static void cpu_vs_cuda_all(const char *precision, double tol, int unpad, int *tk_failed_) {
    shape t = tiny, m = mid;
    t.precision = m.precision = precision;
    t.unpad = m.unpad = unpad;
    cpu_vs_cuda(&t, tol, tk_failed_);
    cpu_vs_cuda(&m, tol, tk_failed_);
}

// the mid shape in bf16 with the fused attention switched off (the other cases' mid bf16 take it)
static void cpu_vs_cuda_unfused(int unpad, int *tk_failed_) {
    shape m = mid;
    m.precision = "bf16", m.unpad = unpad, m.unfused = 1;
    cpu_vs_cuda(&m, 5e-2, tk_failed_);
}

TK_TEST(step_cpu_vs_cuda_fp32) { cpu_vs_cuda_all("fp32", 1e-4, 0, tk_failed_); }
TK_TEST(step_cpu_vs_cuda_bf16) { cpu_vs_cuda_all("bf16", 5e-2, 0, tk_failed_); }
TK_TEST(step_unpad_cpu_vs_cuda_fp32) { cpu_vs_cuda_all("fp32", 1e-4, 1, tk_failed_); }
TK_TEST(step_unpad_cpu_vs_cuda_bf16) { cpu_vs_cuda_all("bf16", 5e-2, 1, tk_failed_); }
TK_TEST(step_cpu_vs_cuda_bf16_unfused) { cpu_vs_cuda_unfused(0, tk_failed_); }
TK_TEST(step_unpad_cpu_vs_cuda_bf16_unfused) { cpu_vs_cuda_unfused(1, tk_failed_); }

static void graph_case(int unpad, int unfused, int *tk_failed_) {
    gt_ctx_->deterministic = 1;
    shape s = mid;
    s.precision = "bf16";
    s.unpad = unpad, s.unfused = unfused;
    tk_instance *E = make(gt_ctx_, &s), *Gr = make(gt_ctx_, &s);
    CHECK(is_fused(E) == !unfused && is_fused(Gr) == !unfused);
    batch b[3] = {make_batch(&s, 1), make_batch(&s, 2), make_batch(&s, 3)};
    // two eager forward/backward passes of one batch: the same bits
    put_batch(E, &b[0], &s);
    fwd_bwd(E, 1);
    float *g1 = span(E, 1);
    fwd_bwd(E, 1);
    float *g2 = span(E, 1);
    size_t nd = gt_ndiff(g1, g2, E->P.dense_n);
    printf("# table bert step determinism: %zu of %zu gradients differ\n", nd, E->P.dense_n);
    CHECK(nd == 0);
    // three updates, eager against one captured graph replayed
    tk_err e = {0};
    tk_graph graph = {0};
    if (tk_instance_write_step(E, 0, &e) || tk_instance_write_step(Gr, 0, &e) ||
        tk_memset0(gt_ctx_, E->loss_acc, 16, TK_STREAM_COMPUTE, &e))
        gt_die_("write step", &e);
    // (one graph for the three batches: the largest of their rows)
    int64_t rows = 0;
    for (int k = 0; k < 3; k++) {
        int64_t r = tk_bert_rows_for(E->model, b[k].len);
        rows = r > rows ? r : rows;
    }
    for (int k = 0; k < 3; k++) {
        put_batch(E, &b[k], &s), put_batch(Gr, &b[k], &s);
        ((tk_bert *)E->model)->rows = ((tk_bert *)Gr->model)->rows = rows;
        if (tk_instance_step(E, &e)) gt_die_("eager step", &e);
        if (!graph.valid && (tk_graph_begin(gt_ctx_, &e) || tk_instance_step(Gr, &e) || tk_graph_end(gt_ctx_, &graph, &e)))
            gt_die_("capture", &e);
        if (tk_graph_launch(gt_ctx_, &graph, &e)) gt_die_("launch", &e);
    }
    float *we = span(E, 0), *wg = span(Gr, 0);
    double le = loss_of(E), lg = loss_of(Gr);
    nd = gt_ndiff(we, wg, E->P.dense_n);
    printf("# table bert graph vs eager%s%s, 3 updates (rows %lld of %d): %zu of %zu weights differ, losses %.9g %.9g\n",
           unpad ? " unpad" : "", unfused ? " unfused" : " fused", (long long)rows, s.B * s.L, nd, E->P.dense_n, le, lg);
    CHECK(nd == 0 && le == lg);
    tk_graph_destroy(&graph);
    free(g1), free(g2), free(we), free(wg);
    for (int k = 0; k < 3; k++) free_batch(&b[k]);
    destroy(E), destroy(Gr);
    gt_ctx_->deterministic = 0;
}

TK_TEST(step_deterministic_and_graph_equals_eager) { graph_case(0, 0, tk_failed_); }
TK_TEST(step_unpad_deterministic_and_graph_equals_eager) { graph_case(1, 0, tk_failed_); }
TK_TEST(step_unpad_unfused_deterministic_and_graph_equals_eager) { graph_case(1, 1, tk_failed_); }
