// Bounded waits and host-value agreement over the ranks (dist.h).
#include "engine/dist.h"

#include <stdlib.h>
#include <string.h>

int tk_dist_init(tk_dist *d, tk_ctx *c, tk_comm *comm, double timeout_s, tk_err *e) {
    memset(d, 0, sizeof *d);
    d->c = c;
    d->comm = comm;
    d->timeout = timeout_s > 0 ? timeout_s : 300;
    d->world = comm ? tk_comm_world(comm) : 1;
    d->rank = comm ? tk_comm_rank(comm) : 0;
    if (d->world > TK_MAX_WORLD) return tk_err_set(e, TK_EUSAGE, "world size %d > %d", d->world, TK_MAX_WORLD);
    TRY(tk_malloc(c, (void **)&d->scratch, (size_t)(2 + 2 * d->world) * 8, e));
    return tk_memset0(c, d->scratch, (size_t)(2 + 2 * d->world) * 8, TK_STREAM_COMPUTE, e);
}

void tk_dist_release(tk_dist *d) {
    if (d->c && d->scratch) tk_free(d->c, d->scratch);
    d->scratch = NULL;
}

int tk_dist_sync(tk_dist *d, tk_err *e) {
    if (d->comm) TRY(tk_comm_wait(d->comm, TK_STREAM_COMPUTE, d->timeout, e));
    return tk_ctx_sync(d->c, e);
}

int tk_dist_sync_lagged(tk_dist *d, tk_err *e) {
    return d->comm ? tk_comm_wait_lagged(d->comm, TK_STREAM_COMPUTE, d->timeout, e) : 0;
}

int tk_dist_gather_i64(tk_dist *d, int64_t mine, int64_t *all, double timeout_s, tk_err *e) {
    if (!d->comm || d->world == 1) {
        all[0] = mine;
        return 0;
    }
    const int CS = TK_STREAM_COMPUTE;
    TRY(tk_memcpy_h2d(d->c, d->scratch, &mine, 8, CS, e));
    TRY(tk_all_gather(d->comm, d->scratch, d->scratch + 2, 8, TK_U8, CS, e));
    TRY(tk_comm_wait(d->comm, CS, timeout_s > 0 ? timeout_s : d->timeout, e));
    TRY(tk_memcpy_d2h(d->c, all, d->scratch + 2, (size_t)d->world * 8, CS, e));
    return tk_ctx_sync(d->c, e);
}

int tk_dist_gather16(tk_dist *d, const void *src, void *all, tk_err *e) {
    if (!d->comm || d->world == 1) {
        TRY(tk_memcpy_d2h(d->c, all, src, 16, TK_STREAM_COMPUTE, e));
        return tk_ctx_sync(d->c, e);
    }
    // Gathered as bytes on the comm stream (no fp64 sums in the collectives: the caller adds the
    // ranks' values in rank order, so every rank computes the same total).
    TRY(tk_comm_stream_wait(d->comm, TK_STREAM_COMM, TK_STREAM_COMPUTE, e));
    TRY(tk_all_gather(d->comm, src, d->scratch + 2, 16, TK_U8, TK_STREAM_COMM, e));
    TRY(tk_comm_stream_wait(d->comm, TK_STREAM_COMPUTE, TK_STREAM_COMM, e));
    TRY(tk_dist_sync(d, e));
    TRY(tk_memcpy_d2h(d->c, all, d->scratch + 2, (size_t)d->world * 16, TK_STREAM_COMPUTE, e));
    return tk_ctx_sync(d->c, e);
}

int tk_dist_gatherv(tk_dist *d, int root, const void *mine, size_t n, void **all, int64_t *sizes, tk_err *e) {
    const int W = d->world, CS = TK_STREAM_COMPUTE;
    *all = NULL;
    if (root < 0 || root >= W) return tk_err_set(e, TK_EINTERNAL, "gatherv: root %d of %d ranks", root, W);
    TRY(tk_dist_gather_i64(d, (int64_t)n, sizes, 0, e));
    size_t total = 0;
    for (int r = 0; r < W; r++) total += (size_t)sizes[r];
    const int me = d->rank == root;
    if (me && total && !(*all = malloc(total))) return tk_err_set(e, TK_EIO, "out of host memory for %zu bytes", total);
    if (W == 1 || !d->comm) {
        if (n) memcpy(*all, mine, n);
        return 0;
    }
    if (!total) return 0; // nothing to move (every rank knows it from the sizes)
    size_t sc[TK_MAX_WORLD] = {0}, rc[TK_MAX_WORLD] = {0};
    sc[root] = n;
    for (int r = 0; me && r < W; r++) rc[r] = (size_t)sizes[r];
    char *dev = NULL; // the send bytes, then (root) the received ones
    const size_t send = (n + 255) & ~(size_t)255;
    int err = tk_malloc(d->c, (void **)&dev, send + (me ? total : 0) + 1, e);
    if (!err && n) err = tk_memcpy_h2d(d->c, dev, mine, n, CS, e);
    if (!err) err = tk_all_to_allv(d->comm, dev, sc, dev + send, rc, TK_U8, CS, e);
    if (!err) err = tk_dist_sync(d, e);
    if (!err && me) err = tk_memcpy_d2h(d->c, *all, dev + send, total, CS, e);
    if (!err) err = tk_ctx_sync(d->c, e);
    if (dev) tk_free(d->c, dev);
    if (err) free(*all), *all = NULL;
    return err;
}

int tk_per_rank_batch(const char *workload, int64_t global, int world, int64_t *per_rank, tk_err *e) {
    *per_rank = 0;
    if (world < 1 || global % world != 0) {
        tk_err_set(e, TK_EUSAGE, "%s: the global batch (%lld) must be a multiple of the world size (%d)", workload,
                   (long long)global, world);
        if (world >= 1) tk_err_hint(e, "set train.global_batch_size to a multiple of %d", world);
        return TK_EUSAGE;
    }
    *per_rank = global / world;
    return 0;
}
