// prep coco: the COCO command of prep(1) (cmd/prep.c dispatches to it); the work is lib/coco's.
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cocodata/prep.h"
#include "core/cli.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "prep/prep.h"

static const char *coco_usage =
    "Usage: prep coco --annotations FILE.json [-o OUTDIR] [--eval] [--progress] IMAGE_DIR\n";

static void coco_help(void) {
    printf("%s\n"
           "Convert COCO 2017 (instances_*.json or the MLPerf SSD reference's bbox_only_instances_*.json,\n"
           "and the folder of its images) to one .tks record per image: the JPEG bytes as they are, the\n"
           "image id, height, width, and per annotation the box (x1 y1 x2 y2, pixels), the label (1..K in\n"
           "the sorted category ids' order), iscrowd, area and the segmentation (prep(1) \"coco\").\n\n"
           "  -a, --annotations FILE   the annotation file (required)\n"
           "  -o, --output OUTDIR      write OUTDIR/train.tks (OUTDIR/val.tks with --eval; default .)\n"
           "      --eval               keep every image (evaluation); without it, images with no\n"
           "                           annotation or only boxes with a side <= 1 pixel are dropped\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n\n"
           "A JSON summary line goes to stdout. Nothing is written unless every image passes.\n"
           "Exit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error. See prep(1).\n",
           coco_usage);
}

static void progress_cb(void *ctx, uint64_t done) { tk_progress_update(ctx, done); }

int prep_coco_main(int argc, char **argv) {
    enum { O_EVAL = 256, O_PROGRESS };
    static const struct option longopts[] = {
        {"annotations", required_argument, 0, 'a'}, {"output", required_argument, 0, 'o'},
        {"eval", no_argument, 0, O_EVAL},           {"progress", no_argument, 0, O_PROGRESS},
        {"help", no_argument, 0, 'h'},              {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    coco_prep_opts o = {0};
    const char *ann = NULL, *out_dir = ".";
    int ch, progress = 0;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":a:o:hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'a': ann = optarg; break;
        case 'o': out_dir = optarg; break;
        case O_EVAL: o.eval = 1; break;
        case O_PROGRESS: progress = 1; break;
        default: return tk_cli_common_option(prog, coco_usage, coco_help, ch, argv);
        }
    }
    if (!ann) return tk_cli_usage_error(prog, coco_usage, "coco: --annotations FILE is required");
    if (optind >= argc) return tk_cli_usage_error(prog, coco_usage, "coco: no IMAGE_DIR");
    if (argc - optind > 1) return tk_cli_usage_error(prog, coco_usage, "coco: one IMAGE_DIR at a time");
    tk_err e;
    tk_err_clear(&e);
    int rc = 0;
    if (mkdir(out_dir, 0755) != 0 && errno != EEXIST) rc = tk_err_errno(&e, errno, "%s: cannot create", out_dir);
    char out[8192];
    if (!rc && (size_t)snprintf(out, sizeof out, "%s/%s.tks", out_dir, o.eval ? "val" : "train") >= sizeof out)
        rc = tk_err_set(&e, TK_EUSAGE, "-o: the path is too long");
    tk_progress pr;
    tk_progress_init(&pr, "prep", "images", 0, progress);
    o.progress = progress_cb;
    o.progress_ctx = &pr;
    coco_prep_stats st;
    if (!rc) rc = coco_prep(ann, argv[optind], out, &o, &st, &e);
    if (!rc) {
        tk_progress_end(&pr, st.records);
        rc = tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:i,s:I}", "type",
                                             "prep", "dataset", "coco", "split", o.eval ? "val" : "train", "output",
                                             out, "images", (json_int_t)st.images, "records", (json_int_t)st.records,
                                             "dropped_no_annotations", (json_int_t)st.dropped_no_annotations,
                                             "dropped_empty_boxes", (json_int_t)st.dropped_empty_boxes,
                                             "annotations", (json_int_t)st.annotations, "crowd",
                                             (json_int_t)st.crowd, "polygons", (json_int_t)st.polygons, "rle",
                                             (json_int_t)st.rle, "categories", st.categories, "jpeg_bytes",
                                             (json_int_t)st.jpeg_bytes), &e);
    }
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, coco_usage, "%s", e.what);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
