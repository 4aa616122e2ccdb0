// What the model tests of several workloads share (resnet_case.h, unet3d_case.h): a workload's
// model made through the engine's instance (engine/instance.h), as train-step makes it, one rank.
#ifndef TK_TEST_WL_CASE_H
#define TK_TEST_WL_CASE_H

#include <jansson.h>
#include <stdlib.h>

#include "engine/instance.h"
#include "engine/registry.h"

// The instance of workload's configuration: the sections in text (a JSON object, "cfg.json" in
// messages) and "train" (global batch `batch`, train.seed `seed`, one epoch) and "target" (the
// workload's metric), configured, its model not made yet (the caller may adjust the parsed I->cfg):
// a new instance, or NULL with e filled.
static inline tk_instance *tk_case_config(const char *workload, const char *text, int64_t batch, int64_t seed,
                                          tk_err *e) {
    const tk_workload *wl = tk_workload_find(workload);
    tk_instance *I = calloc(1, sizeof *I);
    json_error_t je = {0};
    json_t *root = json_loads(text, 0, &je);
    if (!wl || !I || !root) {
        free(I), json_decref(root);
        tk_err_set(e, TK_EINTERNAL, "bad test case: %s %s", workload, je.text);
        return NULL;
    }
    json_object_set_new(root, "workload", json_string(workload));
    json_object_set_new(root, "train", json_pack("{s:I, s:i, s:i, s:I}", "global_batch_size", (json_int_t)batch,
                                                 "max_epochs", 1, "evals_per_epoch", 1, "seed", (json_int_t)seed));
    json_object_set_new(root, "target", json_pack("{s:s, s:f}", "metric", wl->metric, wl->metric, 0.5));
    int rc = tk_instance_config(I, root, "cfg.json", NULL, 0, NULL, e);
    json_decref(root);
    if (rc) {
        tk_instance_destroy(I);
        free(I);
        return NULL;
    }
    return I;
}

static inline void tk_case_free(tk_instance *I) {
    if (I) tk_instance_destroy(I);
    free(I);
}

// The model of configured instance I (NULL: NULL) made on c: I, or NULL with e filled (I freed).
static inline tk_instance *tk_case_create(tk_instance *I, tk_ctx *c, tk_err *e) {
    if (I && tk_instance_create(I, c, NULL, 0, e)) {
        tk_case_free(I);
        return NULL;
    }
    return I;
}

#endif
