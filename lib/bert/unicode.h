// The Unicode the BERT reference tokenizer uses, as C: UTF-8 decoding, the character classes of
// its tokenization.py, Python's str.lower() (final sigma included) and canonical decomposition
// (NFD). The tables (unicode_tables.c) are generated from Python's unicodedata by
// gen_unicode_tables.py, because the reference is Python and Python defines its behaviour.
#ifndef TK_BERT_UNICODE_H
#define TK_BERT_UNICODE_H

#include <stddef.h>
#include <stdint.h>

// Character classes (bert_uclass); several may hold at once.
enum {
    BU_WS = 1,        // _is_whitespace: space, \t, \n, \r, category Zs (becomes a space)
    BU_CTRL = 2,      // _is_control: categories Cc, Cf except \t \n \r (removed)
    BU_PUNCT = 4,     // _is_punctuation: ASCII non-alphanumerics and categories P* (split off)
    BU_MN = 8,        // category Mn, nonspacing marks (removed by accent stripping)
    BU_PYSPACE = 16,  // str.isspace(): what str.split() splits words on
    BU_CASED = 32,    // cased and not case-ignorable (final sigma rule of str.lower())
    BU_CASEIGN = 64,  // case-ignorable (skipped by the final sigma rule)
    BU_CJK = 128,     // the CJK blocks of _is_chinese_char (surrounded by spaces)
};

extern const char bert_unicode_version[]; // the Unicode version of the tables ("14.0.0")

// Builds the lookup tables (once; thread-safe): 0, or -1 when out of memory (the functions below
// then see every character as unassigned). bert_tokenizer_new calls it and reports the failure.
int bert_unicode_init(void);
unsigned bert_uclass(uint32_t cp);        // BU_* flags; 0 for unassigned code points
unsigned bert_ccc(uint32_t cp);           // canonical combining class
// str.lower() of one character without context: writes 1 to 3 code points, returns the count.
// U+03A3 gives U+03C3 here; bert_lower_word applies the final-sigma rule.
int bert_lower_char(uint32_t cp, uint32_t out[3]);
// Full canonical decomposition of one character (1 to 4 code points, Hangul syllables 2 or 3).
int bert_nfd_char(uint32_t cp, uint32_t out[4]);

// str.lower() of a whole word: in[0..n) -> out (room for 3n), returns the output length.
size_t bert_lower_word(const uint32_t *in, size_t n, uint32_t *out);
// unicodedata.normalize("NFD", s) without the characters of category Mn, the reference's
// _run_strip_accents: in[0..n) -> out (room for 4n), returns the output length.
size_t bert_strip_accents(const uint32_t *in, size_t n, uint32_t *out);

// Decodes UTF-8 s[0..n) into out (room for n code points). Returns the number of code points, or
// -1 with *bad = the byte offset of the first invalid sequence (overlong forms, surrogates and
// values past U+10FFFF are invalid, as in Python's strict decoder).
long bert_utf8_decode(const char *s, size_t n, uint32_t *out, size_t *bad);
// Encodes one code point (valid, not a surrogate) into out (room for 4), returns its length.
int bert_utf8_put(uint32_t cp, char *out);

#endif
