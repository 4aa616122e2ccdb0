// CPU reference of kernels/img_resize.h: the CPU decoder's own resampling (transform.c), image by
// image. Also the shared host-side helpers.
#include <math.h>
#include <string.h>

#include "gpu/dispatch.h"
#include "img_resize.h"

int tk_img_rs_taps(double b0, double b1, int r) {
    double scale = (b1 - b0) / r, support = scale > 1.0 ? scale : 1.0;
    return (int)ceil(support) * 2 + 1;
}

int tk_img_rs_maxtaps(const tk_img_rs_job *jobs, int n) {
    int m = 1;
    for (int i = 0; i < n; i++) {
        int a = tk_img_rs_taps(jobs[i].bx0, jobs[i].bx1, jobs[i].rw), b = tk_img_rs_taps(jobs[i].by0, jobs[i].by1, jobs[i].rh);
        m = a > m ? a : m;
        m = b > m ? b : m;
    }
    return m;
}

size_t tk_img_rs_ws_bytes(int n, const tk_img_rs_out *o, int maxtaps) {
    size_t entries = (size_t)n * (size_t)(o->out_w + o->out_h);
    return entries * 2 * sizeof(int32_t) + entries * (size_t)maxtaps * sizeof(float);
}

int tk_img_rs_check(int n, const tk_img_rs_out *o, int maxtaps, tk_err *e) {
    if (n < 0 || o->out_w < 1 || o->out_h < 1 || o->out_w > 16384 || o->out_h > 16384 || maxtaps < 1 ||
        maxtaps > 8191 || (o->dtype != TK_IMG_F32 && o->dtype != TK_IMG_BF16 && o->dtype != TK_IMG_U8))
        return tk_err_set(e, TK_EINTERNAL, "img_resize: n %d, %d x %d, maxtaps %d, dtype %d", n, o->out_w, o->out_h,
                          maxtaps, (int)o->dtype);
    return 0;
}

int tk_img_resize_ref(const uint8_t *src, const tk_img_rs_job *jobs, int n, int maxtaps, const tk_img_rs_out *o,
                      float *tmp, void *ws, void *out, tk_err *e) {
    (void)ws;
    TRY(tk_img_rs_check(n, o, maxtaps, e));
    tk_img_transform t;
    memset(&t, 0, sizeof t);
    t.out_w = o->out_w, t.out_h = o->out_h, t.dtype = o->dtype;
    memcpy(t.mean, o->mean, sizeof t.mean);
    memcpy(t.std, o->std, sizeof t.std);
    size_t per = (size_t)o->out_w * o->out_h * 3 * tk_img_dtype_bytes(o->dtype);
    int rc = 0;
    for (int k = 0; k < n && !rc; k++) {
        const tk_img_rs_job *j = &jobs[k];
        tk_img_axis ax, ay;
        TRY(tk_img_axis_plan(&ax, j->bx0, j->bx1, j->rw, j->wx, o->out_w, j->cx0, j->cx1, e));
        rc = tk_img_axis_plan(&ay, j->by0, j->by1, j->rh, j->wy, o->out_h, j->cy0, j->cy1, e);
        if (!rc)
            tk_img_resample(src + j->src, 0, 0, (size_t)j->pitch, &ax, &ay, j->flip, &t, tmp + j->tmp,
                            (uint8_t *)out + (size_t)k * per);
        tk_img_axis_free(&ax);
        tk_img_axis_free(&ay);
    }
    return rc;
}

int tk_img_resize(tk_ctx *c, const uint8_t *src, const tk_img_rs_job *jobs, int n, int maxtaps,
                  const tk_img_rs_out *o, float *tmp, void *ws, void *out, tk_err *e) {
    return TK_DISPATCH(c, tk_img_resize_ref(src, jobs, n, maxtaps, o, tmp, ws, out, e),
                       tk_img_resize_cuda(c, src, jobs, n, maxtaps, o, tmp, ws, out, e));
}
