// The 3D U-Net's evaluation (unet3d.h): the MLPerf reference's sliding-window inference over each
// whole eval case (kernels/swin.h: windows of the training crop, overlap eval.overlap, Gaussian
// importance) through the model's eval forward, the Dice of kidney and tumor of each case
// (kernels/dice_score.h), and their mean over every case. Each rank keeps its cases (u3_cases_load:
// case i of the files' order on rank i % world) in the backend's memory; the ranks gather the
// cases' Dice and every rank computes the same mean over all of them in the files' order
// (tk_dice_mean over one shard: the mean of the cases, the same whatever the ranks; the reference
// on N GPUs takes the mean of its N shards' means instead, which differs when the shards differ
// in size).
#include <stdlib.h>
#include <string.h>

#include "dice_score.h"
#include "swin.h"
#include "workloads/unet3d/unet3d.h"

typedef struct u3_evalset {
    u3_cases cs;          // host: ids and shapes (the volumes freed once copied)
    float **image;        // device, per case
    uint8_t **label;
    int roi, B;           // windows: roi^3, B a forward
    size_t out_max;       // the most output voxels of a case
    float *map, *acc, *wsum, *dice, *x; // device: the importance map, the sums, (n, 2) Dice, inputs
    void *y, *ws;         // device: B windows' logits, the Dice's workspace
} u3_evalset;

void u3_evalset_free(void *model, void *set) {
    u3_evalset *es = set;
    if (!es) return;
    tk_ctx *c = u3_model_ctx(model);
    for (int i = 0; i < es->cs.n; i++) {
        if (es->image && es->image[i]) tk_free(c, es->image[i]);
        if (es->label && es->label[i]) tk_free(c, es->label[i]);
    }
    void *dev[] = {es->map, es->acc, es->wsum, es->dice, es->x, es->y, es->ws};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++)
        if (dev[i]) tk_free(c, dev[i]);
    free(es->image);
    free(es->label);
    u3_cases_free(&es->cs);
    free(es);
}

int64_t u3_evalset_count(const void *set) { return ((const u3_evalset *)set)->cs.total; }

// Case i's volumes into the backend's memory, its grid checked (the reference's failures, named by
// the case), the largest output kept for the sums.
static int load_case(tk_ctx *c, u3_evalset *es, int i, const u3_config *cfg, tk_err *e) {
    const u3_case *k = &es->cs.c[i];
    tk_swin_grid g;
    if (tk_swin_grid_init(&g, k->shape[0], k->shape[1], k->shape[2], es->roi, cfg->eval_overlap, e))
        return tk_err_where(e, "eval case_%05d", k->id);
    size_t out = (size_t)tk_swin_out_numel(&g);
    es->out_max = out > es->out_max ? out : es->out_max;
    const size_t n = (size_t)(k->shape[0] * k->shape[1] * k->shape[2]);
    TRY(tk_malloc(c, (void **)&es->image[i], n * sizeof(float), e));
    TRY(tk_malloc(c, (void **)&es->label[i], n, e));
    TRY(tk_memcpy_h2d(c, es->image[i], k->image, n * sizeof(float), TK_STREAM_COMPUTE, e));
    return tk_memcpy_h2d(c, es->label[i], k->label, n, TK_STREAM_COMPUTE, e);
}

int u3_evalset_load(void *model, char *const *paths, int npaths, void **out, tk_err *e) {
    const tk_dist *d = u3_model_config(model)->dist;
    *out = NULL;
    if (!d) return tk_err_set(e, TK_EINTERNAL, "unet3d: the eval set before the model's ranks");
    u3_cases cs;
    TRY(u3_cases_load(paths, npaths, d->rank, d->world, &cs, e));
    if (cs.total == 0) {
        u3_cases_free(&cs);
        return tk_err_set(e, TK_EDATA, "%s: the eval set holds no case", paths[0]);
    }
    return u3_evalset_from_cases(model, &cs, out, e);
}

int u3_evalset_from_cases(void *model, u3_cases *cases, void **out, tk_err *e) {
    const u3_config *cfg = u3_model_config(model);
    tk_ctx *c = u3_model_ctx(model);
    *out = NULL;
    u3_evalset *es = calloc(1, sizeof *es);
    if (!es) {
        u3_cases_free(cases);
        return tk_err_set(e, TK_EIO, "out of host memory");
    }
    es->cs = *cases;
    memset(cases, 0, sizeof *cases);
    int rc = 0;
    es->roi = cfg->data.crop[0];
    // windows a forward: eval.batch, at most this rank's batch (the model's buffers) and the kernels'
    es->B = cfg->eval_batch > 0 && cfg->eval_batch < cfg->b ? cfg->eval_batch : cfg->b;
    es->B = es->B < TK_SWIN_MAX_BATCH ? es->B : TK_SWIN_MAX_BATCH;
    if (!rc && es->B < 1) rc = tk_err_set(e, TK_EINTERNAL, "unet3d: eval batch %d", es->B);
    const int n = es->cs.n;
    if (!rc && (!(es->image = calloc((size_t)n + 1, sizeof *es->image)) ||
                !(es->label = calloc((size_t)n + 1, sizeof *es->label))))
        rc = tk_err_set(e, TK_EIO, "out of host memory");
    for (int i = 0; !rc && i < n; i++) rc = load_case(c, es, i, cfg, e);
    const size_t win = (size_t)es->roi * es->roi * es->roi, ab = tk_dtype_size(u3_act_type(model));
    if (!rc) rc = tk_malloc(c, (void **)&es->map, win * sizeof(float), e);
    if (!rc) rc = tk_malloc(c, (void **)&es->acc, (es->out_max + 1) * 3 * sizeof(float), e);
    if (!rc) rc = tk_malloc(c, (void **)&es->wsum, (es->out_max + 1) * sizeof(float), e);
    if (!rc) rc = tk_malloc(c, (void **)&es->dice, ((size_t)n + 1) * 2 * sizeof(float), e);
    if (!rc) rc = tk_malloc(c, (void **)&es->x, (size_t)es->B * win * sizeof(float), e);
    if (!rc) rc = tk_malloc(c, &es->y, (size_t)es->B * win * U3_CLASSES * ab, e);
    if (!rc) rc = tk_malloc(c, &es->ws, tk_dice_score_ws_bytes(c->backend) + 1, e);
    float *map = rc ? NULL : malloc(win * sizeof(float));
    if (!rc && !map) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) {
        tk_swin_gaussian(es->roi, map);
        rc = tk_memcpy_h2d(c, es->map, map, win * sizeof(float), TK_STREAM_COMPUTE, e);
    }
    if (!rc) rc = tk_ctx_sync(c, e);
    free(map);
    // the volumes are in the backend's memory now: the host copies go (the ids and shapes stay)
    for (int i = 0; !rc && i < n; i++) {
        free(es->cs.c[i].image), free(es->cs.c[i].label);
        es->cs.c[i].image = NULL, es->cs.c[i].label = NULL;
    }
    if (rc) {
        u3_evalset_free(model, es);
        return rc;
    }
    *out = es;
    return 0;
}

// Case i's Dice (kidney, tumor) into es->dice[2 i ..]: its windows in raster order, B at a time,
// gathered, through the network, weighted into the sums; then divided, argmax, counted.
static int eval_case(void *model, u3_evalset *es, int i, const u3_config *cfg, tk_err *e) {
    tk_ctx *c = u3_model_ctx(model);
    const u3_case *k = &es->cs.c[i];
    const tk_dtype act = u3_act_type(model);
    tk_swin_grid g;
    TRY(tk_swin_grid_init(&g, k->shape[0], k->shape[1], k->shape[2], es->roi, cfg->eval_overlap, e));
    const size_t out = (size_t)tk_swin_out_numel(&g);
    TRY(tk_memset0(c, es->acc, out * 3 * sizeof(float), TK_STREAM_COMPUTE, e));
    TRY(tk_memset0(c, es->wsum, out * sizeof(float), TK_STREAM_COMPUTE, e));
    for (int64_t w0 = 0; w0 < g.count; w0 += es->B) {
        const int B = g.count - w0 < es->B ? (int)(g.count - w0) : es->B;
        TRY(tk_swin_gather(c, TK_F32, es->image[i], &g, w0, B, TK_SWIN_PAD, 1, es->x, e));
        TRY(u3_forward_eval(model, es->x, B, es->y, e));
        TRY(tk_swin_accumulate(c, act, es->y, U3_CLASSES, &g, w0, B, es->map, es->acc, es->wsum, e));
    }
    return tk_dice_score(c, &g, es->acc, es->wsum, es->label[i], NULL, es->dice + 2 * (size_t)i, es->ws, e);
}

int u3_evaluate(void *model, void *set, double *metric, tk_err *e) {
    u3_evalset *es = set;
    const u3_config *cfg = u3_model_config(model);
    tk_ctx *c = u3_model_ctx(model);
    tk_dist *d = cfg->dist;
    const int n = es->cs.n, total = es->cs.total, world = d->world;
    tk_range_push("eval");
    int rc = 0;
    for (int i = 0; !rc && i < n; i++)
        if ((rc = eval_case(model, es, i, cfg, e))) tk_err_where(e, "eval case_%05d", es->cs.c[i].id);
    float *mine = malloc(((size_t)n + 1) * 2 * sizeof(float)), *all = malloc((size_t)total * 2 * sizeof(float));
    int64_t *got = malloc((size_t)world * sizeof *got);
    if (!rc && (!mine || !all || !got)) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = tk_dist_sync(d, e);
    if (!rc && n > 0) rc = tk_memcpy_d2h(c, mine, es->dice, (size_t)n * 2 * sizeof(float), TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(c, e);
    // round r: every rank's r-th case (case r world + rank of the files' order), as 8 bytes
    for (int r = 0; !rc && r * world < total; r++) {
        int64_t v = 0;
        if (r < n) memcpy(&v, mine + 2 * r, 8);
        rc = tk_dist_gather_i64(d, v, got, 0, e);
        for (int q = 0; !rc && q < world && r * world + q < total; q++) memcpy(all + 2 * (r * world + q), &got[q], 8);
    }
    float md[3];
    if (!rc) rc = tk_dice_mean(all, total, 1, md, e);
    if (!rc) *metric = md[2];
    free(mine), free(all), free(got);
    tk_range_pop();
    return rc;
}
