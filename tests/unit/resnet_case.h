// What the ResNet tests share (tests/unit/test_resnet.c, tests/gpu/test_resnet_step.c): the model
// made through the engine's instance (engine/instance.h), as train-step makes it, one rank.
#ifndef TK_TEST_RESNET_CASE_H
#define TK_TEST_RESNET_CASE_H

#include "wl_case.h"
#include "workloads/resnet/resnet.h"

// ResNet of the sections in text (a JSON object of "model" and "data", "cfg.json" in messages)
// with global batch `batch` and train.seed `seed`, on c: the instance (its model I->model, an
// rn_model), or NULL with e filled. rn_free after.
static inline tk_instance *rn_make(const char *text, int64_t batch, int64_t seed, tk_ctx *c, tk_err *e) {
    return tk_case_create(tk_case_config("resnet", text, batch, seed, e), c, e);
}

static inline void rn_free(tk_instance *I) { tk_case_free(I); }

#endif
