// SSD300-ResNet34 as a workload of the training engine (lib/engine/workload.h, workload.h here):
// the configuration ("model", "data", "eval" sections), the training reader over prep coco's .tks
// records (data.h), the training step (model.h's forward, kernels/ssd_box.h's matching and loss
// with hard-negative mining, the backward) and the table. The optimizer and its schedule are the
// engine's "optimizer" section: the v1.x reference (mlcommons/training single_stage_detector/ssd,
// train.py) trains with SGD, momentum 0.9, weight decay 5e-4 on every tensor, a linear warm-up
// and a step decay by 0.1 at milestone epochs (share/workloads/ssd/config.json takes NVIDIA's v1.1
// values: lr_schedule "step" with warmup_steps and milestone_epochs).
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "workloads/ssd/workload.h"

static const char *const ssd_precisions[] = {"fp32", "bf16", NULL};
static const char *const ssd_sections[] = {"eval", NULL};

// ---- configuration ----

static int config_parse(json_t *root, const char *path, const tk_run_cfg *run, const char *data_meta, void **out,
                        tk_err *e) {
    static const char *const model_keys[] = {"width", "image_size", "precision", "stem", NULL};
    static const char *const stems[] = {"auto", "s2d", "direct", NULL}; // lib/blocks/stem.h's forms
    static const char *const data_keys[] = {"max_boxes", "threads", "shuffle", "crop", "flip", "jitter", "device_jitter", NULL};
    static const char *const eval_keys[] = {"annotations", "nms_iou", "score_threshold", "max_output", NULL};
    (void)data_meta;
    *out = NULL;
    ssd_wl_config *cfg = calloc(1, sizeof *cfg);
    if (!cfg) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = 0;
#define TRYC(x)                                                                                                        \
    do {                                                                                                               \
        if ((rc = (x))) goto out;                                                                                      \
    } while (0)
    TRYC(tk_cfg_keys(root, path, "model", model_keys, e));
    TRYC(tk_cfg_keys(root, path, "data", data_keys, e));
    TRYC(tk_cfg_keys(root, path, "eval", eval_keys, e));
    if (run->batch > 4096) {
        rc = tk_cfg_bad(e, path, "train.global_batch_size", "too large (at most 4096)");
        goto out;
    }
    cfg->net = ssd_config_default((int)run->batch);
    int64_t v = 64;
    TRYC(tk_cfg_int_opt(root, path, "model.width", 1, 256, &v, e));
    cfg->net.width = (int)v;
    v = 300;
    // below 257 the sixth map vanishes (model.h)
    TRYC(tk_cfg_int_opt(root, path, "model.image_size", 257, 1024, &v, e));
    cfg->net.size = (int)v;
    tk_precision pr;
    TRYC(tk_cfg_precision(root, path, ssd_precisions, &pr, e));
    cfg->net.bf16 = pr == TK_PRECISION_BF16;
    TRYC(tk_cfg_enum(root, path, "model.stem", stems, TK_BLK_STEM_AUTO, &cfg->net.stem, e));
    if (cfg->net.stem == TK_BLK_STEM_S2D && cfg->net.size % 2) {
        rc = tk_cfg_bad(e, path, "model.stem", "\"s2d\" needs an even model.image_size");
        goto out;
    }
    ssd_data_opts *o = &cfg->data;
    ssd_data_opts_default(o);
    o->size = cfg->net.size;
    o->batch = (int)run->batch;
    o->seed = run->seed;
    v = o->max_boxes;
    TRYC(tk_cfg_int_opt(root, path, "data.max_boxes", 1, 1000, &v, e));
    o->max_boxes = (int)v;
    v = o->threads;
    TRYC(tk_cfg_int_opt(root, path, "data.threads", 1, 256, &v, e));
    o->threads = (int)v;
    TRYC(tk_cfg_bool_opt(root, path, "data.shuffle", &o->shuffle, e));
    TRYC(tk_cfg_bool_opt(root, path, "data.crop", &o->crop, e));
    TRYC(tk_cfg_bool_opt(root, path, "data.flip", &o->flip, e));
    TRYC(tk_cfg_bool_opt(root, path, "data.jitter", &o->jitter, e));
    TRYC(tk_cfg_bool_opt(root, path, "data.device_jitter", &o->device_jitter, e));
    json_t *ann = tk_cfg_get(root, "eval.annotations");
    if (ann && !json_is_null(ann)) {
        if (!json_is_string(ann) || !json_string_length(ann) ||
            json_string_length(ann) >= sizeof cfg->eval_annotations) {
            rc = tk_cfg_bad(e, path, "eval.annotations", "expected a file name");
            goto out;
        }
        snprintf(cfg->eval_annotations, sizeof cfg->eval_annotations, "%s", json_string_value(ann));
    }
    // the reference's coco_eval: Encoder.decode_batch(criteria 0.5, max_output 200), scores > 0.05
    cfg->nms_iou = 0.5, cfg->score_thresh = 0.05, cfg->max_output = 200;
    TRYC(tk_cfg_num_opt(root, path, "eval.nms_iou", 0, 1, &cfg->nms_iou, e));
    TRYC(tk_cfg_num_opt(root, path, "eval.score_threshold", 0, 1, &cfg->score_thresh, e));
    v = cfg->max_output;
    TRYC(tk_cfg_int_opt(root, path, "eval.max_output", 1, 1024, &v, e)); // kernels/ssd_nms.h TK_SSD_NMS_MAX_OUT
    cfg->max_output = (int)v;
    cfg->batch = run->batch;
    cfg->seed = run->seed;
#undef TRYC
out:
    if (rc) free(cfg);
    else *out = cfg;
    return rc;
}

static void config_free(void *cfg) { free(cfg); }

void ssd_wl_dbox_cfg(int S, const int side[SSD_MAPS], tk_ssd_dbox_cfg *g) {
    *g = tk_ssd300_coco;
    if (S == tk_ssd300_coco.fig) return;
    g->fig = S;
    for (int k = 0; k < SSD_MAPS; k++) {
        g->feat[k] = side[k];
        g->step[k] = (int)lround((double)tk_ssd300_coco.step[k] * S / tk_ssd300_coco.fig);
    }
    for (int k = 0; k <= SSD_MAPS; k++) g->scale[k] = (int)lround((double)tk_ssd300_coco.scale[k] * S / tk_ssd300_coco.fig);
}

// ---- the model ----

static void wl_destroy(void *model) {
    ssd_wl *w = model;
    if (!w) return;
    if (w->net) ssd_destroy(w->net);
    if (w->ar.base) tk_arena_release(w->c, &w->ar);
    free(w->host_dbox_xywh);
    free(w);
}

static int wl_create(const void *cfgp, const tk_wl_env *env, void **model, tk_err *e) {
    const ssd_wl_config *cfg = cfgp;
    ssd_wl *w = calloc(1, sizeof *w);
    if (!w) return tk_err_set(e, TK_EIO, "out of host memory");
    *model = w;
    w->cfg = *cfg, w->env = *env, w->c = env->c;
    int64_t b;
    TRY(tk_per_rank_batch("ssd", cfg->batch, env->dist->world, &b, e));
    w->cfg.net.b = w->b = (int)b;
    w->cfg.net.box_major = 1; // the heads gather into the loss's (and the NMS's) layout
    TRY(ssd_create(&w->cfg.net, env, &w->net, e));
    const ssd_model *m = w->net;
    w->ploc = m->loc, w->pconf = m->conf, w->dploc = m->dloc, w->dpconf = m->dconf;
    w->M = cfg->data.max_boxes, w->C = m->cfg.classes;
    tk_ssd_dbox_cfg g;
    ssd_wl_dbox_cfg(m->S, m->side, &g);
    w->D = tk_ssd_dbox_count(&g);
    if (w->D != m->boxes)
        return tk_err_set(e, TK_EINTERNAL, "ssd: %d default boxes for the network's %lld", w->D, (long long)m->boxes);
    // the workload's buffers: one allocation, views 256-byte aligned
    const size_t bD = (size_t)w->b * w->D, ngt = (size_t)w->b * w->M;
    const tk_backend be = w->c->backend;
    void **slot[] = {(void **)&w->gt,        (void **)&w->gt_label,  (void **)&w->gt_off, (void **)&w->gbox,
                     (void **)&w->label,     (void **)&w->dbox_xywh, (void **)&w->dbox_ltrb, (void **)&w->loss,
                     &w->match_ws,           &w->loss_ws,            (void **)&w->img_u8,  (void **)&w->jobs,
                     &w->jitter_ws};
    const int dj = cfg->data.device_jitter;
    const size_t img_bytes = (size_t)w->b * m->S * m->S * 3;
    const size_t size[] = {ngt * 16,         ngt * 4,           (size_t)(w->b + 1) * 4, bD * 16,
                           bD * 4,           (size_t)w->D * 16, (size_t)w->D * 16,      4,
                           tk_ssd_match_ws_bytes(be, (int64_t)ngt), tk_ssd_loss_ws_bytes(be, w->b, w->D),
                           dj ? img_bytes : 0, dj ? (size_t)w->b * sizeof(tk_img_jitter_job) : 0,
                           dj ? tk_img_jitter_ws_bytes(be, w->b, m->S) : 0};
    const int n = (int)(sizeof size / sizeof *size);
    size_t total = 256;
    for (int k = 0; k < n; k++) total += ((size[k] ? size[k] : 1) + 255) & ~(size_t)255;
    TRY(tk_arena_init(w->c, &w->ar, total, "ssd", e));
    for (int k = 0; k < n; k++) TRY(tk_arena_take(&w->ar, size[k] ? size[k] : 1, slot[k], e));
    TRY(tk_memset0(w->c, w->ar.base, w->ar.cap, TK_STREAM_COMPUTE, e));
    // the default boxes, computed once on the host
    float *ltrb = malloc((size_t)w->D * 16);
    w->host_dbox_xywh = malloc((size_t)w->D * 16);
    int rc = ltrb && w->host_dbox_xywh ? 0 : tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = tk_ssd_dboxes(&g, w->host_dbox_xywh, ltrb, e);
    if (!rc) rc = tk_memcpy_h2d(w->c, w->dbox_xywh, w->host_dbox_xywh, (size_t)w->D * 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_memcpy_h2d(w->c, w->dbox_ltrb, ltrb, (size_t)w->D * 16, TK_STREAM_COMPUTE, e);
    free(ltrb);
    if (!rc) rc = tk_ctx_sync(w->c, e);
    return rc;
}

static int wl_init_weights(void *model, uint64_t seed, tk_err *e) { return ssd_init_weights(((ssd_wl *)model)->net, seed, e); }
static int wl_weights_loaded(void *model, tk_err *e) { return ssd_weights_loaded(((ssd_wl *)model)->net, e); }
static int wl_import(void *model, const char *path, tk_err *e) {
    return ssd_import_torchvision(((ssd_wl *)model)->net, path, e);
}

// The batch: the images (the network's input buffer) and the compacted ground truth; with
// data.device_jitter the images as resized bytes and each one's jitter (the step's first op
// makes the network's input of them).
static int wl_batch(const void *model, tk_wl_field *f) {
    const ssd_wl *w = model;
    const int S = w->net->S;
    if (w->cfg.data.device_jitter) f[0] = (tk_wl_field){"batch.image_u8", TK_U8, 4, {w->b, S, S, 3}, w->img_u8};
    else f[0] = (tk_wl_field){"batch.image", TK_F32, 4, {w->b, S, S, 3}, w->net->in_img};
    f[1] = (tk_wl_field){"batch.gt_box", TK_F32, 2, {(int64_t)w->b * w->M, 4}, w->gt};
    f[2] = (tk_wl_field){"batch.gt_label", TK_I32, 1, {(int64_t)w->b * w->M}, w->gt_label};
    f[3] = (tk_wl_field){"batch.gt_off", TK_I32, 1, {w->b + 1}, w->gt_off};
    if (!w->cfg.data.device_jitter) return 4;
    // tk_img_jitter_job: 8 words of 4 bytes (order[4] i32, three f32 factors, the i32 shift)
    f[4] = (tk_wl_field){"batch.jitter", TK_I32, 2, {w->b, (int64_t)(sizeof(tk_img_jitter_job) / 4)}, w->jobs};
    return 5;
}

// ---- the training step ----

static int wl_step(void *model, tk_err *e) {
    ssd_wl *w = model;
    ssd_model *m = w->net;
    if (w->cfg.data.device_jitter) // the colour jitter and the normalisation the loader left
        TRY(tk_img_jitter_norm(w->c, w->img_u8, w->jobs, w->b, m->S, w->cfg.data.mean, w->cfg.data.std, m->in_img,
                               w->jitter_ws, e));
    TRY(ssd_forward(m, 1, e)); // (ploc, pconf: the network's loc, conf, box-major)
    // the boxes of the batch: the cpu reads the count from the batch (host memory); the cuda
    // kernels read only gt_off (device memory) and take the batch's room as ngt (no host read in
    // a captured step)
    const int64_t ngt = w->c->backend == TK_BACKEND_CPU ? w->gt_off[w->b] : (int64_t)w->b * w->M;
    TRY(tk_ssd_match(w->c, w->gt, w->gt_label, w->gt_off, w->b, ngt, w->dbox_ltrb, w->D, TK_SSD_MATCH_IOU, w->gbox,
                     w->label, w->match_ws, e));
    // this rank's share of the global batch's mean loss (the ranks' gradients add up to it; fixed
    // for the run, so a captured graph may keep it)
    const float share = (float)((double)w->b / (double)(w->cfg.batch > 0 ? w->cfg.batch : w->b));
    TRY(tk_ssd_loss_acc(w->c, TK_F32, w->ploc, w->pconf, w->gbox, w->label, w->dbox_xywh, w->b, w->D, w->C, share,
                        w->env.loss_acc, w->loss, w->dploc, w->dpconf, NULL, w->loss_ws, e));
    return ssd_backward(m, e); // (from dploc, dpconf: the network's dloc, dconf)
}

// The step is captured in one CUDA graph, always the same one (key 0): its shapes are fixed, its
// inputs at fixed addresses (the engine copies each staged batch into the batch's fields: no graph
// per staging slot), no host read, allocation or sync on cuda (the boxes' count: gt_off in device
// memory, the batch's room b M the kernels' bound), the lr and the step counter the engine's in
// device memory, the loss accumulated on the device. (A NULL graph_key means the same to the
// engine; spelled out as the step's contract. tests/gpu/test_ssd_step.c replays it.)
static int64_t wl_graph_key(void *model) {
    (void)model;
    return 0;
}

// ---- the training reader ----

// The training records are read once and shared by the readers of the process (the engine opens
// one a loader thread): one slot, the dataset of the last paths loaded while a reader holds it;
// other paths load their own (not shared).
static pthread_mutex_t shared_mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    char key[4096];              // the paths, each ended by a \x01, in one string ("" when free)
    ssd_dataset *d;
    int refs;
} shared;

static void paths_key(char *const *paths, int npaths, char *key, size_t n) {
    size_t k = 0;
    key[0] = 0;
    for (int i = 0; i < npaths && k < n; i++) k += (size_t)snprintf(key + k, n - k, "%s%c", paths[i], 1);
    if (k >= n) key[0] = 0; // too long to share
}

static int dataset_get(char *const *paths, int npaths, ssd_dataset **d, tk_err *e) {
    char key[sizeof shared.key];
    paths_key(paths, npaths, key, sizeof key);
    pthread_mutex_lock(&shared_mu);
    int rc = 0;
    if (key[0] && shared.refs && strcmp(shared.key, key) == 0) shared.refs++, *d = shared.d;
    else {
        rc = ssd_dataset_load(paths, npaths, d, e);
        if (!rc && key[0] && !shared.refs) {
            snprintf(shared.key, sizeof shared.key, "%s", key);
            shared.d = *d, shared.refs = 1;
        }
    }
    pthread_mutex_unlock(&shared_mu);
    return rc;
}

static void dataset_put(ssd_dataset *d) {
    pthread_mutex_lock(&shared_mu);
    if (d == shared.d && shared.refs) {
        if (--shared.refs == 0) ssd_dataset_free(d), shared.d = NULL, shared.key[0] = 0;
    } else ssd_dataset_free(d);
    pthread_mutex_unlock(&shared_mu);
}

typedef struct ssd_rd {
    ssd_dataset *d;
    ssd_reader *r;
    ssd_batch tmp;               // the batch's boxes before the compaction (image: the field's)
    int b, M;
    int device_jitter;           // the image field is bytes, a jitter field follows the boxes' fields
} ssd_rd;

static void rd_close(void *p) {
    ssd_rd *r = p;
    if (!r) return;
    ssd_reader_close(r->r);
    if (r->d) dataset_put(r->d);
    free(r->tmp.boxes), free(r->tmp.labels), free(r->tmp.nbox), free(r->tmp.image_id), free(r->tmp.size);
    free(r);
}

static int rd_open(const void *cfgp, int rank, int world, char *const *paths, int npaths, void **out, tk_err *e) {
    const ssd_wl_config *cfg = cfgp;
    *out = NULL;
    ssd_rd *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = dataset_get(paths, npaths, &r->d, e);
    if (!rc) rc = ssd_reader_open(&cfg->data, r->d, rank, world, &r->r, e);
    if (!rc) {
        r->b = ssd_reader_per_rank(r->r), r->M = cfg->data.max_boxes, r->device_jitter = cfg->data.device_jitter;
        r->tmp.boxes = calloc((size_t)r->b * r->M * 4, sizeof(float));
        r->tmp.labels = calloc((size_t)r->b * r->M, sizeof(int32_t));
        r->tmp.nbox = calloc((size_t)r->b, sizeof(int32_t));
        r->tmp.image_id = calloc((size_t)r->b, sizeof(int64_t));
        r->tmp.size = calloc((size_t)r->b * 2, sizeof(int32_t));
        if (!r->tmp.boxes || !r->tmp.labels || !r->tmp.nbox || !r->tmp.image_id || !r->tmp.size)
            rc = tk_err_set(e, TK_EIO, "out of host memory");
    }
    if (rc) rd_close(r);
    else *out = r;
    return rc;
}

static uint64_t rd_count(void *p) { return (uint64_t)ssd_dataset_count(((ssd_rd *)p)->d); }

static int rd_batch(void *p, int64_t step, int64_t spe, void *const *fields, tk_err *e) {
    ssd_rd *r = p;
    if (r->device_jitter) r->tmp.image = NULL, r->tmp.image_u8 = fields[0], r->tmp.jobs = fields[4];
    else r->tmp.image = fields[0];
    TRY(ssd_reader_batch(r->r, step, spe, &r->tmp, e));
    float *gt = fields[1];
    int32_t *lab = fields[2], *off = fields[3];
    int32_t k = 0;
    for (int n = 0; n < r->b; n++) {
        off[n] = k;
        for (int j = 0; j < r->tmp.nbox[n]; j++, k++) {
            memcpy(gt + (size_t)k * 4, r->tmp.boxes + ((size_t)n * r->M + j) * 4, 16);
            lab[k] = r->tmp.labels[(size_t)n * r->M + j];
        }
    }
    off[r->b] = k;
    const size_t room = (size_t)r->b * r->M;
    memset(gt + (size_t)k * 4, 0, (room - (size_t)k) * 16);
    memset(lab + k, 0, (room - (size_t)k) * 4);
    return 0;
}

// ---- MLLOG ----

// closed_ssd's optimizer keys (rules 1.0.0 and 1.1.0; NVIDIA's v1.1 logs: opt_base_learning_rate,
// opt_weight_decay, opt_learning_rate_warmup_steps, opt_learning_rate_warmup_factor (0: the
// warm-up starts from 0), opt_learning_rate_decay_boundary_epochs), from the "optimizer" section.
static const tk_opt_mllog_key opt_mllog_names[] = {
    {"opt_base_learning_rate", TK_OPTV_BASE_LR, 'g', NULL},
    {"opt_weight_decay", TK_OPTV_WEIGHT_DECAY, 'g', NULL},
    {"opt_learning_rate_warmup_steps", TK_OPTV_WARMUP_STEPS, 'i', NULL},
    {"opt_learning_rate_warmup_factor", TK_OPTV_ZERO, 'i', NULL},
    {"opt_learning_rate_decay_boundary_epochs", TK_OPTV_MILESTONE_EPOCHS, 0, NULL},
    {NULL, 0, 0, NULL}};

// model_bn_span: the images a BatchNorm's statistics span (one rank's batch: no BN groups here);
// max_samples: SSDCropping's attempts per chosen option (the reference's num_cropping_iterations).
static int wl_mllog_hparams(void *model, const tk_run_cfg *run, tk_mllog *L, tk_err *e) {
    const ssd_wl *w = model;
    (void)run;
    TRY(TK_MLLOG_EVENT(L, "model_bn_span", json_integer(w->b), NULL, e));
    return TK_MLLOG_EVENT(L, "max_samples", json_integer(w->cfg.data.crop_tries), NULL, e);
}

// closed_ssd's weights_initialization name (NVIDIA's MXNet names, the rules' 119) of one of our
// tensors, or 0 (conf.K: packed with loc.K, which NVIDIA's one convpredictor per map covers; a
// tensor the names lack). MXNet's BasicBlockV1 numbers a stage's convolutions in order, each
// block's body (conv1, conv2) then its downsample; a BatchNorm takes its convolution's number.
static int mlperf_name(const char *ours, char *buf, size_t n) {
    static const char *const stage_of[3] = {"model.layer1.4.", "model.layer1.5.", "model.layer2.0."};
    const char *r = ours;
    int k, i, j, len = 0;
    const char *kind = NULL;
    if (strcmp(r, "model.layer1.0.weight") == 0) return snprintf(buf, n, "ssd0_resnetmlperf0_conv0_weight") > 0;
    if (strncmp(r, "model.layer1.1.", 15) == 0)
        return snprintf(buf, n, "ssd0_resnetmlperf0_batchnorm0_%s", strcmp(r + 15, "weight") ? "beta" : "gamma") > 0;
    for (int s = 0; s < 3; s++) {
        const size_t pl = strlen(stage_of[s]);
        if (strncmp(r, stage_of[s], pl) || sscanf(r + pl, "%d.%n", &i, &len) != 1) continue;
        const char *t = r + pl + len, *dot = strrchr(t, '.');
        const int down = s > 0; // (layer1 keeps 64 channels at stride 1: no downsample)
        int c;
        if (strncmp(t, "downsample.", 11) == 0) c = 2, kind = t[11] == '0' ? "conv" : "batchnorm";
        else if (sscanf(t, "conv%d", &j) == 1) c = j - 1, kind = "conv";
        else if (sscanf(t, "bn%d", &j) == 1) c = j - 1, kind = "batchnorm";
        else return 0;
        const int idx = i == 0 ? c : 2 * i + c + down;
        const char *leaf = strcmp(kind, "conv") == 0 ? "weight" : strcmp(dot + 1, "weight") ? "beta" : "gamma";
        return snprintf(buf, n, "ssd0_resnetmlperf0_stage%d_%s%d_%s", s + 1, kind, idx, leaf) > 0;
    }
    if (sscanf(r, "additional_blocks.%d.%d.%n", &k, &j, &len) == 2)
        return snprintf(buf, n, "ssd0_expand_%sconv%d_%s", j == 0 ? "trans_" : "", k, r + len) > 0;
    if (sscanf(r, "loc.%d.%n", &k, &len) == 1) return snprintf(buf, n, "ssd0_convpredictor%d_conv0_%s", k, r + len) > 0;
    return 0;
}

static int wl_mllog_weights(void *model, tk_mllog *L, tk_err *e) {
    const tk_params *P = ((ssd_wl *)model)->net->P;
    for (int i = 0; i < P->ndense; i++) {
        char n[96];
        if (!mlperf_name(P->p[i].name, n, sizeof n)) continue;
        TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", n), e));
    }
    return 0;
}

const tk_workload tk_workload_ssd = {
    .version = TK_WORKLOAD_V6, .name = "ssd", .metric = "map", .precisions = ssd_precisions,
    .summary = "SSD300-ResNet34 (MLPerf Training v1.x object detection, COCO 2017), target COCO bbox mAP",
    .sections = ssd_sections,
    .config = config_parse, .config_free = config_free,
    .create = wl_create, .destroy = wl_destroy, .init_weights = wl_init_weights, .weights_loaded = wl_weights_loaded,
    .reader_open = rd_open, .reader_close = rd_close, .reader_count = rd_count, .read_batch = rd_batch,
    .batch = wl_batch,
    .step = wl_step, .graph_key = wl_graph_key,
    .evalset_load = ssd_evalset_load, .evalset_count = ssd_evalset_count, .evalset_free = ssd_evalset_free,
    .evaluate = ssd_evaluate,
    .import = wl_import,
    .opt_mllog = opt_mllog_names, .mllog_hparams = wl_mllog_hparams, .mllog_weights = wl_mllog_weights,
    .warmup = 1, // (cuDNN's plans)
};
