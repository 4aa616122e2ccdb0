// The execution context and memory for both backends. The cuda side here uses only the CUDA
// runtime API (plain C); cuBLASLt lives in lib/gpu/gemm_cublaslt.cu.
#include <errno.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/progress.h"
#include "gpu/gpu.h"

#ifdef TK_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <nvtx3/nvToolsExt.h>

// Fill e from a CUDA runtime status (TK_EDEVICE) and return it.
static int cuda_fail(tk_err *e, cudaError_t st, const char *what) {
    tk_err_set(e, TK_EDEVICE, "%s: %s", what, cudaGetErrorString(st));
    tk_err_lib(e, "cuda", (int)st);
    if (st == cudaErrorNoDevice || st == cudaErrorInsufficientDriver)
        tk_err_hint(e, "no usable NVIDIA GPU here; use --backend cpu");
    else if (st == cudaErrorMemoryAllocation)
        tk_err_hint(e, "the model or batch does not fit in GPU memory");
    return TK_EDEVICE;
}
#define CUDA_TRY(call, what)                                                                       \
    do {                                                                                           \
        cudaError_t st_ = (call);                                                                  \
        if (st_ != cudaSuccess) return cuda_fail(e, st_, what);                                    \
    } while (0)
int tk_gemm_cuda_init(tk_ctx *c, tk_err *e);   // gemm_cublaslt.cu
void tk_gemm_cuda_fini(tk_ctx *c);
#endif

size_t tk_dtype_size(tk_dtype t) {
    switch (t) {
    case TK_F32: case TK_I32: return 4;
    case TK_BF16: case TK_F16: return 2;
    case TK_I64: return 8;
    case TK_U8: return 1;
    }
    return 0;
}

const char *tk_dtype_name(tk_dtype t) {
    switch (t) {
    case TK_F32: return "F32";
    case TK_BF16: return "BF16";
    case TK_F16: return "F16";
    case TK_I32: return "I32";
    case TK_I64: return "I64";
    case TK_U8: return "U8";
    }
    return "?";
}

#ifdef TK_HAVE_CUDA
// Before the process's first CUDA call: 32 hardware work queues instead of CUDA's 8 (unless the
// environment names its own count), so work on many streams (nvJPEG's ~20 per decoder, beside the
// training step's) does not queue behind unrelated kernels: on an H100, ResNet-50 with the GPU
// decoder went from 0.86x to 0.97x of the in-memory step, the in-memory step unchanged
// (contrib/bench/NOTES.md). The count is read when CUDA starts, so every entry that may be first
// sets it.
static void cuda_env(void) { setenv("CUDA_DEVICE_MAX_CONNECTIONS", "32", 0); }
#endif

int tk_cuda_device_count(void) {
#ifdef TK_HAVE_CUDA
    cuda_env();
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); // clear the sticky "no device" status
        return 0;
    }
    return n;
#else
    return 0;
#endif
}

int tk_backend_parse(const char *s, tk_backend *b, tk_err *e) {
    if (strcmp(s, "cpu") == 0) *b = TK_BACKEND_CPU;
    else if (strcmp(s, "cuda") == 0) *b = TK_BACKEND_CUDA;
    else if (strcmp(s, "auto") == 0) *b = tk_cuda_device_count() > 0 ? TK_BACKEND_CUDA : TK_BACKEND_CPU;
    else return tk_err_set(e, TK_EUSAGE, "--backend: expected cpu, cuda or auto, got '%s'", s);
    return 0;
}

int tk_ctx_create(tk_ctx **out, tk_backend b, int device, tk_err *e) {
    *out = NULL;
    tk_ctx *c = calloc(1, sizeof *c);
    if (!c) return tk_err_set(e, TK_EIO, "out of host memory creating a context");
    c->backend = b;
    c->device = device;
    if (b == TK_BACKEND_CPU) {
        c->threads = omp_get_max_threads();
        *out = c;
        return 0;
    }
#ifdef TK_HAVE_CUDA
    cuda_env();
    int rc = 0;
    cudaError_t st = cudaSetDevice(device);
    if (st != cudaSuccess) {
        rc = cuda_fail(e, st, "cannot use the CUDA device");
        goto fail;
    }
    // The comm stream gets the device's greatest priority: a collective's kernel (NCCL's, or a
    // copy at world size 1) queued beside a long compute kernel gets the SMs as soon as that
    // kernel's blocks retire, instead of after all of its blocks (a 2-rank all-reduce waits for
    // both ranks' kernels to be resident). Compute and copy keep the default (least) priority:
    // the copy stream's plan must not starve behind the step either.
    int least = 0, greatest = 0;
    st = cudaDeviceGetStreamPriorityRange(&least, &greatest);
    if (st != cudaSuccess) {
        rc = cuda_fail(e, st, "cannot read the CUDA stream priority range");
        goto fail;
    }
    for (int i = 0; i < TK_NSTREAMS; i++) {
        cudaStream_t s;
        st = cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, i == TK_STREAM_COMM ? greatest : least);
        if (st != cudaSuccess) {
            rc = cuda_fail(e, st, "cannot create a CUDA stream");
            goto fail;
        }
        c->stream[i] = s;
    }
    rc = tk_gemm_cuda_init(c, e);
    if (rc) goto fail;
    *out = c;
    return 0;
fail:
    tk_ctx_destroy(c);
    return rc;
#else
    free(c);
    tk_err_set(e, TK_EDEVICE, "this trainkit was built without CUDA");
    return tk_err_hint(e, "rebuild with nvcc on the PATH (CUDA_HOME), or use --backend cpu");
#endif
}

void tk_ctx_destroy(tk_ctx *c) {
    if (!c) return;
#ifdef TK_HAVE_CUDA
    if (c->backend == TK_BACKEND_CUDA) {
        tk_gemm_cuda_fini(c);
        for (int i = 0; i < TK_NSTREAMS; i++)
            if (c->stream[i]) cudaStreamDestroy((cudaStream_t)c->stream[i]);
    }
#endif
    free(c);
}

int tk_ctx_sync(tk_ctx *c, tk_err *e) {
    (void)e;
    if (c->backend == TK_BACKEND_CPU) return 0;
#ifdef TK_HAVE_CUDA
    for (int i = 0; i < TK_NSTREAMS; i++)
        if (c->stream[i]) CUDA_TRY(cudaStreamSynchronize((cudaStream_t)c->stream[i]), "CUDA stream failed");
    CUDA_TRY(cudaGetLastError(), "CUDA kernel failed");
#endif
    return 0;
}

const char *tk_ctx_describe(const tk_ctx *c) {
    static _Thread_local char buf[400];
    if (c->backend == TK_BACKEND_CPU) {
        snprintf(buf, sizeof buf, "cpu (%d threads)", c->threads);
        return buf;
    }
#ifdef TK_HAVE_CUDA
    struct cudaDeviceProp p;
    if (cudaGetDeviceProperties(&p, c->device) == cudaSuccess)
        snprintf(buf, sizeof buf, "cuda:%d %s (sm_%d%d, %zu MiB)", c->device, p.name, p.major, p.minor,
                 p.totalGlobalMem >> 20);
    else
        snprintf(buf, sizeof buf, "cuda:%d", c->device);
#endif
    return buf;
}

int tk_malloc(tk_ctx *c, void **p, size_t bytes, tk_err *e) {
    *p = NULL;
    if (c->capturing) return tk_err_set(e, TK_EINTERNAL, "allocation inside a captured graph");
    if (bytes == 0) bytes = 1;
    if (c->backend == TK_BACKEND_CPU) {
        // 64-byte alignment for vector loads; calloc semantics so fresh buffers are defined.
        if (posix_memalign(p, 64, bytes) != 0) {
            *p = NULL;
            tk_err_set(e, TK_EIO, "out of host memory allocating %zu bytes", bytes);
            return tk_err_hint(e, "use a smaller config or batch");
        }
        memset(*p, 0, bytes);
        return 0;
    }
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaMalloc(p, bytes), "cudaMalloc failed");
    CUDA_TRY(cudaMemset(*p, 0, bytes), "cudaMemset failed");
    // cudaMemset runs on the legacy stream, asynchronously to the host, and our streams are
    // non-blocking: wait for it so no kernel on them can see the buffer before it is zeroed.
    CUDA_TRY(cudaDeviceSynchronize(), "cudaMemset failed");
#endif
    return 0;
}

void tk_free(tk_ctx *c, void *p) {
    if (!p) return;
    if (c->backend == TK_BACKEND_CPU) free(p);
#ifdef TK_HAVE_CUDA
    else cudaFree(p);
#endif
}

int tk_host_alloc_pinned(tk_ctx *c, void **p, size_t bytes, tk_err *e) {
#ifdef TK_HAVE_CUDA
    if (c->backend == TK_BACKEND_CUDA) {
        CUDA_TRY(cudaMallocHost(p, bytes ? bytes : 1), "cudaMallocHost failed");
        return 0;
    }
#endif
    tk_backend saved = c->backend;
    c->backend = TK_BACKEND_CPU;
    int rc = tk_malloc(c, p, bytes, e);
    c->backend = saved;
    return rc;
}

void tk_host_free_pinned(tk_ctx *c, void *p) {
    if (!p) return;
#ifdef TK_HAVE_CUDA
    if (c->backend == TK_BACKEND_CUDA) {
        cudaFreeHost(p);
        return;
    }
#endif
    (void)c;
    free(p);
}

#ifdef TK_HAVE_CUDA
static int cuda_copy(tk_ctx *c, void *dst, const void *src, size_t n, int stream, enum cudaMemcpyKind k,
                     tk_err *e) {
    cudaStream_t s = (cudaStream_t)c->stream[stream];
    CUDA_TRY(cudaMemcpyAsync(dst, src, n, k, s), "cudaMemcpyAsync failed");
    // Host-side buffers may be reused by the caller as soon as we return: copies that touch
    // pageable host memory complete before returning (except inside a captured graph).
    if (k != cudaMemcpyDeviceToDevice && !c->capturing) CUDA_TRY(cudaStreamSynchronize(s), "copy failed");
    return 0;
}
#endif

#define COPY_FN(name, kind)                                                                        \
    int name(tk_ctx *c, void *dst, const void *src, size_t bytes, int stream, tk_err *e) {         \
        (void)stream;                                                                              \
        (void)e;                                                                                   \
        if (c->backend == TK_BACKEND_CPU) {                                                        \
            if (bytes) memmove(dst, src, bytes);                                                   \
            return 0;                                                                              \
        }                                                                                          \
        COPY_CUDA(kind);                                                                           \
        return 0;                                                                                  \
    }
#ifdef TK_HAVE_CUDA
#define COPY_CUDA(kind) return cuda_copy(c, dst, src, bytes, stream, kind, e)
#else
#define COPY_CUDA(kind) return tk_err_set(e, TK_EDEVICE, "built without CUDA")
#endif
COPY_FN(tk_memcpy_h2d, cudaMemcpyHostToDevice)
COPY_FN(tk_memcpy_d2h, cudaMemcpyDeviceToHost)
COPY_FN(tk_memcpy_d2d, cudaMemcpyDeviceToDevice)

int tk_memcpy2d(tk_ctx *c, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                size_t height, int stream, tk_err *e) {
    if (width > dpitch || width > spitch)
        return tk_err_set(e, TK_EINTERNAL, "memcpy2d: width %zu > pitch (%zu, %zu)", width, dpitch, spitch);
    if (!width || !height) return 0;
    if (c->backend == TK_BACKEND_CPU) {
        for (size_t i = 0; i < height; i++) memcpy((char *)dst + i * dpitch, (const char *)src + i * spitch, width);
        return 0;
    }
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, cudaMemcpyDeviceToDevice,
                               (cudaStream_t)c->stream[stream]),
             "cudaMemcpy2DAsync failed");
    return 0;
#else
    (void)stream;
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}

int tk_memcpy_h2d_async(tk_ctx *c, void *dst, const void *src, size_t bytes, int stream, tk_err *e) {
    if (c->backend == TK_BACKEND_CPU) {
        if (bytes) memmove(dst, src, bytes);
        return 0;
    }
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, (cudaStream_t)c->stream[stream]),
             "cudaMemcpyAsync failed");
    return 0;
#else
    (void)stream;
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}

static int event_create(tk_ctx *c, tk_event *ev, int timed, tk_err *e) {
    ev->ev = NULL;
    ev->t = 0;
    if (c->backend == TK_BACKEND_CPU) return 0;
#ifdef TK_HAVE_CUDA
    cudaEvent_t x;
    CUDA_TRY(cudaEventCreateWithFlags(&x, timed ? cudaEventDefault : cudaEventDisableTiming),
             "cannot create a CUDA event");
    ev->ev = x;
    return 0;
#else
    (void)timed;
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}

int tk_event_create(tk_ctx *c, tk_event *ev, tk_err *e) { return event_create(c, ev, 0, e); }
int tk_event_create_timed(tk_ctx *c, tk_event *ev, tk_err *e) { return event_create(c, ev, 1, e); }

int tk_event_elapsed_ms(tk_ctx *c, const tk_event *from, const tk_event *to, double *ms, tk_err *e) {
    if (c->backend == TK_BACKEND_CPU || !from->ev || !to->ev) {
        *ms = (to->t - from->t) * 1e3;
        return 0;
    }
#ifdef TK_HAVE_CUDA
    float f = 0;
    CUDA_TRY(cudaEventElapsedTime(&f, (cudaEvent_t)from->ev, (cudaEvent_t)to->ev), "cudaEventElapsedTime failed");
    *ms = f;
    return 0;
#else
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}

void tk_event_destroy(tk_event *ev) {
#ifdef TK_HAVE_CUDA
    if (ev->ev) cudaEventDestroy((cudaEvent_t)ev->ev);
#endif
    ev->ev = NULL;
}

int tk_event_record(tk_ctx *c, tk_event *ev, int stream, tk_err *e) {
    if (c->backend == TK_BACKEND_CPU || !ev->ev) {
        ev->t = tk_now();
        return 0;
    }
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaEventRecord((cudaEvent_t)ev->ev, (cudaStream_t)c->stream[stream]), "cudaEventRecord failed");
#else
    (void)stream, (void)e;
#endif
    return 0;
}

int tk_event_wait(tk_ctx *c, int stream, tk_event *ev, tk_err *e) {
    if (c->backend == TK_BACKEND_CPU || !ev->ev) return 0;
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaStreamWaitEvent((cudaStream_t)c->stream[stream], (cudaEvent_t)ev->ev, 0),
             "cudaStreamWaitEvent failed");
#else
    (void)stream, (void)e;
#endif
    return 0;
}

int tk_event_sync(tk_ctx *c, tk_event *ev, tk_err *e) {
    if (c->backend == TK_BACKEND_CPU || !ev->ev) return 0;
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaEventSynchronize((cudaEvent_t)ev->ev), "a copy or kernel failed");
#else
    (void)e;
#endif
    return 0;
}

int tk_memset0(tk_ctx *c, void *p, size_t bytes, int stream, tk_err *e) {
    (void)stream;
    if (c->backend == TK_BACKEND_CPU) {
        if (bytes) memset(p, 0, bytes);
        return 0;
    }
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaMemsetAsync(p, 0, bytes, (cudaStream_t)c->stream[stream]), "cudaMemsetAsync failed");
    return 0;
#else
    return tk_err_set(e, TK_EDEVICE, "built without CUDA");
#endif
}

int tk_arena_init(tk_ctx *c, tk_arena *a, size_t bytes, const char *name, tk_err *e) {
    memset(a, 0, sizeof *a);
    snprintf(a->name, sizeof a->name, "%s", name);
    void *p;
    TRY(tk_malloc(c, &p, bytes, e));
    a->base = p;
    a->cap = bytes;
    return 0;
}

int tk_arena_take(tk_arena *a, size_t bytes, void **p, tk_err *e) {
    size_t off = (a->used + 255) & ~(size_t)255;
    if (off > a->cap || bytes > a->cap - off) {
        *p = NULL;
        return tk_err_set(e, TK_EINTERNAL, "arena '%s' is full (%zu of %zu bytes used, %zu more asked)",
                          a->name, a->used, a->cap, bytes);
    }
    *p = a->base + off;
    a->used = off + bytes;
    return 0;
}

void tk_arena_release(tk_ctx *c, tk_arena *a) {
    tk_free(c, a->base);
    memset(a, 0, sizeof *a);
}

int tk_graph_begin(tk_ctx *c, tk_err *e) {
    (void)e;
    if (c->backend == TK_BACKEND_CPU) return 0;
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaStreamBeginCapture((cudaStream_t)c->stream[TK_STREAM_COMPUTE],
                                    cudaStreamCaptureModeThreadLocal),
             "cannot start CUDA graph capture");
    c->capturing = 1;
#endif
    return 0;
}

int tk_graph_end(tk_ctx *c, tk_graph *g, tk_err *e) {
    memset(g, 0, sizeof *g);
    (void)e;
    if (c->backend == TK_BACKEND_CPU) return 0;
#ifdef TK_HAVE_CUDA
    cudaGraph_t graph = NULL;
    c->capturing = 0;
    CUDA_TRY(cudaStreamEndCapture((cudaStream_t)c->stream[TK_STREAM_COMPUTE], &graph),
             "CUDA graph capture failed (an op synchronized or allocated inside the step?)");
    cudaGraphExec_t exec = NULL;
    // Kernel nodes keep the priority of the stream they were captured from (the comm stream's
    // collectives stay ahead of compute); without the flag all take the launch stream's.
    cudaError_t st = cudaGraphInstantiate(&exec, graph, cudaGraphInstantiateFlagUseNodePriority);
    if (st != cudaSuccess) {
        cudaGraphDestroy(graph);
        return cuda_fail(e, st, "cannot instantiate the CUDA graph");
    }
    g->graph = graph;
    g->exec = exec;
    g->valid = 1;
#endif
    return 0;
}

int tk_graph_launch(tk_ctx *c, tk_graph *g, tk_err *e) {
    (void)e;
    if (c->backend == TK_BACKEND_CPU || !g->valid) return 0;
#ifdef TK_HAVE_CUDA
    CUDA_TRY(cudaGraphLaunch((cudaGraphExec_t)g->exec, (cudaStream_t)c->stream[TK_STREAM_COMPUTE]),
             "cudaGraphLaunch failed");
#endif
    return 0;
}

void tk_graph_destroy(tk_graph *g) {
#ifdef TK_HAVE_CUDA
    if (g->exec) cudaGraphExecDestroy((cudaGraphExec_t)g->exec);
    if (g->graph) cudaGraphDestroy((cudaGraph_t)g->graph);
#endif
    memset(g, 0, sizeof *g);
}

void tk_range_push(const char *name) {
#ifdef TK_HAVE_CUDA
    nvtxRangePushA(name);
#else
    (void)name;
#endif
}

void tk_range_pop(void) {
#ifdef TK_HAVE_CUDA
    nvtxRangePop();
#endif
}
