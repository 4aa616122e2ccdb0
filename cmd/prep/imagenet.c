// prep imagenet, prep synth imagenet: the ImageNet data commands of prep(1) (cmd/prep.c
// dispatches to them).
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "core/afile.h"
#include "core/cli.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "image/codec.h"
#include "imagenet/imagenet.h"
#include "prep/prep.h"

// ---- imagenet ---------------------------------------------------------------------------------
static const char *imagenet_usage =
    "Usage: prep imagenet [-o OUT.tks] [--labels FILE [--devkit-synsets FILE]] [--synsets FILE]\n"
    "                     [--threads N] [--skip-bad] [--no-decode-check] [--split NAME] DIR\n"
    "       prep imagenet [-o OUT.tks] [--synsets FILE | --classes K] [...] TFRECORD...\n"
    "       prep synth imagenet -o DIR [--classes K] [--train-per-class N] [--val-per-class N]\n"
    "                           [--size WxH] [--quality Q] [--seed S] [--odd-fraction F] [--threads N]\n";

static void imagenet_help(void) {
    printf("%s\n"
           "Convert ImageNet (ILSVRC2012) images to a .tks record stream (stdout or -o FILE) keeping the\n"
           "JPEG bytes (PNG and CMYK files are converted to RGB JPEGs, quality 100), with labels 0..K-1 =\n"
           "the index of the synset in the sorted synsets. DIR holds class folders (train/nXXXXXXXX/*.JPEG)\n"
           "or is a flat folder labelled by --labels; TFRECORD files are the MLPerf reference's (label =\n"
           "image/class/label - 1). Or write a synthetic ImageNet in the raw layout.\n\n"
           "  -o, --output PATH        output .tks file (default stdout), or the synth directory\n"
           "      --labels FILE        flat folders: LOC_val_solution.csv, a list of WordNet ids in file-name\n"
           "                           order (synset_labels.txt), or ILSVRC2012_validation_ground_truth.txt\n"
           "      --devkit-synsets F   the devkit's synsets in ILSVRC2012_ID order (for the ground truth)\n"
           "      --synsets FILE       the classes (first word of each line; e.g. LOC_synset_mapping.txt)\n"
           "      --classes K          TFRecords without --synsets: labels 1..K (default 1000); synth: K\n"
           "      --threads N          worker threads (default: the online CPUs)\n"
           "      --skip-bad           skip bad images (counted in the summary) instead of failing\n"
           "      --no-decode-check    do not decode each image (at 1/8 scale) to find truncated files\n"
           "      --split NAME         the split named in the output's meta (default: from the input)\n"
           "      --frame-records N    records per zstd frame (default 1024; frames also close at 64 MiB)\n"
           "      --train-per-class N  synth: train images per class (default 20)\n"
           "      --val-per-class N    synth: validation images per class (default 5)\n"
           "      --size WxH           synth: typical image size (default 500x375)\n"
           "      --quality Q          synth: JPEG quality (default 90)\n"
           "      --seed S             synth: Philox seed (default 1)\n"
           "      --odd-fraction F     synth: share of grayscale, CMYK and PNG files, each (default 0.002)\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n\n"
           "A JSON summary line goes to stdout (to stderr when the records go to stdout).\n"
           "Exit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error. See prep(1).\n",
           imagenet_usage);
}

static void progress_cb(void *ctx, uint64_t done) { tk_progress_update(ctx, done); }

static json_t *imagenet_summary(const imagenet_prep_stats *st, const imagenet_scan_stats *sc) {
    json_t *sk = json_object();
    for (int k = 0; k < IMAGENET_SKIP_KINDS; k++)
        json_object_set_new(sk, imagenet_skip_names[k], json_integer((json_int_t)(st->skipped[k] + (sc ? sc->skipped[k] : 0))));
    return json_pack("{s:s,s:s,s:I,s:i,s:I,s:f,s:f,s:{s:I,s:I},s:I,s:I,s:I,s:o,s:I}", "type", "prep", "dataset", "imagenet",
                     "records", (json_int_t)st->records, "classes", st->classes, "bytes", (json_int_t)st->bytes, "seconds",
                     st->seconds, "images_per_s", st->seconds > 0 ? (double)st->records / st->seconds : 0.0, "converted",
                     "cmyk", (json_int_t)st->converted_cmyk, "png", (json_int_t)st->converted_png, "grayscale",
                     (json_int_t)st->grayscale, "progressive", (json_int_t)st->progressive, "jpeg_warnings",
                     (json_int_t)st->jpeg_warnings, "skipped", sk, "ignored_files",
                     (json_int_t)(sc ? sc->ignored_files : 0));
}

typedef struct {
    const char *out, *split;
    imagenet_scan_opts scan;
    imagenet_prep_opts prep;
    int64_t frame_records, classes;
    int progress;
} imagenet_cli;

static int run_imagenet(imagenet_cli *c, char **in, int nin, tk_err *e) {
    if (!c->out) TRY(tk_cli_refuse_tty(stdout, "a .tks record stream", e));
    struct stat st;
    int isdir = stat(in[0], &st) == 0 && S_ISDIR(st.st_mode);
    if (isdir && nin > 1) return tk_err_set(e, TK_EUSAGE, "imagenet: one directory at a time");
    for (int i = 0; !isdir && i < nin; i++)
        if (!imagenet_is_tfrecord(in[i]))
            return tk_err_set(e, stat(in[i], &st) ? TK_EIO : TK_EUSAGE, "%s: not a directory or a TFRecord file", in[i]);
    imagenet_items items = {0};
    imagenet_synsets syn = {0};
    imagenet_scan_stats sc = {0};
    imagenet_prep_stats ps = {0};
    char split[64], path[4096]; // the split: the input's base name up to the first '-' or '.'
    snprintf(path, sizeof path, "%s", in[0]);
    for (size_t k = strlen(path); k > 1 && path[k - 1] == '/'; k--) path[k - 1] = 0;
    const char *base = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    snprintf(split, sizeof split, "%.*s", (int)strcspn(base, "-."), base);
    c->prep.split = c->split ? c->split : split;
    int rc = 0;
    if (isdir) rc = imagenet_scan(in[0], &c->scan, &items, &syn, &sc, e);
    else if (c->scan.synsets_file) rc = imagenet_synsets_load(&syn, c->scan.synsets_file, e);
    tks_schema s;
    imagenet_schema(&s, c->prep.split, syn.n ? &syn : NULL, (int)c->classes);
    ps.classes = syn.n ? syn.n : (int)c->classes;
    tks_writer *w = NULL;
    tks_writer_opts wo = {.records_per_frame = (size_t)c->frame_records, .zstd_level = 1, .threads = 1};
    tk_progress pr;
    tk_progress_init(&pr, "prep", "images", isdir ? items.n : 0, c->progress);
    c->prep.progress = progress_cb;
    c->prep.progress_ctx = &pr;
    c->prep.tfrecord_classes = (int)c->classes;
    if (!rc) rc = tks_writer_open(&w, c->out ? c->out : "-", &s, &wo, e);
    if (!rc) rc = isdir ? imagenet_prep_files(&items, &syn, w, &c->prep, &ps, e)
                        : imagenet_prep_tfrecords(in, nin, syn.n ? &syn : NULL, w, &c->prep, &ps, e);
    if (!rc) {
        rc = tks_writer_close(w, e);
        w = NULL;
        tk_progress_end(&pr, ps.records);
    }
    tks_writer_abort(w);
    if (!rc) rc = tk_jsonl_emit(c->out ? stdout : stderr, imagenet_summary(&ps, isdir ? &sc : NULL), e);
    imagenet_items_free(&items);
    imagenet_synsets_free(&syn);
    return rc;
}

static int run_synth_imagenet(const char *out, imagenet_synth_opts *so, int progress, tk_err *e) {
    if (!out) return tk_err_set(e, TK_EUSAGE, "prep synth imagenet needs -o DIR");
    tk_progress pr;
    tk_progress_init(&pr, "synth", "images", (uint64_t)so->classes * (uint64_t)(so->train_per_class + so->val_per_class), progress);
    imagenet_synth_stats st;
    TRY(imagenet_synth(out, so, &st, progress_cb, &pr, e));
    tk_progress_end(&pr, st.train + st.val);
    return tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I}", "type", "synth", "dataset", "imagenet",
                                           "dir", out, "train", (json_int_t)st.train, "val", (json_int_t)st.val, "bytes",
                                           (json_int_t)st.bytes, "grayscale", (json_int_t)st.grayscale, "cmyk",
                                           (json_int_t)st.cmyk, "png", (json_int_t)st.png), e);
}

// prep imagenet ... and prep synth imagenet ... (synth: argv[0] is "imagenet" after "synth").
int prep_imagenet_main(int argc, char **argv, int synth) {
    enum { O_LABELS = 256, O_SYNSETS, O_DEVKIT, O_THREADS, O_SKIP, O_NOCHECK, O_SPLIT, O_FRAME, O_CLASSES, O_TRAIN,
           O_VAL, O_SIZE, O_QUALITY, O_SEED, O_ODD, O_PROGRESS };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},       {"labels", required_argument, 0, O_LABELS},
        {"synsets", required_argument, 0, O_SYNSETS}, {"devkit-synsets", required_argument, 0, O_DEVKIT},
        {"threads", required_argument, 0, O_THREADS}, {"skip-bad", no_argument, 0, O_SKIP},
        {"no-decode-check", no_argument, 0, O_NOCHECK}, {"split", required_argument, 0, O_SPLIT},
        {"frame-records", required_argument, 0, O_FRAME}, {"classes", required_argument, 0, O_CLASSES},
        {"train-per-class", required_argument, 0, O_TRAIN}, {"val-per-class", required_argument, 0, O_VAL},
        {"size", required_argument, 0, O_SIZE},      {"quality", required_argument, 0, O_QUALITY},
        {"seed", required_argument, 0, O_SEED},      {"odd-fraction", required_argument, 0, O_ODD},
        {"progress", no_argument, 0, O_PROGRESS},    {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},            {0, 0, 0, 0}};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    imagenet_cli c = {.prep = {.threads = cpus > 0 ? (int)cpus : 1, .check_decode = 1, .quality = 100},
                      .frame_records = 1024, .classes = 1000};
    imagenet_synth_opts so = {.classes = 1000, .train_per_class = 20, .val_per_class = 5, .width = 500, .height = 375,
                              .quality = 90, .seed = 1, .odd_fraction = 0.002, .threads = c.prep.threads};
    int ch, only_prep = 0, only_synth = 0, quality_given = 0;
    tk_err e;
    tk_err_clear(&e);
    int64_t v;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        int rc = 0;
        switch (ch) {
        case 'o': c.out = optarg; break;
        case O_LABELS: c.scan.labels_file = optarg, only_prep = 1; break;
        case O_SYNSETS: c.scan.synsets_file = optarg, only_prep = 1; break;
        case O_DEVKIT: c.scan.devkit_synsets = optarg, only_prep = 1; break;
        case O_THREADS: rc = tk_parse_i64(optarg, 1, 1024, "--threads", &v, &e), c.prep.threads = so.threads = (int)v; break;
        case O_SKIP: c.scan.skip_bad = c.prep.skip_bad = 1, only_prep = 1; break;
        case O_NOCHECK: c.prep.check_decode = 0, only_prep = 1; break;
        case O_SPLIT: c.split = optarg, only_prep = 1; break;
        case O_FRAME: rc = tk_parse_i64(optarg, 1, 1 << 24, "--frame-records", &c.frame_records, &e), only_prep = 1; break;
        case O_CLASSES: rc = tk_parse_i64(optarg, 1, 1000, "--classes", &c.classes, &e), so.classes = (int)c.classes; break;
        case O_TRAIN: rc = tk_parse_i64(optarg, 0, 100000, "--train-per-class", &v, &e), so.train_per_class = (int)v, only_synth = 1; break;
        case O_VAL: rc = tk_parse_i64(optarg, 0, 100000, "--val-per-class", &v, &e), so.val_per_class = (int)v, only_synth = 1; break;
        case O_SIZE: {
            int w = 0, h = 0, n = 0;
            if (sscanf(optarg, "%dx%d%n", &w, &h, &n) != 2 || optarg[n] || w < 8 || h < 8 || w > 8192 || h > 8192)
                return tk_cli_usage_error(prog, imagenet_usage, "--size: expected WxH with sides 8..8192, got '%s'", optarg);
            so.width = w, so.height = h, only_synth = 1;
            break;
        }
        case O_QUALITY: rc = tk_parse_i64(optarg, 1, 100, "--quality", &v, &e), so.quality = (int)v, quality_given = 1; break;
        case O_SEED: rc = tk_parse_i64(optarg, 0, INT64_MAX, "--seed", &v, &e), so.seed = (uint64_t)v, only_synth = 1; break;
        case O_ODD: rc = tk_parse_f64(optarg, 0, 0.3, "--odd-fraction", &so.odd_fraction, &e), only_synth = 1; break;
        case O_PROGRESS: c.progress = 1; break;
        default: return tk_cli_common_option(prog, imagenet_usage, imagenet_help, ch, argv);
        }
        if (rc) return tk_cli_usage_error(prog, imagenet_usage, "%s", e.what);
    }
    if (!tk_img_have_jpeg())
        return tk_cli_usage_error(prog, imagenet_usage, "imagenet: this prep was built without libjpeg-turbo "
                                  "(install libjpeg62-turbo-dev, see contrib/setup-deps.sh, and rebuild)");
    int rc;
    if (synth) {
        if (only_prep || optind < argc)
            return tk_cli_usage_error(prog, imagenet_usage, "synth imagenet takes -o DIR and the synth options only");
        rc = run_synth_imagenet(c.out, &so, c.progress, &e);
    } else {
        if (only_synth || quality_given)
            return tk_cli_usage_error(prog, imagenet_usage, "--train-per-class, --val-per-class, --size, --quality, --seed "
                                      "and --odd-fraction are for 'prep synth imagenet'");
        if (optind >= argc) return tk_cli_usage_error(prog, imagenet_usage, "imagenet: no input (a directory or TFRecord files)");
        rc = run_imagenet(&c, argv + optind, argc - optind, &e);
    }
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, imagenet_usage, "%s", e.what);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
