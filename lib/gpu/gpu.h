// libgpu: the execution context, memory, streams, graphs, and the GEMM's arguments and cuBLASLt
// wrapper shared by every workload. One context holds everything (no global state): the backend
// (cpu reference or cuda), the device, streams, library handles, workspaces. Every op has one
// signature and two implementations, kernels/NAME_ref.c (the specification, plain C + OpenMP) and
// kernels/NAME.cu; its dispatcher, kernels/NAME.c, picks by ctx->backend. Pointers passed to ops
// live in the backend's memory (host memory for cpu, device memory for cuda). lib/gpu includes
// nothing from kernels/ or above (contrib/tools/layout.py).
#ifndef TK_GPU_H
#define TK_GPU_H

#include <stddef.h>
#include <stdint.h>

#include "core/err.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { TK_BACKEND_CPU = 0, TK_BACKEND_CUDA = 1 } tk_backend;

typedef enum { TK_F32 = 0, TK_BF16 = 1, TK_F16 = 2, TK_I32 = 3, TK_I64 = 4, TK_U8 = 5 } tk_dtype;
size_t tk_dtype_size(tk_dtype t);
const char *tk_dtype_name(tk_dtype t);   // "F32", "BF16", ... (the safetensors names)

// cuda: TK_STREAM_COMM has the device's greatest priority, the others the default (least);
// CUDA graphs keep it per kernel node (ctx.c).
enum { TK_STREAM_COMPUTE = 0, TK_STREAM_COMM = 1, TK_STREAM_COPY = 2, TK_NSTREAMS = 3 };

typedef struct tk_ctx {
    tk_backend backend;
    int device;                  // CUDA device ordinal (cuda backend)
    int threads;                 // OpenMP threads for the cpu backend (0 = default)
    void *stream[TK_NSTREAMS];   // cudaStream_t
    void *blaslt;                // cublasLtHandle_t
    void *gemm_ws;               // cuBLASLt workspace (device)
    size_t gemm_ws_bytes;
    void *gemm_cache;            // per-shape algorithm cache (opaque, owned by the cuda side)
    int capturing;               // inside tk_graph_begin/end: no sync, no allocation allowed
    int deterministic;           // pick deterministic algorithms (no atomics in reductions)
    int gemm_sm_margin;          // cuda: SMs the GEMMs planned from now on leave to a collective
                                 // running beside them (cuBLASLt's SM count target; 0: all)
} tk_ctx;

// "cpu", "cuda" or "auto" (cuda when a device is present, else cpu).
int tk_backend_parse(const char *s, tk_backend *b, tk_err *e);
int tk_cuda_device_count(void);                 // 0 when built without CUDA or no device
int tk_ctx_create(tk_ctx **c, tk_backend b, int device, tk_err *e);
void tk_ctx_destroy(tk_ctx *c);
int tk_ctx_sync(tk_ctx *c, tk_err *e);          // wait for all streams; surfaces async errors
const char *tk_ctx_describe(const tk_ctx *c);   // "cpu (2 threads)" / "cuda:0 NVIDIA H100 ..."

// Memory in the backend's space. Allocation happens at start-up only (arenas below).
int tk_malloc(tk_ctx *c, void **p, size_t bytes, tk_err *e);
void tk_free(tk_ctx *c, void *p);
int tk_host_alloc_pinned(tk_ctx *c, void **p, size_t bytes, tk_err *e); // pinned on cuda, malloc on cpu
void tk_host_free_pinned(tk_ctx *c, void *p);
int tk_memcpy_h2d(tk_ctx *c, void *dst, const void *src, size_t bytes, int stream, tk_err *e);
int tk_memcpy_d2h(tk_ctx *c, void *dst, const void *src, size_t bytes, int stream, tk_err *e);
int tk_memcpy_d2d(tk_ctx *c, void *dst, const void *src, size_t bytes, int stream, tk_err *e);
int tk_memset0(tk_ctx *c, void *p, size_t bytes, int stream, tk_err *e);
// Strided copy within the backend's memory (device to device): rows of width bytes, from rows
// spaced spitch bytes apart to rows spaced dpitch apart (pitches >= width). The re-layouts of
// the distributed DLRM (the all-to-all buffers) are such copies. Enqueued only (capturable in a
// CUDA graph); on cpu it copies at once. Source and destination must not overlap.
int tk_memcpy2d(tk_ctx *c, void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                size_t height, int stream, tk_err *e);
// The copies above return only when the host buffer may be reused (on cuda they wait for the
// stream unless capturing). This one only enqueues: src must be pinned (tk_host_alloc_pinned)
// and stay untouched until the stream has reached the copy (record an event after it and wait
// for that event with tk_event_sync). On cpu it copies at once.
int tk_memcpy_h2d_async(tk_ctx *c, void *dst, const void *src, size_t bytes, int stream, tk_err *e);

// Events order work between streams without the host (cuda); on cpu every call is a no-op, since
// cpu work is done when the call returns.
typedef struct tk_event {
    void *ev; // cudaEvent_t (timing disabled, unless made by tk_event_create_timed)
    double t; // cpu: the host clock (tk_now) at the last record
} tk_event;
int tk_event_create(tk_ctx *c, tk_event *ev, tk_err *e);
// An event that can be timed: tk_event_elapsed_ms gives the time between two such events once
// both have completed (after a sync); on cpu the host time between the two records.
int tk_event_create_timed(tk_ctx *c, tk_event *ev, tk_err *e);
int tk_event_elapsed_ms(tk_ctx *c, const tk_event *from, const tk_event *to, double *ms, tk_err *e);
void tk_event_destroy(tk_event *ev);
int tk_event_record(tk_ctx *c, tk_event *ev, int stream, tk_err *e); // mark the stream's work so far
int tk_event_wait(tk_ctx *c, int stream, tk_event *ev, tk_err *e);   // stream waits on the device
int tk_event_sync(tk_ctx *c, tk_event *ev, tk_err *e);               // the host waits

// Arenas: one allocation at start-up, bump-allocated views, stable addresses (so a captured
// CUDA graph stays valid). Parameters and gradients each live in ONE flat arena so a
// distributed optimizer can reduce-scatter / all-gather a single buffer.
typedef struct tk_arena {
    char *base;
    size_t cap, used;
    char name[32];
} tk_arena;
int tk_arena_init(tk_ctx *c, tk_arena *a, size_t bytes, const char *name, tk_err *e);
// 256-byte aligned view; fails with TK_EINTERNAL naming the arena when it is full.
int tk_arena_take(tk_arena *a, size_t bytes, void **p, tk_err *e);
void tk_arena_release(tk_ctx *c, tk_arena *a);

// GEMM: D = alpha * op(A) @ op(B) + beta * C, then the epilogue, all matrices ROW-major.
//   op(A) is (M, K), op(B) is (K, N), D and C are (M, N). transa: A stored (K, M); transb: B stored (N, K).
// Epilogues (named after cuBLASLt's):
//   TK_EPI_NONE
//   TK_EPI_BIAS            D += bias[n]                          (bias: N)
//   TK_EPI_RELU_BIAS       D = relu(D + bias); aux records D > 0  (forward of Linear+ReLU)
//   TK_EPI_DRELU           D = D * relu'(aux)                     (aux from the forward GEMM)
//   TK_EPI_DRELU_BGRAD     D = D * relu'(aux); bgrad[n] = sum_m D[m, n]   (bgrad: N, fp32)
//   TK_EPI_BGRADB          bgrad[m] = sum_k op(A)[m, k]           (bgrad: M, fp32)
//       This is the bias gradient fused into the weight-gradient GEMM: with W stored (out, in)
//       as PyTorch does, dW = dY^T @ X is M=out, K=batch, A = dY (transa), and the bias gradient
//       is the sum of dY over the batch. (In cuBLASLt's column-major view our A is its B,
//       hence the name.)
//   TK_EPI_GELU_BIAS       D = gelu(D + bias); aux = D + bias     (forward of Linear+GELU; aux may be NULL)
//   TK_EPI_DGELU           D = D * gelu'(aux)                     (aux from the forward GEMM)
//   TK_EPI_DGELU_BGRAD     D = D * gelu'(aux); bgrad[n] = sum_m D[m, n]
//       GELU is the exact (erf) form of lib/core/gelu.h, Hugging Face's "gelu". cuBLASLt's
//       own GELU epilogues use the tanh approximation, so on cuda these run as the plain GEMM
//       followed by our epilogue kernel (lib/gpu/gemm_cublaslt.cu).
// aux is an opaque mask whose layout belongs to the backend (u8 per element on cpu, cuBLASLt's
// bit mask on cuda): size it with tk_gemm_aux_bytes and never read it outside tk_gemm. The GELU
// epilogues' aux is the pre-activation, (M, N) row-major in cd_type: tk_gemm_gelu_aux_bytes.
typedef enum {
    TK_EPI_NONE = 0,
    TK_EPI_BIAS,
    TK_EPI_RELU_BIAS,
    TK_EPI_DRELU,
    TK_EPI_DRELU_BGRAD,
    TK_EPI_BGRADB,
    TK_EPI_GELU_BIAS,
    TK_EPI_DGELU,
    TK_EPI_DGELU_BGRAD,
} tk_epilogue;

typedef struct tk_gemm_args {
    int M, N, K;
    int transa, transb;
    tk_dtype ab_type;            // A and B: TK_F32 (cpu and cuda) or TK_BF16/TK_F16 (cuda)
    tk_dtype cd_type;            // C and D
    const void *A, *B;
    const void *C;               // may equal D (accumulate in place) or be NULL (beta must be 0)
    void *D;
    float alpha, beta;
    tk_epilogue epi;
    const void *bias;            // N, in cd_type (fp32 on cpu)
    void *aux;                   // relu mask, tk_gemm_aux_bytes(c, M, N) bytes
    void *bgrad;                 // fp32: N for DRELU_BGRAD, M for BGRADB
    int stream;
    int tf32;                    // fp32 A/B on cuda: let the tensor cores round them to TF32
                                 // (10-bit mantissa, fp32 accumulation); cpu ignores it
    // A strided batch (attention's per-head products): batch > 1 computes `batch` independent
    // GEMMs of the shape above, the i-th on A + i stride_a, B + i stride_b, C and D + i stride_c
    // (strides in elements). Epilogue NONE only. 0 or 1: one GEMM.
    int batch;
    int64_t stride_a, stride_b, stride_c;
} tk_gemm_args;
// The entry point, tk_gemm, is an op: kernels/gemm.h (its dispatcher kernels/gemm.c, its reference
// kernels/gemm_ref.c). cuBLASLt's side of it, the library wrapper, is here:
#ifdef TK_HAVE_CUDA
int tk_gemm_cuda(tk_ctx *c, const tk_gemm_args *g, tk_err *e); // lib/gpu/gemm_cublaslt.cu
#endif

// Whole-iteration CUDA graphs (cuda backend; on cpu these just run the body eagerly).
typedef struct tk_graph { void *graph, *exec; int valid; } tk_graph;
int tk_graph_begin(tk_ctx *c, tk_err *e);                // start capture on the compute stream
int tk_graph_end(tk_ctx *c, tk_graph *g, tk_err *e);     // end capture, instantiate
int tk_graph_launch(tk_ctx *c, tk_graph *g, tk_err *e);
void tk_graph_destroy(tk_graph *g);

// NVTX ranges (no-ops on cpu or when NVTX is absent).
void tk_range_push(const char *name);
void tk_range_pop(void);

#ifdef __cplusplus
}
#endif

#endif
