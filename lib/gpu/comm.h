// Collectives over NCCL for the cuda backend (one process per GPU). Collectives run on a stream
// of the context (TK_STREAM_COMM by convention) and can be captured inside the training CUDA
// graph. NCCL's headers stay in lib/gpu/comm.c.
// The cpu backend runs several ranks too, as processes on ONE host (share/launch -n N) that share
// a memory segment (lib/gpu/comm_shm.h): there every collective is done when the call returns
// (streams are ignored, tk_comm_wait returns 0), sums go over ranks in rank order in fp32 so
// every rank gets bitwise the same result, and a peer that died or hangs makes the call fail
// with TK_EDEVICE within timeout_s (a dead peer within milliseconds), after which every call
// fails. World size 1 on cpu: each collective is a (scaled) copy.
// The collectives: tk_allreduce_sum, tk_reduce_scatter_sum, tk_all_gather, tk_all_to_all (equal
// blocks) and tk_all_to_allv (a count per pair of ranks, given on the host).
// Order: every rank must issue a communicator's collectives in the same order. On cuda they then
// run on the device in that order whatever the streams, captured in CUDA graphs or not: NCCL
// chains each launch of a communicator after its previous one (its internal stream; a captured
// graph's collectives wait for and mark an event of it; NCCL_GRAPH_MIXING_SUPPORT, on by default,
// must stay on), so a collective queued on another stream after a graph launch runs after the
// graph's collectives, never beside them. Two communicators give no such order (NCCL does not
// promise that collectives of two communicators progress concurrently): a job makes one.
#ifndef TK_COMM_H
#define TK_COMM_H

#include "dist/dist.h"
#include "gpu/coll.h"
#include "gpu/gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tk_comm tk_comm;

// Make the communicator of this rank: rank 0 creates the NCCL unique id and hands it to the
// others through the rendezvous (dist.h). Bounded by timeout_s: a rank that never arrives makes
// every other rank fail with TK_EIO/TK_EDEVICE and a message, never hang. World size 1 needs no
// rendezvous (spec may be NULL). timeout_s also bounds each later call's wait for NCCL to accept
// the work (a non-blocking communicator answers ncclInProgress until it has). On cpu, rank 0
// hands the shared segment's name through the rendezvous instead, and timeout_s bounds every
// wait for the peers.
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
// Variable all-to-all (all_to_allv): rank j receives send_counts[j] elements of this rank's send, taken from
// offset sum_{k<j} send_counts[k] (blocks packed in rank order); recv gets recv_counts[i] elements from rank i
// at offset sum_{k<i} recv_counts[k]. send_counts and recv_counts are HOST arrays of world entries; rank i's
// send_counts[j] must equal rank j's recv_counts[i] (the cpu backend checks and fails with TK_EINTERNAL naming
// both ranks; NCCL cannot check). Zero counts are allowed (no message). On cuda: ncclGroupStart, ncclSend/ncclRecv
// per peer with a nonzero count, ncclGroupEnd; the block to itself is a device-to-device copy on the same stream.
// Capturable in a CUDA graph, but a captured graph replays the counts it was captured with.
int tk_all_to_allv(tk_comm *m, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                   tk_dtype t, int stream, tk_err *e);

// Make stream `waiter` wait (on the device; the host never blocks) for the work queued on stream
// `signaler` so far: an event recorded on signaler and waited on by waiter. This is how the
// compute stream hands a gradient buffer to the comm stream and waits for the reduced result,
// and it is capturable: inside tk_graph_begin/end (capture on the compute stream) a wait of the
// comm stream on the compute stream forks the comm stream into the graph, and the reverse wait
// joins it back (every forked stream must be joined before tk_graph_end). No-op on cpu.
int tk_comm_stream_wait(tk_comm *m, int waiter, int signaler, tk_err *e);

// Wait until the work queued on stream so far is done, at most timeout_s seconds, polling NCCL's
// asynchronous error state meanwhile. A peer that died or hangs gives TK_EDEVICE and aborts the
// communicator (so no later call can hang either). Never inside CUDA graph capture (a captured
// collective cannot be waited for on the host): that is TK_EINTERNAL; wait after the launch.
// After an abort every call on m fails with TK_EDEVICE; only tk_comm_destroy remains.
int tk_comm_wait(tk_comm *m, int stream, double timeout_s, tk_err *e);
// The same wait one call behind: marks the work queued on stream so far, then waits (bounded and
// checked as tk_comm_wait) for the work up to the previous call's mark (nothing on the first
// call). Called once a step after queuing it, the host queues step n + 1 while the device runs
// step n, and a dead peer is still found within a step plus timeout_s.
int tk_comm_wait_lagged(tk_comm *m, int stream, double timeout_s, tk_err *e);

// The ncclComm_t (cuda backend; NULL on cpu or after an abort), for benchmarks against NCCL.
void *tk_comm_nccl(tk_comm *m);

// Bandwidths in GB/s (1e9 bytes/s) with NCCL-tests' conventions. bytes is the size of the whole
// array: the all-reduce buffer, the reduce-scatter input (world * recv_count elements), the
// all-gather output, the all-to-all send buffer (world blocks; for all_to_allv this rank's, the
// sum of send_counts). algbw = bytes / seconds; busbw = algbw * 2(n-1)/n for all-reduce and
// algbw * (n-1)/n for the others, which makes busbw comparable with the link speed whatever n is
// (0 for world size 1; for all_to_allv exact only when the blocks are equal).
double tk_comm_algbw(size_t bytes, double seconds);
double tk_comm_busbw(tk_coll k, size_t bytes, int world, double seconds);

#ifdef __cplusplus
}
#endif

#endif
