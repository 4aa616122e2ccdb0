// prep synth coco: a synthetic COCO 2017 in the real layout (prep(1); the work is lib/cocodata's
// synth.c). cmd/prep.c dispatches to it.
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cocodata/synth.h"
#include "core/cli.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "image/codec.h"
#include "prep/prep.h"

static const char *synth_coco_usage =
    "Usage: prep synth coco -o DIR [--train-images N] [--val-images N] [--seed S]\n"
    "                       [--size MIN-MAX | --size WxH] [--objects MIN-MAX] [--classes N] [--large]\n"
    "                       [--quality Q] [--threads N] [--progress]\n";

static void synth_coco_help(void) {
    printf("%s\n"
           "Write a synthetic COCO 2017 in the real layout: DIR/train2017/*.jpg, DIR/val2017/*.jpg,\n"
           "DIR/annotations/instances_train2017.json and instances_val2017.json (COCO's 80 categories,\n"
           "12 of them planted as shapes with their own textures: exact polygons, crowd RLEs, occlusion)\n"
           "and DIR/manifest.json (prep(1) \"synth coco\").\n\n"
           "  -o, --output DIR         the new directory (required; must not exist, or be empty)\n"
           "      --train-images N     train2017 images (default 256)\n"
           "      --val-images N       val2017 images (default 64)\n"
           "      --seed S             Philox seed (default 1): the same seed writes the same bytes\n"
           "      --size MIN-MAX       each side uniform in MIN..MAX pixels (default 480-640)\n"
           "      --size WxH           every image W x H\n"
           "      --objects MIN-MAX    objects an image, uniform in MIN..MAX (default 1-8; at most 8)\n"
           "      --classes N          only the first N of the 12 planted classes (default 12)\n"
           "      --large              every object (crowds aside) of the large size\n"
           "      --quality Q          JPEG quality (default 90)\n"
           "      --threads N          worker threads (default: the online CPUs; the output is the same)\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n\n"
           "A JSON summary line goes to stdout. Nothing is left behind on failure.\n"
           "Exit status: 0 ok, 2 usage, 4 I/O error. See prep(1).\n",
           synth_coco_usage);
}

static void progress_cb(void *ctx, uint64_t done) { tk_progress_update(ctx, done); }

static int parse_size(const char *s, coco_synth_opts *o) {
    int a = 0, b = 0, n = 0;
    if (sscanf(s, "%d-%d%n", &a, &b, &n) == 2 && !s[n] && a >= COCO_SYNTH_MIN_SIDE && a <= b && b <= COCO_SYNTH_MAX_SIDE) {
        o->min_side = a, o->max_side = b, o->width = o->height = 0;
        return 0;
    }
    n = 0;
    if (sscanf(s, "%dx%d%n", &a, &b, &n) == 2 && !s[n] && a >= COCO_SYNTH_MIN_SIDE && b >= COCO_SYNTH_MIN_SIDE &&
        a <= COCO_SYNTH_MAX_SIDE && b <= COCO_SYNTH_MAX_SIDE) {
        o->width = a, o->height = b;
        return 0;
    }
    return -1;
}

int prep_synth_coco_main(int argc, char **argv) {
    enum { O_TRAIN = 256, O_VAL, O_SEED, O_SIZE, O_QUALITY, O_THREADS, O_PROGRESS, O_OBJECTS, O_CLASSES, O_LARGE };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},         {"train-images", required_argument, 0, O_TRAIN},
        {"val-images", required_argument, 0, O_VAL},   {"seed", required_argument, 0, O_SEED},
        {"size", required_argument, 0, O_SIZE},        {"quality", required_argument, 0, O_QUALITY},
        {"threads", required_argument, 0, O_THREADS},  {"progress", no_argument, 0, O_PROGRESS},
        {"objects", required_argument, 0, O_OBJECTS},  {"classes", required_argument, 0, O_CLASSES},
        {"large", no_argument, 0, O_LARGE},
        {"help", no_argument, 0, 'h'},                 {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    coco_synth_opts o = {.train_images = 256, .val_images = 64, .min_side = 480, .max_side = 640, .quality = 90,
                         .seed = 1, .threads = cpus > 0 ? (int)cpus : 1};
    const char *out = NULL;
    int ch, progress = 0;
    int64_t v;
    tk_err e;
    tk_err_clear(&e);
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        int rc = 0;
        switch (ch) {
        case 'o': out = optarg; break;
        case O_TRAIN: rc = tk_parse_i64(optarg, 0, 1 << 30, "--train-images", &v, &e), o.train_images = (uint64_t)v; break;
        case O_VAL: rc = tk_parse_i64(optarg, 0, 1 << 30, "--val-images", &v, &e), o.val_images = (uint64_t)v; break;
        case O_SEED: rc = tk_parse_i64(optarg, 0, INT64_MAX, "--seed", &v, &e), o.seed = (uint64_t)v; break;
        case O_SIZE:
            if (parse_size(optarg, &o))
                return tk_cli_usage_error(prog, synth_coco_usage, "--size: expected MIN-MAX or WxH with sides "
                                          "%d..%d (MIN <= MAX), got '%s'", COCO_SYNTH_MIN_SIDE, COCO_SYNTH_MAX_SIDE, optarg);
            break;
        case O_OBJECTS: {
            int a = 0, b = 0, n = 0;
            if (sscanf(optarg, "%d-%d%n", &a, &b, &n) != 2 || optarg[n] || a < 1 || a > b || b > COCO_SYNTH_MAX_OBJECTS)
                return tk_cli_usage_error(prog, synth_coco_usage, "--objects: expected MIN-MAX with 1 <= MIN <= MAX "
                                          "<= %d, got '%s'", COCO_SYNTH_MAX_OBJECTS, optarg);
            o.min_objects = a, o.max_objects = b;
            break;
        }
        case O_CLASSES: rc = tk_parse_i64(optarg, 1, COCO_SYNTH_CLASSES, "--classes", &v, &e), o.classes = (int)v; break;
        case O_LARGE: o.large_only = 1; break;
        case O_QUALITY: rc = tk_parse_i64(optarg, 1, 100, "--quality", &v, &e), o.quality = (int)v; break;
        case O_THREADS: rc = tk_parse_i64(optarg, 1, 1024, "--threads", &v, &e), o.threads = (int)v; break;
        case O_PROGRESS: progress = 1; break;
        default: return tk_cli_common_option(prog, synth_coco_usage, synth_coco_help, ch, argv);
        }
        if (rc) return tk_cli_usage_error(prog, synth_coco_usage, "%s", e.what);
    }
    if (optind < argc)
        return tk_cli_usage_error(prog, synth_coco_usage, "synth coco: unexpected argument '%s'", argv[optind]);
    if (!out) return tk_cli_usage_error(prog, synth_coco_usage, "synth coco: -o DIR is required");
    if (o.train_images + o.val_images == 0)
        return tk_cli_usage_error(prog, synth_coco_usage, "synth coco: no images (--train-images and --val-images are 0)");
    if (!tk_img_have_jpeg())
        return tk_cli_usage_error(prog, synth_coco_usage, "synth coco: this prep was built without libjpeg-turbo "
                                  "(install libjpeg62-turbo-dev, see contrib/setup-deps.sh, and rebuild)");
    tk_progress pr;
    tk_progress_init(&pr, "synth", "images", o.train_images + o.val_images, progress);
    coco_synth_stats st;
    int rc = coco_synth(out, &o, &st, progress_cb, &pr, &e);
    if (!rc) {
        tk_progress_end(&pr, o.train_images + o.val_images);
        const coco_synth_split_stats *t = &st.split[0], *s = &st.split[1];
        rc = tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "type", "synth", "dataset",
                                             "coco", "dir", out, "train", (json_int_t)t->images, "val",
                                             (json_int_t)s->images, "train_annotations", (json_int_t)t->annotations,
                                             "val_annotations", (json_int_t)s->annotations, "crowd",
                                             (json_int_t)(t->crowd + s->crowd), "occluded",
                                             (json_int_t)(t->occluded + s->occluded), "bytes",
                                             (json_int_t)(t->bytes + s->bytes)), &e);
    }
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, synth_coco_usage, "%s", e.what);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
