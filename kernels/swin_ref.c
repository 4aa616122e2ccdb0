// CPU reference of kernels/swin.h's gather and accumulation: loops over each window's voxels, in
// window order.
#include "act_io.h"
#include "swin.h"

int tk_swin_gather_ref(tk_dtype t, const float *image, const tk_swin_grid *g, int64_t w0, int B, float pad_value,
                       int ld, void *x, tk_err *e) {
    TRY(tk_swin_batch_check("swin_gather", t, g, w0, B, ld, 1, e));
    const int64_t r = g->roi;
    for (int b = 0; b < B; b++) {
        int64_t org[3];
        tk_swin_window(g, w0 + b, org);
        for (int64_t i = 0; i < r; i++)
            for (int64_t j = 0; j < r; j++)
                for (int64_t k = 0; k < r; k++) {
                    // output coordinates of the voxel; inside the crop it reads the image
                    const int64_t q[3] = {org[0] + i - g->pad0[0], org[1] + j - g->pad0[1], org[2] + k - g->pad0[2]};
                    const int in = q[0] >= 0 && q[0] < g->out[0] && q[1] >= 0 && q[1] < g->out[1] && q[2] >= 0 &&
                                   q[2] < g->out[2];
                    const float v = in ? image[((q[0] + g->crop[0]) * g->shape[1] + q[1] + g->crop[1]) * g->shape[2] +
                                               q[2] + g->crop[2]]
                                       : pad_value;
                    const size_t o = ((((size_t)b * r + i) * r + j) * r + k) * ld;
                    tk_act_st(x, t, o, v);
                    for (int ch = 1; ch < ld; ch++) tk_act_st(x, t, o + ch, 0);
                }
    }
    return 0;
}

int tk_swin_accumulate_ref(tk_dtype t, const void *y, int ld, const tk_swin_grid *g, int64_t w0, int B,
                           const float *map, float *acc, float *wsum, tk_err *e) {
    TRY(tk_swin_batch_check("swin_accumulate", t, g, w0, B, ld, TK_SWIN_CLASSES, e));
    const int64_t r = g->roi;
    for (int b = 0; b < B; b++) {
        int64_t org[3];
        tk_swin_window(g, w0 + b, org);
        for (int64_t i = 0; i < r; i++) {
            const int64_t q0 = org[0] + i - g->pad0[0];
            if (q0 < 0 || q0 >= g->out[0]) continue;
            for (int64_t j = 0; j < r; j++) {
                const int64_t q1 = org[1] + j - g->pad0[1];
                if (q1 < 0 || q1 >= g->out[1]) continue;
                for (int64_t k = 0; k < r; k++) {
                    const int64_t q2 = org[2] + k - g->pad0[2];
                    if (q2 < 0 || q2 >= g->out[2]) continue;
                    const size_t l = ((size_t)i * r + j) * r + k, v = ((size_t)q0 * g->out[1] + q1) * g->out[2] + q2;
                    const float m = map[l];
                    for (int c = 0; c < TK_SWIN_CLASSES; c++) {
                        const float p = tk_act_ld(y, t, ((size_t)b * r * r * r + l) * ld + c) * m;
                        acc[v * TK_SWIN_CLASSES + c] += p;
                    }
                    wsum[v] += m;
                }
            }
        }
    }
    return 0;
}
