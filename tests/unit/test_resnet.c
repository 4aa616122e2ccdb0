// ResNet's model, configuration and data on the cpu backend: tensor names and counts against
// torchvision's resnet50, the configuration's errors, the decoded-image reader (order, shares,
// augmentation), evaluation, and the MLPerf tensor names.
//
// With TK_RESNET_SYNTH=DIR:TRAIN:EVAL:SIZE:CLASSES:SEED in the environment it only writes a
// synthetic data set (resnet_synth.h): DIR/train.tks (TRAIN images) and DIR/eval.tks (EVAL
// more), SIZE x SIZE, for the CLI tests.
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

#include "grads_case.h"
#include "resnet_case.h"
#include "resnet_synth.h"
#include "tk_test.h"
#include "tk_test_cpu.h"
#include "engine/registry.h"
#include "workloads/resnet/resnet.h"

__attribute__((constructor(101))) static void synth_mode(void) {
    const char *s = getenv("TK_RESNET_SYNTH");
    if (!s) return;
    char dir[4096];
    long long ntr, nev, size, classes, seed;
    if (sscanf(s, "%4095[^:]:%lld:%lld:%lld:%lld:%lld", dir, &ntr, &nev, &size, &classes, &seed) != 6 || ntr < 1 ||
        nev < 1 || size < 1 || classes < 2) {
        fprintf(stderr, "test_resnet: TK_RESNET_SYNTH must be DIR:TRAIN:EVAL:SIZE:CLASSES:SEED\n");
        exit(2);
    }
    char path[4200];
    tk_err e = {0};
    mkdir(dir, 0777);
    snprintf(path, sizeof path, "%s/train.tks", dir);
    int rc = rn_synth_write(path, 0, ntr, (int)size, (int)size, (int)classes, (uint64_t)seed, &e);
    snprintf(path, sizeof path, "%s/eval.tks", dir);
    if (!rc) rc = rn_synth_write(path, ntr, nev, (int)size, (int)size, (int)classes, (uint64_t)seed, &e);
    if (rc) {
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        fprintf(stderr, "test_resnet: error: %s\n", buf);
    }
    exit(rc ? 4 : 0);
}

static const char *tpath(const char *name) { return tk_test_path("test_resnet", name); }

static char *errstr(const tk_err *e) {
    static char buf[1024];
    tk_err_format(e, buf, sizeof buf);
    return buf;
}

// A configuration from JSON text, as the engine hands it (global batch, seed).
static int parse(const char *text, int64_t batch, rn_config *cfg, tk_err *e) {
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!root) return tk_err_set(e, TK_EDATA, "bad test JSON: %s", je.text);
    tk_run_cfg run = {.batch = batch, .seed = 3};
    int rc = rn_config_parse(root, "cfg.json", &run, cfg, e);
    json_decref(root);
    return rc;
}

// ---- the model's tensors ----

// ResNet-50: torchvision's tensor names and shapes (ours with C last) and its parameter count,
// 25,557,032; the running statistics after the trained tensors; MLPerf's tensor names.
TK_TEST(resnet50_tensors) {
    tk_err e = {0};
    tk_instance *I = rn_make("{\"model\": {\"image_size\": 32}}", 1, 3, tk_test_cpu(), &e);
    CHECK(I != NULL);
    if (!I) {
        printf("# %s\n", errstr(&e));
        return;
    }
    rn_model *m = I->model;
    const tk_params *P = m->P;
    CHECK(P == &I->P); // the engine's buffers, and its activation arena
    CHECK((char *)m->in_img >= I->acts.base && (char *)m->top1 < I->acts.base + I->acts.used);
    int64_t dense = 0;
    for (int i = 0; i < P->ndense; i++) dense += tk_param_numel(&P->p[i]);
    CHECK_EQ_INT(P->ndense, 161);
    CHECK_EQ_INT(dense, 25557032);
    CHECK_EQ_INT(P->n - P->ndense, 106);
    struct { const char *name; int nd; int64_t s[4]; } want[] = {
        {"conv1.weight", 4, {64, 7, 7, 3}}, {"bn1.running_var", 1, {64}},
        {"layer1.0.downsample.0.weight", 4, {256, 1, 1, 64}}, {"layer2.0.conv2.weight", 4, {128, 3, 3, 128}},
        {"layer4.2.bn3.bias", 1, {2048}}, {"fc.weight", 2, {1000, 2048}}, {"fc.bias", 1, {1000}}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        int k = tk_params_find(P, want[i].name);
        CHECK(k >= 0);
        if (k < 0) continue;
        CHECK_EQ_INT(P->p[k].ndim, want[i].nd);
        for (int d = 0; d < want[i].nd; d++) CHECK_EQ_INT(P->p[k].shape[d], want[i].s[d]);
    }
    CHECK(P->p[tk_params_find(P, "bn1.weight")].flags & TK_PARAM_NO_DECAY);
    CHECK(P->p[tk_params_find(P, "fc.bias")].flags & TK_PARAM_NO_ADAPT);
    CHECK(!(P->p[tk_params_find(P, "fc.weight")].flags & TK_PARAM_NO_DECAY));
    CHECK_EQ_INT(P->p[tk_params_find(P, "bn1.running_mean")].flags, 0);
    // the MLLOG's names are the 161 of the rules' list (share/compliance, from closed_resnet.yaml)
    json_error_t je;
    json_t *rules = json_load_file("share/compliance/training-1.1.0/closed_resnet.json", 0, &je);
    json_t *list = json_object_get(json_object_get(rules, "const"), "tensors");
    CHECK(json_is_array(list) && json_array_size(list) == 161);
    int found = 0;
    for (int i = 0; i < P->ndense; i++) {
        char buf[96];
        const char *n = rn_mlperf_name(m, i, buf, sizeof buf);
        for (size_t j = 0; n && j < json_array_size(list); j++)
            if (strcmp(json_string_value(json_array_get(list, j)), n) == 0) found++;
    }
    CHECK_EQ_INT(found, 161);
    json_decref(rules);
    rn_free(I);
}

// ---- configuration ----

TK_TEST(config_errors) {
    tk_err e = {0};
    rn_config cfg;
    struct { const char *json, *msg; } bad[] = {
        {"{\"model\": {\"widht\": 8}}", "cfg.json: $.model.widht: unknown key \"widht\""},
        {"{\"model\": {\"layers\": [3, 4, 0]}}", "cfg.json: $.model.layers: expected an array of 1 to 4 numbers in [1, 32]"},
        {"{\"model\": {\"precision\": \"fp16\"}}", "cfg.json: $.model.precision: expected \"fp32\" or \"bf16\""},
        {"{\"model\": {\"image_size\": 16}}", "cfg.json: $.model.image_size: too small for the stem and the stages' strides"},
        {"{\"data\": {\"eval_resize\": 200}}", "cfg.json: $.data.eval_resize: expected at least model.image_size"},
        {"{\"data\": {\"crop_scale\": [0.5, 0.1]}}", "cfg.json: $.data.crop_scale: expected [min, max] ranges with min <= max"},
        {"{\"model\": {\"init\": \"xavier\"}}", "cfg.json: $.model.init: expected \"torchvision\" or \"mlperf\""},
        {"{\"model\": {\"stem\": \"s2d\", \"image_size\": 33}}", "cfg.json: $.model.stem: \"s2d\" needs an even model.image_size"},
        {"{\"model\": {\"stem\": \"fast\"}}", "cfg.json: $.model.stem: expected \"auto\", \"s2d\" or \"direct\""},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        memset(&e, 0, sizeof e);
        CHECK_EQ_INT(parse(bad[i].json, 8, &cfg, &e), TK_EDATA);
        char buf[1024];
        tk_err_format(&e, buf, sizeof buf);
        CHECK(strstr(buf, bad[i].msg) != NULL);
        if (!strstr(buf, bad[i].msg)) printf("#   got: %s\n", buf);
    }
    // bf16 is the cuda backend's: the cpu backend (the fp32 reference) refuses it at create
    memset(&e, 0, sizeof e);
    tk_instance *I = rn_make("{\"model\": {\"layers\": [1], \"width\": 4, \"image_size\": 8, \"precision\": \"bf16\"}}",
                             2, 3, tk_test_cpu(), &e);
    CHECK(I == NULL);
    CHECK_EQ_INT(e.code, TK_EUSAGE);
    CHECK(strstr(errstr(&e), "precision bf16 needs the cuda backend") != NULL);
    rn_free(I);
}

// ---- the stem's two forms ----

// One training step of a small net on the cpu with the stem as the 7x7 convolution and as the
// space-to-depth 4x4 one (kernels/stem_s2d.h): the same loss and gradients (fp32, the two sum the
// stem's 147 products in different orders: 1e-5), the master weight (K, 7, 7, 3) either way.
TK_TEST(stem_s2d_same_step_as_direct) {
    tk_err e = {0};
    tk_instance *I[2] = {NULL, NULL};
    rn_model *m[2] = {NULL, NULL};
    const char *forms[2] = {"direct", "s2d"};
    double loss[2];
    for (int f = 0; f < 2; f++) {
        char text[256];
        snprintf(text, sizeof text, "{\"model\": {\"layers\": [1, 1], \"width\": 4, \"classes\": 5, \"image_size\": 16, "
                 "\"stem\": \"%s\"}}", forms[f]);
        I[f] = rn_make(text, 4, 3, tk_test_cpu(), &e);
        CHECK(I[f] != NULL);
        if (!I[f]) {
            printf("# %s\n", errstr(&e));
            rn_free(I[0]);
            return;
        }
        m[f] = I[f]->model;
        CHECK_EQ_INT(m[f]->stem.s2d, f);
        CHECK_EQ_INT(tk_instance_init_weights(I[f], 9, &e), 0);
        const size_t n = (size_t)m[f]->b * 16 * 16 * 3;
        for (size_t i = 0; i < n; i++) m[f]->in_img[i] = (uint8_t)(tk_philox_draw(41, 1, i).v[0] >> 24);
        for (int i = 0; i < m[f]->b; i++) m[f]->in_label[i] = i % 5;
        m[f]->loss_acc[0] = m[f]->loss_acc[1] = 0;
        CHECK_EQ_INT(rn_train_step(m[f], &e), 0);
        loss[f] = m[f]->loss_acc[0];
        const tk_param *p = &m[f]->P->p[tk_params_find(m[f]->P, "conv1.weight")];
        CHECK(p->ndim == 4 && p->shape[1] == 7 && p->shape[2] == 7 && p->shape[3] == 3);
    }
    CHECK(fabs(loss[1] - loss[0]) <= 1e-5 * fabs(loss[0]));
    double worst = 0;
    const char *wn = "";
    for (int i = 0; i < m[0]->P->ndense; i++) {
        const tk_param *a = &m[0]->P->p[i], *b = &m[1]->P->p[i];
        double num = 0, den = 0;
        for (int64_t j = 0; j < tk_param_numel(a); j++)
            num += ((double)a->g[j] - b->g[j]) * ((double)a->g[j] - b->g[j]), den += (double)a->g[j] * a->g[j];
        const double r = den > 0 ? sqrt(num / den) : sqrt(num);
        if (r >= worst) worst = r, wn = a->name;
    }
    printf("# stem direct vs s2d: loss %.9g vs %.9g, worst gradient %s %.1e\n", loss[0], loss[1], wn, worst);
    CHECK(worst <= 1e-5);
    rn_free(I[0]), rn_free(I[1]);
}

// ---- initialization ----

// A small model (16x16 images, 5 classes, global batch 4, train.seed 3) of these layers, its
// weights from seed 9 and a batch from key in its inputs; NULL (the error printed) if it fails.
static tk_instance *small_model(const char *layers, uint64_t key) {
    tk_err e = {0};
    char text[160];
    snprintf(text, sizeof text, "{\"model\": {\"layers\": %s, \"width\": 4, \"classes\": 5, \"image_size\": 16}}",
             layers);
    tk_instance *I = rn_make(text, 4, 3, tk_test_cpu(), &e);
    if (I && tk_instance_init_weights(I, 9, &e)) rn_free(I), I = NULL;
    if (!I) {
        printf("# %s\n", errstr(&e));
        return NULL;
    }
    rn_model *m = I->model;
    const size_t n = (size_t)m->b * 16 * 16 * 3;
    for (size_t i = 0; i < n; i++) m->in_img[i] = (uint8_t)(tk_philox_draw(key, 1, i).v[0] >> 24);
    for (int i = 0; i < m->b; i++) m->in_label[i] = i % 5;
    return I;
}

// The engine's initialization (tk_instance_init_weights) after a training step and an update: the
// seed's weights and running statistics again, and the engine's step and loss accumulator back at
// 0 (rn_init_weights draws the weights only: the engine zeroes these).
TK_TEST(init_weights_restarts_the_model) {
    tk_err e = {0};
    tk_instance *I = small_model("[1]", 43);
    CHECK(I != NULL);
    if (!I) return;
    rn_model *m = I->model;
    const size_t nb = I->P.wbytes;
    char *first = malloc(nb);
    memcpy(first, I->P.warena.base, nb); // the dense tensors and the running statistics
    CHECK_EQ_INT(rn_train_step(m, &e), 0); // the running statistics move, the loss adds up
    for (size_t i = 0; i < I->P.dense_n; i++) I->P.dense_w[i] -= 0.1f * I->P.dense_g[i];
    CHECK_EQ_INT(tk_instance_write_step(I, 7, &e), 0);
    CHECK(I->loss_acc[1] == 1 && memcmp(first, I->P.warena.base, nb) != 0);
    CHECK_EQ_INT(tk_instance_init_weights(I, 9, &e), 0);
    CHECK(memcmp(first, I->P.warena.base, nb) == 0);
    CHECK(*I->step == 0);
    CHECK(I->loss_acc[0] == 0 && I->loss_acc[1] == 0);
    free(first);
    rn_free(I);
}

// ---- the gradients' all-reduce overlapped with the backward ----

// On several ranks the backward reports each block's gradients final as it completes them
// (workload.h grads_ready): the FC layer, each block from the last, then the stem (offset 0),
// every report at a tensor's start and below the last, and nothing reported final written again.
TK_TEST(backward_reports_final_gradients) {
    tk_instance *I = small_model("[1, 2]", 47);
    CHECK(I != NULL);
    if (!I) return;
    rn_model *m = I->model;
    gr_rec r = {0};
    for (int s = 0; s < 2; s++) // (a second step reports anew)
        CHECK(gr_step_ok(&r, &I->P, &m->grads, rn_train_step, m, 0, m->nblk + 2));
    gr_release(&r);
    rn_free(I);
}

// ---- the reader ----

// A reader of n records of size x size images for batch B (ranks: world, this one rank).
static rn_reader *reader(rn_config *cfg, const char *path, int64_t B, int S, int flip, int rank, int world) {
    tk_err e = {0};
    char json[256];
    snprintf(json, sizeof json, "{\"model\": {\"layers\": [1], \"width\": 4, \"image_size\": %d, \"classes\": 10}, "
                                "\"data\": {\"flip\": %s}}", S, flip ? "true" : "false");
    if (parse(json, B, cfg, &e)) return NULL;
    char *paths[1] = {(char *)path};
    void *r = NULL;
    if (rn_reader_open(cfg, rank, world, paths, 1, &r, &e)) printf("# %s\n", errstr(&e));
    return r;
}

// The record whose stored image img is (-1: none).
static int64_t which(const uint8_t *img, int64_t n, int H, int classes) {
    uint8_t *buf = malloc((size_t)H * H * 3);
    int64_t hit = -1;
    for (int64_t i = 0; i < n && hit < 0; i++) {
        rn_synth_image(1, i, (int)(i % classes), classes, H, H, buf);
        if (memcmp(buf, img, (size_t)H * H * 3) == 0) hit = i;
    }
    free(buf);
    return hit;
}

// Every record exactly once an epoch, in an order that changes with the epoch and not with the
// reader; two ranks' shares of a batch are the one-rank batch's halves.
TK_TEST(reader_order_and_shares) {
    tk_err e = {0};
    const char *path = tpath("order.tks");
    const int n = 48, S = 16, B = 8;
    CHECK_EQ_INT(rn_synth_write(path, 0, n, S, S, 10, 1, &e), 0);
    rn_config c1, c2, c3;
    rn_reader *r = reader(&c1, path, B, S, 0, 0, 1), *r0 = reader(&c2, path, B, S, 0, 0, 2),
              *r1 = reader(&c3, path, B, S, 0, 1, 2);
    CHECK(r && r0 && r1);
    if (!r || !r0 || !r1) return;
    CHECK_EQ_INT(rn_reader_count(r), n);
    const int64_t spe = n / B;
    const size_t per = (size_t)S * S * 3;
    uint8_t *img = malloc(B * per), *half = malloc(B * per);
    int32_t lab[8], lab2[8];
    int seen[48] = {0}, first_order[48], same = 1;
    for (int ep = 0; ep < 2; ep++)
        for (int64_t i = 0; i < spe; i++) {
            CHECK_EQ_INT(rn_reader_batch(r, ep * spe + i, spe, (void *[]){img, lab}, &e), 0);
            CHECK_EQ_INT(rn_reader_batch(r0, ep * spe + i, spe, (void *[]){half, lab2}, &e), 0);
            CHECK_EQ_INT(rn_reader_batch(r1, ep * spe + i, spe, (void *[]){half + B / 2 * per, lab2 + B / 2}, &e), 0);
            CHECK(memcmp(img, half, B * per) == 0 && memcmp(lab, lab2, sizeof lab) == 0);
            for (int k = 0; k < B; k++) {
                int64_t rec = which(img + k * per, n, S, 10);
                CHECK(rec >= 0 && lab[k] == rec % 10);
                if (rec < 0) continue;
                if (ep == 0) seen[rec]++, first_order[i * B + k] = (int)rec;
                else same &= first_order[i * B + k] == rec;
            }
        }
    for (int i = 0; i < n; i++) CHECK_EQ_INT(seen[i], 1);
    CHECK(!same); // epoch 1's order is another
    // the same step again, from another reader: the same batch
    rn_reader *again = reader(&c1, path, B, S, 0, 0, 1);
    CHECK_EQ_INT(rn_reader_batch(again, 3, spe, (void *[]){half, lab2}, &e), 0);
    CHECK_EQ_INT(rn_reader_batch(r, 3, spe, (void *[]){img, lab}, &e), 0);
    CHECK(memcmp(img, half, B * per) == 0);
    rn_reader_close(r), rn_reader_close(r0), rn_reader_close(r1), rn_reader_close(again);
    rn_config_release(&c1), rn_config_release(&c2), rn_config_release(&c3);
    free(img), free(half);
}

// Training samples are an image_size window of the stored image, mirrored or not; eval takes the
// center window.
TK_TEST(reader_crops_and_flips) {
    tk_err e = {0};
    const char *path = tpath("crops.tks");
    const int n = 16, H = 20, S = 16, B = 16;
    CHECK_EQ_INT(rn_synth_write(path, 0, n, H, H, 10, 1, &e), 0);
    rn_config cfg;
    rn_reader *r = reader(&cfg, path, B, S, 1, 0, 1);
    if (!r) return;
    uint8_t *img = malloc((size_t)B * S * S * 3), *src = malloc((size_t)H * H * 3);
    int32_t lab[16];
    int flips = 0, moved = 0;
    CHECK_EQ_INT(rn_reader_batch(r, 0, 1, (void *[]){img, lab}, &e), 0);
    for (int k = 0; k < B; k++) {
        const uint8_t *o = img + (size_t)k * S * S * 3;
        int found = 0;
        for (int64_t rec = 0; rec < n && !found; rec++) {
            if (rec % 10 != lab[k]) continue;
            rn_synth_image(1, rec, lab[k], 10, H, H, src);
            for (int oy = 0; oy <= H - S && !found; oy++)
                for (int ox = 0; ox <= H - S && !found; ox++)
                    for (int f = 0; f < 2 && !found; f++) {
                        int ok = 1;
                        for (int y = 0; y < S && ok; y++)
                            for (int x = 0; x < S && ok; x++)
                                ok = memcmp(o + ((size_t)y * S + x) * 3,
                                            src + ((size_t)(oy + y) * H + ox + (f ? S - 1 - x : x)) * 3, 3) == 0;
                        if (ok) found = 1, flips += f, moved += ox != 2 || oy != 2;
                    }
        }
        CHECK(found);
    }
    printf("# %d of %d mirrored, %d off center\n", flips, B, moved);
    CHECK(flips > 0 && flips < B && moved > 0);
    // eval: the center windows, never mirrored
    char *paths[1] = {(char *)path};
    uint8_t *ev = NULL;
    int32_t *el = NULL;
    int64_t all, lo, hi;
    CHECK_EQ_INT(rn_decode_eval(&cfg, paths, 1, &all, 1, 2, &ev, &el, &lo, &hi, &e), 0);
    CHECK(all == n && lo == 8 && hi == 16);
    rn_synth_image(1, 9, 9, 10, H, H, src);
    int ok = 1;
    for (int y = 0; y < S; y++) ok &= memcmp(ev + (size_t)y * S * 3 + (size_t)S * S * 3, src + ((size_t)(2 + y) * H + 2) * 3, (size_t)S * 3) == 0;
    CHECK(ok && el[1] == 9);
    free(ev), free(el), free(img), free(src);
    rn_reader_close(r);
    rn_config_release(&cfg);
}

TK_TEST(reader_bad_data) {
    tk_err e = {0};
    rn_config cfg;
    // labels past the model's classes
    const char *path = tpath("labels.tks");
    CHECK_EQ_INT(rn_synth_write(path, 0, 12, 16, 16, 12, 1, &e), 0);
    CHECK(reader(&cfg, path, 4, 16, 0, 0, 1) == NULL);
    rn_config_release(&cfg);
    // images smaller than image_size
    const char *small = tpath("small.tks");
    CHECK_EQ_INT(rn_synth_write(small, 0, 4, 12, 12, 10, 1, &e), 0);
    char json[] = "{\"model\": {\"layers\": [1], \"width\": 4, \"image_size\": 16, \"classes\": 10}}";
    CHECK_EQ_INT(parse(json, 4, &cfg, &e), 0);
    char *p[1] = {(char *)small};
    void *r = NULL;
    CHECK_EQ_INT(rn_reader_open(&cfg, 0, 1, p, 1, &r, &e), TK_EDATA);
    char want[600];
    snprintf(want, sizeof want, "%s: images of 12x12, smaller than model.image_size 16", small);
    CHECK(strstr(errstr(&e), want) != NULL);
    rn_config_release(&cfg);
}

// ---- the MLLOG keys ----

// config.json's LARS keys as NVIDIA's v1.1 log has them (the oracle: its result_0.txt, when the
// shared logs are present), and model_bn_span = the per-rank batch.
TK_TEST(mllog_keys_of_config_json) {
    tk_err e = {0};
    json_error_t je;
    json_t *root = json_load_file("share/workloads/resnet/config.json", 0, &je);
    CHECK(root != NULL);
    if (!root) return;
    json_object_set_new(json_object_get(root, "model"), "image_size", json_integer(32));
    json_object_set_new(json_object_get(root, "model"), "precision", json_string("fp32"));
    json_object_set_new(json_object_get(root, "train"), "global_batch_size", json_integer(2));
    tk_instance I;
    int rc = tk_instance_config(&I, root, "config.json", NULL, 0, NULL, &e);
    json_decref(root);
    if (!rc) rc = tk_instance_create(&I, tk_test_cpu(), NULL, 0, &e);
    CHECK_EQ_INT(rc, 0);
    if (rc) {
        printf("# %s\n", errstr(&e));
        tk_instance_destroy(&I);
        return;
    }
    tk_run_cfg run = I.run;
    CHECK(run.batch == 2 && run.seed == 1);
    run.steps_per_epoch = 393; // (the engine's, as train-step sets it)
    CHECK_EQ_INT(tk_optimizer_config(I.effective, "config.json", run.steps_per_epoch, &run.opt, &e), 0);
    rn_model *m = I.model;
    CHECK(m->cfg.scale_min == 0.05 && m->cfg.init == RN_INIT_MLPERF && m->cfg.bn_momentum == 0.1);
    const char *log = tpath("keys.mllog");
    tk_mllog L = {.fd = -1};
    CHECK_EQ_INT(tk_mllog_open(&L, log, 0, &e), 0);
    const tk_workload *wl = tk_workload_find("resnet");
    CHECK_EQ_INT(tk_optimizer_mllog(&L, &run, wl->opt_mllog, &e), 0); // ResNet's names, the engine's values
    CHECK_EQ_INT(wl->mllog_hparams(m, &run, &L, &e), 0);
    tk_mllog_close(&L);
    // ours: key -> value text
    char ours[32][2][64];
    int no = 0;
    FILE *f = fopen(log, "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f) && no < 32) {
        json_t *j = json_loads(strchr(line, '{'), 0, NULL);
        snprintf(ours[no][0], 64, "%s", json_string_value(json_object_get(j, "key")));
        char *v = json_dumps(json_object_get(j, "value"), JSON_ENCODE_ANY);
        snprintf(ours[no++][1], 64, "%s", v);
        free(v);
        json_decref(j);
    }
    if (f) fclose(f);
    CHECK_EQ_INT(no, 10);
    for (int i = 0; i < no; i++)
        if (!strcmp(ours[i][0], "model_bn_span")) CHECK_STR(ours[i][1], "2");
    const char *sh = getenv("TK_SHARED") ? getenv("TK_SHARED") : "../shared";
    char oracle[1024];
    snprintf(oracle, sizeof oracle, "%s/mlperf-logs/training_results_v1.1/NVIDIA/results/dgxa100_ngc21.09_mxnet/resnet/result_0.txt", sh);
    f = fopen(oracle, "r");
    if (!f) {
        printf("# skip the comparison with NVIDIA's log: %s is absent\n", oracle);
    } else {
        int compared = 0;
        while (fgets(line, sizeof line, f)) {
            char *b = strstr(line, ":::MLLOG ");
            json_t *j = b ? json_loads(b + 9, 0, NULL) : NULL;
            const char *k = json_string_value(json_object_get(j, "key"));
            for (int i = 0; k && i < no; i++) {
                if (strcmp(ours[i][0], k) != 0 || !strcmp(k, "model_bn_span")) continue;
                // numbers compared as numbers (NVIDIA's 2 is our 2.0, its 0 our 0.0)
                json_t *a = json_loads(ours[i][1], JSON_DECODE_ANY, NULL), *w = json_object_get(j, "value");
                int eq = json_is_number(a) ? json_is_number(w) && json_number_value(a) == json_number_value(w)
                                           : json_equal(a, w);
                if (!eq) printf("#   %s: ours %s\n", k, ours[i][1]);
                CHECK(eq);
                compared++;
                json_decref(a);
            }
            json_decref(j);
        }
        fclose(f);
        printf("# %d keys equal to NVIDIA's v1.1 log\n", compared);
        CHECK_EQ_INT(compared, 9);
    }
    tk_instance_destroy(&I);
}

TK_TEST(zz_cleanup) { CHECK_EQ_INT(tk_test_rmdir(), 0); }
