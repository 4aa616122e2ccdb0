// COCO run-length masks. The algorithms follow the published semantics of COCO's maskApi (Piotr
// Dollar and Tsung-Yi Lin) so that results match pycocotools exactly; the code is our own.
#include "coco/rle.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void coco_rle_free(coco_rle *r) {
    if (!r) return;
    free(r->cnts);
    r->cnts = NULL;
    r->m = 0;
}

static int rle_set(coco_rle *r, uint32_t h, uint32_t w, const uint32_t *cnts, size_t m, tk_err *e) {
    r->h = h;
    r->w = w;
    r->m = m;
    r->cnts = NULL;
    if (m) {
        r->cnts = malloc(m * sizeof *r->cnts);
        if (!r->cnts) return tk_err_errno(e, ENOMEM, "RLE of %zu runs", m);
        memcpy(r->cnts, cnts, m * sizeof *cnts);
    }
    return 0;
}

uint64_t coco_rle_total(const coco_rle *r) {
    uint64_t s = 0;
    for (size_t j = 0; j < r->m; j++) s += r->cnts[j];
    return s;
}

int coco_rle_encode(const uint8_t *mask, uint32_t h, uint32_t w, coco_rle *out, tk_err *e) {
    size_t a = (size_t)h * w, k = 0;
    uint32_t *cnts = malloc((a + 1) * sizeof *cnts);
    if (!cnts) return tk_err_errno(e, ENOMEM, "RLE encode of %ux%u", h, w);
    uint8_t p = 0;
    uint32_t c = 0;
    for (size_t j = 0; j < a; j++) {
        uint8_t v = mask[j] != 0;
        if (v != p) {
            cnts[k++] = c;
            c = 0;
            p = v;
        }
        c++;
    }
    cnts[k++] = c;
    int rc = rle_set(out, h, w, cnts, k, e);
    free(cnts);
    return rc;
}

void coco_rle_decode(const coco_rle *r, uint8_t *mask) {
    size_t a = (size_t)r->h * r->w, p = 0;
    uint8_t v = 0;
    for (size_t j = 0; j < r->m && p < a; j++) {
        size_t c = r->cnts[j];
        if (c > a - p) c = a - p;
        memset(mask + p, v, c);
        p += c;
        v = !v;
    }
    if (p < a) memset(mask + p, 0, a - p);
}

uint32_t coco_rle_area(const coco_rle *r) {
    uint32_t a = 0;
    for (size_t j = 1; j < r->m; j += 2) a += r->cnts[j];
    return a;
}

// maskApi's rleToBbox, one run at a time. The column of a pixel index is found by stepping
// from the previous column when the run is short (the usual case) instead of dividing.
typedef struct { uint32_t h, w, xs, ys, xe, ye, cc, xp, col, col0; } bbox_acc;

static void bbox_init(bbox_acc *b, uint32_t h, uint32_t w) {
    b->h = h; b->w = w; b->xs = w; b->ys = h; b->xe = b->ye = 0; b->cc = 0; b->xp = 0;
    b->col = 0; b->col0 = 0;
}

static inline void bbox_step(bbox_acc *b, size_t j, uint32_t run) {
    uint32_t h = b->h;
    b->cc += run;
    uint32_t t = b->cc - (uint32_t)(j % 2), x, y;
    if (t >= b->col0 && t - b->col0 < h) x = b->col; // same column as before
    else if (t >= b->col0 && t - b->col0 < 2 * (uint64_t)h) x = b->col + 1;
    else x = t / h;
    y = t - x * h;
    b->col = x;
    b->col0 = x * h;
    if (j % 2 == 0) b->xp = x;
    else if (b->xp < x) { // the run wraps a column: the box spans the whole height
        b->ys = 0;
        b->ye = h - 1;
    }
    if (x < b->xs) b->xs = x;
    if (x > b->xe) b->xe = x;
    if (y < b->ys) b->ys = y;
    if (y > b->ye) b->ye = y;
}

static void bbox_out(const bbox_acc *b, size_t m_even, double bb[4]) {
    if (m_even == 0 || b->h == 0) {
        bb[0] = bb[1] = bb[2] = bb[3] = 0;
        return;
    }
    bb[0] = b->xs;
    bb[2] = (double)(uint32_t)(b->xe - b->xs + 1);
    bb[1] = b->ys;
    bb[3] = (double)(uint32_t)(b->ye - b->ys + 1);
}

void coco_rle_to_bbox(const coco_rle *r, double bb[4]) {
    size_t m = (r->m / 2) * 2;
    bbox_acc b;
    bbox_init(&b, r->h, r->w);
    if (r->h)
        for (size_t j = 0; j < m; j++) bbox_step(&b, j, r->cnts[j]);
    bbox_out(&b, m, bb);
}

static int cmp_u32(const void *a, const void *b) {
    uint32_t c = *(const uint32_t *)a, d = *(const uint32_t *)b;
    return c > d ? 1 : c < d ? -1 : 0;
}

typedef struct { uint32_t *v; size_t n, cap; } u32vec;

static int u32_push(u32vec *a, uint32_t x) {
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        uint32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v) return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

// maskApi upsamples the polygon 5x, walks every edge one step at a time, and keeps the points
// where the upsampled x crosses a pixel column centre; those give the y-boundaries per column.
// We generate the walk on the fly instead of storing it, which keeps memory bounded by the
// number of boundary points however far the vertices lie outside the image.
int coco_rle_fr_poly(const double *xy, size_t k, uint32_t h, uint32_t w, coco_rle *out, tk_err *e) {
    const double scale = 5;
    if (k == 0) return tk_err_set(e, TK_EDATA, "polygon without points");
    if (h == 0 || w == 0) return tk_err_set(e, TK_EDATA, "polygon in an empty %ux%u image", h, w);
    if ((uint64_t)h * w > INT_MAX) return tk_err_set(e, TK_EDATA, "image %ux%u is too large", h, w);
    int *x = malloc((k + 1) * sizeof *x), *y = malloc((k + 1) * sizeof *y);
    u32vec a = {0};
    int rc = 0;
    if (!x || !y) {
        rc = tk_err_errno(e, ENOMEM, "polygon of %zu points", k);
        goto done;
    }
    for (size_t j = 0; j < 2 * k; j++) {
        double v = scale * xy[j] + .5;
        if (!(v > -1e9 && v < 1e9)) {
            rc = tk_err_set(e, TK_EDATA, "polygon coordinate %g out of range", xy[j]);
            goto done;
        }
        if (j % 2 == 0) x[j / 2] = (int)v;
        else y[j / 2] = (int)v;
    }
    x[k] = x[0];
    y[k] = y[0];
    int have_prev = 0, pu = 0, pv = 0;
    for (size_t j = 0; j < k; j++) {
        int xs = x[j], xe = x[j + 1], ys = y[j], ye = y[j + 1], t;
        int dx = abs(xe - xs), dy = abs(ys - ye);
        int flip = (dx >= dy && xs > xe) || (dx < dy && ys > ye);
        if (flip) {
            t = xs; xs = xe; xe = t;
            t = ys; ys = ye; ye = t;
        }
        double s = dx >= dy ? (dx ? (double)(ye - ys) / dx : 0) : (double)(xe - xs) / dy;
        int n = dx >= dy ? dx : dy;
        for (int d = 0; d <= n; d++) {
            int u, v;
            t = flip ? n - d : d;
            if (dx >= dy) {
                u = t + xs;
                // maskApi divides 0 by 0 for a repeated vertex; that point never sits at a
                // column change, so its y does not matter
                v = dx ? (int)(ys + s * t + .5) : ys;
            } else {
                v = t + ys;
                u = (int)(xs + s * t + .5);
            }
            if (have_prev && u != pu) {
                double xd = (double)(u < pu ? u : u - 1);
                xd = (xd + .5) / scale - .5;
                if (floor(xd) == xd && xd >= 0 && xd <= (double)(w - 1)) {
                    double yd = (double)(v < pv ? v : pv);
                    yd = (yd + .5) / scale - .5;
                    if (yd < 0) yd = 0;
                    else if (yd > h) yd = h;
                    yd = ceil(yd);
                    if (u32_push(&a, (uint32_t)((int)xd * (int)h + (int)yd))) {
                        rc = tk_err_errno(e, ENOMEM, "polygon rasterization");
                        goto done;
                    }
                }
            }
            have_prev = 1;
            pu = u;
            pv = v;
        }
    }
    if (u32_push(&a, h * w)) {
        rc = tk_err_errno(e, ENOMEM, "polygon rasterization");
        goto done;
    }
    qsort(a.v, a.n, sizeof *a.v, cmp_u32);
    uint32_t p = 0;
    for (size_t j = 0; j < a.n; j++) {
        uint32_t t = a.v[j];
        a.v[j] -= p;
        p = t;
    }
    // merge the zero-length runs away (in place: the write index never passes the read index)
    size_t j = 0, m = 0;
    a.v[m++] = a.v[j++];
    while (j < a.n) {
        if (a.v[j] > 0) a.v[m++] = a.v[j++];
        else {
            j++;
            if (j < a.n) a.v[m - 1] += a.v[j++];
        }
    }
    rc = rle_set(out, h, w, a.v, m, e);
done:
    free(x);
    free(y);
    free(a.v);
    return rc;
}

int coco_rle_fr_bbox(const double bb[4], uint32_t h, uint32_t w, coco_rle *out, tk_err *e) {
    double xs = bb[0], xe = xs + bb[2], ys = bb[1], ye = ys + bb[3];
    double xy[8] = {xs, ys, xs, ye, xe, ye, xe, ys};
    return coco_rle_fr_poly(xy, 4, h, w, out, e);
}

int coco_rle_merge(const coco_rle *rs, size_t n, int intersect, coco_rle *out, tk_err *e) {
    if (n == 0) return rle_set(out, 0, 0, NULL, 0, e);
    if (n == 1) return rle_set(out, rs[0].h, rs[0].w, rs[0].cnts, rs[0].m, e);
    uint32_t h = rs[0].h, w = rs[0].w;
    uint64_t total = coco_rle_total(&rs[0]);
    size_t cap = n + 2; // each merge step emits at most am + bm + 1 runs
    for (size_t i = 0; i < n; i++) {
        cap += rs[i].m;
        if (rs[i].h == h && rs[i].w == w && coco_rle_total(&rs[i]) != total)
            return tk_err_set(e, TK_EDATA, "RLE merge: mask %zu has %llu pixels, mask 0 has %llu",
                              i, (unsigned long long)coco_rle_total(&rs[i]),
                              (unsigned long long)total);
    }
    uint32_t *acc = malloc(cap * sizeof *acc), *nxt = malloc(cap * sizeof *nxt);
    if (!acc || !nxt) {
        free(acc);
        free(nxt);
        return tk_err_errno(e, ENOMEM, "RLE merge");
    }
    size_t m = rs[0].m;
    if (m) memcpy(acc, rs[0].cnts, m * sizeof *acc);
    for (size_t i = 1; i < n; i++) {
        const coco_rle *B = &rs[i];
        if (B->h != h || B->w != w) {
            h = w = 0;
            m = 0;
            break;
        }
        // the same walk as maskApi (one run at a time, zero-length runs kept), so the merged
        // run list is the same list, not only the same mask
        size_t am = m, a = 1, b = 1, nm = 0;
        uint32_t ca = am ? acc[0] : 0, cb = B->m ? B->cnts[0] : 0, cc = 0, ct = 1;
        int v = 0, va = 0, vb = 0;
        while (ct > 0) {
            uint32_t c = ca < cb ? ca : cb;
            cc += c;
            ct = 0;
            ca -= c;
            if (!ca && a < am) { ca = acc[a++]; va = !va; }
            ct += ca;
            cb -= c;
            if (!cb && b < B->m) { cb = B->cnts[b++]; vb = !vb; }
            ct += cb;
            int vp = v;
            v = intersect ? (va && vb) : (va || vb);
            if (v != vp || ct == 0) {
                nxt[nm++] = cc;
                cc = 0;
            }
        }
        uint32_t *t = acc;
        acc = nxt;
        nxt = t;
        m = nm;
    }
    int rc = rle_set(out, h, w, acc, m, e);
    free(acc);
    free(nxt);
    return rc;
}

char *coco_rle_to_string(const coco_rle *r) {
    char *s = malloc(r->m * 7 + 1);
    if (!s) return NULL;
    size_t p = 0;
    for (size_t i = 0; i < r->m; i++) {
        long long x = r->cnts[i];
        if (i > 2) x -= (long long)r->cnts[i - 2];
        int more = 1;
        while (more) {
            char c = (char)(x & 0x1f);
            x >>= 5; // arithmetic shift: the sign carries along
            more = (c & 0x10) ? x != -1 : x != 0;
            if (more) c |= 0x20;
            s[p++] = (char)(c + 48);
        }
    }
    s[p] = 0;
    return s;
}

// Reads the next value of a compressed string at *p (maskApi's rleFrString, with checks).
// Values are one or two characters almost always: that path has no loop.
static int value_slow(const char *s, size_t len, size_t *p, long long *out, tk_err *e) {
    long long x = 0;
    int k = 0, more = 1;
    while (more) {
        if (*p >= len) return tk_err_set(e, TK_EDATA, "RLE string ends inside a value (byte %zu)", *p);
        unsigned char ch = (unsigned char)s[*p];
        if (ch < 48 || ch > 111)
            return tk_err_set(e, TK_EDATA, "RLE string has byte 0x%02x at %zu, outside '0'..'o'", ch, *p);
        if (k >= 8) return tk_err_set(e, TK_EDATA, "RLE string value too long at byte %zu", *p);
        int c = ch - 48;
        x |= (long long)(c & 0x1f) << (5 * k);
        more = c & 0x20;
        ++*p;
        k++;
        if (!more && (c & 0x10)) x |= (long long)-1 * ((long long)1 << (5 * k)); // sign
    }
    *out = x;
    return 0;
}

static inline int next_value(const char *s, size_t len, size_t *p, long long *out, tk_err *e) {
    unsigned c0 = (unsigned char)s[*p] - 48u;
    if (c0 < 32) { // one character, no continuation
        *out = (c0 & 0x10) ? (long long)c0 - 32 : (long long)c0;
        ++*p;
        return 0;
    }
    if (c0 < 64 && *p + 1 < len) {
        unsigned c1 = (unsigned char)s[*p + 1] - 48u;
        if (c1 < 32) {
            long long x = (long long)(c0 & 0x1f) | ((long long)c1 << 5);
            if (c1 & 0x10) x -= 1024;
            *out = x;
            *p += 2;
            return 0;
        }
    }
    return value_slow(s, len, p, out, e);
}

int coco_rle_fr_string(const char *s, size_t len, uint32_t h, uint32_t w, coco_rle *out, tk_err *e) {
    uint32_t *cnts = malloc((len ? len : 1) * sizeof *cnts);
    if (!cnts) return tk_err_errno(e, ENOMEM, "RLE string of %zu bytes", len);
    size_t m = 0;
    int rc = coco_rle_fr_string_into(s, len, cnts, &m, e);
    if (!rc) rc = rle_set(out, h, w, cnts, m, e);
    free(cnts);
    return rc;
}

int coco_rle_fr_string_into(const char *s, size_t len, uint32_t *cnts, size_t *m_out, tk_err *e) {
    size_t m = 0, p = 0;
    while (p < len) {
        long long x;
        int rc = next_value(s, len, &p, &x, e);
        if (rc) return rc;
        if (m > 2) x += (long long)cnts[m - 2];
        if (x < 0 || x > (long long)UINT32_MAX)
            return tk_err_set(e, TK_EDATA, "RLE run %zu is %lld, outside [0, 2^32)", m, x);
        cnts[m++] = (uint32_t)x;
    }
    *m_out = m;
    return 0;
}

int coco_rle_string_stats(const char *s, size_t len, uint32_t h, uint32_t w, uint32_t *area,
                          uint64_t *total, double bb[4], tk_err *e) {
    size_t m = 0, p = 0;
    long long prev2 = 0, prev1 = 0; // runs m-2 and m-1
    uint32_t a = 0, pending = 0;
    uint64_t tot = 0;
    bbox_acc b;
    bbox_init(&b, h, w);
    while (p < len) {
        long long x;
        int rc = next_value(s, len, &p, &x, e);
        if (rc) return rc;
        if (m > 2) x += prev2;
        if (x < 0 || x > (long long)UINT32_MAX)
            return tk_err_set(e, TK_EDATA, "RLE run %zu is %lld, outside [0, 2^32)", m, x);
        uint32_t run = (uint32_t)x;
        tot += run;
        if (m % 2) {
            a += run;
            if (h) { // toBbox uses runs in pairs: an odd last run is left out
                bbox_step(&b, m - 1, pending);
                bbox_step(&b, m, run);
            }
        } else
            pending = run;
        prev2 = prev1;
        prev1 = x;
        m++;
    }
    bbox_out(&b, (m / 2) * 2, bb);
    *area = a;
    *total = tot;
    return 0;
}

void coco_bb_iou(const double *dt, size_t m, const double *gt, size_t n, const uint8_t *iscrowd,
                 double *o) {
    for (size_t g = 0; g < n; g++) {
        const double *G = gt + g * 4;
        double ga = G[2] * G[3];
        int crowd = iscrowd && iscrowd[g];
        for (size_t d = 0; d < m; d++) {
            const double *D = dt + d * 4;
            double da = D[2] * D[3];
            o[g * m + d] = 0;
            double wd = fmin(D[2] + D[0], G[2] + G[0]) - fmax(D[0], G[0]);
            if (wd <= 0) continue;
            double ht = fmin(D[3] + D[1], G[3] + G[1]) - fmax(D[1], G[1]);
            if (ht <= 0) continue;
            double i = wd * ht, u = crowd ? da : da + ga - i;
            o[g * m + d] = i / u;
        }
    }
}

double coco_rle_iou_pair(const coco_rle *dt, const double dtbb[4], const coco_rle *gt,
                         const double gtbb[4], int crowd) {
    uint8_t c = crowd != 0;
    double o;
    coco_bb_iou(dtbb, 1, gtbb, 1, &c, &o);
    if (!(o > 0)) return o;
    if (dt->h != gt->h || dt->w != gt->w) return -1;
    // maskApi's walk over both run lists; an exhausted list continues as 0s
    const uint32_t *A = dt->cnts, *B = gt->cnts;
    size_t ka = dt->m, kb = gt->m, ia = 1, ib = 1;
    uint32_t ca = ka ? A[0] : 0, cb = kb ? B[0] : 0, i = 0, u = 0;
    int va = 0, vb = 0;
    for (;;) {
        while (!ca && ia < ka) ca = A[ia++], va = !va;
        while (!cb && ib < kb) cb = B[ib++], vb = !vb;
        if (!ca && !cb) break;
        uint32_t n;
        int a1 = ca ? va : 0, b1 = cb ? vb : 0;
        if (!ca) n = cb;
        else if (!cb) n = ca;
        else n = ca < cb ? ca : cb;
        if (a1 | b1) {
            u += n;
            if (a1 & b1) i += n;
        }
        if (ca) ca -= n;
        if (cb) cb -= n;
    }
    if (i == 0) u = 1;
    else if (crowd) u = coco_rle_area(dt);
    return (double)i / (double)u;
}

void coco_rle_iou(const coco_rle *dt, size_t m, const coco_rle *gt, size_t n,
                  const uint8_t *iscrowd, double *o) {
    double *db = malloc((m + 1) * 4 * sizeof *db), *gb = malloc((n + 1) * 4 * sizeof *gb);
    if (!db || !gb) { // callers of the public function pass small lists; fail soft
        for (size_t j = 0; j < m * n; j++) o[j] = 0;
        free(db);
        free(gb);
        return;
    }
    for (size_t d = 0; d < m; d++) coco_rle_to_bbox(&dt[d], db + 4 * d);
    for (size_t g = 0; g < n; g++) coco_rle_to_bbox(&gt[g], gb + 4 * g);
    for (size_t g = 0; g < n; g++)
        for (size_t d = 0; d < m; d++)
            o[g * m + d] = coco_rle_iou_pair(&dt[d], db + 4 * d, &gt[g], gb + 4 * g,
                                             iscrowd && iscrowd[g]);
    free(db);
    free(gb);
}
