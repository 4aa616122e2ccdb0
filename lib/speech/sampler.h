// The RNN-T training data order: MLPerf's bucketing sampler (rnn_speech_recognition/pytorch
// common/data/dali/sampler.py BucketingSampler, train.py --num_buckets; 6 in NVIDIA's submissions).
// Per epoch: the utterances sorted by duration are split into nbuckets contiguous buckets
// (np.array_split: the first n % nbuckets buckets one longer), each bucket permuted at random and
// the buckets concatenated shortest first; the tail past the last whole global batch dropped
// (floor(n / gbs) gbs kept: the reference drops from the longest bucket the same way); then the
// global batches (gbs consecutive entries each) shuffled as wholes. So a batch holds utterances
// of similar lengths, and the batches come in random order.
// Differences from the reference, which draws every epoch from one numpy generator up front: the
// order of epoch e is a pure function of (seed, e) (Philox, stream TK_RNG_SHUFFLE, counters
// (index, purpose, stream | bucket << 8, epoch)), so a resumed run sees the same orders; the
// sort by duration is stable (ties in index order; np.argsort's quicksort leaves them in any
// order); a permutation of k items is Fisher-Yates from i = k - 1 down to 1, swapping i with
// j = (word (i + 1)) >> 32 of a fresh 32-bit Philox word. How a global batch is split among ranks
// is the caller's (the reference's DALI reader shards the list file).
#ifndef TK_SPEECH_SAMPLER_H
#define TK_SPEECH_SAMPLER_H

#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

// The order of epoch `epoch`: order (n) receives utterance indices into dur, *count (a multiple of
// gbs, <= n) of them used. dur: n >= 1 durations (any unit; NaN refused), nbuckets in 1 .. n,
// gbs >= 1. TK_EINTERNAL on bad arguments, TK_EIO (errno ENOMEM) when out of memory.
int tk_speech_bucket_epoch(const double *dur, int64_t n, int nbuckets, int64_t gbs, uint64_t seed, uint32_t epoch,
                           int64_t *order, int64_t *count, tk_err *e);

#ifdef __cplusplus
}
#endif
#endif
