// A run's setup (run.h): everything before run_start that can fail, then the directories, then
// the "config" line.
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/afile.h"
#include "engine/data.h"
#include "engine/resume.h"
#include "engine/run.h"

// --resume or --init-checkpoint (resume.h), with a note for a file without checksums.
static int start_from(tk_run *r, tk_err *e) {
    const char *path = r->o->resume ? r->o->resume : r->o->init_ckpt;
    int verified = 1;
    if (r->o->resume) TRY(tk_resume_load(&r->I, path, &r->step, &verified, e));
    else TRY(tk_resume_init(&r->I, path, &verified, e));
    if (!verified) {
        char msg[4400];
        snprintf(msg, sizeof msg, "%s: no tensor checksums (%s): loaded unverified", path,
                 r->o->resume ? "written by an older trainkit" : "a file of another writer");
        tk_run_note(r, msg);
    }
    return 0;
}

// The staging slots the model wants (workload.h stage_depth), capped by TK_STAGE_DEPTH.
static int stage_depth(const tk_run *r, int *depth, tk_err *e) {
    const tk_workload *wl = r->wl;
    *depth = wl->version >= TK_WORKLOAD_V7 && wl->stage_depth ? wl->stage_depth(r->I.model) : 2;
    if (*depth < 2 || *depth > TK_STAGE_MAX_SLOTS)
        return tk_err_set(e, TK_EINTERNAL, "workload %s: %d staging slots", wl->name, *depth);
    const char *cap = getenv("TK_STAGE_DEPTH");
    if (cap && *cap) {
        if (strcmp(cap, "2") != 0 && strcmp(cap, "3") != 0)
            return tk_err_set(e, TK_EUSAGE, "TK_STAGE_DEPTH='%s': expected 2 or 3", cap);
        if (*cap - '0' < *depth) *depth = *cap - '0';
    }
    return 0;
}

// The table's batch (workload.h), and what the engine derives from it: the fields' byte sizes (the
// loader's layout) and the model's input buffers.
static int batch_fields(tk_run *r, tk_err *e) {
    const tk_workload *wl = r->wl;
    if (wl->version < TK_WORKLOAD_V5 || !wl->batch)
        return tk_err_set(e, TK_EINTERNAL, "workload %s: table version %d, not %d", wl->name, wl->version,
                          TK_WORKLOAD_V5);
    int n = wl->batch(r->I.model, r->fields);
    if (n < 1 || n > TK_BATCH_MAX_FIELDS)
        return tk_err_set(e, TK_EINTERNAL, "workload %s: a batch of %d fields", wl->name, n);
    r->L.nfields = n;
    for (int f = 0; f < n; f++) {
        r->L.bytes[f] = tk_wl_field_bytes(&r->fields[f]);
        r->inputs[f] = r->fields[f].input;
    }
    return 0;
}

// Configuration, data, model, evaluation set: everything before run_start.
int tk_run_init(tk_run *r, tk_backend be, tk_err *e) {
    const tk_train_opts *o = r->o;
    // One process per GPU: rank i uses the i-th GPU of its host.
    TRY(tk_ctx_create(&r->c, be, be == TK_BACKEND_CUDA ? o->ri.local_rank : 0, e));
    if (o->threads > 0) r->c->threads = (int)o->threads;
    json_t *root;
    char *meta = NULL;
    TRY(tk_config_load(o->config, &root, e));
    int rc = tk_data_meta(o->train, o->ntrain, &meta, e);
    if (!rc) rc = tk_instance_config(&r->I, root, o->config, o->sets, o->nsets, meta, e);
    r->made = 1;
    free(meta);
    json_decref(root);
    TRY(rc);
    r->wl = r->I.wl;
    r->ed.metric = r->wl->metric;
    if (o->workload && strcmp(o->workload, r->wl->name) != 0)
        return tk_err_set(e, TK_EUSAGE, "--workload %s, but %s is a %s config", o->workload, o->config, r->wl->name);
    // --dump-step on one rank writes the plain one-rank step (the same arithmetic as the exchange
    // step a workload may prefer, e.g. DLRM's hybrid embedding): no communicator for it.
    int want_comm = o->ri.world > 1 || (!o->dump && r->wl->wants_comm && r->wl->wants_comm(r->I.cfg));
    if (o->ri.world > 1 && o->dump) return tk_err_set(e, TK_EUSAGE, "--dump-step is not supported with several ranks yet");
    if (want_comm) TRY(tk_comm_create(r->c, &o->ri, o->rendezvous, o->comm_timeout, &r->comm, e));
    // The data: its size gives the epoch.
    void *rd;
    TRY(r->wl->reader_open(r->I.cfg, o->ri.rank, o->ri.world, o->train, o->ntrain, &rd, e));
    r->count = (int64_t)r->wl->reader_count(rd);
    r->B = r->I.run.batch;
    r->steps_per_epoch = r->count / r->B;
    if (r->steps_per_epoch == 0) {
        r->wl->reader_close(rd);
        tk_err_set(e, TK_EDATA, "the training data holds %lld records, fewer than one batch (%lld)", (long long)r->count,
                   (long long)r->B);
        return tk_err_where(e, "%s", o->train[0]);
    }
    r->epoch_samples = r->steps_per_epoch * r->B;
    r->total_steps = r->steps_per_epoch * r->I.run.max_epochs;
    const tk_run_cfg *rcfg = &r->I.run;
    int64_t every = o->eval_every > 0 ? o->eval_every : rcfg->eval_every_samples;
    r->eval_every_steps = every > 0 ? (every + r->B - 1) / r->B
                                    : (r->steps_per_epoch + rcfg->evals_per_epoch - 1) / rcfg->evals_per_epoch;
    if (r->eval_every_steps < 1) r->eval_every_steps = 1;
    r->eval_first_step = o->eval_every <= 0 && rcfg->eval_offset_samples > 0
                             ? (rcfg->eval_offset_samples + r->B - 1) / r->B
                             : r->eval_every_steps;
    rc = tk_instance_create(&r->I, r->c, r->comm, o->comm_timeout, e);
    if (!rc) rc = tk_instance_optimizer(&r->I, r->steps_per_epoch, e);
    if (!rc) rc = batch_fields(r, e);
    if (!rc && o->profile) rc = tk_instance_profile(&r->I, e);
    if (!rc && !o->resume) rc = tk_instance_init_weights(&r->I, rcfg->seed, e);
    if (!rc && (o->resume || o->init_ckpt)) rc = start_from(r, e);
    if (!rc && !o->dump && r->wl->prepare) {
        json_t *line = NULL;
        rc = r->wl->prepare(r->I.model, rd, r->steps_per_epoch, &line, e);
        if (!rc && line) rc = tk_run_emit(r, line, e);
    }
    r->wl->reader_close(rd);
    int depth = 2;
    if (!rc && !o->dump) rc = stage_depth(r, &depth, e);
    if (!rc && !o->dump) rc = tk_stager_init(&r->st, r->c, &r->L, depth, e);
    if (!rc && o->neval > 0 && !o->dump) rc = r->wl->evalset_load(r->I.model, o->eval, o->neval, &r->es, e);
    return rc;
}

// The checkpoint and evaluation directories, once everything that can fail in the
// initialization has not: a run that cannot start leaves no empty directory behind.
int tk_run_make_dirs(tk_run *r, tk_err *e) {
    const tk_train_opts *o = r->o;
    for (const char *const *d = (const char *const[]){o->ckpt_dir, o->eval_dir, NULL}; *d; d++) {
        if (mkdir(*d, 0777) != 0 && errno != EEXIST) return tk_err_errno(e, errno, "%s: cannot create the directory", *d);
        // A run killed mid-write (kill -9) left its checkpoint's temporary file: ours to remove.
        if (tk_run_rank0(r)) TRY(tk_afile_remove_stale(*d, ".safetensors", NULL, e));
    }
    return 0;
}

int tk_run_config_line(tk_run *r, tk_backend be, tk_err *e) {
    json_t *c = json_pack("{s:s, s:s, s:s, s:O, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:i, s:i}", "type", "config",
                          "workload", r->wl->name, "backend", tk_ctx_describe(r->c), "config", r->I.effective,
                          "train_samples", (json_int_t)r->count, "eval_samples",
                          (json_int_t)(r->es ? r->wl->evalset_count(r->es) : 0), "steps_per_epoch",
                          (json_int_t)r->steps_per_epoch, "eval_every_steps", (json_int_t)r->eval_every_steps,
                          "start_step", (json_int_t)r->step, "params", (json_int_t)tk_params_numel(&r->I.P), "graphs",
                          be == TK_BACKEND_CUDA && !r->o->no_graphs, "world_size", r->o->ri.world, "rank", r->o->ri.rank);
    return tk_run_emit(r, c, e);
}
