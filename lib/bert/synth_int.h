// Inside of the synthetic BERT text generator: the grammar, shared by synth.c (which builds it
// and writes text from it) and synth_oracle.c (which runs inference over it).
#ifndef TK_BERT_SYNTH_INT_H
#define TK_BERT_SYNTH_INT_H

#include <stddef.h>
#include <stdint.h>

#include "bert/pretrain.h"
#include "bert/synth.h"
#include "bert/tokenizer.h"

#define SYN_START 16          // start words per topic (fewer when there are fewer words)
#define SYN_START_RATIO 0.8   // the same for the start list
#define SYN_MAX_WORDS 200     // a sentence ends after this many words whatever the draw

typedef struct {
    int W, M, K, KS, Z;
    char **word;              // W lower-case words; word 0 the most popular
    int32_t *poff, *piece;    // WordPiece ids of word w: piece[poff[w] .. poff[w+1])
    int32_t *succ;            // [M][W][K] successor words
    double *psucc;            // [K]
    int32_t *start;           // [M][KS] first words of a sentence
    double *pstart;           // [KS]
    int32_t *tword;           // [M][Z] each topic's own words (whole vocabulary entries)
    double *ptword;           // [Z]
    double p_topic;           // a word is one of its topic's words with this probability
    double p_end;             // a sentence ends after a word with this probability
    int32_t dot;              // token id of "."
    bert_vocab *vocab;
    bert_tokenizer *tok;
    char *vocab_text;         // vocab.txt's bytes
    size_t vocab_len;
} syn_grammar;

// The oracle's results over the eval examples.
typedef struct {
    uint64_t examples, masked;
    double hits, expected;    // argmax hits; sum of max posterior probabilities
    double unigram_hits;
    double nsp_hits;
    int32_t unigram_token;
    double random_next;       // fraction of examples whose B is a random segment
    double a_inside, br_inside, bc_gap, a_cut_end, b_cut_end; // how examples were cut (synth_oracle.c)
} syn_oracle;

// Runs the oracle on the examples of x (output order), the first n_eval of them evenly spaced.
int syn_oracle_run(const syn_grammar *g, const bert_examples *x, const bert_special *sp, int L, int P,
                   size_t n_eval, int threads, syn_oracle *out, tk_err *e);

#endif
