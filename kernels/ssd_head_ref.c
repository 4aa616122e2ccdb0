// CPU reference of kernels/ssd_head.h.
#include "act_io.h"
#include "ssd_head.h"

int tk_ssd_bias_relu_fwd_ref(tk_dtype t, void *y, int64_t M, int K, const float *b, int relu, tk_err *e) {
    TRY(tk_ssd_type_check(t, e));
    if (M < 0 || K < 1) return tk_err_set(e, TK_EINTERNAL, "ssd head: bad bias shape M %lld K %d", (long long)M, K);
#pragma omp parallel for schedule(static)
    for (int64_t m = 0; m < M; m++)
        for (int k = 0; k < K; k++) {
            const size_t i = (size_t)m * K + k;
            const float v = tk_act_ld(y, t, i) + b[k];
            tk_act_st(y, t, i, relu && !(v > 0.0f) ? 0.0f : v);
        }
    return 0;
}

int tk_ssd_relu_bwd_ref(tk_dtype t, int64_t n, const void *y, const void *dy, const void *dy2, void *dx, tk_err *e) {
    TRY(tk_ssd_type_check(t, e));
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i++) {
        const size_t k = (size_t)i;
        const float g = tk_act_ld(dy, t, k) + (dy2 ? tk_act_ld(dy2, t, k) : 0.0f);
        tk_act_st(dx, t, k, tk_act_ld(y, t, k) > 0.0f ? g : 0.0f);
    }
    return 0;
}

// The source's element of output element (n, a, d HW + p) of the map's block.
static inline size_t src_at(const tk_ssd_map *mp, int n, int a, int d, int p) {
    return ((size_t)n * mp->HW + p) * mp->ld + mp->c0 + (size_t)a * mp->nd + d;
}
static inline size_t out_at(const tk_ssd_map *mp, int n, int a, int d, int p) {
    const size_t box = (size_t)mp->off + (size_t)d * mp->HW + p;
    if (mp->box_major) return ((size_t)n * (size_t)mp->total + box) * mp->A + a;
    return ((size_t)n * mp->A + a) * (size_t)mp->total + box;
}

int tk_ssd_head_gather_ref(tk_dtype t, const tk_ssd_map *mp, const void *src, float *out, tk_err *e) {
    TRY(tk_ssd_map_check(t, mp, e));
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < mp->N; n++)
        for (int a = 0; a < mp->A; a++)
            for (int d = 0; d < mp->nd; d++)
                for (int p = 0; p < mp->HW; p++) out[out_at(mp, n, a, d, p)] = tk_act_ld(src, t, src_at(mp, n, a, d, p));
    return 0;
}

int tk_ssd_head_scatter_ref(tk_dtype t, const tk_ssd_map *mp, const float *dout, void *dsrc, tk_err *e) {
    TRY(tk_ssd_map_check(t, mp, e));
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < mp->N; n++)
        for (int a = 0; a < mp->A; a++)
            for (int d = 0; d < mp->nd; d++)
                for (int p = 0; p < mp->HW; p++) tk_act_st(dsrc, t, src_at(mp, n, a, d, p), dout[out_at(mp, n, a, d, p)]);
    return 0;
}

int tk_ssd_head_gather_many_ref(tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e) {
    TRY(tk_ssd_heads_check(t, nh, h, e));
    for (int i = 0; i < nh; i++)
        for (int j = 0; j < h[i].nparts; j++) TRY(tk_ssd_head_gather_ref(t, &h[i].part[j], h[i].src, h[i].out[j], e));
    return 0;
}

int tk_ssd_head_scatter_many_ref(tk_dtype t, int nh, const tk_ssd_head *h, tk_err *e) {
    TRY(tk_ssd_heads_check(t, nh, h, e));
    for (int i = 0; i < nh; i++) {
        const tk_ssd_map *a = &h[i].part[0];
        // the channels no part covers: 0
#pragma omp parallel for schedule(static)
        for (int64_t r = 0; r < (int64_t)a->N * a->HW; r++)
            for (int ch = 0; ch < a->ld; ch++) {
                int covered = 0;
                for (int j = 0; j < h[i].nparts; j++) {
                    const tk_ssd_map *b = &h[i].part[j];
                    covered |= ch >= b->c0 && ch < b->c0 + b->nd * b->A;
                }
                if (!covered) tk_act_st(h[i].src, t, (size_t)r * a->ld + ch, 0.0f);
            }
        for (int j = 0; j < h[i].nparts; j++) TRY(tk_ssd_head_scatter_ref(t, &h[i].part[j], h[i].out[j], h[i].src, e));
    }
    return 0;
}
