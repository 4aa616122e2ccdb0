// The 3D U-Net's configuration (lib/workloads/unet3d/config.c) as the engine reads it
// (tk_instance_config): the shipped configs' values, the reference's defaults for an empty model
// and eval section, this rank's batch from the world (u3_config_ranks, the engine's check), and
// the config.json optimizer's schedule: NVIDIA's v1.1 rate after the reference's per-epoch warm-up
// from 1e-4 (the values worked out by hand).
#include <string.h>

#include "engine/instance.h"
#include "engine/optimizer.h"
#include "tk_test.h"
#include "workloads/unet3d/unet3d.h"

// The workload's parse of root (a reference taken) with the overrides, as train-step's.
static int parse(json_t *root, const char *path, char *const *sets, int nsets, tk_instance *I, tk_err *e) {
    memset(e, 0, sizeof *e);
    return tk_instance_config(I, root, path, sets, nsets, NULL, e);
}

TK_TEST(shipped_configs) {
    tk_err e;
    tk_instance I;
    json_t *root = json_load_file("share/workloads/unet3d/config.json", 0, NULL);
    CHECK_EQ_INT(parse(root, "config.json", NULL, 0, &I, &e), 0);
    json_decref(root);
    const u3_config *c = I.cfg;
    CHECK_STR(I.wl->name, "unet3d");
    CHECK(c->width == 32 && c->bf16 == 1 && c->batch == 56 && c->b == 56 && c->seed == 1);
    CHECK(c->data.crop[0] == 128 && c->data.crop[1] == 128 && c->data.crop[2] == 128 && c->data.oversampling == 0.4);
    CHECK(c->eval_overlap == 0.5 && c->eval_batch == 0 && c->dist == NULL);
    CHECK(I.run.eval_offset_samples == 168000 && I.run.eval_every_samples == 3360 && I.run.max_epochs == 10000);
    CHECK(I.run.target == 0.908);
    // 168 cases of 56: 3 updates an epoch; epoch e of the warm-up (1-based) at 1e-4 + (2 - 1e-4) e / 1000
    tk_opt_config o;
    CHECK_EQ_INT(tk_optimizer_config(I.effective, "config.json", 3, &o, &e), 0);
    CHECK(o.hp.kind == TK_OPT_MOMENTUM && o.hp.nesterov && o.hp.momentum == 0.9 && o.hp.weight_decay == 0);
    // (the reference's runtime/training.py: init + (lr - init) * (epoch / warmup_epochs), in doubles)
    CHECK(tk_lr_at(&o.lr, 0) == 1e-4 + (2 - 1e-4) * (1 / 1000.0) && tk_lr_at(&o.lr, 2) == tk_lr_at(&o.lr, 0));
    CHECK(tk_lr_at(&o.lr, 3) == 1e-4 + (2 - 1e-4) * (2 / 1000.0));
    CHECK(tk_lr_at(&o.lr, 1500) == 1e-4 + (2 - 1e-4) * (501 / 1000.0));
    CHECK(tk_lr_at(&o.lr, 2997) == 1e-4 + (2 - 1e-4) * (1000 / 1000.0) && tk_lr_at(&o.lr, 3000) == 2);
    CHECK(tk_lr_at(&o.lr, 30000000) == 2); // no decay
    tk_instance_destroy(&I);

    root = json_load_file("share/workloads/unet3d/tiny.json", 0, NULL);
    CHECK_EQ_INT(parse(root, "tiny.json", NULL, 0, &I, &e), 0);
    json_decref(root);
    c = I.cfg;
    CHECK(c->width == 4 && c->bf16 == 0 && c->batch == 2 && c->data.crop[0] == 64 && c->data.crop[2] == 64);
    tk_instance_destroy(&I);
}

TK_TEST(defaults_are_the_reference_and_ranks_split_the_batch) {
    tk_err e;
    tk_instance I;
    json_t *root = json_loads("{\"workload\": \"unet3d\", \"train\": {\"global_batch_size\": 6, \"max_epochs\": 1, "
                              "\"seed\": 7, \"evals_per_epoch\": 1}, \"optimizer\": {\"name\": \"sgd\", \"base_lr\": 1}, "
                              "\"target\": {\"metric\": \"mean_dice\", \"mean_dice\": 0.9}}",
                              0, NULL);
    char *sets[] = {"eval.batch=2"};
    CHECK_EQ_INT(parse(root, "min.json", sets, 1, &I, &e), 0);
    json_decref(root);
    u3_config *c = I.cfg;
    CHECK(c->width == 32 && c->bf16 == 0 && c->data.crop[0] == 128 && c->eval_overlap == 0.5);
    CHECK(c->eval_batch == 2 && c->b == 6 && c->seed == 7);
    // three ranks: 2 samples each; four do not divide 6 (the engine's words, with the hint)
    tk_dist d = {.rank = 1, .world = 3};
    tk_params P = {0};
    tk_wl_env env = {.dist = &d, .params = &P};
    CHECK_EQ_INT(u3_config_ranks(c, &env, &e), 0);
    CHECK(c->b == 2 && c->dist == &d && c->params == &P);
    d.world = 4;
    CHECK_EQ_INT(u3_config_ranks(c, &env, &e), TK_EUSAGE);
    CHECK_STR(e.what, "unet3d: the global batch (6) must be a multiple of the world size (4)");
    CHECK_STR(e.hint, "set train.global_batch_size to a multiple of 4");
    tk_instance_destroy(&I);
}
