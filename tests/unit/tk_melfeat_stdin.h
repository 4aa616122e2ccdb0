// The input of the log-mel oracle drivers (contrib/peers/rnnt_features.py check runs
// test_melfeat or test_rnnt_data with TK_MELFEAT_DRIVE set): stdin "B" (1..64), then per
// utterance "L" (1..1000000) and L samples; read into packed audio *a (malloc'd) with off (B + 1)
// sample offsets. Errors name the utterance and sample (TK_EDATA).
#ifndef TK_MELFEAT_STDIN_H
#define TK_MELFEAT_STDIN_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/err.h"

static inline int tk_melfeat_read_stdin(int *B, int64_t off[65], float **a, tk_err *e) {
    *a = NULL;
    if (scanf("%d", B) != 1 || *B < 1 || *B > 64) return tk_err_set(e, TK_EDATA, "stdin: no utterance count (1..64)");
    off[0] = 0;
    for (int b = 0; b < *B; b++) {
        long long L;
        if (scanf("%lld", &L) != 1 || L < 1 || L > 1000000)
            return tk_err_set(e, TK_EDATA, "stdin: utterance %d: no length (1..1000000)", b);
        off[b + 1] = off[b] + L;
        float *na = realloc(*a, (size_t)off[b + 1] * sizeof **a);
        if (!na) return tk_err_errno(e, ENOMEM, "out of memory");
        *a = na;
        for (int64_t i = off[b]; i < off[b + 1]; i++)
            if (scanf("%f", &(*a)[i]) != 1)
                return tk_err_set(e, TK_EDATA, "stdin: utterance %d: sample %lld of %lld missing", b,
                                  (long long)(i - off[b]), L);
    }
    return 0;
}

#endif
