// The random draws of create_pretraining_data.py, from one of two sources of 32-bit words:
//   - BERT_RNG_MT: CPython's random.Random(seed) (MT19937 seeded by init_by_array with the 32-bit
//     words of the seed), so the same --seed gives the reference's very examples;
//   - BERT_RNG_PHILOX: trainkit's counter-based Philox (lib/core/philox.h), key = seed, one stream
//     per input file, so a file's examples depend on the seed and its name only.
// On top of either, the draws are CPython's: random() takes 53 bits from two words, randbelow(n)
// takes the top bit_length(n) bits of a word and rejects values >= n (_randbelow_with_getrandbits).
#ifndef TK_BERT_RNG_H
#define TK_BERT_RNG_H

#include <stdint.h>

enum { BERT_RNG_PHILOX = 0, BERT_RNG_MT = 1 };

typedef struct {
    int kind;
    uint32_t mt[624];
    int mti;
    uint64_t seed, ctr;     // Philox: key and the counter of the next block
    uint32_t tag;           // Philox: the stream (a hash of the file name)
    uint32_t buf[4];
    int nbuf;
} bert_rng;

void bert_rng_init(bert_rng *r, int kind, uint64_t seed, uint32_t tag);
uint32_t bert_rng_u32(bert_rng *r);
double bert_rng_random(bert_rng *r);                 // [0, 1), random.random()
uint32_t bert_rng_below(bert_rng *r, uint32_t n);    // [0, n) for n >= 1, random._randbelow(n)
// random.shuffle(x) of n elements of size sz.
void bert_rng_shuffle(bert_rng *r, void *x, uint32_t n, size_t sz);
// FNV-1a of a string: the Philox stream of a file, from its base name.
uint32_t bert_rng_tag(const char *name);

#endif
