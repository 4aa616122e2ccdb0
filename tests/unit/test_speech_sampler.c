// The bucketing sampler (lib/speech/sampler.c): every kept utterance once, a multiple of the
// global batch kept, each batch inside one duration bucket when the buckets hold whole batches,
// the tail dropped from the longest bucket, np.array_split's bucket sizes, the order a pure
// function of (seed, epoch), and different epochs (and batch orders) differing.
#include <math.h>
#include <string.h>

#include "speech/sampler.h"
#include "tk_test.h"

// Durations d[i] = i (so bucket b of 6 over 60 holds 10 b .. 10 b + 9), global batch 5.
TK_TEST(sampler_buckets_hold_whole_batches) {
    tk_err e = {0};
    double d[60];
    for (int i = 0; i < 60; i++) d[i] = 59 - i; // reversed: the sort must put index 59 first
    int64_t o[60], o2[60], n = 0;
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 60, 6, 5, 7, 0, o, &n, &e), 0);
    CHECK_EQ_INT(n, 60);
    int seen[60] = {0};
    for (int i = 0; i < 60; i++) seen[o[i]]++;
    for (int i = 0; i < 60; i++) CHECK_EQ_INT(seen[i], 1);
    int moved = 0;
    for (int j = 0; j < 12; j++) {
        const int64_t bucket = (59 - o[j * 5]) / 10;
        for (int k = 1; k < 5; k++) CHECK_EQ_INT((59 - o[j * 5 + k]) / 10, bucket);
        moved += bucket != j / 2;
    }
    CHECK(moved > 0); // the batches are shuffled, not in bucket order
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 60, 6, 5, 7, 0, o2, &n, &e), 0);
    CHECK(memcmp(o, o2, sizeof o) == 0);
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 60, 6, 5, 7, 1, o2, &n, &e), 0);
    CHECK(memcmp(o, o2, sizeof o) != 0);
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 60, 6, 5, 8, 0, o2, &n, &e), 0);
    CHECK(memcmp(o, o2, sizeof o) != 0);
}

// 62 utterances, 6 buckets: sizes 11 11 10 10 10 10 (array_split); batch 5: 60 kept, the 2
// dropped from the last (longest) bucket's 10; with the whole set as one batch (no batch shuffle)
// the buckets show in order, each a permutation of its own utterances; ties keep index order.
TK_TEST(sampler_drop_tail_and_split) {
    tk_err e = {0};
    double d[62];
    for (int i = 0; i < 62; i++) d[i] = i * 0.5;
    int64_t o[62], n = 0;
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 62, 6, 5, 3, 2, o, &n, &e), 0);
    CHECK_EQ_INT(n, 60);
    int seen[62] = {0};
    for (int i = 0; i < 60; i++) seen[o[i]]++;
    int dropped = 0;
    for (int i = 0; i < 62; i++) {
        CHECK(seen[i] <= 1);
        if (!seen[i]) {
            dropped++;
            CHECK(i >= 52); // the last bucket: indices 52 .. 61
        }
    }
    CHECK_EQ_INT(dropped, 2);
    // Bucket sizes: with gbs 1 nothing is dropped; the concatenation before the batch shuffle is
    // not visible, but with gbs 62 (one batch) it is: buckets in order, each a permutation.
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 62, 6, 62, 3, 2, o, &n, &e), 0);
    CHECK_EQ_INT(n, 62);
    const int start[7] = {0, 11, 22, 32, 42, 52, 62};
    for (int b = 0; b < 6; b++)
        for (int i = start[b]; i < start[b + 1]; i++) CHECK(o[i] >= start[b] && o[i] < start[b + 1]);
    // Ties keep index order in the sort: all durations equal, one bucket per utterance, one batch.
    double z[4] = {1, 1, 1, 1};
    int64_t oz[4];
    CHECK_EQ_INT(tk_speech_bucket_epoch(z, 4, 4, 4, 3, 2, oz, &n, &e), 0);
    for (int i = 0; i < 4; i++) CHECK_EQ_INT(oz[i], i);
}

TK_TEST(sampler_bad_arguments) {
    tk_err e = {0};
    double d[3] = {1, NAN, 2};
    int64_t o[3], n;
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 3, 1, 1, 0, 0, o, &n, &e), TK_EINTERNAL);
    CHECK(strstr(e.what, "duration 1 is NaN") != NULL);
    d[1] = 0;
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 3, 4, 1, 0, 0, o, &n, &e), TK_EINTERNAL); // more buckets than utterances
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 3, 1, 0, 0, 0, o, &n, &e), TK_EINTERNAL);
    CHECK_EQ_INT(tk_speech_bucket_epoch(d, 3, 1, 4, 0, 0, o, &n, &e), 0); // batch larger than the set: none kept
    CHECK_EQ_INT(n, 0);
}
