// prep synth librispeech: synthetic speech in LibriSpeech's layout (cmd/prep.c dispatches to it);
// the work is lib/librispeech/synth.c's.
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "core/cli.h"
#include "core/jsonl.h"
#include "core/progress.h"
#include "librispeech/librispeech.h"
#include "prep/prep.h"

static const char *synth_usage =
    "Usage: prep synth librispeech -o DIR [--seed S] [--speakers N] [--dev-speakers N] [--chapters N]\n"
    "                              [--utterances N] [--lexicon N] [--voices N] [--rate WPM] [--progress]\n";

static void synth_help(void) {
    printf("%s\n"
           "Write synthetic speech in LibriSpeech's layout: DIR/LibriSpeech/{train-clean-100,dev-clean}/\n"
           "SPEAKER/CHAPTER/SPEAKER-CHAPTER-NNNN.flac (16 kHz mono) and SPEAKER-CHAPTER.trans.txt, spoken by\n"
           "espeak-ng voices through sox (reverb, noise); dev-clean has held-out voices and sentences.\n"
           "DIR/manifest.json describes the set (its WER target is null until the RNN-T workload\n"
           "calibrates it). Needs espeak-ng and sox (contrib/setup-deps.sh).\n\n"
           "  -o, --output DIR         where to write (DIR/LibriSpeech must not exist)\n"
           "      --seed S             sentences, voices' rate and pitch, rooms, noise (default 1)\n"
           "      --speakers N         train-clean-100 speakers (default 8)\n"
           "      --dev-speakers N     dev-clean speakers (default 2)\n"
           "      --chapters N         chapters per speaker (default 2)\n"
           "      --utterances N       utterances per chapter (default 10)\n"
           "      --lexicon N          easier text: DET NOUN VERB DET NOUN, N words a class (2-28)\n"
           "      --voices N           every speaker, dev-clean's too, one of the first N training voices\n"
           "      --rate WPM           every speaker's rate in words a minute (80-450; default 145-185)\n"
           "      --progress           show progress on stderr even when it is not a terminal\n"
           "  -h, --help               this help\n\n"
           "Exit status: 0 ok, 2 usage (or espeak-ng / sox missing), 4 I/O error. See prep(1).\n",
           synth_usage);
}

static void progress_cb(void *ctx, uint64_t done) { tk_progress_update(ctx, done); }

int prep_synth_librispeech_main(int argc, char **argv) {
    enum { O_SEED = 256, O_SPK, O_DEV, O_CH, O_UTT, O_LEX, O_VOICES, O_RATE, O_PROGRESS };
    static const struct option longopts[] = {
        {"output", required_argument, 0, 'o'},  {"seed", required_argument, 0, O_SEED},
        {"speakers", required_argument, 0, O_SPK}, {"dev-speakers", required_argument, 0, O_DEV},
        {"chapters", required_argument, 0, O_CH}, {"utterances", required_argument, 0, O_UTT},
        {"lexicon", required_argument, 0, O_LEX}, {"voices", required_argument, 0, O_VOICES},
        {"rate", required_argument, 0, O_RATE}, {"progress", no_argument, 0, O_PROGRESS}, {"help", no_argument, 0, 'h'},
        {"version", no_argument, 0, 'V'},       {0, 0, 0, 0}};
    ls_synth_opts o = {.seed = 1, .train_speakers = 8, .dev_speakers = 2, .chapters = 2, .utterances = 10};
    int ch, progress = 0;
    opterr = 0;
    optind = 1;
    while ((ch = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        int64_t v = 0;
        tk_err pe;
        int bad = 0;
        switch (ch) {
        case 'o': o.out_dir = optarg; break;
        case O_SEED: bad = tk_parse_i64(optarg, 0, INT64_MAX, "--seed", &v, &pe), o.seed = (uint64_t)v; break;
        case O_SPK: bad = tk_parse_i64(optarg, 1, 1000, "--speakers", &v, &pe), o.train_speakers = (int)v; break;
        case O_DEV: bad = tk_parse_i64(optarg, 1, 1000, "--dev-speakers", &v, &pe), o.dev_speakers = (int)v; break;
        case O_CH: bad = tk_parse_i64(optarg, 1, 100, "--chapters", &v, &pe), o.chapters = (int)v; break;
        case O_UTT: bad = tk_parse_i64(optarg, 1, 9999, "--utterances", &v, &pe), o.utterances = (int)v; break;
        case O_LEX: bad = tk_parse_i64(optarg, 2, 28, "--lexicon", &v, &pe), o.lexicon = (int)v; break;
        case O_VOICES: bad = tk_parse_i64(optarg, 1, 60, "--voices", &v, &pe), o.voices = (int)v; break;
        case O_RATE: bad = tk_parse_i64(optarg, 80, 450, "--rate", &v, &pe), o.rate = (int)v; break;
        case O_PROGRESS: progress = 1; break;
        default: return tk_cli_common_option(prog, synth_usage, synth_help, ch, argv);
        }
        if (bad) return tk_cli_usage_error(prog, synth_usage, "%s", pe.what);
    }
    if (optind < argc) return tk_cli_usage_error(prog, synth_usage, "synth librispeech: unexpected '%s'", argv[optind]);
    if (!o.out_dir) return tk_cli_usage_error(prog, synth_usage, "synth librispeech: give -o DIR");
    tk_progress pr;
    uint64_t total = (uint64_t)(o.train_speakers + o.dev_speakers) * (uint64_t)o.chapters * (uint64_t)o.utterances;
    tk_progress_init(&pr, "synth", "utterances", total, progress);
    o.progress = progress_cb;
    o.progress_ctx = &pr;
    tk_err e;
    tk_err_clear(&e);
    ls_synth_stats st;
    int rc = ls_synth(&o, &st, &e);
    if (!rc) {
        tk_progress_end(&pr, total);
        rc = tk_jsonl_emit(stdout, json_pack("{s:s,s:s,s:s,s:I,s:I,s:f}", "type", "synth", "dataset", "librispeech", "dir",
                                             o.out_dir, "train_utterances", (json_int_t)st.train_utts, "dev_utterances",
                                             (json_int_t)st.dev_utts, "hours",
                                             (double)st.samples / LS_SAMPLE_RATE / 3600.0), &e);
    }
    if (rc) return tk_cli_fail(prog, &e);
    if (tk_cli_close_stdout(&e)) return tk_cli_fail(prog, &e);
    return 0;
}
