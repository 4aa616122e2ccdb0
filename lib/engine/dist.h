// The several-ranks plumbing every workload and the engine share: bounded host waits that notice
// a dead or hung peer, and how the ranks agree on a host-side value (a write's outcome, rank 0's
// reading of an evaluation result). One rank (comm NULL) is the same code with trivial
// collectives. lib/gpu/comm.h has the collectives themselves.
#ifndef TK_ENGINE_DIST_H
#define TK_ENGINE_DIST_H

#include <stdint.h>

#include "core/err.h"
#include "gpu/comm.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TK_MAX_WORLD 1024

typedef struct tk_dist {
    tk_ctx *c;
    tk_comm *comm;      // NULL: one rank, no collectives
    double timeout;     // seconds: bound of every host wait for the peers
    int rank, world;
    int64_t *scratch;   // device: (2 + 2 * world) words for the gathers below
} tk_dist;

int tk_dist_init(tk_dist *d, tk_ctx *c, tk_comm *comm, double timeout_s, tk_err *e);
void tk_dist_release(tk_dist *d);
// The host waits until the work queued so far is done, at most d->timeout for the peers: a dead or
// hung peer gives TK_EDEVICE instead of a hang. One rank: tk_ctx_sync.
int tk_dist_sync(tk_dist *d, tk_err *e);
// The same one call behind (tk_comm_wait_lagged): after queuing step n, waits for step n - 1.
int tk_dist_sync_lagged(tk_dist *d, tk_err *e);
// all (world entries, host) = every rank's mine, in rank order; the wait is bounded by timeout_s
// (<= 0: d->timeout). Collective. One rank: all[0] = mine.
int tk_dist_gather_i64(tk_dist *d, int64_t mine, int64_t *all, double timeout_s, tk_err *e);
// all (world * 16 bytes, host) = every rank's 16 device bytes src (two doubles: accumulators), in
// rank order. Collective; waits for the work queued before it.
int tk_dist_gather16(tk_dist *d, const void *src, void *all, tk_err *e);

// Rank root gets every rank's n host bytes mine (n may differ between ranks, and be 0), back to
// back in rank order, in *all (malloc'd host memory the caller frees; NULL on the other ranks
// and when every n is 0); sizes (world entries, host, every rank) gets each rank's n. Collective:
// the sizes (tk_dist_gather_i64), then the bytes (one all_to_allv to root through device
// buffers of this call); waits bounded by d->timeout. One rank: a copy. For results of varying
// size (an evaluation's detections) scored in one place.
int tk_dist_gatherv(tk_dist *d, int root, const void *mine, size_t n, void **all, int64_t *sizes, tk_err *e);

// *per_rank = global / world, the samples of each rank's share of a global batch: TK_EUSAGE
// (naming workload, with a hint at train.global_batch_size) unless world >= 1 divides global.
// The one place of that check: every workload's create and reader_open ask it.
int tk_per_rank_batch(const char *workload, int64_t global, int world, int64_t *per_rank, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
