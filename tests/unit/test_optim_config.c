// The optimizer section parser (lib/engine/optim_config.c): today's DLRM sections give what the
// engine's reading of a whole DLRM config gives (tk_optimizer_config over the effective config
// that the instance parsed as DLRM's, as train-step reads it: the oracle), each optimizer's defaults, the MLPerf
// BERT and ResNet settings, epochs converted with the steps per epoch, and one exact error (what
// and where) for each kind of mistake.
#include <string.h>

#include "engine/instance.h"
#include "engine/optim_config.h"
#include "engine/optimizer.h"
#include "tk_test.h"

// Parses the JSON text as the optimizer object of "cfg.json".
static int parse(const char *text, int64_t spe, tk_opt_config *cfg, tk_err *e) {
    json_error_t je;
    json_t *o = json_loads(text, 0, &je);
    if (!o) {
        printf("# bad test JSON: %s\n", je.text);
        return -1;
    }
    memset(e, 0, sizeof *e);
    int rc = tk_opt_config_parse(o, "cfg.json", "optimizer", spe, cfg, e);
    json_decref(o);
    return rc;
}

TK_TEST(dlrm_sections_parse_as_the_engine_reads_them) {
    static const char *files[] = {"share/workloads/dlrm/config.json", "share/workloads/dlrm/tiny.json",
                                  "share/workloads/dlrm/synth-mlperf.json", "share/workloads/dlrm/synth-mlperf-full.json"};
    // Two of them take their table sizes from the data's schema: any will do here.
    const char *meta = "{\"cardinalities\": [5, 6, 7]}";
    for (int f = 0; f < 4; f++) {
        tk_err e = {0};
        json_t *root = json_load_file(files[f], 0, NULL);
        tk_instance I;
        tk_opt_config want;
        CHECK_EQ_INT(tk_instance_config(&I, root, files[f], NULL, 0, meta, &e), 0);
        CHECK_EQ_INT(tk_optimizer_config(I.effective, files[f], 0, &want, &e), 0);
        tk_instance_destroy(&I);
        tk_opt_config got;
        CHECK_EQ_INT(tk_opt_config_parse(json_object_get(root, "optimizer"), files[f], "optimizer", 0, &got, &e), 0);
        json_decref(root);
        CHECK(got.lr.kind == TK_LR_POLY);
        CHECK(got.lr.base_lr == want.lr.base_lr && got.lr.warmup_steps == want.lr.warmup_steps);
        CHECK(got.lr.decay_start == want.lr.decay_start && got.lr.decay_steps == want.lr.decay_steps);
        CHECK(got.lr.power == want.lr.power && got.lr.min_lr == want.lr.min_lr);
        // The fields the DLRM sections leave zero (both structs are zeroed first, padding included).
        CHECK(memcmp(&got.lr, &want.lr, sizeof got.lr) == 0);
        int64_t differ = 0;
        for (int64_t s = 0; s < 100000; s += 7) differ += tk_lr_at(&got.lr, s) != tk_lr_at(&want.lr, s);
        CHECK_EQ_INT(differ, 0);
        const tk_opt_hp *h = &got.hp; // plain SGD: every other field 0
        CHECK(h->kind == TK_OPT_SGD && h->momentum == 0 && h->dampening == 0 && h->nesterov == 0 && h->beta1 == 0);
        CHECK(h->beta2 == 0 && h->eps == 0 && h->weight_decay == 0 && h->bias_correction == 0);
        CHECK(h->max_grad_norm == 0 && h->trust_coef == 0 && h->skip_nonfinite == 0);
        CHECK_STR(got.name, "sgd");
        CHECK_STR(got.schedule, "poly");
    }
}

TK_TEST(defaults_of_each_optimizer) {
    tk_opt_config c;
    tk_err e;
    CHECK_EQ_INT(parse("{\"name\": \"lamb\", \"base_lr\": 0.001, \"lr_schedule\": \"warmup_poly\", \"total_steps\": 10}",
                       0, &c, &e), 0);
    CHECK(c.hp.kind == TK_OPT_LAMB && c.hp.beta1 == 0.9 && c.hp.beta2 == 0.999 && c.hp.eps == 1e-6);
    CHECK(c.hp.weight_decay == 0.01 && c.hp.max_grad_norm == 1 && c.hp.bias_correction == 1 && !c.hp.skip_nonfinite);
    CHECK(c.lr.power == 1 && c.lr.end_lr == 0 && c.lr.warmup_steps == 0 && c.lr.start_warmup == 0);
    CHECK_EQ_INT(parse("{\"name\": \"adam\", \"base_lr\": 0.001}", 0, &c, &e), 0);
    CHECK(c.hp.kind == TK_OPT_ADAM && c.hp.eps == 1e-8 && c.hp.weight_decay == 0 && c.hp.max_grad_norm == 0);
    CHECK(c.lr.kind == TK_LR_POLY && tk_lr_at(&c.lr, 12345) == 0.001); // poly with nothing: constant
    CHECK_EQ_INT(parse("{\"name\": \"adamw\", \"base_lr\": 0.001, \"bias_correction\": false}", 0, &c, &e), 0);
    CHECK(c.hp.kind == TK_OPT_ADAMW && c.hp.weight_decay == 0.01 && c.hp.bias_correction == 0);
    CHECK_EQ_INT(parse("{\"name\": \"lars\", \"base_lr\": 10, \"lr_schedule\": \"lars_poly\", \"total_steps\": 99}", 0,
                       &c, &e), 0);
    CHECK(c.hp.kind == TK_OPT_LARS && c.hp.momentum == 0.9 && c.hp.trust_coef == 0.001 && c.hp.eps == 0);
    CHECK(c.hp.weight_decay == 1e-4 && c.lr.end_lr == 1e-4 && c.lr.power == 2);
    CHECK_EQ_INT(parse("{\"name\": \"sgd\", \"base_lr\": 0.1, \"momentum\": 0.9, \"nesterov\": true}", 0, &c, &e), 0);
    CHECK(c.hp.kind == TK_OPT_MOMENTUM && c.hp.momentum == 0.9 && c.hp.nesterov == 1);
}

TK_TEST(mlperf_bert_and_resnet_settings) {
    tk_opt_config c;
    tk_err e;
    // NVIDIA's v1.1 BERT on 8 nodes (config_DGXA100_8x8x48x1.sh).
    CHECK_EQ_INT(parse("{\"name\": \"lamb\", \"base_lr\": 0.0015, \"beta1\": 0.83, \"beta2\": 0.925, "
                       "\"weight_decay\": 0.01, \"lr_schedule\": \"warmup_poly\", \"warmup_steps\": 100, "
                       "\"start_warmup_step\": -25, \"total_steps\": 1271, \"skip_nonfinite\": true}",
                       0, &c, &e), 0);
    CHECK(c.hp.beta1 == 0.83 && c.hp.beta2 == 0.925 && c.hp.skip_nonfinite == 1);
    CHECK(c.lr.kind == TK_LR_WARMUP_POLY && c.lr.warmup_steps == 100 && c.lr.start_warmup == -25);
    CHECK(c.lr.total_steps == 1271 && c.lr.base_lr == 0.0015);
    CHECK(c.warmup_epochs == -1 && c.total_epochs == -1);
    // ResNet-50 LARS in epochs: 2 warm-up epochs of 100 updates, 37 epochs.
    CHECK_EQ_INT(parse("{\"name\": \"lars\", \"base_lr\": 10.5, \"weight_decay\": 5e-5, \"lr_schedule\": "
                       "\"lars_poly\", \"warmup_epochs\": 2, \"total_epochs\": 37, \"end_lr\": 0.0001}",
                       100, &c, &e), 0);
    CHECK(c.lr.kind == TK_LR_LARS_POLY && c.lr.warmup_steps == 200 && c.lr.total_steps == 3700);
    CHECK(c.warmup_epochs == 2 && c.total_epochs == 37 && c.hp.weight_decay == 5e-5);
    // Step decay at epochs 30, 60, 80 (SGD ResNet), and cosine.
    CHECK_EQ_INT(parse("{\"name\": \"sgd\", \"base_lr\": 0.1, \"momentum\": 0.9, \"weight_decay\": 1e-4, "
                       "\"lr_schedule\": \"step\", \"warmup_steps\": 5, \"milestone_epochs\": [30, 60, 80], "
                       "\"gamma\": 0.1}", 10, &c, &e), 0);
    CHECK(c.lr.kind == TK_LR_STEP && c.lr.nmilestones == 3 && c.lr.milestones[0] == 300 && c.lr.milestones[2] == 800);
    CHECK_EQ_INT(parse("{\"name\": \"adamw\", \"base_lr\": 0.001, \"lr_schedule\": \"cosine\", \"warmup_steps\": 10, "
                       "\"total_steps\": 1000, \"end_lr\": 1e-5}", 0, &c, &e), 0);
    CHECK(c.lr.kind == TK_LR_COSINE && c.lr.total_steps == 1000 && c.lr.end_lr == 1e-5);
    // MLPerf 3D U-Net (NVIDIA's v1.1 run, its reference's warm-up): Nesterov SGD, 1000 warm-up
    // epochs from 1e-4, one rate per epoch of 3 updates, no decay.
    CHECK_EQ_INT(parse("{\"name\": \"sgd\", \"base_lr\": 2.0, \"momentum\": 0.9, \"nesterov\": true, "
                       "\"lr_schedule\": \"step\", \"warmup_epochs\": 1000, \"warmup_init_lr\": 0.0001, "
                       "\"warmup_per_epoch\": true, \"milestone_epochs\": [], \"gamma\": 1.0}", 3, &c, &e), 0);
    CHECK(c.lr.kind == TK_LR_STEP && c.lr.warmup_steps == 3000 && c.lr.warmup_period == 3);
    CHECK(c.lr.warmup_init_lr == 0.0001 && c.lr.nmilestones == 0 && c.warmup_epochs == 1000);
    CHECK(c.hp.kind == TK_OPT_MOMENTUM && c.hp.nesterov == 1);
    // without warmup_per_epoch: a rate per update
    CHECK_EQ_INT(parse("{\"name\": \"sgd\", \"base_lr\": 2.0, \"lr_schedule\": \"cosine\", \"warmup_steps\": 10, "
                       "\"warmup_init_lr\": 0.5, \"total_steps\": 20}", 0, &c, &e), 0);
    CHECK(c.lr.warmup_period == 0 && c.lr.warmup_init_lr == 0.5);
    // MLPerf RNN-T (NVIDIA's v1.1 run on one DGX A100): LAMB, 6 warm-up and 33 hold epochs, then
    // 0.939 per epoch down to 1e-5 (the default floor, the reference's min_lr)
    CHECK_EQ_INT(parse("{\"name\": \"lamb\", \"base_lr\": 0.007, \"eps\": 1e-9, \"weight_decay\": 1e-3, "
                       "\"lr_schedule\": \"warmup_hold_exp\", \"warmup_epochs\": 6, \"hold_epochs\": 33, "
                       "\"gamma\": 0.939}", 136, &c, &e), 0);
    CHECK(c.lr.kind == TK_LR_WARMUP_HOLD_EXP && c.lr.warmup_steps == 816 && c.lr.hold_steps == 4488);
    CHECK(c.lr.epoch_steps == 136 && c.lr.gamma == 0.939 && c.lr.min_lr == 1e-5 && c.warmup_epochs == 6);
    CHECK_STR(c.schedule, "warmup_hold_exp");
}

// share/workloads/rnnt's sections parse (136 updates an epoch: 278528 samples / 2048).
TK_TEST(rnnt_sections_parse) {
    static const char *files[] = {"share/workloads/rnnt/config.json", "share/workloads/rnnt/tiny.json"};
    for (int f = 0; f < 2; f++) {
        tk_err e = {0};
        tk_opt_config c;
        json_t *root = json_load_file(files[f], 0, NULL);
        CHECK(root != NULL);
        if (!root) continue;
        CHECK_EQ_INT(tk_opt_config_parse(json_object_get(root, "optimizer"), files[f], "optimizer", 136, &c, &e), 0);
        json_decref(root);
        CHECK(c.hp.kind == TK_OPT_LAMB && c.lr.kind == TK_LR_WARMUP_HOLD_EXP && c.hp.max_grad_norm == 1);
        CHECK(c.ema > 0 && c.lr.min_lr == 1e-5 && c.hp.eps == 1e-9);
    }
}

// Each mistake: the optimizer object, steps per epoch, and the exact what and where.
#define O "cfg.json: $.optimizer"
#define NAMES "\"sgd\", \"adam\", \"adamw\", \"lamb\", \"lars\""
static const struct {
    const char *text;
    int64_t spe;
    const char *what, *where;
} mistakes[] = {
    {"[1]", 0, "expected an object (the optimizer and its schedule)", O},
    {"{\"base_lr\": 1}", 0, "missing; expected one of " NAMES, O ".name"},
    {"{\"name\": \"rmsprop\", \"base_lr\": 1}", 0, "expected one of " NAMES, O ".name"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"lr_schedule\": \"linear\"}", 0,
     "expected one of \"poly\", \"warmup_poly\", \"lars_poly\", \"step\", \"cosine\", \"warmup_hold_exp\"",
     O ".lr_schedule"},
    {"{\"name\": \"adam\", \"base_lr\": 1, \"betaone\": 0.9}", 0, "unknown key \"betaone\"", O ".betaone"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"beta1\": 0.9}", 0, "\"beta1\" is not a key of optimizer \"sgd\"",
     O ".beta1"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"total_steps\": 9}", 0,
     "\"total_steps\" is not a key of lr_schedule \"poly\"", O ".total_steps"},
    {"{\"name\": \"sgd\"}", 0, "missing; expected a number in [0, 1e+06]", O ".base_lr"},
    {"{\"name\": \"adam\", \"base_lr\": 1, \"beta2\": 1.0}", 0, "expected a number in [0, 1)", O ".beta2"},
    {"{\"name\": \"adam\", \"base_lr\": \"1e-3\"}", 0, "expected a number in [0, 1e+06]", O ".base_lr"},
    {"{\"name\": \"adam\", \"base_lr\": 1, \"bias_correction\": 1}", 0, "expected true or false",
     O ".bias_correction"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"warmup_steps\": 2.5}", 0, "expected an integer in [0, 1099511627776]",
     O ".warmup_steps"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"momentum\": 0.9, \"dampening\": 0.1, \"nesterov\": true}", 0,
     "nesterov needs momentum > 0 and dampening 0", O ".nesterov"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"dampening\": 0.1}", 0, "dampening needs momentum > 0", O ".dampening"},
    {"{\"name\": \"lamb\", \"base_lr\": 1, \"lr_schedule\": \"warmup_poly\"}", 0,
     "missing; expected an integer in [1, 1099511627776]", O ".total_steps"},
    {"{\"name\": \"lamb\", \"base_lr\": 1, \"lr_schedule\": \"warmup_poly\", \"total_steps\": 9, "
     "\"start_warmup_step\": 3}", 0, "expected an integer in [-1099511627776, 0]", O ".start_warmup_step"},
    {"{\"name\": \"lars\", \"base_lr\": 1, \"lr_schedule\": \"lars_poly\", \"warmup_epochs\": 2, "
     "\"total_epochs\": 30}", 0, "epochs need the steps per epoch, which this workload does not give; use warmup_steps",
     O ".warmup_epochs"},
    {"{\"name\": \"lars\", \"base_lr\": 1, \"lr_schedule\": \"lars_poly\", \"warmup_steps\": 2, "
     "\"warmup_epochs\": 2, \"total_steps\": 30}", 10, "give warmup_steps or warmup_epochs, not both",
     O ".warmup_epochs"},
    {"{\"name\": \"lars\", \"base_lr\": 1, \"lr_schedule\": \"cosine\", \"warmup_epochs\": 3, \"total_epochs\": 3}",
     10, "must be more than the warm-up's 30 steps", O ".total_epochs"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"lr_schedule\": \"step\", \"milestones\": [5, 5]}", 0,
     "element 1: expected increasing integers in [0, 2^40 updates]", O ".milestones"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"lr_schedule\": \"step\"}", 0,
     "missing; expected an array of update indices", O ".milestones"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"lr_schedule\": \"step\", \"milestones\": [1], \"gamma\": 0}", 0,
     "expected a number in (0, 1]", O ".gamma"},
    {"{\"name\": \"lars\", \"base_lr\": 1, \"trust_coef\": 0}", 0, "expected a number in (0, 1e6)", O ".trust_coef"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"lr_schedule\": \"step\", \"milestones\": [], \"warmup_steps\": 3, "
     "\"warmup_per_epoch\": true}", 0, "needs the steps per epoch, which this workload does not give",
     O ".warmup_per_epoch"},
    {"{\"name\": \"sgd\", \"base_lr\": 1, \"warmup_init_lr\": -1}", 0, "expected a number in [0, 1e+06]",
     O ".warmup_init_lr"},
    {"{\"name\": \"lamb\", \"base_lr\": 1, \"lr_schedule\": \"warmup_poly\", \"total_steps\": 9, "
     "\"warmup_init_lr\": 0.1}", 0, "\"warmup_init_lr\" is not a key of lr_schedule \"warmup_poly\"",
     O ".warmup_init_lr"},
#define EXP "{\"name\": \"lamb\", \"base_lr\": 1, \"lr_schedule\": \"warmup_hold_exp\", "
    {EXP "\"gamma\": 0.9}", 0, "warmup_hold_exp needs the steps per epoch, which this workload does not give",
     O ".lr_schedule"},
    {EXP "\"warmup_epochs\": 1.5, \"gamma\": 0.9}", 10, "expected an integer in [0, 1000000]", O ".warmup_epochs"},
    {EXP "\"warmup_steps\": 5, \"gamma\": 0.9}", 10, "\"warmup_steps\" is not a key of lr_schedule \"warmup_hold_exp\"",
     O ".warmup_steps"},
    {EXP "\"hold_epochs\": 3}", 10, "missing; expected a number in [0, 1]", O ".gamma"},
    {EXP "\"gamma\": 0}", 10, "expected a number in (0, 1]", O ".gamma"},
    {"{\"name\": \"lamb\", \"base_lr\": 1, \"hold_epochs\": 3}", 10, "\"hold_epochs\" is not a key of lr_schedule \"poly\"",
     O ".hold_epochs"},
};

TK_TEST(errors_name_the_file_and_json_path) {
    for (size_t i = 0; i < sizeof mistakes / sizeof mistakes[0]; i++) {
        tk_opt_config c;
        tk_err e;
        CHECK_EQ_INT(parse(mistakes[i].text, mistakes[i].spe, &c, &e), TK_EDATA);
        CHECK_STR(e.what, mistakes[i].what);
        CHECK_STR(e.where, mistakes[i].where);
    }
}

// The man page's examples (.EX blocks of man/man5/trainkit-optimizer.5): each "optimizer": {...}
// parses (with 1251 updates per epoch for the epoch keys), and the error line is what the
// parser and tk_err_format give.
TK_TEST(man_page_examples_parse) {
    FILE *f = fopen("man/man5/trainkit-optimizer.5", "r");
    CHECK(f != NULL);
    if (!f) return;
    char line[512], block[4096] = "";
    int in = 0, parsed = 0, errline = 0;
    while (fgets(line, sizeof line, f)) {
        if (strncmp(line, ".EX", 3) == 0) {
            in = 1, block[0] = 0;
            continue;
        }
        if (strncmp(line, ".EE", 3) == 0) {
            in = 0;
            if (strncmp(block, "train-step: error: ", 19) == 0) {
                tk_opt_config c;
                tk_err e;
                char got[600];
                CHECK_EQ_INT(parse("{\"name\": \"adam\", \"base_lr\": 1, \"betaone\": 0.9}", 0, &c, &e), TK_EDATA);
                tk_err_format(&e, got, sizeof got);
                block[strcspn(block, "\n")] = 0;
                CHECK_STR(block + 19, got);
                errline++;
                continue;
            }
            char text[4200];
            snprintf(text, sizeof text, "{%s}", block);
            json_t *root = json_loads(text, 0, NULL);
            CHECK(root != NULL);
            tk_opt_config c;
            tk_err e = {0};
            CHECK_EQ_INT(tk_opt_config_parse(json_object_get(root, "optimizer"), "man", "optimizer", 1251, &c, &e), 0);
            json_decref(root);
            parsed++;
            continue;
        }
        if (!in) continue;
        for (char *p = line; *p; p++) // roff escapes: \- is '-', \e is '\'
            if (p[0] == '\\' && (p[1] == '-' || p[1] == 'e')) memmove(p, p + 1, strlen(p)), *p = *p == 'e' ? '\\' : '-';
        strncat(block, line, sizeof block - strlen(block) - 1);
    }
    fclose(f);
    CHECK_EQ_INT(parsed, 5);
    CHECK_EQ_INT(errline, 1);
}

TK_TEST(distributed_key_parses_and_refuses_lars) {
    tk_opt_config c;
    tk_err e;
    CHECK_EQ_INT(parse("{\"name\": \"lamb\", \"base_lr\": 1e-3}", 0, &c, &e), 0);
    CHECK_EQ_INT(c.distributed, 0);
    CHECK_EQ_INT(parse("{\"name\": \"lamb\", \"base_lr\": 1e-3, \"distributed\": true}", 0, &c, &e), 0);
    CHECK_EQ_INT(c.distributed, 1);
    CHECK_EQ_INT(parse("{\"name\": \"sgd\", \"base_lr\": 1e-3, \"distributed\": 1}", 0, &c, &e), TK_EDATA);
    CHECK(strstr(e.what, "expected true or false") != NULL);
    CHECK_EQ_INT(parse("{\"name\": \"lars\", \"base_lr\": 1, \"lr_schedule\": \"lars_poly\", \"total_steps\": 10, "
                       "\"distributed\": true}", 0, &c, &e), TK_EDATA);
    CHECK(strstr(e.what, "does not run lars") != NULL);
    CHECK(strstr(e.where, "$.optimizer.distributed") != NULL);
}
