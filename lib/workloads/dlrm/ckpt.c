// DLRM's checkpoints and step dumps (ckpt.h). The tensors and their names are the model's
// (model.c); writing, reading and checking them is the engine's (lib/engine/ckpt.h, dump.c).
#include "workloads/dlrm/ckpt.h"
#include "workloads/dlrm/hybrid.h"
#include "workloads/dlrm/model.h"

int tk_dlrm_weights_loaded(void *model, tk_err *e) {
    TRY(tk_dlrm_refresh_copies(model, e));
    return tk_dlrm_hybrid_refresh(model, e); // collective; a rank that failed its load is missed within the timeout
}

int tk_dlrm_dump_describe(void *model, tk_wl_dump *d, tk_err *e) {
    const tk_dlrm *m = model;
    const tk_dlrm_config *cfg = &m->cfg;
    const int64_t B = cfg->batch, b = m->b, T = cfg->num_tables; // (one rank: b = B)
    (void)e;
    d->batch[0] = (tk_wl_tensor){.name = "batch.label", .dtype = TK_U8, .ndim = 1, .shape = {b}};
    d->batch[1] = (tk_wl_tensor){.name = "batch.dense", .dtype = TK_I32, .ndim = 2, .shape = {b, cfg->num_dense}};
    d->batch[2] = (tk_wl_tensor){.name = "batch.cat", .dtype = TK_I32, .ndim = 2, .shape = {B, T}};
    d->extra[d->nextra++] = (tk_wl_tensor){.name = "grad.emb_out", .dtype = TK_F32, .ndim = 3,
                                           .shape = {B, T, cfg->emb_dim}, .src = m->demb, .bf16 = m->act == TK_BF16};
    return 0;
}
