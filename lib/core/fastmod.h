// a mod d for 32-bit a and d >= 1 by multiplication instead of division (Lemire, Kaser and Kurz,
// "Faster remainder by direct computation", 2019): m = ceil(2^64 / d) (0 for d = 1, which the
// product then maps to 0, as it should); exact for every 32-bit a. Loaders fold ids into tables
// with it: a division per id is the slowest step of decoding a batch.
#ifndef TK_CORE_FASTMOD_H
#define TK_CORE_FASTMOD_H
#include <stdint.h>

static inline uint64_t tk_fastmod_m(uint32_t d) { return UINT64_MAX / d + 1; }
static inline uint32_t tk_fastmod(uint32_t a, uint64_t m, uint32_t d) {
    return (uint32_t)(((unsigned __int128)(m * a) * d) >> 64);
}
#endif
