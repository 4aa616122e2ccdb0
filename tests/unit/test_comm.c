// Collectives on the cpu backend: world size 1, where each is a (scaled) copy. More ranks
// (shared memory) are tested by test_comm_shm.c.
#include "gpu/comm.h"
#include "tk_test.h"

// A context and a world-size-1 communicator on the cpu backend.
static int world1(tk_ctx **c, tk_comm **m, tk_err *e) {
    tk_rank_info r = {.rank = 0, .world = 1};
    int rc = tk_ctx_create(c, TK_BACKEND_CPU, 0, e);
    return rc ? rc : tk_comm_create(*c, &r, NULL, 1, m, e);
}

TK_TEST(comm_cpu_world1_semantics) {
    tk_ctx *c;
    tk_comm *m;
    tk_err e;
    CHECK_EQ_INT(world1(&c, &m, &e), 0);
    CHECK_EQ_INT(tk_comm_world(m), 1);
    float x[4] = {1, 2, 3, 4}, y[4] = {0};
    CHECK_EQ_INT(tk_allreduce_sum(m, x, y, 4, TK_F32, 0.5f, TK_STREAM_COMM, &e), 0);
    CHECK(y[0] == 0.5f && y[3] == 2.0f);
    CHECK_EQ_INT(tk_allreduce_sum(m, x, x, 4, TK_F32, 1.0f, TK_STREAM_COMM, &e), 0);
    CHECK(x[2] == 3.0f);
    CHECK_EQ_INT(tk_reduce_scatter_sum(m, x, y, 4, TK_F32, 2.0f, TK_STREAM_COMM, &e), 0);
    CHECK(y[1] == 4.0f);
    int32_t a[3] = {7, 8, 9}, b[3] = {0};
    CHECK_EQ_INT(tk_all_gather(m, a, b, 3, TK_I32, TK_STREAM_COMM, &e), 0);
    CHECK(b[0] == 7 && b[2] == 9);
    CHECK_EQ_INT(tk_all_to_all(m, a, b, 3, TK_I32, TK_STREAM_COMM, &e), 0);
    CHECK(b[1] == 8);
    CHECK_EQ_INT(tk_allreduce_sum(m, a, b, 3, TK_I32, 3.0f, TK_STREAM_COMM, &e), TK_EINTERNAL);
    // bf16 scales too (fp32 product, rounded once): 3 * 0.5 and 5 * 0.5 are exact in bf16.
    uint16_t h[2] = {0x4040, 0x40a0}, g[2] = {0}; // 3.0, 5.0
    CHECK_EQ_INT(tk_allreduce_sum(m, h, g, 2, TK_BF16, 0.5f, TK_STREAM_COMM, &e), 0);
    CHECK(g[0] == 0x3fc0 && g[1] == 0x4020); // 1.5, 2.5
    CHECK_EQ_INT(tk_comm_wait(m, TK_STREAM_COMM, 1, &e), 0);
    CHECK_EQ_INT(tk_comm_wait_lagged(m, TK_STREAM_COMM, 1, &e), 0);
    tk_comm_destroy(m);
    tk_ctx_destroy(c);
}

TK_TEST(comm_cpu_world1_all_to_allv) {
    tk_ctx *c;
    tk_comm *m;
    tk_err e = {0};
    CHECK_EQ_INT(world1(&c, &m, &e), 0);
    int64_t a[3] = {7, 8, 9}, b[4] = {0, 0, 0, -1};
    size_t three = 3, zero = 0, two = 2;
    CHECK_EQ_INT(tk_all_to_allv(m, a, &three, b, &three, TK_I64, TK_STREAM_COMM, &e), 0);
    CHECK(b[0] == 7 && b[1] == 8 && b[2] == 9 && b[3] == -1); // nothing past the block
    CHECK_EQ_INT(tk_all_to_allv(m, NULL, &zero, NULL, &zero, TK_I64, TK_STREAM_COMM, &e), 0);
    // The count contract with itself: 3 sent, 2 expected.
    CHECK_EQ_INT(tk_all_to_allv(m, a, &three, b, &two, TK_I64, TK_STREAM_COMM, &e), TK_EINTERNAL);
    CHECK_STR(e.what, "rank 0 of 1: all-to-allv counts differ: rank 0 sends 3 elements to rank 0, which expects 2");
    CHECK_STR(e.hint, "rank 0's send_counts[0] must equal rank 0's recv_counts[0]");
    tk_comm_destroy(m);
    tk_ctx_destroy(c);
}

TK_TEST(comm_cpu_world_2_needs_a_rendezvous) {
    tk_ctx *c;
    tk_err e;
    CHECK_EQ_INT(tk_ctx_create(&c, TK_BACKEND_CPU, 0, &e), 0);
    tk_rank_info r = {.rank = 1, .world = 2};
    tk_comm *m = NULL;
    CHECK_EQ_INT(tk_comm_create(c, &r, NULL, 1, &m, &e), TK_EUSAGE);
    CHECK(m == NULL);
    CHECK_STR(e.what, "world size 2 needs --rendezvous file:PATH or tcp:HOST:PORT");
    tk_ctx_destroy(c);
}
