// NCCL collectives (see comm.h). The communicator is non-blocking (ncclConfig_t.blocking = 0), so
// that initialization and every wait can be bounded in time and a stuck communicator aborted.
// NCCL's rules followed here: a call on a non-blocking communicator may return ncclInProgress,
// and then ncclCommGetAsyncError is polled until it leaves ncclInProgress before anything else
// is done with the communicator; an asynchronous error is fatal: the communicator is aborted (from
// this thread, which is the one using it) and never touched again; pre-multiplied-sum operators
// take their scalar in the element type, and stay alive while a captured graph may use them.
// The cpu backend runs world size 1 here and more ranks (on one host) through comm_shm.c.
#include "gpu/comm.h"

#include <math.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/bf16.h"
#include "core/progress.h"
#include "gpu/comm_shm.h"

#ifdef TK_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>

#define TK_COMM_MAX_OPS 16
#endif

struct tk_comm {
    tk_ctx *ctx;
    int rank, world;
    double timeout_s;
    tk_shm *shm; // cpu backend, world size > 1
#ifdef TK_HAVE_CUDA
    ncclComm_t nccl;
    int aborted;
    // Pre-multiplied-sum operators, one per (type, scale), destroyed with the communicator: an
    // operator used by a captured collective must outlive the graph.
    struct { tk_dtype t; float scale; ncclRedOp_t op; } ops[TK_COMM_MAX_OPS];
    int nops;
    cudaEvent_t ev[TK_NSTREAMS]; // one per signaling stream (tk_comm_stream_wait)
    cudaEvent_t ev_wait;         // tk_comm_wait
    cudaEvent_t ev_lag[2];       // tk_comm_wait_lagged: the marks of its last two calls
    int lag_next, lag_set[2];    // the event its next call records; which have been recorded
#endif
};

int tk_comm_rank(const tk_comm *m) { return m->rank; }
int tk_comm_world(const tk_comm *m) { return m->world; }

double tk_comm_algbw(size_t bytes, double seconds) {
    return seconds > 0 ? (double)bytes / seconds / 1e9 : 0;
}

double tk_comm_busbw(tk_coll k, size_t bytes, int world, double seconds) {
    if (world < 1) return 0;
    double f = (double)(world - 1) / world;
    return tk_comm_algbw(bytes, seconds) * (k == TK_COLL_ALL_REDUCE ? 2 * f : f);
}

#ifdef TK_HAVE_CUDA
static int nccl_fail(tk_comm *m, tk_err *e, ncclResult_t st, const char *what) {
    tk_err_set(e, TK_EDEVICE, "rank %d of %d: %s: %s", m->rank, m->world, what, ncclGetErrorString(st));
    tk_err_lib(e, "nccl", (int)st);
    const char *last = ncclGetLastError(NULL); // the comm argument is unused by NCCL
    if (last && *last) tk_err_hint(e, "%.200s", last);
    return TK_EDEVICE;
}

// ncclCommAbort is blocking even on a non-blocking communicator; it stops the kernels of the
// communicator (they poll its abort flag) and frees it.
static void comm_abort(tk_comm *m) {
    if (m->nccl && !m->aborted) ncclCommAbort(m->nccl);
    m->aborted = 1;
    m->nccl = NULL;
}

static int comm_usable(tk_comm *m, tk_err *e) {
    if (!m->aborted) return 0;
    tk_err_set(e, TK_EDEVICE, "rank %d of %d: the communicator was aborted after an earlier error",
               m->rank, m->world);
    return tk_err_hint(e, "a collective failed or timed out before; the run cannot continue");
}

// Between two polls of NCCL or CUDA state: spin (yielding the core) for the first 10 ms, since
// an enqueue or a short collective settles within tens of microseconds and a sleep would add its
// whole length to every call; after that, sleep 100 us so a long wait does not burn a core.
static void poll_pause(double since) {
    if (tk_now() - since < 0.010) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
}

// Wait for a non-blocking NCCL call to leave ncclInProgress, bounded by the communicator's
// timeout. An error that NCCL reports asynchronously is fatal: the communicator is aborted.
// One returned synchronously (a bad argument) leaves it usable.
static int nccl_settle(tk_comm *m, ncclResult_t st, const char *what, tk_err *e) {
    if (st != ncclInProgress) return st == ncclSuccess ? 0 : nccl_fail(m, e, st, what);
    double start = tk_now(), deadline = start + m->timeout_s;
    for (;;) {
        ncclResult_t async = ncclInProgress;
        ncclResult_t q = ncclCommGetAsyncError(m->nccl, &async);
        if (q != ncclSuccess) async = q;
        if (async == ncclSuccess) return 0;
        if (async != ncclInProgress) {
            int rc = nccl_fail(m, e, async, what);
            comm_abort(m);
            return rc;
        }
        if (tk_now() > deadline) {
            comm_abort(m);
            tk_err_set(e, TK_EDEVICE, "rank %d of %d: %s did not complete within %g s; communicator aborted",
                       m->rank, m->world, what, m->timeout_s);
            return tk_err_hint(e, "a peer rank died or hangs; see its log");
        }
        poll_pause(start);
    }
}

static int nccl_type(tk_dtype t, ncclDataType_t *out) {
    switch (t) {
    case TK_F32: *out = ncclFloat32; return 0;
    case TK_BF16: *out = ncclBfloat16; return 0;
    case TK_F16: *out = ncclFloat16; return 0;
    case TK_I32: *out = ncclInt32; return 0;
    case TK_I64: *out = ncclInt64; return 0;
    case TK_U8: *out = ncclUint8; return 0;
    }
    return -1;
}

static int cuda_fail(tk_comm *m, tk_err *e, cudaError_t st, const char *what) {
    tk_err_set(e, TK_EDEVICE, "rank %d of %d: %s: %s", m->rank, m->world, what, cudaGetErrorString(st));
    return tk_err_lib(e, "cuda", (int)st);
}

static int stream_ok(tk_comm *m, int stream, tk_err *e) {
    if (stream >= 0 && stream < TK_NSTREAMS) return 0;
    return tk_err_set(e, TK_EINTERNAL, "rank %d: no stream %d", m->rank, stream);
}

// What every collective checks first: a usable communicator, a valid stream, an NCCL type.
static int coll_begin(tk_comm *m, tk_dtype t, int stream, ncclDataType_t *nt, tk_err *e) {
    TRY(comm_usable(m, e));
    TRY(stream_ok(m, stream, e));
    if (nccl_type(t, nt)) return tk_err_set(e, TK_EINTERNAL, "collective: bad dtype");
    return 0;
}
#endif

int tk_comm_create(tk_ctx *c, const tk_rank_info *r, const char *rendezvous, double timeout_s,
                   tk_comm **out, tk_err *e) {
    *out = NULL;
    tk_comm *m = calloc(1, sizeof *m);
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    m->ctx = c;
    m->rank = r->rank;
    m->world = r->world;
    m->timeout_s = timeout_s > 0 ? timeout_s : 1;
    if (c->backend == TK_BACKEND_CPU) {
        int rc = 0;
        if (r->world > 1 && !rendezvous)
            rc = tk_err_set(e, TK_EUSAGE, "world size %d needs --rendezvous file:PATH or tcp:HOST:PORT", r->world);
        else if (r->world > 1)
            rc = tk_shm_create(r, rendezvous, m->timeout_s, &m->shm, e);
        if (rc) {
            free(m);
            return rc;
        }
        *out = m;
        return 0;
    }
#ifdef TK_HAVE_CUDA
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (r->world > 1 && !rendezvous) {
        free(m);
        return tk_err_set(e, TK_EUSAGE, "world size %d needs --rendezvous file:PATH or tcp:HOST:PORT",
                          r->world);
    }
    if (r->rank == 0) {
        ncclResult_t st = ncclGetUniqueId(&id);
        if (st != ncclSuccess) {
            int rc = nccl_fail(m, e, st, "ncclGetUniqueId failed");
            free(m);
            return rc;
        }
    }
    if (r->world > 1) {
        size_t n = sizeof id;
        int rc = tk_rendezvous(rendezvous, r, &id, &n, timeout_s, e);
        if (!rc && n != sizeof id) rc = tk_err_set(e, TK_EDATA, "rendezvous %s: got %zu bytes, not an NCCL id", rendezvous, n);
        if (rc) {
            free(m);
            return rc;
        }
    }
    for (int i = 0; i < TK_NSTREAMS; i++) {
        cudaError_t ce = cudaEventCreateWithFlags(&m->ev[i], cudaEventDisableTiming);
        if (ce != cudaSuccess) {
            cuda_fail(m, e, ce, "cannot create a CUDA event");
            tk_comm_destroy(m);
            return TK_EDEVICE;
        }
    }
    cudaEvent_t *more[3] = {&m->ev_wait, &m->ev_lag[0], &m->ev_lag[1]};
    for (int i = 0; i < 3; i++) {
        cudaError_t ce = cudaEventCreateWithFlags(more[i], cudaEventDisableTiming);
        if (ce != cudaSuccess) {
            cuda_fail(m, e, ce, "cannot create a CUDA event");
            tk_comm_destroy(m);
            return TK_EDEVICE;
        }
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t st = ncclCommInitRankConfig(&m->nccl, r->world, id, r->rank, &cfg);
    int rc = st == ncclSuccess || st == ncclInProgress
                 ? nccl_settle(m, st, "NCCL communicator initialization", e)
                 : nccl_fail(m, e, st, "ncclCommInitRankConfig failed");
    if (rc) {
        comm_abort(m); // a half-made communicator is aborted, not destroyed
        tk_comm_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
#else
    (void)rendezvous;
    free(m);
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}

void tk_comm_destroy(tk_comm *m) {
    if (!m) return;
    tk_shm_destroy(m->shm);
#ifdef TK_HAVE_CUDA
    if (m->nccl && !m->aborted) {
        for (int i = 0; i < m->nops; i++) ncclRedOpDestroy(m->ops[i].op, m->nccl);
        // Finalize flushes outstanding work and may need the peers; bounded, then abort.
        ncclResult_t st = ncclCommFinalize(m->nccl);
        double deadline = tk_now() + (m->timeout_s < 10 ? m->timeout_s : 10);
        while (st == ncclInProgress && tk_now() < deadline) {
            if (ncclCommGetAsyncError(m->nccl, &st) != ncclSuccess) break;
            if (st == ncclInProgress) poll_pause(0); // since 0: no spinning, sleep between polls
        }
        if (st == ncclSuccess) ncclCommDestroy(m->nccl);
        else comm_abort(m);
    }
    for (int i = 0; i < TK_NSTREAMS; i++)
        if (m->ev[i]) cudaEventDestroy(m->ev[i]);
    if (m->ev_wait) cudaEventDestroy(m->ev_wait);
    for (int i = 0; i < 2; i++)
        if (m->ev_lag[i]) cudaEventDestroy(m->ev_lag[i]);
#endif
    free(m);
}

void *tk_comm_nccl(tk_comm *m) {
#ifdef TK_HAVE_CUDA
    return m->aborted ? NULL : (void *)m->nccl;
#else
    (void)m;
    return NULL;
#endif
}

// The cpu backend: more ranks go through shared memory; for world size 1 every collective is a
// copy, scaled as the shared-memory sum scales. Returns -1 on cuda.
static int local_copy(tk_comm *m, tk_coll k, const void *send, void *recv, size_t count, tk_dtype t,
                      float scale, tk_err *e) {
    if (m->ctx->backend != TK_BACKEND_CPU) return -1; // the cuda path runs NCCL even for one rank
    if (m->shm) return tk_shm_collective(m->shm, k, send, recv, count, t, scale, e);
    if (scale != 1.0f) {
        TRY(tk_shm_sum_check(t, scale, e));
        tk_shm_sum(t, scale, &send, 1, recv, count);
        return 0;
    }
    if (send != recv) memmove(recv, send, count * tk_dtype_size(t));
    return 0;
}

#ifdef TK_HAVE_CUDA
// Round-to-nearest-even conversion of the (finite, normal-range) scale factor to fp16 (to bf16:
// tk_f32_to_bf16, lib/core/bf16.h).
static uint16_t f32_to_f16(float f) {
    int ex;
    float m = frexpf(fabsf(f), &ex); // f = m * 2^ex, m in [0.5, 1)
    uint16_t sign = f < 0 ? 0x8000 : 0;
    if (f == 0) return sign;
    int e16 = ex - 1 + 15;
    if (e16 >= 31) return sign | 0x7c00;                   // overflow to infinity
    if (e16 <= 0) return sign | (uint16_t)lrintf(ldexpf(fabsf(f), 24)); // subnormal
    uint32_t mant = (uint32_t)lrintf((m * 2 - 1) * 1024);   // rint: nearest even
    if (mant == 1024) mant = 0, e16++;
    return sign | (uint16_t)(e16 << 10) | (uint16_t)mant;
}

// The reduction operator for sum * scale: ncclSum for 1, else a cached pre-multiplied sum whose
// scalar (host immediate, in the element type) NCCL copies when the operator is created.
static int sum_op(tk_comm *m, tk_dtype t, ncclDataType_t nt, float scale, ncclRedOp_t *op, tk_err *e) {
    *op = ncclSum;
    if (scale == 1.0f) return 0;
    for (int i = 0; i < m->nops; i++)
        if (m->ops[i].t == t && m->ops[i].scale == scale) {
            *op = m->ops[i].op;
            return 0;
        }
    if (m->nops == TK_COMM_MAX_OPS)
        return tk_err_set(e, TK_EINTERNAL, "more than %d distinct collective scale factors", TK_COMM_MAX_OPS);
    union { float f; uint16_t b; } sc;
    if (t == TK_BF16) sc.b = tk_f32_to_bf16(scale);
    else if (t == TK_F16) sc.b = f32_to_f16(scale);
    else if (t == TK_F32) sc.f = scale;
    else return tk_err_set(e, TK_EINTERNAL, "scaled sum of integers (%s)", tk_dtype_name(t));
    ncclResult_t st = ncclRedOpCreatePreMulSum(op, &sc, nt, ncclScalarHostImmediate, m->nccl);
    TRY(nccl_settle(m, st, "ncclRedOpCreatePreMulSum", e));
    m->ops[m->nops].t = t;
    m->ops[m->nops].scale = scale;
    m->ops[m->nops].op = *op;
    m->nops++;
    return 0;
}

static int scaled_sum(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, float scale,
                      int stream, int scatter, tk_err *e) {
    ncclDataType_t nt;
    TRY(coll_begin(m, t, stream, &nt, e));
    ncclRedOp_t op;
    TRY(sum_op(m, t, nt, scale, &op, e));
    cudaStream_t s = (cudaStream_t)m->ctx->stream[stream];
    ncclResult_t st = scatter ? ncclReduceScatter(send, recv, count, nt, op, m->nccl, s)
                              : ncclAllReduce(send, recv, count, nt, op, m->nccl, s);
    return nccl_settle(m, st, scatter ? "ncclReduceScatter" : "ncclAllReduce", e);
}
#endif

int tk_allreduce_sum(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, float scale,
                     int stream, tk_err *e) {
    int rc = local_copy(m, TK_COLL_ALL_REDUCE, send, recv, count, t, scale, e);
    if (rc != -1) return rc;
#ifdef TK_HAVE_CUDA
    return scaled_sum(m, send, recv, count, t, scale, stream, 0, e);
#else
    (void)stream;
    return TK_EINTERNAL;
#endif
}

int tk_reduce_scatter_sum(tk_comm *m, const void *send, void *recv, size_t recv_count, tk_dtype t,
                          float scale, int stream, tk_err *e) {
    int rc = local_copy(m, TK_COLL_REDUCE_SCATTER, send, recv, recv_count, t, scale, e);
    if (rc != -1) return rc;
#ifdef TK_HAVE_CUDA
    return scaled_sum(m, send, recv, recv_count, t, scale, stream, 1, e);
#else
    (void)stream;
    return TK_EINTERNAL;
#endif
}

int tk_all_gather(tk_comm *m, const void *send, void *recv, size_t send_count, tk_dtype t, int stream,
                  tk_err *e) {
    int rc = local_copy(m, TK_COLL_ALL_GATHER, send, recv, send_count, t, 1.0f, e);
    if (rc != -1) return rc;
#ifdef TK_HAVE_CUDA
    ncclDataType_t nt;
    TRY(coll_begin(m, t, stream, &nt, e));
    ncclResult_t st = ncclAllGather(send, recv, send_count, nt, m->nccl, (cudaStream_t)m->ctx->stream[stream]);
    return nccl_settle(m, st, "ncclAllGather", e);
#else
    (void)stream;
    return TK_EINTERNAL;
#endif
}

#ifdef TK_HAVE_CUDA
// Block p of an all-to-all: counts[p] elements, or count for every block when counts is NULL
// (tk_all_to_all); blocks are packed in rank order.
static size_t block(const size_t *counts, size_t count, int p) { return counts ? counts[p] : count; }

// Both all-to-alls: grouped point-to-point, which works on every NCCL 2.x, and NCCL runs the
// pairs concurrently. The block to itself is a copy on the stream, after the group: NCCL would
// copy it too, through its own kernel. A zero count makes no call (no message).
static int all_to_all_nccl(tk_comm *m, const void *send, const size_t *send_counts, void *recv,
                           const size_t *recv_counts, size_t count, tk_dtype t, int stream, tk_err *e) {
    ncclDataType_t nt;
    TRY(coll_begin(m, t, stream, &nt, e));
    int me = m->rank;
    // The one pair of the count contract this rank sees whole; the others NCCL cannot check.
    TRY(tk_shm_counts_check(me, m->world, me, me, block(send_counts, count, me), block(recv_counts, count, me), e));
    cudaStream_t s = (cudaStream_t)m->ctx->stream[stream];
    size_t es = tk_dtype_size(t), so = 0, ro = 0, self_so = 0, self_ro = 0;
    // Calls inside a group only record the work; the group is always closed (an open group would
    // swallow the next collective), and ncclGroupEnd is what may answer ncclInProgress.
    ncclResult_t first = ncclGroupStart();
    if (first != ncclSuccess) return nccl_fail(m, e, first, "ncclGroupStart");
    for (int p = 0; p < m->world && first == ncclSuccess; p++) {
        size_t sn = block(send_counts, count, p), rn = block(recv_counts, count, p);
        if (p == me) {
            self_so = so, self_ro = ro;
        } else {
            if (sn) first = ncclSend((const char *)send + so * es, sn, nt, p, m->nccl, s);
            if (rn && first == ncclSuccess) first = ncclRecv((char *)recv + ro * es, rn, nt, p, m->nccl, s);
        }
        so += sn, ro += rn;
    }
    // Settle the group first (the communicator must be idle again), then report a refused call.
    const char *name = send_counts ? "all-to-allv" : "all-to-all";
    char what[48];
    snprintf(what, sizeof what, "%s (ncclGroupEnd)", name);
    int rc = nccl_settle(m, ncclGroupEnd(), what, e);
    if (!rc && first != ncclSuccess && first != ncclInProgress) {
        snprintf(what, sizeof what, "%s (ncclSend/ncclRecv)", name);
        rc = nccl_fail(m, e, first, what);
    }
    size_t self = block(send_counts, count, me) * es;
    if (!rc && self) {
        cudaError_t ce = cudaMemcpyAsync((char *)recv + self_ro * es, (const char *)send + self_so * es, self,
                                         cudaMemcpyDeviceToDevice, s);
        snprintf(what, sizeof what, "%s (copy of the own block)", name);
        if (ce != cudaSuccess) rc = cuda_fail(m, e, ce, what);
    }
    return rc;
}
#endif

int tk_all_to_all(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, int stream,
                  tk_err *e) {
    int rc = local_copy(m, TK_COLL_ALL_TO_ALL, send, recv, count, t, 1.0f, e);
    if (rc != -1) return rc;
#ifdef TK_HAVE_CUDA
    return all_to_all_nccl(m, send, NULL, recv, NULL, count, t, stream, e);
#else
    (void)stream;
    return TK_EINTERNAL;
#endif
}

int tk_all_to_allv(tk_comm *m, const void *send, const size_t *send_counts, void *recv, const size_t *recv_counts,
                   tk_dtype t, int stream, tk_err *e) {
    if (m->ctx->backend == TK_BACKEND_CPU) {
        if (m->shm) return tk_shm_all_to_allv(m->shm, send, send_counts, recv, recv_counts, t, e);
        TRY(tk_shm_counts_check(0, 1, 0, 0, send_counts[0], recv_counts[0], e)); // world size 1: a copy
        return local_copy(m, TK_COLL_ALL_TO_ALL, send, recv, send_counts[0], t, 1.0f, e);
    }
#ifdef TK_HAVE_CUDA
    return all_to_all_nccl(m, send, send_counts, recv, recv_counts, 0, t, stream, e);
#else
    (void)stream;
    return TK_EINTERNAL;
#endif
}

int tk_comm_stream_wait(tk_comm *m, int waiter, int signaler, tk_err *e) {
    if (m->ctx->backend == TK_BACKEND_CPU) return 0;
#ifdef TK_HAVE_CUDA
    TRY(stream_ok(m, waiter, e));
    TRY(stream_ok(m, signaler, e));
    if (waiter == signaler) return 0;
    // cudaStreamWaitEvent takes the event's state at the time of the call, so one event per
    // signaling stream can be recorded again right after; in capture both become graph edges.
    cudaError_t st = cudaEventRecord(m->ev[signaler], (cudaStream_t)m->ctx->stream[signaler]);
    if (st != cudaSuccess) return cuda_fail(m, e, st, "cudaEventRecord (stream handoff)");
    st = cudaStreamWaitEvent((cudaStream_t)m->ctx->stream[waiter], m->ev[signaler], 0);
    if (st != cudaSuccess) return cuda_fail(m, e, st, "cudaStreamWaitEvent (stream handoff)");
    return 0;
#else
    (void)waiter;
    (void)signaler;
    (void)e;
    return 0;
#endif
}

#ifdef TK_HAVE_CUDA
// The checks of both waits: a usable communicator, a valid stream, no capture under way.
static int wait_usable(tk_comm *m, int stream, cudaStream_t *s, tk_err *e) {
    TRY(comm_usable(m, e));
    TRY(stream_ok(m, stream, e));
    *s = (cudaStream_t)m->ctx->stream[stream];
    enum cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
    if (m->ctx->capturing || (cudaStreamIsCapturing(*s, &cap) == cudaSuccess && cap != cudaStreamCaptureStatusNone))
        return tk_err_set(e, TK_EINTERNAL,
                          "rank %d: tk_comm_wait inside CUDA graph capture; wait after the graph launch", m->rank);
    return 0;
}

// Poll ev until it completes, NCCL reports an error, or timeout_s passes (both abort).
static int wait_event(tk_comm *m, cudaEvent_t ev, double timeout_s, tk_err *e) {
    double start = tk_now(), deadline = start + timeout_s;
    for (;;) {
        cudaError_t q = cudaEventQuery(ev);
        if (q == cudaSuccess) return 0;
        if (q != cudaErrorNotReady) return cuda_fail(m, e, q, "collective failed on the device");
        ncclResult_t async = ncclSuccess;
        ncclResult_t g = ncclCommGetAsyncError(m->nccl, &async);
        if (g != ncclSuccess) async = g;
        if (async != ncclSuccess && async != ncclInProgress) {
            int rc = nccl_fail(m, e, async, "collective failed; communicator aborted");
            comm_abort(m);
            return rc;
        }
        if (tk_now() > deadline) {
            comm_abort(m);
            tk_err_set(e, TK_EDEVICE, "rank %d of %d: collectives did not complete within %g s; communicator aborted",
                       m->rank, m->world, timeout_s);
            return tk_err_hint(e, "a peer rank died or hangs; see its log");
        }
        poll_pause(start);
    }
}
#endif

// Record a mark on stream and wait for it (lagged: for the previous lagged call's mark).
static int wait_mark(tk_comm *m, int stream, int lagged, double timeout_s, tk_err *e) {
    if (m->ctx->backend == TK_BACKEND_CPU) return 0;
#ifdef TK_HAVE_CUDA
    cudaStream_t s;
    TRY(wait_usable(m, stream, &s, e));
    const int k = m->lag_next, prev = 1 - k;
    cudaEvent_t mark = lagged ? m->ev_lag[k] : m->ev_wait;
    cudaError_t q = cudaEventRecord(mark, s);
    if (q != cudaSuccess) return cuda_fail(m, e, q, "cudaEventRecord");
    if (!lagged) return wait_event(m, mark, timeout_s, e);
    m->lag_set[k] = 1;
    m->lag_next = prev;
    return m->lag_set[prev] ? wait_event(m, m->ev_lag[prev], timeout_s, e) : 0;
#else
    (void)stream;
    (void)lagged;
    (void)timeout_s;
    (void)e;
    return 0;
#endif
}

int tk_comm_wait(tk_comm *m, int stream, double timeout_s, tk_err *e) {
    return wait_mark(m, stream, 0, timeout_s, e);
}

int tk_comm_wait_lagged(tk_comm *m, int stream, double timeout_s, tk_err *e) {
    return wait_mark(m, stream, 1, timeout_s, e);
}
