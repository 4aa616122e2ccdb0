// ResNet-50 v1.5 as a workload of the training engine (lib/engine/workload.h): the table of
// functions, and what the engine needs that is ResNet's: its MLLOG keys (MLPerf Training rules
// 1.0.0 / 1.1.0, closed_resnet*.yaml) and the tensors they name.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/cudnn_conv.h"
#include "workloads/resnet/resnet.h"

// ---- the batch ----

static void wl_layout(const void *model, tk_batch_layout *L) {
    const rn_model *m = model;
    *L = (tk_batch_layout){.nfields = 2, .bytes = {(size_t)m->b * m->S * m->S * 3, (size_t)m->b * 4}};
}

static void wl_inputs(void *model, void **f) {
    rn_model *m = model;
    f[0] = m->in_img;
    f[1] = m->in_label;
}

// Before training: a line saying how the model runs here (cuDNN, its plans, the stem's form and
// channels).
static int wl_prepare(void *model, void *rd, int64_t spe, json_t **line, tk_err *e) {
    rn_model *m = model;
    (void)rd, (void)spe, (void)e;
    size_t ws = m->dnn ? tk_cudnn_ws_bytes(m->dnn) : 0;
    *line = json_pack("{s:s, s:I, s:i, s:s, s:i, s:s?, s:i, s:I}", "type", "resnet", "batch_per_rank",
                      (json_int_t)m->b, "blocks", m->nblk, "stem", m->s2d ? "s2d" : "direct", "stem_channels", m->cin,
                      "cudnn", m->dnn ? tk_cudnn_describe() : NULL,
                      "conv_plans", tk_cudnn_nplans(m->dnn), "conv_workspace_bytes", (json_int_t)ws);
    return 0;
}

// ---- MLLOG ----

// A number of the "optimizer" section (its JSON type kept: 37 stays 37), or def when absent.
static json_t *opt_num(const rn_model *m, const char *key, double def) {
    json_t *v = json_object_get(m->cfg.optimizer, key);
    if (json_is_integer(v)) return json_integer(json_integer_value(v));
    return json_real(json_is_number(v) ? json_number_value(v) : def);
}
static int opt_has(const rn_model *m, const char *key) { return json_object_get(m->cfg.optimizer, key) != NULL; }

// Warm-up epochs: warmup_epochs, or warmup_steps over the epoch's updates (the engine's
// run->steps_per_epoch).
static json_t *warmup_epochs(const rn_model *m, const tk_run_cfg *run) {
    if (opt_has(m, "warmup_epochs") || !opt_has(m, "warmup_steps")) return opt_num(m, "warmup_epochs", 0);
    json_t *s = json_object_get(m->cfg.optimizer, "warmup_steps");
    const int64_t spe = run->steps_per_epoch;
    return json_real(spe > 0 ? json_number_value(s) / (double)spe : 0);
}

// The closed_resnet rules: opt_name, then lars_* (closed_resnet_lars) or sgd_* (closed_resnet_sgd)
// keys, as NVIDIA's v1.1 MXNet logs them (decay steps: the epochs of the schedule), and
// model_bn_span (the samples one BN normalizes over: this rank's batch).
static int wl_mllog_hparams(void *model, const tk_run_cfg *run, tk_mllog *L, tk_err *e) {
    rn_model *m = model;
    const char *name = json_string_value(json_object_get(m->cfg.optimizer, "name"));
    const int lars = name && strcmp(name, "lars") == 0;
    const char *p = lars ? "lars_opt" : "sgd_opt";
    char key[96];
    TRY(TK_MLLOG_EVENT(L, "opt_name", json_string(lars ? "lars" : "sgd"), NULL, e));
#define KEY(suffix) (snprintf(key, sizeof key, "%s_%s", p, suffix), key)
    TRY(TK_MLLOG_EVENT(L, KEY("base_learning_rate"), opt_num(m, "base_lr", 0), NULL, e));
    json_t *end = opt_has(m, "end_lr") || !opt_has(m, "min_lr") ? opt_num(m, "end_lr", lars ? 1e-4 : 0)
                                                                 : opt_num(m, "min_lr", 0);
    TRY(TK_MLLOG_EVENT(L, KEY("end_learning_rate"), end, NULL, e));
    TRY(TK_MLLOG_EVENT(L, KEY("learning_rate_decay_poly_power"), opt_num(m, "poly_power", 2), NULL, e));
    json_t *steps = opt_has(m, "total_epochs") || !opt_has(m, "decay_steps") ? opt_num(m, "total_epochs", 0)
                                                                             : opt_num(m, "decay_steps", 0);
    TRY(TK_MLLOG_EVENT(L, KEY("learning_rate_decay_steps"), steps, NULL, e));
    TRY(TK_MLLOG_EVENT(L, KEY("weight_decay"), opt_num(m, "weight_decay", lars ? 1e-4 : 0), NULL, e));
    TRY(TK_MLLOG_EVENT(L, KEY("momentum"), opt_num(m, "momentum", lars ? 0.9 : 0), NULL, e));
#undef KEY
    if (lars) {
        TRY(TK_MLLOG_EVENT(L, "lars_epsilon", opt_num(m, "eps", 0), NULL, e));
        TRY(TK_MLLOG_EVENT(L, "lars_opt_learning_rate_warmup_epochs", warmup_epochs(m, run), NULL, e));
    } else {
        TRY(TK_MLLOG_EVENT(L, "opt_learning_rate_warmup_epochs", warmup_epochs(m, run), NULL, e));
    }
    return TK_MLLOG_EVENT(L, "model_bn_span", json_integer(m->b), NULL, e);
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
    .version = TK_WORKLOAD_V2, .name = "resnet", .metric = "top1", .precisions = rn_precisions,
    .summary = "ResNet-50 v1.5 (MLPerf Training v1.x image classification, ImageNet), target top-1",
    .sections = rn_sections, .config = rn_config_new, .config_free = rn_config_free,
    .create = rn_create, .destroy = rn_destroy, .init_weights = rn_init_weights, .weights_loaded = rn_weights_loaded,
    .reader_open = rn_reader_open, .reader_close = rn_reader_close, .reader_count = rn_reader_count,
    .read_batch = rn_reader_batch, .batch_layout = wl_layout, .inputs = wl_inputs, .prepare = wl_prepare,
    .step = rn_train_step, .after_update = rn_refresh_stem,
    .evalset_load = rn_evalset_load, .evalset_count = rn_evalset_count, .evalset_free = rn_evalset_free,
    .evaluate = rn_evaluate,
    .mllog_hparams = wl_mllog_hparams,
    .mllog_weights = wl_mllog_weights,
    .import = rn_import_torchvision, .dump_step = rn_dump_step, .result_extra = wl_result_extra,
    .reader_device = rn_reader_device,
};
