// Masked-LM + next-sentence examples from the MLPerf text layout, with the semantics of the
// reference's create_pretraining_data.py (mlcommons/training, language_model/tensorflow/bert/
// cleanup_scripts), run once per input file as MLPerf runs it:
//   - a file is one sentence a line, a blank line between articles (documents);
//   - the documents are shuffled; dupe_factor times, each document is cut into chunks of
//     sentences of about max_seq_length - 3 tokens (sometimes, short_seq_prob, a random shorter
//     target), each chunk split into A and B at a random sentence; B is the rest of the chunk, or
//     (half the time, and always for one-sentence chunks) sentences of another random document
//     with the unused sentences put back; the longer of A and B loses a token from a random end
//     until [CLS] A [SEP] B [SEP] fits;
//   - round(len * masked_lm_prob) tokens (1 .. max_predictions) other than [CLS]/[SEP] are picked
//     at random: 80% become [MASK], 10% stay, 10% become a random vocabulary token;
//   - the file's examples are shuffled; with pick = N, N are taken evenly spaced (the eval set
//     recipe of pick_eval_samples.py: index int(i * count / N)).
// Draws come from bert_rng (rng.h): BERT_RNG_MT repeats the reference's examples exactly.
#ifndef TK_BERT_PRETRAIN_H
#define TK_BERT_PRETRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "bert/record.h"
#include "bert/rng.h"
#include "bert/tokenizer.h"
#include "tks/tks.h"

typedef struct {
    int max_seq_length;       // 512
    int max_predictions;      // 76
    double masked_lm_prob;    // 0.15
    double short_seq_prob;    // 0.1
    int dupe_factor;          // 10
    uint64_t seed;            // 12345
    int rng;                  // BERT_RNG_PHILOX or BERT_RNG_MT
    int64_t pick;             // 0 = every example; else N examples per file, evenly spaced
} bert_pretrain_opts;

void bert_pretrain_defaults(bert_pretrain_opts *o);

// A file's text as token ids: sentences (lines with tokens) grouped into documents.
typedef struct {
    int32_t *tok;
    size_t ntok;
    size_t *sent, nsent;      // sentence i = tok[sent[i] .. sent[i+1])
    size_t *doc, ndoc;        // document d = sentences doc[d] .. doc[d+1]-1 (no empty ones)
    uint64_t lines, bytes;
} bert_corpus;

// Reads and tokenizes a text file ("-" = stdin; gzip or zstd by magic bytes). threads > 1
// tokenizes lines in parallel (the result does not depend on it). TK_EDATA "FILE: line N" for
// invalid UTF-8.
int bert_corpus_read(bert_corpus *c, const bert_tokenizer *t, const char *path, int threads, tk_err *e);
void bert_corpus_free(bert_corpus *c);

// One example: segment A = tok[a, a+la), B = tok[b, b+lb) of its corpus; its masked positions
// (ascending) and what input_ids shows there are m[moff .. moff+nmask).
typedef struct {
    uint64_t a, b, moff;
    uint32_t la, lb;
    uint16_t nmask;
    uint8_t random_next;
} bert_inst;

typedef struct {
    uint16_t pos;
    int32_t shown;            // [MASK], the token itself, or a random id
} bert_masked;

typedef struct {
    bert_corpus c;
    bert_inst *inst;
    size_t ninst, icap;
    bert_masked *m;
    size_t nm, mcap;
    uint32_t *order;          // output order: indices into inst (shuffled, then picked)
    size_t norder;
} bert_examples;

// Makes the examples of one corpus (which x takes over). name: the file name, whose base name
// picks the Philox stream.
int bert_examples_make(bert_examples *x, bert_corpus *c, const char *name, const bert_pretrain_opts *o,
                       const bert_special *sp, int32_t vocab_size, tk_err *e);
void bert_examples_free(bert_examples *x);
// Writes output examples [first, first+n) into b (which has room) as records 0..n-1.
void bert_examples_fill(const bert_examples *x, const bert_special *sp, size_t first, size_t n, bert_records *b);

// The whole of `prep bert`: each file read, its examples made and written to w in file order.
// Files are processed in parallel (threads); the output bytes do not depend on threads.
// progress(ctx, records written so far) is called now and then (may be NULL).
typedef void (*bert_progress_fn)(void *ctx, uint64_t done);
int bert_pretrain_write(tks_writer *w, char *const *files, int nfiles, const bert_tokenizer *t,
                        const bert_vocab *v, const bert_pretrain_opts *o, int threads, bert_progress_fn progress,
                        void *pctx, uint64_t *nwritten, tk_err *e);

#endif
