// CUDA side of kernels/swin.h. gather: one thread a window voxel. accumulate: one thread a voxel of
// the output box that the batch's windows touch; it adds the windows that hold it in window order
// (so the sums round as the reference's, and no two threads write one voxel: no atomics).
// __fmul_rn / __fadd_rn keep nvcc from fusing the product and the sum (the reference rounds both).
#include "act_types.cuh"
#include "swin.h"

namespace {

constexpr int kT = 256, kMaxB = TK_SWIN_MAX_BATCH;

struct Geo {
    int64_t out[3], pad0[3], crop[3], shape[3];
    int r;
};
struct Orgs {
    int64_t o[kMaxB][3];
};

Geo geo_of(const tk_swin_grid *g) {
    Geo q;
    for (int a = 0; a < 3; a++)
        q.out[a] = g->out[a], q.pad0[a] = g->pad0[a], q.crop[a] = g->crop[a], q.shape[a] = g->shape[a];
    q.r = g->roi;
    return q;
}

template <typename T>
__global__ void __launch_bounds__(kT)
    gather(const float *image, Geo q, Orgs w, int B, float pad_value, int ld, T *x) {
    const int64_t r = q.r, vol = r * r * r;
    for (int64_t i = (int64_t)blockIdx.x * kT + threadIdx.x; i < B * vol; i += (int64_t)gridDim.x * kT) {
        const int b = (int)(i / vol);
        const int64_t l = i % vol;
        const int64_t c0 = w.o[b][0] + l / (r * r) - q.pad0[0], c1 = w.o[b][1] + l / r % r - q.pad0[1],
                      c2 = w.o[b][2] + l % r - q.pad0[2];
        const bool in = c0 >= 0 && c0 < q.out[0] && c1 >= 0 && c1 < q.out[1] && c2 >= 0 && c2 < q.out[2];
        const float v = in ? image[((c0 + q.crop[0]) * q.shape[1] + c1 + q.crop[1]) * q.shape[2] + c2 + q.crop[2]]
                           : pad_value;
        T *d = x + i * ld;
        d[0] = tk_to<T>(v);
        for (int ch = 1; ch < ld; ch++) d[ch] = tk_to<T>(0.0f);
    }
}

// The box lo .. lo + ext (output coordinates) holds every output voxel of the batch.
template <typename T>
__global__ void __launch_bounds__(kT) accumulate(const T *y, int ld, Geo q, Orgs w, int B, const float *map,
                                                  int64_t lo0, int64_t lo1, int64_t lo2, int64_t e1, int64_t e2,
                                                  int64_t n, float *acc, float *wsum) {
    const int64_t r = q.r;
    for (int64_t i = (int64_t)blockIdx.x * kT + threadIdx.x; i < n; i += (int64_t)gridDim.x * kT) {
        const int64_t v0 = lo0 + i / (e1 * e2), v1 = lo1 + i / e2 % e1, v2 = lo2 + i % e2;
        const int64_t v = (v0 * q.out[1] + v1) * q.out[2] + v2;
        float a0 = 0, a1 = 0, a2 = 0, ws = 0;
        bool any = false;
        for (int b = 0; b < B; b++) {
            // window-local coordinates of the voxel
            const int64_t l0 = v0 + q.pad0[0] - w.o[b][0], l1 = v1 + q.pad0[1] - w.o[b][1],
                          l2 = v2 + q.pad0[2] - w.o[b][2];
            if (l0 < 0 || l0 >= r || l1 < 0 || l1 >= r || l2 < 0 || l2 >= r) continue;
            if (!any) a0 = acc[v * 3], a1 = acc[v * 3 + 1], a2 = acc[v * 3 + 2], ws = wsum[v], any = true;
            const int64_t l = (l0 * r + l1) * r + l2;
            const float m = map[l];
            const T *p = y + ((int64_t)b * r * r * r + l) * ld;
            a0 = __fadd_rn(a0, __fmul_rn(tk_f(p[0]), m));
            a1 = __fadd_rn(a1, __fmul_rn(tk_f(p[1]), m));
            a2 = __fadd_rn(a2, __fmul_rn(tk_f(p[2]), m));
            ws = __fadd_rn(ws, m);
        }
        if (any) acc[v * 3] = a0, acc[v * 3 + 1] = a1, acc[v * 3 + 2] = a2, wsum[v] = ws;
    }
}

// The origins of windows w0 .. w0 + B - 1 (B <= kMaxB: checked by the caller).
Orgs orgs_of(const tk_swin_grid *g, int64_t w0, int B) {
    Orgs w;
    for (int b = 0; b < B; b++) tk_swin_window(g, w0 + b, w.o[b]);
    return w;
}

} // namespace

int tk_swin_gather_cuda(tk_ctx *c, tk_dtype t, const float *image, const tk_swin_grid *g, int64_t w0, int B,
                        float pad_value, int ld, void *x, tk_err *e) {
    TRY(tk_swin_batch_check("swin_gather", t, g, w0, B, ld, 1, e));
    if (B > kMaxB) return tk_err_set(e, TK_EINTERNAL, "swin_gather: %d windows (at most %d a call on cuda)", B, kMaxB);
    const Orgs w = orgs_of(g, w0, B);
    const int64_t n = (int64_t)B * g->roi * g->roi * g->roi;
    TK_ACT_DISPATCH(t, "swin_gather", e, {
        gather<T><<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>(image, geo_of(g), w, B, pad_value, ld, (T *)x);
    });
    return tk_cu_check(e, "swin_gather");
}

int tk_swin_accumulate_cuda(tk_ctx *c, tk_dtype t, const void *y, int ld, const tk_swin_grid *g, int64_t w0, int B,
                            const float *map, float *acc, float *wsum, tk_err *e) {
    TRY(tk_swin_batch_check("swin_accumulate", t, g, w0, B, ld, TK_SWIN_CLASSES, e));
    if (B > kMaxB)
        return tk_err_set(e, TK_EINTERNAL, "swin_accumulate: %d windows (at most %d a call on cuda)", B, kMaxB);
    const Orgs w = orgs_of(g, w0, B);
    // the batch's box in output coordinates, clipped to the output
    int64_t lo[3], hi[3];
    for (int a = 0; a < 3; a++) {
        lo[a] = INT64_MAX, hi[a] = INT64_MIN;
        for (int b = 0; b < B; b++) {
            const int64_t s = w.o[b][a] - g->pad0[a];
            lo[a] = s < lo[a] ? s : lo[a], hi[a] = s + g->roi > hi[a] ? s + g->roi : hi[a];
        }
        lo[a] = lo[a] < 0 ? 0 : lo[a], hi[a] = hi[a] > g->out[a] ? g->out[a] : hi[a];
        if (hi[a] <= lo[a]) return 0; // (every window holds output voxels: tk_swin_grid_init)
    }
    const int64_t e1 = hi[1] - lo[1], e2 = hi[2] - lo[2], n = (hi[0] - lo[0]) * e1 * e2;
    TK_ACT_DISPATCH(t, "swin_accumulate", e, {
        accumulate<T><<<tk_cu_blocks(n, kT), kT, 0, tk_cu_stream(c)>>>((const T *)y, ld, geo_of(g), w, B, map, lo[0],
                                                                       lo[1], lo[2], e1, e2, n, acc, wsum);
    });
    return tk_cu_check(e, "swin_accumulate");
}
