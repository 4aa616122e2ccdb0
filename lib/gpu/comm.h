// Collectives over NCCL for the cuda backend (one process per GPU), and their world-size-1
// meaning on the cpu backend. Collectives run on a stream of the context (TK_STREAM_COMM by
// convention) and can be captured inside the training CUDA graph. NCCL's headers stay in
// lib/gpu/comm.c.
#ifndef TK_COMM_H
#define TK_COMM_H

#include "dist/dist.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_comm tk_comm;

// Make the communicator of this rank: rank 0 creates the NCCL unique id and hands it to the
// others through the rendezvous (dist.h). Bounded by timeout_s: a rank that never arrives makes
// every other rank fail with TK_EIO/TK_EDEVICE and a message, never hang. World size 1 needs no
// rendezvous (spec may be NULL).
int tk_comm_create(tk_ctx *c, const tk_rank_info *r, const char *rendezvous, double timeout_s,
                   tk_comm **out, tk_err *e);
void tk_comm_destroy(tk_comm *m);
int tk_comm_rank(const tk_comm *m);
int tk_comm_world(const tk_comm *m);

// recv = scale * sum over ranks of send (count elements; send may equal recv). The scale is
// applied inside the reduction (NCCL's pre-multiplied sum), not by a separate kernel.
int tk_allreduce_sum(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, float scale,
                     int stream, tk_err *e);
// recv (recv_count) = scale * sum over ranks of this rank's block of send (world * recv_count).
int tk_reduce_scatter_sum(tk_comm *m, const void *send, void *recv, size_t recv_count, tk_dtype t,
                          float scale, int stream, tk_err *e);
// recv (world * send_count) = every rank's send, in rank order.
int tk_all_gather(tk_comm *m, const void *send, void *recv, size_t send_count, tk_dtype t, int stream,
                  tk_err *e);
// Block j of send (count elements) goes to rank j; block i of recv comes from rank i.
int tk_all_to_all(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, int stream,
                  tk_err *e);

// Wait until the work queued on stream so far is done, at most timeout_s seconds, polling NCCL's
// asynchronous error state meanwhile. A peer that died or hangs gives TK_EDEVICE and aborts the
// communicator (so no later call can hang either).
int tk_comm_wait(tk_comm *m, int stream, double timeout_s, tk_err *e);

#ifdef __cplusplus
}
#endif

#endif
