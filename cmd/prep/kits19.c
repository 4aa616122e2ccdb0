// prep kits19: the KiTS19 command of prep(1) (cmd/prep.c dispatches to it); the work is
// lib/kits19's.
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/cli.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "kits19/kits19.h"
#include "prep/prep.h"

static const char *kits19_usage =
    "Usage: prep kits19 [-o OUTDIR] [--npy NPYDIR] [--eval-cases FILE] [--checksum FILE]\n"
    "                   [--write-checksum FILE] [--record-bytes N] [--progress] DATA_DIR\n";

static void kits19_help(void) {
    printf("%s\n"
           "Preprocess KiTS19 (DATA_DIR/case_XXXXX/{imaging,segmentation}.nii.gz) as the MLPerf 3D U-Net\n"
           "reference does: resample to spacing (1.6, 1.2, 1.2) mm (trilinear image, nearest label),\n"
           "clip to [-79, 304], normalize (x - 101) / 76.9, edge-pad to at least 128 per axis.\n\n"
           "  -o, --output OUTDIR      write OUTDIR/train.tks and OUTDIR/eval.tks (the reference's split)\n"
           "      --npy NPYDIR         write the reference's case_XXXXX_x.npy / _y.npy, byte for byte\n"
           "      --eval-cases FILE    the evaluation cases, one number per line (default:\n"
           "                           DATA_DIR/evaluation_cases.txt, else the reference's 42)\n"
           "      --checksum FILE      the reference's checksum.json: md5 of every .npy file, checked\n"
           "                           (default: DATA_DIR/checksum.json when there)\n"
           "      --write-checksum F   write such a checksum.json for this input\n"
           "      --record-bytes N     records hold the whole D-slices that fit N bytes (default 32 MiB;\n"
           "                           at least one slice, at most 64 MiB)\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n\n"
           "One JSON line per case and a summary go to stdout. Nothing is written unless every case\n"
           "passes. Exit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error. See prep(1).\n",
           kits19_usage);
}

static void progress_cb(void *ctx, uint64_t done) { tk_progress_update(ctx, done); }

static int emit(const kits19_prep_stats *st, tk_err *e) {
    for (int i = 0; i < st->cases; i++) {
        const kits19_case_info *c = &st->info[i];
        TRY(tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:s,s:[I,I,I],s:s,s:s}", "type", "case", "case", c->name,
                                            "split", c->eval ? "eval" : "train", "shape", (json_int_t)c->shape[0],
                                            (json_int_t)c->shape[1], (json_int_t)c->shape[2], "md5_x", c->md5_x,
                                            "md5_y", c->md5_y), e));
    }
    return tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:I,s:s,s:s?,s:i}", "type", "prep", "dataset",
                                           "kits19", "cases", st->cases, "train", st->train, "eval", st->eval,
                                           "skipped", st->skipped, "voxels", (json_int_t)st->voxels, "eval_cases",
                                           st->eval_source, "checksum",
                                           st->checksum_source[0] ? st->checksum_source : NULL, "checksum_entries",
                                           st->checksum_entries), e);
}

int prep_kits19_main(int argc, char **argv) {
    enum { O_NPY = 256, O_EVAL, O_CHECKSUM, O_WRITE_CHECKSUM, O_RECORD, O_PROGRESS };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},         {"npy", required_argument, 0, O_NPY},
        {"eval-cases", required_argument, 0, O_EVAL},   {"checksum", required_argument, 0, O_CHECKSUM},
        {"write-checksum", required_argument, 0, O_WRITE_CHECKSUM}, {"progress", no_argument, 0, O_PROGRESS},
        {"record-bytes", required_argument, 0, O_RECORD},
        {"help", no_argument, 0, 'h'},                  {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    kits19_prep_opts o = {0};
    int ch, progress = 0;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'o': o.out_dir = optarg; break;
        case O_NPY: o.npy_dir = optarg; break;
        case O_EVAL: o.eval_cases = optarg; break;
        case O_CHECKSUM: o.checksum = optarg; break;
        case O_WRITE_CHECKSUM: o.write_checksum = optarg; break;
        case O_PROGRESS: progress = 1; break;
        case O_RECORD: {
            int64_t v;
            tk_err pe;
            if (tk_parse_i64(optarg, 1, (int64_t)64 << 20, "--record-bytes", &v, &pe))
                return tk_cli_usage_error(prog, kits19_usage, "%s", pe.what);
            o.record_bytes = (size_t)v;
            break;
        }
        default: return tk_cli_common_option(prog, kits19_usage, kits19_help, ch, argv);
        }
    }
    if (optind >= argc) return tk_cli_usage_error(prog, kits19_usage, "kits19: no DATA_DIR");
    if (argc - optind > 1) return tk_cli_usage_error(prog, kits19_usage, "kits19: one DATA_DIR at a time");
    if (!o.out_dir && !o.npy_dir && !o.write_checksum)
        return tk_cli_usage_error(prog, kits19_usage, "kits19: nothing to write (give -o OUTDIR, --npy NPYDIR or "
                                  "--write-checksum FILE)");
    o.data_dir = argv[optind];
    tk_progress pr;
    tk_progress_init(&pr, "prep", "cases", 0, progress);
    o.progress = progress_cb;
    o.progress_ctx = &pr;
    tk_err e;
    tk_err_clear(&e);
    kits19_prep_stats st;
    int rc = kits19_prep(&o, &st, &e);
    if (!rc) {
        tk_progress_end(&pr, (uint64_t)st.cases);
        rc = emit(&st, &e);
    }
    kits19_prep_stats_free(&st);
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, kits19_usage, "%s", e.what);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
