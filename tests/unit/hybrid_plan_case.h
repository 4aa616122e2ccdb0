// The hybrid embedding's exchange plan (kernels/hybrid_plan.h) on a batch worked out by hand,
// shared by tests/unit/test_ops_dlrm.c (the reference) and tests/gpu/test_hybrid_plan.c (the
// device). B = 4, T = 3, W = 2 (b = 2, tm = 2: rank 0 owns tables 0 and 1, rank 1 table 2).
// Tables of 4, 3 and 5 rows; frequent ids: table 0 {3, 1} (replica rows 0, 1), table 1 none,
// table 2 {0, 4} (rows 2, 3).
#ifndef TK_TESTS_HYBRID_PLAN_CASE_H
#define TK_TESTS_HYBRID_PLAN_CASE_H
#include <stdint.h>

#include "hybrid_plan.h"

static void hpc_hset_add(uint64_t *hs, int bits, int32_t id, uint32_t local) {
    uint32_t mask = ((uint32_t)1 << bits) - 1, i = tk_hset_slot(id, bits);
    while (hs[i]) i = (i + 1) & mask;
    hs[i] = (uint64_t)(uint32_t)(id + 1) << 32 | local;
}

// The sets: 16 slots for table 0, none for table 1, 16 for table 2.
static void hpc_sets(uint64_t hset[32]) {
    for (int i = 0; i < 32; i++) hset[i] = 0;
    hpc_hset_add(hset, 4, 3, 0), hpc_hset_add(hset, 4, 1, 1);
    hpc_hset_add(hset + 16, 4, 0, 0), hpc_hset_add(hset + 16, 4, 4, 1);
}

static const int64_t hpc_rows[3] = {4, 3, 5}, hpc_hoff[3] = {0, 16, 16}, hpc_fbase[3] = {0, 2, 2};
static const int32_t hpc_hbits[3] = {4, 0, 4};
// replica rows: s0 (1, -, 3), s1 (1, -, 2), s2 (0, -, -), s3 (1, -, 2)
static const int32_t hpc_cat[4 * 3] = {1, 2, 4, 1, 0, 0, 3, 1, 2, 1, 2, 0};
static const int64_t hpc_own0[3] = {0, 4, 7}, hpc_own1[2] = {0, 5};
// rank 0: sends the table 1 uses (4 + id) of s0, s1 to peer 0 and of s2, s3 to peer 1; receives
// positions 1, 3 (table 1) from itself; frequent (pos, row) (0, 1) (2, 1) (4, 3) (6, 2).
static const int32_t hpc_w0_send[4] = {6, 4, 5, 6}, hpc_w0_recv[2] = {1, 3}, hpc_w0_fpos[4] = {0, 2, 6, 4},
                     hpc_w0_frow[4] = {1, 1, 2, 3}, hpc_w0_srow[3] = {1, 2, 3}, hpc_w0_soff[4] = {0, 2, 3, 4};
// rank 1: sends s2's table 2 use (id 2) to itself; receives 1, 3 (table 1) from rank 0 and 4
// (s2, table 2) from itself; frequent (0, 0) (2, 1) (6, 2).
static const int32_t hpc_w1_send[1] = {2}, hpc_w1_recv[3] = {1, 3, 4}, hpc_w1_fpos[3] = {0, 2, 6},
                     hpc_w1_frow[3] = {0, 1, 2}, hpc_w1_srow[3] = {0, 1, 2}, hpc_w1_soff[4] = {0, 1, 2, 3};
// send_cnt[2], recv_cnt[2], n_send, n_recv, n_freq, nseg
static const int64_t hpc_counts[2][8] = {{2, 2, 2, 0, 4, 2, 4, 3}, {0, 1, 2, 1, 1, 3, 3, 3}};
static const int32_t *const hpc_want[2][6] = {
    {hpc_w0_send, hpc_w0_recv, hpc_w0_fpos, hpc_w0_frow, hpc_w0_srow, hpc_w0_soff},
    {hpc_w1_send, hpc_w1_recv, hpc_w1_fpos, hpc_w1_frow, hpc_w1_srow, hpc_w1_soff}};

// The exchange matrix (tk_hybrid_exchange_counts): infrequent uses of owner 0's tables (table 1)
// by rank 0 (s0, s1) and rank 1 (s2, s3), of owner 1's (table 2) by rank 0 (none: ids 4 and 0
// are frequent) and rank 1 (s2's id 2).
static const int64_t hpc_mat[4] = {2, 2, 0, 1};
// tk_hybrid_plan_fixed with pad_row 9: per rank, capacity 3 (everything fits) and 1 (cut).
static const int32_t hpc_fx_send3[2][6] = {{6, 4, 9, 5, 6, 9}, {9, 9, 9, 2, 9, 9}};
static const int32_t hpc_fx_recv3[2][3] = {{0, 1}, {0, 1, 3}};
static const int32_t hpc_fx_send1[2][2] = {{6, 5}, {9, 2}};
static const int32_t hpc_fx_recv1[2][3] = {{0, -1}, {0, -1, 1}};

// How many entries of rank r's fixed layout at capacity cap (3 or 1) differ from the above.
static int hpc_fixed_mismatches(int r, int cap, const int32_t *send_pad, const int32_t *recv_src) {
    const int32_t *ws = cap == 3 ? hpc_fx_send3[r] : hpc_fx_send1[r], *wr = cap == 3 ? hpc_fx_recv3[r] : hpc_fx_recv1[r];
    int bad = 0;
    for (int k = 0; k < 2 * cap; k++) bad += send_pad[k] != ws[k];
    for (int64_t k = 0; k < hpc_counts[r][5]; k++) bad += recv_src[k] != wr[k];
    return bad;
}

// The length of each of the six regions, from the counts of a plan over W ranks.
static void hpc_region_len(const int64_t *counts, int W, int64_t len[6]) {
    len[0] = counts[2 * W], len[1] = counts[2 * W + 1], len[2] = len[3] = counts[2 * W + 2];
    len[4] = counts[2 * W + 3], len[5] = counts[2 * W + 3] + 1;
}

// How many of out's regions (at off) and counts differ from rank r's expected plan (0: none).
static int hpc_mismatches(int r, const int32_t *out, const size_t off[7], const int64_t *counts) {
    int bad = 0;
    for (int k = 0; k < 8; k++) bad += counts[k] != hpc_counts[r][k];
    int64_t len[6];
    hpc_region_len(hpc_counts[r], 2, len);
    for (int g = 0; g < 6; g++)
        for (int64_t k = 0; k < len[g]; k++) bad += out[off[g] + k] != hpc_want[r][g][k];
    return bad;
}
#endif
