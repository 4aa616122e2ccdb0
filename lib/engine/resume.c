// A run's checkpoints: the metadata it writes, --resume and --init-checkpoint (resume.h).
#include "engine/resume.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/ckpt.h"

int tk_resume_save(tk_instance *I, const char *path, int64_t step, int64_t batch, int64_t steps_per_epoch,
                   tk_err *e) {
    char hash[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)I->hash);
    // The configuration that made the model: the workload's execution sections (how the ranks
    // split the work) are left out, as from the hash, so runs that differ only there write the
    // same bytes.
    json_t *eff = json_copy(I->effective);
    for (const char *const *k = I->wl->sections; k && *k; k++) json_object_del(eff, *k);
    char *cfg = json_dumps(eff, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(eff);
    tk_ckpt_meta m = {.workload = I->wl->name, .step = step, .samples_seen = step * batch,
                      .epoch = step / steps_per_epoch, .config_hash = hash, .seed = I->run.seed, .config = cfg,
                      .world_size = I->dist.world};
    json_t *meta = tk_ckpt_meta_json(&m);
    free(cfg);
    int rc = tk_instance_save(I, path, meta, e);
    json_decref(meta);
    return rc;
}

int tk_resume_load(tk_instance *I, const char *path, int64_t *step, int *verified, tk_err *e) {
    json_t *meta = NULL;
    tk_ckpt_meta m;
    TRY(tk_instance_load(I, path, 0, &meta, verified, e));
    int rc = tk_ckpt_meta_parse(meta, path, &m, e);
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)I->hash);
    if (!rc && (!m.config_hash || strcmp(m.config_hash, want) != 0)) {
        rc = tk_err_set(e, TK_EUSAGE, "%s: written with another configuration (config_hash %s, now %s)", path,
                        m.config_hash ? m.config_hash : "missing", want);
        tk_err_hint(e, "resume with the same --config, --set and --seed");
    }
    if (!rc && m.step < 0) {
        rc = tk_err_set(e, TK_EDATA, "checkpoint metadata 'step' is missing");
        tk_err_where(e, "%s", path);
    }
    json_decref(meta);
    if (!rc) *step = m.step;
    return rc ? rc : tk_instance_write_step(I, m.step, e);
}

// Every tensor of the file is verified, those it does not take too (its optimizer state): a file
// that starts a run is whole. An importer reads what it takes, so the whole file is read and
// checked first (once more for those tensors: it happens once a run). A trainkit checkpoint's
// metadata is checked as every reader checks it.
int tk_resume_init(tk_instance *I, const char *path, int *verified, tk_err *e) {
    tk_st_file *f;
    tk_ckpt_meta m;
    int unchecked = 0, rc = 0;
    TRY(tk_st_open(&f, path, e));
    const char *fmt = tk_st_meta(f, "format");
    if (fmt && strcmp(fmt, TK_CKPT_FORMAT) == 0) rc = tk_ckpt_meta_parse(f->meta, path, &m, e);
    if (!rc && I->wl->import) rc = tk_ckpt_verify(f, NULL, &unchecked, e);
    tk_st_close(f);
    TRY(rc);
    *verified = unchecked == 0;
    if (I->wl->import) return I->wl->import(I->model, path, e);
    return tk_instance_load(I, path, TK_CKPT_MODEL_ONLY, NULL, verified, e);
}
