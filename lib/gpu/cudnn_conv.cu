// cuDNN 9 convolutions (cudnn_conv.h, and the 3-D ones of cudnn_conv3d.h): the graph API's
// descriptors for one convolution, plans from the heuristics (the fastest of the first few, timed,
// unless deterministic), a per-shape cache, execution through a variant pack. Shapes are kept as
// tk_conv3d_shape; a 2-D one has depth 0 and 4-D descriptors (shape3).
#include "gpu/cudnn_conv.h"
#include "gpu/cudnn_conv3d.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef TK_HAVE_CUDNN
#include <cuda_runtime.h>
#include <cudnn_backend.h>
#include <dlfcn.h>
#include <pthread.h>
#include <time.h>

namespace {

// The entry points, from libcudnn.so.9 at run time.
struct Api {
    void *lib;
    decltype(&cudnnGetVersion) GetVersion;
    decltype(&cudnnGetErrorString) GetErrorString;
    decltype(&cudnnGetLastErrorString) GetLastErrorString;
    decltype(&cudnnCreate) Create;
    decltype(&cudnnDestroy) Destroy;
    decltype(&cudnnSetStream) SetStream;
    decltype(&cudnnBackendCreateDescriptor) CreateDescriptor;
    decltype(&cudnnBackendDestroyDescriptor) DestroyDescriptor;
    decltype(&cudnnBackendFinalize) Finalize;
    decltype(&cudnnBackendSetAttribute) SetAttribute;
    decltype(&cudnnBackendGetAttribute) GetAttribute;
    decltype(&cudnnBackendExecute) Execute;
};
Api api;
char load_msg[512];
pthread_once_t load_once = PTHREAD_ONCE_INIT;

void load(void) {
    void *l = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (!l) l = dlopen("libcudnn.so", RTLD_NOW | RTLD_LOCAL);
    if (!l) {
        snprintf(load_msg, sizeof load_msg, "cannot open libcudnn.so.9: %s", dlerror());
        return;
    }
    Api a = {};
    a.lib = l;
#define SYM(field, name)                                                                                    \
    if (!(*(void **)&a.field = dlsym(l, name))) {                                                          \
        snprintf(load_msg, sizeof load_msg, "libcudnn.so.9 lacks %s (cuDNN older than 9?)", name);          \
        return;                                                                                             \
    }
    SYM(GetVersion, "cudnnGetVersion");
    SYM(GetErrorString, "cudnnGetErrorString");
    SYM(GetLastErrorString, "cudnnGetLastErrorString");
    SYM(Create, "cudnnCreate");
    SYM(Destroy, "cudnnDestroy");
    SYM(SetStream, "cudnnSetStream");
    SYM(CreateDescriptor, "cudnnBackendCreateDescriptor");
    SYM(DestroyDescriptor, "cudnnBackendDestroyDescriptor");
    SYM(Finalize, "cudnnBackendFinalize");
    SYM(SetAttribute, "cudnnBackendSetAttribute");
    SYM(GetAttribute, "cudnnBackendGetAttribute");
    SYM(Execute, "cudnnBackendExecute");
#undef SYM
    size_t v = a.GetVersion();
    if (v < 90000) {
        snprintf(load_msg, sizeof load_msg, "libcudnn.so.9 reports version %zu; cuDNN 9 is needed", v);
        return;
    }
    snprintf(load_msg, sizeof load_msg, "cuDNN %zu.%zu.%zu", v / 10000, v / 100 % 100, v % 100);
    api = a;
}

// The handle attributes of the operation graph and the plan are deprecated in cuDNN 9 (the
// handle will come with the device properties) but still required by 9.x: named by value so the
// deprecation warning does not fire on every build.
const cudnnBackendAttributeName_t kGraphHandle = (cudnnBackendAttributeName_t)800; // OPERATIONGRAPH_HANDLE
const cudnnBackendAttributeName_t kPlanHandle = (cudnnBackendAttributeName_t)400;  // EXECUTION_PLAN_HANDLE

int dnn_fail(tk_err *e, cudnnStatus_t st, const char *what) {
    char last[256] = "";
    api.GetLastErrorString(last, sizeof last);
    tk_err_set(e, TK_EDEVICE, "cuDNN %s: %s%s%s", what, api.GetErrorString(st), last[0] ? ": " : "", last);
    return tk_err_lib(e, "cudnn", (int)st);
}
#define DNN(call, what)                                                                                     \
    do {                                                                                                    \
        cudnnStatus_t st_ = (call);                                                                         \
        if (st_ != CUDNN_STATUS_SUCCESS) return dnn_fail(e, st_, what);                                     \
    } while (0)

// A backend descriptor that destroys itself.
struct Desc {
    cudnnBackendDescriptor_t d = nullptr;
    Desc() = default;
    Desc(const Desc &) = delete;
    Desc &operator=(const Desc &) = delete;
    ~Desc() {
        if (d) api.DestroyDescriptor(d);
    }
    int make(cudnnBackendDescriptorType_t type, tk_err *e) {
        DNN(api.CreateDescriptor(type, &d), "create descriptor");
        return 0;
    }
    cudnnBackendDescriptor_t release() {
        cudnnBackendDescriptor_t r = d;
        d = nullptr;
        return r;
    }
};

int set(cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t a, cudnnBackendAttributeType_t t, int64_t n,
        const void *v, tk_err *e) {
    DNN(api.SetAttribute(d, a, t, n, v), "set attribute");
    return 0;
}

enum : int64_t {
    UID_X = 1, UID_W = 2, UID_Y = 3, UID_SUM = 4, UID_SQSUM = 5, UID_SCALE = 6, UID_BIAS = 7,
    UID_V1 = 101, UID_V2 = 102, UID_V3 = 103 // the prologue's virtual tensors
};

// The passes a plan runs: kernels/conv.h's three, then the fused ones (cuDNN's runtime fusion):
// the forward with BN's statistics in its epilogue (genstats); the same with BN-apply + ReLU of the
// previous BN as its prologue (x = relu(x scale + bias) per input channel, "scale-bias-relu");
// the filter gradient with that prologue on x.
constexpr int kFwdStats = 3, kFwdSbrStats = 4, kWgradSbr = 5, kNumPass = 6;
inline int is_fused(int pass) { return pass >= kFwdStats; }
inline int has_stats(int pass) { return pass == kFwdStats || pass == kFwdSbrStats; }
inline int has_prologue(int pass) { return pass == kFwdSbrStats || pass == kWgradSbr; }
inline int base_pass(int pass) { return pass == kWgradSbr ? TK_CONV_BWD_FILTER : is_fused(pass) ? TK_CONV_FWD : pass; }

// The shapes plans are made for: the 2-D ones of cudnn_conv.h as tk_conv3d_shape with D = T = Z = 0
// (so a 2-D shape keeps its 4-D descriptors and never matches a 3-D shape of depth 1), the 3-D ones
// of cudnn_conv3d.h as they are.
tk_conv3d_shape shape3(const tk_conv_shape *s) {
    return tk_conv3d_shape{s->N, 0, s->H, s->W, s->C, s->K, 0, s->R, s->S, s->stride, s->pad, 0, s->P, s->Q};
}
inline int64_t depth(int v) { return v ? v : 1; } // a 2-D shape's depth extents (0) as 1
inline int64_t x_numel(const tk_conv3d_shape *s) { return (int64_t)s->N * depth(s->D) * s->H * s->W * s->C; }
inline int64_t y_numel(const tk_conv3d_shape *s) { return (int64_t)s->N * depth(s->Z) * s->P * s->Q * s->K; }
inline int64_t w_numel(const tk_conv3d_shape *s) { return (int64_t)s->K * depth(s->T) * s->R * s->S * s->C; }

// "N2 128x128x128x32 -> 64 3x3x3/2" (3-D) or "N256 56x56x64 -> 64 3x3/1" (2-D): a shape in messages.
const char *shape_text(const tk_conv3d_shape *s, char *buf, size_t n) {
    if (s->D)
        snprintf(buf, n, "N%d %dx%dx%dx%d -> %d %dx%dx%d/%d", s->N, s->D, s->H, s->W, s->C, s->K, s->T, s->R, s->S,
                 s->stride);
    else
        snprintf(buf, n, "N%d %dx%dx%d -> %d %dx%d/%d", s->N, s->H, s->W, s->C, s->K, s->R, s->S, s->stride);
    return buf;
}

// A channels-last tensor: dims in cuDNN's N, C, [D,] H, W order (d 0: 4-D, NHWC; else 5-D, NDHWC),
// strides of channels-last; virt: an intermediate of a fused graph that never reaches memory.
int tensor(Desc &t, int64_t uid, cudnnDataType_t dt, int64_t n, int64_t c, int64_t d, int64_t h, int64_t w,
           tk_err *e, bool virt = false) {
    const int64_t nd = d ? 5 : 4, align = 16;
    int64_t dims[5] = {n, c, h, w}, strides[5] = {h * w * c, 1, w * c, c};
    if (d) {
        const int64_t d5[5] = {n, c, d, h, w}, s5[5] = {d * h * w * c, 1, h * w * c, w * c, c};
        memcpy(dims, d5, sizeof d5), memcpy(strides, s5, sizeof s5);
    }
    TRY(t.make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, e));
    if (virt) TRY(set(t.d, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt, e));
    TRY(set(t.d, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt, e));
    TRY(set(t.d, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, nd, dims, e));
    TRY(set(t.d, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, nd, strides, e));
    TRY(set(t.d, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid, e));
    TRY(set(t.d, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align, e));
    DNN(api.Finalize(t.d), "finalize tensor");
    return 0;
}

struct Plan {
    int pass;
    tk_conv3d_shape s;
    tk_dtype t;
    cudnnBackendDescriptor_t plan;
    cudnnBackendDescriptor_t keep[2]; // the plan's operation graph and engine configuration, kept
                                      // alive as long as it (as cudnn-frontend does)
    int64_t ws;
    float ms;         // the autotuning's time of the chosen engine (-1: not timed)
    char desc[224];
};

const char *const kPassName[kNumPass] = {"fwd", "dgrad", "wgrad", "fwd+stats", "sbr+fwd+stats", "sbr+wgrad"};

int same(const Plan &p, int pass, const tk_conv3d_shape *s, tk_dtype t) {
    return p.pass == pass && p.t == t && memcmp(&p.s, s, sizeof *s) == 0;
}

// Whether an engine's numerical notes suit the type: fp32 stays fp32 (no TF32 tensor cores, no
// reduced-precision reduction, no FFT or Winograd transforms: the reference's sums, exact on
// small integers); deterministic runs take no nondeterministic engine.
int notes_ok(cudnnBackendDescriptor_t cfg, tk_dtype t, int deterministic, int64_t *engine_id) {
    Desc eng;
    tk_err e0;
    tk_err *e = &e0;
    if (eng.make(CUDNN_BACKEND_ENGINE_DESCRIPTOR, e)) return 0;
    int64_t n = 0;
    if (api.GetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng.d) !=
        CUDNN_STATUS_SUCCESS)
        return 0;
    api.GetAttribute(eng.d, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, CUDNN_TYPE_INT64, 1, &n, engine_id);
    cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
    int64_t nn = 0;
    if (api.GetAttribute(eng.d, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                         CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &nn, notes) != CUDNN_STATUS_SUCCESS)
        return 0;
    for (int64_t i = 0; i < nn; i++) {
        if (deterministic && notes[i] == CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC) return 0;
        if (t == TK_F32 && (notes[i] == CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS ||
                            notes[i] == CUDNN_NUMERICAL_NOTE_TENSOR_CORE ||
                            notes[i] == CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION ||
                            notes[i] == CUDNN_NUMERICAL_NOTE_FFT || notes[i] == CUDNN_NUMERICAL_NOTE_WINOGRAD ||
                            notes[i] == CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_4x4 ||
                            notes[i] == CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_6x6 ||
                            notes[i] == CUDNN_NUMERICAL_NOTE_WINOGRAD_TILE_13x13))
            return 0;
    }
    return 1;
}

} // namespace

struct tk_cudnn {
    tk_ctx *c;
    cudnnHandle_t h;
    size_t ws_limit, ws_need, ws_bytes;
    void *ws;
    Plan *p;
    int n, cap;
    int fusion; // fused plans allowed (TK_CUDNN_FUSION=0: never)
    int tune;   // how many of mode A's candidates the autotuning times (kTune; TK_CUDNN_TUNE)
};

namespace {

// A pointwise operation y = mode(x[, b]) in fp32.
int pointwise(Desc &op, cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t y, tk_err *e) {
    const cudnnDataType_t f = CUDNN_DATA_FLOAT;
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    Desc pw;
    TRY(pw.make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, e));
    TRY(set(pw.d, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode, e));
    TRY(set(pw.d, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f, e));
    DNN(api.Finalize(pw.d), "finalize pointwise");
    TRY(op.make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, e));
    TRY(set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, D, 1, &pw.d, e));
    TRY(set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, D, 1, &x, e));
    if (b) TRY(set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, D, 1, &b, e));
    TRY(set(op.d, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, D, 1, &y, e));
    DNN(api.Finalize(op.d), "finalize pointwise operation");
    return 0;
}

// The operation graph of one convolution pass. Fused passes (is_fused): with a prologue, x is first
// scaled, shifted and ReLU'd per channel (scale, bias fp32 (1, C, 1, 1); the intermediates virtual
// fp32) and the convolution reads that; with statistics, a genstats operation on the (non-virtual)
// output y makes the per-channel fp32 sum and sum of squares (1, K, 1, 1), with math precision prec.
int op_graph(tk_cudnn *h, int fpass, const tk_conv3d_shape *s, tk_dtype t, cudnnDataType_t prec, Desc &graph,
             tk_err *e) {
    cudnnDataType_t dt = t == TK_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT, ct = CUDNN_DATA_FLOAT;
    const int stats = has_stats(fpass), pro = has_prologue(fpass), pass = base_pass(fpass);
    Desc x, w, y, conv, op, sum, sq, gs, sc, bi, v1, v2, v3, p1, p2, p3;
    cudnnBackendDescriptor_t ops[5];
    int nops = 0;
    if (pro) { // x (UID_X) -> * scale -> + bias -> relu -> v3, the convolution's input
        TRY(tensor(x, UID_X, dt, s->N, s->C, s->D, s->H, s->W, e));
        TRY(tensor(sc, UID_SCALE, CUDNN_DATA_FLOAT, 1, s->C, 0, 1, 1, e));
        TRY(tensor(bi, UID_BIAS, CUDNN_DATA_FLOAT, 1, s->C, 0, 1, 1, e));
        TRY(tensor(v1, UID_V1, CUDNN_DATA_FLOAT, s->N, s->C, s->D, s->H, s->W, e, true));
        TRY(tensor(v2, UID_V2, CUDNN_DATA_FLOAT, s->N, s->C, s->D, s->H, s->W, e, true));
        TRY(tensor(v3, UID_V3, CUDNN_DATA_FLOAT, s->N, s->C, s->D, s->H, s->W, e, true));
        TRY(pointwise(p1, CUDNN_POINTWISE_MUL, x.d, sc.d, v1.d, e));
        TRY(pointwise(p2, CUDNN_POINTWISE_ADD, v1.d, bi.d, v2.d, e));
        TRY(pointwise(p3, CUDNN_POINTWISE_RELU_FWD, v2.d, nullptr, v3.d, e));
        ops[nops++] = p1.d, ops[nops++] = p2.d, ops[nops++] = p3.d;
    }
    Desc &cx = pro ? v3 : x; // the convolution's x
    if (!pro) TRY(tensor(x, UID_X, dt, s->N, s->C, s->D, s->H, s->W, e));
    TRY(tensor(w, UID_W, dt, s->K, s->C, s->T, s->R, s->S, e));
    TRY(tensor(y, UID_Y, dt, s->N, s->K, s->Z, s->P, s->Q, e));
    // two spatial dimensions, or three (a 3-D shape)
    int64_t nsp = s->D ? 3 : 2, one[3] = {1, 1, 1}, str[3] = {s->stride, s->stride, s->stride},
            pad[3] = {s->pad, s->pad, s->pad};
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    TRY(conv.make(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, e));
    TRY(set(conv.d, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &ct, e));
    TRY(set(conv.d, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode, e));
    TRY(set(conv.d, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &nsp, e));
    TRY(set(conv.d, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, nsp, one, e));
    TRY(set(conv.d, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, nsp, str, e));
    TRY(set(conv.d, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, nsp, pad, e));
    TRY(set(conv.d, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, nsp, pad, e));
    DNN(api.Finalize(conv.d), "finalize convolution");
    float alpha = 1.0f, beta = 0.0f;
    const cudnnBackendDescriptorType_t kind[3] = {CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR,
                                                  CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR,
                                                  CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_FILTER_DESCRIPTOR};
    // per pass: the x-like, w-like and y-like tensor's attribute, the convolution, alpha, beta
    const cudnnBackendAttributeName_t attr[3][6] = {
        {CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA},
        {CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_X, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DW,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_DY, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_CONV_DESC,
         CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_ALPHA, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_FILTER_BETA}};
    const cudnnBackendAttributeType_t D = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    const cudnnBackendDescriptor_t desc[4] = {cx.d, w.d, y.d, conv.d};
    TRY(op.make(kind[pass], e));
    for (int i = 0; i < 4; i++) TRY(set(op.d, attr[pass][i], D, 1, &desc[i], e));
    TRY(set(op.d, attr[pass][4], CUDNN_TYPE_FLOAT, 1, &alpha, e));
    TRY(set(op.d, attr[pass][5], CUDNN_TYPE_FLOAT, 1, &beta, e));
    DNN(api.Finalize(op.d), "finalize convolution operation");
    ops[nops++] = op.d;
    if (stats) {
        cudnnGenStatsMode_t mode = CUDNN_GENSTATS_SUM_SQSUM;
        TRY(tensor(sum, UID_SUM, CUDNN_DATA_FLOAT, 1, s->K, 0, 1, 1, e));
        TRY(tensor(sq, UID_SQSUM, CUDNN_DATA_FLOAT, 1, s->K, 0, 1, 1, e));
        TRY(gs.make(CUDNN_BACKEND_OPERATION_GEN_STATS_DESCRIPTOR, e));
        TRY(set(gs.d, CUDNN_ATTR_OPERATION_GENSTATS_MODE, CUDNN_TYPE_GENSTATS_MODE, 1, &mode, e));
        TRY(set(gs.d, CUDNN_ATTR_OPERATION_GENSTATS_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec, e));
        TRY(set(gs.d, CUDNN_ATTR_OPERATION_GENSTATS_XDESC, D, 1, &y.d, e));
        TRY(set(gs.d, CUDNN_ATTR_OPERATION_GENSTATS_SUMDESC, D, 1, &sum.d, e));
        TRY(set(gs.d, CUDNN_ATTR_OPERATION_GENSTATS_SQSUMDESC, D, 1, &sq.d, e));
        DNN(api.Finalize(gs.d), "finalize genstats operation");
        ops[nops++] = gs.d;
    }
    TRY(graph.make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, e));
    TRY(set(graph.d, CUDNN_ATTR_OPERATIONGRAPH_OPS, D, nops, ops, e));
    TRY(set(graph.d, kGraphHandle, CUDNN_TYPE_HANDLE, 1, &h->h, e));
    DNN(api.Finalize(graph.d), "finalize operation graph");
    return 0;
}

// An engine configuration of the heuristics' list finalized into a plan.
struct Cand {
    cudnnBackendDescriptor_t plan, cfg;
    int64_t ws, engine;
    int index; // in the list
};

void drop(Cand &c) {
    if (c.plan) api.DestroyDescriptor(c.plan);
    if (c.cfg) api.DestroyDescriptor(c.cfg);
    c.plan = c.cfg = nullptr;
}

// The engine configurations of the heuristics' list (mode) that suit and finalize into a plan within
// the workspace limit, in the list's order: up to max of them into c[*n] (only list entry `only`
// when it is >= 0).
int candidates(tk_cudnn *h, Desc &graph, cudnnBackendHeurMode_t mode, tk_dtype t, int only, Cand *c, int max, int *n,
               int *tried, tk_err *e) {
    *n = 0;
    Desc heur;
    TRY(heur.make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, e));
    TRY(set(heur.d, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph.d, e));
    TRY(set(heur.d, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode, e));
    if (api.Finalize(heur.d) != CUDNN_STATUS_SUCCESS) return 0; // no list in this mode
    int64_t count = 0;
    DNN(api.GetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr),
        "heuristics count");
    if (count <= 0) return 0;
    if (count > 64) count = 64;
    Desc cfgs[64];
    cudnnBackendDescriptor_t raw[64];
    for (int64_t i = 0; i < count; i++) {
        TRY(cfgs[i].make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, e));
        raw[i] = cfgs[i].d;
    }
    int64_t got = 0;
    DNN(api.GetAttribute(heur.d, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got, raw),
        "heuristics results");
    for (int64_t i = 0; i < got && *n < max; i++) {
        int64_t id = -1;
        if (only >= 0 && i != only) continue;
        if (!notes_ok(raw[i], t, h->c->deterministic, &id)) continue;
        (*tried)++;
        Desc p;
        TRY(p.make(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, e));
        TRY(set(p.d, kPlanHandle, CUDNN_TYPE_HANDLE, 1, &h->h, e));
        TRY(set(p.d, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[i], e));
        if (api.Finalize(p.d) != CUDNN_STATUS_SUCCESS) continue; // this engine cannot run the shape
        int64_t need = 0, nn = 0;
        DNN(api.GetAttribute(p.d, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &nn, &need),
            "plan workspace size");
        if (need < 0 || (size_t)need > h->ws_limit) continue;
        c[(*n)++] = Cand{p.release(), cfgs[i].release(), need, id, (int)i};
    }
    return 0;
}

// A run's buffers by the graph's unique ids: x, w, y always (the base pass's: dgrad's x is dx,
// wgrad's w is dw, y is dy), the statistics and the prologue's scale and bias where the plan has them.
struct Bufs {
    void *x, *w, *y;
    float *sum, *sqsum;
    const float *scale, *bias;
};

int execute(tk_cudnn *h, cudnnBackendDescriptor_t plan, const Bufs &b, void *ws, const char *what, tk_err *e) {
    int64_t uids[7] = {UID_X, UID_W, UID_Y};
    void *ptrs[7] = {b.x, b.w, b.y};
    int64_t n = 3;
    if (b.sum) uids[n] = UID_SUM, ptrs[n++] = b.sum, uids[n] = UID_SQSUM, ptrs[n++] = b.sqsum;
    if (b.scale) uids[n] = UID_SCALE, ptrs[n++] = (void *)b.scale, uids[n] = UID_BIAS, ptrs[n++] = (void *)b.bias;
    Desc vp;
    TRY(vp.make(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, e));
    TRY(set(vp.d, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids, e));
    TRY(set(vp.d, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs, e));
    TRY(set(vp.d, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws, e));
    DNN(api.Finalize(vp.d), "finalize variant pack");
    DNN(api.Execute(h->h, plan, vp.d), what);
    return 0;
}

// The autotuning (ctx->deterministic off): the first kTune candidates of heuristics mode A run on
// scratch buffers of the shape, kRuns times each after one warm-up, and the fastest (median run)
// is kept. The choice (its index in the list) is remembered for the process, so every model of
// the process runs the same engines (graph vs eager tests, evaluation beside training).
// Fused plans (kFwdStats) are runtime-compiled when they finalize (NVRTC, about a second each), so
// only their first kTuneFused candidates are tried. TK_CUDNN_TUNE=N (1..kTuneMax) times the first
// N instead of kTune (a measurement knob: whether candidates further down the list are faster).
constexpr int kTune = 8, kTuneMax = 32, kTuneFused = 3, kRuns = 3;

struct Tuned {
    int pass;
    tk_conv3d_shape s;
    tk_dtype t;
    int index;
};
pthread_mutex_t tuned_mu = PTHREAD_MUTEX_INITIALIZER;
Tuned tuned[1024];
int ntuned;

int tuned_index(int pass, const tk_conv3d_shape *s, tk_dtype t) {
    int r = -1;
    pthread_mutex_lock(&tuned_mu);
    for (int i = 0; i < ntuned && r < 0; i++)
        if (tuned[i].pass == pass && tuned[i].t == t && memcmp(&tuned[i].s, s, sizeof *s) == 0) r = tuned[i].index;
    pthread_mutex_unlock(&tuned_mu);
    return r;
}

void remember(int pass, const tk_conv3d_shape *s, tk_dtype t, int index) {
    pthread_mutex_lock(&tuned_mu);
    if (ntuned < (int)(sizeof tuned / sizeof *tuned)) tuned[ntuned++] = Tuned{pass, *s, t, index};
    pthread_mutex_unlock(&tuned_mu);
}

// The median time of kRuns runs of each candidate into ms[] (a candidate that fails: infinity);
// nonzero when the scratch buffers could not be had (then nothing is timed).
int time_candidates(tk_cudnn *h, int pass, const tk_conv3d_shape *s, tk_dtype t, const Cand *c, int n, float *ms) {
    const size_t es = t == TK_BF16 ? 2 : 4, nx = (size_t)x_numel(s) * es, nw = (size_t)w_numel(s) * es,
                 ny = (size_t)y_numel(s) * es + (is_fused(pass) ? 2 * (size_t)(s->K + s->C) * 4 + 256 : 0);
    size_t nws = 0;
    for (int i = 0; i < n; i++) nws = (size_t)c[i].ws > nws ? (size_t)c[i].ws : nws;
    cudaStream_t st = (cudaStream_t)h->c->stream[TK_STREAM_COMPUTE];
    void *x = nullptr, *w = nullptr, *y = nullptr, *ws = nullptr;
    cudaEvent_t a = nullptr, b = nullptr;
    int rc = cudaMalloc(&x, nx) != cudaSuccess || cudaMalloc(&w, nw) != cudaSuccess ||
             cudaMalloc(&y, ny) != cudaSuccess || (nws && cudaMalloc(&ws, nws) != cudaSuccess) ||
             cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess;
    if (!rc) rc = cudaMemsetAsync(x, 0, nx, st) != cudaSuccess || cudaMemsetAsync(w, 0, nw, st) != cudaSuccess ||
                  cudaMemsetAsync(y, 0, ny, st) != cudaSuccess;
    // the statistics and the prologue's scale and bias (zeros) after y, 256-byte aligned
    Bufs bufs = {x, w, y, nullptr, nullptr, nullptr, nullptr};
    if (!rc && is_fused(pass)) {
        float *f = (float *)((char *)y + ((size_t)y_numel(s) * es + 255) / 256 * 256);
        if (has_stats(pass)) bufs.sum = f, bufs.sqsum = f + s->K;
        if (has_prologue(pass)) bufs.scale = f + 2 * s->K, bufs.bias = f + 2 * s->K + s->C;
    }
    for (int i = 0; !rc && i < n; i++) {
        tk_err e0 = {0};
        float r[kRuns];
        ms[i] = 1e30f;
        if (execute(h, c[i].plan, bufs, ws, "autotune", &e0)) continue; // warm-up
        int bad = 0;
        for (int k = 0; k < kRuns && !bad; k++) {
            cudaEventRecord(a, st);
            bad = execute(h, c[i].plan, bufs, ws, "autotune", &e0);
            cudaEventRecord(b, st);
            bad = bad || cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&r[k], a, b) != cudaSuccess;
        }
        if (bad) continue;
        for (int p = 1; p < kRuns; p++)
            for (int q = p; q > 0 && r[q] < r[q - 1]; q--) {
                float tmp = r[q];
                r[q] = r[q - 1], r[q - 1] = tmp;
            }
        ms[i] = r[kRuns / 2];
    }
    cudaStreamSynchronize(st);
    cudaGetLastError(); // (a failed candidate's launch error is not the caller's)
    if (a) cudaEventDestroy(a);
    if (b) cudaEventDestroy(b);
    void *mem[4] = {x, w, y, ws};
    for (int i = 0; i < 4; i++)
        if (mem[i]) cudaFree(mem[i]);
    return rc;
}

// The plan of a pass: the remembered engine, or mode A's candidates timed (autotuning) or its
// first (deterministic), else the fallback list's first. *chosen: empty plan when none.
int pick(tk_cudnn *h, Desc &graph, int pass, const tk_conv3d_shape *s, tk_dtype t, Cand *chosen, int *tried,
         float *best_ms, int *ntimed, tk_err *e) {
    *chosen = Cand{};
    *best_ms = -1, *ntimed = 0;
    const int tune = !h->c->deterministic;
    int n = 0;
    Cand c[kTuneMax];
    const int remembered = tune ? tuned_index(pass, s, t) : -1;
    if (remembered >= 0) TRY(candidates(h, graph, CUDNN_HEUR_MODE_A, t, remembered, c, 1, &n, tried, e));
    if (!n) TRY(candidates(h, graph, CUDNN_HEUR_MODE_A, t, -1, c, !tune ? 1 : is_fused(pass) ? kTuneFused : h->tune, &n,
                           tried, e));
    int k = 0;
    if (n > 1 || (n == 1 && is_fused(pass) && tune)) { // (a fused plan is timed even alone: the caller
        float ms[kTuneMax];                                   // weighs it against the plain forward)
        if (!time_candidates(h, pass, s, t, c, n, ms)) {
            for (int i = 1; i < n; i++)
                if (ms[i] < ms[k]) k = i;
            *best_ms = ms[k], *ntimed = n;
        }
        remember(pass, s, t, c[k].index);
    }
    for (int i = 0; i < n; i++)
        if (i != k) drop(c[i]);
    if (n) {
        *chosen = c[k];
        return 0;
    }
    TRY(candidates(h, graph, CUDNN_HEUR_MODE_FALLBACK, t, -1, c, 1, &n, tried, e));
    if (n) *chosen = c[0];
    return 0;
}

} // namespace

int tk_cudnn_create(tk_ctx *c, size_t ws_limit, tk_cudnn **out, tk_err *e) {
    *out = NULL;
    pthread_once(&load_once, load);
    if (!api.lib) {
        tk_err_set(e, TK_EDEVICE, "%s", load_msg);
        return tk_err_hint(e, "install cuDNN 9 (libcudnn.so.9 on the library path, e.g. LD_LIBRARY_PATH=.../nvidia/"
                              "cudnn/lib of the nvidia-cudnn wheel) for ResNet's convolutions on cuda");
    }
    tk_cudnn *h = (tk_cudnn *)calloc(1, sizeof *h);
    if (!h) return tk_err_set(e, TK_EIO, "out of host memory");
    h->c = c;
    h->ws_limit = ws_limit ? ws_limit : (size_t)256 << 20;
    // fused plans only when asked for: on an H100 with cuDNN 9.19 the runtime-compiled genstats
    // forward ran 2-4x slower than the plain forward at every ResNet-50 shape (contrib/bench/NOTES.md)
    const char *fu = getenv("TK_CUDNN_FUSION");
    h->fusion = fu && strcmp(fu, "1") == 0;
    const char *tn = getenv("TK_CUDNN_TUNE");
    h->tune = tn && atoi(tn) >= 1 ? (atoi(tn) < kTuneMax ? atoi(tn) : kTuneMax) : kTune;
    cudnnStatus_t st = api.Create(&h->h);
    if (st == CUDNN_STATUS_SUCCESS) st = api.SetStream(h->h, (cudaStream_t)c->stream[TK_STREAM_COMPUTE]);
    if (st != CUDNN_STATUS_SUCCESS) {
        if (h->h) api.Destroy(h->h);
        free(h);
        return dnn_fail(e, st, "create handle");
    }
    *out = h;
    return 0;
}

void tk_cudnn_destroy(tk_cudnn *h) {
    if (!h) return;
    for (int i = 0; i < h->n; i++) {
        api.DestroyDescriptor(h->p[i].plan);
        api.DestroyDescriptor(h->p[i].keep[0]);
        api.DestroyDescriptor(h->p[i].keep[1]);
    }
    free(h->p);
    if (h->h) api.Destroy(h->h);
    free(h);
}

namespace {

// The plan of a pass for a shape and type, made once: *out the cached plan, or NULL with e filled
// when cuDNN has no engine for it (remembered too, so a refused fused graph is asked about once).
int plan_pass(tk_cudnn *h, int pass, const tk_conv3d_shape *s, tk_dtype t, const Plan **out, tk_err *e) {
    *out = NULL;
    for (int i = 0; i < h->n; i++)
        if (same(h->p[i], pass, s, t)) {
            if (!h->p[i].plan) return tk_err_set(e, TK_EDEVICE, "%s", h->p[i].desc);
            *out = &h->p[i];
            return 0;
        }
    if (t != TK_F32 && t != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "cudnn conv: type %s", tk_dtype_name(t));
    if (h->c->capturing) return tk_err_set(e, TK_EINTERNAL, "cudnn conv: a shape planned while capturing");
    if (h->n == h->cap) {
        int cap = h->cap ? 2 * h->cap : 64;
        Plan *p = (Plan *)realloc(h->p, (size_t)cap * sizeof *p);
        if (!p) return tk_err_set(e, TK_EIO, "out of host memory");
        h->p = p;
        h->cap = cap;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    // the statistics' math precision: fp32, else (bf16) the tensors' own, as cudnn-frontend sets it
    const cudnnDataType_t precs[2] = {CUDNN_DATA_FLOAT, t == TK_BF16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT};
    Desc graph;
    Cand c = {};
    int tried = 0, ntimed = 0;
    float ms = -1;
    for (int k = 0; k < (has_stats(pass) ? 2 : 1) && !c.plan; k++) {
        if (k == 1 && precs[1] == precs[0]) break;
        Desc g;
        tk_err e0 = {};
        // a fused graph cuDNN cannot even build (an older library) is a refusal like no engine
        if (op_graph(h, pass, s, t, precs[k], g, is_fused(pass) ? &e0 : e)) {
            if (!is_fused(pass)) return e->code;
            continue;
        }
        TRY(pick(h, g, pass, s, t, &c, &tried, &ms, &ntimed, e));
        if (c.plan) graph.d = g.release();
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double plan_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    Plan *p = &h->p[h->n++];
    *p = Plan{};
    p->pass = pass;
    p->s = *s;
    p->t = t;
    p->ms = ms;
    char shp[96];
    shape_text(s, shp, sizeof shp);
    if (!c.plan) {
        snprintf(p->desc, sizeof p->desc,
                 "cuDNN has no engine for %s %s pad %d in %s (%d engines tried, workspace limit %zu B%s)",
                 kPassName[pass], shp, s->pad, tk_dtype_name(t), tried, h->ws_limit,
                 h->c->deterministic ? ", deterministic engines only" : "");
        tk_err_set(e, TK_EDEVICE, "%s", p->desc);
        return tk_err_lib(e, "cudnn", 0);
    }
    p->plan = c.plan;
    p->keep[0] = graph.release();
    p->keep[1] = c.cfg;
    p->ws = c.ws;
    const int64_t ws = c.ws;
    char timed[48] = "";
    if (ntimed) snprintf(timed, sizeof timed, ", fastest of %d: %.3f ms", ntimed, ms);
    snprintf(p->desc, sizeof p->desc, "%s %s %s: engine %lld (list %d), %lld B workspace%s, planned in %.0f ms",
             kPassName[pass], shp, tk_dtype_name(t), (long long)c.engine, c.index, (long long)ws, timed, plan_ms);
    if ((size_t)ws > h->ws_need) h->ws_need = (size_t)ws;
    *out = p;
    return 0;
}

const Plan *planned(const tk_cudnn *h, int pass, const tk_conv3d_shape *s, tk_dtype t) {
    for (int i = h->n - 1; i >= 0; i--)
        if (same(h->p[i], pass, s, t)) return h->p[i].plan ? &h->p[i] : NULL;
    return NULL;
}

} // namespace

namespace {

// The plan of a pass for a shape, or NULL with e filled: not planned, or a workspace too small for it.
const Plan *usable(const tk_cudnn *h, int pass, const tk_conv3d_shape *s, tk_dtype t, tk_err *e) {
    const Plan *p = planned(h, pass, s, t);
    if (!p) {
        char shp[96];
        tk_err_set(e, TK_EINTERNAL, "cudnn conv: %s %s in %s has no plan", kPassName[pass],
                   shape_text(s, shp, sizeof shp), tk_dtype_name(t));
        return NULL;
    }
    if ((size_t)p->ws > h->ws_bytes) {
        tk_err_set(e, TK_EINTERNAL, "cudnn conv: workspace of %zu B < %lld B", h->ws_bytes, (long long)p->ws);
        return NULL;
    }
    return p;
}

// Runs a planned pass of kernels/conv.h or conv3d.h: their (a, b, out) per pass onto the graph's x, w, y.
int run_pass(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a, const void *b,
             void *out, tk_err *e) {
    const Plan *p = usable(h, pass, s, t, e);
    if (!p) return e->code;
    void *x = (void *)a, *w = (void *)b, *y = out;
    if (pass == TK_CONV_BWD_DATA) x = out, w = (void *)b, y = (void *)a;
    if (pass == TK_CONV_BWD_FILTER) x = (void *)a, w = out, y = (void *)b;
    return execute(h, p->plan, Bufs{x, w, y, nullptr, nullptr, nullptr, nullptr}, h->ws, kPassName[pass], e);
}

float planned_ms(const tk_cudnn *h, int pass, const tk_conv3d_shape *s, tk_dtype t) {
    const Plan *p = pass >= 0 && pass < kNumPass ? planned(h, pass, s, t) : NULL;
    return p ? p->ms : -1;
}

} // namespace

int tk_cudnn_plan(tk_cudnn *h, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, tk_err *e) {
    const Plan *p;
    const tk_conv3d_shape s3 = shape3(s);
    return plan_pass(h, pass, &s3, t, &p, e);
}

int tk_cudnn_plan3d(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, tk_err *e) {
    const Plan *p;
    if (s->D < 1 || s->T < 1 || s->Z < 1)
        return tk_err_set(e, TK_EINTERNAL, "cudnn conv3d: depth %d, filter depth %d, output depth %d", s->D, s->T,
                          s->Z);
    return plan_pass(h, pass, s, t, &p, e);
}

int tk_cudnn_plan_fused(tk_cudnn *h, tk_cudnn_fused f, const tk_conv_shape *s, tk_dtype t, tk_err *e) {
    if (!h->fusion) return tk_err_set(e, TK_EDEVICE, "cudnn: fused plans are off (TK_CUDNN_FUSION=1 turns them on)");
    if (f < TK_CUDNN_FWD_STATS || f > TK_CUDNN_SBR_WGRAD)
        return tk_err_set(e, TK_EINTERNAL, "cudnn: fused plan kind %d", (int)f);
    const Plan *p;
    const tk_conv3d_shape s3 = shape3(s);
    return plan_pass(h, (int)f, &s3, t, &p, e);
}

float tk_cudnn_plan_ms(const tk_cudnn *h, int pass, const tk_conv_shape *s, tk_dtype t) {
    const tk_conv3d_shape s3 = shape3(s);
    return planned_ms(h, pass, &s3, t);
}

float tk_cudnn_plan3d_ms(const tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t) {
    return planned_ms(h, pass, s, t);
}

size_t tk_cudnn_ws_bytes(const tk_cudnn *h) { return h->ws_need; }

void tk_cudnn_set_ws(tk_cudnn *h, void *ws, size_t bytes) {
    h->ws = ws;
    h->ws_bytes = bytes;
}

int tk_cudnn_conv(tk_cudnn *h, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, const void *a, const void *b,
                  void *out, tk_err *e) {
    const tk_conv3d_shape s3 = shape3(s);
    return run_pass(h, pass, &s3, t, a, b, out, e);
}

int tk_cudnn_conv3d(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a, const void *b,
                    void *out, tk_err *e) {
    return run_pass(h, pass, s, t, a, b, out, e);
}

int tk_cudnn_conv_fwd_stats(tk_cudnn *h, const tk_conv_shape *s, tk_dtype t, const void *x, const float *scale,
                            const float *bias, const void *w, void *y, float *sum, float *sqsum, tk_err *e) {
    const int pass = scale ? kFwdSbrStats : kFwdStats;
    const tk_conv3d_shape s3 = shape3(s);
    const Plan *p = usable(h, pass, &s3, t, e);
    if (!p) return e->code;
    // the sums start from zero whether the engine adds into them or writes them (cuDNN does not say)
    cudaStream_t st = (cudaStream_t)h->c->stream[TK_STREAM_COMPUTE];
    if (cudaMemsetAsync(sum, 0, (size_t)s->K * sizeof(float), st) != cudaSuccess ||
        cudaMemsetAsync(sqsum, 0, (size_t)s->K * sizeof(float), st) != cudaSuccess)
        return tk_err_set(e, TK_EDEVICE, "cudnn conv: zeroing the statistics: %s", cudaGetErrorString(cudaGetLastError()));
    const Bufs b = {(void *)x, (void *)w, y, sum, sqsum, scale, scale ? bias : nullptr};
    return execute(h, p->plan, b, h->ws, kPassName[pass], e);
}

int tk_cudnn_wgrad_sbr(tk_cudnn *h, const tk_conv_shape *s, tk_dtype t, const void *x, const float *scale,
                       const float *bias, const void *dy, void *dw, tk_err *e) {
    const tk_conv3d_shape s3 = shape3(s);
    const Plan *p = usable(h, kWgradSbr, &s3, t, e);
    if (!p) return e->code;
    const Bufs b = {(void *)x, dw, (void *)dy, nullptr, nullptr, scale, bias};
    return execute(h, p->plan, b, h->ws, kPassName[kWgradSbr], e);
}

int tk_cudnn_nplans(const tk_cudnn *h) { return h ? h->n : 0; }
const char *tk_cudnn_plan_desc(const tk_cudnn *h, int i) { return h && i >= 0 && i < h->n ? h->p[i].desc : ""; }

const char *tk_cudnn_describe(void) {
    pthread_once(&load_once, load);
    return load_msg;
}

#else // no cuDNN headers at build time

struct tk_cudnn {
    int unused;
};

static int no_cudnn(tk_err *e) {
    tk_err_set(e, TK_EDEVICE, "this trainkit was built without cuDNN");
    return tk_err_hint(e, "rebuild with cuDNN 9's headers (CUDNN_HOME=...) for ResNet on cuda");
}

int tk_cudnn_create(tk_ctx *c, size_t ws_limit, tk_cudnn **h, tk_err *e) {
    (void)c, (void)ws_limit;
    *h = NULL;
    return no_cudnn(e);
}
void tk_cudnn_destroy(tk_cudnn *h) { (void)h; }
int tk_cudnn_plan(tk_cudnn *h, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, tk_err *e) {
    (void)h, (void)pass, (void)s, (void)t;
    return no_cudnn(e);
}
size_t tk_cudnn_ws_bytes(const tk_cudnn *h) { return (void)h, 0; }
void tk_cudnn_set_ws(tk_cudnn *h, void *ws, size_t bytes) { (void)h, (void)ws, (void)bytes; }
int tk_cudnn_conv(tk_cudnn *h, tk_conv_pass pass, const tk_conv_shape *s, tk_dtype t, const void *a, const void *b,
                  void *out, tk_err *e) {
    (void)h, (void)pass, (void)s, (void)t, (void)a, (void)b, (void)out;
    return no_cudnn(e);
}
int tk_cudnn_plan_fused(tk_cudnn *h, tk_cudnn_fused f, const tk_conv_shape *s, tk_dtype t, tk_err *e) {
    (void)h, (void)f, (void)s, (void)t;
    return no_cudnn(e);
}
float tk_cudnn_plan_ms(const tk_cudnn *h, int pass, const tk_conv_shape *s, tk_dtype t) {
    return (void)h, (void)pass, (void)s, (void)t, -1.0f;
}
int tk_cudnn_conv_fwd_stats(tk_cudnn *h, const tk_conv_shape *s, tk_dtype t, const void *x, const float *scale,
                            const float *bias, const void *w, void *y, float *sum, float *sqsum, tk_err *e) {
    (void)h, (void)s, (void)t, (void)x, (void)scale, (void)bias, (void)w, (void)y, (void)sum, (void)sqsum;
    return no_cudnn(e);
}
int tk_cudnn_wgrad_sbr(tk_cudnn *h, const tk_conv_shape *s, tk_dtype t, const void *x, const float *scale,
                       const float *bias, const void *dy, void *dw, tk_err *e) {
    (void)h, (void)s, (void)t, (void)x, (void)scale, (void)bias, (void)dy, (void)dw;
    return no_cudnn(e);
}
int tk_cudnn_plan3d(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, tk_err *e) {
    (void)h, (void)pass, (void)s, (void)t;
    return no_cudnn(e);
}
int tk_cudnn_conv3d(tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t, const void *a, const void *b,
                    void *out, tk_err *e) {
    (void)h, (void)pass, (void)s, (void)t, (void)a, (void)b, (void)out;
    return no_cudnn(e);
}
float tk_cudnn_plan3d_ms(const tk_cudnn *h, tk_conv_pass pass, const tk_conv3d_shape *s, tk_dtype t) {
    return (void)h, (void)pass, (void)s, (void)t, -1.0f;
}
int tk_cudnn_nplans(const tk_cudnn *h) { return (void)h, 0; }
const char *tk_cudnn_plan_desc(const tk_cudnn *h, int i) { return (void)h, (void)i, ""; }
const char *tk_cudnn_describe(void) { return "built without cuDNN"; }
#endif
