// KiTS19 volume steps: resampling (torch's interpolate arithmetic), clip + normalize, edge padding,
// and the NPY header (lib/kits19/kits19.h says which reference each one follows).
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kits19/kits19.h"

const double kits19_target_spacing[3] = {1.6, 1.2, 1.2};

const char *const kits19_eval_cases[KITS19_EVAL_CASES] = {
    "00000", "00003", "00005", "00006", "00012", "00024", "00034", "00041", "00044", "00049", "00052",
    "00056", "00061", "00065", "00066", "00070", "00076", "00078", "00080", "00084", "00086", "00087",
    "00092", "00111", "00112", "00125", "00128", "00138", "00157", "00160", "00161", "00162", "00169",
    "00171", "00176", "00185", "00187", "00189", "00198", "00203", "00206", "00207"};

static const char axis_name[3][2] = {"D", "H", "W"};

int kits19_new_shape(const double spacing[3], const int64_t shape[3], int64_t out[3], tk_err *e) {
    for (int a = 0; a < 3; a++) {
        if (!(spacing[a] > 0) || !isfinite(spacing[a]))
            return tk_err_set(e, TK_EDATA, "spacing (pixdim[%d]) is %g; expected a positive number of mm", a + 1,
                              spacing[a]);
        double v = spacing[a] / kits19_target_spacing[a] * (double)shape[a];
        if (!(v >= 1) || v > (double)((int64_t)1 << 40))
            return tk_err_set(e, TK_EDATA, "axis %s: %lld voxels of %g mm resample to %g voxels of %g mm",
                              axis_name[a], (long long)shape[a], spacing[a], v, kits19_target_spacing[a]);
        out[a] = (int64_t)v; // numpy's astype(int): toward zero
    }
    return 0;
}

// One axis of torch's linear interpolation (align_corners=True): for output k, the two source
// indices and weights, all in float as ATen's compute_indices_weights_linear (opmath float).
typedef struct {
    int64_t *i0, *i1;
    float *l0, *l1;
} lin_axis;

static int lin_axis_new(lin_axis *a, int64_t in, int64_t out, tk_err *e) {
    a->i0 = malloc((size_t)out * sizeof(int64_t));
    a->i1 = malloc((size_t)out * sizeof(int64_t));
    a->l0 = malloc((size_t)out * sizeof(float));
    a->l1 = malloc((size_t)out * sizeof(float));
    if (!a->i0 || !a->i1 || !a->l0 || !a->l1) return tk_err_errno(e, ENOMEM, "out of memory");
    float scale = out > 1 ? (float)(in - 1) / (float)(out - 1) : 0.0f;
    for (int64_t k = 0; k < out; k++) {
        if (in == out) { // ATen's "scale_factor = 1, simply copy"
            a->i0[k] = a->i1[k] = k;
            a->l0[k] = 1.0f;
            a->l1[k] = 0.0f;
            continue;
        }
        float real = scale * (float)k;
        int64_t i = (int64_t)floorf(real);
        if (i > in - 1) i = in - 1;
        float l = real - (float)i;
        l = l < 0.0f ? 0.0f : l;
        l = l > 1.0f ? 1.0f : l;
        a->i0[k] = i;
        a->i1[k] = i + (i < in - 1);
        a->l1[k] = l;
        a->l0[k] = 1.0f - l;
    }
    return 0;
}

static void lin_axis_free(lin_axis *a) {
    free(a->i0);
    free(a->i1);
    free(a->l0);
    free(a->l1);
}

// Separable, and still torch's arithmetic: its nested t0 * w0 + t1 * w1 along W, then H, then D
// gives each intermediate value from one row of the axis before, so computing all the W results
// of an input slice (A), then all its H results (B), then the D results from two B slices makes
// the same floats with each computed once.
int kits19_resample_linear(const float *in, const int64_t ishape[3], float *out, const int64_t oshape[3],
                           tk_err *e) {
    lin_axis ax[3] = {{0}};
    int rc = 0;
    for (int a = 0; a < 3 && !rc; a++) rc = lin_axis_new(&ax[a], ishape[a], oshape[a], e);
    const int64_t ID = ishape[0], IH = ishape[1], IW = ishape[2], OD = oshape[0], OH = oshape[1], OW = oshape[2];
    const size_t plane = (size_t)OH * (size_t)OW;
    float *B = NULL;
    uint8_t *used = NULL; // input slices some output slice reads
    if (!rc && (!(B = malloc((size_t)ID * plane * sizeof(float))) || !(used = calloc((size_t)ID, 1))))
        rc = tk_err_errno(e, ENOMEM, "out of memory (resampling to %lld x %lld x %lld)", (long long)OD,
                          (long long)OH, (long long)OW);
    if (!rc) {
        const lin_axis *D = &ax[0], *H = &ax[1], *W = &ax[2];
        for (int64_t d = 0; d < OD; d++) used[D->i0[d]] = used[D->i1[d]] = 1;
        int failed = 0;
#pragma omp parallel
        {
            float *A = malloc((size_t)IH * (size_t)OW * sizeof(float));
            if (!A) {
#pragma omp atomic write
                failed = 1;
            }
#pragma omp for schedule(dynamic, 1)
            for (int64_t dd = 0; dd < ID; dd++) {
                if (!A || !used[dd]) continue;
                for (int64_t hh = 0; hh < IH; hh++) {
                    const float *row = in + ((size_t)dd * (size_t)IH + (size_t)hh) * (size_t)IW;
                    float *a = A + (size_t)hh * (size_t)OW;
                    for (int64_t w = 0; w < OW; w++) a[w] = fmaf(row[W->i0[w]], W->l0[w], row[W->i1[w]] * W->l1[w]);
                }
                for (int64_t h = 0; h < OH; h++) {
                    const float *a0 = A + (size_t)H->i0[h] * (size_t)OW, *a1 = A + (size_t)H->i1[h] * (size_t)OW;
                    const float l0 = H->l0[h], l1 = H->l1[h];
                    float *b = B + (size_t)dd * plane + (size_t)h * (size_t)OW;
                    for (int64_t w = 0; w < OW; w++) b[w] = fmaf(a0[w], l0, a1[w] * l1);
                }
            }
            free(A);
#pragma omp for schedule(static)
            for (int64_t d = 0; d < OD; d++) {
                const float *b0 = B + (size_t)D->i0[d] * plane, *b1 = B + (size_t)D->i1[d] * plane;
                const float l0 = D->l0[d], l1 = D->l1[d];
                float *o = out + (size_t)d * plane;
                for (size_t i = 0; i < plane; i++) o[i] = fmaf(b0[i], l0, b1[i] * l1);
            }
        }
        if (failed) rc = tk_err_errno(e, ENOMEM, "out of memory");
    }
    free(B);
    free(used);
    for (int a = 0; a < 3; a++) lin_axis_free(&ax[a]);
    return rc;
}

// torch's nearest (not nearest-exact): source floor(k * scale), scale = (float)in / out in float.
static int64_t *nearest_axis(int64_t in, int64_t out) {
    int64_t *idx = malloc((size_t)out * sizeof(int64_t));
    if (!idx) return NULL;
    float scale = (float)in / (float)out;
    for (int64_t k = 0; k < out; k++) {
        int64_t i = (int64_t)floorf(scale * (float)k);
        idx[k] = i < in - 1 ? i : in - 1;
    }
    return idx;
}

int kits19_resample_nearest(const uint8_t *in, const int64_t ishape[3], uint8_t *out, const int64_t oshape[3],
                            tk_err *e) {
    int64_t *ix[3];
    for (int a = 0; a < 3; a++) ix[a] = nearest_axis(ishape[a], oshape[a]);
    int rc = !ix[0] || !ix[1] || !ix[2] ? tk_err_errno(e, ENOMEM, "out of memory") : 0;
    if (!rc) {
        const int64_t OH = oshape[1], OW = oshape[2];
#pragma omp parallel for schedule(static)
        for (int64_t d = 0; d < oshape[0]; d++)
            for (int64_t h = 0; h < OH; h++) {
                const uint8_t *p = in + ((size_t)ix[0][d] * (size_t)ishape[1] + (size_t)ix[1][h]) * (size_t)ishape[2];
                uint8_t *o = out + ((size_t)d * (size_t)OH + (size_t)h) * (size_t)OW;
                for (int64_t w = 0; w < OW; w++) o[w] = p[ix[2][w]];
            }
    }
    for (int a = 0; a < 3; a++) free(ix[a]);
    return rc;
}

void kits19_to_c_order(const void *in, const int64_t shape[3], void *out, size_t esize) {
    const int64_t D = shape[0], H = shape[1], W = shape[2], T = 32; // tiles of (d, w) for each h
    const uint8_t *src = in;
    uint8_t *dst = out;
#pragma omp parallel for schedule(static)
    for (int64_t h = 0; h < H; h++)
        for (int64_t d0 = 0; d0 < D; d0 += T)
            for (int64_t w0 = 0; w0 < W; w0 += T)
                for (int64_t d = d0; d < d0 + T && d < D; d++)
                    for (int64_t w = w0; w < w0 + T && w < W; w++)
                        memcpy(dst + (((size_t)d * (size_t)H + (size_t)h) * (size_t)W + (size_t)w) * esize,
                               src + ((size_t)d + (size_t)D * ((size_t)h + (size_t)H * (size_t)w)) * esize, esize);
}

void kits19_normalize(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float v = x[i]; // np.clip = minimum(maximum(x, lo), hi): NaN stays NaN
        v = v < KITS19_CLIP_MIN ? KITS19_CLIP_MIN : v;
        v = v > KITS19_CLIP_MAX ? KITS19_CLIP_MAX : v;
        x[i] = (v - KITS19_MEAN) / KITS19_STD; // a float division, as numpy's; not a reciprocal
    }
}

void kits19_pad_shape(const int64_t shape[3], int64_t padded[3], int64_t before[3]) {
    for (int a = 0; a < 3; a++) {
        int64_t b = shape[a] < KITS19_MIN_SHAPE ? KITS19_MIN_SHAPE - shape[a] : 0;
        before[a] = b / 2;
        padded[a] = shape[a] + b;
    }
}

static inline int64_t clamp_idx(int64_t i, int64_t n) { return i < 0 ? 0 : i >= n ? n - 1 : i; }

void kits19_pad_edge(const void *in, const int64_t shape[3], void *out, const int64_t padded[3],
                     const int64_t before[3], size_t esize) {
    const uint8_t *src = in;
    uint8_t *dst = out;
    for (int64_t d = 0; d < padded[0]; d++)
        for (int64_t h = 0; h < padded[1]; h++) {
            const uint8_t *row = src + ((size_t)clamp_idx(d - before[0], shape[0]) * (size_t)shape[1] +
                                        (size_t)clamp_idx(h - before[1], shape[1])) * (size_t)shape[2] * esize;
            uint8_t *o = dst + ((size_t)d * (size_t)padded[1] + (size_t)h) * (size_t)padded[2] * esize;
            size_t lo = (size_t)before[2], n = (size_t)shape[2];
            for (size_t w = 0; w < lo; w++) memcpy(o + w * esize, row, esize);
            memcpy(o + lo * esize, row, n * esize);
            for (size_t w = lo + n; w < (size_t)padded[2]; w++) memcpy(o + w * esize, row + (n - 1) * esize, esize);
        }
}

size_t kits19_npy_header(char *buf, size_t cap, const char *descr, const int64_t shape[3]) {
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (1, %lld, %lld, %lld), }",
                     descr, (long long)shape[0], (long long)shape[1], (long long)shape[2]);
    // numpy >= 1.24 (_write_array_header): room to grow the first axis in place, 21 digits
    // minus those of shape[0] (= 1)
    n += 20;
    // _wrap_header: magic (6) + version (2) + uint16 length + dict + padding + '\n', to a multiple
    // of 64; a header that already ends on a multiple gets 64 more (numpy's formula)
    size_t hlen = (size_t)n + 1, pad = 64 - (10 + hlen) % 64, total = 10 + hlen + pad;
    if (total > cap || total - 10 > 65535) return 0;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    buf[8] = (char)((total - 10) & 0xff);
    buf[9] = (char)((total - 10) >> 8);
    memset(buf + 10, ' ', total - 11);
    memcpy(buf + 10, dict, strlen(dict));
    buf[total - 1] = '\n';
    return total;
}
