// Word error rate (issue 31 item 5: WER on dev-clean) as MLPerf's RNN-T reference computes it
// (rnn_speech_recognition/pytorch common/metrics.py word_error_rate, common/helpers.py
// process_evaluation_epoch): each hypothesis and reference text is split into words as Python's
// str.split() does (runs of whitespace; leading and trailing whitespace ignored), the Levenshtein
// distance between the two word lists (insertions, deletions and substitutions of whole words,
// cost 1 each; words equal when their bytes are) summed over the set, divided by the sum of the
// references' word counts (infinite when that is 0). Several ranks add their sums (the reference
// all-reduces scores and num_words) before the division.
//
// Whitespace: the ASCII characters Python's str.split() splits at (space, \t \n \v \f \r and
// \x1c .. \x1f); the texts here are sentencepiece detokenizations of LibriSpeech's alphabet
// (letters, apostrophe, space, and " \u2047 " for <unk>), so Unicode's other spaces never occur.
//
// Ids to text (common/data/text.py Tokenizer.detokenize = SentencePieceProcessor.decode(ids)):
// each id's piece, its U+2581 ("▁") replaced by a space, concatenated; <unk> (id 0 of the
// reference's model, spm_train's default) decodes to " \u2047 " (sentencepiece's unk surface);
// control pieces (<s>, </s>, <pad>) to nothing; the leading space of the first piece is dropped.
// The pieces come from the model itself, the protobuf .model (sentencepiece_model.proto's
// ModelProto: the repeated pieces with their text and type; the type says which is unknown and
// which control, a byte piece <0xHH> decodes to its byte), or from its .vocab (spm_train writes
// it beside the .model, as prep librispeech does next to the records: line i is piece i, a tab,
// its score; no types there, so <unk> is the unknown piece and <s>, </s>, <pad> the controls, the
// names spm_train gives them). The reference's texts are
// decoded too: helpers.py gather_transcripts detokenizes the target token ids (not the manifest's
// transcript), so a reference text here is tk_spm_decode of the record's tokens.
#ifndef TK_SPEECH_WER_H
#define TK_SPEECH_WER_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// Running sums of a WER: errors (word edit distance) and reference words.
typedef struct tk_wer {
    int64_t errors, words;
} tk_wer;

// The word-level Levenshtein distance between hyp (hn bytes) and ref (rn bytes); *ref_words (may
// be NULL) gets ref's word count. TK_EIO (ENOMEM) when out of memory.
int tk_wer_distance(const char *hyp, size_t hn, const char *ref, size_t rn, int64_t *dist, int64_t *ref_words,
                    tk_err *e);
// Adds one (hypothesis, reference) pair (NUL-terminated) to w.
int tk_wer_add(tk_wer *w, const char *hyp, const char *ref, tk_err *e);
// errors / words (INFINITY when words is 0, as the reference).
double tk_wer_value(const tk_wer *w);

// A sentencepiece vocabulary: pieces by id.
typedef struct tk_spm_vocab tk_spm_vocab;
// Parses a .model's bytes (its first byte 0x0A, field 1's key) or a .vocab's (name for messages):
// one "PIECE\tSCORE" line a piece (a last line without its newline accepted). TK_EDATA naming the
// file and line (.vocab: no tab, an empty piece, a score that is not a number, a NUL byte) or byte
// offset (.model: a truncated or malformed field, a piece without text or with a NUL byte); no
// pieces is TK_EDATA too.
int tk_spm_vocab_parse(const char *buf, size_t n, const char *name, tk_spm_vocab **v, tk_err *e);
int tk_spm_vocab_load(const char *path, tk_spm_vocab **v, tk_err *e);
void tk_spm_vocab_free(tk_spm_vocab *v);
int tk_spm_vocab_size(const tk_spm_vocab *v);
// The text of ids[0 .. n) (detokenize above) into *out (malloc'd, NUL-terminated; *len its bytes,
// may be NULL). An id outside the vocabulary is TK_EDATA naming it.
int tk_spm_decode(const tk_spm_vocab *v, const int32_t *ids, int n, char **out, size_t *len, tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
