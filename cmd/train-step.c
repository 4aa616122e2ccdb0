// train-step: train a workload (DLRM) to its quality target on the cpu or cuda backend, with an
// MLPerf-compliant MLLOG, JSON Lines on stdout, safetensors checkpoints and --resume.
// See man/man1/train-step.1. Thin: the model is lib/workloads/dlrm.c.
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/afile.h"
#include "core/cli.h"
#include "core/jsonl.h"
#include "core/mllog.h"
#include "core/progress.h"
#include "dist/dist.h"
#include "gpu/comm.h"
#include "workloads/dlrm.h"
#include "workloads/dlrm_data.h"

static const char *prog = "train-step";
static const char *usage =
    "usage: train-step --config FILE --train PATH... (--eval PATH... | --eval-dir DIR) [options]\n"
    "       train-step --help\n";

#define MAX_PATHS 256
#define MAX_SETS 64

typedef struct options {
    const char *config, *mllog, *ckpt_dir, *resume, *eval_dir, *dump, *backend;
    const char *org, *platform, *rendezvous;
    char *train[MAX_PATHS], *eval[MAX_PATHS], *sets[MAX_SETS + 2];
    int ntrain, neval, nsets;
    int64_t ckpt_every, eval_every, max_steps, log_every, threads, loader_threads;
    int64_t hybrid_max_rows, hybrid_stat_batches, hybrid_capacity;
    double eval_wait, comm_timeout;
    int no_graphs, progress, profile, hybrid, force_exchange;
} options;

static void help(void) {
    printf("%s", usage);
    printf("\nTrain DLRM (MLPerf v1.x) from .tks shards to its AUC target; JSON Lines on stdout.\n\n"
           "  -w, --workload NAME     the workload (dlrm)\n"
           "  -c, --config FILE       share/workloads/dlrm/config.json or tiny.json\n"
           "  -t, --train PATH        training shards (files or directories; repeatable)\n"
           "  -e, --eval PATH         evaluation shards (repeatable): in-process evaluation\n"
           "      --eval-dir DIR      out-of-process evaluation: write checkpoints to DIR at each\n"
           "                          eval point and read DIR/NAME.eval.json from evaluate --follow\n"
           "      --eval-wait SEC     at the end, wait this long for pending results (600)\n"
           "      --eval-every N      evaluate every N training samples (default: the config's\n"
           "                          evals_per_epoch)\n"
           "  -b, --backend B         cpu, cuda or auto (default auto)\n"
           "      --mllog FILE        append the MLPerf log (MLLOG lines) to FILE\n"
           "      --ckpt-dir DIR      write checkpoints DIR/step-N.safetensors\n"
           "      --ckpt-every N      ... every N steps (default: only at the end)\n"
           "      --resume CKPT       continue from a checkpoint (bit-identical)\n"
           "      --seed S            override train.seed\n"
           "      --max-epochs E      override train.max_epochs\n"
           "      --max-steps N       stop after N optimizer steps in total\n"
           "      --set KEY=VALUE     override any config key (dotted: optimizer.base_lr=2)\n"
           "      --log-every N       a progress line every N steps (default 100; 0 = none)\n"
           "      --no-graphs         run the cuda step eagerly (no CUDA graph)\n"
           "      --profile           time the step's phases (eager, the host waits for each\n"
           "                          step); a \"profile\" line of mean ms per phase at the end\n"
           "      --precision P       the cuda MLPs in fp32, tf32 or bf16 (model.precision)\n"
           "      --threads N         OpenMP threads for the cpu backend\n"
           "      --loader-threads N  threads decoding training batches ahead (cuda: this rank's\n"
           "                          share of the CPUs less 2, 2 to 16; cpu 1)\n"
           "      --dump-step FILE    write one step's weights, batch, loss and gradients, exit\n"
           "      --submission-org S, --submission-platform S   MLLOG submission_* values\n"
           "      --progress          progress on stderr even when it is not a terminal\n"
           "      --rendezvous SPEC   several ranks (share/launch -n N): how they meet, file:PATH\n"
           "                          or tcp:HOST:PORT (required when WORLD_SIZE > 1)\n"
           "      --comm-timeout SEC  several ranks: fail when the peers do not answer within\n"
           "                          SEC seconds (default 300)\n"
           "      --hybrid-embedding  train the tables' most used rows as a replica: several ranks\n"
           "                          hold it on every rank (all-reduced) and exchange only the\n"
           "                          rest; one rank runs the same step (implies --force-exchange)\n"
           "      --hybrid-max-rows N     ... at most N replicated rows (default 1048576)\n"
           "      --hybrid-stat-batches N ... chosen from the first N training batches (default 20)\n"
           "      --hybrid-capacity auto|N ... vectors a rank pair of the fixed-size exchange (CUDA\n"
           "                          graphs; a batch that does not fit goes eagerly, exact); 0: none\n"
           "      --force-exchange    one rank: run the several-ranks step anyway (the exchange is a\n"
           "                          copy, collectives over a world of 1; --hybrid-embedding takes\n"
           "                          effect): that code's check on one GPU; slower\n"
           "  -h, --help              this help\n"
           "  -V, --version           versions of trainkit, CUDA, cuDNN, NCCL\n"
           "\nExit status: 0 target reached, 1 not reached, 2 usage, 3 bad input data, 4 I/O error,\n"
           "5 device error, 6 NaN/Inf loss, 70 internal error.\n");
}

// Several ranks (RANK/WORLD_SIZE...): only rank 0 writes stdout, the MLLOG and the progress
// bar; usage errors too (every rank has the same arguments, so the same error); runtime errors
// come from every rank, prefixed with it.
static tk_rank_info g_ri = {.rank = 0, .world = 1};

// The cuda backend's loader threads without --loader-threads: this rank's share of the CPUs it may
// run on (the ranks of its host split them), less 2 for the step's own thread and the copies;
// 2 to 16. (On an H100 box of 16 CPUs the 8 of before starved the hybrid step: 14 kept up.)
static int default_loaders(void) {
    cpu_set_t set;
    long n = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : sysconf(_SC_NPROCESSORS_ONLN);
    long per = n / (g_ri.local_world > 1 ? g_ri.local_world : 1) - 2;
    return per < 2 ? 2 : per > 16 ? 16 : (int)per;
}
static char g_errprog[64] = "train-step";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// A rank failing because of rank 0's error (which rank 0 reports) exits, but not at once: under
// share/launch the first rank to exit nonzero gets the others stopped, and rank 0 must have
// printed its message by then.
static void after_rank0(void) { usleep(1000000); }

static int usage_error(const char *fmt, ...) {
    if (g_ri.rank != 0) {
        after_rank0();
        return TK_EUSAGE;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tk_cli_usage_error(prog, usage, "%s", msg);
}

// ---- run state ----
typedef struct run {
    options *o;
    tk_ctx *c;
    tk_comm *comm;
    tk_dlrm *m;
    tk_dlrm_data *train;
    tk_dlrm_evalset *es;
    tk_mllog log;
    json_t *cfg_json;
    uint64_t cfg_hash;
    int64_t B, steps_per_epoch, epoch_samples, total_steps, eval_every_steps;
    int64_t step;            // updates applied
    double t_run0;           // run_start (monotonic)
    double last_auc, best_auc;
    int reached, eval_samples_logged;
    int64_t *pend;           // steps of checkpoints awaiting an external result, oldest first
    int npend, cap_pend;
    double wait_loader, wait_copy; // seconds the loop waited for decoded batches / their copies,
                                   // since the last progress line
} run;

static double epoch_num(const run *r, int64_t step) {
    return 1.0 + (double)(step * r->B) / (double)r->epoch_samples;
}

static int emit(json_t *o, tk_err *e) {
    if (g_ri.rank != 0) {
        json_decref(o);
        return 0;
    }
    return tk_jsonl_emit(stdout, o, e);
}

// JSON has no NaN: an undefined number (no evaluation yet, a one-class eval set) is null.
static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static json_t *meta_epoch(double ep) { return json_pack("{s:f}", "epoch_num", ep); }

static json_t *ckpt_meta(run *r) {
    char hash[32], rng[64], buf[32], sbuf[32], ebuf[32];
    snprintf(hash, sizeof hash, "%016llx", (unsigned long long)r->cfg_hash);
    snprintf(rng, sizeof rng, "philox4x32-10:%llu", (unsigned long long)r->m->cfg.seed);
    snprintf(buf, sizeof buf, "%lld", (long long)r->step);
    snprintf(sbuf, sizeof sbuf, "%lld", (long long)(r->step * r->B));
    snprintf(ebuf, sizeof ebuf, "%lld", (long long)(r->step / r->steps_per_epoch));
    char *cfg = json_dumps(r->cfg_json, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_t *m = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "format",
                          "trainkit-checkpoint-1", "workload", "dlrm", "step", buf, "samples_seen",
                          sbuf, "epoch", ebuf, "config_hash", hash, "rng", rng, "config", cfg);
    free(cfg);
    return m;
}

static int save_ckpt(run *r, const char *dir, char *path, size_t n, tk_err *e) {
    snprintf(path, n, "%s/step-%lld.safetensors", dir, (long long)r->step);
    json_t *meta = ckpt_meta(r);
    int rc = tk_dlrm_save(r->m, path, meta, e);
    json_decref(meta);
    if (rc) return rc;
    return emit(json_pack("{s:s, s:s, s:I, s:I}", "type", "checkpoint", "path", path, "step",
                          (json_int_t)r->step, "samples", (json_int_t)(r->step * r->B)),
                e);
}

// Checks the loss accumulated since the last read; emits a progress line.
static int log_progress(run *r, double t0_window, int64_t steps_window, tk_err *e) {
    double loss;
    TRY(tk_dlrm_read_loss(r->m, &loss, 1, e));
    if (!isfinite(loss)) {
        tk_err_set(e, TK_ENUMERIC, "training loss is %s at step %lld", isnan(loss) ? "NaN" : "Inf",
                   (long long)r->step);
        return tk_err_hint(e, "lower optimizer.base_lr or lengthen optimizer.warmup_steps");
    }
    double dt = tk_now() - t0_window, per = steps_window > 0 ? 1e3 / (double)steps_window : 0;
    json_t *o = json_pack("{s:s, s:I, s:I, s:f, s:f, s:f, s:f, s:f, s:f}", "type", "progress", "step",
                          (json_int_t)r->step, "samples", (json_int_t)(r->step * r->B), "epoch",
                          epoch_num(r, r->step) - 1, "loss", loss, "lr",
                          tk_lr_at(&r->m->cfg.lr, r->step - 1), "samples_per_s",
                          dt > 0 ? (double)(steps_window * r->B) / dt : 0.0, "loader_wait_ms",
                          r->wait_loader * per, "copy_wait_ms", r->wait_copy * per);
    r->wait_loader = r->wait_copy = 0;
    return emit(o, e);
}

static int record_eval(run *r, double auc, int64_t step, double secs, const char *ckpt, tk_err *e) {
    r->last_auc = auc;
    if (!(auc <= r->best_auc)) r->best_auc = auc;
    int reached = auc >= r->m->cfg.target_auc;
    TRY(TK_MLLOG_EVENT(&r->log, "eval_accuracy", num(auc), meta_epoch(epoch_num(r, step)), e));
    TRY(TK_MLLOG_END(&r->log, "eval_stop", NULL, meta_epoch(epoch_num(r, step)), e));
    json_t *o = json_pack("{s:s, s:s, s:I, s:I, s:f, s:o, s:f, s:b, s:f}", "type", "eval", "metric",
                          "auc", "step", (json_int_t)step, "samples", (json_int_t)(step * r->B),
                          "epoch", epoch_num(r, step) - 1, "auc", num(auc), "target",
                          r->m->cfg.target_auc, "reached", reached, "eval_s", secs);
    if (ckpt) json_object_set_new(o, "checkpoint", json_string(ckpt));
    TRY(emit(o, e));
    if (reached) r->reached = 1;
    return 0;
}

static int eval_inprocess(run *r, tk_err *e) {
    double ep = epoch_num(r, r->step), t0 = tk_now(), auc;
    TRY(TK_MLLOG_START(&r->log, "eval_start", NULL, meta_epoch(ep), e));
    TRY(tk_dlrm_evaluate(r->m, r->es, &auc, e));
    return record_eval(r, auc, r->step, tk_now() - t0, NULL, e);
}

// ---- out-of-process evaluation (evaluate --follow DIR) ----

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
        json_t *a = json_object_get(res, "auc");
        if (!json_is_number(a)) {
            json_decref(res);
            tk_err_set(e, TK_EDATA, "%s", res ? "$.auc: expected a number" : je.text);
            tk_err_where(e, "%s: line %d", path, res ? 1 : je.line);
            return TK_EDATA;
        }
        if (!r->eval_samples_logged) {
            json_t *n = json_object_get(res, "eval_samples");
            TRY(TK_MLLOG_EVENT(&r->log, "eval_samples", json_integer(json_integer_value(n)), NULL, e));
            r->eval_samples_logged = 1;
        }
        TRY(TK_MLLOG_START(&r->log, "eval_start", NULL, meta_epoch(epoch_num(r, s)), e));
        int rc = record_eval(r, json_number_value(a), s,
                             json_number_value(json_object_get(res, "eval_s")),
                             json_string_value(json_object_get(res, "checkpoint")), e);
        json_decref(res);
        TRY(rc);
        memmove(r->pend, r->pend + 1, (size_t)--r->npend * sizeof *r->pend);
    }
    return 0;
}

// Several ranks: rank 0 alone reads the evaluator's results (they appear at any moment, so ranks
// reading on their own could see different ones) and the others take its outcome: the target
// reached or not, or its error. Rank 0 may wait up to wait_s for a result before it joins.
static int poll_agreed(run *r, double wait_s, tk_err *e) {
    int rc = g_ri.rank == 0 ? poll_results(r, wait_s, e) : 0;
    if (g_ri.world == 1) return rc;
    int64_t all[TK_DLRM_MAX_WORLD];
    tk_err ge;
    tk_err_clear(&ge);
    int grc = tk_dlrm_gather_word(r->m, (int64_t)rc << 1 | r->reached, all, wait_s + r->o->comm_timeout, &ge);
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
    const tk_dlrm_config *cfg = &r->m->cfg;
    TRY(TK_MLLOG_EVENT(L, "submission_benchmark", json_string("dlrm"), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_org", json_string(r->o->org), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_division", json_string("closed"), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_status", json_string("research"), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "submission_platform", json_string(r->o->platform), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "seed", json_integer((json_int_t)cfg->seed), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "global_batch_size", json_integer(cfg->batch), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "gradient_accumulation_steps", json_integer(1), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_base_learning_rate", json_real(cfg->lr.base_lr), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "sgd_opt_base_learning_rate", json_real(cfg->lr.base_lr), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_learning_rate_warmup_steps", json_integer(cfg->lr.warmup_steps), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "opt_learning_rate_warmup_factor", json_real(0.0), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "lr_decay_start_steps", json_integer(cfg->lr.decay_start), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "sgd_opt_learning_rate_decay_steps", json_integer(cfg->lr.decay_steps), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "sgd_opt_learning_rate_decay_poly_power", json_real(cfg->lr.power), NULL, e));
    TRY(TK_MLLOG_EVENT(L, "train_samples", json_integer(r->epoch_samples), NULL, e));
    if (r->es) {
        TRY(TK_MLLOG_EVENT(L, "eval_samples", json_integer(r->es->n), NULL, e));
        r->eval_samples_logged = 1;
    }
    // The tensors the MLPerf rules name (closed_dlrm.yaml), in the reference's order.
    TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", "embeddings"), e));
    for (int l = 0; l < r->m->nlayers; l++) {
        char name[48];
        int top = l >= cfg->nbot;
        snprintf(name, sizeof name, "%s_mlp_dense%d", top ? "top" : "bottom", (top ? l - cfg->nbot : l) + 1);
        TRY(TK_MLLOG_EVENT(L, "weights_initialization", NULL, json_pack("{s:s}", "tensor", name), e));
    }
    return 0;
}

// ---- the training loop ----

// --hybrid-embedding: the replicated rows are chosen from the first batches of the training data
// (every rank reads the same ones, so every rank chooses the same rows).
static int hybrid_setup(run *r, tk_err *e) {
    const tk_dlrm_config *cfg = &r->m->cfg;
    const int T = cfg->num_tables;
    int64_t want = r->o->hybrid_stat_batches * r->B, have = (int64_t)tk_dlrm_data_count(r->train);
    int64_t n = want < have ? want : have, got_all = 0;
    uint8_t *hl = malloc((size_t)r->B);
    int32_t *hd = malloc((size_t)r->B * cfg->num_dense * 4), *cat = malloc((size_t)n * T * 4);
    int rc = !hl || !hd || !cat ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
    if (!rc) rc = tk_dlrm_data_seek(r->train, 0, e);
    while (!rc && got_all < n) {
        int k = n - got_all < r->B ? (int)(n - got_all) : (int)r->B, got = 0;
        rc = tk_dlrm_data_next(r->train, k, cfg->table_rows, hl, hd, cat + got_all * T, &got, e);
        if (!rc && got == 0) break;
        got_all += got;
    }
    double t0 = tk_now();
    if (!rc) rc = tk_dlrm_hybrid_setup(r->m, cat, got_all, r->o->hybrid_max_rows, r->o->hybrid_capacity, e);
    if (!rc) {
        json_t *h = tk_dlrm_hybrid_json(r->m);
        rc = emit(json_pack("{s:s, s:I, s:f, s:o}", "type", "hybrid_embedding", "stat_samples", (json_int_t)got_all,
                            "setup_s", tk_now() - t0, "rows", h ? h : json_null()),
                  e);
    }
    free(hl);
    free(hd);
    free(cat);
    return rc;
}

// Takes decoded batch `step` from the loader and copies it into staging slot step % 2.
static int stage_batch(run *r, tk_dlrm_loader *ld, int64_t step, tk_err *e) {
    uint8_t *hl;
    int32_t *hd, *hc;
    double t0 = tk_now();
    TRY(tk_dlrm_loader_get(ld, step, &hl, &hd, &hc, e));
    double t1 = tk_now();
    int rc = tk_dlrm_stage_batch(r->m, (int)(step & 1), hl, hd, hc, (int)r->B, e);
    tk_dlrm_loader_put(ld, step);
    r->wait_loader += t1 - t0;
    r->wait_copy += tk_now() - t1;
    return rc;
}

static int train(run *r, tk_err *e) {
    options *o = r->o;
    int use_graph = r->c->backend == TK_BACKEND_CUDA && !o->no_graphs && !o->profile;
    // One graph; with the hybrid embedding one per staging slot (its step reads the slot's plan).
    tk_graph graph[2] = {{0}};
    int64_t graph_key[2] = {0, 0}; // tk_dlrm_capture_key of each
    const tk_dlrm_config *cfg = &r->m->cfg;
    size_t B = (size_t)r->B;
    tk_progress pr;
    tk_progress_init(&pr, "train", "steps", (uint64_t)r->total_steps, o->progress);
    if (g_ri.rank != 0) pr.on = 0;
    int64_t stop_at = o->max_steps > 0 && o->max_steps < r->total_steps ? o->max_steps : r->total_steps;
    // Loader threads decode the batches ahead into pinned buffers (the batches of the old
    // seek-at-each-epoch loop, bit for bit) while the device trains.
    int nload = o->loader_threads > 0 ? (int)o->loader_threads : r->c->backend == TK_BACKEND_CUDA ? default_loaders() : 1;
    tk_dlrm_loader *ld = NULL;
    int rc = tk_dlrm_loader_start(&ld, r->c, o->train, o->ntrain, cfg->num_dense, cfg->num_tables, cfg->table_rows,
                                  (int)B, r->steps_per_epoch, r->step, stop_at, nload, e);
    int in_epoch = 0, staged = 0;
    double tw = tk_now();
    int64_t sw = 0, nprof = 0;
    while (!rc && r->step < stop_at && !r->reached) {
        int64_t ep = r->step / r->steps_per_epoch;
        if (!in_epoch) {
            rc = TK_MLLOG_START(&r->log, "block_start", NULL,
                                json_pack("{s:I, s:i}", "first_epoch_num", (json_int_t)(ep + 1), "epoch_count", 1), e);
            if (!rc) rc = TK_MLLOG_START(&r->log, "epoch_start", NULL,
                                         json_pack("{s:I}", "epoch_num", (json_int_t)(ep + 1)), e);
            in_epoch = 1;
            if (rc) break;
        }
        // Batch `step` sits in staging slot step % 2 (copied while the step before ran); the
        // copy of the next batch starts right after this step is queued, so the host never
        // waits for the compute stream here.
        if (!staged && (rc = stage_batch(r, ld, r->step, e))) break;
        if ((rc = tk_dlrm_use_batch(r->m, (int)(r->step & 1), e))) break;
        staged = 0;
        if (use_graph && tk_dlrm_capturable(r->m)) { // (a hybrid batch that does not fit: eagerly)
            int k = o->hybrid ? (int)(r->step & 1) : 0;
            tk_graph *g = &graph[k];
            if (g->valid && graph_key[k] != tk_dlrm_capture_key(r->m)) { // made again, once its last launch is done
                if ((rc = tk_dlrm_sync(r->m, e))) break;
                tk_graph_destroy(g);
            }
            if (!g->valid) {
                graph_key[k] = tk_dlrm_capture_key(r->m);
                rc = tk_graph_begin(r->c, e);
                if (!rc) rc = tk_dlrm_train_step(r->m, e);
                if (!rc) rc = tk_graph_end(r->c, g, e);
            }
            if (!rc) rc = tk_graph_launch(r->c, g, e);
            if (!rc) rc = tk_dlrm_step_queued(r->m, e);
        } else {
            rc = tk_dlrm_train_step(r->m, e);
        }
        if (rc) break;
        // Several ranks: a peer that died leaves the steps' collectives hanging, and every later
        // host wait would hang with them: wait, bounded by --comm-timeout, for the step before
        // this one (this one runs meanwhile). Staging the next batch waits for nothing later: its
        // slot and plan were last read by that step.
        if ((rc = tk_dlrm_sync_lagged(r->m, e))) break;
        if (r->step + 1 < stop_at) {
            if ((rc = stage_batch(r, ld, r->step + 1, e))) break;
            staged = 1;
        }
        // --profile: the step's phase times, the first step of the run (warm-up) dropped
        if (o->profile && ((rc = tk_dlrm_sync(r->m, e)) || (rc = tk_dlrm_profile_add(r->m, nprof++ > 0, e))))
            break;
        r->step++;
        sw++;
        tk_progress_update(&pr, (uint64_t)r->step);
        int end_of_epoch = r->step % r->steps_per_epoch == 0;
        int is_eval = r->step % r->eval_every_steps == 0 || end_of_epoch || r->step == stop_at;
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
            if (!rc) rc = TK_MLLOG_END(&r->log, "block_stop", NULL,
                                       json_pack("{s:I}", "first_epoch_num", (json_int_t)(ep + 1)), e);
            in_epoch = 0;
        }
    }
    tk_progress_end(&pr, (uint64_t)r->step);
    // Out-of-process evaluation: wait for the results still pending.
    if (!rc && r->o->eval_dir && !r->reached) rc = poll_agreed(r, o->eval_wait, e);
    for (int k = 0; k < 2; k++)
        if (graph[k].valid) tk_graph_destroy(&graph[k]);
    tk_dlrm_loader_stop(ld);
    return rc;
}

static int write_stop_file(const char *dir, tk_err *e) {
    char path[4200];
    snprintf(path, sizeof path, "%s/STOP", dir);
    tk_afile f;
    TRY(tk_afile_open(&f, path, e));
    return tk_afile_commit(&f, e);
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

static int run_main(options *o, tk_err *e) {
    run R = {.o = o, .last_auc = NAN, .best_auc = NAN};
    run *r = &R;
    r->log.fd = -1;
    tk_backend be;
    int rc = tk_backend_parse(o->backend, &be, e);
    if (rc) return rc;
    // init_start comes first: everything below (context, data, model) is initialization.
    if ((rc = tk_mllog_open(&r->log, g_ri.rank == 0 ? o->mllog : NULL, g_ri.rank, e))) return rc;
    if ((rc = TK_MLLOG_EVENT(&r->log, "cache_clear", json_true(), NULL, e))) goto out;
    if ((rc = TK_MLLOG_START(&r->log, "init_start", NULL, NULL, e))) goto out;
    for (const char *const *d = (const char *const[]){o->ckpt_dir, o->eval_dir, NULL}; *d; d++)
        if (mkdir(*d, 0777) != 0 && errno != EEXIST) {
            rc = tk_err_errno(e, errno, "%s: cannot create the directory", *d);
            goto out;
        }
    // One process per GPU: rank i uses the i-th GPU of its host.
    if ((rc = tk_ctx_create(&r->c, be, be == TK_BACKEND_CUDA ? g_ri.local_rank : 0, e))) goto out;
    if (o->threads > 0) r->c->threads = (int)o->threads;
    if ((g_ri.world > 1 || o->force_exchange) && (rc = tk_comm_create(r->c, &g_ri, o->rendezvous, o->comm_timeout, &r->comm, e))) goto out;
    if ((rc = tk_dlrm_data_open(&r->train, o->train, o->ntrain, 13, 26, e))) goto out;
    tk_dlrm_config cfg;
    if ((rc = tk_dlrm_config_load(o->config, o->sets, o->nsets, tk_dlrm_data_meta(r->train), &cfg,
                                  &r->cfg_json, e)))
        goto out;
    if (cfg.num_dense != 13 || cfg.num_tables != 26) {
        // The loader was opened with the Criteo shape; reopen with the config's.
        tk_dlrm_data_close(r->train);
        if ((rc = tk_dlrm_data_open(&r->train, o->train, o->ntrain, cfg.num_dense, cfg.num_tables, e)))
            goto out;
    }
    r->cfg_hash = tk_dlrm_config_hash(r->cfg_json);
    r->B = cfg.batch;
    r->steps_per_epoch = (int64_t)(tk_dlrm_data_count(r->train) / (uint64_t)cfg.batch);
    if (r->steps_per_epoch == 0) {
        rc = tk_err_set(e, TK_EDATA, "the training data holds %llu records, fewer than one batch (%d)",
                        (unsigned long long)tk_dlrm_data_count(r->train), cfg.batch);
        tk_err_where(e, "%s", o->train[0]);
        goto out;
    }
    r->epoch_samples = r->steps_per_epoch * r->B;
    r->total_steps = r->steps_per_epoch * cfg.max_epochs;
    r->eval_every_steps = o->eval_every > 0 ? (o->eval_every + r->B - 1) / r->B
                                            : (r->steps_per_epoch + cfg.evals_per_epoch - 1) / cfg.evals_per_epoch;
    if (r->eval_every_steps < 1) r->eval_every_steps = 1;
    if ((rc = tk_dlrm_create_dist(&r->m, r->c, &cfg, r->comm, o->comm_timeout, e))) goto out;
    if (o->profile && (rc = tk_dlrm_profile_start(r->m, e))) goto out;
    if (o->resume) {
        json_t *meta = NULL;
        if ((rc = tk_dlrm_load(r->m, o->resume, &meta, e))) goto out;
        char want[32];
        snprintf(want, sizeof want, "%016llx", (unsigned long long)r->cfg_hash);
        const char *have = json_string_value(json_object_get(meta, "config_hash"));
        if (!have || strcmp(have, want) != 0) {
            json_decref(meta);
            rc = tk_err_set(e, TK_EUSAGE, "%s: written with another configuration (config_hash %s, now %s)",
                            o->resume, have ? have : "missing", want);
            tk_err_hint(e, "resume with the same --config, --set and --seed");
            goto out;
        }
        rc = parse_meta_i64(meta, "step", o->resume, &r->step, e);
        json_decref(meta);
        if (rc) goto out;
        if ((rc = tk_dlrm_write_step(r->m, r->step, e))) goto out;
    } else if ((rc = tk_dlrm_init_weights(r->m, cfg.seed, e))) {
        goto out;
    }
    if (o->dump) { // one step for contrib/peers/dlrm.py; no run, no MLLOG run lines
        int got = 0;
        uint8_t *hl = malloc((size_t)r->B);
        int32_t *hd = malloc((size_t)r->B * cfg.num_dense * 4), *hc = malloc((size_t)r->B * cfg.num_tables * 4);
        if (!hl || !hd || !hc) rc = tk_err_set(e, TK_EIO, "out of host memory");
        if (!rc) rc = tk_dlrm_data_seek(r->train, (uint64_t)((r->step % r->steps_per_epoch) * r->B), e);
        if (!rc) rc = tk_dlrm_data_next(r->train, (int)r->B, cfg.table_rows, hl, hd, hc, &got, e);
        if (!rc) rc = tk_dlrm_set_batch(r->m, hl, hd, hc, got, e);
        if (!rc) rc = tk_dlrm_dump_step(r->m, o->dump, e);
        free(hl);
        free(hd);
        free(hc);
        if (!rc) rc = emit(json_pack("{s:s, s:s, s:I}", "type", "dump", "path", o->dump, "step", (json_int_t)r->step), e);
        goto out;
    }
    if (o->hybrid && (rc = hybrid_setup(r, e))) goto out;
    if (o->neval > 0 && (rc = tk_dlrm_evalset_load(r->m, o->eval, o->neval, &r->es, e))) goto out;
    {
        int64_t rows = 0; // all tables, whichever rank holds them
        for (int t = 0; t < cfg.num_tables; t++) rows += cfg.table_rows[t];
        json_t *c = json_pack("{s:s, s:s, s:s, s:O, s:I, s:I, s:I, s:I, s:I, s:I, s:b, s:i, s:i}", "type",
                              "config", "workload", "dlrm", "backend", tk_ctx_describe(r->c),
                              "config", r->cfg_json, "train_samples", (json_int_t)tk_dlrm_data_count(r->train),
                              "eval_samples", (json_int_t)(r->es ? r->es->n : 0), "steps_per_epoch",
                              (json_int_t)r->steps_per_epoch, "eval_every_steps", (json_int_t)r->eval_every_steps,
                              "start_step", (json_int_t)r->step, "params",
                              (json_int_t)(r->m->dense_n + (size_t)rows * cfg.emb_dim),
                              "graphs", be == TK_BACKEND_CUDA && !o->no_graphs, "world_size", g_ri.world,
                              "rank", g_ri.rank);
        if ((rc = emit(c, e))) goto out;
    }
    if ((rc = log_preamble(r, e))) goto out;
    if ((rc = tk_ctx_sync(r->c, e))) goto out;
    if ((rc = TK_MLLOG_END(&r->log, "init_stop", NULL, NULL, e))) goto out;
    if ((rc = TK_MLLOG_START(&r->log, "run_start", NULL, NULL, e))) goto out;
    r->t_run0 = tk_now();
    int64_t step0 = r->step;
    rc = train(r, e);
    double tt = tk_now() - r->t_run0;
    int numeric = rc == TK_ENUMERIC;
    if (rc && !numeric) goto out;
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
    json_t *res = json_pack("{s:s, s:s, s:b, s:s, s:o, s:o, s:f, s:f, s:I, s:I, s:f, s:f}", "type",
                            "result", "workload", "dlrm", "reached", r->reached, "status",
                            numeric ? "nan" : r->reached ? "success" : "aborted", "auc",
                            num(r->last_auc), "best_auc", num(r->best_auc), "target", cfg.target_auc,
                            "time_to_train_s", tt, "steps", (json_int_t)r->step, "samples",
                            (json_int_t)(r->step * r->B), "epochs", (double)(r->step * r->B) / (double)r->epoch_samples,
                            "samples_per_s", tt > 0 ? (double)(done * r->B) / tt : 0.0);
    json_t *hy = tk_dlrm_hybrid_json(r->m);
    if (hy) json_object_set_new(res, "hybrid_embedding", hy);
    tk_err e2;
    json_t *prof = tk_dlrm_profile_json(r->m);
    if (prof) {
        json_t *line = json_pack("{s:s}", "type", "profile");
        json_object_update(line, prof);
        json_decref(prof);
        if (emit(line, &e2) && !rc) {
            *e = e2;
            rc = e2.code;
        }
    }
    if (emit(res, &e2) && !rc) {
        *e = e2;
        rc = e2.code;
    }
    if (!rc && !r->reached) rc = TK_NO;
out:
    if (o->eval_dir && g_ri.rank == 0) {
        tk_err e3;
        if (write_stop_file(o->eval_dir, &e3) && (rc == 0 || rc == TK_NO)) {
            *e = e3;
            rc = e3.code;
        }
    }
    tk_dlrm_evalset_free(r->m, r->es);
    tk_dlrm_destroy(r->m);
    tk_comm_destroy(r->comm);
    tk_dlrm_data_close(r->train);
    json_decref(r->cfg_json);
    free(r->pend);
    tk_mllog_close(&r->log);
    tk_ctx_destroy(r->c);
    return rc;
}

static int add_path(char **list, int *n, const char *p) {
    if (*n >= MAX_PATHS) return -1;
    list[(*n)++] = (char *)p;
    return 0;
}

int main(int argc, char **argv) {
    enum {
        O_MLLOG = 256, O_CKDIR, O_CKEVERY, O_RESUME, O_EVERY, O_SEED, O_EPOCHS, O_STEPS, O_NOGRAPH,
        O_EVDIR, O_WAIT, O_DUMP, O_SET, O_LOGEVERY, O_THREADS, O_ORG, O_PLATFORM, O_PROGRESS,
        O_PRECISION, O_LOADER, O_RDV, O_CTIMEOUT, O_PROFILE, O_HYBRID, O_HYROWS, O_HYSTAT, O_HYCAP,
        O_FORCEX
    };
    static const struct option longopts[] = {
        {"workload", required_argument, 0, 'w'}, {"config", required_argument, 0, 'c'},
        {"train", required_argument, 0, 't'},    {"eval", required_argument, 0, 'e'},
        {"backend", required_argument, 0, 'b'},  {"mllog", required_argument, 0, O_MLLOG},
        {"ckpt-dir", required_argument, 0, O_CKDIR}, {"ckpt-every", required_argument, 0, O_CKEVERY},
        {"resume", required_argument, 0, O_RESUME}, {"eval-every", required_argument, 0, O_EVERY},
        {"seed", required_argument, 0, O_SEED},  {"max-epochs", required_argument, 0, O_EPOCHS},
        {"max-steps", required_argument, 0, O_STEPS}, {"no-graphs", no_argument, 0, O_NOGRAPH},
        {"profile", no_argument, 0, O_PROFILE},
        {"eval-dir", required_argument, 0, O_EVDIR}, {"eval-wait", required_argument, 0, O_WAIT},
        {"dump-step", required_argument, 0, O_DUMP}, {"set", required_argument, 0, O_SET},
        {"log-every", required_argument, 0, O_LOGEVERY}, {"threads", required_argument, 0, O_THREADS},
        {"submission-org", required_argument, 0, O_ORG},
        {"submission-platform", required_argument, 0, O_PLATFORM},
        {"progress", no_argument, 0, O_PROGRESS}, {"precision", required_argument, 0, O_PRECISION},
        {"loader-threads", required_argument, 0, O_LOADER},
        {"rendezvous", required_argument, 0, O_RDV}, {"comm-timeout", required_argument, 0, O_CTIMEOUT},
        {"hybrid-embedding", no_argument, 0, O_HYBRID}, {"hybrid-max-rows", required_argument, 0, O_HYROWS},
        {"hybrid-stat-batches", required_argument, 0, O_HYSTAT}, {"hybrid-capacity", required_argument, 0, O_HYCAP},
        {"force-exchange", no_argument, 0, O_FORCEX},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},        {0, 0, 0, 0}};
    static options o = {.backend = "auto", .log_every = 100, .eval_wait = 600, .comm_timeout = 300, .org = "trainkit",
                        .platform = "1xcpu", .hybrid_max_rows = 1 << 20, .hybrid_stat_batches = 20,
                        .hybrid_capacity = -1};
    static char seedbuf[64], epochbuf[64], precbuf[64];
    tk_err e;
    tk_err_clear(&e);
    const char *workload = "dlrm";
    int c, rc = 0, platform_given = 0;
    if (tk_rank_from_env(&g_ri, &e)) return tk_cli_usage_error(prog, usage, "%s", e.what);
    if (g_ri.world > 1) snprintf(g_errprog, sizeof g_errprog, "%s: rank %d", prog, g_ri.rank);
    while ((c = getopt_long(argc, argv, ":w:c:t:e:b:hV", longopts, NULL)) != -1) {
        int64_t v;
        switch (c) {
        case 'w': workload = optarg; break;
        case 'c': o.config = optarg; break;
        case 't':
            if (add_path(o.train, &o.ntrain, optarg)) return usage_error("too many --train paths");
            break;
        case 'e':
            if (add_path(o.eval, &o.neval, optarg)) return usage_error("too many --eval paths");
            break;
        case 'b': o.backend = optarg; break;
        case O_MLLOG: o.mllog = optarg; break;
        case O_CKDIR: o.ckpt_dir = optarg; break;
        case O_CKEVERY: rc = tk_parse_i64(optarg, 1, INT64_MAX, "--ckpt-every", &o.ckpt_every, &e); break;
        case O_RESUME: o.resume = optarg; break;
        case O_EVERY: rc = tk_parse_i64(optarg, 1, INT64_MAX, "--eval-every", &o.eval_every, &e); break;
        case O_SEED:
            rc = tk_parse_i64(optarg, 0, INT64_MAX, "--seed", &v, &e);
            snprintf(seedbuf, sizeof seedbuf, "train.seed=%lld", (long long)v);
            if (!rc && o.nsets < MAX_SETS) o.sets[o.nsets++] = seedbuf;
            break;
        case O_EPOCHS:
            rc = tk_parse_i64(optarg, 1, 1000, "--max-epochs", &v, &e);
            snprintf(epochbuf, sizeof epochbuf, "train.max_epochs=%lld", (long long)v);
            if (!rc && o.nsets < MAX_SETS) o.sets[o.nsets++] = epochbuf;
            break;
        case O_STEPS: rc = tk_parse_i64(optarg, 1, INT64_MAX, "--max-steps", &o.max_steps, &e); break;
        case O_NOGRAPH: o.no_graphs = 1; break;
        case O_PROFILE: o.profile = 1; break;
        case O_EVDIR: o.eval_dir = optarg; break;
        case O_WAIT: rc = tk_parse_f64(optarg, 0, 1e7, "--eval-wait", &o.eval_wait, &e); break;
        case O_DUMP: o.dump = optarg; break;
        case O_SET:
            if (o.nsets >= MAX_SETS) return usage_error("too many --set options");
            o.sets[o.nsets++] = optarg;
            break;
        case O_LOGEVERY: rc = tk_parse_i64(optarg, 0, INT64_MAX, "--log-every", &o.log_every, &e); break;
        case O_THREADS: rc = tk_parse_i64(optarg, 1, 4096, "--threads", &o.threads, &e); break;
        case O_LOADER: rc = tk_parse_i64(optarg, 1, 64, "--loader-threads", &o.loader_threads, &e); break;
        case O_ORG: o.org = optarg; break;
        case O_PLATFORM: o.platform = optarg; platform_given = 1; break;
        case O_PROGRESS: o.progress = 1; break;
        case O_RDV: o.rendezvous = optarg; break;
        case O_HYBRID: o.hybrid = 1; break;
        case O_FORCEX: o.force_exchange = 1; break;
        case O_HYROWS:
            rc = tk_parse_i64(optarg, 0, 1 << 30, "--hybrid-max-rows", &o.hybrid_max_rows, &e);
            break;
        case O_HYSTAT:
            rc = tk_parse_i64(optarg, 1, 100000, "--hybrid-stat-batches", &o.hybrid_stat_batches, &e);
            break;
        case O_HYCAP:
            if (strcmp(optarg, "auto") == 0) o.hybrid_capacity = -1;
            else rc = tk_parse_i64(optarg, 0, INT32_MAX, "--hybrid-capacity", &o.hybrid_capacity, &e);
            break;
        case O_CTIMEOUT: rc = tk_parse_f64(optarg, 0.001, 1e7, "--comm-timeout", &o.comm_timeout, &e); break;
        case O_PRECISION:
            if (strcmp(optarg, "fp32") != 0 && strcmp(optarg, "tf32") != 0 && strcmp(optarg, "bf16") != 0)
                return usage_error("--precision: expected fp32, tf32 or bf16, got '%s'",
                                          optarg);
            if (o.nsets >= MAX_SETS) return usage_error("too many --set options");
            snprintf(precbuf, sizeof precbuf, "model.precision=%s", optarg);
            o.sets[o.nsets++] = precbuf;
            break;
        default: return tk_cli_common_option(prog, usage, help, c, argv);
        }
        if (rc) return usage_error("%s", e.what);
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    if (strcmp(workload, "dlrm") != 0)
        return usage_error("--workload: only 'dlrm' is implemented, got '%s'", workload);
    if (!o.config) return usage_error("--config is required");
    if (o.ntrain == 0) return usage_error("--train is required");
    if (!o.dump && o.neval == 0 && !o.eval_dir)
        return usage_error("--eval or --eval-dir is required");
    if (o.neval > 0 && o.eval_dir)
        return usage_error("--eval and --eval-dir are exclusive");
    if (o.ckpt_every > 0 && !o.ckpt_dir)
        return usage_error("--ckpt-every needs --ckpt-dir");
    if (g_ri.world > 1 && !o.rendezvous)
        return usage_error("--rendezvous is required with several ranks (WORLD_SIZE=%d)", g_ri.world);
    // One rank: the hybrid embedding runs in the exchange step over a world of 1 (its replica's
    // segment sums and dense update beat the sorted sparse update of the hot rows: 1.27x the
    // one-rank step on an H100, contrib/bench/NOTES.md), so one command serves every GPU count.
    if (o.hybrid) o.force_exchange = 1;
    if ((g_ri.world > 1 || o.force_exchange) && o.dump)
        return usage_error("--dump-step is not supported with several ranks, --force-exchange or --hybrid-embedding yet");
    static char platform[160];
    if (!platform_given && strcmp(o.backend, "cpu") != 0 && tk_cuda_device_count() > 0) {
        snprintf(platform, sizeof platform, "%dxGPU", g_ri.world);
        o.platform = platform;
    }
    rc = run_main(&o, &e);
    if (rc && rc != TK_NO) tk_cli_fail(g_errprog, &e);
    tk_err e2;
    if (tk_cli_close_stdout(&e2)) {
        tk_cli_fail(g_errprog, &e2);
        if (!rc || rc == TK_NO) rc = e2.code;
    }
    return rc;
}
