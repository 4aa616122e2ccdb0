// train-step: train a workload to its quality target on the cpu or cuda backend, with an
// MLPerf-compliant MLLOG, JSON Lines on stdout, safetensors checkpoints and --resume.
// See man/man1/train-step.1. Thin: the loop is lib/engine/engine.c, the workloads are the
// registry's (lib/engine/registry.c); options a workload adds come from its table.
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cli.h"
#include "dist/dist.h"
#include "engine/cfg.h"
#include "engine/engine.h"
#include "engine/registry.h"
#include "gpu/gpu.h"

static const char *prog = "train-step";
static const char *usage =
    "usage: train-step --config FILE --train PATH... (--eval PATH... | --eval-dir DIR | --no-eval) [options]\n"
    "       train-step --help\n";

#define MAX_PATHS 256
#define MAX_SETS 64
#define MAX_WL_OPTS 64

static void help(void) {
    printf("%s", usage);
    printf("\nTrain a workload from .tks shards to its quality target; JSON Lines on stdout.\n"
           "The workload is the config's \"workload\":\n");
    for (const tk_workload *const *w = tk_workloads(); *w; w++)
        printf("  %-22s %s (share/workloads/%s/)\n", (*w)->name, (*w)->summary, (*w)->name);
    printf("\n"
           "  -w, --workload NAME     check that the config is for this workload\n"
           "  -c, --config FILE       share/workloads/NAME/config.json or tiny.json\n"
           "  -t, --train PATH        training shards (files or directories; repeatable)\n"
           "  -e, --eval PATH         evaluation shards (repeatable): in-process evaluation\n"
           "      --eval-dir DIR      out-of-process evaluation: write checkpoints to DIR at each\n"
           "                          eval point and read DIR/NAME.eval.json from evaluate --follow\n"
           "      --eval-wait SEC     at the end, wait this long for pending results (600)\n"
           "      --no-eval           train without evaluating (a throughput run: share/scale\n"
           "                          --steps); exit 0 once every step ran\n"
           "      --eval-every N      evaluate every N training samples (default: the config's\n"
           "                          train.evals_per_epoch or train.eval_every_samples)\n"
           "  -b, --backend B         cpu, cuda or auto (default auto)\n"
           "      --mllog FILE        append the MLPerf log (MLLOG lines) to FILE\n"
           "      --ckpt-dir DIR      write checkpoints DIR/step-N.safetensors\n"
           "      --ckpt-every N      ... every N steps (default: only at the end)\n"
           "      --resume CKPT       continue from a checkpoint (bit-identical)\n"
           "      --init-checkpoint F start from the weights of F (a trainkit checkpoint, or what the\n"
           "                          workload imports: Hugging Face, torchvision)\n"
           "      --seed S            override train.seed\n"
           "      --max-epochs E      override train.max_epochs\n"
           "      --max-steps N       stop after N optimizer steps in total\n"
           "      --set KEY=VALUE     override any config key (dotted: optimizer.base_lr=2)\n"
           "      --log-every N       a progress line every N steps (default 100; 0 = none)\n"
           "      --no-graphs         run the cuda step eagerly (no CUDA graph)\n"
           "      --profile           time the step's phases (eager, the host waits for each\n"
           "                          step); a \"profile\" line of mean ms per phase at the end\n"
           "      --precision P       the cuda compute in fp32, tf32 or bf16 (model.precision)\n"
           "      --threads N         OpenMP threads for the cpu backend\n"
           "      --loader-threads N  threads decoding training batches ahead (cuda: this rank's\n"
           "                          share of the CPUs less 2, 2 to 16; cpu 1)\n"
           "      --host-batches      decoded batches through host memory even where the reader\n"
           "                          can write device memory (the GPU image decoder)\n"
           "      --dump-step FILE    write one step's weights, batch, loss and gradients, exit\n"
           "      --submission-org S, --submission-platform S   MLLOG submission_* values\n"
           "      --progress          progress on stderr even when it is not a terminal\n"
           "      --rendezvous SPEC   several ranks: how they meet, file:PATH or tcp:HOST:PORT;\n"
           "                          default $TK_RENDEZVOUS, which share/launch sets (needed\n"
           "                          under srun or mpirun)\n"
           "      --comm-timeout SEC  several ranks: fail when the peers do not answer within\n"
           "                          SEC seconds (default 300)\n");
    for (const tk_workload *const *w = tk_workloads(); *w; w++) {
        if (!(*w)->options || !(*w)->options[0].name) continue;
        printf("\n%s options (each is a --set of its config key):\n", (*w)->name);
        for (const tk_wl_option *op = (*w)->options; op->name; op++) {
            char lhs[64];
            snprintf(lhs, sizeof lhs, "--%s%s%s", op->name, op->has_arg ? " " : "", op->has_arg ? op->arg : "");
            printf("      %-20s%s%s\n", lhs, strlen(lhs) > 19 ? "\n                          " : "", op->help);
        }
    }
    printf("\n  -h, --help              this help\n"
           "  -V, --version           versions of trainkit, CUDA, cuDNN, NCCL\n"
           "\nExit status: 0 target reached, 1 not reached, 2 usage, 3 bad input data, 4 I/O error,\n"
           "5 device error, 6 NaN/Inf loss, 70 internal error.\n");
}

// Several ranks (RANK/WORLD_SIZE...): only rank 0 writes stdout, the MLLOG and the progress bar;
// usage errors too (every rank has the same arguments, so the same error); runtime errors come
// from every rank, prefixed with it.
static tk_rank_info g_ri = {.rank = 0, .world = 1};
static char g_errprog[64] = "train-step";

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
    if (g_ri.rank != 0) {
        usleep(1000000); // rank 0 reports it; it must have printed before share/launch stops us
        return TK_EUSAGE;
    }
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tk_cli_usage_error(prog, usage, "%s", msg);
}

static void note(void *arg, const char *msg) {
    (void)arg;
    fprintf(stderr, "%s: note: %s\n", prog, msg);
}

// The workloads' own options, after the common ones: long option index k >= O_WL maps to wl_opt[k - O_WL].
enum { O_WL = 1000 };
static const tk_wl_option *wl_opt[MAX_WL_OPTS];
static int nwl_opt;

static void add_wl_options(struct option *lo, int *n) {
    for (const tk_workload *const *w = tk_workloads(); *w; w++)
        for (const tk_wl_option *op = (*w)->options; op && op->name && nwl_opt < MAX_WL_OPTS; op++) {
            int dup = 0;
            for (int i = 0; i < nwl_opt; i++) dup |= strcmp(wl_opt[i]->name, op->name) == 0;
            if (dup) continue;
            lo[(*n)++] = (struct option){op->name, op->has_arg ? required_argument : no_argument, 0, O_WL + nwl_opt};
            wl_opt[nwl_opt++] = op;
        }
}

// "--NAME ARG" of a workload option as a --set: checked, then KEY=VALUE in buf.
static int wl_option_set(const tk_wl_option *op, const char *arg, char *buf, size_t n, tk_err *e) {
    if (!op->has_arg) {
        snprintf(buf, n, "%s=%s", op->key, op->value);
        return 0;
    }
    if (!(op->word && strcmp(arg, op->word) == 0)) {
        int64_t v;
        char name[80];
        snprintf(name, sizeof name, "--%s", op->name);
        if (tk_parse_i64(arg, op->lo, op->hi, name, &v, e)) {
            if (op->word) tk_err_set(e, TK_EUSAGE, "%s: expected %s or an integer in [%lld, %lld], got '%s'", name,
                                     op->word, (long long)op->lo, (long long)op->hi, arg);
            return TK_EUSAGE;
        }
    }
    snprintf(buf, n, "%s=%s", op->key, arg);
    return 0;
}

int main(int argc, char **argv) {
    enum {
        O_MLLOG = 256, O_CKDIR, O_CKEVERY, O_RESUME, O_EVERY, O_SEED, O_EPOCHS, O_STEPS, O_NOGRAPH,
        O_EVDIR, O_WAIT, O_DUMP, O_SET, O_LOGEVERY, O_THREADS, O_ORG, O_PLATFORM, O_PROGRESS,
        O_PRECISION, O_LOADER, O_RDV, O_CTIMEOUT, O_PROFILE, O_INIT, O_HOSTB, O_NOEVAL
    };
    static struct option longopts[64 + MAX_WL_OPTS] = {
        {"workload", required_argument, 0, 'w'}, {"config", required_argument, 0, 'c'},
        {"train", required_argument, 0, 't'},    {"eval", required_argument, 0, 'e'},
        {"backend", required_argument, 0, 'b'},  {"mllog", required_argument, 0, O_MLLOG},
        {"ckpt-dir", required_argument, 0, O_CKDIR}, {"ckpt-every", required_argument, 0, O_CKEVERY},
        {"resume", required_argument, 0, O_RESUME}, {"eval-every", required_argument, 0, O_EVERY},
        {"no-eval", no_argument, 0, O_NOEVAL},
        {"init-checkpoint", required_argument, 0, O_INIT},
        {"seed", required_argument, 0, O_SEED},  {"max-epochs", required_argument, 0, O_EPOCHS},
        {"max-steps", required_argument, 0, O_STEPS}, {"no-graphs", no_argument, 0, O_NOGRAPH},
        {"profile", no_argument, 0, O_PROFILE},
        {"eval-dir", required_argument, 0, O_EVDIR}, {"eval-wait", required_argument, 0, O_WAIT},
        {"dump-step", required_argument, 0, O_DUMP}, {"set", required_argument, 0, O_SET},
        {"log-every", required_argument, 0, O_LOGEVERY}, {"threads", required_argument, 0, O_THREADS},
        {"submission-org", required_argument, 0, O_ORG},
        {"submission-platform", required_argument, 0, O_PLATFORM},
        {"progress", no_argument, 0, O_PROGRESS}, {"precision", required_argument, 0, O_PRECISION},
        {"loader-threads", required_argument, 0, O_LOADER}, {"host-batches", no_argument, 0, O_HOSTB},
        {"rendezvous", required_argument, 0, O_RDV}, {"comm-timeout", required_argument, 0, O_CTIMEOUT},
        {"help", no_argument, 0, 'h'}, {"version", no_argument, 0, 'V'}};
    int nlong = 0;
    while (longopts[nlong].name) nlong++;
    add_wl_options(longopts, &nlong);
    longopts[nlong] = (struct option){0, 0, 0, 0};

    static char *train[MAX_PATHS], *eval[MAX_PATHS], *sets[MAX_SETS + MAX_WL_OPTS];
    static char setbuf[MAX_SETS + MAX_WL_OPTS][320];
    tk_train_opts o = {.backend = "auto", .log_every = 100, .eval_wait = 600, .comm_timeout = 300,
                       .org = "trainkit", .platform = "1xcpu", .train = train, .eval = eval, .sets = sets,
                       .out = stdout, .note = note};
    int ntrain = 0, neval = 0, nsets = 0;
    tk_err e;
    tk_err_clear(&e);
    int c, rc = 0, platform_given = 0;
    if (tk_rank_from_env(&g_ri, &e)) return tk_cli_usage_error(prog, usage, "%s", e.what);
    if (g_ri.world > 1) snprintf(g_errprog, sizeof g_errprog, "%s: rank %d", prog, g_ri.rank);
#define ADD_SET(...)                                                                                                   \
    do {                                                                                                               \
        if (nsets >= MAX_SETS + MAX_WL_OPTS) return usage_error("too many --set options");                             \
        snprintf(setbuf[nsets], sizeof setbuf[nsets], __VA_ARGS__);                                                    \
        sets[nsets] = setbuf[nsets];                                                                                   \
        nsets++;                                                                                                       \
    } while (0)
    while ((c = getopt_long(argc, argv, ":w:c:t:e:b:hV", longopts, NULL)) != -1) {
        int64_t v;
        switch (c) {
        case 'w': o.workload = optarg; break;
        case 'c': o.config = optarg; break;
        case 't':
            if (ntrain >= MAX_PATHS) return usage_error("too many --train paths");
            train[ntrain++] = optarg;
            break;
        case 'e':
            if (neval >= MAX_PATHS) return usage_error("too many --eval paths");
            eval[neval++] = optarg;
            break;
        case 'b': o.backend = optarg; break;
        case O_MLLOG: o.mllog = optarg; break;
        case O_CKDIR: o.ckpt_dir = optarg; break;
        case O_CKEVERY: rc = tk_parse_i64(optarg, 1, INT64_MAX, "--ckpt-every", &o.ckpt_every, &e); break;
        case O_RESUME: o.resume = optarg; break;
        case O_INIT: o.init_ckpt = optarg; break;
        case O_EVERY: rc = tk_parse_i64(optarg, 1, INT64_MAX, "--eval-every", &o.eval_every, &e); break;
        case O_SEED:
            if (!(rc = tk_parse_i64(optarg, 0, INT64_MAX, "--seed", &v, &e))) ADD_SET("train.seed=%lld", (long long)v);
            break;
        case O_EPOCHS:
            if (!(rc = tk_parse_i64(optarg, 1, 100000, "--max-epochs", &v, &e)))
                ADD_SET("train.max_epochs=%lld", (long long)v);
            break;
        case O_STEPS: rc = tk_parse_i64(optarg, 1, INT64_MAX, "--max-steps", &o.max_steps, &e); break;
        case O_NOGRAPH: o.no_graphs = 1; break;
        case O_NOEVAL: o.no_eval = 1; break;
        case O_HOSTB: o.host_batches = 1; break;
        case O_PROFILE: o.profile = 1; break;
        case O_EVDIR: o.eval_dir = optarg; break;
        case O_WAIT: rc = tk_parse_f64(optarg, 0, 1e7, "--eval-wait", &o.eval_wait, &e); break;
        case O_DUMP: o.dump = optarg; break;
        case O_SET:
            if (nsets >= MAX_SETS) return usage_error("too many --set options");
            sets[nsets++] = optarg;
            break;
        case O_LOGEVERY: rc = tk_parse_i64(optarg, 0, INT64_MAX, "--log-every", &o.log_every, &e); break;
        case O_THREADS: rc = tk_parse_i64(optarg, 1, 4096, "--threads", &o.threads, &e); break;
        case O_LOADER: rc = tk_parse_i64(optarg, 1, 64, "--loader-threads", &o.loader_threads, &e); break;
        case O_ORG: o.org = optarg; break;
        case O_PLATFORM: o.platform = optarg; platform_given = 1; break;
        case O_PROGRESS: o.progress = 1; break;
        case O_RDV: o.rendezvous = optarg; break;
        case O_CTIMEOUT: rc = tk_parse_f64(optarg, 0.001, 1e7, "--comm-timeout", &o.comm_timeout, &e); break;
        case O_PRECISION:
            if (!tk_cfg_in_list(optarg, tk_precision_names))
                return usage_error("--precision: expected fp32, tf32 or bf16, got '%s'", optarg);
            ADD_SET("%s=%s", TK_PRECISION_KEY, optarg); // (the workload's config says which it supports)
            break;
        default:
            if (c >= O_WL && c < O_WL + nwl_opt) {
                char kv[320];
                if (!(rc = wl_option_set(wl_opt[c - O_WL], optarg, kv, sizeof kv, &e))) ADD_SET("%s", kv);
                break;
            }
            return tk_cli_common_option(prog, usage, help, c, argv);
        }
        if (rc) return usage_error("%s", e.what);
    }
    if (optind < argc) return usage_error("unexpected argument '%s'", argv[optind]);
    if (o.workload && !tk_workload_find(o.workload))
        return usage_error("--workload: unknown workload '%s' (known: %s)", o.workload, tk_workload_names());
    if (!o.config) return usage_error("--config is required");
    if (ntrain == 0) return usage_error("--train is required");
    if (o.no_eval && (neval > 0 || o.eval_dir)) return usage_error("--no-eval excludes --eval and --eval-dir");
    if (!o.dump && !o.no_eval && neval == 0 && !o.eval_dir)
        return usage_error("--eval or --eval-dir is required (or --no-eval)");
    if (neval > 0 && o.eval_dir) return usage_error("--eval and --eval-dir are exclusive");
    if (o.ckpt_every > 0 && !o.ckpt_dir) return usage_error("--ckpt-every needs --ckpt-dir");
    if (o.resume && o.init_ckpt) return usage_error("--resume and --init-checkpoint are exclusive");
    // share/launch's ranks meet through the spec it exports; srun and mpirun ranks need the option.
    if (tk_rendezvous_spec(o.rendezvous, &o.rendezvous, &e)) return usage_error("%s", e.what);
    if (g_ri.world > 1 && !o.rendezvous)
        return usage_error("--rendezvous is required with several ranks (WORLD_SIZE=%d) unless share/launch "
                           "started them", g_ri.world);
    o.ntrain = ntrain, o.neval = neval, o.nsets = nsets, o.ri = g_ri;
    static char platform[160];
    if (!platform_given && strcmp(o.backend, "cpu") != 0 && tk_cuda_device_count() > 0) {
        snprintf(platform, sizeof platform, "%dxGPU", g_ri.world);
        o.platform = platform;
    }
    if (g_ri.rank != 0) o.note = NULL;
    rc = tk_engine_train(&o, &e);
    if (rc && rc != TK_NO) tk_cli_fail(g_errprog, &e);
    tk_err e2;
    if (tk_cli_close_stdout(&e2)) {
        tk_cli_fail(g_errprog, &e2);
        if (!rc || rc == TK_NO) rc = e2.code;
    }
    return rc;
}
