// DLRM's checkpoints and step dumps (ckpt.h). The tensors and their names are the model's
// (model.c); writing, reading and checking them is the engine's (lib/engine/ckpt.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "engine/ckpt.h"
#include "workloads/dlrm/ckpt.h"
#include "workloads/dlrm/hybrid.h"
#include "workloads/dlrm/model.h"
#include "workloads/dlrm/step.h"

#define MAX_ENTRIES (4 * TK_DLRM_MAX_LAYERS + TK_DLRM_MAX_TABLES + 16)

static void set2(tk_st_tensor *t, const char *name, tk_dtype dt, int ndim, int64_t d0, int64_t d1) {
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%.*s", (int)sizeof t->name - 1, name);
    t->dtype = dt;
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
}

int tk_dlrm_weights_loaded(void *model, tk_err *e) {
    TRY(tk_dlrm_refresh_copies(model, e));
    return tk_dlrm_hybrid_refresh(model, e); // collective; a rank that failed its load is missed within the timeout
}

int tk_dlrm_dump_step(void *model, const char *path, tk_err *e) {
    tk_dlrm *m = model;
    if (m->comm)
        return tk_err_set(e, TK_EUSAGE, "--dump-step is not supported with the exchange step (several ranks, "
                                        "--force-exchange or --hybrid-embedding) yet");
    const tk_dlrm_config *cfg = &m->cfg;
    const int B = cfg->batch, T = cfg->num_tables, D = cfg->emb_dim;
    tk_ckpt_entry *pe = NULL, ent[MAX_ENTRIES];
    int np;
    TRY(tk_ckpt_entries(m->P, &pe, &np, e));
    if (np > MAX_ENTRIES - 8 - 2 * m->nlayers) {
        free(pe);
        return tk_err_set(e, TK_EINTERNAL, "dlrm: too many tensors for a dump");
    }
    memcpy(ent, pe, (size_t)np * sizeof *ent);
    free(pe);
    int n = np;
    // Snapshot the weights before the step (the step updates them in place).
    size_t pbytes = (size_t)((char *)m->tables - (char *)m->dense_w) +
                    (size_t)m->rows_total * D * tk_dtype_size(cfg->table_dtype);
    char *snap = malloc(pbytes);
    float *loss = malloc(4);
    if (!snap || !loss) {
        free(snap);
        free(loss);
        return tk_err_set(e, TK_EIO, "out of host memory");
    }
    int rc = tk_memcpy_d2h(m->c, snap, m->dense_w, pbytes, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    for (int i = 0; i < np; i++) {
        ent[i].src = snap + ((const char *)ent[i].src - (const char *)m->dense_w);
        ent[i].dev = 0;
    }
    set2(&ent[n].t, "batch.label", TK_U8, 1, B, 0), ent[n].src = m->in_label, ent[n++].dev = 1;
    set2(&ent[n].t, "batch.dense", TK_I32, 2, B, cfg->num_dense), ent[n].src = m->in_dense, ent[n++].dev = 1;
    set2(&ent[n].t, "batch.cat", TK_I32, 2, B, T), ent[n].src = m->in_cat, ent[n++].dev = 1;
    double acc[2] = {0, 0};
    if (!rc) rc = tk_memset0(m->c, m->loss_acc, 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_dlrm_fwd_bwd(m, e); // (the engine's update of the dense span: after all of the dump)
    if (!rc) rc = tk_dlrm_after_update(m, e);
    if (!rc) rc = tk_memcpy_d2h(m->c, acc, m->loss_acc, 16, TK_STREAM_COMPUTE, e);
    if (!rc) rc = tk_ctx_sync(m->c, e);
    *loss = (float)acc[0];
    set2(&ent[n].t, "loss", TK_F32, 1, 1, 0), ent[n].src = loss, ent[n++].dev = 0;
    char name[TK_PARAM_NAME + 8];
    for (int l = 0; l < m->nlayers; l++) { // the layer names are short ("top_mlp.4.weight")
        snprintf(name, sizeof name, "grad.%.100s", m->P->p[m->pidx[2 * l]].name);
        set2(&ent[n].t, name, TK_F32, 2, m->L[l].out, m->L[l].in), ent[n].src = m->L[l].dW, ent[n++].dev = 1;
        snprintf(name, sizeof name, "grad.%.100s", m->P->p[m->pidx[2 * l + 1]].name);
        set2(&ent[n].t, name, TK_F32, 1, m->L[l].out, 0), ent[n].src = m->L[l].db, ent[n++].dev = 1;
    }
    ent[n].t = (tk_st_tensor){.name = "grad.emb_out", .dtype = TK_F32, .ndim = 3, .shape = {B, T, D}};
    ent[n].src = m->demb, ent[n].dev = 1;
    // The bf16 path keeps demb in bf16: the dump's format is F32, so widen it (exactly) on the host.
    float *demb32 = NULL;
    if (!rc && m->act == TK_BF16) {
        size_t ne = (size_t)B * T * D;
        demb32 = malloc(ne * sizeof(float) + 1);
        if (!demb32) rc = tk_err_set(e, TK_EIO, "out of host memory");
        if (!rc) rc = tk_memcpy_d2h(m->c, demb32, m->demb, ne * 2, TK_STREAM_COMPUTE, e);
        if (!rc) rc = tk_ctx_sync(m->c, e);
        // In place from the back: element i (2 bytes at 2i) becomes 4 bytes at 4i >= 2i.
        for (size_t i = ne; !rc && i-- > 0;) {
            uint16_t h;
            memcpy(&h, (const char *)demb32 + 2 * i, 2);
            demb32[i] = tk_bf16_to_f32(h);
        }
        ent[n].src = demb32, ent[n].dev = 0;
    }
    n++;
    json_t *meta = json_pack("{s:s, s:s}", "format", "trainkit-step-dump-1", "workload", "dlrm");
    if (!rc) rc = tk_ckpt_write(m->c, path, ent, n, meta, e);
    json_decref(meta);
    free(demb32);
    free(snap);
    free(loss);
    return rc;
}
