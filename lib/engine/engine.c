// The training loop shared by every workload (engine.h): MLLOG framing, the staged input path,
// the step (through the CUDA-graph cache, graphs.h), progress lines, the evaluation cadence (in
// process or through a directory, follow.h), checkpoints, the stop at the target, the closing
// lines. Setup is setup.c; resume and --init-checkpoint resume.c; --dump-step dump.c.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/mllog.h"
#include "core/progress.h"
#include "engine/resume.h"
#include "engine/run.h"
#include "engine/source.h"

// The epochs `step` updates trained (a fraction).
static double epochs(const tk_run *r, int64_t step) { return (double)(step * r->B) / (double)r->epoch_samples; }

// MLLOG's epoch_num of an evaluation after `step` updates, as the benchmark's logs write it
// (workload.h epoch_fraction): 1 + the epochs trained, or the epoch (from 1) of the last step.
static json_t *eval_epoch(const tk_run *r, int64_t step) {
    if (r->wl->version >= TK_WORKLOAD_V6 && r->wl->epoch_fraction)
        return json_pack("{s:f}", "epoch_num", 1.0 + epochs(r, step));
    const int64_t ep = (step * r->B + r->epoch_samples - 1) / r->epoch_samples;
    return json_pack("{s:I}", "epoch_num", (json_int_t)(ep > 1 ? ep : 1));
}

// JSON has no NaN: an undefined number (no evaluation yet, a one-class eval set) is null.
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static int better(const tk_run *r, double v, double than) {
    return r->wl->lower_is_better ? v < than : v > than;
}

static int reaches(const tk_run *r, double v) { return tk_wl_reaches(r->wl, v, r->I.run.target); }

// ---- checkpoints ----

static int save_ckpt(tk_run *r, const char *dir, char *path, size_t n, tk_err *e) {
    snprintf(path, n, "%s/step-%lld.safetensors", dir, (long long)r->step);
    TRY(tk_resume_save(&r->I, path, r->step, r->B, r->steps_per_epoch, e));
    return tk_run_emit(r,
                       json_pack("{s:s, s:s, s:I, s:I}", "type", "checkpoint", "path", path, "step", (json_int_t)r->step,
                                 "samples", (json_int_t)(r->step * r->B)),
                       e);
}

// ---- progress and evaluation ----

// Checks the loss accumulated since the last read; emits a progress line.
static int log_progress(tk_run *r, double t0_window, int64_t steps_window, tk_err *e) {
    double loss;
    TRY(tk_instance_read_loss(&r->I, &loss, 1, e));
    if (!isfinite(loss)) {
        tk_err_set(e, TK_ENUMERIC, "training loss is %s at step %lld", isnan(loss) ? "NaN" : "Inf", (long long)r->step);
        return tk_err_hint(e, "lower optimizer.base_lr or lengthen optimizer.warmup_steps");
    }
    double dt = tk_now() - t0_window, per = steps_window > 0 ? 1e3 / (double)steps_window : 0;
    double rate = dt > 0 ? (double)(steps_window * r->B) / dt : 0.0;
    TRY(tk_windows_add(&r->win, rate, e));
    json_t *o = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "type", "progress", "step",
                          (json_int_t)r->step, "samples", (json_int_t)(r->step * r->B), "epoch",
                          epochs(r, r->step), "loss", loss, "lr", tk_optimizer_lr_at(&r->I.run.opt, r->step - 1),
                          "samples_per_s", rate, "loader_wait_ms", r->wait_loader * per, "copy_wait_ms",
                          r->wait_copy * per);
    r->wait_loader = r->wait_copy = 0;
    return tk_run_emit(r, o, e);
}

static int record_eval(tk_run *r, double v, int64_t step, double secs, const char *ckpt, tk_err *e) {
    const char *metric = r->wl->metric;
    r->last = v;
    if (isnan(r->best) || better(r, v, r->best)) r->best = v;
    int reached = reaches(r, v);
    TRY(TK_MLLOG_EVENT(&r->log, "eval_accuracy", num(v), eval_epoch(r, step), e));
    TRY(TK_MLLOG_END(&r->log, "eval_stop", NULL, eval_epoch(r, step), e));
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:f}", "type", "eval", "metric", metric, "step", (json_int_t)step,
                          "samples", (json_int_t)(step * r->B), "epoch", epochs(r, step));
    json_object_set_new(o, metric, num(v));
    json_object_set_new(o, "target", json_real(r->I.run.target));
    json_object_set_new(o, "reached", json_boolean(reached));
    json_object_set_new(o, "eval_s", json_real(secs));
    if (ckpt) json_object_set_new(o, "checkpoint", json_string(ckpt));
    TRY(tk_run_emit(r, o, e));
    if (reached) r->reached = 1;
    return 0;
}

static int eval_inprocess(tk_run *r, tk_err *e) {
    double t0 = tk_now(), v;
    TRY(TK_MLLOG_START(&r->log, "eval_start", NULL, eval_epoch(r, r->step), e));
    TRY(tk_instance_ema_swap(&r->I, e)); // (the moving average's weights, when there is one)
    int rc = r->wl->evaluate(r->I.model, r->es, &v, e);
    tk_err e2; // (the trained weights back even after a failed evaluation; its error kept)
    int rs = tk_instance_ema_swap(&r->I, rc ? &e2 : e);
    TRY(rc ? rc : rs);
    return record_eval(r, v, r->step, tk_now() - t0, NULL, e);
}

// Reads DIR/step-S.eval.json for the checkpoints written for evaluation, oldest first.
// wait_s > 0: wait for each pending result up to that long; else return at the first missing one.
static int poll_results(tk_run *r, double wait_s, tk_err *e) {
    while (!r->reached) {
        int64_t s;
        json_t *res;
        TRY(tk_eval_dir_next(&r->ed, wait_s, &s, &res, e));
        if (!res) return 0;
        int rc = 0;
        if (!r->eval_samples_logged) {
            json_t *n = json_object_get(res, "eval_samples");
            rc = TK_MLLOG_EVENT(&r->log, "eval_samples", json_integer(json_integer_value(n)), NULL, e);
            r->eval_samples_logged = 1;
        }
        if (!rc) rc = TK_MLLOG_START(&r->log, "eval_start", NULL, eval_epoch(r, s), e);
        if (!rc)
            rc = record_eval(r, json_number_value(json_object_get(res, r->wl->metric)), s,
                             json_number_value(json_object_get(res, "eval_s")),
                             json_string_value(json_object_get(res, "checkpoint")), e);
        json_decref(res);
        TRY(rc);
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
static int poll_agreed(tk_run *r, double wait_s, tk_err *e) {
    int rc = tk_run_rank0(r) ? poll_results(r, wait_s, e) : 0;
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

static int eval_point(tk_run *r, tk_err *e) {
    if (r->es) return eval_inprocess(r, e);
    char path[4200];
    TRY(save_ckpt(r, r->o->eval_dir, path, sizeof path, e));
    TRY(tk_eval_dir_push(&r->ed, r->step, e));
    return poll_agreed(r, 0, e);
}

// ---- MLLOG preamble ----

static int log_preamble(tk_run *r, tk_err *e) {
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
    if (r->wl->version >= TK_WORKLOAD_V3) TRY(tk_optimizer_mllog(L, rc, r->wl->opt_mllog, e));
    if (r->wl->mllog_hparams) TRY(r->wl->mllog_hparams(r->I.model, rc, L, e));
    TRY(TK_MLLOG_EVENT(L, "train_samples", json_integer(r->epoch_samples), NULL, e));
    if (r->es) {
        TRY(TK_MLLOG_EVENT(L, "eval_samples", json_integer(r->wl->evalset_count(r->es)), NULL, e));
        r->eval_samples_logged = 1;
    }
    return r->wl->mllog_weights ? r->wl->mllog_weights(r->I.model, L, e) : 0;
}

// ---- the input path ----

static int staged_hook(void *arg, int slot, void *const *dev, int stream, tk_err *e) {
    tk_run *r = arg;
    return r->wl->staged ? r->wl->staged(r->I.model, slot, dev, stream, e) : 0;
}

// Takes decoded batch `step` from the loader and copies it into staging slot step % slots (from
// pinned host memory, or device to device for the fields its reader wrote in device memory).
static int stage_batch(tk_run *r, tk_loader *ld, int64_t step, tk_err *e) {
    void *const *buf;
    unsigned dev_mask = 0;
    const int slot = (int)(step % r->st.n);
    double t0 = tk_now();
    TRY(tk_loader_get(ld, step, &buf, &dev_mask, e));
    if (r->wl->host_batch && !dev_mask) r->wl->host_batch(r->I.model, slot, buf);
    double t1 = tk_now();
    int rc = tk_stager_stage(&r->st, slot, buf, dev_mask, staged_hook, r, e);
    tk_loader_put(ld, step);
    r->wait_loader += t1 - t0;
    r->wait_copy += tk_now() - t1;
    return rc;
}

static int use_batch(tk_run *r, int slot, tk_err *e) {
    TRY(tk_stager_use(&r->st, slot, r->inputs, e));
    return r->wl->use ? r->wl->use(r->I.model, slot, e) : 0;
}

// ---- the training loop ----

// The configuration's cadence, and the run's last step. An epoch's end is an evaluation point only
// with evals_per_epoch (DLRM's "every 0.05 epoch"); a cadence in samples (MLPerf ResNet's every 4
// epochs after an offset, BERT's formula) is kept as given.
static int is_eval_step(const tk_run *r, int64_t step, int64_t stop_at) {
    if (r->o->no_eval) return 0;
    if (step == stop_at || (r->I.run.evals_per_epoch > 0 && step % r->steps_per_epoch == 0))
        return 1;
    return step >= r->eval_first_step && (step - r->eval_first_step) % r->eval_every_steps == 0;
}

static int train(tk_run *r, tk_err *e) {
    const tk_train_opts *o = r->o;
    const tk_workload *wl = r->wl;
    void *m = r->I.model;
    int use_graph = r->c->backend == TK_BACKEND_CUDA && !o->no_graphs && !o->profile;
    int per_slot = wl->graph_per_slot && wl->graph_per_slot(m);
    tk_progress pr;
    tk_progress_init(&pr, "train", "steps", (uint64_t)r->total_steps, o->progress);
    if (!tk_run_rank0(r)) pr.on = 0;
    int64_t stop_at = r->total_steps;
    if (r->I.run.max_steps > 0 && r->I.run.max_steps < stop_at) stop_at = r->I.run.max_steps;
    if (o->max_steps > 0 && o->max_steps < stop_at) stop_at = o->max_steps;
    // Loader threads decode the batches ahead into pinned buffers (device buffers for a reader that
    // writes device memory) while the device trains.
    int nload = o->loader_threads > 0                ? (int)o->loader_threads
                : r->c->backend == TK_BACKEND_CUDA ? tk_wl_source_default_threads(o->ri.local_world)
                                                   : 1;
    tk_wl_source sa = {.wl = wl, .cfg = r->I.cfg, .paths = o->train, .npaths = o->ntrain, .spe = r->steps_per_epoch,
                       .rank = o->ri.rank, .world = o->ri.world,
                       .device = r->c->backend == TK_BACKEND_CUDA && !o->host_batches ? r->c->device : -1};
    tk_batch_source src = tk_wl_source_make(&sa);
    tk_loader *ld = NULL;
    int rc = r->step < stop_at ? tk_loader_start(&ld, r->c, &src, &r->L, r->step, stop_at, nload, e) : 0;
    r->device_loaders = tk_loader_device_workers(ld);
    int in_epoch = 0, depth = r->st.n; // staging slots (workload.h stage_depth)
    int64_t next = r->step;            // the next batch to stage
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
        // Batches step .. step + depth - 2 sit in staging slots (batch n in slot n % depth), staged
        // after the steps before were queued (at the start: here), so the host never waits here.
        while (next < r->step + depth - 1 && next < stop_at && !(rc = stage_batch(r, ld, next, e))) next++;
        if (rc) break;
        const int slot = (int)(r->step % depth);
        if ((rc = use_batch(r, slot, e))) break;
        int64_t key = wl->graph_key ? wl->graph_key(m) : 0;
        double ts = o->profile ? tk_now() : 0;
        if (use_graph && key >= 0) { // (a step that cannot be captured runs eagerly)
            rc = tk_graph_cache_launch(&r->graphs, &r->I, per_slot ? slot : 0, key, r->step + 1, e);
            if (!rc && wl->step_queued) rc = wl->step_queued(m, e);
        } else {
            rc = tk_instance_step(&r->I, e);
        }
        if (rc) break;
        // Several ranks: a peer that died leaves the steps' collectives hanging, and every later
        // host wait would hang with them: wait, bounded by --comm-timeout, for the step before
        // this one (this one runs meanwhile). Staging the next batch waits for nothing later.
        if ((rc = tk_dist_sync_lagged(&r->I.dist, e))) break;
        while (next < r->step + depth && next < stop_at && !(rc = stage_batch(r, ld, next, e))) next++;
        if (rc) break;
        // --profile: the step's times (the first step of the run, a warm-up, dropped)
        if (o->profile) {
            if ((rc = tk_dist_sync(&r->I.dist, e))) break;
            if ((rc = tk_prof_add(r->I.prof, r->c, nprof > 0, e))) break;
            if (nprof++ > 0) tprof += tk_now() - ts;
        }
        r->step++;
        sw++;
        if (r->t_first == 0) { // start-up ends when the first step is done (the device waited for)
            if ((rc = tk_ctx_sync(r->c, e))) break;
            r->t_first = tk_now();
        }
        tk_progress_update(&pr, (uint64_t)r->step);
        int end_of_epoch = r->step % r->steps_per_epoch == 0;
        int is_eval = is_eval_step(r, r->step, stop_at);
        if ((o->log_every > 0 && r->step % o->log_every == 0) || is_eval) {
            rc = log_progress(r, tw, sw, e);
            tw = tk_now();
            sw = 0;
            if (rc) break;
        }
        // (the next progress window starts after the evaluation and the checkpoint)
        double t_ev = tk_now();
        if (is_eval && (rc = eval_point(r, e))) break;
        double t_ck = tk_now();
        if (o->ckpt_dir && o->ckpt_every > 0 && r->step % o->ckpt_every == 0) {
            char path[4200];
            if ((rc = save_ckpt(r, o->ckpt_dir, path, sizeof path, e))) break;
        }
        double t_end = tk_now();
        if (is_eval) r->eval_s += t_ck - t_ev;
        r->ckpt_s += t_end - t_ck;
        tw += t_end - t_ev;
        if (end_of_epoch || r->reached || r->step == stop_at) {
            rc = TK_MLLOG_END(&r->log, "epoch_stop", NULL, json_pack("{s:I}", "epoch_num", (json_int_t)(ep + 1)), e);
            if (!rc)
                rc = TK_MLLOG_END(&r->log, "block_stop", NULL, json_pack("{s:I}", "first_epoch_num", (json_int_t)(ep + 1)), e);
            in_epoch = 0;
        }
    }
    tk_progress_end(&pr, (uint64_t)r->step);
    // Out-of-process evaluation: wait for the results still pending.
    if (!rc && o->eval_dir && !r->reached) rc = poll_agreed(r, o->eval_wait, e);
    tk_graph_cache_free(&r->graphs);
    tk_loader_stop(ld);
    if (o->profile && !r->I.prof && nprof > 1) { // the engine's own: whole steps
        json_t *line = json_pack("{s:s, s:I, s:{s:f}}", "type", "profile", "steps", (json_int_t)(nprof - 1), "ms",
                                 "step", 1e3 * tprof / (double)(nprof - 1));
        tk_err e2;
        if (tk_run_emit(r, line, &e2) && !rc) {
            *e = e2;
            rc = e2.code;
        }
    }
    return rc;
}

// run_stop, the last checkpoint, the profile and result lines; rc is the training's outcome.
static int finish(tk_run *r, int rc, double tt, int64_t step0, tk_err *e) {
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
    const char *status = numeric ? "nan" : r->reached ? "success" : o->no_eval ? "trained" : "aborted";
    json_t *res = json_pack("{s:s, s:s, s:b, s:s}", "type", "result", "workload", r->wl->name, "reached", r->reached,
                            "status", status);
    json_object_set_new(res, metric, num(r->last));
    json_object_set_new(res, best, num(r->best));
    json_t *rest = json_pack("{s:f, s:f, s:I, s:I, s:f, s:f}", "target", r->I.run.target, "time_to_train_s", tt, "steps",
                             (json_int_t)r->step, "samples", (json_int_t)(r->step * r->B), "epochs",
                             (double)(r->step * r->B) / (double)r->epoch_samples, "samples_per_s",
                             tt > 0 ? (double)(done * r->B) / tt : 0.0);
    json_object_update(res, rest);
    json_decref(rest);
    // Where the time went: start-up to the end of the first step, the steady state of the progress
    // windows, evaluations and checkpoints (man/man1/train-step.1)
    rest = json_pack("{s:o, s:o, s:I, s:f, s:f}", "startup_s", r->t_first > 0 ? json_real(r->t_first - r->t_begin) : json_null(),
                     "steady_samples_per_s", num(tk_windows_steady(&r->win)), "steady_windows",
                     (json_int_t)tk_windows_steady_count(&r->win), "eval_s", r->eval_s, "ckpt_s", r->ckpt_s);
    json_object_update(res, rest);
    json_decref(rest);
    if (r->device_loaders > 0) json_object_set_new(res, "device_batches", json_integer(r->device_loaders));
    if (r->st.n > 2) json_object_set_new(res, "staging_slots", json_integer(r->st.n)); // (2: not said)
    json_t *extra = r->wl->result_extra ? r->wl->result_extra(r->I.model) : NULL;
    if (extra) json_object_update(res, extra);
    json_decref(extra);
    tk_err e2;
    json_t *prof = tk_prof_json(r->I.prof);
    if (prof) {
        json_t *line = json_pack("{s:s}", "type", "profile");
        json_object_update(line, prof);
        json_decref(prof);
        if (tk_run_emit(r, line, &e2) && !rc) {
            *e = e2;
            rc = e2.code;
        }
    }
    if (tk_run_emit(r, res, &e2) && !rc) {
        *e = e2;
        rc = e2.code;
    }
    if (!rc && !r->reached && !o->no_eval) rc = TK_NO;
    return rc;
}

int tk_engine_train(const tk_train_opts *o, tk_err *e) {
    tk_run R = {.o = o, .last = NAN, .best = NAN, .t_begin = tk_now()};
    tk_run *r = &R;
    r->log.fd = -1;
    r->ed = (tk_eval_dir){.dir = o->eval_dir};
    tk_backend be;
    TRY(tk_backend_parse(o->backend, &be, e));
    // init_start comes first: everything below (context, data, model) is initialization. Its
    // lines reach the MLLOG file only once the run can start (runlog.h).
    TRY(tk_runlog_hold(&r->held, &r->log, tk_run_rank0(r) ? o->mllog : NULL, o->ri.rank, e));
    int rc = TK_MLLOG_EVENT(&r->log, "cache_clear", json_true(), NULL, e);
    if (!rc) rc = TK_MLLOG_START(&r->log, "init_start", NULL, NULL, e);
    if (!rc) rc = tk_run_init(r, be, e);
    if (!rc) rc = tk_run_make_dirs(r, e);
    if (!rc) rc = tk_runlog_release(&r->held, &r->log, e);
    if (!rc && o->dump) {
        rc = tk_run_dump_step(r, e);
        goto out;
    }
    if (!rc) rc = tk_run_config_line(r, be, e);
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
    if (o->eval_dir && tk_run_rank0(r)) {
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
    tk_eval_dir_free(&r->ed);
    tk_windows_free(&r->win);
    tk_runlog_discard(&r->held, &r->log);
    tk_mllog_close(&r->log);
    tk_ctx_destroy(r->c);
    return rc;
}
