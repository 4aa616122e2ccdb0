// What the unit tests of ops and workloads on the cpu backend share: one cpu context per test
// binary (made on first use; a failure prints why and aborts) and Philox-uniform inputs in
// [lo, hi) (key: the test file's own, stream: the tensor's, so every tensor draws its own values).
#ifndef TK_TEST_CPU_H
#define TK_TEST_CPU_H

#include <stdio.h>
#include <stdlib.h>

#include "core/philox.h"
#include "gpu/gpu.h"

static inline tk_ctx *tk_test_cpu(void) {
    static tk_ctx *c;
    tk_err e = {0};
    if (!c && tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e)) {
        fprintf(stderr, "cpu context: %s\n", e.what);
        abort();
    }
    return c;
}

static inline void tk_test_fill(float *x, size_t n, uint64_t key, uint32_t stream, float lo, float hi) {
    for (size_t i = 0; i < n; i++) x[i] = lo + (hi - lo) * tk_philox_uniform(key, stream, i);
}

#endif
