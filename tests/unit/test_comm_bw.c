// Bandwidth helpers of comm.h (NCCL-tests' busbw conventions) and the world-size-1 stream and
// capture helpers on the cpu backend. The expected numbers are worked out by hand from
// NCCL-tests' PERFORMANCE.md: all-reduce 2(n-1)/n, the other three (n-1)/n.
#include "gpu/comm.h"
#include "tk_test.h"

TK_TEST(comm_algbw_is_bytes_per_second_in_gb) {
    CHECK_NEAR(tk_comm_algbw(1000000000, 1.0), 1.0, 1e-12);
    CHECK_NEAR(tk_comm_algbw((size_t)1 << 30, 0.005), 214.748364800, 1e-9);
    CHECK(tk_comm_algbw(123, 0) == 0); // no time measured: no bandwidth, not inf
}

TK_TEST(comm_busbw_all_reduce_factor_2_n_minus_1_over_n) {
    CHECK_NEAR(tk_comm_busbw(TK_COLL_ALL_REDUCE, 1000000000, 2, 1.0), 1.0, 1e-12);
    CHECK_NEAR(tk_comm_busbw(TK_COLL_ALL_REDUCE, 1000000000, 8, 1.0), 1.75, 1e-12);
    CHECK_NEAR(tk_comm_busbw(TK_COLL_ALL_REDUCE, 4000000000u, 4, 2.0), 3.0, 1e-12);
    CHECK(tk_comm_busbw(TK_COLL_ALL_REDUCE, 1000000000, 1, 1.0) == 0);
}

TK_TEST(comm_busbw_other_collectives_factor_n_minus_1_over_n) {
    CHECK_NEAR(tk_comm_busbw(TK_COLL_REDUCE_SCATTER, 1000000000, 8, 1.0), 0.875, 1e-12);
    CHECK_NEAR(tk_comm_busbw(TK_COLL_ALL_GATHER, 1000000000, 2, 0.5), 1.0, 1e-12);
    CHECK_NEAR(tk_comm_busbw(TK_COLL_ALL_TO_ALL, 3000000000u, 3, 1.0), 2.0, 1e-12);
    CHECK(tk_comm_busbw(TK_COLL_ALL_GATHER, 1000000000, 0, 1.0) == 0);
}

TK_TEST(comm_cpu_stream_helpers_are_no_ops) {
    tk_ctx *c;
    tk_err e = {0};
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    tk_rank_info r = {.rank = 0, .world = 1};
    tk_comm *m;
    CHECK_EQ_INT(tk_comm_create(c, &r, NULL, 1, &m, &e), 0);
    CHECK_EQ_INT(tk_comm_stream_wait(m, TK_STREAM_COMPUTE, TK_STREAM_COMM, &e), 0);
    CHECK_EQ_INT(tk_comm_stream_wait(m, TK_STREAM_COMM, TK_STREAM_COMPUTE, &e), 0);
    CHECK(tk_comm_nccl(m) == NULL);
    tk_comm_destroy(m);
    tk_ctx_destroy(c);
}
