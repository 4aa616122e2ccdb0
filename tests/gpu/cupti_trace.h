// A CUPTI activity tracer for the GPU benchmarks (a diagnostic, not part of trainkit): what a
// library we cannot see into (nvJPEG, cuDNN) queues and waits on. TK_TRACE=FILE in a benchmark
// that calls gt_trace_start() writes one line per record to FILE:
//   K start end stream corr grid block name     a kernel (concurrent kernel records)
//   C start end stream corr bytes kind          a copy (kind 1 HtoD, 2 DtoH, 8 DtoD, 10 PtoP, ...)
//   S start end stream corr bytes               a memset
//   Y start end stream corr type event          a synchronization (type 1 event synchronize,
//                                               2 stream wait event, 3 stream synchronize,
//                                               4 context synchronize; event: CUDA event id)
//   R start end thread corr name                a CUDA runtime API call (on the host)
//   D start end thread corr name                a driver API call (static cudarts call these)
//   P stream priority flags lib raised          a stream's creation (cuStreamCreate*); lib 1 where
//                                               libnvjpeg is on the creating call's stack; raised
//                                               1 where TK_TRACE_RAISE=1 gave it the greatest
//                                               priority (cudaLaunchAttributePriority) after
//                                               (an experiment: streams nvJPEG makes for itself)
//   M time thread label                         gt_trace_mark() from the benchmark
//   # ...                                       notes (versions, dropped records)
// Times are ns on CUPTI's clock, from the first record's clock at start; threads are system
// thread ids (gettid). contrib/bench/cupti_summary.py summarizes such a file.
//
// libcupti is opened at run time (TK_CUPTI_LIB, else libcupti.so.13, else the toolkit's), so
// no binary depends on it; without it, or without the headers, tracing says why and is off.
// Record layouts: only the fields common to the CUPTI 13.x record versions are read (kernel
// records 10 and 11 share them).
#ifndef TK_CUPTI_TRACE_H
#define TK_CUPTI_TRACE_H

#ifndef GT_TRACE_SAY // where the tracer's own notes go (trace_preload.c: stderr)
#define GT_TRACE_SAY printf
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"

#if __has_include(<cupti.h>)
#include <cupti.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef struct {
    FILE *f;
    uint64_t t0;
    pthread_mutex_t mu;
    CUpti_SubscriberHandle sub;
    int raise, greatest;
    CUptiResult (*GetTimestamp)(uint64_t *);
    CUptiResult (*GetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
    CUptiResult (*FlushAll)(uint32_t);
    CUptiResult (*Disable)(CUpti_ActivityKind);
    CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char **);
    CUptiResult (*GetStreamIdEx)(CUcontext, CUstream, uint8_t, uint32_t *);
    CUptiResult (*Unsubscribe)(CUpti_SubscriberHandle);
    CUptiResult (*GetDropped)(CUcontext, uint32_t, size_t *);
} gt_trace_t;
static gt_trace_t gt_tr_;

static uint64_t gt_tr_rel_(uint64_t t) { return t >= gt_tr_.t0 ? t - gt_tr_.t0 : 0; }

static void CUPTIAPI gt_tr_buf_req_(uint8_t **buf, size_t *size, size_t *max) {
    *size = 8u << 20;
    *buf = aligned_alloc(8, *size);
    *max = 0;
}

static const char *gt_tr_name_(CUpti_CallbackDomain d, uint32_t cbid) {
    const char *n = NULL;
    if (gt_tr_.GetCallbackName(d, cbid, &n) != CUPTI_SUCCESS || !n) return "?";
    return n;
}

static void CUPTIAPI gt_tr_buf_done_(CUcontext c, uint32_t sid, uint8_t *buf, size_t size, size_t valid) {
    (void)c, (void)sid, (void)size;
    CUpti_Activity *r = NULL;
    pthread_mutex_lock(&gt_tr_.mu);
    FILE *f = gt_tr_.f;
    while (f && gt_tr_.GetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
            const CUpti_ActivityKernel10 *k = (const void *)r;
            fprintf(f, "K %llu %llu %u %u %d %d %s\n", (unsigned long long)gt_tr_rel_(k->start),
                    (unsigned long long)gt_tr_rel_(k->end), k->streamId, k->correlationId, k->gridX * k->gridY * k->gridZ,
                    k->blockX * k->blockY * k->blockZ, k->name ? k->name : "?");
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
            const CUpti_ActivityMemcpy6 *m = (const void *)r;
            fprintf(f, "C %llu %llu %u %u %llu %u\n", (unsigned long long)gt_tr_rel_(m->start),
                    (unsigned long long)gt_tr_rel_(m->end), m->streamId, m->correlationId, (unsigned long long)m->bytes,
                    (unsigned)m->copyKind);
            break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
            const CUpti_ActivityMemset4 *m = (const void *)r;
            fprintf(f, "S %llu %llu %u %u %llu\n", (unsigned long long)gt_tr_rel_(m->start),
                    (unsigned long long)gt_tr_rel_(m->end), m->streamId, m->correlationId, (unsigned long long)m->bytes);
            break;
        }
        case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
            const CUpti_ActivitySynchronization2 *y = (const void *)r;
            fprintf(f, "Y %llu %llu %u %u %d %u\n", (unsigned long long)gt_tr_rel_(y->start),
                    (unsigned long long)gt_tr_rel_(y->end), y->streamId, y->correlationId, (int)y->type, y->cudaEventId);
            break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
            const CUpti_ActivityAPI *a = (const void *)r;
            int rt = r->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
            fprintf(f, "%c %llu %llu %u %u %s\n", rt ? 'R' : 'D', (unsigned long long)gt_tr_rel_(a->start),
                    (unsigned long long)gt_tr_rel_(a->end), a->threadId, a->correlationId,
                    gt_tr_name_(rt ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid));
            break;
        }
        default:
            break;
        }
    }
    pthread_mutex_unlock(&gt_tr_.mu);
    free(buf);
}

// cuStreamCreate(CUstream *, unsigned) and cuStreamCreateWithPriority(CUstream *, unsigned, int):
// their parameters as the driver API's callbacks pass them.
typedef struct { CUstream *ph; unsigned flags; } gt_tr_sc_;
typedef struct { CUstream *ph; unsigned flags; int prio; } gt_tr_scp_;

static void CUPTIAPI gt_tr_cb_(void *ud, CUpti_CallbackDomain dom, CUpti_CallbackId cbid, const void *data) {
    (void)ud;
    const CUpti_CallbackData *cd = data;
    if (dom != CUPTI_CB_DOMAIN_DRIVER_API || cd->callbackSite != CUPTI_API_EXIT || !cd->functionParams) return;
    CUstream s = NULL;
    unsigned flags = 0;
    int prio = 0;
    if (cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamCreate) {
        const gt_tr_sc_ *p = cd->functionParams;
        s = p->ph ? *p->ph : NULL, flags = p->flags;
    } else if (cbid == CUPTI_DRIVER_TRACE_CBID_cuStreamCreateWithPriority) {
        const gt_tr_scp_ *p = cd->functionParams;
        s = p->ph ? *p->ph : NULL, flags = p->flags, prio = p->prio;
    } else
        return;
    uint32_t id = 0;
    if (!s || gt_tr_.GetStreamIdEx(NULL, s, 0, &id) != CUPTI_SUCCESS) return;
    void *fr[48];
    int nf = backtrace(fr, 48), lib = 0, raised = 0;
    for (int i = 0; i < nf && !lib; i++) {
        Dl_info di;
        lib = dladdr(fr[i], &di) && di.dli_fname && strstr(di.dli_fname, "libnvjpeg");
    }
#ifndef GT_TRACE_NO_CUDART
    if (lib && gt_tr_.raise) {
        cudaLaunchAttributeValue v;
        memset(&v, 0, sizeof v);
        v.priority = gt_tr_.greatest;
        raised = cudaStreamSetAttribute((cudaStream_t)s, cudaLaunchAttributePriority, &v) == cudaSuccess;
        int now = 0;
        if (raised && cudaStreamGetPriority((cudaStream_t)s, &now) == cudaSuccess) raised = now == gt_tr_.greatest ? 1 : 2;
    }
#endif
    pthread_mutex_lock(&gt_tr_.mu);
    if (gt_tr_.f) fprintf(gt_tr_.f, "P %u %d %u %d %d\n", id, prio, flags, lib, raised);
    pthread_mutex_unlock(&gt_tr_.mu);
}

// Starts tracing where TK_TRACE names a file; 1 when on. Call before the work to trace (the
// streams created before it have no P line).
static int gt_trace_start(void) {
    const char *path = getenv("TK_TRACE");
    if (!path || !*path || gt_tr_.f) return gt_tr_.f != NULL;
    const char *names[] = {getenv("TK_CUPTI_LIB"), "libcupti.so.13", "/usr/local/cuda/lib64/libcupti.so.13"};
    void *l = NULL;
    for (size_t i = 0; i < sizeof names / sizeof *names && !l; i++)
        if (names[i] && *names[i]) l = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!l) {
        GT_TRACE_SAY("# trace: no libcupti (%s); TK_CUPTI_LIB=PATH names one\n", dlerror());
        return 0;
    }
    CUptiResult (*Register)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
    CUptiResult (*Enable)(CUpti_ActivityKind);
    CUptiResult (*SetTid)(CUpti_ActivityThreadIdType);
    CUptiResult (*Subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
    CUptiResult (*EnableCb)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain, CUpti_CallbackId);
    CUptiResult (*Version)(uint32_t *);
    struct { void *p; const char *n; } syms[] = {
        {&gt_tr_.GetTimestamp, "cuptiGetTimestamp"}, {&gt_tr_.GetNextRecord, "cuptiActivityGetNextRecord"},
        {&gt_tr_.FlushAll, "cuptiActivityFlushAll"}, {&gt_tr_.Disable, "cuptiActivityDisable"},
        {&gt_tr_.GetCallbackName, "cuptiGetCallbackName"}, {&gt_tr_.GetStreamIdEx, "cuptiGetStreamIdEx"},
        {&gt_tr_.Unsubscribe, "cuptiUnsubscribe"}, {&gt_tr_.GetDropped, "cuptiActivityGetNumDroppedRecords"},
        {&Register, "cuptiActivityRegisterCallbacks"}, {&Enable, "cuptiActivityEnable"},
        {&SetTid, "cuptiSetThreadIdType"}, {&Subscribe, "cuptiSubscribe"}, {&EnableCb, "cuptiEnableCallback"},
        {&Version, "cuptiGetVersion"}};
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!(*(void **)syms[i].p = dlsym(l, syms[i].n))) {
            GT_TRACE_SAY("# trace: libcupti lacks %s\n", syms[i].n);
            return 0;
        }
    FILE *f = fopen(path, "w");
    if (!f) {
        GT_TRACE_SAY("# trace: cannot write %s\n", path);
        return 0;
    }
    pthread_mutex_init(&gt_tr_.mu, NULL);
    uint32_t ver = 0;
    Version(&ver);
    gt_tr_.GetTimestamp(&gt_tr_.t0);
    fprintf(f, "# cupti api %u (built against %d)\n", ver, CUPTI_API_VERSION);
    int lo = 0, hi = 0;
#ifndef GT_TRACE_NO_CUDART // (trace_preload.c: no CUDA call of its own before the program picks its GPU)
    cudaDeviceGetStreamPriorityRange(&lo, &hi);
#endif
    fprintf(f, "# stream priorities: least %d, greatest %d\n", lo, hi);
    const char *ra = getenv("TK_TRACE_RAISE");
    gt_tr_.raise = ra && strcmp(ra, "1") == 0, gt_tr_.greatest = hi;
    if (gt_tr_.raise) fprintf(f, "# TK_TRACE_RAISE=1: streams libnvjpeg creates get priority %d\n", hi);
    gt_tr_.f = f;
    SetTid(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM);
    int rc = Register(gt_tr_buf_req_, gt_tr_buf_done_) != CUPTI_SUCCESS;
    const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
    for (size_t i = 0; !rc && i < sizeof kinds / sizeof *kinds; i++)
        if (Enable(kinds[i]) != CUPTI_SUCCESS) fprintf(f, "# cannot enable activity kind %d\n", (int)kinds[i]);
    if (!rc && Subscribe(&gt_tr_.sub, (CUpti_CallbackFunc)gt_tr_cb_, NULL) == CUPTI_SUCCESS) {
        EnableCb(1, gt_tr_.sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamCreate);
        EnableCb(1, gt_tr_.sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuStreamCreateWithPriority);
    } else
        gt_tr_.sub = NULL;
    if (rc) {
        GT_TRACE_SAY("# trace: cuptiActivityRegisterCallbacks failed\n");
        gt_tr_.f = NULL;
        fclose(f);
        return 0;
    }
    GT_TRACE_SAY("# trace: CUPTI %u, writing %s\n", ver, path);
    return 1;
}

static void gt_trace_mark(const char *fmt_label) {
    if (!gt_tr_.f) return;
    uint64_t t = 0;
    gt_tr_.GetTimestamp(&t);
    pthread_mutex_lock(&gt_tr_.mu);
    fprintf(gt_tr_.f, "M %llu %ld %s\n", (unsigned long long)gt_tr_rel_(t), (long)syscall(SYS_gettid), fmt_label);
    pthread_mutex_unlock(&gt_tr_.mu);
}

// Flushes what CUPTI holds (the traced work must be done) and closes the file.
static void gt_trace_stop(void) {
    if (!gt_tr_.f) return;
    const CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                        CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_SYNCHRONIZATION,
                                        CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) gt_tr_.Disable(kinds[i]);
    if (gt_tr_.sub) gt_tr_.Unsubscribe(gt_tr_.sub);
    gt_tr_.FlushAll(1);
    size_t dropped = 0;
    gt_tr_.GetDropped(NULL, 0, &dropped);
    pthread_mutex_lock(&gt_tr_.mu);
    fprintf(gt_tr_.f, "# dropped records %zu\n", dropped);
    fclose(gt_tr_.f);
    gt_tr_.f = NULL;
    pthread_mutex_unlock(&gt_tr_.mu);
}

#else // no CUPTI headers where this was built

static int gt_trace_start(void) {
    const char *path = getenv("TK_TRACE");
    if (path && *path) GT_TRACE_SAY("# trace: built without the CUPTI headers\n");
    return 0;
}
static void gt_trace_mark(const char *label) { (void)label; }
static void gt_trace_stop(void) {}

#endif

// TK_TRACE=FILE: n replays of a captured training step, each between marks "M step i" and
// "M end i" (contrib/bench/step_kernels.py lists the last one's kernels and the gaps between
// them); nonzero when a replay failed (e filled). Nothing without TK_TRACE. The caller includes
// gpu/gpu.h.
static inline int gt_trace_graph_steps(tk_ctx *c, tk_graph *g, int n, tk_err *e) {
    if (!gt_trace_start()) return 0;
    char mark[32];
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        snprintf(mark, sizeof mark, "step %d", i);
        gt_trace_mark(mark);
        rc = tk_graph_launch(c, g, e);
        if (!rc) rc = tk_ctx_sync(c, e);
        snprintf(mark, sizeof mark, "end %d", i);
        gt_trace_mark(mark);
    }
    gt_trace_stop();
    return rc;
}
#endif
