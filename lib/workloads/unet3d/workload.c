// The 3D U-Net as a workload of the training engine (lib/engine/workload.h): the table of
// functions (the model's in model.c and step.c, the data's in data.c, the evaluation's in eval.c)
// and its MLLOG keys (MLPerf Training rules 1.0.0 and 1.1.0, closed_unet3d: the optimizer's and
// the schedule's, the crops and the overlap, and the 50 tensors the rules name).
#include <string.h>

#include "engine/workload.h"
#include "workloads/unet3d/unet3d.h"

// The model on its ranks: this rank's batch, the communicator and the tensors into the config
// first (config.c), which model.c, eval.c and the MLLOG keys read.
static int wl_create(const void *cfg, const tk_wl_env *env, void **model, tk_err *e) {
    TRY(u3_config_ranks((u3_config *)cfg, env, e)); // the config's own allocation (config.c)
    return u3_create(cfg, env, model, e);
}

// ---- MLLOG ----

// closed_unet3d's optimizer keys, named and ordered as the reference's mlperf_run_param_log and
// NVIDIA's v1.1 logs have them (training_results_v1.1/NVIDIA/results/dgxa100_ngc21.09_mxnet/unet3d),
// logged by the engine from the "optimizer" section (engine/optimizer.h): SGD with Nesterov
// momentum and the "step" schedule after the warm-up from warmup_init_lr, one rate per epoch.
static const tk_opt_mllog_key opt_mllog_names[] = {
    {"opt_name", TK_OPTV_NAME, 0, NULL},
    {"opt_base_learning_rate", TK_OPTV_BASE_LR, 'g', NULL},
    {"opt_learning_rate_warmup_epochs", TK_OPTV_WARMUP_EPOCHS, 'g', NULL},
    {"opt_initial_learning_rate", TK_OPTV_INIT_LR, 'g', NULL},
    {"opt_learning_rate_decay_boundary_epochs", TK_OPTV_MILESTONE_EPOCHS, 0, NULL},
    {"opt_learning_rate_decay_factor", TK_OPTV_GAMMA, 'g', NULL},
    {"opt_weight_decay", TK_OPTV_WEIGHT_DECAY, 'g', NULL},
    {"opt_momentum", TK_OPTV_MOMENTUM, 'g', NULL},
    {NULL, 0, 0, NULL}};

static json_t *shape3(const int s[3]) { return json_pack("[i, i, i]", s[0], s[1], s[2]); }

// The data's and the evaluation's keys: the foreground oversampling, the training crop, the
// windows and their overlap.
static int wl_mllog_hparams(void *model, const tk_run_cfg *run, tk_mllog *L, tk_err *e) {
    const u3_config *c = u3_model_config(model);
    const int roi[3] = {c->data.crop[0], c->data.crop[0], c->data.crop[0]};
    (void)run;
    TRY(TK_MLLOG_EVENT(L, "oversampling", json_real(c->data.oversampling), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "training_input_shape", shape3(c->data.crop), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "validation_input_shape", shape3(roi), NULL, e));
    return TK_MLLOG_EVENT(L, "validation_overlap", json_real(c->eval_overlap), NULL, e);
}

// The 50 tensors closed_unet3d names (u3_mlperf_name, in the model's order), one
// weights_initialization event each: a name that two tensors share (a layer's weight and bias) once.
static int wl_mllog_weights(void *model, tk_mllog *L, tk_err *e) {
    const tk_params *P = u3_model_config(model)->params;
    const char *done[128];
    int ndone = 0;
    for (int i = 0; P && i < P->ndense; i++) {
        const char *n = u3_mlperf_name(model, i);
        int seen = 0;
        for (int j = 0; n && j < ndone && !seen; j++) seen = strcmp(done[j], n) == 0;
        if (!n || seen) continue;
        if (ndone < (int)(sizeof done / sizeof *done)) done[ndone++] = n;
        TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", n), e));
    }
    return 0;
}

// The table, a line for each of lib/engine/workload.h's sections.
const tk_workload tk_workload_unet3d = {
    .version = TK_WORKLOAD_V6, .name = "unet3d", .metric = "mean_dice", .precisions = u3_precisions,
    .summary = "3D U-Net (MLPerf Training v1.x image segmentation, KiTS19), target mean Dice of kidney and tumor",
    .sections = u3_sections,
    .config = u3_config_parse, .config_free = u3_config_free,
    .create = wl_create, .destroy = u3_destroy, .init_weights = u3_init_weights, .weights_loaded = u3_weights_loaded,
    .reader_open = u3_data_open, .reader_close = u3_data_close, .reader_count = u3_data_count,
    .read_batch = u3_data_batch,
    .batch = u3_batch,
    .step = u3_train_step,
    .evalset_load = u3_evalset_load, .evalset_count = u3_evalset_count, .evalset_free = u3_evalset_free,
    .evaluate = u3_evaluate,
    .opt_mllog = opt_mllog_names, .mllog_hparams = wl_mllog_hparams, .mllog_weights = wl_mllog_weights,
    .dump_describe = u3_dump_describe,
    .warmup = 1, // (cuDNN's plans)
};
