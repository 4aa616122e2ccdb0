// evaluate: the quality metric of a train-step checkpoint on eval shards, once (--checkpoint) or
// for every checkpoint that appears in a directory (--follow DIR, the out-of-process evaluator of
// train-step --eval-dir). The model is the one the checkpoint's configuration names, from the
// registry. See man/man1/evaluate.1 for the protocol. Thin: lib/engine/follow.c.
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cli.h"
#include "core/jsonl.h"
#include "engine/follow.h"
#include "engine/registry.h"

static const char *prog = "evaluate";
static const char *usage =
    "usage: evaluate --checkpoint CKPT --eval PATH... [--weights W] [--target V] [--backend B]\n"
    "       evaluate --follow DIR --eval PATH... [--weights W] [--target V] [--poll SEC] [--timeout SEC]\n";

#define MAX_PATHS 256

static void help(void) {
    printf("%s", usage);
    printf("\nEvaluate train-step checkpoints on the eval shards; JSON Lines on stdout. The model and\n"
           "its metric are the checkpoint's workload:\n");
    for (const tk_workload *const *w = tk_workloads(); *w; w++)
        printf("  %-10s %s (%s)\n", (*w)->name, (*w)->metric, (*w)->summary);
    printf("\n"
           "  -k, --checkpoint CKPT   evaluate one checkpoint\n"
           "  -f, --follow DIR        evaluate each new DIR/*.safetensors, write DIR/NAME.eval.json;\n"
           "                          end when DIR/STOP exists and nothing is left to evaluate\n"
           "  -e, --eval PATH         evaluation shards (files or directories; repeatable)\n"
           "  -w, --weights W         auto (default: what training evaluated, the moving average when\n"
           "                          the config has optimizer.ema > 0), ema (the ema.NAME tensors)\n"
           "                          or raw (the trained weights)\n"
           "      --target V          report \"reached\"; --checkpoint exits 1 short of the target\n"
           "  -b, --backend B         cpu, cuda or auto (default auto)\n"
           "      --poll SEC          --follow: directory poll interval (default 0.2)\n"
           "      --timeout SEC       --follow: give up after SEC without a new checkpoint (exit 1;\n"
           "                          default 0 = wait for STOP)\n"
           "  -h, --help              this help\n"
           "  -V, --version           versions of trainkit, CUDA, cuDNN, NCCL\n"
           "\nExit status: 0 ok (target reached, when given), 1 not reached or timed out, 2 usage,\n"
           "3 bad checkpoint (or --weights ema of one without a moving average) or data, 4 I/O error,\n"
           "5 device error, 70 internal error.\n");
}

static void note(void *arg, const char *msg) {
    (void)arg;
    fprintf(stderr, "%s: note: %s\n", prog, msg);
}

int main(int argc, char **argv) {
    enum { O_TARGET = 256, O_POLL, O_TIMEOUT };
    static const char *const weights[] = {"auto", "raw", "ema"}; // (tk_eval_weights' order)
    static const struct option longopts[] = {
        {"checkpoint", required_argument, 0, 'k'}, {"follow", required_argument, 0, 'f'},
        {"eval", required_argument, 0, 'e'},       {"backend", required_argument, 0, 'b'},
        {"target", required_argument, 0, O_TARGET}, {"poll", required_argument, 0, O_POLL},
        {"timeout", required_argument, 0, O_TIMEOUT}, {"weights", required_argument, 0, 'w'},
        {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},          {0, 0, 0, 0}};
    static char *eval[MAX_PATHS];
    tk_eval_opts eo = {.eval = eval, .note = note};
    const char *ckpt = NULL, *dir = NULL, *backend = "auto";
    double poll = 0.2, timeout = 0;
    tk_err e;
    tk_err_clear(&e);
    int c, rc = 0;
    while ((c = getopt_long(argc, argv, ":k:f:e:b:w:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'k': ckpt = optarg; break;
        case 'f': dir = optarg; break;
        case 'e':
            if (eo.neval >= MAX_PATHS) return tk_cli_usage_error(prog, usage, "too many --eval paths");
            eval[eo.neval++] = optarg;
            break;
        case 'b': backend = optarg; break;
        case 'w': {
            int k = 0;
            while (k < 3 && strcmp(optarg, weights[k]) != 0) k++;
            if (k == 3) return tk_cli_usage_error(prog, usage, "--weights: expected auto, raw or ema, got '%s'", optarg);
            eo.weights = (tk_eval_weights)k;
            break;
        }
        case O_TARGET:
            rc = tk_parse_f64(optarg, 0, 1, "--target", &eo.target, &e); // every metric is a fraction
            eo.has_target = 1;
            break;
        case O_POLL: rc = tk_parse_f64(optarg, 0.001, 3600, "--poll", &poll, &e); break;
        case O_TIMEOUT: rc = tk_parse_f64(optarg, 0, 1e7, "--timeout", &timeout, &e); break;
        default: return tk_cli_common_option(prog, usage, help, c, argv);
        }
        if (rc) return tk_cli_usage_error(prog, usage, "%s", e.what);
    }
    if (optind < argc) return tk_cli_usage_error(prog, usage, "unexpected argument '%s'", argv[optind]);
    if (!ckpt == !dir) return tk_cli_usage_error(prog, usage, "give one of --checkpoint or --follow");
    if (eo.neval == 0) return tk_cli_usage_error(prog, usage, "--eval is required");
    tk_backend be;
    tk_ctx *ctx = NULL;
    tk_evaluator *ev = NULL;
    rc = tk_backend_parse(backend, &be, &e);
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, usage, "%s", e.what);
    if (!rc) rc = tk_ctx_create(&ctx, be, 0, &e);
    if (!rc) rc = tk_evaluator_create(&ev, ctx, &eo, &e);
    if (!rc && ckpt) {
        json_t *res = NULL;
        rc = tk_evaluator_run(ev, ckpt, ckpt, &res, &e);
        int reached = !eo.has_target || json_is_true(json_object_get(res, "reached"));
        if (!rc) rc = tk_jsonl_emit(stdout, res, &e);
        if (!rc && !reached) rc = TK_NO;
    } else if (!rc) {
        rc = tk_follow(ev, dir, poll, timeout, stdout, &e);
    }
    tk_evaluator_destroy(ev);
    tk_ctx_destroy(ctx);
    if (rc && rc != TK_NO) tk_cli_fail(prog, &e);
    else if (rc == TK_NO && e.what[0]) tk_cli_fail(prog, &e);
    tk_err e2;
    if (tk_cli_close_stdout(&e2)) {
        tk_cli_fail(prog, &e2);
        if (!rc || rc == TK_NO) rc = e2.code;
    }
    return rc;
}
