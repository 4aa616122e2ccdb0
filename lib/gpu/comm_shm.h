// The cpu backend's transport for more than one rank (internal to lib/gpu/comm.c): the ranks are
// processes on ONE host that share a memory segment, a file under /dev/shm ($TMPDIR, then /tmp,
// when /dev/shm is missing or full) mapped MAP_SHARED. Rank 0 creates it and hands its name to the
// others through the rendezvous (dist.h); it unlinks the file as soon as every rank has mapped it
// (or when creation fails), so nothing is left behind even if a rank is killed later.
//
// Collectives run synchronously on the calling thread: each rank copies its send data into its
// slot of the segment, all ranks meet at a barrier, each reads (and reduces) what it needs.
// Messages larger than a slot go through in rounds. Slots are double-buffered, so a round needs
// one barrier (two for an all-reduce); an all-to-allv first makes a round of counts: every rank
// sees every rank's counts, so all check the count contract alike and agree on the number of
// rounds (its largest block's). Sums go over ranks in rank order 0..W-1, in fp32 for
// F32, BF16 and F16 (one rounding at the end for the 16-bit types), each input multiplied by the
// scale first (NCCL's pre-multiplied sum); every element is reduced by exactly one rank, so every
// rank gets bitwise the same result.
//
// Every wait is bounded by the timeout; a peer that exited is noticed within ~20 ms (its pid is
// recorded in the segment). Any failure marks the segment, so the other ranks give up at once,
// and leaves this rank's transport unusable (every later call fails with TK_EDEVICE).
//
// TK_COMM_SHM_SLOT_BYTES (read by rank 0) overrides the slot size, e.g. to test the rounds with
// small messages; the default keeps the segment at about 32 MiB whatever the world size.
#ifndef TK_COMM_SHM_H
#define TK_COMM_SHM_H

#include "dist/dist.h"
#include "gpu/coll.h"
#include "gpu/gpu.h"

typedef struct tk_shm tk_shm;

// Create (rank 0) or join (the others) the segment, and wait until every rank has joined.
int tk_shm_create(const tk_rank_info *r, const char *rendezvous, double timeout_s, tk_shm **out,
                  tk_err *e);
void tk_shm_destroy(tk_shm *s);

// One collective with comm.h's contract; count is the per-rank count that comm.h gives for k
// (all-reduce: count; reduce-scatter: recv_count; all-gather: send_count; all-to-all: count).
// scale must be 1 for the all-gather and the all-to-all. Not for TK_COLL_ALL_TO_ALLV (below).
int tk_shm_collective(tk_shm *s, tk_coll k, const void *send, void *recv, size_t count, tk_dtype t,
                      float scale, tk_err *e);

// All-to-allv with comm.h's contract (tk_all_to_allv), the count contract included: when any
// pair of ranks breaks it, every rank fails alike with TK_EINTERNAL.
int tk_shm_all_to_allv(tk_shm *s, const void *send, const size_t *send_counts, void *recv,
                       const size_t *recv_counts, tk_dtype t, tk_err *e);
// 0 when rank src sends as many elements to rank dst (sent) as rank dst expects from it
// (expected), else TK_EINTERNAL naming both; rank and world (the caller's) lead the message.
int tk_shm_counts_check(int rank, int world, int src, int dst, size_t sent, size_t expected, tk_err *e);

// 0 when sums of t with this scale are supported (integers: scale 1 only, wrapping), else
// TK_EINTERNAL with a message.
int tk_shm_sum_check(tk_dtype t, float scale, tk_err *e);
// dst[i] = sum over j = 0..nsrc-1 in that order of src[j][i] * scale (see above). dst may be one
// of the src (the same elements), not partly overlap them.
void tk_shm_sum(tk_dtype t, float scale, const void *const *src, int nsrc, void *dst, size_t n);

#endif
