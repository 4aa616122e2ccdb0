// The 3D U-Net's configuration (unet3d.h, man/man5/trainkit-config.5 "unet3d"): the "model"
// section, the "data" section (data.c's u3_data_cfg_parse) and the "eval" section of the
// sliding-window evaluation. Every key is optional; the defaults are the MLPerf reference's
// (width 32, 128^3 crops, overlap 0.5).
#include <stdlib.h>
#include <string.h>

#include "workloads/unet3d/unet3d.h"

const char *const u3_precisions[] = {"fp32", "bf16", NULL};

const char *const u3_sections[] = {"eval", NULL};

int u3_config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                    tk_err *e) {
    static const char *const model_keys[] = {"width", "precision", NULL};
    static const char *const eval_keys[] = {"overlap", "batch", NULL};
    (void)data_meta;
    *out = NULL;
    u3_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = 0;
#define TRYC(x)                                                                                                        \
    do {                                                                                                               \
        if ((rc = (x))) goto out;                                                                                      \
    } while (0)
    TRYC(tk_cfg_keys(root, path, "model", model_keys, e));
    TRYC(tk_cfg_keys(root, path, "eval", eval_keys, e));
    int64_t v = 32;
    // the filters W .. 10 W: 10 W channels of the bottleneck stay within the kernels' int range
    TRYC(tk_cfg_int_opt(root, path, "model.width", 1, 1024, &v, e));
    cfg->width = (int)v;
    tk_precision pr;
    TRYC(tk_cfg_precision(root, path, u3_precisions, &pr, e));
    cfg->bf16 = pr == TK_PRECISION_BF16;
    TRYC(u3_data_cfg_parse(json_object_get(root, "data"), path, &cfg->data, e));
    // five stride-2 levels: every crop axis a multiple of 32 (the reference's 128)
    static const char *const axis[3] = {"D", "H", "W"};
    for (int a = 0; a < 3; a++)
        if (cfg->data.crop[a] < 32 || cfg->data.crop[a] % 32) {
            char what[160];
            snprintf(what, sizeof what, "the crop's %s is %d: the network's five stride-2 levels need a multiple of 32",
                     axis[a], cfg->data.crop[a]);
            rc = tk_cfg_bad(e, path, "data.crop", what);
            goto out;
        }
    // the evaluation's windows are the training crop (kernels/swin.h: a cubic roi)
    if (cfg->data.crop[1] != cfg->data.crop[0] || cfg->data.crop[2] != cfg->data.crop[0]) {
        rc = tk_cfg_bad(e, path, "data.crop", "the sliding-window evaluation needs a cubic crop (its windows)");
        goto out;
    }
    cfg->eval_overlap = 0.5;
    TRYC(tk_cfg_num_opt(root, path, "eval.overlap", 0, 0.99, &cfg->eval_overlap, e));
    if ((double)cfg->data.crop[0] * (1.0 - cfg->eval_overlap) < 1) {
        rc = tk_cfg_bad(e, path, "eval.overlap", "leaves the windows no stride");
        goto out;
    }
    v = 0;
    TRYC(tk_cfg_int_opt(root, path, "eval.batch", 0, 64, &v, e)); // kernels/swin.h TK_SWIN_MAX_BATCH
    cfg->eval_batch = (int)v;
    if (run->batch > INT32_MAX) {
        rc = tk_cfg_bad(e, path, "train.global_batch_size", "too large");
        goto out;
    }
    cfg->batch = run->batch;
    cfg->b = (int)run->batch; // one rank until u3_config_ranks says how many
    cfg->seed = run->seed;
#undef TRYC
out:
    if (rc) u3_config_free(cfg);
    else *out = cfg;
    return rc;
}

int u3_config_ranks(u3_config *cfg, const tk_wl_env *env, tk_err *e) {
    int64_t b;
    TRY(tk_per_rank_batch("unet3d", cfg->batch, env->dist->world, &b, e));
    cfg->b = (int)b;
    cfg->dist = env->dist;
    cfg->params = env->params;
    return 0;
}

void u3_config_free(void *cfg) { free(cfg); }
