// MT19937 as CPython seeds and draws it (Modules/_randommodule.c), Philox as trainkit draws it,
// and the Python-level draws the reference script makes (Lib/random.py).
#include <string.h>

#include "bert/rng.h"
#include "core/philox.h"

// The Philox stream id of BERT data preparation (beside lib/core/philox.h's TK_RNG_*).
#define BERT_RNG_STREAM 0x42455254u /* "BERT" */

static void mt_init_genrand(bert_rng *r, uint32_t s) {
    r->mt[0] = s;
    for (int i = 1; i < 624; i++) r->mt[i] = 1812433253u * (r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) + (uint32_t)i;
    r->mti = 624;
}

// init_by_array with the key CPython makes of a non-negative integer seed: its 32-bit words,
// least significant first (one word, 0, for seed 0).
static void mt_seed(bert_rng *r, uint64_t seed) {
    uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    int klen = seed >> 32 ? 2 : 1;
    mt_init_genrand(r, 19650218u);
    int i = 1, j = 0;
    for (int k = 624 > klen ? 624 : klen; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1664525u)) + key[j] + (uint32_t)j;
        i++;
        j++;
        if (i >= 624) {
            r->mt[0] = r->mt[623];
            i = 1;
        }
        if (j >= klen) j = 0;
    }
    for (int k = 623; k; k--) {
        r->mt[i] = (r->mt[i] ^ ((r->mt[i - 1] ^ (r->mt[i - 1] >> 30)) * 1566083941u)) - (uint32_t)i;
        i++;
        if (i >= 624) {
            r->mt[0] = r->mt[623];
            i = 1;
        }
    }
    r->mt[0] = 0x80000000u;
}

static uint32_t mt_next(bert_rng *r) {
    if (r->mti >= 624) {
        for (int k = 0; k < 624; k++) {
            uint32_t y = (r->mt[k] & 0x80000000u) | (r->mt[(k + 1) % 624] & 0x7fffffffu);
            r->mt[k] = r->mt[(k + 397) % 624] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
        }
        r->mti = 0;
    }
    uint32_t y = r->mt[r->mti++];
    y ^= y >> 11;
    y ^= (y << 7) & 0x9d2c5680u;
    y ^= (y << 15) & 0xefc60000u;
    y ^= y >> 18;
    return y;
}

void bert_rng_init(bert_rng *r, int kind, uint64_t seed, uint32_t tag) {
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->seed = seed;
    r->tag = tag;
    if (kind == BERT_RNG_MT) mt_seed(r, seed);
}

uint32_t bert_rng_u32(bert_rng *r) {
    if (r->kind == BERT_RNG_MT) return mt_next(r);
    if (r->nbuf == 0) {
        tk_philox_ctr c = {{(uint32_t)r->ctr, (uint32_t)(r->ctr >> 32), BERT_RNG_STREAM, r->tag}};
        tk_philox_key k = {{(uint32_t)r->seed, (uint32_t)(r->seed >> 32)}};
        tk_philox_ctr o = tk_philox4x32(c, k);
        memcpy(r->buf, o.v, sizeof r->buf);
        r->nbuf = 4;
        r->ctr++;
    }
    return r->buf[4 - r->nbuf--];
}

double bert_rng_random(bert_rng *r) {
    uint32_t a = bert_rng_u32(r) >> 5, b = bert_rng_u32(r) >> 6;
    return ((double)a * 67108864.0 + (double)b) * (1.0 / 9007199254740992.0);
}

uint32_t bert_rng_below(bert_rng *r, uint32_t n) {
    int k = 32 - __builtin_clz(n); // n.bit_length()
    for (;;) {
        uint32_t v = bert_rng_u32(r) >> (32 - k);
        if (v < n) return v;
    }
}

void bert_rng_shuffle(bert_rng *r, void *x, uint32_t n, size_t sz) {
    unsigned char *p = x, tmp[64];
    for (uint32_t i = n ? n - 1 : 0; i >= 1; i--) {
        uint32_t j = bert_rng_below(r, i + 1);
        if (j == i) continue;
        for (size_t o = 0; o < sz; o += sizeof tmp) { // swap in chunks: sz may exceed tmp
            size_t m = sz - o < sizeof tmp ? sz - o : sizeof tmp;
            memcpy(tmp, p + (size_t)i * sz + o, m);
            memcpy(p + (size_t)i * sz + o, p + (size_t)j * sz + o, m);
            memcpy(p + (size_t)j * sz + o, tmp, m);
        }
    }
}

uint32_t bert_rng_tag(const char *name) {
    uint32_t h = 2166136261u;
    for (const unsigned char *s = (const unsigned char *)name; *s; s++) h = (h ^ *s) * 16777619u;
    return h;
}
