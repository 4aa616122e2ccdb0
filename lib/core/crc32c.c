// CRC-32C, hardware (SSE4.2 crc32 instruction, three interleaved streams combined with a shift
// table) or an 8-way slicing table. Both compute the same function (tests/unit/test_core.c).
#include "core/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t T8[8][256];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static int have_sse42;

static void init_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        T8[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) T8[t][i] = (T8[t - 1][i] >> 8) ^ T8[0][T8[t - 1][i] & 0xff];
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_table(uint32_t c, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) c = (c >> 8) ^ T8[0][(c ^ *p++) & 0xff], n--;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        v ^= c;
        c = T8[7][v & 0xff] ^ T8[6][(v >> 8) & 0xff] ^ T8[5][(v >> 16) & 0xff] ^ T8[4][(v >> 24) & 0xff] ^
            T8[3][(v >> 32) & 0xff] ^ T8[2][(v >> 40) & 0xff] ^ T8[1][(v >> 48) & 0xff] ^ T8[0][v >> 56];
    }
    while (n--) c = (c >> 8) ^ T8[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__)
// The crc32 instruction has a latency of 3 cycles and a throughput of 1: three independent
// streams over thirds of a block keep it busy; the partial CRCs are then combined by
// multiplying with x^(8*len) mod P (the zero-extension operator, precomputed for the block size).
#define BLOCK 8192 // bytes a stream, per round

__attribute__((target("sse4.2"))) static uint32_t crc_u64(uint32_t c, uint64_t v) {
    return (uint32_t)__builtin_ia32_crc32di(c, v);
}

// Multiply a (a polynomial of degree < 32, reflected) by b modulo P.
static uint32_t gf_mul(uint32_t a, uint32_t b) {
    uint32_t r = 0;
    for (int i = 0; i < 32; i++) {
        if (b & 0x80000000u) r ^= a;
        b <<= 1;
        a = a & 1 ? (a >> 1) ^ POLY : a >> 1;
    }
    return r;
}

// x^(8n) mod P, reflected: the factor that appends n zero bytes to a CRC register.
static uint32_t zeros_factor(size_t n) {
    uint32_t r = 0x80000000u, sq = 0x00800000u; // x^0 and x^8, reflected
    for (size_t k = n; k; k >>= 1) {
        if (k & 1) r = gf_mul(r, sq);
        sq = gf_mul(sq, sq);
    }
    return r;
}

static uint32_t shift_block;
static pthread_once_t once_hw = PTHREAD_ONCE_INIT;
static void init_hw(void) { shift_block = zeros_factor(BLOCK); }

__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t c, const unsigned char *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) c = (uint32_t)__builtin_ia32_crc32qi(c, *p++), n--;
    pthread_once(&once_hw, init_hw);
    while (n >= 3 * BLOCK) {
        uint32_t c1 = 0, c2 = 0;
        const unsigned char *q = p;
        for (size_t i = 0; i < BLOCK; i += 8) {
            uint64_t a, b, d;
            memcpy(&a, q + i, 8);
            memcpy(&b, q + BLOCK + i, 8);
            memcpy(&d, q + 2 * BLOCK + i, 8);
            c = crc_u64(c, a);
            c1 = crc_u64(c1, b);
            c2 = crc_u64(c2, d);
        }
        // crc(A||B||C) = shift(shift(cA) ^ cB) ^ cC with the raw (non-inverted) registers: the
        // streams after the first start from 0, which is what the zero-extension identity needs.
        c = gf_mul(c, shift_block) ^ c1;
        c = gf_mul(c, shift_block) ^ c2;
        p += 3 * BLOCK;
        n -= 3 * BLOCK;
    }
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = crc_u64(c, v);
    }
    while (n--) c = (uint32_t)__builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t tk_crc32c(uint32_t crc, const void *p, size_t n) {
    pthread_once(&once, init_tables);
    uint32_t c = ~crc;
#if defined(__x86_64__)
    if (have_sse42) return ~crc_hw(c, p, n);
#endif
    return ~crc_table(c, p, n);
}
