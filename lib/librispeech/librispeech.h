// LibriSpeech for RNN-T (man/man1/prep.1 "librispeech", "synth librispeech"): the corpus tree
// ({subset}/{speaker}/{chapter}/{speaker}-{chapter}-{utt}.flac beside {speaker}-{chapter}.trans.txt),
// the MLPerf reference's JSON manifests (librispeech-{subset}-wav.json) and WAV files, its
// sentencepiece tokens, and the .tks records prep writes.
//
// Reference followed (mlcommons/training rnn_speech_recognition/pytorch):
//   scripts/preprocess_librispeech.sh -> utils/convert_librispeech.py + preprocessing_utils.py:
//     each trans.txt line is split at its first space into the file name and the transcript; the
//     manifest's transcript is transcript.lower().strip(); each entry holds "files" (sox's info of
//     the converted WAV: channels, sample_rate, bitdepth, duration, num_samples, ..., plus fname
//     "{subset}-wav/{speaker}/{chapter}/{id}.wav" and speed 1), "original_duration" and
//     "original_num_samples" (of the speed-1 file).
//   configs/baseline_v3-1023sp.yaml: sample_rate 16000; training keeps original_duration <= 16.7
//     (common/data/dali/data_loader.py's predicate), evaluation keeps everything.
//   scripts/create_sentencepieces.sh: the training manifests' transcripts (jq '.[]["transcript"]')
//     into SentencePieceTrainer with vocab_size=1023, character_coverage=1.0, bos_id=-1,
//     eos_id=-1, model_type=unigram.
//   common/data/text.py: tokens = sentencepiece encode(transcript) as ids; an id 0 (<unk>) is an
//     error. The transcripts are not normalized further (DaliRnntIterator's default), so a
//     transcript must already be in the tokenizer's labels: a-z, apostrophe, space.
// lib/ only returns errors; the tools (spm_train, spm_encode, espeak-ng, sox) run as child
// processes (proc.c), libFLAC is linked when the build found it (TK_HAVE_FLAC).
#ifndef TK_LIBRISPEECH_H
#define TK_LIBRISPEECH_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define LS_SAMPLE_RATE 16000
#define LS_MAX_DURATION 16.7          // seconds: the reference's training filter
#define LS_VOCAB 1023                 // sentencepiece pieces

// ---- transcripts (text.c) --------------------------------------------------------------------
typedef struct {
    char id[64];                      // "speaker-chapter-utterance"
    char *text;                       // lower case, stripped (points into ls_trans.buf)
    uint32_t line;                    // 1-based line in the file
} ls_utt;

typedef struct {
    ls_utt *u;
    size_t n;
    char *buf;
} ls_trans;

// Checks one transcript as the reference's manifest would hold it: text.lower().strip() must use
// only the tokenizer's labels (a-z, apostrophe, space). Writes the normalized text to out (at
// least n + 1 bytes) and returns 0, or -1 with *bad the offset of the first character that is not
// allowed.
int ls_text_normalize(const char *s, size_t n, char *out, size_t *bad);
// Parses a {speaker}-{chapter}.trans.txt held in data[0..n): "ID TRANSCRIPT" lines. prefix
// ("speaker-chapter-", or NULL): every id must start with it. Errors (TK_EDATA) name `name`, the
// line and the column: a line without an id, an id that is not digits-digits-digits, a repeated
// id, a character outside the alphabet, a NUL byte.
int ls_trans_parse(const char *data, size_t n, const char *name, const char *prefix, ls_trans *t, tk_err *e);
int ls_trans_load(const char *path, const char *prefix, ls_trans *t, tk_err *e);
void ls_trans_free(ls_trans *t);
// The whole file (TK_EIO when it cannot be read; files over 1 GiB are TK_EDATA).
int ls_read_file(const char *path, char **buf, size_t *len, tk_err *e);

// ---- audio (audio.c) -------------------------------------------------------------------------
typedef struct {
    int16_t *pcm;                     // mono samples
    size_t n;
} ls_audio;

int ls_flac_available(void);
// Decodes a FLAC file with libFLAC (MD5 checked when the file has one). It must be 16 kHz, mono,
// 16 bits, and hold every sample its STREAMINFO announces: TK_EDATA naming the file otherwise.
// Built without libFLAC: TK_EUSAGE naming the package.
int ls_flac_read(const char *path, ls_audio *a, tk_err *e);
// A RIFF/WAVE file of 16-bit PCM: parsed from memory / read. Must be 16 kHz mono (TK_EDATA).
int ls_wav_parse(const uint8_t *p, size_t n, const char *name, ls_audio *a, tk_err *e);
int ls_wav_read(const char *path, ls_audio *a, tk_err *e);
// Writes a 16 kHz mono 16-bit WAV (the reference's converted files), atomically.
int ls_wav_write(const char *path, const int16_t *pcm, size_t n, tk_err *e);
void ls_audio_free(ls_audio *a);

// ---- manifests (manifest.c) ------------------------------------------------------------------
typedef struct {
    char *transcript;                 // as in the file (checked with ls_text_normalize by the caller)
    char *fname;                      // the speed-1 file's fname
    double duration;                  // original_duration
    uint64_t num_samples;             // original_num_samples
} ls_manifest_entry;

// Reads a reference manifest: a JSON array of entries, each with "transcript" (string), "files"
// (a non-empty array of objects with "fname" and "speed"; the speed-1 one is taken),
// "original_duration" (number >= 0) and "original_num_samples" (integer >= 0). Errors (TK_EDATA)
// name the file and the JSON path ("FILE: $[3].files").
int ls_manifest_load(const char *path, ls_manifest_entry **out, size_t *n, tk_err *e);
void ls_manifest_free(ls_manifest_entry *m, size_t n);

// ---- child processes (proc.c) ----------------------------------------------------------------
// TK_EUSAGE "TOOL is not installed (Debian package PKG; contrib/setup-deps.sh installs it)" when
// TOOL is not an executable on PATH.
int ls_need_tool(const char *tool, const char *pkg, tk_err *e);
// Runs argv (argv[0] looked up on PATH) in folder cwd (NULL: ours) with `in` on its stdin and returns its stdout in *out
// (malloc'd, NUL-terminated; out may be NULL to discard it). A nonzero exit is TK_EIO quoting the
// last line of its stderr.
int ls_run(char *const argv[], const char *cwd, const void *in, size_t inlen, char **out, size_t *outlen, tk_err *e);

// Formats a path into buf; TK_EUSAGE when it does not fit (an absurdly long folder name).
int ls_path(char *buf, size_t cap, tk_err *e, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
// mkdir -p; rm -r (what this program made: its temporaries).
int ls_mkdirs(const char *path, tk_err *e);
void ls_rm_tree(const char *path);

// ---- sentencepiece (spm.c) -------------------------------------------------------------------
// Trains the reference's unigram model with spm_train in folder dir, on dir/txt.txt (one
// transcript a line); writes dir/librispeech{vocab}.{model,vocab}. The model records its input
// and prefix names, given relative so the same transcripts give the same bytes. vocab: LS_VOCAB
// as the reference (smaller for tiny test sets).
int ls_spm_train(const char *dir, int vocab, tk_err *e);
// Encodes n transcripts with one spm_encode process: ids of transcript i are
// ids[off[i] .. off[i+1]) (*ids and *off malloc'd).
int ls_spm_encode(const char *model, char *const *texts, size_t n, int32_t **ids, uint64_t **off, tk_err *e);

// ---- prep (prep.c) ---------------------------------------------------------------------------
typedef struct {
    const char *out_dir;
    const char *spm_model;            // an existing model; NULL: train one from the training subsets
    const char *root;                 // manifest input: the folder fname is relative to (default:
                                      // the manifest's folder)
    int vocab;                        // pieces of a trained model (0: LS_VOCAB)
    int wav;                          // also write the reference's WAVs (OUT/{subset}-wav/...)
    int manifests;                    // inputs are reference manifests, not subset folders
    void (*progress)(void *ctx, uint64_t done);
    void *progress_ctx;
} ls_prep_opts;

typedef struct {
    char name[128];                   // "train-clean-100"
    int train;                        // name starts with "train": the 16.7 s filter applies
    uint64_t utterances, records, dropped_long, samples;
} ls_subset_stats;

typedef struct {
    int nsubsets;
    ls_subset_stats *sub;
    char spm_model[4096];             // the model used
    int spm_trained;
    uint64_t tokens;
} ls_prep_stats;

// Reads each input (a subset folder, or with o->manifests a reference manifest), tokenizes, and
// writes OUT/{subset}.tks for each, OUT/librispeech-{subset}-wav.json (folders only) and the
// trained model OUT/librispeech1023.{model,vocab}. All or nothing: on any error no output is left.
int ls_prep(char *const *inputs, int ninputs, const ls_prep_opts *o, ls_prep_stats *st, tk_err *e);
void ls_prep_stats_free(ls_prep_stats *st);

// ---- synthetic LibriSpeech (synth.c) ---------------------------------------------------------
typedef struct {
    const char *out_dir;
    uint64_t seed;
    int train_speakers, dev_speakers, chapters, utterances; // utterances per chapter
    int lexicon;                 // > 0: short sentences (ls_synth_short_sentence) of this many words a class
    int voices;                  // > 0: every speaker, dev's too, one of the first N training voices
    int rate;                    // > 0: every speaker's rate (words a minute; else 145-185 each)
    void (*progress)(void *ctx, uint64_t done);
    void *progress_ctx;
} ls_synth_opts;

typedef struct {
    uint64_t train_utts, dev_utts, samples;
} ls_synth_stats;

// One sentence of the synthetic corpus (upper case, words and apostrophes): sentence i of
// `stream` under seed; dev sentences come from another stream and are never train sentences.
void ls_synth_sentence(uint64_t seed, uint32_t stream, uint64_t i, char *out, size_t cap);
// An easier sentence for small models (prep synth librispeech --lexicon N): one clause of five
// words, DET NOUN VERB DET NOUN, each word of its class's first `lexicon` words (at least 2).
void ls_synth_short_sentence(uint64_t seed, uint32_t stream, uint64_t i, int lexicon, char *out, size_t cap);
int ls_synth(const ls_synth_opts *o, ls_synth_stats *st, tk_err *e);

#endif
