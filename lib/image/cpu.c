// The CPU image decoder (image.h): libjpeg-turbo per image, OpenMP threads over a batch. Every
// image is independent and keyed by its sample index, so the output does not depend on the
// thread count or on which thread takes which image.
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "image/codec.h"
#include "image/image.h"

// Only 1/8, 1/4 and 1/2: libjpeg-turbo has SIMD inverse DCTs for those (and the full size);
// its 3/8 .. 7/8 IDCTs are plain C, slower than decoding at full size (measured: 2.25 ms against
// 1.53 ms per 500x375 training image with them allowed).
int tk_img_dct_num(int bw, int bh, int rw, int rh) {
    int num = 1;
    while (num < 8 && ((long long)bw * num < 8LL * rw || (long long)bh * num < 8LL * rh)) num *= 2;
    return num;
}

void tk_img_scratch_free(tk_img_scratch *s) {
    free(s->px);
    free(s->tmp);
    memset(s, 0, sizeof *s);
}

static int grow(void **p, size_t *cap, size_t need, tk_err *e) {
    if (need <= *cap) return 0;
    void *n = realloc(*p, need);
    if (!n) return tk_err_errno(e, ENOMEM, "out of memory for %zu bytes of image buffers", need);
    *p = n;
    *cap = need;
    return 0;
}

int tk_img_box_plan_make(int width, int height, const tk_img_geom *g, int out_w, int out_h, int dct,
                         tk_img_box_plan *p, tk_err *e) {
    int num = dct ? tk_img_dct_num(g->x1 - g->x0, g->y1 - g->y0, g->rw, g->rh) : 8;
    // The box in the image as decoded at num/8 (whose size libjpeg rounds up): scaled exactly.
    int W = tk_jpeg_scaled(width, num), H = tk_jpeg_scaled(height, num);
    double sx = (double)W / width, sy = (double)H / height;
    double bx0 = g->x0 * sx, bx1 = g->x1 * sx, by0 = g->y0 * sy, by1 = g->y1 * sy;
    int cx0 = (int)floor(bx0), cx1 = (int)ceil(bx1), cy0 = (int)floor(by0), cy1 = (int)ceil(by1);
    cx1 = cx1 > W ? W : cx1;
    cy1 = cy1 > H ? H : cy1;
    memset(p, 0, sizeof *p);
    p->num = num;
    TRY(tk_img_axis_plan(&p->ax, bx0, bx1, g->rw, g->wx, out_w, cx0, cx1, e));
    int rc = tk_img_axis_plan(&p->ay, by0, by1, g->rh, g->wy, out_h, cy0, cy1, e);
    if (rc) tk_img_axis_free(&p->ax);
    return rc;
}

void tk_img_box_plan_free(tk_img_box_plan *p) {
    tk_img_axis_free(&p->ax);
    tk_img_axis_free(&p->ay);
}

int tk_img_decode_box(const uint8_t *data, size_t size, const tk_img_box_plan *p, int flip, const tk_img_rs_out *ro,
                      tk_img_scratch *s, void *out, tk_err *e) {
    int rw = p->ax.hi - p->ax.lo, rh = p->ay.hi - p->ay.lo;
    size_t stride = (size_t)rw * 3;
    TRY(grow((void **)&s->px, &s->pxcap, stride * (size_t)rh, e));
    TRY(grow((void **)&s->tmp, &s->tmpcap, (size_t)p->ay.n * (size_t)rw * 3 * sizeof(float), e));
    TRY(tk_jpeg_decode(data, size, p->num, p->ax.lo, p->ay.lo, rw, rh, s->px, stride, NULL, e));
    tk_img_resample(s->px, p->ax.lo, p->ay.lo, stride, &p->ax, &p->ay, flip, ro, s->tmp, out);
    return 0;
}

int tk_img_decode_one(const tk_img_transform *t, const uint8_t *data, size_t size, uint64_t sample,
                      tk_img_scratch *s, void *out, tk_img_geom *gout, int *numout, tk_err *e) {
    tk_jpeg_info info;
    TRY(tk_jpeg_info_read(data, size, &info, e));
    tk_img_geom g;
    tk_img_plan(t, info.width, info.height, sample, &g);
    tk_img_box_plan p;
    TRY(tk_img_box_plan_make(info.width, info.height, &g, t->out_w, t->out_h, t->dct_scale, &p, e));
    tk_img_rs_out ro = tk_img_transform_out(t);
    int rc = tk_img_decode_box(data, size, &p, g.flip, &ro, s, out, e);
    if (gout) *gout = g;
    if (numout) *numout = p.num;
    tk_img_box_plan_free(&p);
    return rc;
}

struct tk_img_decoder {
    int threads;
    tk_img_scratch *scratch; // one per thread
};

static int cpu_open(tk_img_decoder **dp, const tk_img_decoder_opts *o, tk_err *e) {
    *dp = NULL;
    if (!tk_img_have_jpeg()) return tk_jpeg_info_read(NULL, 0, NULL, e); // says what is missing
    tk_img_decoder *d = calloc(1, sizeof *d);
    int threads = o && o->threads > 0 ? o->threads : 1;
    if (d) d->scratch = calloc((size_t)threads, sizeof *d->scratch);
    if (!d || !d->scratch) {
        free(d);
        return tk_err_errno(e, ENOMEM, "out of memory");
    }
    d->threads = threads;
    *dp = d;
    return 0;
}

static int cpu_run(tk_img_decoder *d, const tk_img_transform *t, const tk_img_job *jobs, size_t n,
                   void *out, tk_err *e) {
    size_t per = (size_t)t->out_w * t->out_h * 3 * tk_img_dtype_bytes(t->dtype);
    long long bad = -1; // the first failing job, so the error does not depend on the threads
    tk_err first;
    tk_err_clear(&first);
#pragma omp parallel for num_threads(d->threads) schedule(dynamic, 1)
    for (long long i = 0; i < (long long)n; i++) {
        tk_err te;
        tk_err_clear(&te);
        int rc = tk_img_decode_one(t, jobs[i].data, jobs[i].size, jobs[i].sample, &d->scratch[omp_get_thread_num()],
                                   (uint8_t *)out + (size_t)i * per, NULL, NULL, &te);
        if (rc) {
#pragma omp critical(tk_img_cpu_err)
            if (bad < 0 || i < bad) {
                bad = i;
                first = te;
            }
        }
    }
    if (bad < 0) return 0;
    *e = first;
    tk_err_where(e, "sample %llu", (unsigned long long)jobs[bad].sample);
    return e->code;
}

static void cpu_close(tk_img_decoder *d) {
    if (!d) return;
    for (int i = 0; i < d->threads; i++) tk_img_scratch_free(&d->scratch[i]);
    free(d->scratch);
    free(d);
}

const tk_img_decoder_ops tk_img_decoder_cpu = {
    .version = 2,
    .name = "cpu",
    .out_on_device = 0,
    .open = cpu_open,
    .run = cpu_run,
    .close = cpu_close,
};
