// Synthetic text in the MLPerf BERT layout (part-NNNNN-of-NNNNN files, eval.txt) plus vocab.txt,
// written from a stochastic grammar with a known, learnable structure (man/man1/prep.1):
//   - words are strings of syllables; frequent words are whole vocabulary entries, the others
//     WordPiece into word-initial and "##" pieces;
//   - an article is a sequence of sentences (one a line) with one topic, drawn at random and kept
//     by all its sentences; each topic has its own `topic_words` words (whole vocabulary
//     entries, disjoint between topics while there are enough), with geometric probabilities
//     (ratio topic_ratio);
//   - each word of a sentence is, with probability topic_prob, one of its topic's words, else the
//     first word one of its topic's start words and each next one of the previous word's
//     `successors` successor words under the topic, with geometric probabilities (ratio
//     successor_ratio); after each word the sentence ends ("." ) with probability 1/mean_words.
//   So a masked word is predictable from the bag of its context (the article's topic), and a
//   little more from its neighbours (successors, the pieces of a split word).
// The generator also makes the eval examples as `prep bert --eval-10k` would (with its options
// L, P, masked_lm_prob) and computes on them, by exact forward-backward inference over the
// grammar's hidden Markov chain, the accuracy of the Bayes-optimal masked-token predictor (the
// oracle) and of the best unigram predictor (manifest.json, see prep(1) for the approximations).
#ifndef TK_BERT_SYNTH_H
#define TK_BERT_SYNTH_H

#include <stdint.h>

#include "core/err.h"

enum { BERT_SYNTH_CI = 0, BERT_SYNTH_LARGE = 1 };

typedef struct {
    const char *size;          // "ci" or "large": the preset
    int parts;                 // part files
    int articles;              // articles per part file
    int sentences;             // sentences per article
    int eval_articles;         // articles of eval.txt
    int32_t vocab_size;        // lines of vocab.txt
    int words;                 // grammar words
    int topics;
    int successors;            // successor words per word and topic
    double successor_ratio;    // successor j has probability proportional to successor_ratio^j
    double mean_words;         // mean words per sentence (sentence end probability 1/mean_words)
    int topic_words;           // words of each topic's own list
    double topic_ratio;        // topic word j has probability proportional to topic_ratio^j
    double topic_prob;         // a word is drawn from its topic's list with this probability (-1: 0 given)
    uint64_t seed;
    int threads;
    // How the oracle's eval examples are made (prep bert --eval-10k with these).
    int max_seq_length, max_predictions;
    double masked_lm_prob;
    int oracle_examples;       // 1 + the examples the oracle runs on (1: no oracle; 0: not set)
} bert_synth_opts;

void bert_synth_defaults(bert_synth_opts *o, int preset);
// Copies the nonzero fields of user over o (the options given on the command line).
void bert_synth_apply(bert_synth_opts *o, const bert_synth_opts *user);

// Writes dir/vocab.txt, dir/part-*, dir/eval.txt and dir/manifest.json (each atomically; on an
// error none of them is left). *summary gets a one-line JSON text for stdout (caller frees).
int bert_synth_write(const bert_synth_opts *o, const char *dir, char **summary, tk_err *e);

#endif
