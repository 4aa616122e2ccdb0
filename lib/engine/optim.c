// The engine's optimizer (optim.h).
#include "engine/optim.h"

#include <string.h>

#include "engine/cfg.h"
#include "sgd.h"

int tk_optim_config_parse(json_t *root, const char *file, tk_optim_cfg *o, tk_err *e) {
    static const char *const keys[] = {"name", "base_lr", "warmup_steps", "decay_start_step", "decay_steps",
                                       "poly_power", "min_lr", NULL};
    static const char *const names[] = {"sgd", NULL};
    memset(o, 0, sizeof *o);
    int k;
    TRY(tk_cfg_keys(root, file, "optimizer", keys, e));
    TRY(tk_cfg_enum(root, file, "optimizer.name", names, -1, &k, e));
    snprintf(o->name, sizeof o->name, "%s", names[k]);
    TRY(tk_cfg_num(root, file, "optimizer.base_lr", 0, 1e6, &o->lr.base_lr, e));
    TRY(tk_cfg_int(root, file, "optimizer.warmup_steps", 0, INT64_MAX, &o->lr.warmup_steps, e));
    TRY(tk_cfg_int(root, file, "optimizer.decay_start_step", 0, INT64_MAX, &o->lr.decay_start, e));
    TRY(tk_cfg_int(root, file, "optimizer.decay_steps", 0, INT64_MAX, &o->lr.decay_steps, e));
    TRY(tk_cfg_num(root, file, "optimizer.poly_power", 0, 100, &o->lr.power, e));
    TRY(tk_cfg_num(root, file, "optimizer.min_lr", 0, 1e6, &o->lr.min_lr, e));
    return 0;
}

double tk_optim_lr_at(const tk_optim_cfg *o, int64_t step) { return tk_lr_at(&o->lr, step); }

int tk_optim_init(tk_optim *o, const tk_optim_cfg *cfg, tk_params *P, tk_err *e) {
    (void)e;
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->c = P->c;
    return 0;
}

void tk_optim_release(tk_optim *o) {
    if (o->state) tk_free(o->c, o->state);
    o->state = NULL;
}

int tk_optim_schedule(tk_optim *o, int64_t *step, float *lr, tk_err *e) {
    return tk_lr_schedule(o->c, &o->cfg.lr, step, lr, e);
}

int tk_optim_update(tk_optim *o, tk_params *P, const float *lr, const int64_t *step, tk_err *e) {
    (void)step;
    return tk_sgd_update(o->c, P->dense_w, P->dense_g, P->dense_n, lr, P->copy, P->copy ? P->copy_type : TK_F32, e);
}
