// prep librispeech: the LibriSpeech command of prep(1) (cmd/prep.c dispatches to it); the work
// is lib/librispeech's.
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/cli.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "librispeech/librispeech.h"
#include "prep/prep.h"

static const char *ls_usage =
    "Usage: prep librispeech -o OUTDIR [--spm MODEL | --vocab-size N] [--wav] [--progress] SUBSET_DIR...\n"
    "       prep librispeech -o OUTDIR --manifests [--root DIR] [--spm MODEL | --vocab-size N]\n"
    "                        librispeech-SUBSET-wav.json...\n";

static void ls_help(void) {
    printf("%s\n"
           "Convert LibriSpeech subsets (SUBSET/SPEAKER/CHAPTER/*.flac and SPEAKER-CHAPTER.trans.txt) or the\n"
           "MLPerf RNN-T reference's manifests and WAV files to .tks records for RNN-T: OUTDIR/SUBSET.tks\n"
           "(id, 16 kHz s16 pcm, sample_rate, transcript, sentencepiece tokens), the reference's manifests\n"
           "OUTDIR/librispeech-SUBSET-wav.json and, unless --spm is given, the sentencepiece model\n"
           "OUTDIR/librispeech1023.model trained on the train-* subsets as the reference trains it.\n"
           "Training subsets (names starting with \"train\") drop utterances over 16.7 s.\n\n"
           "  -o, --output OUTDIR      where to write (created when missing)\n"
           "      --spm MODEL          tokenize with this sentencepiece model instead of training one\n"
           "      --vocab-size N       pieces of the trained model (default 1023, the reference's)\n"
           "      --wav                also write the reference's WAVs, OUTDIR/SUBSET-wav/SPEAKER/CHAPTER/ID.wav\n"
           "      --manifests          the inputs are reference manifests (their WAVs beside them)\n"
           "      --root DIR           manifests: the folder their fnames are relative to (default: the\n"
           "                           manifest's own folder)\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n\n"
           "One JSON line per subset and a summary go to stdout. Nothing is written unless every input\n"
           "passes. Exit status: 0 ok, 2 usage (or libFLAC / sentencepiece missing), 3 bad input data,\n"
           "4 I/O error. See prep(1).\n",
           ls_usage);
}

static void progress_cb(void *ctx, uint64_t done) { tk_progress_update(ctx, done); }

int prep_librispeech_main(int argc, char **argv) {
    enum { O_SPM = 256, O_VOCAB, O_WAV, O_MANIFESTS, O_ROOT, O_PROGRESS };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},  {"spm", required_argument, 0, O_SPM},
        {"vocab-size", required_argument, 0, O_VOCAB}, {"wav", no_argument, 0, O_WAV},
        {"manifests", no_argument, 0, O_MANIFESTS}, {"root", required_argument, 0, O_ROOT},
        {"progress", no_argument, 0, O_PROGRESS}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},       {0, 0, 0, 0}};
    ls_prep_opts o = {0};
    int ch, progress = 0;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        switch (ch) {
        case 'o': o.out_dir = optarg; break;
        case O_SPM: o.spm_model = optarg; break;
        case O_WAV: o.wav = 1; break;
        case O_MANIFESTS: o.manifests = 1; break;
        case O_ROOT: o.root = optarg; break;
        case O_PROGRESS: progress = 1; break;
        case O_VOCAB: {
            int64_t v;
            tk_err pe;
            if (tk_parse_i64(optarg, 2, 1 << 20, "--vocab-size", &v, &pe))
                return tk_cli_usage_error(prog, ls_usage, "%s", pe.what);
            o.vocab = (int)v;
            break;
        }
        default: return tk_cli_common_option(prog, ls_usage, ls_help, ch, argv);
        }
    }
    if (optind >= argc) return tk_cli_usage_error(prog, ls_usage, "librispeech: no %s", o.manifests ? "manifest" : "SUBSET_DIR");
    if (!o.out_dir) return tk_cli_usage_error(prog, ls_usage, "librispeech: give -o OUTDIR");
    if (o.spm_model && o.vocab) return tk_cli_usage_error(prog, ls_usage, "librispeech: --vocab-size is for a trained model, not --spm");
    if (o.manifests && o.wav) return tk_cli_usage_error(prog, ls_usage, "librispeech: --wav is for subset folders (manifests come with their WAVs)");
    if (o.root && !o.manifests) return tk_cli_usage_error(prog, ls_usage, "librispeech: --root is for --manifests");
    tk_progress pr;
    tk_progress_init(&pr, "prep", "utterances", 0, progress);
    o.progress = progress_cb;
    o.progress_ctx = &pr;
    tk_err e;
    tk_err_clear(&e);
    ls_prep_stats st;
    int rc = ls_prep(argv + optind, argc - optind, &o, &st, &e);
    uint64_t utts = 0, recs = 0, dropped = 0;
    for (int i = 0; !rc && i < st.nsubsets; i++) {
        const ls_subset_stats *s = &st.sub[i];
        utts += s->utterances;
        recs += s->records;
        dropped += s->dropped_long;
        char out[4300];
        snprintf(out, sizeof out, "%s/%s.tks", o.out_dir, s->name);
        rc = tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:s,s:s,s:I,s:I,s:I,s:f}", "type", "subset", "subset", s->name,
                                             "split", s->train ? "train" : "eval", "output", out, "utterances",
                                             (json_int_t)s->utterances, "records", (json_int_t)s->records,
                                             "dropped_over_16.7s", (json_int_t)s->dropped_long, "hours",
                                             (double)s->samples / LS_SAMPLE_RATE / 3600.0), &e);
    }
    if (!rc) {
        tk_progress_end(&pr, utts);
        rc = tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:i,s:I,s:I,s:I,s:s,s:b,s:I}", "type", "prep", "dataset",
                                             "librispeech", "subsets", st.nsubsets, "utterances", (json_int_t)utts,
                                             "records", (json_int_t)recs, "dropped_over_16.7s", (json_int_t)dropped,
                                             "spm_model", st.spm_model, "spm_trained", st.spm_trained, "tokens",
                                             (json_int_t)st.tokens), &e);
    }
    ls_prep_stats_free(&st);
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
