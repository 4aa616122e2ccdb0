// prep: raw datasets -> .tks record streams, and synthetic raw datasets (man/man1/prep.1).
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
#include "bert/hdf5.h"
#include "bert/pretrain.h"
#include "bert/synth.h"
#include "criteo/criteo.h"

static const char *prog = "prep";
static const char *usage =
    "Usage: prep criteo [-o OUT.tks] [--mapping modulo|dictionary] [--max-ind-range N]\n"
    "                   [--dictionary-from FILE]... FILE...\n"
    "       prep criteo-bin [-o OUT.tks] [--max-ind-range N] FILE_data.bin...\n"
    "       prep synth criteo --days D --rows-per-day N --seed S -o DIR [--signal X]\n"
    "                         [--click-rate R] [--compress none|gz|zst]\n"
    "       prep bert | bert-hdf5 | bert-tokenize | synth bert ... (prep bert --help)\n";

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
typedef int (*row_fn)(void *ctx, const criteo_row *r, tk_err *e);

static int each_tsv_row(char **files, int nfiles, row_fn fn, void *ctx, tk_err *e) {
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

// The MLPerf preprocessed binary: little-endian int32 x 40 per sample.
static int each_bin_row(char **files, int nfiles, row_fn fn, void *ctx, tk_err *e) {
    enum { REC = CRITEO_FIELDS * 4, BATCH = 4096 };
    uint8_t *buf = malloc((size_t)REC * BATCH);
    if (!buf) return tk_err_errno(e, ENOMEM, "out of memory");
    int rc = 0;
    for (int i = 0; i < nfiles && !rc; i++) {
        FILE *f = fopen(files[i], "rb");
        if (!f) {
            rc = tk_err_errno(e, errno, "%s: cannot open", files[i]);
            break;
        }
        uint64_t off = 0;
        size_t got;
        while (!rc && (got = fread(buf, 1, (size_t)REC * BATCH, f)) > 0) {
            size_t nrec = got / REC;
            for (size_t k = 0; k < nrec && !rc; k++, off += REC) {
                const uint8_t *p = buf + k * REC;
                int32_t v[CRITEO_FIELDS];
                for (int j = 0; j < CRITEO_FIELDS; j++)
                    v[j] = (int32_t)((uint32_t)p[4 * j] | (uint32_t)p[4 * j + 1] << 8 |
                                     (uint32_t)p[4 * j + 2] << 16 | (uint32_t)p[4 * j + 3] << 24);
                criteo_row r;
                if (v[0] != 0 && v[0] != 1) {
                    rc = tk_err_set(e, TK_EDATA, "label must be 0 or 1, got %d", v[0]);
                    tk_err_where(e, "%s: offset %llu", files[i], (unsigned long long)off);
                    break;
                }
                r.label = (uint8_t)v[0];
                for (int j = 0; j < CRITEO_DENSE; j++) r.dense[j] = v[1 + j] < 0 ? 0 : v[1 + j];
                for (int j = 0; j < CRITEO_CAT; j++) {
                    int32_t c = v[1 + CRITEO_DENSE + j];
                    if (c < 0) {
                        rc = tk_err_set(e, TK_EDATA, "categorical %d is negative (%d)", j + 1, c);
                        tk_err_where(e, "%s: offset %llu", files[i], (unsigned long long)(off + 4 * (14 + j)));
                        break;
                    }
                    r.cat[j] = (uint32_t)c;
                }
                if (!rc) rc = fn(ctx, &r, e);
            }
            if (!rc && got % REC) {
                rc = tk_err_set(e, TK_EDATA, "truncated record (%zu of %d bytes)", got % REC, REC);
                tk_err_where(e, "%s: offset %llu", files[i], (unsigned long long)off);
            }
        }
        if (!rc && ferror(f)) rc = tk_err_errno(e, errno, "%s: read failed", files[i]);
        fclose(f);
    }
    free(buf);
    return rc;
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
    int (*each)(char **, int, row_fn, void *, tk_err *) = binary ? each_bin_row : each_tsv_row;
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

// ---- BERT (man/man5/trainkit-bert.5) ---------------------------------------------------------
// `prep bert`, `prep bert-hdf5`, `prep bert-tokenize` and `prep synth bert` parse their own
// options (main hands them the whole command line).
static const char *bert_usage =
    "Usage: prep bert --vocab FILE [-o OUT.tks] [OPTIONS] FILE...\n"
    "       prep bert-hdf5 [-o OUT.tks] [--vocab FILE | --vocab-size N] [OPTIONS] FILE.hdf5...\n"
    "       prep bert-tokenize --vocab FILE [--basic | --ids] [FILE...]\n"
    "       prep synth bert -o DIR [--size ci|large] [OPTIONS]\n";

static void bert_help(void) {
    printf("%s\n"
           "MLPerf BERT data: text (one sentence a line, a blank line between articles) or NVIDIA's\n"
           "HDF5 files to a .tks stream of pre-training examples (stdout or -o FILE); the tokenizer\n"
           "alone; synthetic text in the MLPerf layout with a planted structure.\n\n"
           "  -o, --output PATH          output .tks file (bert, bert-hdf5) or directory (synth)\n"
           "      --vocab FILE           WordPiece vocabulary, one token a line\n"
           "      --max-seq-length N     tokens per example, [CLS] and [SEP]s included (default 512)\n"
           "      --max-predictions N    masked positions per example at most (default 76)\n"
           "      --masked-lm-prob P     fraction of tokens masked (default 0.15)\n"
           "      --short-seq-prob P     chance of a shorter target length (default 0.1)\n"
           "      --dupe-factor N        passes over the text, each masked anew (default 10)\n"
           "      --seed S               random seed (default 12345)\n"
           "      --rng philox|mt        philox (default): trainkit's counter-based generator, one\n"
           "                             stream per file name; mt: Python's Mersenne Twister, the\n"
           "                             reference script's exact examples\n"
           "      --pick N               keep N examples of each file, evenly spaced (eval sets)\n"
           "      --eval-10k             the MLPerf eval set: --pick 10000 --rng mt --seed 12345\n"
           "                             --dupe-factor 10 (unless given)\n"
           "      --cased                keep case and accents (default: lower-case, as MLPerf)\n"
           "      --max-word-chars N     longer words become [UNK] (default 200, the reference's;\n"
           "                             Hugging Face's BertTokenizer uses 100)\n"
           "      --vocab-size N         bert-hdf5 without --vocab: ids must be below N (default 30522)\n"
           "      --basic                bert-tokenize: print the basic tokens, before WordPiece\n"
           "      --ids                  bert-tokenize: print token ids instead of tokens\n"
           "      --threads N            worker threads (default: OpenMP's, OMP_NUM_THREADS)\n"
           "      --progress             show progress on stderr even when it is not a terminal\n"
           "  -h, --help                 this help\n"
           "  -V, --version              version\n\n"
           "Synthetic text (prep synth bert; see prep(1) for the grammar):\n"
           "      --size ci|large        presets: ci (small vocabulary, CPU-learnable) or large\n"
           "                             (30522 tokens, BERT-large scale); default ci\n"
           "      --parts N  --articles N  --sentences N  --eval-articles N  --seed S\n"
           "      --vocab-size N  --words N  --topics N  --successors N  --successor-ratio X\n"
           "      --mean-words X\n"
           "      --oracle-examples N    eval examples the oracle runs on (0: no oracle)\n"
           "      --max-seq-length, --max-predictions, --masked-lm-prob: of those examples\n\n"
           "Exit status: 0 ok, 2 usage, 3 bad input data, 4 I/O error. See prep(1).\n",
           bert_usage);
}

enum { B_BERT, B_HDF5, B_TOKENIZE, B_SYNTH };
static const char *const bert_cmd_names[] = {"bert", "bert-hdf5", "bert-tokenize", "synth bert"};

typedef struct {
    int cmd;
    const char *out, *vocab;
    bert_pretrain_opts pre;
    bert_tok_opts tok;
    int64_t vocab_size;
    int basic, ids, threads, progress;
    bert_synth_opts synth;
    uint64_t given; // bit i: option i of bert_opts was given
} bert_cli;

static int bert_cmd_of(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "bert") == 0) return B_BERT;
    if (argc > 1 && strcmp(argv[1], "bert-hdf5") == 0) return B_HDF5;
    if (argc > 1 && strcmp(argv[1], "bert-tokenize") == 0) return B_TOKENIZE;
    if (argc > 2 && strcmp(argv[1], "synth") == 0 && strcmp(argv[2], "bert") == 0) return B_SYNTH;
    return -1;
}

static void bert_progress(void *ctx, uint64_t done) { tk_progress_update(ctx, done); }

static int bert_open_vocab(const bert_cli *b, bert_vocab **v, bert_tokenizer **t, tk_err *e) {
    *t = NULL;
    TRY(bert_vocab_load(v, b->vocab, e));
    int rc = bert_tokenizer_new(t, *v, &b->tok, e);
    if (!rc && bert_vocab_size(*v) > BERT_MAX_VOCAB && b->cmd != B_TOKENIZE) {
        tk_err_set(e, TK_EDATA, "%s: %d tokens; BERT records hold ids up to %d", b->vocab, bert_vocab_size(*v),
                   BERT_MAX_VOCAB - 1);
        rc = TK_EDATA;
    }
    if (rc) {
        bert_tokenizer_free(*t);
        bert_vocab_free(*v);
    }
    return rc;
}

static tks_writer_opts bert_writer_opts(const bert_cli *b) {
    // zstd gives the same bytes for any number of worker threads >= 1, so the compression runs
    // on at least one worker and the output does not depend on --threads.
    tks_writer_opts wo = {.records_per_frame = 8192, .zstd_level = 3, .threads = b->threads < 2 ? 2 : b->threads};
    return wo;
}

static int run_bert_text(bert_cli *b, char **files, int nfiles, tk_err *e) {
    if (!b->out) TRY(tk_cli_refuse_tty(stdout, "a .tks record stream", e));
    bert_vocab *v;
    bert_tokenizer *t;
    TRY(bert_open_vocab(b, &v, &t, e));
    bert_meta m = {.input = "text", .vocab_size = bert_vocab_size(v), .L = b->pre.max_seq_length,
                   .P = b->pre.max_predictions, .have_special = 1, .cased = b->tok.cased,
                   .max_word_chars = b->tok.max_word_chars, .dupe_factor = b->pre.dupe_factor,
                   .masked_lm_prob = b->pre.masked_lm_prob, .short_seq_prob = b->pre.short_seq_prob,
                   .seed = b->pre.seed, .rng = b->pre.rng == BERT_RNG_MT ? "mt" : "philox", .pick = b->pre.pick};
    int rc = bert_vocab_special(v, &m.special, e);
    tks_schema s;
    bert_schema(&s, &m);
    tks_writer *w = NULL;
    tks_writer_opts wo = bert_writer_opts(b);
    if (!rc) rc = tks_writer_open(&w, b->out ? b->out : "-", &s, &wo, e);
    tk_progress pr;
    tk_progress_init(&pr, "prep", "examples", 0, b->progress);
    uint64_t n = 0;
    if (!rc) rc = bert_pretrain_write(w, files, nfiles, t, v, &b->pre, b->threads, bert_progress, &pr, &n, e);
    if (!rc) {
        rc = tks_writer_close(w, e);
        w = NULL;
        tk_progress_end(&pr, n);
    }
    if (w) tks_writer_abort(w);
    bert_tokenizer_free(t);
    bert_vocab_free(v);
    return rc;
}

static int run_bert_hdf5(bert_cli *b, char **files, int nfiles, tk_err *e) {
    if (!bert_h5_available())
        return tk_err_set(e, TK_EUSAGE, "bert-hdf5: this prep was built without libhdf5 (install libhdf5-dev, "
                                        "then rebuild)");
    if (!b->out) TRY(tk_cli_refuse_tty(stdout, "a .tks record stream", e));
    bert_meta m = {.vocab_size = (int32_t)b->vocab_size, .L = b->pre.max_seq_length, .P = b->pre.max_predictions};
    if (b->vocab) {
        bert_vocab *v;
        bert_tokenizer *t;
        TRY(bert_open_vocab(b, &v, &t, e));
        m.vocab_size = bert_vocab_size(v);
        int rc = bert_vocab_special(v, &m.special, e);
        m.have_special = 1;
        bert_tokenizer_free(t);
        bert_vocab_free(v);
        TRY(rc);
    }
    // A first pass opens every file, so a missing key or a bad shape stops before any output.
    int layouts = 0;
    for (int i = 0; i < nfiles; i++) {
        bert_h5 *h;
        TRY(bert_h5_open(&h, files[i], e));
        layouts |= bert_h5_layout(h);
        bert_h5_close(h);
    }
    m.input = layouts == BERT_H5_FIXED ? "hdf5-fixed" : layouts == BERT_H5_VARLEN ? "hdf5-varlen" : "hdf5";
    tks_schema s;
    bert_schema(&s, &m);
    bert_records buf;
    TRY(bert_records_init(&buf, m.L, m.P, 1024, e));
    tks_writer *w = NULL;
    tks_writer_opts wo = bert_writer_opts(b);
    int rc = tks_writer_open(&w, b->out ? b->out : "-", &s, &wo, e);
    tk_progress pr;
    tk_progress_init(&pr, "prep", "examples", 0, b->progress);
    uint64_t done = 0;
    for (int i = 0; i < nfiles && !rc; i++) {
        bert_h5 *h;
        if ((rc = bert_h5_open(&h, files[i], e))) break;
        uint64_t count = bert_h5_count(h);
        for (uint64_t k = 0; k < count && !rc; k += buf.cap) {
            size_t n = count - k < buf.cap ? (size_t)(count - k) : buf.cap;
            rc = bert_h5_read(h, k, n, &buf, m.vocab_size, e);
            const void *cols[BERT_NFIELDS];
            bert_records_cols(&buf, cols);
            if (!rc) rc = tks_writer_append(w, cols, n, e);
            done += n;
            tk_progress_update(&pr, done);
        }
        bert_h5_close(h);
    }
    if (!rc) {
        rc = tks_writer_close(w, e);
        w = NULL;
        tk_progress_end(&pr, done);
    }
    if (w) tks_writer_abort(w);
    bert_records_free(&buf);
    return rc;
}

typedef struct {
    FILE *out;
    int first;
} tok_print;

static int print_word(void *ctx, const char *w, size_t len, size_t nchars, tk_err *e) {
    (void)nchars;
    (void)e;
    tok_print *p = ctx;
    if (!p->first) fputc(' ', p->out);
    fwrite(w, 1, len, p->out);
    p->first = 0;
    return 0;
}

static int run_bert_tokenize(bert_cli *b, char **files, int nfiles, tk_err *e) {
    static char *stdin_only[] = {"-"};
    if (nfiles == 0) {
        files = stdin_only;
        nfiles = 1;
    }
    bert_vocab *v;
    bert_tokenizer *t;
    TRY(bert_open_vocab(b, &v, &t, e));
    bert_tok_ws ws = {0};
    bert_ids ids = {0};
    int rc = 0;
    for (int i = 0; i < nfiles && !rc; i++) {
        tk_lines *l;
        if ((rc = tk_lines_open(&l, files[i], e))) break;
        for (;;) {
            const char *line;
            size_t len;
            int nl;
            if ((rc = tk_lines_next(l, &line, &len, &nl, e)) || !line) break;
            tok_print p = {stdout, 1};
            if (b->basic) {
                rc = bert_basic_tokenize(t, &ws, line, len, print_word, &p, e);
            } else {
                ids.n = 0;
                rc = bert_tokenize(t, &ws, line, len, &ids, e);
                for (size_t k = 0; !rc && k < ids.n; k++) {
                    if (b->ids) printf(k ? " %d" : "%d", ids.v[k]);
                    else printf(k ? " %s" : "%s", bert_vocab_token(v, ids.v[k]));
                }
            }
            if (rc) {
                if (!e->where[0]) tk_err_where(e, "%s: line %llu", tk_lines_name(l), (unsigned long long)tk_lines_lineno(l));
                break;
            }
            if (putchar('\n') == EOF) {
                rc = tk_err_errno(e, errno, "cannot write to standard output");
                break;
            }
        }
        tk_lines_close(l);
    }
    bert_ids_free(&ids);
    bert_tok_ws_free(&ws);
    bert_tokenizer_free(t);
    bert_vocab_free(v);
    return rc;
}

static int run_synth_bert(bert_cli *b, tk_err *e) {
    if (!b->out) return tk_err_set(e, TK_EUSAGE, "prep synth bert needs -o DIR");
    int made = mkdir(b->out, 0755) == 0;
    if (!made && errno != EEXIST) return tk_err_errno(e, errno, "%s: cannot create", b->out);
    char *summary = NULL;
    int rc = bert_synth_write(&b->synth, b->out, &summary, e);
    if (rc) {
        if (made) rmdir(b->out); // a failed run leaves nothing, not even the directory it made
        return rc;
    }
    if (printf("%s\n", summary) < 0) rc = tk_err_errno(e, errno, "cannot write to standard output");
    free(summary);
    return rc;
}

// Options of the BERT commands; `apply` names the commands each one is for.
enum { BO_OUT, BO_VOCAB, BO_SEQ, BO_PRED, BO_MLM, BO_SHORT, BO_DUPE, BO_SEED, BO_RNG, BO_PICK, BO_EVAL10K,
       BO_CASED, BO_WORDCH, BO_VSIZE, BO_BASIC, BO_IDS, BO_THREADS, BO_PROGRESS, BO_SIZE, BO_PARTS, BO_ARTICLES,
       BO_SENTENCES, BO_EVAL_ARTICLES, BO_WORDS, BO_TOPICS, BO_SUCC, BO_ORACLE, BO_MEANW, BO_SRATIO, BO_N };
#define ON(c) (1u << (c))
static const unsigned bert_opt_apply[BO_N] = {
    [BO_OUT] = ON(B_BERT) | ON(B_HDF5) | ON(B_SYNTH),
    [BO_VOCAB] = ON(B_BERT) | ON(B_HDF5) | ON(B_TOKENIZE),
    [BO_SEQ] = ON(B_BERT) | ON(B_HDF5) | ON(B_SYNTH),
    [BO_PRED] = ON(B_BERT) | ON(B_HDF5) | ON(B_SYNTH),
    [BO_MLM] = ON(B_BERT) | ON(B_SYNTH),
    [BO_SHORT] = ON(B_BERT),
    [BO_DUPE] = ON(B_BERT),
    [BO_SEED] = ON(B_BERT) | ON(B_SYNTH),
    [BO_RNG] = ON(B_BERT),
    [BO_PICK] = ON(B_BERT),
    [BO_EVAL10K] = ON(B_BERT),
    [BO_CASED] = ON(B_BERT) | ON(B_TOKENIZE),
    [BO_WORDCH] = ON(B_BERT) | ON(B_TOKENIZE),
    [BO_VSIZE] = ON(B_HDF5) | ON(B_SYNTH),
    [BO_BASIC] = ON(B_TOKENIZE),
    [BO_IDS] = ON(B_TOKENIZE),
    [BO_THREADS] = ON(B_BERT) | ON(B_SYNTH),
    [BO_PROGRESS] = ON(B_BERT) | ON(B_HDF5) | ON(B_SYNTH),
    [BO_SIZE] = ON(B_SYNTH),
    [BO_PARTS] = ON(B_SYNTH),
    [BO_ARTICLES] = ON(B_SYNTH),
    [BO_SENTENCES] = ON(B_SYNTH),
    [BO_EVAL_ARTICLES] = ON(B_SYNTH),
    [BO_WORDS] = ON(B_SYNTH),
    [BO_TOPICS] = ON(B_SYNTH),
    [BO_SUCC] = ON(B_SYNTH),
    [BO_ORACLE] = ON(B_SYNTH),
    [BO_MEANW] = ON(B_SYNTH),
    [BO_SRATIO] = ON(B_SYNTH),
};
#undef ON

static int bert_main(int argc, char **argv) {
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},          {"vocab", required_argument, 0, 256 + BO_VOCAB},
        {"max-seq-length", required_argument, 0, 256 + BO_SEQ}, {"max-predictions", required_argument, 0, 256 + BO_PRED},
        {"masked-lm-prob", required_argument, 0, 256 + BO_MLM}, {"short-seq-prob", required_argument, 0, 256 + BO_SHORT},
        {"dupe-factor", required_argument, 0, 256 + BO_DUPE}, {"seed", required_argument, 0, 256 + BO_SEED},
        {"rng", required_argument, 0, 256 + BO_RNG},    {"pick", required_argument, 0, 256 + BO_PICK},
        {"eval-10k", no_argument, 0, 256 + BO_EVAL10K}, {"cased", no_argument, 0, 256 + BO_CASED},
        {"max-word-chars", required_argument, 0, 256 + BO_WORDCH}, {"vocab-size", required_argument, 0, 256 + BO_VSIZE},
        {"basic", no_argument, 0, 256 + BO_BASIC},      {"ids", no_argument, 0, 256 + BO_IDS},
        {"threads", required_argument, 0, 256 + BO_THREADS}, {"progress", no_argument, 0, 256 + BO_PROGRESS},
        {"size", required_argument, 0, 256 + BO_SIZE},  {"parts", required_argument, 0, 256 + BO_PARTS},
        {"articles", required_argument, 0, 256 + BO_ARTICLES}, {"sentences", required_argument, 0, 256 + BO_SENTENCES},
        {"eval-articles", required_argument, 0, 256 + BO_EVAL_ARTICLES}, {"words", required_argument, 0, 256 + BO_WORDS},
        {"topics", required_argument, 0, 256 + BO_TOPICS}, {"successors", required_argument, 0, 256 + BO_SUCC},
        {"oracle-examples", required_argument, 0, 256 + BO_ORACLE}, {"mean-words", required_argument, 0, 256 + BO_MEANW},
        {"successor-ratio", required_argument, 0, 256 + BO_SRATIO},
        {"help", no_argument, 0, 'h'},                  {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    bert_cli b = {.cmd = bert_cmd_of(argc, argv), .vocab_size = 30522};
    bert_pretrain_defaults(&b.pre);
    b.tok.max_word_chars = BERT_REF_MAX_WORD_CHARS;
#ifdef _OPENMP
    b.threads = omp_get_max_threads();
#else
    b.threads = 1;
#endif
    // getopt sees the (last) command word as the program name: av[0].
    int skip = b.cmd == B_SYNTH ? 2 : 1, ac = argc - skip;
    char **av = argv + skip;
    tk_err e;
    tk_err_clear(&e);
    int c;
    int64_t v;
    bert_synth_defaults(&b.synth, BERT_SYNTH_CI);
    bert_synth_opts user = {0}; // synth options given on the command line, applied over the preset
    opterr = 0;
    optind = 0;
    while ((c = getopt_long(ac, av, ":o:hV", longopts, NULL)) != -1) {
        int rc = 0, o = c == 'o' ? BO_OUT : c - 256;
        if (c == 'h' || c == 'V' || c == ':' || c == '?') return tk_cli_common_option(prog, bert_usage, bert_help, c, av);
        b.given |= 1ull << o;
        switch (o) {
        case BO_OUT: b.out = optarg; break;
        case BO_VOCAB: b.vocab = optarg; break;
        case BO_SEQ:
            rc = tk_parse_i64(optarg, 5, BERT_MAX_SEQ, "--max-seq-length", &v, &e);
            b.pre.max_seq_length = user.max_seq_length = (int)v;
            break;
        case BO_PRED:
            rc = tk_parse_i64(optarg, 1, BERT_MAX_SEQ, "--max-predictions", &v, &e);
            b.pre.max_predictions = user.max_predictions = (int)v;
            break;
        case BO_MLM:
            rc = tk_parse_f64(optarg, 0, 1, "--masked-lm-prob", &b.pre.masked_lm_prob, &e);
            user.masked_lm_prob = b.pre.masked_lm_prob;
            break;
        case BO_SHORT: rc = tk_parse_f64(optarg, 0, 1, "--short-seq-prob", &b.pre.short_seq_prob, &e); break;
        case BO_DUPE: rc = tk_parse_i64(optarg, 1, 1000, "--dupe-factor", &v, &e); b.pre.dupe_factor = (int)v; break;
        case BO_SEED: rc = tk_parse_i64(optarg, 0, INT64_MAX, "--seed", &v, &e); b.pre.seed = user.seed = (uint64_t)v; break;
        case BO_RNG:
            if (strcmp(optarg, "philox") == 0) b.pre.rng = BERT_RNG_PHILOX;
            else if (strcmp(optarg, "mt") == 0) b.pre.rng = BERT_RNG_MT;
            else return tk_cli_usage_error(prog, bert_usage, "--rng: expected philox or mt, got '%s'", optarg);
            break;
        case BO_PICK: rc = tk_parse_i64(optarg, 1, INT32_MAX, "--pick", &b.pre.pick, &e); break;
        case BO_EVAL10K: break;
        case BO_CASED: b.tok.cased = 1; break;
        case BO_WORDCH: rc = tk_parse_i64(optarg, 1, 100000, "--max-word-chars", &v, &e); b.tok.max_word_chars = (int)v; break;
        case BO_VSIZE: rc = tk_parse_i64(optarg, 1, BERT_MAX_VOCAB, "--vocab-size", &b.vocab_size, &e); user.vocab_size = (int32_t)b.vocab_size; break;
        case BO_BASIC: b.basic = 1; break;
        case BO_IDS: b.ids = 1; break;
        case BO_THREADS: rc = tk_parse_i64(optarg, 1, 1024, "--threads", &v, &e); b.threads = (int)v; break;
        case BO_PROGRESS: b.progress = 1; break;
        case BO_SIZE:
            if (strcmp(optarg, "ci") == 0) bert_synth_defaults(&b.synth, BERT_SYNTH_CI);
            else if (strcmp(optarg, "large") == 0) bert_synth_defaults(&b.synth, BERT_SYNTH_LARGE);
            else return tk_cli_usage_error(prog, bert_usage, "--size: expected ci or large, got '%s'", optarg);
            break;
        case BO_PARTS: rc = tk_parse_i64(optarg, 1, 99999, "--parts", &v, &e); user.parts = (int)v; break;
        case BO_ARTICLES: rc = tk_parse_i64(optarg, 1, INT32_MAX, "--articles", &v, &e); user.articles = (int)v; break;
        case BO_SENTENCES: rc = tk_parse_i64(optarg, 1, 100000, "--sentences", &v, &e); user.sentences = (int)v; break;
        case BO_EVAL_ARTICLES: rc = tk_parse_i64(optarg, 1, INT32_MAX, "--eval-articles", &v, &e); user.eval_articles = (int)v; break;
        case BO_WORDS: rc = tk_parse_i64(optarg, 2, 1000000, "--words", &v, &e); user.words = (int)v; break;
        case BO_TOPICS: rc = tk_parse_i64(optarg, 1, 64, "--topics", &v, &e); user.topics = (int)v; break;
        case BO_SUCC: rc = tk_parse_i64(optarg, 1, 64, "--successors", &v, &e); user.successors = (int)v; break;
        case BO_ORACLE: // 0 = no oracle; the field's 0 means "not given", so store N + 1
            rc = tk_parse_i64(optarg, 0, 10000, "--oracle-examples", &v, &e);
            user.oracle_examples = (int)v + 1;
            break;
        case BO_MEANW: rc = tk_parse_f64(optarg, 1, 1000, "--mean-words", &user.mean_words, &e); break;
        case BO_SRATIO: rc = tk_parse_f64(optarg, 0.01, 1, "--successor-ratio", &user.successor_ratio, &e); break;
        }
        if (rc) return tk_cli_usage_error(prog, bert_usage, "%s", e.what);
    }
    for (int o = 0; o < BO_N; o++)
        if ((b.given >> o & 1) && !(bert_opt_apply[o] >> b.cmd & 1)) {
            const char *name = o == BO_OUT ? "output" : "?";
            for (const struct option *lo = longopts; lo->name; lo++)
                if (lo->val == 256 + o) name = lo->name;
            return tk_cli_usage_error(prog, bert_usage, "--%s does not apply to prep %s", name, bert_cmd_names[b.cmd]);
        }
    if (b.given >> BO_EVAL10K & 1) { // the MLPerf eval set, unless the user said otherwise
        if (!(b.given >> BO_PICK & 1)) b.pre.pick = 10000;
        if (!(b.given >> BO_RNG & 1)) b.pre.rng = BERT_RNG_MT;
        if (!(b.given >> BO_SEED & 1)) b.pre.seed = 12345;
        if (!(b.given >> BO_DUPE & 1)) b.pre.dupe_factor = 10;
    }
    char **files = av + optind;
    int nfiles = ac - optind, rc = 0;
    if (b.cmd != B_HDF5 && b.cmd != B_SYNTH && !b.vocab) return tk_cli_usage_error(prog, bert_usage, "prep %s needs --vocab FILE", bert_cmd_names[b.cmd]);
    if ((b.cmd == B_BERT || b.cmd == B_HDF5) && nfiles == 0) return tk_cli_usage_error(prog, bert_usage, "%s: no input files", bert_cmd_names[b.cmd]);
    if (b.basic && b.ids) return tk_cli_usage_error(prog, bert_usage, "--basic and --ids exclude each other");
    if (b.vocab && (b.given >> BO_VSIZE & 1)) return tk_cli_usage_error(prog, bert_usage, "give --vocab or --vocab-size, not both");
    switch (b.cmd) {
    case B_BERT: rc = run_bert_text(&b, files, nfiles, &e); break;
    case B_HDF5: rc = run_bert_hdf5(&b, files, nfiles, &e); break;
    case B_TOKENIZE: rc = run_bert_tokenize(&b, files, nfiles, &e); break;
    default:
        if (nfiles) return tk_cli_usage_error(prog, bert_usage, "synth bert: unexpected argument '%s'", files[0]);
        bert_synth_apply(&b.synth, &user);
        // 0 is a value these can take, not only "not given"
        if (b.given >> BO_SEED & 1) b.synth.seed = b.pre.seed;
        if (b.given >> BO_MLM & 1) b.synth.masked_lm_prob = b.pre.masked_lm_prob;
        b.synth.threads = b.threads;
        rc = run_synth_bert(&b, &e);
    }
    if (rc == TK_EUSAGE) return tk_cli_usage_error(prog, bert_usage, "%s", e.what);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}

// ---- main ------------------------------------------------------------------------------------
static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

int main(int argc, char **argv) {
    if (bert_cmd_of(argc, argv) >= 0) return bert_main(argc, argv);
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
        if (nfiles != 1 || strcmp(files[0], "criteo") != 0)
            return tk_cli_usage_error(prog, usage, "synth: the only dataset is 'criteo'");
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
