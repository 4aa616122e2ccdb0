// The optimizer's MLLOG keys (lib/engine/optimizer.c tk_optimizer_mllog): from the parsed
// "optimizer" section, each value in the form the key asks for ('g': as the config wrote it), the
// optimizer's name put into "%s", keys kept to their optimizer, the epochs derived from the steps
// per epoch. The expected values are read off the JSON sections below by hand.
#include <string.h>
#include <unistd.h>

#include <stdlib.h>

#include "engine/optimizer.h"
#include "tk_test.h"
#include "workloads/rnnt/mllog.h"

// The lines tk_optimizer_mllog writes for the section text (spe steps per epoch, max_steps) as
// "key=value" lines joined by '\n', the values as JSON text (1.0 for a real, 1 for an integer).
static int run_keys(const char *text, int64_t spe, int64_t max_steps, const tk_opt_mllog_key *keys, char *out,
                    size_t n) {
    json_t *o = json_loads(text, 0, NULL);
    tk_run_cfg run = {.steps_per_epoch = spe, .max_steps = max_steps};
    tk_err e = {0};
    int rc = tk_opt_config_parse(o, "cfg.json", "optimizer", spe, &run.opt, &e);
    json_decref(o);
    if (rc) {
        printf("# %s: %s\n", e.where, e.what);
        return rc;
    }
    char path[] = "/tmp/tk_optml_XXXXXX";
    close(mkstemp(path));
    unlink(path);
    tk_mllog L;
    if ((rc = tk_mllog_open(&L, path, 0, &e))) return rc;
    rc = tk_optimizer_mllog(&L, &run, keys, &e);
    tk_mllog_close(&L);
    FILE *f = fopen(path, "r");
    char line[1024];
    out[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line + strlen(":::MLLOG "), 0, NULL);
        char *v = json_dumps(json_object_get(j, "value"), JSON_ENCODE_ANY | JSON_REAL_PRECISION(17));
        snprintf(out + strlen(out), n - strlen(out), "%s%s=%s", out[0] ? "\n" : "",
                 json_string_value(json_object_get(j, "key")), v);
        free(v);
        json_decref(j);
    }
    if (f) fclose(f);
    unlink(path);
    return rc;
}

static const tk_opt_mllog_key resnet_like[] = {
    {"opt_name", TK_OPTV_NAME, 0, NULL},
    {"%s_opt_base_learning_rate", TK_OPTV_BASE_LR, 'g', NULL},
    {"%s_opt_end_learning_rate", TK_OPTV_END_LR, 'g', NULL},
    {"%s_opt_learning_rate_decay_steps", TK_OPTV_DECAY_LENGTH, 'g', NULL},
    {"%s_opt_momentum", TK_OPTV_MOMENTUM, 'g', NULL},
    {"lars_epsilon", TK_OPTV_EPS, 'g', "lars"},
    {"lars_opt_learning_rate_warmup_epochs", TK_OPTV_WARMUP_EPOCHS, 'g', "lars"},
    {"opt_learning_rate_warmup_epochs", TK_OPTV_WARMUP_EPOCHS, 'g', "!lars"},
    {NULL, 0, 0, NULL}};

TK_TEST(lars_in_epochs_keeps_the_configs_forms) {
    char got[2048];
    CHECK_EQ_INT(run_keys("{\"name\": \"lars\", \"base_lr\": 10.5, \"eps\": 0, \"lr_schedule\": \"lars_poly\", "
                          "\"warmup_epochs\": 2, \"total_epochs\": 37, \"end_lr\": 0.0001}",
                          100, 0, resnet_like, got, sizeof got),
                 0);
    // momentum absent: LARS's default 0.9 as a real; eps written 0: the integer 0
    CHECK_STR(got, "opt_name=\"lars\"\nlars_opt_base_learning_rate=10.5\nlars_opt_end_learning_rate=0.0001\n"
                   "lars_opt_learning_rate_decay_steps=37\nlars_opt_momentum=0.90000000000000002\n"
                   "lars_epsilon=0\nlars_opt_learning_rate_warmup_epochs=2");
}

TK_TEST(sgd_in_steps_derives_the_epochs) {
    char got[2048];
    // 10 warm-up steps of 4 a epoch: 2.5 epochs; poly: the floor is min_lr, the length decay_steps
    CHECK_EQ_INT(run_keys("{\"name\": \"sgd\", \"base_lr\": 2, \"momentum\": 0.9, \"warmup_steps\": 10, "
                          "\"decay_start_step\": 10, \"decay_steps\": 118, \"min_lr\": 0.5}",
                          4, 0, resnet_like, got, sizeof got),
                 0);
    CHECK_STR(got, "opt_name=\"sgd\"\nsgd_opt_base_learning_rate=2\nsgd_opt_end_learning_rate=0.5\n"
                   "sgd_opt_learning_rate_decay_steps=118\nsgd_opt_momentum=0.90000000000000002\n"
                   "opt_learning_rate_warmup_epochs=2.5");
}

TK_TEST(fixed_forms_defaults_and_total_steps) {
    static const tk_opt_mllog_key keys[] = {
        {"base", TK_OPTV_BASE_LR, 'r', NULL},         {"steps", TK_OPTV_TOTAL_STEPS, 'i', NULL},
        {"warm", TK_OPTV_WARMUP_STEPS, 'i', NULL},    {"start", TK_OPTV_START_WARMUP, 'i', NULL},
        {"power", TK_OPTV_POLY_POWER, 'r', NULL},     {"eps", TK_OPTV_EPS, 'r', "lamb"},
        {"b1", TK_OPTV_BETA1, 'r', "lamb"},           {"b2", TK_OPTV_BETA2, 'r', "lamb"},
        {"wd", TK_OPTV_WEIGHT_DECAY, 'r', "lamb"},    {"zero", TK_OPTV_ZERO, 'r', NULL},
        {"notlamb", TK_OPTV_ZERO, 'i', "!lamb"},      {"decay", TK_OPTV_DECAY_LENGTH, 'g', NULL},
        {NULL, 0, 0, NULL}};
    char got[2048];
    // LAMB's defaults (eps 1e-6, betas 0.9 / 0.999, decay 0.01); the integer base_lr as a real
    CHECK_EQ_INT(run_keys("{\"name\": \"lamb\", \"base_lr\": 3, \"lr_schedule\": \"warmup_poly\", "
                          "\"warmup_steps\": 20, \"start_warmup_step\": -5, \"total_steps\": 1024}",
                          0, 99, keys, got, sizeof got),
                 0);
    CHECK_STR(got, "base=3.0\nsteps=1024\nwarm=20\nstart=-5\npower=1.0\neps=9.9999999999999995e-7\n"
                   "b1=0.90000000000000002\nb2=0.999\nwd=0.01\nzero=0.0\ndecay=0.0");
    // poly has no total_steps: train.max_steps (99)
    CHECK_EQ_INT(run_keys("{\"name\": \"sgd\", \"base_lr\": 1, \"decay_steps\": 7}", 0, 99, keys, got, sizeof got), 0);
    CHECK_STR(got, "base=1.0\nsteps=99\nwarm=0\nstart=0\npower=2.0\nzero=0.0\nnotlamb=0\ndecay=7");
}

TK_TEST(before_the_optimizer_is_parsed) {
    tk_run_cfg run = {0};
    tk_mllog L = {0};
    tk_err e = {0};
    CHECK_EQ_INT(tk_optimizer_mllog(&L, &run, resnet_like, &e), TK_EINTERNAL);
}


// The 3D U-Net's keys (closed_unet3d): the warm-up's initial rate, the step decay's factor and
// its boundaries in epochs (integers where whole), and the values for a schedule without them.
TK_TEST(unet3d_initial_rate_decay_factor_and_boundary_epochs) {
    static const tk_opt_mllog_key keys[] = {{"init", TK_OPTV_INIT_LR, 'g', NULL},
                                            {"factor", TK_OPTV_GAMMA, 'g', NULL},
                                            {"bounds", TK_OPTV_MILESTONE_EPOCHS, 0, NULL},
                                            {"warm", TK_OPTV_WARMUP_EPOCHS, 'g', NULL},
                                            {NULL, 0, 0, NULL}};
    char got[2048];
    // milestones 30 and 45 of 10 steps an epoch: epochs 3 and 4.5
    CHECK_EQ_INT(run_keys("{\"name\": \"sgd\", \"base_lr\": 2, \"momentum\": 0.9, \"nesterov\": true, "
                          "\"lr_schedule\": \"step\", \"warmup_epochs\": 2, \"warmup_init_lr\": 0.0001, "
                          "\"warmup_per_epoch\": true, \"milestones\": [30, 45], \"gamma\": 0.5}",
                          10, 0, keys, got, sizeof got),
                 0);
    CHECK_STR(got, "init=0.0001\nfactor=0.5\nbounds=[3, 4.5]\nwarm=2");
    // no decay: [] and gamma 1 written as an integer
    CHECK_EQ_INT(run_keys("{\"name\": \"sgd\", \"base_lr\": 2, \"lr_schedule\": \"step\", \"milestone_epochs\": [], "
                          "\"gamma\": 1}", 10, 0, keys, got, sizeof got),
                 0);
    CHECK_STR(got, "init=0.0\nfactor=1\nbounds=[]\nwarm=0.0");
    // another schedule: no decay boundaries, factor 1.0
    CHECK_EQ_INT(run_keys("{\"name\": \"sgd\", \"base_lr\": 2}", 10, 0, keys, got, sizeof got), 0);
    CHECK_STR(got, "init=0.0\nfactor=1.0\nbounds=[]\nwarm=0.0");
}

// MLPerf RNN-T's 12 optimizer keys (lib/workloads/rnnt/mllog.c) from share/workloads/rnnt/
// config.json's section: the values NVIDIA's v1.1 log on one DGX A100 gives
// (dgxa100_ngc21.09_pytorch/rnnt/result_0.txt), in its forms (6, 33 and 1 integers).
TK_TEST(rnnt_keys_are_nvidias_v11_values) {
    json_t *root = json_load_file("share/workloads/rnnt/config.json", 0, NULL);
    CHECK(root != NULL);
    if (!root) return;
    char *text = json_dumps(json_object_get(root, "optimizer"), 0), got[2048];
    json_decref(root);
    CHECK_EQ_INT(run_keys(text, 136, 0, rnnt_opt_mllog, got, sizeof got), 0);
    free(text);
    CHECK_STR(got, "opt_name=\"lamb\"\nopt_base_learning_rate=0.0070000000000000001\nopt_lamb_epsilon=1.0000000000000001e-9\n"
                   "opt_lamb_learning_rate_decay_poly_power=0.93899999999999995\n"
                   "opt_lamb_learning_rate_hold_epochs=33\nopt_learning_rate_warmup_epochs=6\n"
                   "opt_weight_decay=0.001\nopt_lamb_beta_1=0.90000000000000002\n"
                   "opt_lamb_beta_2=0.999\nopt_gradient_clip_norm=1\n"
                   "opt_lamb_learning_rate_min=1.0000000000000001e-5\nmodel_eval_ema_factor=0.995");
}
