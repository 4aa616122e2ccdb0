// Inside of bert_vocab, shared by vocab.c and tokenizer.c (the greedy matcher's hot path).
#ifndef TK_BERT_VOCAB_INT_H
#define TK_BERT_VOCAB_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct {
    int32_t *slot; // token id or -1; open addressing, linear probing
    size_t mask;   // capacity - 1 (a power of two)
} bert_vtable;

struct bert_vocab {
    char name[256];        // the file, for messages
    char *pool;            // the tokens, each NUL-terminated, at their offsets in the file
    size_t *off;
    uint32_t *len;
    int32_t n;
    bert_vtable init;      // word-initial pieces, keyed by their text
    bert_vtable cont;      // "##x" pieces, keyed by x
    size_t max_init_chars, max_cont_chars; // the longest key of each table, in code points
};

// A 64-bit multiply-xorshift hash over 8-byte words.
static inline uint64_t bert_hash(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

// 2 when token id is a continuation ("##" and at least one more byte), else 0.
static inline size_t bert_vkey_skip(const struct bert_vocab *v, int32_t id) {
    const char *t = v->pool + v->off[id];
    return v->len[id] > 2 && t[0] == '#' && t[1] == '#' ? 2 : 0;
}

static inline int32_t bert_vlookup(const struct bert_vocab *v, const bert_vtable *t, const char *key,
                                   size_t len) {
    size_t k = (size_t)bert_hash(key, len) & t->mask;
    for (;; k = (k + 1) & t->mask) {
        int32_t s = t->slot[k];
        if (s < 0) return -1;
        size_t skip = bert_vkey_skip(v, s);
        if (v->len[s] - skip == len && memcmp(v->pool + v->off[s] + skip, key, len) == 0) return s;
    }
}

#endif
