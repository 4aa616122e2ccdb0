// The distributed optimizer's cases (tests/unit/test_optim_dist.c, tests/gpu/test_optim_dist.c):
// ranks as threads of one process, their partial norm sums exchanged through shared memory and a
// barrier (kernels/optim.h tk_optim_gather_fn), and the engine's share layout (buckets of
// `bucket` floats cut into world equal shares, engine/optimizer.h) rebuilt float by float from an
// ownership rule rather than with the engine's code.
#ifndef TK_TEST_OPTIM_DIST_CASE_H
#define TK_TEST_OPTIM_DIST_CASE_H

#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "optim.h"

#define MAXW 4

typedef struct {
    int world;
    pthread_barrier_t bar;
    double slot[MAXW][256]; // each rank's partial sums
} exch;

typedef struct {
    exch *x;
    int rank;
} rank_arg;

static inline int host_gather(void *arg, const double *mine, double *all, size_t count, tk_err *e) {
    rank_arg *a = arg;
    if (count > 256) return tk_err_set(e, TK_EINTERNAL, "test gather: %zu sums", count);
    memcpy(a->x->slot[a->rank], mine, count * sizeof *mine);
    pthread_barrier_wait(&a->x->bar);
    for (int r = 0; r < a->x->world; r++) memcpy(all + (size_t)r * count, a->x->slot[r], count * sizeof *all);
    pthread_barrier_wait(&a->x->bar); // (nobody writes a slot again before all have read)
    return 0;
}

// Float i's owner: buckets of `bucket` floats (the last one shorter) cut into world equal shares.
static inline int owner(size_t i, size_t n, size_t bucket, int world) {
    size_t lo = i / bucket * bucket, len = (lo + bucket < n ? lo + bucket : n) - lo;
    return (int)((i - lo) / (len / (size_t)world));
}

// The rank's pieces of the tensors seg[0 .. nseg): maximal runs of owned floats inside a tensor.
static inline int pieces(const tk_opt_seg *seg, int nseg, size_t n, size_t bucket, int world, int rank, tk_opt_seg *out) {
    int k = 0;
    for (int s = 0; s < nseg; s++)
        for (int64_t i = seg[s].off; i < seg[s].off + seg[s].n; i++) {
            if (owner((size_t)i, n, bucket, world) != rank) continue;
            if (k > 0 && out[k - 1].slot == s && out[k - 1].off + out[k - 1].n == i) out[k - 1].n++;
            else out[k++] = (tk_opt_seg){i, 1, seg[s].flags, s};
        }
    return k;
}

// fn on jobs[0 .. world) (each `size` bytes), one thread a rank; returns once all are done.
static inline void run_threads(int world, void *(*fn)(void *), void *jobs, size_t size) {
    pthread_t th[MAXW];
    for (int r = 0; r < world; r++) pthread_create(&th[r], NULL, fn, (char *)jobs + (size_t)r * size);
    for (int r = 0; r < world; r++) pthread_join(th[r], NULL);
}

// The engine's all-gather: each rank's owned floats of w, the state (sf x n) and the copy into
// every rank's arrays.
static inline void share_out(float *const *w, float *const *st, uint16_t *const *cp, size_t sf, size_t n,
                             size_t bucket, int world) {
    for (size_t i = 0; i < n; i++) {
        int o = owner(i, n, bucket, world);
        for (int r = 0; r < world; r++) {
            w[r][i] = w[o][i], cp[r][i] = cp[o][i];
            for (size_t k = 0; k < sf; k++) st[r][k * n + i] = st[o][k * n + i];
        }
    }
}

#endif
