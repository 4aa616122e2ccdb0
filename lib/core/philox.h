// Philox4x32-10 (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC'11): a
// counter-based generator, so any element of any stream can be drawn independently, in the same
// way on the CPU and in a CUDA kernel. CPU and GPU runs therefore draw the same dropout masks, the
// same initial weights and the same data order from one --seed.
// Header-only; compiles as C11 and as CUDA C++.
#ifndef TK_CORE_PHILOX_H
#define TK_CORE_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifdef __CUDACC__
#define TK_HD __host__ __device__ __forceinline__
#else
#define TK_HD static inline
#endif

typedef struct { uint32_t v[4]; } tk_philox_ctr;
typedef struct { uint32_t v[2]; } tk_philox_key;

TK_HD uint32_t tk_mulhilo32(uint32_t a, uint32_t b, uint32_t *hi) {
    uint64_t p = (uint64_t)a * (uint64_t)b;
    *hi = (uint32_t)(p >> 32);
    return (uint32_t)p;
}

// Ten rounds of Philox4x32 on counter c with key k.
TK_HD tk_philox_ctr tk_philox4x32(tk_philox_ctr c, tk_philox_key k) {
    for (int r = 0; r < 10; r++) {
        uint32_t hi0, hi1;
        uint32_t lo0 = tk_mulhilo32(0xD2511F53u, c.v[0], &hi0);
        uint32_t lo1 = tk_mulhilo32(0xCD9E8D57u, c.v[2], &hi1);
        tk_philox_ctr n;
        n.v[0] = hi1 ^ c.v[1] ^ k.v[0];
        n.v[1] = lo1;
        n.v[2] = hi0 ^ c.v[3] ^ k.v[1];
        n.v[3] = lo0;
        c = n;
        k.v[0] += 0x9E3779B9u;
        k.v[1] += 0xBB67AE85u;
    }
    return c;
}

// Four 32-bit words for (seed, stream, index): the convention used everywhere in trainkit.
// seed is the run's --seed, stream names the purpose (TK_RNG_* below), index the element/4.
TK_HD tk_philox_ctr tk_philox_draw(uint64_t seed, uint32_t stream, uint64_t index) {
    tk_philox_ctr c;
    c.v[0] = (uint32_t)index;
    c.v[1] = (uint32_t)(index >> 32);
    c.v[2] = stream;
    c.v[3] = 0;
    tk_philox_key k;
    k.v[0] = (uint32_t)seed;
    k.v[1] = (uint32_t)(seed >> 32);
    return tk_philox4x32(c, k);
}

// A 32-bit word to a float in [0, 1) with 24 random bits (exact in fp32).
TK_HD float tk_u32_to_unit(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }
// Two words to a double in [0, 1) with 53 random bits.
TK_HD double tk_u64_to_unit(uint32_t hi, uint32_t lo) {
    return (double)((((uint64_t)hi << 32) | lo) >> 11) * (1.0 / 9007199254740992.0);
}
// The i-th uniform float of a stream: word i%4 of block i/4.
TK_HD float tk_philox_uniform(uint64_t seed, uint32_t stream, uint64_t i) {
    tk_philox_ctr r = tk_philox_draw(seed, stream, i >> 2);
    return tk_u32_to_unit(r.v[i & 3]);
}

// The i-th standard normal of a stream (Box-Muller on the two words of pair i/2; u1 in (0, 1], so
// the log is finite): weight initialization.
TK_HD double tk_philox_normal(uint64_t seed, uint32_t stream, uint64_t i) {
    tk_philox_ctr r = tk_philox_draw(seed, stream, i >> 1);
    int h = (int)(i & 1) * 2;
    double u1 = 1.0 - tk_u32_to_unit(r.v[h]), u2 = tk_u32_to_unit(r.v[h + 1]);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

// Stream ids, so that different purposes never share random numbers.
enum {
    TK_RNG_INIT = 1,      // weight initialization (stream + tensor index)
    TK_RNG_SHUFFLE = 2,   // data order
    TK_RNG_DROPOUT = 3,
    TK_RNG_SYNTH = 4,     // synthetic data generation
    TK_RNG_AUGMENT = 5,   // data augmentation (image crops, flips): counter (sample, epoch)
};

#undef TK_HD
#endif
