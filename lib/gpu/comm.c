// NCCL collectives (see comm.h). The communicator is non-blocking (ncclConfig_t.blocking = 0), so
// that initialization and every wait can be bounded in time and a stuck communicator aborted.
#include "gpu/comm.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/progress.h"

#ifdef TK_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

struct tk_comm {
    tk_ctx *ctx;
    int rank, world;
#ifdef TK_HAVE_CUDA
    ncclComm_t nccl;
    int aborted;
#endif
};

int tk_comm_rank(const tk_comm *m) { return m->rank; }
int tk_comm_world(const tk_comm *m) { return m->world; }

#ifdef TK_HAVE_CUDA
static int nccl_fail(tk_comm *m, tk_err *e, ncclResult_t st, const char *what) {
    tk_err_set(e, TK_EDEVICE, "rank %d of %d: %s: %s", m->rank, m->world, what, ncclGetErrorString(st));
    tk_err_lib(e, "nccl", (int)st);
    const char *last = ncclGetLastError(m->nccl);
    if (last && *last) tk_err_hint(e, "%.200s", last);
    return TK_EDEVICE;
}

// Wait for a non-blocking NCCL call to leave ncclInProgress, bounded by deadline.
static int nccl_settle(tk_comm *m, ncclResult_t st, double deadline, const char *what, tk_err *e) {
    while (st == ncclInProgress) {
        if (tk_now() > deadline) {
            ncclCommAbort(m->nccl);
            m->aborted = 1;
            tk_err_set(e, TK_EDEVICE, "rank %d of %d: %s did not complete in time; communicator aborted",
                       m->rank, m->world, what);
            return tk_err_hint(e, "a peer rank died or hangs; see its log");
        }
        ncclResult_t async;
        ncclCommGetAsyncError(m->nccl, &async);
        st = async;
    }
    return st == ncclSuccess ? 0 : nccl_fail(m, e, st, what);
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
#endif

int tk_comm_create(tk_ctx *c, const tk_rank_info *r, const char *rendezvous, double timeout_s,
                   tk_comm **out, tk_err *e) {
    *out = NULL;
    tk_comm *m = calloc(1, sizeof *m);
    if (!m) return tk_err_set(e, TK_EIO, "out of host memory");
    m->ctx = c;
    m->rank = r->rank;
    m->world = r->world;
    if (c->backend == TK_BACKEND_CPU) {
        if (r->world != 1) {
            free(m);
            tk_err_set(e, TK_EUSAGE, "the cpu backend runs one rank, but the world size is %d", r->world);
            return tk_err_hint(e, "use --backend cuda with one process per GPU");
        }
        *out = m;
        return 0;
    }
#ifdef TK_HAVE_CUDA
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (r->world > 1) {
        if (!rendezvous) {
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
        size_t n = sizeof id;
        int rc = tk_rendezvous(rendezvous, r, &id, &n, timeout_s, e);
        if (!rc && n != sizeof id) rc = tk_err_set(e, TK_EDATA, "rendezvous %s: got %zu bytes, not an NCCL id", rendezvous, n);
        if (rc) {
            free(m);
            return rc;
        }
    } else {
        ncclGetUniqueId(&id);
    }
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    ncclResult_t st = ncclCommInitRankConfig(&m->nccl, r->world, id, r->rank, &cfg);
    if (st != ncclSuccess && st != ncclInProgress) {
        int rc = nccl_fail(m, e, st, "ncclCommInitRankConfig failed");
        free(m);
        return rc;
    }
    int rc = nccl_settle(m, st, tk_now() + timeout_s, "NCCL communicator initialization", e);
    if (rc) {
        tk_comm_destroy(m);
        return rc;
    }
    *out = m;
    return 0;
#else
    (void)rendezvous;
    (void)timeout_s;
    free(m);
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}

void tk_comm_destroy(tk_comm *m) {
    if (!m) return;
#ifdef TK_HAVE_CUDA
    if (m->nccl) {
        if (!m->aborted) {
            ncclResult_t st = ncclCommFinalize(m->nccl);
            double deadline = tk_now() + 10;
            while (st == ncclInProgress && tk_now() < deadline) ncclCommGetAsyncError(m->nccl, &st);
            if (st == ncclSuccess) ncclCommDestroy(m->nccl);
            else ncclCommAbort(m->nccl);
        } else {
            // ncclCommAbort already freed it.
        }
    }
#endif
    free(m);
}

// The cpu backend (world size 1): every collective is a scaled copy. Returns -1 on cuda.
static int local_copy(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, float scale,
                      int stream, tk_err *e) {
    if (m->ctx->backend == TK_BACKEND_CPU) {
        if (scale != 1.0f && t == TK_F32) {
            const float *s = send;
            float *d = recv;
            for (size_t i = 0; i < count; i++) d[i] = s[i] * scale;
            return 0;
        }
        if (scale != 1.0f) return tk_err_set(e, TK_EINTERNAL, "scaled collective on %s (cpu)", tk_dtype_name(t));
        if (send != recv) memmove(recv, send, count * tk_dtype_size(t));
        return 0;
    }
    (void)stream;
    return -1; // not handled here: the cuda path runs NCCL even for one rank
}

#ifdef TK_HAVE_CUDA
// Round-to-nearest-even conversions of the (finite, normal-range) scale factor.
static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}
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

static int scaled_sum(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, float scale,
                      int stream, int scatter, tk_err *e) {
    ncclDataType_t nt;
    if (nccl_type(t, &nt)) return tk_err_set(e, TK_EINTERNAL, "collective: bad dtype");
    cudaStream_t s = (cudaStream_t)m->ctx->stream[stream];
    ncclRedOp_t op = ncclSum;
    int custom = scale != 1.0f;
    if (custom) {
        // The scalar has the element type (NCCL's rule for pre-multiplied sums).
        union { float f; uint16_t b; } sc;
        if (t == TK_BF16) sc.b = f32_to_bf16(scale);
        else if (t == TK_F16) sc.b = f32_to_f16(scale);
        else if (t == TK_F32) sc.f = scale;
        else return tk_err_set(e, TK_EINTERNAL, "scaled sum of integers");
        ncclResult_t st = ncclRedOpCreatePreMulSum(&op, &sc, nt, ncclScalarHostImmediate, m->nccl);
        TRY(nccl_settle(m, st, tk_now() + 60, "ncclRedOpCreatePreMulSum", e));
    }
    ncclResult_t st = scatter ? ncclReduceScatter(send, recv, count, nt, op, m->nccl, s)
                              : ncclAllReduce(send, recv, count, nt, op, m->nccl, s);
    int rc = nccl_settle(m, st, tk_now() + 60, scatter ? "ncclReduceScatter" : "ncclAllReduce", e);
    if (custom && !m->aborted) ncclRedOpDestroy(op, m->nccl);
    return rc;
}
#endif

int tk_allreduce_sum(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, float scale,
                     int stream, tk_err *e) {
    int rc = local_copy(m, send, recv, count, t, scale, stream, e);
    if (rc != -1) return rc;
#ifdef TK_HAVE_CUDA
    return scaled_sum(m, send, recv, count, t, scale, stream, 0, e);
#else
    return TK_EINTERNAL;
#endif
}

int tk_reduce_scatter_sum(tk_comm *m, const void *send, void *recv, size_t recv_count, tk_dtype t,
                          float scale, int stream, tk_err *e) {
    int rc = local_copy(m, send, recv, recv_count, t, scale, stream, e);
    if (rc != -1) return rc;
#ifdef TK_HAVE_CUDA
    return scaled_sum(m, send, recv, recv_count, t, scale, stream, 1, e);
#else
    return TK_EINTERNAL;
#endif
}

int tk_all_gather(tk_comm *m, const void *send, void *recv, size_t send_count, tk_dtype t, int stream,
                  tk_err *e) {
    int rc = local_copy(m, send, recv, send_count, t, 1.0f, stream, e);
    if (rc != -1) return rc;
#ifdef TK_HAVE_CUDA
    ncclDataType_t nt;
    if (nccl_type(t, &nt)) return tk_err_set(e, TK_EINTERNAL, "collective: bad dtype");
    ncclResult_t st = ncclAllGather(send, recv, send_count, nt, m->nccl, (cudaStream_t)m->ctx->stream[stream]);
    return nccl_settle(m, st, tk_now() + 60, "ncclAllGather", e);
#else
    return TK_EINTERNAL;
#endif
}

int tk_all_to_all(tk_comm *m, const void *send, void *recv, size_t count, tk_dtype t, int stream,
                  tk_err *e) {
    int rc = local_copy(m, send, recv, count, t, 1.0f, stream, e);
    if (rc != -1) return rc;
#ifdef TK_HAVE_CUDA
    ncclDataType_t nt;
    if (nccl_type(t, &nt)) return tk_err_set(e, TK_EINTERNAL, "collective: bad dtype");
    // Grouped point-to-point: works on every NCCL 2.x, and NCCL runs the pairs concurrently.
    cudaStream_t s = (cudaStream_t)m->ctx->stream[stream];
    size_t bytes = count * tk_dtype_size(t);
    ncclGroupStart();
    for (int p = 0; p < m->world; p++) {
        ncclSend((const char *)send + (size_t)p * bytes, count, nt, p, m->nccl, s);
        ncclRecv((char *)recv + (size_t)p * bytes, count, nt, p, m->nccl, s);
    }
    ncclResult_t st = ncclGroupEnd();
    return nccl_settle(m, st, tk_now() + 60, "all-to-all", e);
#else
    return TK_EINTERNAL;
#endif
}

int tk_comm_wait(tk_comm *m, int stream, double timeout_s, tk_err *e) {
    if (m->ctx->backend == TK_BACKEND_CPU) return 0;
#ifdef TK_HAVE_CUDA
    cudaEvent_t ev;
    if (cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess)
        return tk_err_set(e, TK_EDEVICE, "cannot create a CUDA event");
    cudaEventRecord(ev, (cudaStream_t)m->ctx->stream[stream]);
    double deadline = tk_now() + timeout_s;
    int rc = 0;
    while (1) {
        cudaError_t q = cudaEventQuery(ev);
        if (q == cudaSuccess) break;
        if (q != cudaErrorNotReady) {
            rc = tk_err_set(e, TK_EDEVICE, "rank %d: %s", m->rank, cudaGetErrorString(q));
            tk_err_lib(e, "cuda", (int)q);
            break;
        }
        ncclResult_t async = ncclSuccess;
        ncclCommGetAsyncError(m->nccl, &async);
        if (async != ncclSuccess && async != ncclInProgress) {
            rc = nccl_fail(m, e, async, "collective failed");
            ncclCommAbort(m->nccl);
            m->aborted = 1;
            break;
        }
        if (tk_now() > deadline) {
            ncclCommAbort(m->nccl);
            m->aborted = 1;
            rc = tk_err_set(e, TK_EDEVICE, "rank %d of %d: collectives did not complete within %g s; communicator aborted",
                            m->rank, m->world, timeout_s);
            tk_err_hint(e, "a peer rank died or hangs; see its log");
            break;
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    cudaEventDestroy(ev);
    return rc;
#else
    (void)stream;
    (void)timeout_s;
    (void)e;
    return 0;
#endif
}
