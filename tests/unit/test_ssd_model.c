// SSD300-ResNet34's network (lib/workloads/ssd) on the cpu backend:
// - its shapes and tensors as the v1.x MLPerf reference builds them (ssd300.py, base_model.py):
//   the six maps, 8732 boxes, the state dict's names and the parameter count (19,972,534 at 81
//   classes, counted here by hand from the reference's layers; contrib/peers/ssd.py --count
//   instantiates the reference in torch and tests/cli/ssd-model-oracle.bats compares);
// - the inputs it refuses; the reference's initialization (distributions' bounds and spreads);
// - the backward against central finite differences of the tests' loss (ssd_case.h) at a small
//   width (the layers' channel counts scale with it) on the smallest input that makes six maps;
// - the stem as the space-to-depth 4x4 convolution (lib/blocks/stem.h, model.stem "s2d": cuda's
//   default) the same network as the 7x7 one within fp32 rounding, its tensor still the
//   reference's 7x7 (and torchvision's conv1 imported into it);
// - the heads padded with zero filters (cuda's layout) the same network bit for bit; the
//   backward's reports of final gradients (several ranks' all-reduce overlap);
// - the heads' gather and scatter (kernels/ssd_head.h) in the reference's layout and box-major
//   against their index formulas written out here; the network box-major (the workload's
//   layout, ssd_config.box_major) the same numbers as in the reference's layout, transposed,
//   its gradients from the transposed loss weights the same bit for bit;
// - torchvision's resnet34 names and layouts imported into the trunk (ssd_import_torchvision);
// - peer_dump (run by tests/cli/ssd-model-oracle.bats): contrib/peers/ssd.py --init's weights,
//   batch and loss weights (SSD_PEER_INIT) through one forward and backward here, then an eval
//   forward (the running statistics), written (SSD_PEER_OUT) for ssd.py --compare with the training
//   forward's ReLU decisions (relu.II: ssd.py takes them where its input is within rounding of 0);
//   SSD_PEER_BACKBONE: a torchvision file imported first; SSD_PEER_STEM=s2d: the stem as the
//   space-to-depth 4x4 convolution (model.stem "s2d");
//   SSD_PEER_STEP=0: no step, the weights alone written (an import check at width 64).
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/safetensors.h"
#include "engine/ckpt.h"
#include "grads_case.h"
#include "ssd_case.h"
#include "ssd_head.h"
#include "tk_test.h"
#include "tk_test_cpu.h"

static ssd_config small(int width, int size, int classes, int b) {
    ssd_config c = ssd_config_default(b);
    c.width = width, c.size = size, c.classes = classes;
    return c;
}

static const tk_param *param(const ssd_model *m, const char *name) {
    const int i = tk_params_find(m->P, name);
    return i < 0 ? NULL : &m->P->p[i];
}

static int has_shape(const ssd_model *m, const char *name, int64_t d0, int64_t d1, int64_t d2, int64_t d3) {
    const tk_param *p = param(m, name);
    if (!p) return printf("#   no %s\n", name), 0;
    const int64_t want[4] = {d0, d1, d2, d3};
    for (int d = 0; d < p->ndim; d++)
        if (p->shape[d] != want[d]) return printf("#   %s: dim %d is %lld\n", name, d, (long long)p->shape[d]), 0;
    return 1;
}

TK_TEST(reference_shapes_and_count) {
    tk_err e = {0};
    ssd_case k;
    const ssd_config cfg = ssd_config_default(1);
    CHECK_EQ_INT(ssd_case_make(&k, tk_test_cpu(), &cfg, 0, &e), 0);
    const ssd_model *m = k.m;
    if (!m) return;
    const int sides[SSD_MAPS] = {38, 19, 10, 5, 3, 1};
    for (int i = 0; i < SSD_MAPS; i++) CHECK_EQ_INT(m->side[i], sides[i]);
    CHECK_EQ_INT(m->boxes, 8732);
    // the reference's layers, counted: resnet34's conv1 + bn1 and layer1..3 with 128 -> 256
    // downsample at stride 1; five additional blocks (1x1 + 3x3, biases); the heads (3x3, biases)
    int64_t trunk = 64 * 3 * 49 + 128;
    trunk += 3 * (2 * 64 * 64 * 9 + 2 * 128);
    trunk += 128 * 64 * 9 + 128 * 128 * 9 + 2 * 256 + 128 * 64 + 256 + 3 * (2 * 128 * 128 * 9 + 2 * 256);
    trunk += 256 * 128 * 9 + 256 * 256 * 9 + 2 * 512 + 256 * 128 + 512 + 5 * (2 * 256 * 256 * 9 + 2 * 512);
    const int in[5] = {256, 512, 512, 256, 256}, mid[5] = {256, 256, 128, 128, 128}, out[5] = {512, 512, 256, 256, 256};
    int64_t extra = 0, heads = 0;
    for (int i = 0; i < 5; i++) extra += (int64_t)in[i] * mid[i] + mid[i] + (int64_t)mid[i] * out[i] * 9 + out[i];
    const int ch[6] = {256, 512, 512, 256, 256, 256}, nd[6] = {4, 6, 6, 6, 4, 4};
    for (int i = 0; i < 6; i++) heads += (int64_t)(ch[i] * 9 + 1) * nd[i] * (4 + 81);
    CHECK_EQ_INT(trunk + extra + heads, 19972534);
    CHECK_EQ_INT(ssd_param_count(m), 19972534);
    printf("# parameters %lld (trunk %lld, additional %lld, heads %lld)\n", (long long)ssd_param_count(m),
           (long long)trunk, (long long)extra, (long long)heads);
    // the state dict: 131 trainable tensors, 58 running statistics (29 BatchNorms)
    CHECK_EQ_INT(m->P->ndense, 131);
    CHECK_EQ_INT(m->P->n, 131 + 58);
    CHECK(has_shape(m, "model.layer1.0.weight", 64, 7, 7, 3));
    CHECK(has_shape(m, "model.layer1.1.running_var", 64, 0, 0, 0));
    CHECK(has_shape(m, "model.layer1.4.2.conv2.weight", 64, 3, 3, 64));
    CHECK(has_shape(m, "model.layer1.5.0.downsample.0.weight", 128, 1, 1, 64));
    CHECK(has_shape(m, "model.layer2.0.0.downsample.0.weight", 256, 1, 1, 128));
    CHECK(has_shape(m, "model.layer2.0.5.bn2.bias", 256, 0, 0, 0));
    CHECK(param(m, "model.layer1.4.0.downsample.0.weight") == NULL);
    CHECK(param(m, "model.layer2.0.1.downsample.0.weight") == NULL);
    CHECK(has_shape(m, "additional_blocks.0.0.weight", 256, 1, 1, 256));
    CHECK(has_shape(m, "additional_blocks.1.2.weight", 512, 3, 3, 256));
    CHECK(has_shape(m, "additional_blocks.4.2.bias", 256, 0, 0, 0));
    CHECK(has_shape(m, "loc.0.weight", 16, 3, 3, 256));
    CHECK(has_shape(m, "conf.1.weight", 6 * 81, 3, 3, 512));
    CHECK(has_shape(m, "conf.5.bias", 4 * 81, 0, 0, 0));
    // layer3's first block at stride 1 (the reference's _ModifyBlock): 38x38 in and out
    CHECK_EQ_INT(m->blk[7].u1.c.s.stride, 1);
    CHECK_EQ_INT(m->blk[7].ud.c.s.stride, 1);
    CHECK_EQ_INT(m->blk[3].u1.c.s.stride, 2);
    ssd_case_free(&k);
}

TK_TEST(inputs_refused) {
    tk_err e = {0};
    ssd_case k;
    ssd_config c = small(4, 256, 3, 1);
    CHECK_EQ_INT(ssd_case_make(&k, tk_test_cpu(), &c, 0, &e), TK_EUSAGE);
    CHECK(strstr(e.what, "256") != NULL);
    ssd_case_free(&k);
    c = small(4, 300, 0, 1);
    CHECK_EQ_INT(ssd_case_make(&k, tk_test_cpu(), &c, 0, &e), TK_EUSAGE);
    ssd_case_free(&k);
    c = small(4, 300, 3, 1), c.bf16 = 1;
    CHECK_EQ_INT(ssd_case_make(&k, tk_test_cpu(), &c, 0, &e), TK_EUSAGE);
    ssd_case_free(&k);
    // the smallest input with six maps: 257 -> 33, 17, 9, 5, 3, 1
    c = small(4, 257, 3, 1);
    CHECK_EQ_INT(ssd_case_make(&k, tk_test_cpu(), &c, 0, &e), 0);
    const int sides[SSD_MAPS] = {33, 17, 9, 5, 3, 1};
    for (int i = 0; k.m && i < SSD_MAPS; i++) CHECK_EQ_INT(k.m->side[i], sides[i]);
    if (k.m) CHECK_EQ_INT(k.m->boxes, 4 * 33 * 33 + 6 * 17 * 17 + 6 * 9 * 9 + 6 * 5 * 5 + 4 * 3 * 3 + 4);
    ssd_case_free(&k);
    // the space-to-depth stem wants an even side
    c.stem = TK_BLK_STEM_S2D;
    CHECK_EQ_INT(ssd_case_make(&k, tk_test_cpu(), &c, 0, &e), TK_EUSAGE);
    CHECK(strstr(e.what, "257") != NULL);
    ssd_case_free(&k);
}

// ||a - b|| / ||a|| of n floats (absolute where a is all zero).
static double rel(const float *a, const float *b, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) num += ((double)a[i] - b[i]) * ((double)a[i] - b[i]), den += (double)a[i] * a[i];
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

// The stem as the 7x7/2 convolution and as the space-to-depth 4x4 one over the same weights and
// batch: one training forward and backward, then an eval forward, the same outputs and running
// statistics within fp32 rounding (the two sum conv1's 147 products in different orders: 1e-5),
// conv1's tensor (w, 7, 7, 3) either way. A ReLU input within rounding of 0 may take the other
// side in one of them, and its gradient then passes whole or not at all (1e-3..1e-2 on the
// layers below): the ReLU decisions that differ must be within 1e-4 x their output's RMS of 0,
// and the s2d model's backward runs again on the direct one's decisions (ssd_case_adopt_relus),
// its gradients then within 1e-5 of the direct one's.
TK_TEST(stem_s2d_same_step_as_direct) {
    tk_err e = {0};
    ssd_case k[2];
    ssd_case_io io[2];
    uint8_t *bits = NULL;
    for (int f = 0; f < 2; f++) {
        ssd_config cfg = small(4, 258, 3, 2);
        cfg.stem = f ? TK_BLK_STEM_S2D : TK_BLK_STEM_DIRECT;
        const int rc = ssd_case_loaded(&k[f], tk_test_cpu(), &cfg, 8, 0x5d2, &io[f], &e);
        CHECK_EQ_INT(rc, 0);
        if (rc) {
            printf("# %s\n", e.what);
            if (f) ssd_case_io_free(&io[0]), ssd_case_free(&k[0]);
            ssd_case_free(&k[f]);
            return;
        }
        ssd_model *m = k[f].m;
        CHECK_EQ_INT(m->stem.s2d, f);
        CHECK_EQ_INT(m->stem.cin, f ? 16 : 3);
        CHECK(has_shape(m, "model.layer1.0.weight", 4, 7, 7, 3));
        CHECK_EQ_INT(m->u0.c.s.R, f ? 4 : 7);
        CHECK_EQ_INT(m->u0.c.s.P, 129);
        if (f) bits = ssd_case_give_masks(m);
        CHECK(f == 0 || bits != NULL);
        CHECK_EQ_INT(ssd_forward(m, 1, &e), 0);
        CHECK_EQ_INT(ssd_backward(m, &e), 0);
    }
    ssd_model *a = k[0].m, *b = k[1].m;
    const double rl = rel(a->loc, b->loc, io[0].nl), rc = rel(a->conf, b->conf, io[0].nc);
    // the ReLU decisions: where they differ, both outputs within rounding of 0
    const tk_blk_conv *cv[SSD_RELUS];
    const void *za[SSD_RELUS], *zb[SSD_RELUS];
    ssd_case_relus(a, cv, za), ssd_case_relus(b, cv, zb);
    size_t differ = 0;
    double far = 0;
    for (int i = 0; i < SSD_RELUS; i++) {
        const size_t n = (size_t)tk_blk_conv_y_numel(cv[i]);
        const float *x = za[i], *y = zb[i];
        double ss = 0;
        for (size_t j = 0; j < n; j++) ss += (double)x[j] * x[j];
        const double rms = ss > 0 ? sqrt(ss / (double)n) : 1;
        for (size_t j = 0; j < n; j++)
            if ((x[j] > 0) != (y[j] > 0)) {
                const double v = (x[j] > y[j] ? x[j] : y[j]) / rms;
                differ++, far = v > far ? v : far;
            }
    }
    float *ref[SSD_RELUS];
    for (int i = 0; i < SSD_RELUS; i++) ref[i] = (float *)za[i];
    const size_t taken = bits ? ssd_case_adopt_relus(b, ref) : 0;
    CHECK_EQ_INT((int)taken, (int)differ);
    CHECK_EQ_INT(ssd_backward(b, &e), 0);
    double worst = 0, run = 0;
    const char *wn = "";
    for (int i = 0; i < a->P->n; i++) {
        const tk_param *pa = &a->P->p[i], *pb = &b->P->p[i];
        CHECK(strcmp(pa->name, pb->name) == 0);
        const int dense = i < a->P->ndense;
        const double r = rel(dense ? pa->g : pa->w, dense ? pb->g : pb->w, (size_t)tk_param_numel(pa));
        if (getenv("TK_SSD_EACH")) printf("#   %s %.1e\n", pa->name, r);
        if (!dense) run = r > run ? r : run;
        else if (r >= worst) worst = r, wn = pa->name;
    }
    printf("# stem direct vs s2d: loc %.1e, conf %.1e, %zu ReLU decisions differ (the farthest %.1e x RMS), "
           "then worst gradient %s %.1e, running statistics %.1e\n", rl, rc, differ, far, wn, worst, run);
    CHECK(rl <= 1e-5 && rc <= 1e-5);
    CHECK(far <= 1e-4);
    CHECK(worst <= 1e-5);
    CHECK(run <= 1e-5);
    for (int f = 0; f < 2; f++) CHECK_EQ_INT(ssd_forward(k[f].m, 0, &e), 0);
    const double el = rel(a->loc, b->loc, io[0].nl), ec = rel(a->conf, b->conf, io[0].nc);
    printf("# eval forward: loc %.1e, conf %.1e\n", el, ec);
    CHECK(el <= 1e-5 && ec <= 1e-5);
    for (int f = 0; f < 2; f++) ssd_case_io_free(&io[f]), ssd_case_free(&k[f]);
    free(bits);
}

// max |v|, mean and standard deviation of a tensor
static void stats(const tk_param *p, double *amax, double *mean, double *sd) {
    const float *v = p->w;
    const size_t n = (size_t)tk_param_numel(p);
    double s = 0, s2 = 0;
    *amax = 0;
    for (size_t i = 0; i < n; i++) s += v[i], s2 += (double)v[i] * v[i], *amax = fmax(*amax, fabs(v[i]));
    *mean = s / n, *sd = sqrt(s2 / n - *mean * *mean);
}

TK_TEST(init_is_the_references) {
    tk_err e = {0};
    ssd_case k;
    const ssd_config cfg = small(16, 257, 5, 1);
    CHECK_EQ_INT(ssd_case_make(&k, tk_test_cpu(), &cfg, 11, &e), 0);
    if (!k.m) return;
    double amax, mean, sd;
    // trunk convs: kaiming_normal_ fan_out: sd sqrt(2 / (K R S))
    stats(param(k.m, "model.layer1.0.weight"), &amax, &mean, &sd); // (16, 7, 7, 3)
    CHECK_NEAR(sd, sqrt(2.0 / (16 * 49)), 0.05 * sqrt(2.0 / (16 * 49)));
    stats(param(k.m, "model.layer2.0.3.conv1.weight"), &amax, &mean, &sd); // (64, 3, 3, 64)
    CHECK_NEAR(sd, sqrt(2.0 / (64 * 9)), 0.02 * sqrt(2.0 / (64 * 9)));
    // BatchNorm 1, 0; running statistics 0, 1
    stats(param(k.m, "model.layer1.5.1.bn2.weight"), &amax, &mean, &sd);
    CHECK(mean == 1.0 && sd == 0.0);
    stats(param(k.m, "model.layer1.5.1.bn2.bias"), &amax, &mean, &sd);
    CHECK(amax == 0.0);
    stats(param(k.m, "model.layer2.0.0.downsample.1.running_var"), &amax, &mean, &sd);
    CHECK(mean == 1.0 && sd == 0.0);
    // additional layers and heads: xavier_uniform_, bound sqrt(6 / (C R S + K R S)), sd bound / sqrt(3)
    const struct { const char *name; double fin, fout; } xs[] = {
        {"additional_blocks.1.2.weight", 64 * 9, 128 * 9}, {"additional_blocks.3.0.weight", 64, 32},
        {"loc.2.weight", 128 * 9, 24 * 9}, {"conf.0.weight", 64 * 9, 20 * 9}};
    for (int i = 0; i < 4; i++) {
        const double a = sqrt(6.0 / (xs[i].fin + xs[i].fout));
        stats(param(k.m, xs[i].name), &amax, &mean, &sd);
        CHECK(amax <= a && amax > 0.95 * a);
        CHECK_NEAR(sd, a / sqrt(3.0), 0.1 * a / sqrt(3.0));
    }
    // their biases: Conv2d's default, U(-1/sqrt(C R S), 1/sqrt(C R S))
    const struct { const char *name; double fin; } bs[] = {
        {"additional_blocks.1.2.bias", 64 * 9}, {"additional_blocks.0.0.bias", 64}, {"conf.1.bias", 128 * 9}};
    for (int i = 0; i < 3; i++) {
        stats(param(k.m, bs[i].name), &amax, &mean, &sd);
        CHECK(amax <= 1.0 / sqrt(bs[i].fin) && amax > 0.5 / sqrt(bs[i].fin));
    }
    ssd_case_free(&k);
}

// The tests' loss after a training forward, in fp64.
static double loss(ssd_model *m, const ssd_case_io *io, tk_err *e) {
    if (ssd_forward(m, 1, e)) return NAN;
    double s = 0;
    for (size_t i = 0; i < io->nl; i++) s += (double)m->loc[i] * io->wl[i];
    for (size_t i = 0; i < io->nc; i++) s += (double)m->conf[i] * io->wc[i];
    return s;
}

TK_TEST(gradients_vs_finite_differences) {
    tk_err e = {0};
    ssd_case k;
    const ssd_config cfg = small(4, 257, 3, 2);
    ssd_case_io io;
    CHECK_EQ_INT(ssd_case_loaded(&k, tk_test_cpu(), &cfg, 5, 0x55d, &io, &e), 0);
    ssd_model *m = k.m;
    if (!m || !io.img) return;
    const double L0 = loss(m, &io, &e);
    CHECK(isfinite(L0));
    CHECK_EQ_INT(ssd_backward(m, &e), 0);
    // a tensor of every kind of layer: the stem, norms, a shortcut, layer3, the additional
    // layers (weights and biases), loc and conf (weights and biases) of several maps. Along each
    // tensor's gradient direction u = g / |g|: (L(w + eps u) - L(w - eps u)) / 2 eps against |g|
    // (the largest change a step of eps makes, well above the fp32 forward's rounding, in which
    // single elements drown), eps such that L moves by about 1% or w by 1% (at least 0.001), whichever is less; within
    // 3% (the kinks of ReLU and max pool inside a step: 2.1% measured for bn1, the rest < 1%;
    // ssd-model-oracle.bats checks every gradient against torch float64 to 1e-3).
    static const char *const names[] = {
        "model.layer1.0.weight",        "model.layer1.1.weight",        "model.layer1.4.1.bn1.bias",
        "model.layer1.5.0.downsample.0.weight", "model.layer2.0.0.conv1.weight", "model.layer2.0.5.bn2.weight",
        "additional_blocks.0.0.weight", "additional_blocks.2.2.bias",   "additional_blocks.4.2.weight",
        "loc.0.weight",                 "loc.3.bias",                   "conf.1.weight",
        "conf.5.bias",                  "conf.0.bias"};
    const int n = (int)(sizeof names / sizeof *names);
    double worst = 0;
    for (int j = 0; j < n; j++) {
        const tk_param *p = param(m, names[j]);
        CHECK(p != NULL);
        if (!p) continue;
        const size_t ne = (size_t)tk_param_numel(p);
        float *w = p->w, *w0 = malloc(ne * 4), *g = malloc(ne * 4);
        memcpy(w0, w, ne * 4), memcpy(g, p->g, ne * 4); // (the gradients: the backward's, kept)
        double gn = 0, wn = 0;
        for (size_t i = 0; i < ne; i++) gn += (double)g[i] * g[i], wn += (double)w0[i] * w0[i];
        gn = sqrt(gn), wn = sqrt(wn);
        CHECK(gn > 0);
        if (!(gn > 0)) continue;
        const double eps = fmin(1e-2 * fmax(fabs(L0), 1.0) / gn, 1e-2 * fmax(wn, 0.1));
        double l[2];
        for (int s = 0; s < 2; s++) {
            for (size_t i = 0; i < ne; i++) w[i] = (float)(w0[i] + (s ? -eps : eps) * g[i] / gn);
            l[s] = loss(m, &io, &e);
        }
        memcpy(w, w0, ne * 4);
        const double fd = (l[0] - l[1]) / (2 * eps), err = fabs(fd - gn) / gn;
        worst = fmax(worst, err);
        if (!(err <= 3e-2) || getenv("SSD_FD_VERBOSE"))
            printf("#   %s: |g| %.6g, finite differences %.6g (eps %.3g)\n", names[j], gn, fd, eps);
        CHECK(err <= 3e-2);
        free(w0), free(g);
    }
    printf("# worst relative difference %.3g (L %.6g)\n", worst, L0);
    ssd_case_io_free(&io);
    ssd_case_free(&k);
}

// The heads padded with zero filters (cuda's layout, here on the cpu): the same outputs and
// gradients bit for bit (every output channel is its own sum; the padding's gradients dropped).
TK_TEST(padded_heads_are_the_same_network) {
    tk_err e = {0};
    ssd_case k[2];
    ssd_config cfg = small(4, 257, 3, 2);
    CHECK_EQ_INT(ssd_case_make(&k[0], tk_test_cpu(), &cfg, 8, &e), 0);
    cfg.head_align = 8; // 4 (4 + 3) = 28 -> 32, 6 (4 + 3) = 42 -> 48
    CHECK_EQ_INT(ssd_case_make(&k[1], tk_test_cpu(), &cfg, 8, &e), 0);
    ssd_case_io io;
    if (!k[0].m || !k[1].m || ssd_case_io_make(k[0].m, 0x9ad, &io)) return;
    CHECK_EQ_INT(k[1].m->head[0].c.s.K, 32);
    CHECK_EQ_INT(k[1].m->head[1].c.s.K, 48);
    CHECK(k[1].m->head[1].wp != NULL && k[0].m->head[1].wp == NULL);
    for (int j = 0; j < 2; j++) {
        ssd_model *m = k[j].m;
        // the padded model's bias and weight gradients start as garbage: all of them must be written
        if (j) memset(m->P->dense_g, 0xff, m->P->dense_n * 4);
        CHECK_EQ_INT(ssd_case_io_load(m, &io, &e), 0);
        CHECK_EQ_INT(ssd_forward(m, 1, &e), 0);
        CHECK_EQ_INT(ssd_backward(m, &e), 0);
    }
    const ssd_model *a = k[0].m, *b = k[1].m;
    CHECK(memcmp(a->loc, b->loc, io.nl * 4) == 0);
    CHECK(memcmp(a->conf, b->conf, io.nc * 4) == 0);
    int bad = 0;
    for (int i = 0; i < a->P->ndense; i++)
        if (memcmp(a->P->p[i].g, b->P->p[i].g, tk_param_bytes(&a->P->p[i]))) {
            if (bad++ < 3) printf("#   grad %s differs\n", a->P->p[i].name);
        }
    CHECK_EQ_INT(bad, 0);
    ssd_case_io_free(&io);
    ssd_case_free(&k[0]), ssd_case_free(&k[1]);
}

// The heads' gather and scatter of one map's loc or conf part (fp32) at an offset into a larger
// output, in either layout, against the element formulas of kernels/ssd_head.h written out here:
// every element of the output the map's block holds is its source's (positions encode (n, p, ch),
// so a misplaced value names where it came from), the rest untouched; the scatter back writes the
// part's channels and no other.
TK_TEST(head_gather_scatter_layouts) {
    tk_err e = {0};
    static const struct {
        int N, HW, nd, A, c0, ld;
        int64_t total, off;
    } cs[] = {{2, 9, 4, 4, 0, 28, 50, 7}, {2, 9, 4, 3, 16, 28, 40, 3}, {1, 4, 6, 81, 24, 6 * 85 + 2, 30, 6},
              {3, 1, 4, 5, 0, 20, 4, 0}};
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
        for (int bm = 0; bm < 2; bm++) {
            const tk_ssd_map mp = {cs[i].N, cs[i].HW, cs[i].nd, cs[i].A, cs[i].ld, cs[i].c0, cs[i].total, cs[i].off, bm};
            const size_t ns = (size_t)mp.N * mp.HW * mp.ld, no = (size_t)mp.N * mp.A * (size_t)mp.total;
            float *src = malloc(ns * 4), *out = malloc(no * 4), *back = malloc(ns * 4);
            for (size_t k = 0; k < ns; k++) src[k] = (float)k;
            for (size_t k = 0; k < no; k++) out[k] = -1.0f;
            for (size_t k = 0; k < ns; k++) back[k] = -2.0f;
            CHECK_EQ_INT(tk_ssd_head_gather(tk_test_cpu(), TK_F32, &mp, src, out, &e), 0);
            int bad = 0;
            size_t seen = 0;
            for (int n = 0; n < mp.N; n++)
                for (int a = 0; a < mp.A; a++)
                    for (int64_t col = 0; col < mp.total; col++) {
                        const size_t o = bm ? ((size_t)n * mp.total + col) * mp.A + a : ((size_t)n * mp.A + a) * mp.total + col;
                        const int64_t j = col - mp.off; // (d, p) = (j / HW, j % HW) inside the map's block
                        float want = -1.0f;
                        if (j >= 0 && j < (int64_t)mp.nd * mp.HW) {
                            const int d = (int)(j / mp.HW), p = (int)(j % mp.HW);
                            want = (float)(((size_t)n * mp.HW + p) * mp.ld + mp.c0 + (size_t)a * mp.nd + d);
                            seen++;
                        }
                        if (out[o] != want && bad++ < 3)
                            printf("#   case %zu%s: out[%d, %d, %lld] = %g, want %g\n", i, bm ? " box-major" : "", n, a,
                                   (long long)col, out[o], want);
                    }
            CHECK_EQ_INT(bad, 0);
            CHECK(seen == (size_t)mp.N * mp.A * mp.nd * mp.HW);
            CHECK_EQ_INT(tk_ssd_head_scatter(tk_test_cpu(), TK_F32, &mp, out, back, &e), 0);
            bad = 0;
            for (size_t k = 0; k < ns; k++) {
                const int ch = (int)(k % (size_t)mp.ld), part = ch >= mp.c0 && ch < mp.c0 + mp.nd * mp.A;
                bad += back[k] != (part ? src[k] : -2.0f);
            }
            CHECK_EQ_INT(bad, 0);
            free(src), free(out), free(back);
        }
}

// The many-head forms of kernels/ssd_head.h (the training step's one launch) against the element
// formulas: two heads, one with three channels a position no part covers (a padded head's), their
// loc and conf parts into one loc and one conf output (head 1's boxes after head 0's), in either
// layout. The gather fills every output element with its source's (positions encode (head, n, p,
// ch)); the scatter back writes each head's parts' channels from it and 0 in the uncovered ones.
// Overlapping parts and mismatched shapes are refused.
TK_TEST(head_many_gather_scatter) {
    tk_err e = {0};
    enum { N = 2, C = 3 }; // images, classes
    static const int HW[2] = {9, 1}, nd[2] = {4, 6}, ld[2] = {4 * (4 + C) + 3, 6 * (4 + C)};
    const int64_t total = 4 * 9 + 6 * 1, off[2] = {0, 36};
    for (int bm = 0; bm < 2; bm++) {
        float *src[2], *back[2], *loc = malloc((size_t)N * 4 * total * 4), *conf = malloc((size_t)N * C * total * 4);
        size_t ns[2];
        tk_ssd_head hs[2];
        for (int h = 0; h < 2; h++) {
            ns[h] = (size_t)N * HW[h] * ld[h];
            src[h] = malloc(ns[h] * 4), back[h] = malloc(ns[h] * 4);
            for (size_t k = 0; k < ns[h]; k++) src[h][k] = (float)(1000 * h + k), back[h][k] = -2.0f;
            hs[h] = (tk_ssd_head){.src = src[h], .nparts = 2, .out = {loc, conf}};
            hs[h].part[0] = (tk_ssd_map){N, HW[h], nd[h], 4, ld[h], 0, total, off[h], bm};
            hs[h].part[1] = (tk_ssd_map){N, HW[h], nd[h], C, ld[h], 4 * nd[h], total, off[h], bm};
        }
        for (size_t k = 0; k < (size_t)N * 4 * total; k++) loc[k] = -1.0f;
        for (size_t k = 0; k < (size_t)N * C * total; k++) conf[k] = -1.0f;
        CHECK_EQ_INT(tk_ssd_head_gather_many(tk_test_cpu(), TK_F32, 2, hs, &e), 0);
        int bad = 0;
        for (int part = 0; part < 2; part++) {
            const int A = part ? C : 4;
            const float *out = part ? conf : loc;
            for (int n = 0; n < N; n++)
                for (int a = 0; a < A; a++)
                    for (int64_t col = 0; col < total; col++) {
                        const int h = col >= off[1];
                        const int64_t j = col - off[h]; // (d, p) = (j / HW, j % HW)
                        const int d = (int)(j / HW[h]), p = (int)(j % HW[h]), c0 = part ? 4 * nd[h] : 0;
                        const float want = (float)(1000 * h + ((size_t)n * HW[h] + p) * ld[h] + c0 + a * nd[h] + d);
                        const size_t o = bm ? ((size_t)n * total + col) * A + a : ((size_t)n * A + a) * total + col;
                        if (out[o] != want && bad++ < 3)
                            printf("#   %s%s[%d, %d, %lld] = %g, want %g\n", part ? "conf" : "loc", bm ? " box-major" : "",
                                   n, a, (long long)col, out[o], want);
                    }
        }
        CHECK_EQ_INT(bad, 0);
        for (int h = 0; h < 2; h++) hs[h].src = back[h];
        CHECK_EQ_INT(tk_ssd_head_scatter_many(tk_test_cpu(), TK_F32, 2, hs, &e), 0);
        bad = 0;
        for (int h = 0; h < 2; h++)
            for (size_t k = 0; k < ns[h]; k++) {
                const int ch = (int)(k % (size_t)ld[h]);
                bad += back[h][k] != (ch < nd[h] * (4 + C) ? src[h][k] : 0.0f);
            }
        CHECK_EQ_INT(bad, 0);
        // refused: conf's channels over loc's; part 1 of another ld; no heads
        hs[0].part[1].c0 = 4 * nd[0] - 1;
        CHECK_EQ_INT(tk_ssd_head_gather_many(tk_test_cpu(), TK_F32, 2, hs, &e), TK_EINTERNAL);
        hs[0].part[1].c0 = 4 * nd[0], hs[0].part[1].ld = ld[0] + 1;
        CHECK_EQ_INT(tk_ssd_head_scatter_many(tk_test_cpu(), TK_F32, 2, hs, &e), TK_EINTERNAL);
        CHECK_EQ_INT(tk_ssd_head_gather_many(tk_test_cpu(), TK_F32, 0, hs, &e), TK_EINTERNAL);
        for (int h = 0; h < 2; h++) free(src[h]), free(back[h]);
        free(loc), free(conf);
    }
}

// The network box-major (the workload's layout) against the reference's layout: the outputs
// the same numbers transposed, the gradients from the transposed loss weights the same bits.
TK_TEST(box_major_is_the_same_network) {
    tk_err e = {0};
    size_t nout = 1, ngrad = 1;
    CHECK_EQ_INT(ssd_case_layouts(tk_test_cpu(), small(4, 257, 3, 2), 5, 0x5b, &nout, &ngrad, &e), 0);
    printf("# box-major vs the reference's layout: %zu outputs, %zu gradients differ\n", nout, ngrad);
    CHECK(nout == 0);
    CHECK(ngrad == 0);
}

// One training step of the tests (forward, backward from the loaded loss weights).
static int train_step(void *model, tk_err *e) {
    TRY(ssd_forward(model, 1, e));
    return ssd_backward(model, e);
}

// On several ranks the backward reports each layer's gradients final for their all-reduce
// (lib/blocks tk_blk_grads): the heads (6), the additional blocks (5), the trunk's blocks (13),
// then the whole span (the stem's tensors) at the end; none changed after its report.
TK_TEST(backward_reports_final_gradients) {
    tk_err e = {0};
    ssd_case k;
    const ssd_config cfg = small(4, 257, 3, 1);
    ssd_case_io io;
    CHECK_EQ_INT(ssd_case_loaded(&k, tk_test_cpu(), &cfg, 2, 0x77, &io, &e), 0);
    if (!k.m || !io.img) return;
    gr_rec r = {0};
    for (int s = 0; s < 2; s++) // (a second step reports anew)
        CHECK(gr_step_ok(&r, k.m->P, &k.m->grads, train_step, k.m, 0, SSD_MAPS + SSD_EXTRA + SSD_BLOCKS + 1));
    gr_release(&r);
    ssd_case_io_free(&io);
    ssd_case_free(&k);
}

// ---- torchvision's trunk ----

static int write_st(const char *path, tk_st_tensor *t, const void **src, int n) {
    tk_err e = {0};
    tk_ckpt_entry ent[8];
    for (int i = 0; i < n; i++) ent[i] = (tk_ckpt_entry){.t = t[i], .src = src[i]};
    return tk_ckpt_write(tk_test_cpu(), path, ent, n, NULL, &e);
}

TK_TEST(import_torchvision_names_and_layouts) {
    tk_err e = {0};
    ssd_case k;
    const ssd_config cfg = small(4, 257, 3, 1);
    CHECK_EQ_INT(ssd_case_make(&k, tk_test_cpu(), &cfg, 3, &e), 0);
    if (!k.m) return;
    // conv1.weight (4, 3, 7, 7) and layer3.0.downsample.0.weight (16, 8, 1, 1) of values 1 + index,
    // bn1.running_var, and tensors that are not the trunk's (layer4, fc)
    float c1[4 * 3 * 49], ds[16 * 8], rv[4] = {2, 3, 4, 5}, fc[10];
    for (int i = 0; i < 4 * 3 * 49; i++) c1[i] = 1.0f + i;
    for (int i = 0; i < 16 * 8; i++) ds[i] = -1.0f - i;
    for (int i = 0; i < 10; i++) fc[i] = 7;
    tk_st_tensor t[5] = {{.name = "conv1.weight", .dtype = TK_F32, .ndim = 4, .shape = {4, 3, 7, 7}},
                         {.name = "layer3.0.downsample.0.weight", .dtype = TK_F32, .ndim = 4, .shape = {16, 8, 1, 1}},
                         {.name = "bn1.running_var", .dtype = TK_F32, .ndim = 1, .shape = {4}},
                         {.name = "layer4.0.bn1.bias", .dtype = TK_F32, .ndim = 1, .shape = {10}},
                         {.name = "fc.bias", .dtype = TK_F32, .ndim = 1, .shape = {10}}};
    const void *src[5] = {c1, ds, rv, fc, fc};
    const char *path = tk_test_path("ssd", "tv.safetensors");
    CHECK_EQ_INT(write_st(path, t, src, 5), 0);
    const tk_param *conf = param(k.m, "conf.0.weight");
    const float conf0 = ((float *)conf->w)[0];
    CHECK_EQ_INT(ssd_import_torchvision(k.m, path, &e), 0);
    const float *w = param(k.m, "model.layer1.0.weight")->w; // (4, 7, 7, 3)
    int bad = 0;
    for (int o = 0; o < 4; o++)
        for (int c = 0; c < 3; c++)
            for (int r = 0; r < 7; r++)
                for (int s = 0; s < 7; s++) bad += w[((o * 7 + r) * 7 + s) * 3 + c] != 1.0f + ((o * 3 + c) * 7 + r) * 7 + s;
    CHECK_EQ_INT(bad, 0);
    const float *d = param(k.m, "model.layer2.0.0.downsample.0.weight")->w;
    CHECK(d[0] == -1.0f && d[8 * 16 - 1] == -128.0f && d[9] == -10.0f);
    const float *v = param(k.m, "model.layer1.1.running_var")->w;
    CHECK(v[0] == 2 && v[3] == 5);
    CHECK(((float *)conf->w)[0] == conf0); // not the trunk's: kept
    // a tensor of another shape: the file and the tensor named, bad input
    t[1].shape[1] = 4;
    CHECK_EQ_INT(write_st(path, t, src, 2), 0);
    CHECK_EQ_INT(ssd_import_torchvision(k.m, path, &e), TK_EDATA);
    CHECK(strstr(e.what, "layer3.0.downsample.0.weight") && strstr(e.where, "tv.safetensors"));
    // no tensor of the trunk at all
    CHECK_EQ_INT(write_st(path, t + 3, src + 3, 2), 0);
    CHECK_EQ_INT(ssd_import_torchvision(k.m, path, &e), TK_EDATA);
    // a trainkit checkpoint (our names and layouts: every tensor) into a fresh model
    tk_ckpt_entry *ent;
    int n;
    CHECK_EQ_INT(tk_ckpt_entries(k.m->P, &ent, &n, &e), 0);
    json_t *meta = json_pack("{s:s}", "format", TK_CKPT_FORMAT);
    const char *ck = tk_test_path("ssd", "ours.safetensors");
    CHECK_EQ_INT(tk_ckpt_write(k.m->c, ck, ent, n, meta, &e), 0);
    json_decref(meta), free(ent);
    ssd_case k2;
    CHECK_EQ_INT(ssd_case_make(&k2, tk_test_cpu(), &cfg, 4, &e), 0);
    CHECK_EQ_INT(ssd_import_torchvision(k2.m, ck, &e), 0);
    for (int i = 0; k2.m && i < k.m->P->n; i++)
        CHECK(memcmp(k.m->P->p[i].w, k2.m->P->p[i].w, tk_param_bytes(&k.m->P->p[i])) == 0);
    ssd_case_free(&k2);
    ssd_case_free(&k);
    tk_test_rmdir();
}

// ---- the peer's step ----

static int meta_int(const tk_st_file *f, const char *key, int dflt) {
    const char *v = tk_st_meta(f, key);
    return v ? atoi(v) : dflt;
}

static int read_exact(const tk_st_file *f, const char *path, const char *name, void *dst, size_t bytes, tk_err *e) {
    const tk_st_tensor *t = tk_st_find(f, name);
    if (!t || t->dtype != TK_F32 || tk_st_nbytes(t) != bytes)
        return tk_err_set(e, TK_EDATA, "%s: %s missing or of another shape (float32, our layout)", path, name);
    return tk_st_read_all(f, t, dst, e);
}

// The training forward's ReLU decisions (ssd_case_relus) as 0/1 bytes (N, H, W, C) "relu.II" for
// ssd.py --compare, which adopts them where its float64 input is within rounding of 0.
static size_t relu_masks(const ssd_model *m, uint8_t *bits, tk_ckpt_entry *ent) {
    const tk_blk_conv *cv[SSD_RELUS];
    const void *z[SSD_RELUS];
    ssd_case_relus(m, cv, z);
    size_t off = 0;
    for (int i = 0; i < SSD_RELUS; i++) {
        const int64_t len = tk_blk_conv_y_numel(cv[i]);
        if (bits) {
            for (int64_t j = 0; j < len; j++) bits[off + j] = ((const float *)z[i])[j] > 0;
            ent[i] = (tk_ckpt_entry){.t = {.dtype = TK_U8, .ndim = 4, .shape = {cv[i]->s.N, cv[i]->s.P, cv[i]->s.Q, cv[i]->s.K}},
                                     .src = bits + off};
            snprintf(ent[i].t.name, sizeof ent[i].t.name, "relu.%02d", i);
        }
        off += (size_t)len;
    }
    return off;
}

static int peer_step(const char *in, const char *out, const char *backbone, int step, tk_err *e) {
    tk_st_file *f;
    TRY(tk_st_open(&f, in, e));
    ssd_config cfg = small(meta_int(f, "width", 64), meta_int(f, "size", 300), meta_int(f, "classes", 81),
                           meta_int(f, "batch", 2));
    const char *stem = getenv("SSD_PEER_STEM"); // "s2d": the space-to-depth stem (its cpu references)
    if (stem && strcmp(stem, "s2d") == 0) cfg.stem = TK_BLK_STEM_S2D;
    ssd_case k;
    int rc = ssd_case_make(&k, tk_test_cpu(), &cfg, 0, e);
    ssd_model *m = k.m;
    if (rc) {
        tk_st_close(f);
        ssd_case_free(&k);
        return rc;
    }
    for (int i = 0; !rc && i < m->P->n; i++)
        rc = read_exact(f, in, m->P->p[i].name, m->P->p[i].w, tk_param_bytes(&m->P->p[i]), e);
    const size_t nimg = (size_t)m->b * m->S * m->S * 3, nl = (size_t)m->b * 4 * m->boxes,
                 nc = (size_t)m->b * cfg.classes * m->boxes;
    if (!rc) rc = read_exact(f, in, "batch.image", m->in_img, nimg * 4, e);
    if (!rc) rc = read_exact(f, in, "wloc", m->dloc, nl * 4, e);
    if (!rc) rc = read_exact(f, in, "wconf", m->dconf, nc * 4, e);
    tk_st_close(f);
    if (!rc && backbone) rc = ssd_import_torchvision(m, backbone, e);
    if (!rc) rc = ssd_weights_loaded(m, e);
    // the running statistics before the step (after: "after.NAME")
    const int np = m->P->n, nrun = np - m->P->ndense;
    float *before = rc ? NULL : malloc(((size_t)m->P->dense_n + 1) * 4);
    if (!rc && !before) rc = tk_err_set(e, TK_EIO, "out of host memory");
    size_t off = 0;
    for (int i = m->P->ndense; !rc && i < np; i++) {
        memcpy(before + off, m->P->p[i].w, tk_param_bytes(&m->P->p[i]));
        off += (size_t)tk_param_numel(&m->P->p[i]);
    }
    if (!rc && step) rc = ssd_forward(m, 1, e);
    if (!rc && step) rc = ssd_backward(m, e);
    uint8_t *relu = rc || !step ? NULL : malloc(relu_masks(m, NULL, NULL));
    if (!rc && step && !relu) rc = tk_err_set(e, TK_EIO, "out of host memory");
    tk_ckpt_entry relu_ent[SSD_RELUS];
    if (relu) relu_masks(m, relu, relu_ent);
    // then the eval forward of the same batch from the running statistics the step left
    const size_t nl0 = (size_t)m->b * 4 * m->boxes, nc0 = (size_t)m->b * cfg.classes * m->boxes;
    float *ev = rc || !step ? NULL : malloc((nl0 + nc0) * 4);
    if (!rc && step && !ev) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (ev) {
        float *l = malloc(nl0 * 4), *c = malloc(nc0 * 4); // (the training outputs, kept for the dump)
        if (!l || !c) rc = tk_err_set(e, TK_EIO, "out of host memory");
        if (!rc) memcpy(l, m->loc, nl0 * 4), memcpy(c, m->conf, nc0 * 4), rc = ssd_forward(m, 0, e);
        if (!rc) memcpy(ev, m->loc, nl0 * 4), memcpy(ev + nl0, m->conf, nc0 * 4);
        if (!rc) memcpy(m->loc, l, nl0 * 4), memcpy(m->conf, c, nc0 * 4);
        free(l), free(c);
    }
    tk_ckpt_entry *ent = rc ? NULL : calloc((size_t)(2 * np + nrun + 7 + SSD_RELUS), sizeof *ent);
    int n = 0;
    if (!rc && !ent) rc = tk_err_set(e, TK_EIO, "out of host memory");
    off = 0;
    for (int i = 0; !rc && i < np; i++) {
        const tk_param *p = &m->P->p[i];
        tk_st_tensor t = {.dtype = TK_F32, .ndim = p->ndim};
        memcpy(t.shape, p->shape, sizeof t.shape[0] * (size_t)p->ndim);
        snprintf(t.name, sizeof t.name, "%s", p->name);
        if (!step) {
            ent[n++] = (tk_ckpt_entry){.t = t, .src = p->w};
        } else if (i < m->P->ndense) {
            ent[n++] = (tk_ckpt_entry){.t = t, .src = p->w};
            snprintf(t.name, sizeof t.name, "grad.%.120s", p->name);
            ent[n++] = (tk_ckpt_entry){.t = t, .src = p->g};
        } else {
            ent[n++] = (tk_ckpt_entry){.t = t, .src = before + off};
            off += (size_t)tk_param_numel(p);
            snprintf(t.name, sizeof t.name, "after.%.120s", p->name);
            ent[n++] = (tk_ckpt_entry){.t = t, .src = p->w};
        }
    }
    if (!rc && step) {
        ent[n++] = (tk_ckpt_entry){.t = {.name = "batch.image", .dtype = TK_F32, .ndim = 4, .shape = {m->b, m->S, m->S, 3}},
                                   .src = m->in_img};
        ent[n++] = (tk_ckpt_entry){.t = {.name = "wloc", .dtype = TK_F32, .ndim = 3, .shape = {m->b, 4, m->boxes}},
                                   .src = m->dloc};
        ent[n++] = (tk_ckpt_entry){.t = {.name = "wconf", .dtype = TK_F32, .ndim = 3, .shape = {m->b, cfg.classes, m->boxes}},
                                   .src = m->dconf};
        ent[n++] = (tk_ckpt_entry){.t = {.name = "loc", .dtype = TK_F32, .ndim = 3, .shape = {m->b, 4, m->boxes}},
                                   .src = m->loc};
        ent[n++] = (tk_ckpt_entry){.t = {.name = "conf", .dtype = TK_F32, .ndim = 3, .shape = {m->b, cfg.classes, m->boxes}},
                                   .src = m->conf};
        ent[n++] = (tk_ckpt_entry){.t = {.name = "eval.loc", .dtype = TK_F32, .ndim = 3, .shape = {m->b, 4, m->boxes}},
                                   .src = ev};
        ent[n++] = (tk_ckpt_entry){.t = {.name = "eval.conf", .dtype = TK_F32, .ndim = 3, .shape = {m->b, cfg.classes, m->boxes}},
                                   .src = ev + nl0};
        for (int i = 0; i < SSD_RELUS; i++) ent[n++] = relu_ent[i];
    }
    if (!rc) {
        json_t *meta = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "model", "ssd300", "layout", "krsc", "width", "",
                                 "size", "", "classes", "", "params", "");
        json_object_set_new(meta, "width", json_sprintf("%d", cfg.width));
        json_object_set_new(meta, "size", json_sprintf("%d", cfg.size));
        json_object_set_new(meta, "classes", json_sprintf("%d", cfg.classes));
        json_object_set_new(meta, "batch", json_sprintf("%d", cfg.b));
        json_object_set_new(meta, "params", json_sprintf("%lld", (long long)ssd_param_count(m)));
        rc = tk_ckpt_write(m->c, out, ent, n, meta, e);
        json_decref(meta);
    }
    free(ent), free(before), free(ev), free(relu);
    ssd_case_free(&k);
    return rc;
}

TK_TEST(peer_dump) {
    const char *in = getenv("SSD_PEER_INIT"), *out = getenv("SSD_PEER_OUT");
    if (!in || !out) {
        printf("# (SSD_PEER_INIT and SSD_PEER_OUT unset: tests/cli/ssd-model-oracle.bats runs this)\n");
        return;
    }
    tk_err e = {0};
    const char *st = getenv("SSD_PEER_STEP");
    const int rc = peer_step(in, out, getenv("SSD_PEER_BACKBONE"), !st || atoi(st), &e);
    if (rc) printf("# %s%s%s\n", e.what, e.where[0] ? ": " : "", e.where);
    CHECK_EQ_INT(rc, 0);
}
