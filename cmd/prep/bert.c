// prep bert, prep bert-hdf5, prep bert-tokenize, prep synth bert: the BERT data commands of
// prep(1) (cmd/prep.c dispatches to them).
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
#include "core/lines.h"
#include "prep/prep.h"

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
           "      --mean-words X  --topic-words N  --topic-ratio X  --topic-prob X\n"
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

int prep_bert_cmd_of(int argc, char **argv) {
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
       BO_SENTENCES, BO_EVAL_ARTICLES, BO_WORDS, BO_TOPICS, BO_SUCC, BO_ORACLE, BO_MEANW, BO_SRATIO,
       BO_TWORDS, BO_TRATIO, BO_TPROB, BO_N };
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
    [BO_TWORDS] = ON(B_SYNTH),
    [BO_TRATIO] = ON(B_SYNTH),
    [BO_TPROB] = ON(B_SYNTH),
};
#undef ON

int prep_bert_main(int argc, char **argv) {
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
        {"successor-ratio", required_argument, 0, 256 + BO_SRATIO}, {"topic-words", required_argument, 0, 256 + BO_TWORDS},
        {"topic-ratio", required_argument, 0, 256 + BO_TRATIO}, {"topic-prob", required_argument, 0, 256 + BO_TPROB},
        {"help", no_argument, 0, 'h'},                  {"version", no_argument, 0, 'V'},
        {0, 0, 0, 0}};
    bert_cli b = {.cmd = prep_bert_cmd_of(argc, argv), .vocab_size = 30522};
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
        case BO_TWORDS: rc = tk_parse_i64(optarg, 1, 64, "--topic-words", &v, &e); user.topic_words = (int)v; break;
        case BO_TRATIO: rc = tk_parse_f64(optarg, 0.01, 1, "--topic-ratio", &user.topic_ratio, &e); break;
        case BO_TPROB: // 0 is a value here: the field's 0 means "not given", so 0 is stored as -1
            rc = tk_parse_f64(optarg, 0, 1, "--topic-prob", &user.topic_prob, &e);
            if (!rc && user.topic_prob == 0) user.topic_prob = -1;
            break;
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
