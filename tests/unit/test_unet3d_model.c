// The 3D U-Net's network (lib/workloads/unet3d/model.c, step.c) on the cpu backend:
// - its tensors against the reference's layer list written out here (mlcommons unet3d: conv
//   blocks of Conv3d 3x3x3 without bias + InstanceNorm3d, ConvTranspose3d 2x2x2 with bias, the
//   1x1x1 output conv with bias): names, shapes in the ktrsc layout, the MLLOG names, and at
//   width 32 the reference's published 31,190,243 parameters;
// - the reference's init: every conv weight and bias within U(+-1/sqrt(fan_in)) (fan_in as
//   PyTorch takes it: size(1) x kernel volume of the torch-layout weight) and reaching near it,
//   norms exactly 1 and 0;
// - one training step's gradients against central finite differences of its loss (the fp64 loss
//   of the engine's accumulator), along random directions per block and over all tensors;
// - the loss accumulator and the gradient's share of the global batch;
// - peer_dump (run by tests/cli/unet3d-model-peer.bats): the weights and batch of
//   contrib/peers/unet3d.py --init (U3_PEER_INIT) stepped here and written as a step dump
//   (U3_PEER_OUT) for unet3d.py --compare.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors.h"
#include "core/philox.h"
#include "grads_case.h"
#include "tk_test.h"
#include "tk_test_cpu.h"
#include "unet3d_case.h"

static u3_config config(int width, int d, int h, int w, int b) {
    u3_config c = {0};
    c.width = width;
    c.b = b, c.batch = b;
    c.seed = 7;
    c.data.crop[0] = d, c.data.crop[1] = h, c.data.crop[2] = w;
    return c;
}

// The model's weights from seed as the engine sets them (its step and loss accumulator zeroed).
static int init(u3_model *m, uint64_t seed, tk_err *e) { return tk_instance_init_weights(u3_case_instance(m), seed, e); }

static u3_model *make(const u3_config *cfg, tk_err *e) { return u3_make(tk_test_cpu(), cfg, e); }

// A batch like the peer's: noise plus a brighter ellipsoid of kidney (1) with a tumor (2) inside.
static void fill_batch(u3_model *m, uint64_t key) {
    const int *cr = m->cfg.data.crop;
    for (int n = 0; n < m->b; n++) {
        double c[3], r[3];
        for (int a = 0; a < 3; a++) {
            c[a] = cr[a] * (0.3 + 0.4 * tk_philox_uniform(key, 1, (uint64_t)(n * 3 + a)));
            r[a] = cr[a] * (0.2 + 0.1 * tk_philox_uniform(key, 2, (uint64_t)(n * 3 + a)));
        }
        for (int z = 0; z < cr[0]; z++)
            for (int y = 0; y < cr[1]; y++)
                for (int x = 0; x < cr[2]; x++) {
                    const size_t i = (((size_t)n * cr[0] + z) * cr[1] + y) * cr[2] + x;
                    const double q = pow((z - c[0]) / r[0], 2) + pow((y - c[1]) / r[1], 2) + pow((x - c[2]) / r[2], 2);
                    m->in_label[i] = q <= 0.2 ? 2 : q <= 1 ? 1 : 0;
                    m->in_img[i] = (float)(tk_philox_normal(key, 3, i) + (q <= 1 ? 1.5 : 0));
                }
    }
}

// One step from a zeroed accumulator: the loss as the engine reads it (fp64).
static double step(u3_model *m, tk_err *e) {
    m->loss_acc[0] = m->loss_acc[1] = 0;
    if (u3_train_step(m, e)) return NAN;
    return m->loss_acc[0];
}

// ---- the reference's tensors ----

// The reference's layers at width W in state-dict order: name, torch shape, fan_in of its init
// (0: a norm, 1 for its weight, 0 for its bias). Returns the count.
typedef struct {
    char name[64];
    int nd;
    int64_t shape[5]; // torch layout
    double fan;
    int norm, one;
    char ml[32];
} ref_t;

static int ref_block(ref_t *r, int n, const char *pre, const char *ml, int cin, int cout) {
    r[n] = (ref_t){.nd = 5, .shape = {cout, cin, 3, 3, 3}, .fan = 27.0 * cin};
    snprintf(r[n].name, sizeof r[n].name, "%s.0.weight", pre), snprintf(r[n].ml, sizeof r[n].ml, "%s_conv", ml);
    n++;
    for (int k = 0; k < 2; k++, n++) {
        r[n] = (ref_t){.nd = 1, .shape = {cout}, .norm = 1, .one = k == 0};
        snprintf(r[n].name, sizeof r[n].name, "%s.1.%s", pre, k ? "bias" : "weight");
        snprintf(r[n].ml, sizeof r[n].ml, "%s_instancenorm", ml);
    }
    return n;
}

static int reference(int W, ref_t *r) {
    const int f[5] = {W, 2 * W, 4 * W, 8 * W, 10 * W};
    int n = 0;
    char pre[64], ml[32];
    n = ref_block(r, n, "input_block.conv1", "input_block_0", 1, f[0]);
    n = ref_block(r, n, "input_block.conv2", "input_block_1", f[0], f[0]);
    for (int i = 0; i < 4; i++)
        for (int k = 0; k < 2; k++) {
            snprintf(pre, sizeof pre, "downsample.%d.conv%d", i, k + 1), snprintf(ml, sizeof ml, "down%d_block_%d", i, k);
            n = ref_block(r, n, pre, ml, k ? f[i + 1] : f[i], f[i + 1]);
        }
    n = ref_block(r, n, "bottleneck.conv1", "down4_block_0", f[4], f[4]);
    n = ref_block(r, n, "bottleneck.conv2", "down4_block_1", f[4], f[4]);
    const int ups[5][2] = {{f[4], f[4]}, {f[4], f[3]}, {f[3], f[2]}, {f[2], f[1]}, {f[1], f[0]}};
    for (int j = 0; j < 5; j++) {
        const int ci = ups[j][0], co = ups[j][1];
        r[n] = (ref_t){.nd = 5, .shape = {ci, co, 2, 2, 2}, .fan = 8.0 * co};
        snprintf(r[n].name, sizeof r[n].name, "upsample.%d.upsample_conv.0.weight", j);
        snprintf(r[n].ml, sizeof r[n].ml, "up%d_deconv", j);
        r[n + 1] = (ref_t){.nd = 1, .shape = {co}, .fan = 8.0 * co};
        snprintf(r[n + 1].name, sizeof r[n + 1].name, "upsample.%d.upsample_conv.0.bias", j);
        snprintf(r[n + 1].ml, sizeof r[n + 1].ml, "up%d_deconv", j);
        n += 2;
        snprintf(pre, sizeof pre, "upsample.%d.conv1", j), snprintf(ml, sizeof ml, "up%d_block_0", j);
        n = ref_block(r, n, pre, ml, 2 * co, co);
        snprintf(pre, sizeof pre, "upsample.%d.conv2", j), snprintf(ml, sizeof ml, "up%d_block_1", j);
        n = ref_block(r, n, pre, ml, co, co);
    }
    r[n] = (ref_t){.nd = 5, .shape = {3, f[0], 1, 1, 1}, .fan = f[0]};
    snprintf(r[n].name, sizeof r[n].name, "output.conv.weight"), snprintf(r[n].ml, sizeof r[n].ml, "output_conv");
    r[n + 1] = (ref_t){.nd = 1, .shape = {3}, .fan = f[0]};
    snprintf(r[n + 1].name, sizeof r[n + 1].name, "output.conv.bias"), snprintf(r[n + 1].ml, sizeof r[n + 1].ml, "output_conv");
    return n + 2;
}

// The model's tensors against the reference's: names, shapes (ktrsc: torch's dim 1 moved last),
// MLLOG names; returns the parameter count.
static int64_t check_tensors(const u3_model *m, int W, int *tk_failed_) {
    static ref_t r[U3_NTENSORS + 8];
    const int n = reference(W, r);
    CHECK_EQ_INT(n, 78);
    CHECK_EQ_INT(m->P->ndense, n);
    int64_t total = 0;
    for (int i = 0; i < n && i < m->P->ndense; i++) {
        const tk_param *p = &m->P->p[i];
        CHECK_STR(p->name, r[i].name);
        CHECK_STR(u3_mlperf_name(m, i), r[i].ml);
        CHECK_EQ_INT(p->ndim, r[i].nd);
        int64_t numel = 1;
        for (int d = 0; d < r[i].nd; d++) {
            const int td = r[i].nd == 5 ? (d == 0 ? 0 : d == 4 ? 1 : d + 1) : d; // ktrsc dim d: torch's td
            CHECK_EQ_INT(p->shape[d], r[i].shape[td]);
            numel *= r[i].shape[d];
        }
        total += numel;
    }
    CHECK(u3_mlperf_name(m, n) == NULL);
    return total;
}

TK_TEST(tensors_are_the_references) {
    tk_err e = {0};
    // width 32 is the reference's network: 31,190,243 parameters (MLPerf's unet3d, as unet3d.py
    // --check and its bats test count them)
    u3_config cfg = config(32, 32, 32, 64, 1);
    u3_model *m = make(&cfg, &e);
    CHECK(m != NULL);
    if (!m) {
        printf("# %s\n", e.what);
        return;
    }
    CHECK_EQ_INT(check_tensors(m, 32, tk_failed_), 31190243);
    CHECK_EQ_INT(tk_params_numel(m->P), 31190243);
    // 50 distinct MLLOG names
    int distinct = 0;
    for (int i = 0; i < m->P->ndense; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= strcmp(u3_mlperf_name(m, i), u3_mlperf_name(m, j)) == 0;
        distinct += !seen;
    }
    CHECK_EQ_INT(distinct, 50);
    u3_unmake(m);
    cfg = config(3, 64, 32, 32, 2); // another width, another crop
    m = make(&cfg, &e);
    CHECK(m != NULL);
    if (m) check_tensors(m, 3, tk_failed_);
    u3_unmake(m);
}

TK_TEST(bad_shapes_refused) {
    tk_err e = {0};
    u3_config cfg = config(2, 32, 32, 48, 1); // not a multiple of 32
    CHECK(make(&cfg, &e) == NULL && e.code == TK_EUSAGE);
    CHECK(strstr(e.what, "32x32x48") != NULL);
    cfg = config(2, 32, 32, 32, 1); // the bottleneck would be one voxel
    e = (tk_err){0};
    CHECK(make(&cfg, &e) == NULL && e.code == TK_EUSAGE);
    CHECK(strstr(e.what, "at least 64") != NULL);
    cfg = config(2, 64, 32, 32, 1);
    cfg.bf16 = 1; // the cpu backend, the fp32 reference, refuses it (the engine's check)
    e = (tk_err){0};
    CHECK(make(&cfg, &e) == NULL && e.code == TK_EUSAGE);
    CHECK_STR(e.what, "unet3d: precision bf16 needs the cuda backend");
}

TK_TEST(init_is_the_references) {
    tk_err e = {0};
    static ref_t r[U3_NTENSORS + 8];
    reference(4, r);
    u3_config cfg = config(4, 64, 32, 32, 1);
    u3_model *m = make(&cfg, &e);
    CHECK(m != NULL);
    if (!m) return;
    for (int i = 0; i < m->P->ndense; i++) {
        const tk_param *p = &m->P->p[i];
        const float *v = p->w;
        const int64_t n = tk_param_numel(p);
        double mx = 0, sum = 0;
        int exact = 1;
        for (int64_t k = 0; k < n; k++) {
            mx = fmax(mx, fabs(v[k])), sum += v[k];
            exact &= v[k] == (r[i].one ? 1.0f : 0.0f);
        }
        if (r[i].norm) {
            if (!exact) printf("# %s: not all %d\n", p->name, r[i].one);
            CHECK(exact);
            continue;
        }
        const double b = 1 / sqrt(r[i].fan);
        const int ok = mx <= b * (1 + 1e-6) && (n < 64 || mx >= 0.9 * b) && fabs(sum / n) < (n < 64 ? b : 0.2 * b);
        if (!ok) printf("# %s: max %g, mean %g, bound %g\n", p->name, mx, sum / n, b);
        CHECK(ok);
    }
    // the same seed the same weights, another seed others
    u3_model *m2 = make(&cfg, &e);
    CHECK(m2 != NULL);
    if (m2) {
        CHECK(memcmp(m->P->dense_w, m2->P->dense_w, m->P->dense_n * 4) == 0);
        CHECK_EQ_INT(init(m2, 8, &e), 0);
        CHECK(memcmp(m->P->dense_w, m2->P->dense_w, m->P->dense_n * 4) != 0);
    }
    u3_unmake(m2);
    u3_unmake(m);
}

// ---- gradients ----

// The groups of the finite-difference check: the tensors whose names start with a prefix.
// (Not the deeper encoder blocks alone: at this crop their instance norms see 512 to 2 voxels and
// the loss curves too fast along them for fp32 differences (downsample.1 to the bottleneck measured
// 10% to 40% off at h 4e-5, converging as h falls until rounding takes over); the fp64 comparison
// with the PyTorch peer checks every tensor to 1.1e-4 (tests/cli/unet3d-model-peer.bats), and the
// directions over all tensors include them. "~": a purely random direction over all tensors.)
static const char *const groups[] = {"input_block.", "downsample.0.", "upsample.0.", "upsample.2.", "upsample.4.",
                                     "output.",      "",              "~1",          "~2"};

// Central differences of the loss along unit directions v over a group's tensors against
// <grad, v>. The loss is the accumulator's fp64 value of an fp32 forward, whose rounding moves it
// by ~1e-8 (measured: the differences' scatter at h 2e-5 .. 1e-4); the truncation, O(h^2 L''')
// and the ReLUs whose input crosses 0 inside the step, grows fast with h in the deep blocks (the
// instance norms over few voxels): h = 4e-5 balances the two. The allowance: 5% of the larger
// value plus 1e-8 / h (2.5e-4) against derivatives of 5e-4 to 0.3 (the direction is half the
// group's gradient direction); a wrong gradient (a missing term, a swapped operand) is off by O(1).
#define TOL_REL 0.05
#define TOL_ABS 1e-8
TK_TEST(gradients_vs_finite_differences) {
    tk_err e = {0};
    u3_config cfg = config(2, 64, 32, 32, 2);
    u3_model *m = make(&cfg, &e);
    CHECK(m != NULL);
    if (!m) {
        printf("# %s\n", e.what);
        return;
    }
    fill_batch(m, 11);
    tk_params *P = m->P;
    const size_t nw = P->dense_n;
    float *w0 = malloc(nw * 4), *g = malloc(nw * 4), *v = calloc(nw, 4);
    const double L0 = step(m, &e);
    CHECK(isfinite(L0) && L0 > 0.3 && L0 < 2);
    memcpy(w0, P->dense_w, nw * 4), memcpy(g, P->dense_g, nw * 4);
    double worst = 0;
    for (size_t gi = 0; gi < sizeof groups / sizeof *groups; gi++) {
        memset(v, 0, nw * 4);
        double nrm = 0;
        for (int i = 0; i < P->ndense; i++) {
            const tk_param *p = &P->p[i];
            if (groups[gi][0] != '~' && strncmp(p->name, groups[gi], strlen(groups[gi])) != 0) continue;
            const size_t off = (size_t)((float *)p->w - P->dense_w);
            for (int64_t k = 0; k < tk_param_numel(p); k++) {
                v[off + k] = (float)tk_philox_normal(21, (uint32_t)gi, off + k);
                nrm += (double)v[off + k] * v[off + k];
            }
        }
        // half the group's gradient direction, half a random one: a derivative near the group's
        // gradient norm, and a wrong component of the gradient still moves it
        double gn = 0, an = 0, vn = 0;
        for (size_t k = 0; k < nw; k++) gn += v[k] ? (double)g[k] * g[k] : 0;
        const double gw = groups[gi][0] == '~' ? 0 : 1 / sqrt(gn);
        for (size_t k = 0; k < nw; k++) v[k] = v[k] ? (float)(v[k] / sqrt(nrm) + g[k] * gw) : 0.0f, vn += (double)v[k] * v[k];
        for (size_t k = 0; k < nw; k++) v[k] = (float)(v[k] / sqrt(vn)), an += (double)g[k] * v[k];
        double Lp, Lm;
        // the step: about 1e-4 of loss along v (the deep blocks' derivatives are ~1e-6)
        const double h = getenv("FD_H") ? atof(getenv("FD_H")) : 4e-5;
        for (size_t k = 0; k < nw; k++) P->dense_w[k] = (float)(w0[k] + h * v[k]);
        Lp = step(m, &e);
        for (size_t k = 0; k < nw; k++) P->dense_w[k] = (float)(w0[k] - h * v[k]);
        Lm = step(m, &e);
        memcpy(P->dense_w, w0, nw * 4);
        const double fd = (Lp - Lm) / (2 * h), err = fabs(fd - an) / (TOL_REL * fmax(fabs(fd), fabs(an)) + TOL_ABS / h);
        printf("# %-16s h %.1e fd %+.6e grad %+.6e err %.2f\n", groups[gi][0] ? groups[gi] : "all (+grad)", h, fd, an, err);
        worst = fmax(worst, err);
        CHECK(err <= 1);
    }
    printf("# worst %.2f of the allowance\n", worst);
    // the step left the weights alone and repeats exactly
    CHECK(step(m, &e) == L0);
    CHECK(memcmp(g, P->dense_g, nw * 4) == 0);
    free(w0), free(g), free(v);
    u3_unmake(m);
}

// The accumulator gets the loss times the rank's share b / global batch, and [1] one step each;
// the gradients are scaled by the same share.
TK_TEST(loss_accumulator_and_share) {
    tk_err e = {0};
    u3_config cfg = config(2, 64, 32, 32, 1);
    u3_model *m = make(&cfg, &e);
    CHECK(m != NULL);
    if (!m) return;
    fill_batch(m, 5);
    const double L = step(m, &e);
    CHECK_NEAR(L, *m->loss, 1e-6);
    const size_t nw = m->P->dense_n;
    float *g = malloc(nw * 4);
    memcpy(g, m->P->dense_g, nw * 4);
    u3_unmake(m);
    m = make(&cfg, &e);
    CHECK(m != NULL);
    if (m) {
        m->cfg.batch = 4; // this rank's 1 of a global batch of 4 (one rank of 4 has that model)
        fill_batch(m, 5);
        m->loss_acc[0] = 0.5, m->loss_acc[1] = 3;
        CHECK_EQ_INT(u3_train_step(m, &e), 0);
        CHECK_NEAR(m->loss_acc[0], 0.5 + L / 4, 1e-12);
        CHECK(m->loss_acc[1] == 4);
        double d = 0, n = 0;
        for (size_t k = 0; k < nw; k++) d += pow(m->P->dense_g[k] - g[k] / 4, 2), n += pow(g[k] / 4, 2);
        CHECK(sqrt(d / n) < 1e-6);
    }
    free(g);
    u3_unmake(m);
}

// On several ranks the backward reports each block's gradients final as it completes them
// (workload.h grads_ready): the output layer, the upsampling blocks from the last, then the
// encoder's units from the bottleneck's (the last at offset 0), every report at a tensor's start
// and below the last, and nothing reported final written again (a skip's second gradient is an
// activation's).
TK_TEST(backward_reports_final_gradients) {
    tk_err e = {0};
    u3_config cfg = config(2, 64, 32, 32, 1);
    u3_model *m = make(&cfg, &e);
    CHECK(m != NULL);
    if (!m) return;
    fill_batch(m, 6);
    gr_rec r = {0};
    for (int s = 0; s < 2; s++) // (a second step reports anew)
        CHECK(gr_step_ok(&r, m->P, &m->grads, u3_train_step, m, 0, 1 + U3_UP + U3_ENC));
    gr_release(&r);
    u3_unmake(m);
}

// The eval forward of B windows < b: each window's logits as the training forward's of the same
// image (every sample is computed alone, whatever the model's other inputs hold), channels last
// with 3 values a voxel; the table's small members.
TK_TEST(eval_forward_and_table_members) {
    tk_err e = {0};
    u3_config cfg = config(2, 64, 32, 32, 3);
    u3_model *m = make(&cfg, &e);
    CHECK(m != NULL);
    if (!m) return;
    fill_batch(m, 9);
    CHECK(isfinite(step(m, &e)));
    const size_t nv = (size_t)m->S, nl = nv * U3_CLASSES;
    float *x = malloc(2 * nv * 4), *ref = malloc(2 * nl * 4), *y = malloc(2 * nl * 4);
    memcpy(x, m->in_img + nv, 2 * nv * 4); // samples 1 and 2 as windows 0 and 1
    memcpy(ref, (float *)m->logits + nl, 2 * nl * 4);
    fill_batch(m, 10); // other inputs
    CHECK_EQ_INT(u3_forward_eval(m, x, 2, y, &e), 0);
    CHECK(memcmp(y, ref, 2 * nl * 4) == 0);
    CHECK_EQ_INT(u3_forward_eval(m, x, 4, y, &e), TK_EINTERNAL); // more windows than the model's b
    free(x), free(ref), free(y);
    // the batch (fields as read and the dump's, as the peer reads them: ktrsc) and its inputs
    tk_wl_field f[TK_BATCH_MAX_FIELDS];
    CHECK_EQ_INT(u3_batch(m, f), 2);
    CHECK(tk_wl_field_bytes(&f[0]) == 3 * nv * 4 && tk_wl_field_bytes(&f[1]) == 3 * nv);
    CHECK(f[0].input == m->in_img && f[1].input == m->in_label);
    CHECK_STR(f[0].name, "batch.image");
    CHECK(f[0].dtype == TK_F32 && f[0].ndim == 5 && f[0].shape[0] == 3 && f[0].shape[1] == 64 && f[0].shape[4] == 1);
    CHECK_STR(f[1].name, "batch.label");
    CHECK(f[1].dtype == TK_U8 && f[1].ndim == 5 && f[1].shape[3] == 32);
    CHECK(u3_act_type(m) == TK_F32 && u3_model_config(m)->width == 2 && u3_model_ctx(m) == tk_test_cpu());
    tk_wl_dump d = {0};
    CHECK_EQ_INT(u3_dump_describe(m, &d, &e), 0);
    CHECK(d.batch[0].name == NULL && d.batch[1].name == NULL); // (both dumped as read)
    CHECK_STR(json_string_value(json_object_get(d.meta, "model")), "unet3d");
    CHECK_STR(json_string_value(json_object_get(d.meta, "width")), "2");
    CHECK_STR(json_string_value(json_object_get(d.meta, "layout")), "ktrsc");
    json_decref(d.meta);
    u3_unmake(m);
}

// ---- the PyTorch peer ----

static int load_peer(u3_model *m, const char *path, tk_err *e) {
    tk_st_file *f = NULL;
    TRY(tk_st_open(&f, path, e));
    int rc = 0;
    for (int i = 0; !rc && i < m->P->ndense; i++) {
        const tk_param *p = &m->P->p[i];
        const tk_st_tensor *t = tk_st_find(f, p->name);
        if (!t || t->dtype != TK_F32 || tk_st_nbytes(t) != tk_param_bytes(p))
            rc = tk_err_set(e, TK_EDATA, "%s: %s missing or of another shape (--layout ktrsc, float32?)", path, p->name);
        else rc = tk_st_read_all(f, t, p->w, e);
    }
    const tk_st_tensor *im = tk_st_find(f, "batch.image"), *lb = tk_st_find(f, "batch.label");
    const size_t nv = (size_t)m->b * m->S;
    if (!rc && (!im || !lb || tk_st_nbytes(im) != nv * 4 || tk_st_nbytes(lb) != nv))
        rc = tk_err_set(e, TK_EDATA, "%s: batch.image / batch.label of another size", path);
    if (!rc) rc = tk_st_read_all(f, im, m->in_img, e);
    if (!rc) rc = tk_st_read_all(f, lb, m->in_label, e);
    tk_st_close(f);
    return rc ? rc : u3_weights_loaded(m, e);
}

static int write_dump(u3_model *m, const char *path, tk_err *e) {
    const int np = m->P->ndense, nt = 2 * np + 4;
    tk_st_tensor *t = calloc((size_t)nt, sizeof *t);
    const void **src = calloc((size_t)nt, sizeof *src);
    const int *cr = m->cfg.data.crop;
    float loss = (float)m->loss_acc[0];
    int n = 0;
    for (int i = 0; i < np; i++, n++) {
        const tk_param *p = &m->P->p[i];
        t[n] = (tk_st_tensor){.dtype = TK_F32, .ndim = p->ndim};
        snprintf(t[n].name, sizeof t[n].name, "%s", p->name);
        memcpy(t[n].shape, p->shape, sizeof t[n].shape);
        src[n] = p->w;
    }
    t[n] = (tk_st_tensor){.name = "batch.image", .dtype = TK_F32, .ndim = 5, .shape = {m->b, cr[0], cr[1], cr[2], 1}};
    src[n++] = m->in_img;
    t[n] = (tk_st_tensor){.name = "batch.label", .dtype = TK_U8, .ndim = 5, .shape = {m->b, cr[0], cr[1], cr[2], 1}};
    src[n++] = m->in_label;
    t[n] = (tk_st_tensor){.name = "loss", .dtype = TK_F32, .ndim = 1, .shape = {1}};
    src[n++] = &loss;
    t[n] = (tk_st_tensor){.name = "dice", .dtype = TK_F32, .ndim = 2, .shape = {m->b, 2}};
    src[n++] = m->dice;
    for (int i = 0; i < np; i++, n++) {
        const tk_param *p = &m->P->p[i];
        t[n] = (tk_st_tensor){.dtype = TK_F32, .ndim = p->ndim};
        snprintf(t[n].name, sizeof t[n].name, "grad.%.120s", p->name);
        memcpy(t[n].shape, p->shape, sizeof t[n].shape);
        src[n] = p->g;
    }
    json_t *meta = json_pack("{s:s, s:s, s:s}", "model", "unet3d", "layout", "ktrsc", "width", "");
    json_object_set_new(meta, "width", json_sprintf("%d", m->cfg.width));
    tk_st_writer *w = NULL;
    int rc = tk_st_writer_open(&w, path, t, n, meta, e);
    for (int i = 0; !rc && i < n; i++) {
        uint64_t bytes = tk_dtype_size(t[i].dtype);
        for (int d = 0; d < t[i].ndim; d++) bytes *= (uint64_t)t[i].shape[d];
        rc = tk_st_writer_put(w, src[i], bytes, e);
    }
    if (!rc) rc = tk_st_writer_commit(w, e);
    else if (w) tk_st_writer_abort(w);
    json_decref(meta);
    free(t), free(src);
    return rc;
}

TK_TEST(peer_dump) {
    const char *in = getenv("U3_PEER_INIT"), *out = getenv("U3_PEER_OUT");
    if (!in || !out) {
        printf("# (U3_PEER_INIT and U3_PEER_OUT unset: tests/cli/unet3d-model-peer.bats runs this)\n");
        return;
    }
    tk_err e = {0};
    const char *wv = getenv("U3_PEER_WIDTH"), *cv = getenv("U3_PEER_CROP"), *bv = getenv("U3_PEER_BATCH");
    int d = 64, h = 32, w = 32;
    if (cv && sscanf(cv, "%d,%d,%d", &d, &h, &w) != 3) d = h = w = atoi(cv);
    u3_config cfg = config(wv ? atoi(wv) : 2, d, h, w, bv ? atoi(bv) : 2);
    u3_model *m = make(&cfg, &e);
    int rc = m ? load_peer(m, in, &e) : 1;
    if (!rc) rc = isfinite(step(m, &e)) ? 0 : 1;
    if (!rc) rc = write_dump(m, out, &e);
    if (rc) printf("# %s\n", e.what);
    CHECK_EQ_INT(rc, 0);
    u3_unmake(m);
}
