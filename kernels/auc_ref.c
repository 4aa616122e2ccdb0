// CPU reference of kernels/auc.h: sort by score, walk groups of equal scores.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "auc.h"

// Sort key: the score's bits mapped to an unsigned integer that orders like the float
// (-0 and +0 are made equal), label in the lowest bit so each sample is one u64.
static inline uint64_t score_key(float s, uint8_t label) {
    if (s == 0) s = 0; // -0 -> +0: equal scores must tie
    uint32_t u;
    memcpy(&u, &s, 4);
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (uint64_t)u << 1 | (label ? 1u : 0u);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int tk_auc_ref(const float *score, const uint8_t *label, int64_t n, void *ws, double *auc,
               tk_err *e) {
    uint64_t *k = ws;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(score[i]))
            return tk_err_set(e, TK_ENUMERIC, "auc: score %lld is NaN", (long long)i);
        k[i] = score_key(score[i], label[i]);
    }
    qsort(k, (size_t)n, sizeof *k, cmp_u64);
    // Ascending scores: each positive beats every negative seen in earlier groups, and ties
    // half of the negatives in its own group.
    double neg_below = 0, num = 0, pos = 0;
    for (int64_t i = 0; i < n;) {
        uint64_t s = k[i] >> 1;
        double gp = 0, gn = 0;
        for (; i < n && (k[i] >> 1) == s; i++) (k[i] & 1) ? gp++ : gn++;
        num += gp * (neg_below + 0.5 * gn);
        neg_below += gn;
        pos += gp;
    }
    *auc = (pos == 0 || neg_below == 0) ? NAN : num / (pos * neg_below);
    return 0;
}
