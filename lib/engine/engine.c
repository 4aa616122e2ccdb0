// The training loop shared by every workload (engine.h): initialization and MLLOG framing,
// the staged input path, CUDA-graph capture and replay, progress lines, evaluation cadence (in
// process or through a directory), checkpoints, resume, the stop at the target.
#include "engine/engine.h"

#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/jsonl.h"
#include "core/mllog.h"
#include "core/progress.h"
#include "engine/ckpt.h"
#include "engine/data.h"
#include "engine/follow.h"
#include "engine/instance.h"
#include "engine/loader.h"
#include "engine/runlog.h"
#include "gpu/comm.h"

typedef struct run {
    const tk_train_opts *o;
    const tk_workload *wl;
    tk_ctx *c;
    tk_comm *comm;
    tk_instance I;
    int made;
    void *es;                // the in-process eval set
    tk_mllog log;
    tk_runlog held;          // its lines until the run can start
    int64_t B, count, steps_per_epoch, epoch_samples, total_steps, eval_every_steps, eval_first_step;
    int64_t step;            // updates applied
    double t_run0;           // run_start (monotonic)
    double last, best;       // the metric: last and best evaluation
    int reached, eval_samples_logged;
    int64_t *pend;           // steps of checkpoints awaiting an external result, oldest first
    int npend, cap_pend;
    double wait_loader, wait_copy; // seconds the loop waited for decoded batches / their copies
    int device_loaders;      // loader threads whose reader writes device memory (device batches)
    tk_stager st;
    void *inputs[TK_BATCH_MAX_FIELDS];
    tk_batch_layout L;
} run;

static int rank0(const run *r) { return r->o->ri.rank == 0; }

static double epoch_num(const run *r, int64_t step) {
    return 1.0 + (double)(step * r->B) / (double)r->epoch_samples;
}

static int emit(const run *r, json_t *o, tk_err *e) {
    if (!rank0(r) || !r->o->out) {
        json_decref(o);
        return 0;
    }
    return tk_jsonl_emit(r->o->out, o, e);
}

static void note(const run *r, const char *msg) {
    if (rank0(r) && r->o->note) r->o->note(r->o->note_arg, msg);
}

// JSON has no NaN: an undefined number (no evaluation yet, a one-class eval set) is null.
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *meta_epoch(double ep) { return json_pack("{s:f}", "epoch_num", ep); }

static int better(const run *r, double v, double than) {
    return r->wl->lower_is_better ? v < than : v > than;
}

static int reaches(const run *r, double v) {
    return r->wl->lower_is_better ? v <= r->I.run.target : v >= r->I.run.target;
}

// ---- checkpoints ----

static json_t *ckpt_meta(run *r) {
    char hash[32], rng[64], buf[32], sbuf[32], ebuf[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->I.hash);
    snprintf(rng, sizeof rng, "philox4x32-10:%llu", (unsigned long long)r->I.run.seed);
    snprintf(buf, sizeof buf, "%lld", (long long)r->step);
    snprintf(sbuf, sizeof sbuf, "%lld", (long long)(r->step * r->B));
    snprintf(ebuf, sizeof ebuf, "%lld", (long long)(r->step / r->steps_per_epoch));
    // The configuration that made the model: the workload's execution sections (how the ranks
    // split the work) are left out, as from the hash, so runs that differ only there write the
    // same bytes.
    json_t *eff = json_copy(r->I.effective);
    for (const char *const *k = r->wl->sections; k && *k; k++) json_object_del(eff, *k);
    char *cfg = json_dumps(eff, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(eff);
    json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "format", "trainkit-checkpoint-1", "workload",
                          r->wl->name, "step", buf, "samples_seen", sbuf, "epoch", ebuf, "config_hash", hash, "rng", rng,
                          "config", cfg);
    free(cfg);
    return m;
}

static int save_ckpt(run *r, const char *dir, char *path, size_t n, tk_err *e) {
    snprintf(path, n, "%s/step-%lld.safetensors", dir, (long long)r->step);
    json_t *meta = ckpt_meta(r);
    int rc = tk_instance_save(&r->I, path, meta, e);
    json_decref(meta);
    if (rc) return rc;
    return emit(r, json_pack("{s:s, s:s, s:I, s:I}", "type", "checkpoint", "path", path, "step", (json_int_t)r->step,
                             "samples", (json_int_t)(r->step * r->B)),
                e);
}

static int parse_meta_i64(json_t *meta, const char *key, const char *path, int64_t *out, tk_err *e) {
    const char *s = json_string_value(json_object_get(meta, key));
    char *end;
    errno = 0;
    long long v = s ? strtoll(s, &end, 10) : 0;
    if (!s || *end || errno || v < 0) {
        tk_err_set(e, TK_EDATA, "checkpoint metadata '%s' is missing or not a number", key);
        tk_err_where(e, "%s", path);
        return TK_EDATA;
    }
    *out = v;
    return 0;
}

static int resume(run *r, tk_err *e) {
    const char *path = r->o->resume;
    json_t *meta = NULL;
    int verified = 1;
    TRY(tk_instance_load(&r->I, path, 0, &meta, &verified, e));
    if (!verified) {
        char msg[4400];
        snprintf(msg, sizeof msg, "%s: no tensor checksums (written by an older trainkit): loaded unverified", path);
        note(r, msg);
    }
    char want[32];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)r->I.hash);
    const char *have = json_string_value(json_object_get(meta, "config_hash"));
    int rc = 0;
    if (!have || strcmp(have, want) != 0) {
        rc = tk_err_set(e, TK_EUSAGE, "%s: written with another configuration (config_hash %s, now %s)", path,
                        have ? have : "missing", want);
        tk_err_hint(e, "resume with the same --config, --set and --seed");
    }
    if (!rc) rc = parse_meta_i64(meta, "step", path, &r->step, e);
    json_decref(meta);
    if (!rc) rc = tk_instance_write_step(&r->I, r->step, e);
    return rc;
}

// --init-checkpoint: weights to start from (MLPerf BERT's phase 2 starts from a converted phase-1
// checkpoint): a foreign file through the workload's importer, else a trainkit checkpoint of the
// same workload by tensor name (not its optimizer state or step).
// Every tensor of the file is verified, those it does not take too (its optimizer state): a file
// that starts a run is whole. An importer reads what it takes, so the whole file is read and
// checked first (once more for those tensors: it happens once a run).
static int init_checkpoint(run *r, tk_err *e) {
    const char *path = r->o->init_ckpt;
    int verified = 1;
    if (r->wl->import) {
        tk_st_file *f;
        int unchecked = 0;
        TRY(tk_st_open(&f, path, e));
        int rc = tk_ckpt_verify(f, NULL, &unchecked, e);
        tk_st_close(f);
        TRY(rc);
        verified = unchecked == 0;
        TRY(r->wl->import(r->I.model, path, e));
    } else {
        TRY(tk_instance_load(&r->I, path, TK_CKPT_MODEL_ONLY, NULL, &verified, e));
    }
    if (!verified) {
        char msg[4400];
        snprintf(msg, sizeof msg, "%s: no tensor checksums (a file of another writer): loaded unverified", path);
        note(r, msg);
    }
    return 0;
}

// ---- progress and evaluation ----

// Checks the loss accumulated since the last read; emits a progress line.
static int log_progress(run *r, double t0_window, int64_t steps_window, tk_err *e) {
    double loss;
    TRY(tk_instance_read_loss(&r->I, &loss, 1, e));
    if (!isfinite(loss)) {
        tk_err_set(e, TK_ENUMERIC, "training loss is %s at step %lld", isnan(loss) ? "NaN" : "Inf", (long long)r->step);
        return tk_err_hint(e, "lower optimizer.base_lr or lengthen optimizer.warmup_steps");
    }
    double dt = tk_now() - t0_window, per = steps_window > 0 ? 1e3 / (double)steps_window : 0;
    json_t *o = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "type", "progress", "step",
                          (json_int_t)r->step, "samples", (json_int_t)(r->step * r->B), "epoch",
                          epoch_num(r, r->step) - 1, "loss", loss, "lr", tk_optimizer_lr_at(&r->I.run.opt, r->step - 1),
                          "samples_per_s", dt > 0 ? (double)(steps_window * r->B) / dt : 0.0, "loader_wait_ms",
                          r->wait_loader * per, "copy_wait_ms", r->wait_copy * per);
    r->wait_loader = r->wait_copy = 0;
    return emit(r, o, e);
}

static int record_eval(run *r, double v, int64_t step, double secs, const char *ckpt, tk_err *e) {
    const char *metric = r->wl->metric;
    r->last = v;
    if (isnan(r->best) || better(r, v, r->best)) r->best = v;
    int reached = reaches(r, v);
    TRY(TK_MLLOG_EVENT(&r->log, "eval_accuracy", num(v), meta_epoch(epoch_num(r, step)), e));
    TRY(TK_MLLOG_END(&r->log, "eval_stop", NULL, meta_epoch(epoch_num(r, step)), e));
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:f}", "type", "eval", "metric", metric, "step", (json_int_t)step,
                          "samples", (json_int_t)(step * r->B), "epoch", epoch_num(r, step) - 1);
    json_object_set_new(o, metric, num(v));
    json_object_set_new(o, "target", json_real(r->I.run.target));
    json_object_set_new(o, "reached", json_boolean(reached));
    json_object_set_new(o, "eval_s", json_real(secs));
    if (ckpt) json_object_set_new(o, "checkpoint", json_string(ckpt));
    TRY(emit(r, o, e));
    if (reached) r->reached = 1;
    return 0;
}

static int eval_inprocess(run *r, tk_err *e) {
    double ep = epoch_num(r, r->step), t0 = tk_now(), v;
    TRY(TK_MLLOG_START(&r->log, "eval_start", NULL, meta_epoch(ep), e));
    TRY(r->wl->evaluate(r->I.model, r->es, &v, e));
    return record_eval(r, v, r->step, tk_now() - t0, NULL, e);
}

// Reads DIR/step-S.eval.json for the checkpoints written for evaluation, oldest first.
// wait_s > 0: wait for each pending result up to that long; else return at the first missing one.
static int poll_results(run *r, double wait_s, tk_err *e) {
    while (r->npend > 0 && !r->reached) {
        int64_t s = r->pend[0];
        char path[4200];
        snprintf(path, sizeof path, "%s/step-%lld.eval.json", r->o->eval_dir, (long long)s);
        struct stat st;
        if (stat(path, &st) != 0) {
            if (wait_s <= 0) return 0;
            double t0 = tk_now();
            while (stat(path, &st) != 0 && tk_now() - t0 < wait_s) usleep(50000);
            if (stat(path, &st) != 0) {
                tk_err_set(e, TK_EIO, "no evaluation result after %.0f s", wait_s);
                tk_err_where(e, "%s", path);
                return tk_err_hint(e, "is `evaluate --follow %s` running?", r->o->eval_dir);
            }
        }
        json_error_t je;
        json_t *res = json_load_file(path, 0, &je);
        json_t *a = json_object_get(res, r->wl->metric);
        if (!json_is_number(a)) {
            json_decref(res);
            tk_err_set(e, TK_EDATA, "%s", res ? "a result without the metric" : je.text);
            if (res) tk_err_set(e, TK_EDATA, "$.%s: expected a number", r->wl->metric);
            tk_err_where(e, "%s: line %d", path, res ? 1 : je.line);
            return TK_EDATA;
        }
        if (!r->eval_samples_logged) {
            json_t *n = json_object_get(res, "eval_samples");
            TRY(TK_MLLOG_EVENT(&r->log, "eval_samples", json_integer(json_integer_value(n)), NULL, e));
            r->eval_samples_logged = 1;
        }
        TRY(TK_MLLOG_START(&r->log, "eval_start", NULL, meta_epoch(epoch_num(r, s)), e));
        int rc = record_eval(r, json_number_value(a), s, json_number_value(json_object_get(res, "eval_s")),
                             json_string_value(json_object_get(res, "checkpoint")), e);
        json_decref(res);
        TRY(rc);
        memmove(r->pend, r->pend + 1, (size_t)--r->npend * sizeof *r->pend);
    }
    return 0;
}

// A rank failing because of rank 0's error (which rank 0 reports) exits, but not at once: under
// share/launch the first rank to exit nonzero gets the others stopped, and rank 0 must have
// printed its message by then.
static void after_rank0(void) { usleep(1000000); }

// Several ranks: rank 0 alone reads the evaluator's results (they appear at any moment, so ranks
// reading on their own could see different ones) and the others take its outcome: the target
// reached or not, or its error. Rank 0 may wait up to wait_s for a result before it joins.
static int poll_agreed(run *r, double wait_s, tk_err *e) {
    int rc = rank0(r) ? poll_results(r, wait_s, e) : 0;
    if (r->I.dist.world == 1) return rc;
    int64_t all[TK_MAX_WORLD];
    tk_err ge;
    tk_err_clear(&ge);
    int grc = tk_dist_gather_i64(&r->I.dist, (int64_t)rc << 1 | r->reached, all, wait_s + r->o->comm_timeout, &ge);
    if (rc) return rc;
    if (grc) {
        *e = ge;
        return grc;
    }
    if (all[0] >> 1) {
        after_rank0();
        return tk_err_set(e, (int)(all[0] >> 1), "rank 0 failed to read an evaluation result (its error says why)");
    }
    r->reached = (int)(all[0] & 1);
    return 0;
}

static int eval_point(run *r, tk_err *e) {
    if (r->es) return eval_inprocess(r, e);
    char path[4200];
    TRY(save_ckpt(r, r->o->eval_dir, path, sizeof path, e));
    if (r->npend == r->cap_pend) {
        int64_t *np = realloc(r->pend, (size_t)(r->cap_pend * 2 + 16) * sizeof *np);
        if (!np) return tk_err_set(e, TK_EIO, "out of host memory");
        r->pend = np;
        r->cap_pend = r->cap_pend * 2 + 16;
    }
    r->pend[r->npend++] = r->step;
    return poll_agreed(r, 0, e);
}

// ---- MLLOG preamble ----

static int log_preamble(run *r, tk_err *e) {
    tk_mllog *L = &r->log;
    const tk_run_cfg *rc = &r->I.run;
    TRY(TK_MLLOG_EVENT(L, "submission_benchmark", json_string(r->wl->name), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_org", json_string(r->o->org), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_division", json_string("closed"), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_status", json_string("research"), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_platform", json_string(r->o->platform), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "seed", json_integer((json_int_t)rc->seed), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "global_batch_size", json_integer(rc->batch), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "gradient_accumulation_steps", json_integer(1), NULL, e));
    if (r->wl->mllog_hparams) TRY(r->wl->mllog_hparams(r->I.model, rc, L, e));
    TRY(TK_MLLOG_EVENT(L, "train_samples", json_integer(r->epoch_samples), NULL, e));
    if (r->es) {
        TRY(TK_MLLOG_EVENT(L, "eval_samples", json_integer(r->wl->evalset_count(r->es)), NULL, e));
        r->eval_samples_logged = 1;
    }
    return r->wl->mllog_weights ? r->wl->mllog_weights(r->I.model, L, e) : 0;
}

// ---- the input path ----

typedef struct {
    const tk_workload *wl;
    const void *cfg;
    char *const *paths;
    int npaths, rank, world;
    int64_t spe;
    int device;              // the CUDA device for device batches, or -1: host batches only
} src_arg;

static int src_open(void *arg, void **rd, tk_err *e) {
    src_arg *a = arg;
    return a->wl->reader_open(a->cfg, a->rank, a->world, a->paths, a->npaths, rd, e);
}

typedef struct {
    void *rd;
    src_arg *a;
} src_rd;

static int src_read(void *rd, int64_t step, void *const *bufs, tk_err *e);
static void src_close(void *rd);

// The loader threads' readers carry the epoch length (the workload's read_batch wants it).
static int src_open_rd(void *arg, void **out, tk_err *e) {
    src_rd *r = calloc(1, sizeof *r);
    if (!r) return tk_err_set(e, TK_EIO, "out of host memory");
    r->a = arg;
    int rc = src_open(arg, &r->rd, e);
    if (rc) {
        free(r);
        return rc;
    }
    *out = r;
    return 0;
}

static int src_read(void *rd, int64_t step, void *const *bufs, tk_err *e) {
    src_rd *r = rd;
    return r->a->wl->read_batch(r->rd, step, r->a->spe, bufs, e);
}

static void src_close(void *rd) {
    src_rd *r = rd;
    r->a->wl->reader_close(r->rd);
    free(r);
}

// Device batches where the workload's reader can write them (workload.h reader_device).
static unsigned src_on_device(void *rd) {
    src_rd *r = rd;
    const tk_workload *wl = r->a->wl;
    if (r->a->device < 0 || wl->version < TK_WORKLOAD_V2 || !wl->reader_device) return 0;
    return wl->reader_device(r->rd, r->a->device);
}

static int staged_hook(void *arg, int slot, void *const *dev, int stream, tk_err *e) {
    run *r = arg;
    return r->wl->staged ? r->wl->staged(r->I.model, slot, dev, stream, e) : 0;
}

// Takes decoded batch `step` from the loader and copies it into staging slot step % 2 (from
// pinned host memory, or device to device for the fields its reader wrote in device memory).
static int stage_batch(run *r, tk_loader *ld, int64_t step, tk_err *e) {
    void *const *buf;
    unsigned dev_mask = 0;
    double t0 = tk_now();
    TRY(tk_loader_get(ld, step, &buf, &dev_mask, e));
    if (r->wl->host_batch && !dev_mask) r->wl->host_batch(r->I.model, (int)(step & 1), buf);
    double t1 = tk_now();
    int rc = tk_stager_stage(&r->st, (int)(step & 1), buf, dev_mask, staged_hook, r, e);
    tk_loader_put(ld, step);
    r->wait_loader += t1 - t0;
    r->wait_copy += tk_now() - t1;
    return rc;
}

static int use_batch(run *r, int slot, tk_err *e) {
    TRY(tk_stager_use(&r->st, slot, r->inputs, e));
    return r->wl->use ? r->wl->use(r->I.model, slot, e) : 0;
}

// The cuda backend's loader threads without --loader-threads: this rank's share of the CPUs it may
// run on (the ranks of its host split them), less 2 for the step's own thread and the copies;
// 2 to 16. (On an H100 box of 16 CPUs the 8 of before starved DLRM's hybrid step: 14 kept up.)
static int default_loaders(const run *r) {
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    long per = n / (r->o->ri.local_world > 1 ? r->o->ri.local_world : 1) - 2;
    return per < 2 ? 2 : per > 16 ? 16 : (int)per;
}

// ---- the training loop ----

// The configuration's cadence, and the run's last step. An epoch's end is an evaluation point only
// with evals_per_epoch (DLRM's "every 0.05 epoch"); a cadence in samples (MLPerf ResNet's every 4
// epochs after an offset, BERT's formula) is kept as given.
static int is_eval_step(const run *r, int64_t step, int64_t stop_at) {
    if (step == stop_at || (r->I.run.evals_per_epoch > 0 && step % r->steps_per_epoch == 0))
        return 1;
    return step >= r->eval_first_step && (step - r->eval_first_step) % r->eval_every_steps == 0;
}

static int train(run *r, tk_err *e) {
    const tk_train_opts *o = r->o;
    const tk_workload *wl = r->wl;
    void *m = r->I.model;
    int use_graph = r->c->backend == TK_BACKEND_CUDA && !o->no_graphs && !o->profile;
    int per_slot = wl->graph_per_slot && wl->graph_per_slot(m);
    // the step's graphs by key (graph_key), each slot's last GRAPHS keys (BERT's unpadded step has
    // one a row bucket: about 50 at batch 32 with 128-row buckets; each capture costs tens of ms)
    enum { GRAPHS = 64 };
    tk_graph graph[2][GRAPHS] = {{{0}}};
    int64_t graph_key[2][GRAPHS] = {{0}}, graph_used[2][GRAPHS] = {{0}};
    tk_progress pr;
    tk_progress_init(&pr, "train", "steps", (uint64_t)r->total_steps, o->progress);
    if (!rank0(r)) pr.on = 0;
    int64_t stop_at = r->total_steps;
    if (r->I.run.max_steps > 0 && r->I.run.max_steps < stop_at) stop_at = r->I.run.max_steps;
    if (o->max_steps > 0 && o->max_steps < stop_at) stop_at = o->max_steps;
    // Loader threads decode the batches ahead into pinned buffers (device buffers for a reader that
    // writes device memory) while the device trains.
    int nload = o->loader_threads > 0 ? (int)o->loader_threads : r->c->backend == TK_BACKEND_CUDA ? default_loaders(r) : 1;
    src_arg sa = {.wl = wl, .cfg = r->I.cfg, .paths = o->train, .npaths = o->ntrain, .spe = r->steps_per_epoch,
                  .rank = o->ri.rank, .world = o->ri.world,
                  .device = r->c->backend == TK_BACKEND_CUDA && !o->host_batches ? r->c->device : -1};
    tk_batch_source src = {.open = src_open_rd, .read = src_read, .close = src_close, .on_device = src_on_device,
                           .arg = &sa};
    tk_loader *ld = NULL;
    int rc = r->step < stop_at ? tk_loader_start(&ld, r->c, &src, &r->L, r->step, stop_at, nload, e) : 0;
    r->device_loaders = tk_loader_device_workers(ld);
    int in_epoch = 0, staged = 0;
    double tw = tk_now(), tprof = 0;
    int64_t sw = 0, nprof = 0;
    while (!rc && r->step < stop_at && !r->reached) {
        int64_t ep = r->step / r->steps_per_epoch;
        if (!in_epoch) {
            rc = TK_MLLOG_START(&r->log, "block_start", NULL,
                                json_pack("{s:I, s:i}", "first_epoch_num", (json_int_t)(ep + 1), "epoch_count", 1), e);
            if (!rc)
                rc = TK_MLLOG_START(&r->log, "epoch_start", NULL, json_pack("{s:I}", "epoch_num", (json_int_t)(ep + 1)), e);
            in_epoch = 1;
            if (rc) break;
        }
        // Batch `step` sits in staging slot step % 2 (copied while the step before ran); the
        // copy of the next batch starts right after this step is queued, so the host never
        // waits for the compute stream here.
        if (!staged && (rc = stage_batch(r, ld, r->step, e))) break;
        if ((rc = use_batch(r, (int)(r->step & 1), e))) break;
        staged = 0;
        int64_t key = wl->graph_key ? wl->graph_key(m) : 0;
        double ts = o->profile ? tk_now() : 0;
        if (use_graph && key >= 0) { // (a step that cannot be captured runs eagerly)
            int k = per_slot ? (int)(r->step & 1) : 0, j = 0;
            for (int i = 0; i < GRAPHS; i++) { // the key's graph, else a free one, else the least recently used
                if (graph[k][i].valid && graph_key[k][i] == key) {
                    j = i;
                    break;
                }
                if (graph[k][j].valid && (!graph[k][i].valid || graph_used[k][i] < graph_used[k][j])) j = i;
            }
            tk_graph *g = &graph[k][j];
            graph_used[k][j] = r->step + 1;
            if (g->valid && graph_key[k][j] != key) { // made again, once its last launch is done
                if ((rc = tk_dist_sync(&r->I.dist, e))) break;
                tk_graph_destroy(g);
            }
            if (!g->valid) {
                graph_key[k][j] = key;
                rc = tk_graph_begin(r->c, e);
                if (!rc) rc = tk_instance_step(&r->I, e);
                if (!rc) rc = tk_graph_end(r->c, g, e);
            }
            if (!rc) rc = tk_graph_launch(r->c, g, e);
            if (!rc && wl->step_queued) rc = wl->step_queued(m, e);
        } else {
            rc = tk_instance_step(&r->I, e);
        }
        if (rc) break;
        // Several ranks: a peer that died leaves the steps' collectives hanging, and every later
        // host wait would hang with them: wait, bounded by --comm-timeout, for the step before
        // this one (this one runs meanwhile). Staging the next batch waits for nothing later.
        if ((rc = tk_dist_sync_lagged(&r->I.dist, e))) break;
        if (r->step + 1 < stop_at) {
            if ((rc = stage_batch(r, ld, r->step + 1, e))) break;
            staged = 1;
        }
        // --profile: the step's times (the first step of the run, a warm-up, dropped)
        if (o->profile) {
            if ((rc = tk_dist_sync(&r->I.dist, e))) break;
            if (wl->profile_add && (rc = wl->profile_add(m, nprof > 0, e))) break;
            if (nprof++ > 0) tprof += tk_now() - ts;
        }
        r->step++;
        sw++;
        tk_progress_update(&pr, (uint64_t)r->step);
        int end_of_epoch = r->step % r->steps_per_epoch == 0;
        int is_eval = is_eval_step(r, r->step, stop_at);
        if ((o->log_every > 0 && r->step % o->log_every == 0) || is_eval) {
            rc = log_progress(r, tw, sw, e);
            tw = tk_now();
            sw = 0;
            if (rc) break;
        }
        if (is_eval && (rc = eval_point(r, e))) break;
        if (o->ckpt_dir && o->ckpt_every > 0 && r->step % o->ckpt_every == 0) {
            char path[4200];
            if ((rc = save_ckpt(r, o->ckpt_dir, path, sizeof path, e))) break;
        }
        if (end_of_epoch || r->reached || r->step == stop_at) {
            double epn = (double)(ep + 1);
            rc = TK_MLLOG_END(&r->log, "epoch_stop", NULL, json_pack("{s:f}", "epoch_num", epn), e);
            if (!rc)
                rc = TK_MLLOG_END(&r->log, "block_stop", NULL, json_pack("{s:I}", "first_epoch_num", (json_int_t)(ep + 1)), e);
            in_epoch = 0;
        }
    }
    tk_progress_end(&pr, (uint64_t)r->step);
    // Out-of-process evaluation: wait for the results still pending.
    if (!rc && o->eval_dir && !r->reached) rc = poll_agreed(r, o->eval_wait, e);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < GRAPHS; j++)
            if (graph[k][j].valid) tk_graph_destroy(&graph[k][j]);
    tk_loader_stop(ld);
    if (o->profile && !wl->profile_json && nprof > 1) { // the engine's own: whole steps
        json_t *line = json_pack("{s:s, s:I, s:{s:f}}", "type", "profile", "steps", (json_int_t)(nprof - 1), "ms",
                                 "step", 1e3 * tprof / (double)(nprof - 1));
        tk_err e2;
        if (emit(r, line, &e2) && !rc) {
            *e = e2;
            rc = e2.code;
        }
    }
    return rc;
}

// --dump-step: one step's weights, batch, loss and gradients for the workload's PyTorch peer.
static int dump_step(run *r, tk_err *e) {
    if (!r->wl->dump_step) return tk_err_set(e, TK_EUSAGE, "--dump-step: workload %s has no step dump", r->wl->name);
    void *bufs[TK_BATCH_MAX_FIELDS] = {0}, *rd = NULL;
    int rc = 0;
    for (int f = 0; !rc && f < r->L.nfields; f++)
        if (!(bufs[f] = malloc(r->L.bytes[f] + 1))) rc = tk_err_set(e, TK_EIO, "out of host memory");
    if (!rc) rc = r->wl->reader_open(r->I.cfg, r->o->ri.rank, r->o->ri.world, r->o->train, r->o->ntrain, &rd, e);
    if (!rc) rc = r->wl->read_batch(rd, r->step, r->steps_per_epoch, bufs, e);
    for (int f = 0; !rc && f < r->L.nfields; f++)
        rc = tk_memcpy_h2d(r->c, r->inputs[f], bufs[f], r->L.bytes[f], TK_STREAM_COMPUTE, e);
    if (!rc) rc = r->wl->dump_step(r->I.model, r->o->dump, e);
    if (rd) r->wl->reader_close(rd);
    for (int f = 0; f < r->L.nfields; f++) free(bufs[f]);
    if (!rc)
        rc = emit(r, json_pack("{s:s, s:s, s:I}", "type", "dump", "path", r->o->dump, "step", (json_int_t)r->step), e);
    return rc;
}

// The checkpoint and evaluation directories, once everything that can fail in the
// initialization has not: a run that cannot start leaves no empty directory behind.
static int make_dirs(run *r, tk_err *e) {
    const tk_train_opts *o = r->o;
    for (const char *const *d = (const char *const[]){o->ckpt_dir, o->eval_dir, NULL}; *d; d++) {
        if (mkdir(*d, 0777) != 0 && errno != EEXIST) return tk_err_errno(e, errno, "%s: cannot create the directory", *d);
        // A run killed mid-write (kill -9) left its checkpoint's temporary file: ours to remove.
        if (rank0(r)) TRY(tk_afile_remove_stale(*d, ".safetensors", NULL, e));
    }
    return 0;
}

// Configuration, data, model, evaluation set: everything before run_start.
static int init(run *r, tk_backend be, tk_err *e) {
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
    if (!rc) {
        r->wl->batch_layout(r->I.model, &r->L);
        r->wl->inputs(r->I.model, r->inputs);
    }
    if (!rc && o->profile && r->wl->profile_start) rc = r->wl->profile_start(r->I.model, e);
    if (!rc) rc = o->resume ? resume(r, e) : r->wl->init_weights(r->I.model, rcfg->seed, e);
    if (!rc && o->init_ckpt && !o->resume) rc = init_checkpoint(r, e);
    if (!rc && !o->dump && r->wl->prepare) {
        json_t *line = NULL;
        rc = r->wl->prepare(r->I.model, rd, r->steps_per_epoch, &line, e);
        if (!rc && line) rc = emit(r, line, e);
    }
    r->wl->reader_close(rd);
    if (!rc && !o->dump) rc = tk_stager_init(&r->st, r->c, &r->L, e);
    if (!rc && o->neval > 0 && !o->dump) rc = r->wl->evalset_load(r->I.model, o->eval, o->neval, &r->es, e);
    return rc;
}

static int config_line(run *r, tk_backend be, tk_err *e) {
    json_t *c = json_pack("{s:s, s:s, s:s, s:O, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:i, s:i}", "type", "config",
                          "workload", r->wl->name, "backend", tk_ctx_describe(r->c), "config", r->I.effective,
                          "train_samples", (json_int_t)r->count, "eval_samples",
                          (json_int_t)(r->es ? r->wl->evalset_count(r->es) : 0), "steps_per_epoch",
                          (json_int_t)r->steps_per_epoch, "eval_every_steps", (json_int_t)r->eval_every_steps,
                          "start_step", (json_int_t)r->step, "params", (json_int_t)tk_params_numel(&r->I.P), "graphs",
                          be == TK_BACKEND_CUDA && !r->o->no_graphs, "world_size", r->o->ri.world, "rank", r->o->ri.rank);
    return emit(r, c, e);
}

// run_stop, the last checkpoint, the profile and result lines; rc is the training's outcome.
static int finish(run *r, int rc, double tt, int64_t step0, tk_err *e) {
    const tk_train_opts *o = r->o;
    int numeric = rc == TK_ENUMERIC;
    if (rc && !numeric) return rc;
    tk_err saved = *e;
    // run_stop closes the timed region whatever the outcome.
    int rc2 = tk_mllog_write(&r->log, __FILE__, __LINE__, "INTERVAL_END", "run_stop", NULL,
                             json_pack("{s:s}", "status", r->reached ? "success" : "aborted"), 0, e);
    if (!numeric) rc = rc2;
    if (rc2 == 0 && o->ckpt_dir && !numeric && !(o->ckpt_every > 0 && r->step % o->ckpt_every == 0)) {
        char path[4200];
        rc2 = save_ckpt(r, o->ckpt_dir, path, sizeof path, e);
        if (!numeric) rc = rc2;
    }
    if (numeric) *e = saved;
    int64_t done = r->step - step0;
    const char *metric = r->wl->metric;
    char best[48];
    snprintf(best, sizeof best, "best_%s", metric);
    json_t *res = json_pack("{s:s, s:s, s:b, s:s}", "type", "result", "workload", r->wl->name, "reached", r->reached,
                            "status", numeric ? "nan" : r->reached ? "success" : "aborted");
    json_object_set_new(res, metric, num(r->last));
    json_object_set_new(res, best, num(r->best));
    json_t *rest = json_pack("{s:f, s:f, s:I, s:I, s:f, s:f}", "target", r->I.run.target, "time_to_train_s", tt, "steps",
                             (json_int_t)r->step, "samples", (json_int_t)(r->step * r->B), "epochs",
                             (double)(r->step * r->B) / (double)r->epoch_samples, "samples_per_s",
                             tt > 0 ? (double)(done * r->B) / tt : 0.0);
    json_object_update(res, rest);
    json_decref(rest);
    if (r->device_loaders > 0) json_object_set_new(res, "device_batches", json_integer(r->device_loaders));
    json_t *extra = r->wl->result_extra ? r->wl->result_extra(r->I.model) : NULL;
    if (extra) json_object_update(res, extra);
    json_decref(extra);
    tk_err e2;
    json_t *prof = r->wl->profile_json ? r->wl->profile_json(r->I.model) : NULL;
    if (prof) {
        json_t *line = json_pack("{s:s}", "type", "profile");
        json_object_update(line, prof);
        json_decref(prof);
        if (emit(r, line, &e2) && !rc) {
            *e = e2;
            rc = e2.code;
        }
    }
    if (emit(r, res, &e2) && !rc) {
        *e = e2;
        rc = e2.code;
    }
    if (!rc && !r->reached) rc = TK_NO;
    return rc;
}

int tk_engine_train(const tk_train_opts *o, tk_err *e) {
    run R = {.o = o, .last = NAN, .best = NAN};
    run *r = &R;
    r->log.fd = -1;
    tk_backend be;
    TRY(tk_backend_parse(o->backend, &be, e));
    // init_start comes first: everything below (context, data, model) is initialization. Its
    // lines reach the MLLOG file only once the run can start (runlog.h).
    TRY(tk_runlog_hold(&r->held, &r->log, rank0(r) ? o->mllog : NULL, o->ri.rank, e));
    int rc = TK_MLLOG_EVENT(&r->log, "cache_clear", json_true(), NULL, e);
    if (!rc) rc = TK_MLLOG_START(&r->log, "init_start", NULL, NULL, e);
    if (!rc) rc = init(r, be, e);
    if (!rc) rc = make_dirs(r, e);
    if (!rc) rc = tk_runlog_release(&r->held, &r->log, e);
    if (!rc && o->dump) {
        rc = dump_step(r, e);
        goto out;
    }
    if (!rc) rc = config_line(r, be, e);
    if (!rc) rc = log_preamble(r, e);
    if (!rc) rc = tk_ctx_sync(r->c, e);
    if (!rc) rc = TK_MLLOG_END(&r->log, "init_stop", NULL, NULL, e);
    if (!rc) rc = TK_MLLOG_START(&r->log, "run_start", NULL, NULL, e);
    if (rc) goto out;
    r->t_run0 = tk_now();
    int64_t step0 = r->step;
    rc = train(r, e);
    rc = finish(r, rc, tk_now() - r->t_run0, step0, e);
out:
    if (o->eval_dir && rank0(r)) {
        tk_err e3;
        if (tk_follow_stop(o->eval_dir, &e3) && (rc == 0 || rc == TK_NO)) {
            *e = e3;
            rc = e3.code;
        }
    }
    if (r->es) r->wl->evalset_free(r->I.model, r->es);
    tk_stager_release(&r->st);
    if (r->made) tk_instance_destroy(&r->I);
    tk_comm_destroy(r->comm);
    free(r->pend);
    tk_runlog_discard(&r->held, &r->log);
    tk_mllog_close(&r->log);
    tk_ctx_destroy(r->c);
    return rc;
}
