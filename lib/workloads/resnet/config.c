// ResNet's configuration: the "model" and "data" sections (man/man1/train-step.1, RESNET). Every
// key is optional; the defaults are ResNet-50 v1.5 on ImageNet as torchvision and the MLPerf
// reference train it.
#include <stdlib.h>
#include <string.h>

#include "workloads/resnet/resnet.h"

const char *const rn_precisions[] = {"fp32", "bf16", NULL};

const char *const rn_sections[] = {NULL};

// An array of n numbers (n in [lo_n, hi_n]) in [lo, hi] at p, or absent (out kept).
static int num_array(json_t *root, const char *file, const char *p, int lo_n, int hi_n, double lo, double hi,
                     double *out, int *n, tk_err *e) {
    json_t *a = tk_cfg_get(root, p);
    if (!a || json_is_null(a)) return 0;
    char msg[160];
    snprintf(msg, sizeof msg, "expected an array of %d to %d numbers in [%g, %g]", lo_n, hi_n, lo, hi);
    if (!json_is_array(a) || (int)json_array_size(a) < lo_n || (int)json_array_size(a) > hi_n)
        return tk_cfg_bad(e, file, p, msg);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *x = json_array_get(a, i);
        if (!json_is_number(x) || json_number_value(x) < lo || json_number_value(x) > hi)
            return tk_cfg_bad(e, file, p, msg);
        out[i] = json_number_value(x);
    }
    if (n) *n = (int)json_array_size(a);
    return 0;
}

int rn_config_parse(json_t *root, const char *path, const tk_run_cfg *run, rn_config *cfg, tk_err *e) {
    static const char *const model_keys[] = {"layers", "width", "expansion", "classes", "image_size", "precision",
                                             "label_smoothing", "bn_epsilon", "bn_momentum", "init",
                                             "zero_init_residual", "stem", NULL};
    static const char *const data_keys[] = {"eval_resize", "crop_scale", "crop_ratio", "flip", "mean", "std",
                                            "decoder", "train_samples", "eval_samples", "note", NULL};
    static const char *const inits[] = {"torchvision", "mlperf", NULL}, *const stems[] = {"auto", "s2d", "direct", NULL};
    memset(cfg, 0, sizeof *cfg);
    TRY(tk_cfg_keys(root, path, "model", model_keys, e));
    TRY(tk_cfg_keys(root, path, "data", data_keys, e));
    // model: ResNet-50 unless told otherwise
    double layers[RN_MAX_STAGES] = {3, 4, 6, 3}, v2[2];
    cfg->nstages = 4;
    TRY(num_array(root, path, "model.layers", 1, RN_MAX_STAGES, 1, 32, layers, &cfg->nstages, e));
    int nblk = 0;
    for (int s = 0; s < cfg->nstages; s++) {
        cfg->layers[s] = (int)layers[s];
        if (cfg->layers[s] != layers[s]) return tk_cfg_bad(e, path, "model.layers", "expected whole numbers of blocks");
        nblk += cfg->layers[s];
    }
    if (nblk > RN_MAX_BLOCKS) return tk_cfg_bad(e, path, "model.layers", "at most 64 blocks in all");
    int64_t v = 64;
    TRY(tk_cfg_int_opt(root, path, "model.width", 1, 1024, &v, e));
    cfg->width = (int)v;
    v = 4;
    TRY(tk_cfg_int_opt(root, path, "model.expansion", 1, 16, &v, e));
    cfg->expansion = (int)v;
    v = 1000;
    TRY(tk_cfg_int_opt(root, path, "model.classes", 2, 1 << 20, &v, e));
    cfg->classes = (int)v;
    v = 224;
    TRY(tk_cfg_int_opt(root, path, "model.image_size", 8, 1024, &v, e));
    cfg->image_size = (int)v;
    if (cfg->image_size >> (cfg->nstages + 1) < 1)
        return tk_cfg_bad(e, path, "model.image_size", "too small for the stem and the stages' strides");
    tk_precision pr;
    TRY(tk_cfg_precision(root, path, rn_precisions, &pr, e));
    cfg->bf16 = pr == TK_PRECISION_BF16;
    cfg->label_smoothing = 0.1;
    cfg->bn_eps = 1e-5;
    cfg->bn_momentum = 0.1;
    TRY(tk_cfg_num_opt(root, path, "model.label_smoothing", 0, 1, &cfg->label_smoothing, e));
    TRY(tk_cfg_num_opt(root, path, "model.bn_epsilon", 1e-12, 1, &cfg->bn_eps, e));
    TRY(tk_cfg_num_opt(root, path, "model.bn_momentum", 0, 1, &cfg->bn_momentum, e));
    TRY(tk_cfg_enum(root, path, "model.init", inits, 0, &cfg->init, e));
    TRY(tk_cfg_bool_opt(root, path, "model.zero_init_residual", &cfg->zero_init_residual, e));
    TRY(tk_cfg_enum(root, path, "model.stem", stems, TK_BLK_STEM_AUTO, &cfg->stem, e));
    if (cfg->stem == TK_BLK_STEM_S2D && cfg->image_size % 2)
        return tk_cfg_bad(e, path, "model.stem", "\"s2d\" needs an even model.image_size");
    // data: torchvision's / the MLPerf reference's augmentation and normalization
    v = 256;
    TRY(tk_cfg_int_opt(root, path, "data.eval_resize", 1, 4096, &v, e));
    cfg->eval_resize = (int)v;
    if (cfg->eval_resize < cfg->image_size)
        return tk_cfg_bad(e, path, "data.eval_resize", "expected at least model.image_size");
    v2[0] = 0.08, v2[1] = 1.0;
    TRY(num_array(root, path, "data.crop_scale", 2, 2, 1e-4, 1, v2, NULL, e));
    cfg->scale_min = v2[0], cfg->scale_max = v2[1];
    v2[0] = 3.0 / 4.0, v2[1] = 4.0 / 3.0;
    TRY(num_array(root, path, "data.crop_ratio", 2, 2, 1e-3, 1e3, v2, NULL, e));
    cfg->ratio_min = v2[0], cfg->ratio_max = v2[1];
    if (cfg->scale_min > cfg->scale_max || cfg->ratio_min > cfg->ratio_max)
        return tk_cfg_bad(e, path, "data.crop_scale", "expected [min, max] ranges with min <= max");
    cfg->flip = 1;
    TRY(tk_cfg_bool_opt(root, path, "data.flip", &cfg->flip, e));
    double mean[3] = {123.675, 116.28, 103.53}, std[3] = {58.395, 57.12, 57.375}; // ImageNet's, 0..255
    TRY(num_array(root, path, "data.mean", 3, 3, -1e4, 1e4, mean, NULL, e));
    TRY(num_array(root, path, "data.std", 3, 3, 1e-6, 1e4, std, NULL, e));
    for (int i = 0; i < 3; i++) cfg->mean[i] = (float)mean[i], cfg->std[i] = (float)std[i];
    json_t *dec = tk_cfg_get(root, "data.decoder");
    snprintf(cfg->decoder, sizeof cfg->decoder, "cpu");
    if (dec && !json_is_null(dec)) {
        if (!json_is_string(dec) || strlen(json_string_value(dec)) >= sizeof cfg->decoder)
            return tk_cfg_bad(e, path, "data.decoder", "expected the name of an image decoder (\"cpu\", \"nvjpeg\" or \"auto\")");
        snprintf(cfg->decoder, sizeof cfg->decoder, "%s", json_string_value(dec));
    }
    // the engine's sections
    cfg->batch = run->batch;
    cfg->seed = run->seed;
    cfg->sh = calloc(1, sizeof *cfg->sh);
    if (!cfg->sh) return tk_err_set(e, TK_EIO, "out of host memory");
    pthread_mutex_init(&cfg->sh->mu, NULL);
    return 0;
}

void rn_config_release(rn_config *cfg) {
    if (cfg->sh) rn_shared_free(cfg->sh);
    cfg->sh = NULL;
}

int rn_config_new(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                  tk_err *e) {
    (void)data_meta;
    rn_config *cfg = calloc(1, sizeof *cfg);
    int rc = cfg ? rn_config_parse(root, path, run, cfg, e) : tk_err_set(e, TK_EIO, "out of host memory");
    if (rc) rn_config_free(cfg), cfg = NULL;
    *out = cfg;
    return rc;
}

void rn_config_free(void *cfg) {
    if (cfg) rn_config_release(cfg);
    free(cfg);
}
