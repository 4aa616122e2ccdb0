// What the 3D U-Net's tests share (tests/unit/test_unet3d_model.c, tests/gpu/test_unet3d_step.c):
// the model made through the engine's instance (engine/instance.h) as train-step makes it, one
// rank, its weights from the seed as the engine sets them (tk_instance_init_weights).
#ifndef TK_TEST_UNET3D_CASE_H
#define TK_TEST_UNET3D_CASE_H

#include <stdio.h>
#include <string.h>

#include "wl_case.h"
#include "workloads/unet3d/model.h"

#define U3_CASE_MAX 8
static tk_instance *u3_case_made_[U3_CASE_MAX]; // the instances behind u3_make's models

// The model of want's width, precision, crop and seed, global batch want->b (one rank), on c:
// the model, or NULL with e filled. The crop is set in the parsed configuration after its checks
// (a configuration wants a cubic crop, the sliding-window evaluation's windows; the model takes
// any sides that create accepts): the tests' small crops. u3_unmake after.
static inline u3_model *u3_make(tk_ctx *c, const u3_config *want, tk_err *e) {
    int k = 0;
    while (k < U3_CASE_MAX && u3_case_made_[k]) k++;
    if (k == U3_CASE_MAX) {
        tk_err_set(e, TK_EINTERNAL, "more than %d test models at once", U3_CASE_MAX);
        return NULL;
    }
    char text[160];
    snprintf(text, sizeof text, "{\"model\": {\"width\": %d, \"precision\": \"%s\"}}", want->width,
             want->bf16 ? "bf16" : "fp32");
    tk_instance *I = tk_case_config("unet3d", text, want->b, (int64_t)want->seed, e);
    if (I) memcpy(((u3_config *)I->cfg)->data.crop, want->data.crop, sizeof want->data.crop);
    I = tk_case_create(I, c, e);
    if (I && tk_instance_init_weights(I, want->seed, e)) {
        tk_case_free(I);
        I = NULL;
    }
    if (!I) return NULL;
    u3_case_made_[k] = I;
    return I->model;
}

// The instance of a model of u3_make (NULL: none).
static inline tk_instance *u3_case_instance(const u3_model *m) {
    for (int k = 0; m && k < U3_CASE_MAX; k++)
        if (u3_case_made_[k] && u3_case_made_[k]->model == m) return u3_case_made_[k];
    return NULL;
}

// Frees a model of u3_make and its instance (NULL: nothing).
static inline void u3_unmake(u3_model *m) {
    for (int k = 0; m && k < U3_CASE_MAX; k++)
        if (u3_case_made_[k] && u3_case_made_[k]->model == m) {
            tk_case_free(u3_case_made_[k]);
            u3_case_made_[k] = NULL;
        }
}

#endif
