// ResNet-50 v1.5 as a workload of the training engine (lib/engine/workload.h): the table of
// functions, and what the engine needs that is ResNet's: its MLLOG keys (MLPerf Training rules
// 1.0.0 / 1.1.0, closed_resnet*.yaml) and the tensors they name.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cudnn_conv.h"
#include "workloads/resnet/resnet.h"

// ---- the batch ----

// This rank's images, u8 (b, S, S, 3) (the step dump's "batch.image" is their normalized form:
// rn_dump_describe), and labels, i32 (b).
static int wl_batch(const void *model, tk_wl_field *f) {
    const rn_model *m = model;
    f[0] = (tk_wl_field){"batch.image", TK_U8, 4, {m->b, m->S, m->S, 3}, m->in_img};
    f[1] = (tk_wl_field){"batch.label", TK_I32, 1, {m->b}, m->in_label};
    return 2;
}

// Before training: a line saying how the model runs here (cuDNN, its plans, the stem's form and
// channels).
static int wl_prepare(void *model, void *rd, int64_t spe, json_t **line, tk_err *e) {
    rn_model *m = model;
    (void)rd, (void)spe, (void)e;
    size_t ws = m->dnn ? tk_cudnn_ws_bytes(m->dnn) : 0;
    *line = json_pack("{s:s, s:I, s:i, s:s, s:i, s:s?, s:i, s:I}", "type", "resnet", "batch_per_rank",
                      (json_int_t)m->b, "blocks", m->nblk, "stem", m->stem.s2d ? "s2d" : "direct", "stem_channels", m->stem.cin,
                      "cudnn", m->dnn ? tk_cudnn_describe() : NULL,
                      "conv_plans", tk_cudnn_nplans(m->dnn), "conv_workspace_bytes", (json_int_t)ws);
    return 0;
}

// ---- MLLOG ----

// The closed_resnet rules' optimizer keys: opt_name, then lars_* (closed_resnet_lars) or sgd_*
// (closed_resnet_sgd), as NVIDIA's v1.1 MXNet logs them (decay steps: the epochs of the schedule),
// each in the form the config wrote it (37 stays 37); the engine logs them (engine/optimizer.h).
static const tk_opt_mllog_key opt_mllog_names[] = {
    {"opt_name", TK_OPTV_NAME, 0, NULL},
    {"%s_opt_base_learning_rate", TK_OPTV_BASE_LR, 'g', NULL},
    {"%s_opt_end_learning_rate", TK_OPTV_END_LR, 'g', NULL},
    {"%s_opt_learning_rate_decay_poly_power", TK_OPTV_POLY_POWER, 'g', NULL},
    {"%s_opt_learning_rate_decay_steps", TK_OPTV_DECAY_LENGTH, 'g', NULL},
    {"%s_opt_weight_decay", TK_OPTV_WEIGHT_DECAY, 'g', NULL},
    {"%s_opt_momentum", TK_OPTV_MOMENTUM, 'g', NULL},
    {"lars_epsilon", TK_OPTV_EPS, 'g', "lars"},
    {"lars_opt_learning_rate_warmup_epochs", TK_OPTV_WARMUP_EPOCHS, 'g', "lars"},
    {"opt_learning_rate_warmup_epochs", TK_OPTV_WARMUP_EPOCHS, 'g', "!lars"},
    {NULL, 0, 0, NULL}};

// model_bn_span: the samples one BN normalizes over (this rank's batch).
static int wl_mllog_hparams(void *model, const tk_run_cfg *run, tk_mllog *L, tk_err *e) {
    (void)run;
    return TK_MLLOG_EVENT(L, "model_bn_span", json_integer(((const rn_model *)model)->b), NULL, e);
}

// The tensors closed_resnet.yaml names (MXNet's names, as NVIDIA's logs), in the model's order.
static int wl_mllog_weights(void *model, tk_mllog *L, tk_err *e) {
    const rn_model *m = model;
    char buf[96];
    for (int i = 0; i < m->P->ndense; i++) {
        const char *n = rn_mlperf_name(m, i, buf, sizeof buf);
        if (n) TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", n), e));
    }
    return 0;
}

// ---- the result line ----

// The GPU decoder's time per batch in the loader threads (train-step's result line: "decoder").
static json_t *wl_result_extra(const void *model) {
    const rn_model *m = model;
    const rn_shared *sh = m->cfg.sh;
    if (!sh || sh->dec_batches == 0) return NULL;
    const double k = 1e3 / (double)sh->dec_batches;
    return json_pack("{s:{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f}}", "decoder", "name", m->cfg.decoder, "batches",
                     (json_int_t)sh->dec_batches, "images", (json_int_t)sh->dec_images, "parse_ms_per_batch",
                     sh->dec_parse_s * k, "submit_ms_per_batch", sh->dec_submit_s * k, "wait_ms_per_batch",
                     sh->dec_wait_s * k, "decode_gpu_ms_per_batch", sh->dec_decode_gpu_s * k,
                     "resize_gpu_ms_per_batch", sh->dec_resize_gpu_s * k);
}

// The table, a line for each of lib/engine/workload.h's sections.
const tk_workload tk_workload_resnet = {
    .version = TK_WORKLOAD_V6, .name = "resnet", .metric = "top1", .precisions = rn_precisions,
    .summary = "ResNet-50 v1.5 (MLPerf Training v1.x image classification, ImageNet), target top-1",
    .sections = rn_sections,
    .config = rn_config_new, .config_free = rn_config_free,
    .create = rn_create, .destroy = rn_destroy, .init_weights = rn_init_weights, .weights_loaded = rn_weights_loaded,
    .reader_open = rn_reader_open, .reader_close = rn_reader_close, .reader_count = rn_reader_count,
    .read_batch = rn_reader_batch, .reader_device = rn_reader_device,
    .batch = wl_batch, .prepare = wl_prepare,
    .step = rn_train_step, .after_update = rn_refresh_stem,
    .evalset_load = rn_evalset_load, .evalset_count = rn_evalset_count, .evalset_free = rn_evalset_free,
    .evaluate = rn_evaluate,
    .opt_mllog = opt_mllog_names, .mllog_hparams = wl_mllog_hparams, .mllog_weights = wl_mllog_weights,
    .import = rn_import_torchvision, .result_extra = wl_result_extra,
    .dump_describe = rn_dump_describe,
    .warmup = 1, // (cuDNN's plans)
};
