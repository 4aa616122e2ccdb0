// The bucketing sampler (sampler.h).
#include "speech/sampler.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "core/philox.h"

enum { PURPOSE_BUCKET = 0, PURPOSE_BATCHES = 1 };

// A uniform integer in [0, k) from draw i of (purpose, bucket) of the epoch.
static int64_t draw(uint64_t seed, uint32_t epoch, uint32_t purpose, uint32_t bucket, int64_t i, int64_t k) {
    tk_philox_ctr c = {{(uint32_t)(i >> 2), purpose, (uint32_t)TK_RNG_SHUFFLE | bucket << 8, epoch}};
    tk_philox_key key = {{(uint32_t)seed, (uint32_t)(seed >> 32)}};
    uint32_t w = tk_philox4x32(c, key).v[i & 3];
    return (int64_t)(((uint64_t)w * (uint64_t)k) >> 32);
}

// Fisher-Yates on a (k items), draws of (purpose, bucket).
static void permute(int64_t *a, int64_t k, uint64_t seed, uint32_t epoch, uint32_t purpose, uint32_t bucket) {
    for (int64_t i = k - 1; i > 0; i--) {
        int64_t j = draw(seed, epoch, purpose, bucket, i, i + 1), t = a[i];
        a[i] = a[j], a[j] = t;
    }
}

typedef struct {
    double d;
    int64_t i;
} keyed;
static int by_duration(const void *pa, const void *pb) {
    const keyed *a = pa, *b = pb;
    if (a->d != b->d) return a->d < b->d ? -1 : 1;
    return a->i < b->i ? -1 : a->i > b->i;
}

int tk_speech_bucket_epoch(const double *dur, int64_t n, int nbuckets, int64_t gbs, uint64_t seed, uint32_t epoch,
                           int64_t *order, int64_t *count, tk_err *e) {
    if (n < 1 || nbuckets < 1 || nbuckets > n || gbs < 1 || nbuckets > 0xffffff)
        return tk_err_set(e, TK_EINTERNAL, "bucketing sampler: %lld utterances, %d buckets, batch %lld", (long long)n,
                          nbuckets, (long long)gbs);
    for (int64_t i = 0; i < n; i++)
        if (isnan(dur[i])) return tk_err_set(e, TK_EINTERNAL, "bucketing sampler: duration %lld is NaN", (long long)i);
    keyed *k = malloc((size_t)n * sizeof *k);
    if (!k) return tk_err_errno(e, ENOMEM, "bucketing sampler: out of memory");
    for (int64_t i = 0; i < n; i++) k[i] = (keyed){dur[i], i};
    qsort(k, (size_t)n, sizeof *k, by_duration);
    for (int64_t i = 0; i < n; i++) order[i] = k[i].i;
    free(k);
    int64_t start = 0;
    for (int b = 0; b < nbuckets; b++) {
        const int64_t len = n / nbuckets + (b < n % nbuckets);
        permute(order + start, len, seed, epoch, PURPOSE_BUCKET, (uint32_t)b);
        start += len;
    }
    const int64_t nb = n / gbs;
    *count = nb * gbs;
    if (nb > 1) { // shuffle whole batches: permute batch indices, then move the batches
        int64_t *perm = malloc((size_t)nb * sizeof *perm), *tmp = malloc((size_t)*count * sizeof *tmp);
        if (!perm || !tmp) {
            free(perm), free(tmp);
            return tk_err_errno(e, ENOMEM, "bucketing sampler: out of memory");
        }
        for (int64_t i = 0; i < nb; i++) perm[i] = i;
        permute(perm, nb, seed, epoch, PURPOSE_BATCHES, 0);
        for (int64_t i = 0; i < nb; i++)
            for (int64_t j = 0; j < gbs; j++) tmp[i * gbs + j] = order[perm[i] * gbs + j];
        for (int64_t i = 0; i < *count; i++) order[i] = tmp[i];
        free(perm), free(tmp);
    }
    return 0;
}
