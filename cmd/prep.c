// prep: raw datasets -> .tks record streams, and synthetic raw datasets (man/man1/prep.1). This
// file: Criteo and the dispatch; the other datasets' commands are in cmd/prep/.
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
#include "criteo/criteo.h"
#include "prep/prep.h"

const char *prog = "prep";
static const char *usage =
    "Usage: prep criteo [-o OUT.tks] [--mapping modulo|dictionary] [--max-ind-range N]\n"
    "                   [--dictionary-from FILE]... FILE...\n"
    "       prep criteo-bin [-o OUT.tks] [--max-ind-range N] FILE_data.bin...\n"
    "       prep synth criteo --days D --rows-per-day N --seed S -o DIR [--signal X]\n"
    "                         [--click-rate R] [--compress none|gz|zst]\n"
    "       prep imagenet [-o OUT.tks] [--labels FILE] [--synsets FILE] ... DIR | TFRECORD...\n"
    "       prep synth imagenet -o DIR [--classes K] [--train-per-class N] [--size WxH] ...\n"
    "       prep synth kits19 -o DIR [--cases N] [--seed S] [--size small|full]\n"
    "       prep synth coco -o DIR [--train-images N] [--val-images N] [--seed S] [--size MIN-MAX]\n"
    "       prep bert | bert-hdf5 | bert-tokenize | synth bert ... (prep bert --help)\n"
    "       prep kits19 [-o OUTDIR] [--npy NPYDIR] ... DATA_DIR (prep kits19 --help)\n"
    "       prep coco --annotations FILE.json [-o OUTDIR] [--eval] IMAGE_DIR (prep coco --help)\n"
    "       prep librispeech -o OUTDIR [--spm MODEL] SUBSET_DIR... (prep librispeech --help)\n"
    "       prep synth librispeech -o DIR [--seed S] ... (prep synth librispeech --help)\n";

static void help(void) {
    printf("%s\n"
           "Convert Criteo click logs to a .tks record stream (stdout or -o FILE), or write\n"
           "synthetic Criteo day files with a planted signal.\n\n"
           "  -o, --output PATH        output .tks file (criteo) or directory (synth)\n"
           "      --mapping M          modulo (default) or dictionary (ids by first appearance)\n"
           "      --max-ind-range N    categorical values are int(x,16) %% N (default 40000000)\n"
           "      --dictionary-from F  build the dictionaries from F (repeatable; all the days),\n"
           "                           so train and eval files converted apart share ids\n"
           "      --days D             synth: number of day files (default 4)\n"
           "      --rows-per-day N     synth: rows per day (default 100000)\n"
           "      --seed S             synth: Philox seed (default 1)\n"
           "      --signal X           synth: strength of the hidden model (default 1)\n"
           "      --click-rate R       synth: mean click probability (default 0.03)\n"
           "      --compress C         synth: none (default), gz or zst\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n"
           "  -V, --version            version\n\n"
           "ImageNet's options: prep imagenet --help.\n"
           "Exit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error. See prep(1).\n",
           usage);
}

typedef struct {
    const char *out;
    criteo_mapping mapping;
    int64_t max_ind_range;
    int mir_given, progress;
    char **dict_files;   // --dictionary-from: build the dictionaries from these files instead
    int ndict_files;
    criteo_synth_opts synth;
} options;

// ---- criteo TSV / binary -> .tks -------------------------------------------------------------
typedef struct {
    tks_writer *w;
    size_t n, cap;
    uint8_t *label;
    int32_t *dense, *cat;
    tk_progress pr;
    uint64_t total;
} outbuf;

static int out_flush(outbuf *o, tk_err *e) {
    const void *cols[3] = {o->label, o->dense, o->cat};
    TRY(tks_writer_append(o->w, cols, o->n, e));
    o->total += o->n;
    o->n = 0;
    tk_progress_update(&o->pr, o->total);
    return 0;
}

static int out_open(outbuf *o, const options *op, const uint64_t card[CRITEO_CAT], tk_err *e) {
    memset(o, 0, sizeof *o);
    tks_schema s;
    criteo_schema(&s, op->mapping, op->max_ind_range, card);
    o->cap = 65536;
    o->label = malloc(o->cap);
    o->dense = malloc(o->cap * CRITEO_DENSE * sizeof(int32_t));
    o->cat = malloc(o->cap * CRITEO_CAT * sizeof(int32_t));
    if (!o->label || !o->dense || !o->cat) return tk_err_errno(e, ENOMEM, "out of memory");
    tk_progress_init(&o->pr, "prep", "records", 0, op->progress);
    return tks_writer_open(&o->w, op->out ? op->out : "-", &s, NULL, e);
}

static int out_row(outbuf *o, const criteo_row *r, const int32_t ids[CRITEO_CAT], tk_err *e) {
    o->label[o->n] = r->label;
    memcpy(o->dense + o->n * CRITEO_DENSE, r->dense, sizeof r->dense);
    memcpy(o->cat + o->n * CRITEO_CAT, ids, CRITEO_CAT * sizeof(int32_t));
    if (++o->n == o->cap) TRY(out_flush(o, e));
    return 0;
}

static void out_free(outbuf *o) {
    free(o->label);
    free(o->dense);
    free(o->cat);
}

// Calls fn(row) for every line of every file; errors name FILE: line N.
static int each_tsv_row(char *const *files, int nfiles, criteo_row_fn fn, void *ctx, tk_err *e) {
    for (int i = 0; i < nfiles; i++) {
        tk_lines *l;
        TRY(tk_lines_open(&l, files[i], e));
        int rc = 0;
        for (;;) {
            const char *line;
            size_t len;
            int nl;
            if ((rc = tk_lines_next(l, &line, &len, &nl, e)) || !line) break;
            criteo_row r;
            rc = criteo_parse_tsv(line, len, !nl, &r, e);
            if (!rc) rc = fn(ctx, &r, e);
            if (rc) {
                if (!e->where[0] && e->code == TK_EDATA)
                    tk_err_where(e, "%s: line %llu", tk_lines_name(l), (unsigned long long)tk_lines_lineno(l));
                break;
            }
        }
        tk_lines_close(l);
        if (rc) return rc;
    }
    return 0;
}

typedef struct {
    const options *op;
    criteo_dict *dict;
    outbuf *out;
    uint64_t max_id[CRITEO_CAT]; // binary input: the largest id + 1
} conv;

static int collect(void *ctx, const criteo_row *r, tk_err *e) {
    conv *c = ctx;
    for (int f = 0; f < CRITEO_CAT; f++) {
        uint32_t v = (uint32_t)(r->cat[f] % (uint64_t)c->op->max_ind_range);
        if (c->dict) TRY(criteo_dict_add(c->dict, f, v, e));
        if (v + 1ull > c->max_id[f]) c->max_id[f] = v + 1ull;
    }
    return 0;
}

static int emit(void *ctx, const criteo_row *r, tk_err *e) {
    conv *c = ctx;
    int32_t ids[CRITEO_CAT];
    for (int f = 0; f < CRITEO_CAT; f++) {
        uint32_t v = (uint32_t)(r->cat[f] % (uint64_t)c->op->max_ind_range);
        int64_t id = c->dict ? criteo_dict_get(c->dict, f, v) : (int64_t)v;
        if (id < 0)
            return tk_err_set(e, TK_EDATA, "field %d: value %u (after %% max-ind-range) is not in the "
                              "dictionary built from --dictionary-from", 15 + f, v);
        ids[f] = (int32_t)id;
    }
    return out_row(c->out, r, ids, e);
}

static int run_criteo(options *op, char **files, int nfiles, int binary, tk_err *e) {
    if (!op->out) TRY(tk_cli_refuse_tty(stdout, "a .tks record stream", e));
    int (*each)(char *const *, int, criteo_row_fn, void *, tk_err *) = binary ? criteo_bin_each : each_tsv_row;
    if (binary) op->mapping = CRITEO_DICTIONARY; // ids already come from the reference's dictionaries
    conv c = {.op = op};
    uint64_t card[CRITEO_CAT];
    int rc = 0;
    // Dictionary ids and binary table sizes need every value before the header can be written:
    // a first pass over the files collects them, the second writes.
    if (op->mapping == CRITEO_DICTIONARY) {
        for (int i = 0; i < nfiles; i++)
            if (strcmp(files[i], "-") == 0 && !op->ndict_files)
                return tk_err_set(e, TK_EUSAGE, "--mapping dictionary and binary input read the files twice: "
                                                "give file names, not '-'");
        if (!binary && !(c.dict = criteo_dict_new())) return tk_err_errno(e, ENOMEM, "out of memory");
        if (op->ndict_files && !binary) rc = each(op->dict_files, op->ndict_files, collect, &c, e);
        else rc = each(files, nfiles, collect, &c, e);
        for (int f = 0; f < CRITEO_CAT; f++)
            card[f] = binary ? c.max_id[f] : criteo_dict_size(c.dict, f);
    } else {
        for (int f = 0; f < CRITEO_CAT; f++) card[f] = (uint64_t)op->max_ind_range;
    }
    outbuf out = {0};
    if (!rc) rc = out_open(&out, op, card, e);
    c.out = &out;
    if (!rc) rc = each(files, nfiles, emit, &c, e);
    if (!rc) rc = out_flush(&out, e);
    if (!rc) {
        rc = tks_writer_close(out.w, e);
        out.w = NULL;
        tk_progress_end(&out.pr, out.total);
    }
    if (out.w) tks_writer_abort(out.w);
    out_free(&out);
    criteo_dict_free(c.dict);
    return rc;
}

// ---- synth -----------------------------------------------------------------------------------
// An AUC is NaN when a day has no clicks (tiny days): JSON null then.
static json_t *real_or_null(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static int write_manifest(const options *op, criteo_synth *g, const criteo_synth_day *days,
                          const char *path, json_t **summary, tk_err *e) {
    const criteo_synth_opts *s = &op->synth;
    json_t *files = json_array(), *per_day = json_array(), *vocab = json_array();
    uint64_t rows = 0, clicks = 0;
    static const char *ext[] = {"", ".gz", ".zst"};
    for (int d = 0; d < s->days; d++) {
        char name[64];
        snprintf(name, sizeof name, "day_%d%s", d, ext[s->compress]);
        json_array_append_new(files, json_string(name));
        json_array_append_new(per_day, json_real((double)days[d].clicks / (double)days[d].rows));
        rows += days[d].rows;
        clicks += days[d].clicks;
    }
    for (int f = 0; f < CRITEO_CAT; f++) json_array_append_new(vocab, json_integer(criteo_synth_vocab(g)[f]));
    double best = days[s->days - 1].auc;
    json_t *m = json_pack(
        "{s:s,s:i,s:I,s:I,s:I,s:f,s:s,s:f,s:f,s:{s:f,s:o},s:i,s:o,s:o,s:i,s:f,s:s}", "generator",
        "trainkit prep synth criteo", "format_version", 1, "seed", (json_int_t)s->seed, "days",
        (json_int_t)s->days, "rows_per_day", (json_int_t)s->rows_per_day, "signal", s->signal,
        "compress", ext[s->compress][0] ? ext[s->compress] + 1 : "none", "click_rate_target", s->click_rate,
        "bias", criteo_synth_bias(g), "click_rate", "overall", (double)clicks / (double)rows,
        "per_day", per_day, "eval_day", s->days - 1, "files", files, "vocab_sizes", vocab,
        "latent_dim", criteo_synth_latent_dim(), "zipf_exponent", criteo_synth_zipf_exponent(),
        "model", "logit = bias + signal*(first-order + dense + factorization-machine pairs)");
    json_object_set_new(m, "best_auc", real_or_null(best));
    char *text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
    *summary = json_pack("{s:s,s:s,s:I,s:f,s:o}", "type", "synth", "dir", op->out, "rows", (json_int_t)rows,
                         "click_rate", (double)clicks / (double)rows, "best_auc", real_or_null(best));
    json_decref(m);
    if (!text) return tk_err_set(e, TK_EINTERNAL, "cannot encode the manifest");
    tk_afile af;
    int rc = tk_afile_open(&af, path, e);
    if (!rc) rc = tk_write_all(af.fp, text, strlen(text), path, e);
    if (!rc) rc = tk_write_all(af.fp, "\n", 1, path, e);
    if (!rc) rc = tk_afile_commit(&af, e);
    else tk_afile_abort(&af);
    free(text);
    return rc;
}

static int run_synth(options *op, tk_err *e) {
    const criteo_synth_opts *s = &op->synth;
    if (!op->out) return tk_err_set(e, TK_EUSAGE, "prep synth criteo needs -o DIR");
    if (mkdir(op->out, 0755) != 0 && errno != EEXIST) return tk_err_errno(e, errno, "%s: cannot create", op->out);
    criteo_synth *g;
    TRY(criteo_synth_new(&g, s, e));
    criteo_synth_day *days = calloc((size_t)s->days, sizeof *days);
    char (*paths)[4096] = calloc((size_t)s->days, sizeof *paths);
    int rc = !days || !paths ? tk_err_errno(e, ENOMEM, "out of memory") : 0, written = 0;
    static const char *ext[] = {"", ".gz", ".zst"};
    tk_progress pr;
    tk_progress_init(&pr, "synth", "rows", (uint64_t)s->days * (uint64_t)s->rows_per_day, op->progress);
    for (int d = 0; d < s->days && !rc; d++) {
        snprintf(paths[d], sizeof paths[d], "%s/day_%d%s", op->out, d, ext[s->compress]);
        tk_afile af;
        if ((rc = tk_afile_open(&af, paths[d], e))) break;
        rc = criteo_synth_write_day(g, d, af.fp, paths[d], &days[d], e);
        if (!rc) rc = tk_afile_commit(&af, e);
        else tk_afile_abort(&af);
        if (!rc) written++;
        tk_progress_update(&pr, (uint64_t)(d + 1) * (uint64_t)s->rows_per_day);
    }
    char mpath[4200];
    snprintf(mpath, sizeof mpath, "%s/manifest.json", op->out);
    json_t *summary = NULL;
    if (!rc) rc = write_manifest(op, g, days, mpath, &summary, e);
    if (rc) // a failed run leaves none of its files behind
        for (int d = 0; d < written; d++) unlink(paths[d]);
    else
        tk_progress_end(&pr, (uint64_t)s->days * (uint64_t)s->rows_per_day);
    if (!rc) rc = tk_jsonl_emit(stdout, summary, e);
    else json_decref(summary);
    free(days);
    free(paths);
    criteo_synth_free(g);
    return rc;
}

// ---- main ------------------------------------------------------------------------------------
static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "imagenet") == 0) return prep_imagenet_main(argc - 1, argv + 1, 0);
    if (argc > 2 && strcmp(argv[1], "synth") == 0 && strcmp(argv[2], "imagenet") == 0) return prep_imagenet_main(argc - 2, argv + 2, 1);
    if (argc > 2 && strcmp(argv[1], "synth") == 0 && strcmp(argv[2], "kits19") == 0) return prep_synth_kits19_main(argc - 2, argv + 2);
    if (argc > 2 && strcmp(argv[1], "synth") == 0 && strcmp(argv[2], "coco") == 0) return prep_synth_coco_main(argc - 2, argv + 2);
    if (prep_bert_cmd_of(argc, argv) >= 0) return prep_bert_main(argc, argv);
    if (argc > 1 && strcmp(argv[1], "kits19") == 0) return prep_kits19_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "coco") == 0) return prep_coco_main(argc - 1, argv + 1);
    if (argc > 1 && strcmp(argv[1], "librispeech") == 0) return prep_librispeech_main(argc - 1, argv + 1);
    if (argc > 2 && strcmp(argv[1], "synth") == 0 && strcmp(argv[2], "librispeech") == 0)
        return prep_synth_librispeech_main(argc - 2, argv + 2);
    enum { O_MAPPING = 256, O_MIR, O_DAYS, O_ROWS, O_SEED, O_SIGNAL, O_RATE, O_COMPRESS, O_PROGRESS, O_DICT_FROM };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},      {"mapping", required_argument, 0, O_MAPPING},
        {"max-ind-range", required_argument, 0, O_MIR}, {"days", required_argument, 0, O_DAYS},
        {"rows-per-day", required_argument, 0, O_ROWS}, {"seed", required_argument, 0, O_SEED},
        {"signal", required_argument, 0, O_SIGNAL},  {"click-rate", required_argument, 0, O_RATE},
        {"compress", required_argument, 0, O_COMPRESS}, {"progress", no_argument, 0, O_PROGRESS},
        {"dictionary-from", required_argument, 0, O_DICT_FROM},
        {"help", no_argument, 0, 'h'},               {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    options op = {.max_ind_range = CRITEO_DEFAULT_MAX_IND_RANGE,
                  .synth = {.days = 4, .rows_per_day = 100000, .seed = 1, .signal = 1, .click_rate = 0.03}};
    int synth_opts = 0, c;
    tk_err e;
    tk_err_clear(&e);
    int64_t v;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        int rc = 0;
        switch (c) {
        case 'o': op.out = optarg; break;
        case O_MAPPING:
            if (strcmp(optarg, "modulo") == 0) op.mapping = CRITEO_MODULO;
            else if (strcmp(optarg, "dictionary") == 0) op.mapping = CRITEO_DICTIONARY;
            else return tk_cli_usage_error(prog, usage, "--mapping: expected modulo or dictionary, got '%s'", optarg);
            break;
        case O_MIR:
            rc = tk_parse_i64(optarg, 1, 2147483647, "--max-ind-range", &op.max_ind_range, &e);
            op.mir_given = 1;
            break;
        case O_DAYS:
            rc = tk_parse_i64(optarg, 1, 4096, "--days", &v, &e);
            op.synth.days = (int)v;
            synth_opts = 1;
            break;
        case O_ROWS:
            rc = tk_parse_i64(optarg, 1, (int64_t)1 << 35, "--rows-per-day", &op.synth.rows_per_day, &e);
            synth_opts = 1;
            break;
        case O_SEED:
            rc = tk_parse_i64(optarg, 0, INT64_MAX, "--seed", &v, &e);
            op.synth.seed = (uint64_t)v;
            synth_opts = 1;
            break;
        case O_SIGNAL:
            rc = tk_parse_f64(optarg, 0.01, 100, "--signal", &op.synth.signal, &e);
            synth_opts = 1;
            break;
        case O_RATE:
            rc = tk_parse_f64(optarg, 1e-4, 0.5, "--click-rate", &op.synth.click_rate, &e);
            synth_opts = 1;
            break;
        case O_COMPRESS:
            if (strcmp(optarg, "none") == 0) op.synth.compress = 0;
            else if (strcmp(optarg, "gz") == 0) op.synth.compress = 1;
            else if (strcmp(optarg, "zst") == 0) op.synth.compress = 2;
            else return tk_cli_usage_error(prog, usage, "--compress: expected none, gz or zst, got '%s'", optarg);
            synth_opts = 1;
            break;
        case O_PROGRESS: op.progress = 1; break;
        case O_DICT_FROM:
            if (!op.dict_files && !(op.dict_files = calloc((size_t)argc, sizeof(char *)))) return TK_EIO;
            op.dict_files[op.ndict_files++] = optarg;
            op.mapping = CRITEO_DICTIONARY;
            break;
        default: return tk_cli_common_option(prog, usage, help, c, argv);
        }
        if (rc) return tk_cli_usage_error(prog, usage, "%s", e.what);
    }
    if (optind >= argc) return tk_cli_usage_error(prog, usage, "missing command (criteo, criteo-bin or synth)");
    const char *cmd = argv[optind++];
    char **files = argv + optind;
    int nfiles = argc - optind, rc;
    if (strcmp(cmd, "synth") == 0) {
        if (nfiles != 1 || strcmp(files[0], "criteo") != 0) // the other datasets' synth commands are dispatched above
            return tk_cli_usage_error(prog, usage, "synth: unknown dataset '%s' (prep --help lists the synth commands)",
                                      nfiles ? files[0] : "");
        rc = run_synth(&op, &e);
    } else if (strcmp(cmd, "criteo") == 0 || strcmp(cmd, "criteo-bin") == 0) {
        if (synth_opts) return tk_cli_usage_error(prog, usage, "--days, --rows-per-day, --seed, --signal, --click-rate and --compress are for 'prep synth'");
        if (nfiles == 0) return tk_cli_usage_error(prog, usage, "%s: no input files", cmd);
        int binary = strcmp(cmd, "criteo-bin") == 0, nbin = 0;
        for (int i = 0; i < nfiles; i++) nbin += ends_with(files[i], ".bin");
        if (!binary && nbin == nfiles) binary = 1;
        else if (!binary && nbin) return tk_cli_usage_error(prog, usage, "criteo: mixing .bin and TSV inputs");
        if (binary && op.ndict_files) return tk_cli_usage_error(prog, usage, "--dictionary-from is for TSV input");
        rc = run_criteo(&op, files, nfiles, binary, &e);
    } else {
        return tk_cli_usage_error(prog, usage, "unknown command '%s'", cmd);
    }
    free(op.dict_files);
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, usage, "%s", e.what);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
