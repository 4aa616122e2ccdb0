// The context's stream priorities (lib/gpu/ctx.c): the comm stream has the device's greatest
// priority, so a collective queued beside a long compute kernel gets SMs as soon as that kernel's
// blocks retire, eagerly and inside a CUDA graph (kernel nodes keep their capture stream's
// priority). The collective is stood in for by a one-block probe kernel and the compute kernel by
// a hog: SMs x 8 blocks a wave, 24 waves of blocks that each spin ~20 us.
//   1. priorities: comm = greatest, compute = copy = least (and the device has two levels)
//   2. eager: the probe on the comm stream ends within the hog's first quarter; a probe on a
//      default-priority stream (printed, not checked: the contrast the priority buys)
//   3. graph: the captured probe node has the greatest priority, the hog's the least, and at
//      launch the probe again ends within the hog's first quarter
#include "gpu_test.h"

namespace {

struct times {
    unsigned long long hog_start, hog_end, probe_end;
};

__device__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

__global__ void hog(times *t, long long spin_cycles) {
    if (threadIdx.x == 0) atomicMin(&t->hog_start, now_ns());
    long long t0 = clock64();
    while (clock64() - t0 < spin_cycles) {
    }
    __syncthreads();
    if (threadIdx.x == 0) atomicMax(&t->hog_end, now_ns());
}

__global__ void probe(times *t) {
    if (threadIdx.x == 0) t->probe_end = now_ns();
}

cudaStream_t stream_of(int i) { return (cudaStream_t)gt_ctx_->stream[i]; }

int hog_blocks() {
    int sms = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
    return sms * 8 * 24; // 256 threads a block: 8 blocks fill an SM's 2,048 threads
}

long long spin_cycles() { // ~20 us at the SM clock
    int khz = 0;
    cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
    return (long long)khz * 20 / 1000;
}

void reset(times *d) {
    times h = {~0ull, 0, 0};
    if (cudaMemcpy(d, &h, sizeof h, cudaMemcpyHostToDevice) != cudaSuccess) gt_die_("cudaMemcpy", NULL);
}

// The probe's end and the hog's length, in microseconds from the hog's start.
void read(const times *d, double *probe_us, double *hog_us) {
    times h;
    if (cudaDeviceSynchronize() != cudaSuccess || cudaMemcpy(&h, d, sizeof h, cudaMemcpyDeviceToHost) != cudaSuccess)
        gt_die_("cudaMemcpy", NULL);
    *probe_us = ((double)h.probe_end - (double)h.hog_start) / 1e3;
    *hog_us = ((double)h.hog_end - (double)h.hog_start) / 1e3;
}

// The hog on the compute stream, then the probe on ps (no dependence between them).
void race(times *d, cudaStream_t ps, double *probe_us, double *hog_us) {
    reset(d);
    hog<<<hog_blocks(), 256, 0, stream_of(TK_STREAM_COMPUTE)>>>(d, spin_cycles());
    probe<<<1, 32, 0, ps>>>(d);
    read(d, probe_us, hog_us);
}

} // namespace

TK_TEST(priorities) {
    int least = 0, greatest = 0, p[TK_NSTREAMS];
    CHECK_EQ_INT(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
    CHECK(greatest < least);
    for (int i = 0; i < TK_NSTREAMS; i++) CHECK_EQ_INT(cudaStreamGetPriority(stream_of(i), &p[i]), cudaSuccess);
    CHECK_EQ_INT(p[TK_STREAM_COMM], greatest);
    CHECK_EQ_INT(p[TK_STREAM_COMPUTE], least);
    CHECK_EQ_INT(p[TK_STREAM_COPY], least);
}

TK_TEST(eager_probe_overtakes) {
    times *d = (times *)gt_dev(sizeof(times));
    cudaStream_t plain;
    CHECK_EQ_INT(cudaStreamCreateWithFlags(&plain, cudaStreamNonBlocking), cudaSuccess);
    double pu = 0, hu = 0, cu = 0, chu = 0;
    race(d, stream_of(TK_STREAM_COMM), &pu, &hu); // warm-up: module loading, clocks
    race(d, stream_of(TK_STREAM_COMM), &pu, &hu);
    race(d, plain, &cu, &chu);
    printf("# table stream priority: hog %.0f us; probe ends at %.1f us on the comm stream, %.1f us on a "
           "default-priority stream\n", hu, pu, cu);
    CHECK(hu > 200);
    CHECK(pu < hu / 4);
    cudaStreamDestroy(plain);
    tk_free(gt_ctx_, d);
}

TK_TEST(graph_keeps_priority) {
    times *d = (times *)gt_dev(sizeof(times));
    tk_err e = {0};
    tk_event fork, join;
    CHECK_EQ_INT(tk_event_create(gt_ctx_, &fork, &e), 0);
    CHECK_EQ_INT(tk_event_create(gt_ctx_, &join, &e), 0);
    tk_graph g;
    CHECK_EQ_INT(tk_graph_begin(gt_ctx_, &e), 0);
    CHECK_EQ_INT(tk_event_record(gt_ctx_, &fork, TK_STREAM_COMPUTE, &e), 0);
    CHECK_EQ_INT(tk_event_wait(gt_ctx_, TK_STREAM_COMM, &fork, &e), 0);
    hog<<<hog_blocks(), 256, 0, stream_of(TK_STREAM_COMPUTE)>>>(d, spin_cycles());
    probe<<<1, 32, 0, stream_of(TK_STREAM_COMM)>>>(d);
    CHECK_EQ_INT(tk_event_record(gt_ctx_, &join, TK_STREAM_COMM, &e), 0);
    CHECK_EQ_INT(tk_event_wait(gt_ctx_, TK_STREAM_COMPUTE, &join, &e), 0);
    CHECK_EQ_INT(tk_graph_end(gt_ctx_, &g, &e), 0);
    // The kernel nodes' priorities as captured.
    int least = 0, greatest = 0, nk = 0, hog_p = 1, probe_p = 1;
    cudaDeviceGetStreamPriorityRange(&least, &greatest);
    size_t n = 0;
    CHECK_EQ_INT(cudaGraphGetNodes((cudaGraph_t)g.graph, NULL, &n), cudaSuccess);
    cudaGraphNode_t nodes[16];
    CHECK(n <= 16);
    CHECK_EQ_INT(cudaGraphGetNodes((cudaGraph_t)g.graph, nodes, &n), cudaSuccess);
    for (size_t i = 0; i < n; i++) {
        cudaGraphNodeType t;
        cudaGraphNodeGetType(nodes[i], &t);
        if (t != cudaGraphNodeTypeKernel) continue;
        cudaKernelNodeParams kp;
        cudaLaunchAttributeValue v;
        CHECK_EQ_INT(cudaGraphKernelNodeGetParams(nodes[i], &kp), cudaSuccess);
        CHECK_EQ_INT(cudaGraphKernelNodeGetAttribute(nodes[i], cudaLaunchAttributePriority, &v), cudaSuccess);
        if (kp.func == (void *)hog) hog_p = v.priority;
        if (kp.func == (void *)probe) probe_p = v.priority;
        nk++;
    }
    CHECK_EQ_INT(nk, 2);
    CHECK_EQ_INT(hog_p, least);
    CHECK_EQ_INT(probe_p, greatest);
    for (int i = 0; i < 3; i++) { // the first launch uploads the graph
        double pu = 0, hu = 0;
        reset(d);
        CHECK_EQ_INT(tk_graph_launch(gt_ctx_, &g, &e), 0);
        read(d, &pu, &hu);
        printf("# table graph launch %d: hog %.0f us; probe node ends at %.1f us\n", i + 1, hu, pu);
        CHECK(hu > 200);
        CHECK(pu < hu / 4);
    }
    tk_graph_destroy(&g);
    tk_event_destroy(&fork);
    tk_event_destroy(&join);
    tk_free(gt_ctx_, d);
}


