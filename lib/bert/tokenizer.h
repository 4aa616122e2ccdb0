// BERT's WordPiece tokenizer, as the MLPerf reference runs it (language_model/tensorflow/bert/
// cleanup_scripts/tokenization.py, FullTokenizer with do_lower_case=True):
//   basic: drop NUL, U+FFFD and control characters, turn whitespace into spaces, put spaces around
//          CJK ideographs, split on whitespace; each word lower-cased (str.lower) and stripped of
//          accents (NFD, then no Mn), then split so each punctuation character stands alone;
//   WordPiece: each piece greedily matched longest-first against the vocabulary, continuations
//          spelled "##..."; a word with no match, or longer than max_word_chars characters, is [UNK].
// The vocabulary is read strictly (man/man5/trainkit-bert.5): one token a line, id = line - 1.
#ifndef TK_BERT_TOKENIZER_H
#define TK_BERT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#define BERT_REF_MAX_WORD_CHARS 200 // tokenization.py's max_input_chars_per_word (Hugging Face: 100)

typedef struct bert_vocab bert_vocab;

// Reads a vocabulary file. Errors (TK_EDATA, "FILE: line N"): an empty line, a line with
// whitespace in it (not one token), invalid UTF-8, a token that repeats an earlier line, an empty
// file. TK_EIO when it cannot be read.
int bert_vocab_load(bert_vocab **v, const char *path, tk_err *e);
// The same from memory; name is used in messages.
int bert_vocab_parse(bert_vocab **v, const char *data, size_t n, const char *name, tk_err *e);
void bert_vocab_free(bert_vocab *v);
int32_t bert_vocab_size(const bert_vocab *v);
// Id of a token spelled as in the file ("##ing", "[CLS]"), or -1.
int32_t bert_vocab_id(const bert_vocab *v, const char *tok, size_t len);
// The token of an id (NUL-terminated, as in the file).
const char *bert_vocab_token(const bert_vocab *v, int32_t id);

// The ids of the special tokens; TK_EDATA naming the file when [UNK], [CLS], [SEP] or [MASK] is
// missing. pad is the id of [PAD], or -1 (the records pad with id 0 whatever it is, as the reference).
typedef struct {
    int32_t pad, unk, cls, sep, mask;
} bert_special;
int bert_vocab_special(const bert_vocab *v, bert_special *s, tk_err *e);

typedef struct {
    int cased;            // 0 (default): lower-case and strip accents, as MLPerf's uncased model
    int max_word_chars;   // 0 = BERT_REF_MAX_WORD_CHARS
} bert_tok_opts;

typedef struct bert_tokenizer bert_tokenizer;
// The tokenizer keeps a pointer to v (which must outlive it). Shared by threads read-only.
int bert_tokenizer_new(bert_tokenizer **t, const bert_vocab *v, const bert_tok_opts *o, tk_err *e);
void bert_tokenizer_free(bert_tokenizer *t);

// Growable id array.
typedef struct {
    int32_t *v;
    size_t n, cap;
} bert_ids;
int bert_ids_push(bert_ids *a, int32_t id);
void bert_ids_free(bert_ids *a);

// Per-thread scratch space for tokenizing; zero-initialize, free with bert_tok_ws_free.
typedef struct {
    uint32_t *cp, *tmp;
    char *utf8;
    size_t cap;
} bert_tok_ws;
void bert_tok_ws_free(bert_tok_ws *ws);

// Tokenizes one line (no '\n') and appends the ids to out. TK_EDATA with e->what "invalid UTF-8 at
// byte N" on bad input (the caller names the file and line); TK_EIO when out of memory.
int bert_tokenize(const bert_tokenizer *t, bert_tok_ws *ws, const char *line, size_t len, bert_ids *out,
                  tk_err *e);
// The basic tokenizer alone: calls fn for each word (UTF-8, nchars code points) in order.
typedef int (*bert_word_fn)(void *ctx, const char *word, size_t len, size_t nchars, tk_err *e);
int bert_basic_tokenize(const bert_tokenizer *t, bert_tok_ws *ws, const char *line, size_t len,
                        bert_word_fn fn, void *ctx, tk_err *e);
// WordPiece of one basic word: appends its ids (or [UNK]) to out.
int bert_wordpiece(const bert_tokenizer *t, const char *word, size_t len, size_t nchars, bert_ids *out,
                   tk_err *e);

// A line is blank (an article boundary) when Python's str.strip() leaves nothing: every
// character is whitespace by str.isspace(). Invalid UTF-8 is not blank.
int bert_line_is_blank(const char *line, size_t len);

#endif
