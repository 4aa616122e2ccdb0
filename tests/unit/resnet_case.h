// What the ResNet tests share (tests/unit/test_resnet.c, tests/gpu/test_resnet_step.c): the model
// made through the engine's instance (engine/instance.h), as train-step makes it, one rank.
#ifndef TK_TEST_RESNET_CASE_H
#define TK_TEST_RESNET_CASE_H

#include <jansson.h>
#include <stdlib.h>

#include "engine/instance.h"
#include "workloads/resnet/resnet.h"

// ResNet of the sections in text (a JSON object of "model" and "data", "cfg.json" in messages)
// with global batch `batch` and train.seed `seed`, on c: the instance (its model I->model, an
// rn_model), or NULL with e filled. rn_free after.
static inline tk_instance *rn_make(const char *text, int64_t batch, int64_t seed, tk_ctx *c, tk_err *e) {
    tk_instance *I = calloc(1, sizeof *I);
    json_error_t je;
    json_t *root = json_loads(text, 0, &je);
    if (!I || !root) {
        free(I), json_decref(root);
        tk_err_set(e, TK_EINTERNAL, "bad test JSON: %s", je.text);
        return NULL;
    }
    json_object_set_new(root, "workload", json_string("resnet"));
    json_object_set_new(root, "train", json_pack("{s:I, s:i, s:i, s:I}", "global_batch_size", (json_int_t)batch,
                                                 "max_epochs", 1, "evals_per_epoch", 1, "seed", (json_int_t)seed));
    json_object_set_new(root, "target", json_pack("{s:s, s:f}", "metric", "top1", "top1", 0.759));
    int rc = tk_instance_config(I, root, "cfg.json", NULL, 0, NULL, e);
    json_decref(root);
    if (!rc) rc = tk_instance_create(I, c, NULL, 0, e);
    if (rc) {
        tk_instance_destroy(I);
        free(I);
        return NULL;
    }
    return I;
}

static inline void rn_free(tk_instance *I) {
    if (I) tk_instance_destroy(I);
    free(I);
}

#endif
