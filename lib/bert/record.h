// The .tks records of BERT pre-training examples (man/man5/trainkit-bert.5): one record per
// example, fixed size, padded fields, in this order:
//   input_ids i16[L]  segment_ids u8[L]  seq_len i16  masked_lm_positions i16[P]
//   masked_lm_ids i16[P]  num_masked i16  next_sentence_labels u8
// L = max_seq_length, P = max_predictions_per_seq; padding is 0. The schema's meta object names
// the vocabulary size, L, P, the special token ids and how the examples were made.
#ifndef TK_BERT_RECORD_H
#define TK_BERT_RECORD_H

#include <stddef.h>
#include <stdint.h>

#include "bert/tokenizer.h"
#include "core/err.h"
#include "tks/tks.h"

#define BERT_NFIELDS 7
#define BERT_MAX_SEQ 32767   // ids and positions are i16
#define BERT_MAX_VOCAB 32768

// Column buffers for up to cap records.
typedef struct {
    int L, P;
    size_t n, cap;
    int16_t *input_ids;     // cap x L
    uint8_t *segment_ids;   // cap x L
    int16_t *seq_len;       // cap
    int16_t *mlm_pos;       // cap x P
    int16_t *mlm_ids;       // cap x P
    int16_t *num_masked;    // cap
    uint8_t *nsp;           // cap
} bert_records;

int bert_records_init(bert_records *b, int L, int P, size_t cap, tk_err *e);
void bert_records_free(bert_records *b);
// Zeroes record i (all padding) and returns its index; the caller fills it.
void bert_records_clear(bert_records *b, size_t i);
// The column pointers for tks_writer_append, in schema order.
void bert_records_cols(const bert_records *b, const void *cols[BERT_NFIELDS]);

// What the schema meta says. Fields that do not apply are 0 / NULL / -1.
typedef struct {
    const char *input;          // "text", "hdf5-fixed" or "hdf5-varlen"
    int32_t vocab_size;
    int L, P;
    int have_special;
    bert_special special;
    // text input only
    int cased, max_word_chars, dupe_factor;
    double masked_lm_prob, short_seq_prob;
    uint64_t seed;
    const char *rng;            // "philox" or "mt"
    int64_t pick;               // examples picked per file, or 0
} bert_meta;

void bert_schema(tks_schema *s, const bert_meta *m);

// Checks record i against the schema's rules (ids in [0, vocab), segment ids 0/1, positions in
// [0, seq_len), label 0/1). TK_EDATA with e->what set (the caller adds where).
int bert_records_check(const bert_records *b, size_t i, int32_t vocab_size, tk_err *e);

#endif
