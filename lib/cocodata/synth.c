// Synthetic COCO 2017 (synth.h, prep(1) "prep synth coco"). The format follows COCO's
// instances_*.json as the MLPerf SSD v1.x reference (single_stage_detector/ssd/utils.py,
// COCODetection) and pycocotools read it: images {id, file_name, height, width}, annotations
// {segmentation, area, iscrowd, image_id, bbox [x, y, w, h], category_id, id}, categories
// {supercategory, id, name}. That reference numbers its labels 1.. in the order of the
// categories list, prep coco by the rank of the id; the list is in id order here, as COCO's, so
// both agree, and the planted classes' scattered ids (1, 13, 27, ... 90 among 80) exercise the
// mapping. The reference keeps crowd boxes and drops images without annotations: every image
// here has at least one object (the first always fits an empty image).
#include "cocodata/synth.h"

#include <errno.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coco/rle.h"
#include "core/afile.h"
#include "core/philox.h"
#include "image/codec.h"

// COCO 2017's 80 categories: real ids, names and supercategories.
static const struct {
    int id;
    const char *name, *super;
} coco_cats[80] = {
    {1, "person", "person"}, {2, "bicycle", "vehicle"}, {3, "car", "vehicle"}, {4, "motorcycle", "vehicle"},
    {5, "airplane", "vehicle"}, {6, "bus", "vehicle"}, {7, "train", "vehicle"}, {8, "truck", "vehicle"},
    {9, "boat", "vehicle"}, {10, "traffic light", "outdoor"}, {11, "fire hydrant", "outdoor"},
    {13, "stop sign", "outdoor"}, {14, "parking meter", "outdoor"}, {15, "bench", "outdoor"},
    {16, "bird", "animal"}, {17, "cat", "animal"}, {18, "dog", "animal"}, {19, "horse", "animal"},
    {20, "sheep", "animal"}, {21, "cow", "animal"}, {22, "elephant", "animal"}, {23, "bear", "animal"},
    {24, "zebra", "animal"}, {25, "giraffe", "animal"}, {27, "backpack", "accessory"},
    {28, "umbrella", "accessory"}, {31, "handbag", "accessory"}, {32, "tie", "accessory"},
    {33, "suitcase", "accessory"}, {34, "frisbee", "sports"}, {35, "skis", "sports"},
    {36, "snowboard", "sports"}, {37, "sports ball", "sports"}, {38, "kite", "sports"},
    {39, "baseball bat", "sports"}, {40, "baseball glove", "sports"}, {41, "skateboard", "sports"},
    {42, "surfboard", "sports"}, {43, "tennis racket", "sports"}, {44, "bottle", "kitchen"},
    {46, "wine glass", "kitchen"}, {47, "cup", "kitchen"}, {48, "fork", "kitchen"}, {49, "knife", "kitchen"},
    {50, "spoon", "kitchen"}, {51, "bowl", "kitchen"}, {52, "banana", "food"}, {53, "apple", "food"},
    {54, "sandwich", "food"}, {55, "orange", "food"}, {56, "broccoli", "food"}, {57, "carrot", "food"},
    {58, "hot dog", "food"}, {59, "pizza", "food"}, {60, "donut", "food"}, {61, "cake", "food"},
    {62, "chair", "furniture"}, {63, "couch", "furniture"}, {64, "potted plant", "furniture"},
    {65, "bed", "furniture"}, {67, "dining table", "furniture"}, {70, "toilet", "furniture"},
    {72, "tv", "electronic"}, {73, "laptop", "electronic"}, {74, "mouse", "electronic"},
    {75, "remote", "electronic"}, {76, "keyboard", "electronic"}, {77, "cell phone", "electronic"},
    {78, "microwave", "appliance"}, {79, "oven", "appliance"}, {80, "toaster", "appliance"},
    {81, "sink", "appliance"}, {82, "refrigerator", "appliance"}, {84, "book", "indoor"},
    {85, "clock", "indoor"}, {86, "vase", "indoor"}, {87, "scissors", "indoor"}, {88, "teddy bear", "indoor"},
    {89, "hair drier", "indoor"}, {90, "toothbrush", "indoor"}};

enum { DISC, SQUARE, TRIANGLE, CROSS, STAR, ELLIPSE, DIAMOND, HEXAGON, CRESCENT, HORSESHOE, ARROW, HEART };
enum { STRIPES, CHECKER, DOTS, FLAT, GRID, RINGS };

// Class k: shape k, texture k % 6, two colours (a: the body, b: the texture's marks).
static const struct {
    const char *desc;
    int cat;
    uint8_t a[3], b[3];
} classes[COCO_SYNTH_CLASSES] = {
    {"disc, stripes", 37, {220, 50, 40}, {110, 20, 15}},
    {"square, checker", 72, {240, 150, 30}, {60, 40, 10}},
    {"triangle, dots", 1, {235, 220, 50}, {120, 90, 10}},
    {"cross, flat with noise", 27, {60, 170, 60}, {60, 170, 60}},
    {"star, grid", 90, {40, 200, 210}, {10, 70, 90}},
    {"ellipse, rings", 53, {50, 80, 220}, {200, 210, 240}},
    {"diamond, stripes", 44, {150, 60, 200}, {240, 220, 120}},
    {"hexagon, checker", 13, {220, 60, 170}, {250, 250, 250}},
    {"crescent, dots", 52, {240, 240, 235}, {40, 40, 40}},
    {"horseshoe, flat with noise", 85, {140, 90, 40}, {140, 90, 40}},
    {"arrow, grid", 62, {250, 160, 180}, {90, 30, 60}},
    {"heart, rings", 88, {20, 130, 120}, {230, 120, 40}},
};

int coco_synth_class_cat(int k) { return classes[k].cat; }
const char *coco_synth_class_desc(int k) { return classes[k].desc; }

#define MAX_OBJ COCO_SYNTH_MAX_OBJECTS
#define MAX_PART 6   // polygons of a crowd
#define MAX_PTS 64   // points of a shape polygon
#define TRIES 12

// Per-image uniforms: Philox (seed, TK_RNG_SYNTH, image << 24 | draw).
typedef struct {
    uint64_t seed, base, n;
} rng;

static double uni(rng *r) {
    tk_philox_ctr d = tk_philox_draw(r->seed, TK_RNG_SYNTH, r->base | r->n++);
    return tk_u64_to_unit(d.v[0], d.v[1]);
}

static int arc(double *p, int n, double cx, double r, double a0, double a1, int steps) {
    for (int i = 0; i <= steps; i++) {
        double a = a0 + (a1 - a0) * i / steps;
        p[2 * n] = cx + r * cos(a);
        p[2 * n + 1] = r * sin(a);
        n++;
    }
    return n;
}

// The outline of shape k at unit size (inside a disc of radius about 1), y pointing down.
static int unit_shape(int k, double *p) {
    static const double square[] = {-.75, -.75, .75, -.75, .75, .75, -.75, .75};
    static const double cross[] = {-.3, -.95, .3, -.95, .3, -.3, .95, -.3, .95, .3, .3, .3,
                                   .3, .95, -.3, .95, -.3, .3, -.95, .3, -.95, -.3, -.3, -.3};
    static const double diamond[] = {0, -1, .6, 0, 0, 1, -.6, 0};
    static const double arrow[] = {-.95, -.28, .2, -.28, .2, -.68, .95, 0, .2, .68, .2, .28, -.95, .28};
    const double *fixed = NULL;
    int n = 0;
    switch (k) {
    case SQUARE: fixed = square, n = 4; break;
    case CROSS: fixed = cross, n = 12; break;
    case DIAMOND: fixed = diamond, n = 4; break;
    case ARROW: fixed = arrow, n = 7; break;
    case DISC: return arc(p, 0, 0, 1, 0, 2 * M_PI * 47 / 48, 47);
    case TRIANGLE: return arc(p, 0, 0, 1, -M_PI / 2, -M_PI / 2 + 4 * M_PI / 3, 2);
    case HEXAGON: return arc(p, 0, 0, .95, 0, 5 * M_PI / 3, 5);
    case STAR:
        for (int i = 0; i < 10; i++) {
            double a = -M_PI / 2 + M_PI * i / 5, r = i % 2 ? .42 : 1;
            p[2 * i] = r * cos(a), p[2 * i + 1] = r * sin(a);
        }
        return 10;
    case ELLIPSE:
        n = arc(p, 0, 0, 1, 0, 2 * M_PI * 39 / 40, 39);
        for (int i = 0; i < n; i++) p[2 * i + 1] *= .5;
        return n;
    case CRESCENT: // the unit disc minus the disc of radius .85 about (.45, 0): they cross at
                   // x = .5333, angle 1.0085 on the unit circle and 1.4725 about (.45, 0)
        n = arc(p, 0, 0, 1, 1.0085, 2 * M_PI - 1.0085, 26);
        return arc(p, n, .45, .85, 2 * M_PI - 1.4725 - .06, 1.4725 + .06, 20);
    case HORSESHOE: // an annulus .55..1 open on the right
        n = arc(p, 0, 0, 1, .6, 2 * M_PI - .6, 26);
        return arc(p, n, 0, .55, 2 * M_PI - .75, .75, 16);
    default: // HEART, tip down, within 1.04 of the centre
        for (int i = 0; i < 40; i++) {
            double t = 2 * M_PI * i / 40, s = sin(t);
            p[2 * i] = 16 * s * s * s / 17;
            p[2 * i + 1] = -(13 * cos(t) - 5 * cos(2 * t) - 2 * cos(3 * t) - cos(4 * t)) / 17 - .1;
        }
        return 40;
    }
    memcpy(p, fixed, sizeof(double) * 2 * (size_t)n);
    return n;
}

typedef struct {
    int cls, crowd, occluded;
    int nparts, npts[MAX_PART];
    double pts[MAX_PART][2 * MAX_PTS]; // quarter-pixel coordinates
    double cx, cy, ca, sa, period;
    int x0, y0, x1, y1;                 // box of the full mask, exclusive ends
    uint8_t *full, *vis;                // column-major h x w (COCO's mask order)
    uint64_t nfull, nvis;
} object;

typedef struct {
    int w, h;
    uint8_t *scratch; // (w + 3) x (h + 3)
    int *queue;
} canvas;

// Rasterizes the object's polygons (maskApi's rule) into o->full, and its box and pixel count.
static int rasterize(const canvas *c, object *o, uint8_t *tmp, tk_err *e) {
    size_t a = (size_t)c->w * c->h;
    memset(o->full, 0, a);
    for (int k = 0; k < o->nparts; k++) {
        coco_rle r;
        TRY(coco_rle_fr_poly(o->pts[k], (size_t)o->npts[k], (uint32_t)c->h, (uint32_t)c->w, &r, e));
        coco_rle_decode(&r, tmp);
        coco_rle_free(&r);
        for (size_t i = 0; i < a; i++) o->full[i] |= tmp[i];
    }
    o->x0 = c->w, o->y0 = c->h, o->x1 = o->y1 = 0, o->nfull = 0;
    for (int x = 0; x < c->w; x++)
        for (int y = 0; y < c->h; y++)
            if (o->full[(size_t)x * c->h + y]) {
                o->nfull++;
                if (x < o->x0) o->x0 = x;
                if (x >= o->x1) o->x1 = x + 1;
                if (y < o->y0) o->y0 = y;
                if (y >= o->y1) o->y1 = y + 1;
            }
    memcpy(o->vis, o->full, a);
    o->nvis = o->nfull;
    return 0;
}

// The number of o's visible pixels that m's full mask covers (counted over the boxes' overlap).
static uint64_t lost_to(const canvas *c, const object *o, const object *m) {
    uint64_t n = 0;
    int x0 = o->x0 > m->x0 ? o->x0 : m->x0, x1 = o->x1 < m->x1 ? o->x1 : m->x1;
    int y0 = o->y0 > m->y0 ? o->y0 : m->y0, y1 = o->y1 < m->y1 ? o->y1 : m->y1;
    for (int x = x0; x < x1; x++)
        for (int y = y0; y < y1; y++) {
            size_t i = (size_t)x * c->h + y;
            n += o->vis[i] && m->full[i];
        }
    return n;
}

// Would o's visible part, less the pixels of cover (NULL: none), enclose pixels it does not own?
// A 4-connected fill of the other pixels from outside o's box (padded by one) must reach them all.
static int has_hole(const canvas *c, const object *o, const uint8_t *cover) {
    int bw = o->x1 - o->x0 + 2, bh = o->y1 - o->y0 + 2;
    uint8_t *g = c->scratch; // 0 other, 1 owned, 2 reached
    for (int i = 0; i < bw; i++)
        for (int j = 0; j < bh; j++) {
            int x = o->x0 + i - 1, y = o->y0 + j - 1;
            size_t p = (size_t)x * c->h + y;
            g[i * bh + j] = i > 0 && j > 0 && i < bw - 1 && j < bh - 1 && o->vis[p] && !(cover && cover[p]);
        }
    int head = 0, tail = 0;
    g[0] = 2;
    c->queue[tail++] = 0;
    while (head < tail) {
        int q = c->queue[head++], i = q / bh, j = q % bh;
        int nb[4][2] = {{i - 1, j}, {i + 1, j}, {i, j - 1}, {i, j + 1}};
        for (int k = 0; k < 4; k++) {
            int a = nb[k][0], b = nb[k][1];
            if (a < 0 || b < 0 || a >= bw || b >= bh || g[a * bh + b]) continue;
            g[a * bh + b] = 2;
            c->queue[tail++] = a * bh + b;
        }
    }
    for (int i = 0; i < bw * bh; i++)
        if (!g[i]) return 1;
    return 0;
}

// A new object m may go over the accepted ones if none loses more than 60% of its pixels or
// gets a hole (crowds, annotated by RLE, may), and m has 16 pixels or more.
static int fits(const canvas *c, object *obj, int n, const object *m) {
    if (m->nfull < 16) return 0;
    for (int i = 0; i < n; i++) {
        uint64_t lost = lost_to(c, &obj[i], m);
        if (!lost) continue;
        if ((double)(obj[i].nvis - lost) < 0.4 * (double)obj[i].nfull) return 0;
        if (!obj[i].crowd && has_hole(c, &obj[i], m->full)) return 0;
    }
    return 1;
}

// Takes m's pixels out of the visible parts of the n objects under it.
static void cover(const canvas *c, object *obj, int n, const object *m) {
    for (int i = 0; i < n; i++) {
        uint64_t lost = lost_to(c, &obj[i], m);
        if (!lost) continue;
        obj[i].occluded = 1;
        obj[i].nvis -= lost;
        for (int x = m->x0; x < m->x1; x++)
            for (int y = m->y0; y < m->y1; y++) {
                size_t p = (size_t)x * c->h + y;
                if (m->full[p]) obj[i].vis[p] = 0;
            }
    }
}

static double quarter(double v) { return floor(v * 4 + .5) / 4; }

// Draws a random object of class cls into o (polygons only: rasterize fills the masks).
static void place(rng *r, const canvas *c, int cls, int crowd, int large_only, object *o) {
    double mn = c->w < c->h ? c->w : c->h, s, u = uni(r) * 3;
    if (large_only) u = 2; // the draw is still taken: the rest of the stream stays as by default
    if (crowd) s = 25 + 45 * uni(r);
    else if (u < 1) s = 6 + 9 * uni(r);      // small: up to about 32 x 32 pixels
    else if (u < 2) s = 20 + 28 * uni(r);    // medium
    else s = 60 + (0.3 * mn - 60) * uni(r); // large
    double smax = (mn / 2 - 3) / 1.12; // the shape stays inside the image
    if (s > smax) s = smax;
    double margin = 1.12 * s + 2, rot = 2 * M_PI * uni(r);
    o->cls = cls, o->crowd = crowd, o->occluded = 0;
    o->cx = margin + (c->w - 2 * margin) * uni(r);
    o->cy = margin + (c->h - 2 * margin) * uni(r);
    o->ca = cos(rot), o->sa = sin(rot);
    o->period = s * (crowd ? 0.15 : 0.35) < 3 ? 3 : s * (crowd ? 0.15 : 0.35);
    o->nparts = crowd ? 3 + (int)(uni(r) * 4) : 1;
    for (int k = 0; k < o->nparts; k++) {
        double unit[2 * MAX_PTS], px = o->cx, py = o->cy, sc = s;
        if (crowd) { // members of 0.25-0.4 the cluster's size within 0.6 of it
            double a = 2 * M_PI * uni(r), d = 0.6 * s * uni(r);
            sc = s * (0.25 + 0.15 * uni(r));
            px += d * cos(a), py += d * sin(a);
        }
        int n = unit_shape(cls, unit);
        for (int i = 0; i < n; i++) {
            double x = unit[2 * i] * sc, y = unit[2 * i + 1] * sc;
            o->pts[k][2 * i] = quarter(px + x * o->ca - y * o->sa);
            o->pts[k][2 * i + 1] = quarter(py + x * o->sa + y * o->ca);
        }
        o->npts[k] = n;
    }
}

// The texture mark of o at pixel (x, y): 1 draws colour b, 0 colour a.
static int mark(const object *o, int x, int y) {
    double dx = x - o->cx, dy = y - o->cy;
    double u = (dx * o->ca + dy * o->sa) / o->period, v = (-dx * o->sa + dy * o->ca) / o->period;
    double fu = u - floor(u), fv = v - floor(v);
    switch (o->cls % 6) {
    case STRIPES: return fu < 0.5;
    case CHECKER: return (((long)floor(u) + (long)floor(v)) & 1) != 0;
    case DOTS: return (fu - .5) * (fu - .5) + (fv - .5) * (fv - .5) < 0.09;
    case GRID: return fu < 0.22 || fv < 0.22;
    case RINGS: {
        double d = sqrt(u * u + v * v);
        return d - floor(d) < 0.5;
    }
    default: return 0;
    }
}

static uint32_t mix(uint32_t h) {
    h ^= h >> 16;
    h *= 0x7feb352du;
    h ^= h >> 15;
    h *= 0x846ca68bu;
    return h ^ (h >> 16);
}

// Background (a tinted grey with slow light waves) and the objects in drawing order (each with a
// dark rim of its own pixels), plus pixel noise of +-8 (+-20 on flat-textured objects).
static void paint(rng *r, const canvas *c, const object *obj, int n, uint8_t *px) {
    double base[3], g = 60 + 120 * uni(r);
    for (int k = 0; k < 3; k++) base[k] = g + 50 * (uni(r) - .5);
    double fx = 2 * M_PI / (80 + 200 * uni(r)), fy = 2 * M_PI / (80 + 200 * uni(r)), ph = 2 * M_PI * uni(r);
    uint32_t salt = (uint32_t)(uni(r) * 4294967295.0);
    int w = c->w, h = c->h;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double l = 1 + 0.22 * sin(fx * x + ph) * cos(fy * y);
            for (int k = 0; k < 3; k++) px[((size_t)y * w + x) * 3 + k] = (uint8_t)(base[k] * l);
        }
    for (int i = 0; i < n; i++) {
        const object *o = &obj[i];
        double shade = 0.8 + 0.35 * uni(r);
        for (int x = o->x0; x < o->x1; x++)
            for (int y = o->y0; y < o->y1; y++) {
                const uint8_t *f = o->full + (size_t)x * h + y;
                if (!*f) continue;
                // its own edge pixels darker, so that touching objects of one class stay apart
                int edge = x == 0 || y == 0 || x == w - 1 || y == h - 1 || !f[-h] || !f[h] || !f[-1] || !f[1];
                const uint8_t *col = mark(o, x, y) ? classes[o->cls].b : classes[o->cls].a;
                for (int k = 0; k < 3; k++) {
                    double v = col[k] * shade * (edge ? 0.45 : 1);
                    px[((size_t)y * w + x) * 3 + k] = (uint8_t)(v > 255 ? 255 : v);
                }
            }
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint32_t m = mix(salt ^ mix((uint32_t)(y * w + x)));
            int amp = 8;
            for (int i = n - 1; i >= 0; i--)
                if (obj[i].full[(size_t)x * h + y]) {
                    amp = obj[i].cls % 6 == FLAT ? 20 : 8;
                    break;
                }
            for (int k = 0; k < 3; k++) {
                int v = px[((size_t)y * w + x) * 3 + k] + (int)((m >> (8 * k)) & 0xff) * (2 * amp + 1) / 256 - amp;
                px[((size_t)y * w + x) * 3 + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

// The outlines of o's visible pixels along pixel edges, pixel (x, y) being the square with corners
// (x, y) and (x + 1, y + 1): one closed polygon a loop, interior on the right of travel (y down);
// at a corner where two loops touch, the right turn is taken, so loops do not cross. With no
// holes (has_hole), every loop is an outer boundary and their union is the visible part.
static json_t *trace(const canvas *c, const object *o) {
    int bw = o->x1 - o->x0, bh = o->y1 - o->y0, vw = bw + 1;
    uint8_t *out = c->scratch; // out-going edges of each corner: bit d for direction d
    memset(out, 0, (size_t)vw * (bh + 1));
#define VIS(i, j) ((i) >= 0 && (j) >= 0 && (i) < bw && (j) < bh && o->vis[(size_t)(o->x0 + (i)) * c->h + o->y0 + (j)])
    for (int i = 0; i < bw; i++)
        for (int j = 0; j < bh; j++) {
            if (!VIS(i, j)) continue;
            if (!VIS(i, j - 1)) out[j * vw + i] |= 1;             // top, +x
            if (!VIS(i + 1, j)) out[j * vw + i + 1] |= 2;         // right, +y
            if (!VIS(i, j + 1)) out[(j + 1) * vw + i + 1] |= 4;   // bottom, -x
            if (!VIS(i - 1, j)) out[(j + 1) * vw + i] |= 8;       // left, -y
        }
#undef VIS
    static const int step[4][2] = {{1, 0}, {0, 1}, {-1, 0}, {0, -1}};
    json_t *polys = json_array();
    for (int v0 = 0; v0 < vw * (bh + 1); v0++)
        while (out[v0]) {
            json_t *p = json_array();
            int i = v0 % vw, j = v0 / vw, d = 0;
            while (!(out[v0] >> d & 1)) d++;
            json_array_append_new(p, json_real(o->x0 + i));
            json_array_append_new(p, json_real(o->y0 + j));
            for (;;) {
                out[j * vw + i] &= (uint8_t)~(1 << d);
                i += step[d][0], j += step[d][1];
                int b = out[j * vw + i], nd = -1;
                for (int t = 1; t >= -1 && nd < 0; t--) // right, straight, left
                    if (b >> ((d + t + 4) % 4) & 1) nd = (d + t + 4) % 4;
                if (nd < 0) break;
                if (nd != d) {
                    json_array_append_new(p, json_real(o->x0 + i));
                    json_array_append_new(p, json_real(o->y0 + j));
                }
                d = nd;
            }
            json_array_append_new(polys, p);
        }
    return polys;
}

static json_t *poly_json(const object *o) {
    json_t *polys = json_array();
    for (int k = 0; k < o->nparts; k++) {
        json_t *p = json_array();
        for (int i = 0; i < 2 * o->npts[k]; i++) json_array_append_new(p, json_real(o->pts[k][i]));
        json_array_append_new(polys, p);
    }
    return polys;
}

// The mask of a COCO segmentation given as polygons (json arrays of numbers): maskApi's rule.
static int polys_mask(json_t *polys, uint32_t h, uint32_t w, coco_rle *out, tk_err *e) {
    size_t np = json_array_size(polys), k;
    coco_rle *rs = calloc(np, sizeof *rs);
    double *xy = NULL;
    int rc = rs ? 0 : tk_err_errno(e, ENOMEM, "out of memory");
    for (k = 0; !rc && k < np; k++) {
        json_t *p = json_array_get(polys, k);
        size_t n = json_array_size(p);
        double *t = realloc(xy, n * sizeof *xy);
        if (!t) {
            rc = tk_err_errno(e, ENOMEM, "out of memory");
            break;
        }
        xy = t;
        for (size_t i = 0; i < n; i++) xy[i] = json_real_value(json_array_get(p, i));
        rc = coco_rle_fr_poly(xy, n / 2, h, w, &rs[k], e);
    }
    if (!rc) rc = coco_rle_merge(rs, np, 0, out, e);
    for (size_t i = 0; rs && i < np; i++) coco_rle_free(&rs[i]);
    free(rs);
    free(xy);
    return rc;
}

typedef struct {
    int w, h;
    json_t *anns;               // annotations without ids
    coco_synth_split_stats st;  // this image's counts (images: 1)
    uint8_t *jpeg;
    size_t jpeg_n;
} image_out;

// One annotation of o; its segmentation's mask is checked against the visible pixels.
static int annotate(const canvas *c, const object *o, image_out *im, tk_err *e) {
    uint8_t *vis = o->vis;
    coco_rle want, got = {0};
    TRY(coco_rle_encode(vis, (uint32_t)c->h, (uint32_t)c->w, &want, e));
    json_t *seg;
    int rc = 0;
    if (o->crowd) { // uncompressed RLE, as COCO's crowd annotations
        json_t *cnt = json_array();
        for (size_t i = 0; i < want.m; i++) json_array_append_new(cnt, json_integer(want.cnts[i]));
        seg = json_pack("{s:[i,i],s:o}", "size", c->h, c->w, "counts", cnt);
    } else {
        seg = o->occluded ? trace(c, o) : poly_json(o);
        rc = polys_mask(seg, (uint32_t)c->h, (uint32_t)c->w, &got, e);
        if (!rc && (got.m != want.m || (want.m && memcmp(got.cnts, want.cnts, want.m * sizeof *want.cnts))))
            rc = tk_err_set(e, TK_EINTERNAL, "synth coco: the polygons of an object do not rasterize to its pixels");
        coco_rle_free(&got);
    }
    double bb[4];
    coco_rle_to_bbox(&want, bb);
    uint32_t area = coco_rle_area(&want);
    coco_rle_free(&want);
    json_t *a = json_pack("{s:o,s:f,s:i,s:[f,f,f,f],s:i}", "segmentation", seg, "area", (double)area, "iscrowd",
                          o->crowd, "bbox", bb[0], bb[1], bb[2], bb[3], "category_id", classes[o->cls].cat);
    if (!a) rc = rc ? rc : tk_err_set(e, TK_EINTERNAL, "synth coco: cannot build an annotation");
    else json_array_append_new(im->anns, a);
    coco_synth_split_stats *s = &im->st;
    s->annotations++;
    s->per_class[o->cls]++;
    s->crowd += o->crowd != 0;
    s->occluded += o->occluded != 0;
    s->polygons += !o->crowd;
    if (!o->crowd) s->by_area[area < 32 * 32 ? 0 : area <= 96 * 96 ? 1 : 2]++;
    return rc;
}

static void image_size(const coco_synth_opts *o, rng *r, int *w, int *h) {
    if (o->width > 0) {
        *w = o->width, *h = o->height;
        return;
    }
    int span = o->max_side - o->min_side + 1;
    *w = o->min_side + (int)(uni(r) * span);
    *h = o->min_side + (int)(uni(r) * span);
}

// Renders, annotates and encodes image k of split sp (0 train, 1 val).
static int make_image(const coco_synth_opts *op, int sp, uint64_t k, image_out *im, tk_err *e) {
    rng r = {op->seed, ((uint64_t)sp << 60) | (k << 24), 0};
    memset(im, 0, sizeof *im);
    image_size(op, &r, &im->w, &im->h);
    canvas c = {im->w, im->h, NULL, NULL};
    size_t a = (size_t)c.w * c.h;
    object *obj = calloc(MAX_OBJ + 1, sizeof *obj);
    uint8_t *masks = malloc(2 * (MAX_OBJ + 1) * a + a), *px = malloc(3 * a);
    c.scratch = malloc((size_t)(c.w + 3) * (c.h + 3));
    c.queue = malloc((size_t)(c.w + 3) * (c.h + 3) * sizeof *c.queue);
    im->anns = json_array();
    int rc = !obj || !masks || !px || !c.scratch || !c.queue ? tk_err_errno(e, ENOMEM, "out of memory") : 0;
    for (int i = 0; !rc && i <= MAX_OBJ; i++) obj[i].full = masks + 2 * i * a, obj[i].vis = masks + (2 * i + 1) * a;
    const int lo = op->min_objects > 0 ? op->min_objects : 1, hi = op->max_objects > 0 ? op->max_objects : MAX_OBJ;
    const int ncls = op->classes > 0 ? op->classes : COCO_SYNTH_CLASSES;
    int want = lo + (int)(uni(&r) * (hi - lo + 1)), n = 0;
    for (int t = 0; !rc && t < want; t++) {
        int cls = (int)(uni(&r) * ncls), crowd = uni(&r) < 0.03;
        for (int try = 0; !rc && try < TRIES; try++) {
            object *m = &obj[n];
            place(&r, &c, cls, crowd, op->large_only, m);
            rc = rasterize(&c, m, masks + 2 * (MAX_OBJ + 1) * a, e);
            if (rc || !fits(&c, obj, n, m)) continue;
            cover(&c, obj, n, m);
            n++;
            break;
        }
    }
    if (!rc) paint(&r, &c, obj, n, px);
    for (int i = 0; !rc && i < n; i++) rc = annotate(&c, &obj[i], im, e);
    if (!rc) rc = tk_jpeg_encode(px, c.w, c.h, 3, op->quality, 1, &im->jpeg, &im->jpeg_n, e);
    im->st.images = 1;
    im->st.bytes = im->jpeg_n;
    free(obj);
    free(masks);
    free(px);
    free(c.scratch);
    free(c.queue);
    return rc;
}

// Writes n bytes and, when nl, a newline (a file of the tree under construction: the tree is
// renamed into place at the end, so no per-file atomic write is needed).
static int write_file(const char *path, const void *p, size_t n, int nl, tk_err *e) {
    FILE *f = fopen(path, "wb");
    if (!f) return tk_err_errno(e, errno, "%s: cannot create", path);
    int rc = tk_write_all(f, p, n, path, e);
    if (!rc && nl) rc = tk_write_all(f, "\n", 1, path, e);
    if (fclose(f) != 0 && !rc) rc = tk_err_errno(e, errno, "%s: write failed", path);
    return rc;
}

static int write_json(const char *path, json_t *j, size_t flags, tk_err *e) {
    char *text = j ? json_dumps(j, flags | JSON_PRESERVE_ORDER) : NULL;
    if (!text) return tk_err_set(e, TK_EINTERNAL, "%s: cannot encode the JSON", path);
    int rc = write_file(path, text, strlen(text), 1, e);
    free(text);
    return rc;
}

static const char *const split_name[2] = {"train2017", "val2017"};

// Image k of split sp: its COCO id (train 1, 4, 7, ...; val 500002, 500005, ...: ids that are
// neither contiguous nor shared between the splits, as COCO's). Annotation ids run from 1 (train)
// and from 1000000001 (val).
static int64_t image_id(int sp, uint64_t k) { return (sp ? 500002 : 1) + 3 * (int64_t)k; }

static json_t *categories(void) {
    json_t *a = json_array();
    for (int i = 0; i < 80; i++)
        json_array_append_new(a, json_pack("{s:s,s:i,s:s}", "supercategory", coco_cats[i].super, "id", coco_cats[i].id,
                                           "name", coco_cats[i].name));
    return a;
}

static void add_stats(coco_synth_split_stats *t, const coco_synth_split_stats *s) {
    t->images += s->images, t->annotations += s->annotations, t->crowd += s->crowd;
    t->occluded += s->occluded, t->polygons += s->polygons, t->bytes += s->bytes;
    for (int k = 0; k < COCO_SYNTH_CLASSES; k++) t->per_class[k] += s->per_class[k];
    for (int k = 0; k < 3; k++) t->by_area[k] += s->by_area[k];
}

// Appends the annotations of one image to the part file (comma-separated JSON objects), giving
// them their image id and annotation ids (*ann_id on; first_id: the split's first, no comma).
static int put_annotations(FILE *pf, const char *part, json_t *anns, int64_t img, int64_t *ann_id, int64_t first_id,
                           tk_err *e) {
    size_t i;
    json_t *a;
    json_array_foreach(anns, i, a) {
        json_object_set_new(a, "image_id", json_integer(img));
        json_object_set_new(a, "id", json_integer(*ann_id));
        char *t = json_dumps(a, JSON_COMPACT | JSON_PRESERVE_ORDER);
        if (!t) return tk_err_set(e, TK_EINTERNAL, "synth coco: cannot encode an annotation");
        int rc = *ann_id == first_id ? 0 : tk_write_all(pf, ",", 1, part, e);
        if (!rc) rc = tk_write_all(pf, t, strlen(t), part, e);
        free(t);
        TRY(rc);
        ++*ann_id;
    }
    return 0;
}

// instances_<split>.json: {info, licenses, images (head, without its closing brace), then the
// annotations copied from the part file, then categories}, in COCO's compact form.
static int write_instances(const char *path, json_t *head, FILE *pf, const char *part, tk_err *e) {
    char *h = json_dumps(head, JSON_COMPACT | JSON_PRESERVE_ORDER), *cats = json_dumps(categories(), JSON_COMPACT);
    FILE *f = h && cats ? fopen(path, "wb") : NULL;
    int rc = !h || !cats ? tk_err_set(e, TK_EINTERNAL, "%s: cannot encode the JSON", path)
             : !f        ? tk_err_errno(e, errno, "%s: cannot create", path)
                         : 0;
    if (!rc) rc = tk_write_all(f, h, strlen(h) - 1, path, e);
    if (!rc) rc = tk_write_all(f, ",\"annotations\":[", 16, path, e);
    if (!rc && fflush(pf) == 0 && fseek(pf, 0, SEEK_SET) != 0) rc = tk_err_errno(e, errno, "%s: cannot rewind", part);
    char buf[1 << 16];
    for (size_t n; !rc && (n = fread(buf, 1, sizeof buf, pf)) > 0;) rc = tk_write_all(f, buf, n, path, e);
    if (!rc && ferror(pf)) rc = tk_err_errno(e, errno, "%s: read failed", part);
    if (!rc) rc = tk_write_all(f, "],\"categories\":", 15, path, e);
    if (!rc) rc = tk_write_all(f, cats, strlen(cats), path, e);
    if (!rc) rc = tk_write_all(f, "}\n", 2, path, e);
    if (f && fclose(f) != 0 && !rc) rc = tk_err_errno(e, errno, "%s: write failed", path);
    free(h);
    free(cats);
    return rc;
}

// The images of split sp, written into tmp/<split>/, and tmp/annotations/instances_<split>.json.
// Annotations go to a part file as the chunks are done, so memory does not grow with the set.
static int write_split(const char *tmp, const coco_synth_opts *o, int sp, uint64_t *done,
                       void (*progress)(void *, uint64_t), void *pctx, coco_synth_split_stats *st, tk_err *e) {
    uint64_t total = sp ? o->val_images : o->train_images, chunk = 64;
    char path[4400], part[4400];
    snprintf(path, sizeof path, "%s/%s", tmp, split_name[sp]);
    if (mkdir(path, 0755) != 0) return tk_err_errno(e, errno, "%s: cannot create", path);
    snprintf(part, sizeof part, "%s/annotations/instances_%s.part", tmp, split_name[sp]);
    FILE *pf = fopen(part, "w+b");
    if (!pf) return tk_err_errno(e, errno, "%s: cannot create", part);
    json_t *images = json_array();
    image_out *ims = calloc(chunk, sizeof *ims);
    int rc = ims ? 0 : tk_err_errno(e, ENOMEM, "out of memory"), threads = o->threads > 0 ? o->threads : 1;
    const int64_t first_id = sp ? 1000000001 : 1;
    int64_t ann_id = first_id;
    for (uint64_t start = 0; !rc && start < total; start += chunk) {
        uint64_t end = start + chunk < total ? start + chunk : total;
        int bad = 0;
        tk_err first;
        tk_err_clear(&first);
#pragma omp parallel for num_threads(threads) schedule(dynamic, 1)
        for (uint64_t k = start; k < end; k++) {
            tk_err te;
            image_out *im = &ims[k - start];
            char file[4500];
            snprintf(file, sizeof file, "%s/%s/%012lld.jpg", tmp, split_name[sp], (long long)image_id(sp, k));
            int r = make_image(o, sp, k, im, &te);
            if (!r) r = write_file(file, im->jpeg, im->jpeg_n, 0, &te);
#pragma omp critical(tk_coco_synth)
            if (r && !bad) bad = 1, first = te;
        }
        if (bad) *e = first, rc = e->code;
        for (uint64_t k = start; k < end; k++) { // in image order: the files do not depend on threads
            image_out *im = &ims[k - start];
            char name[32];
            snprintf(name, sizeof name, "%012lld.jpg", (long long)image_id(sp, k));
            if (!rc) {
                json_array_append_new(images, json_pack("{s:i,s:s,s:i,s:i,s:I}", "license", 1, "file_name", name,
                                                        "height", im->h, "width", im->w, "id",
                                                        (json_int_t)image_id(sp, k)));
                rc = put_annotations(pf, part, im->anns, image_id(sp, k), &ann_id, first_id, e);
                add_stats(st, &im->st);
            }
            json_decref(im->anns);
            free(im->jpeg);
        }
        *done += end - start;
        if (progress) progress(pctx, *done);
    }
    free(ims);
    json_t *head = json_pack("{s:{s:s,s:s,s:i,s:s,s:s},s:[{s:s,s:i,s:s}],s:o}", "info", "description",
                             "trainkit prep synth coco: planted shapes", "version", "1.0", "year", 2017, "contributor",
                             "trainkit", "date_created", "2017/09/01", "licenses", "url", "", "id", 1, "name",
                             "synthetic", "images", images);
    snprintf(path, sizeof path, "%s/annotations/instances_%s.json", tmp, split_name[sp]);
    if (!rc) rc = write_instances(path, head, pf, part, e);
    json_decref(head);
    fclose(pf);
    unlink(part);
    return rc;
}

static json_t *split_json(const coco_synth_split_stats *s) {
    json_t *pc = json_object();
    for (int k = 0; k < COCO_SYNTH_CLASSES; k++) {
        char id[16];
        snprintf(id, sizeof id, "%d", classes[k].cat);
        json_object_set_new(pc, id, json_integer((json_int_t)s->per_class[k]));
    }
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:o,s:{s:I,s:I,s:I},s:I}", "images", (json_int_t)s->images,
                     "annotations", (json_int_t)s->annotations, "crowd", (json_int_t)s->crowd, "occluded",
                     (json_int_t)s->occluded, "polygons", (json_int_t)s->polygons, "per_category", pc, "areas",
                     "small", (json_int_t)s->by_area[0], "medium", (json_int_t)s->by_area[1], "large",
                     (json_int_t)s->by_area[2], "jpeg_bytes", (json_int_t)s->bytes);
}

// The sets a configuration was calibrated on (every generator option that changes the bytes, as
// given; the runs are in the configuration's "synthetic" section): their manifests carry that
// bbox mAP target; any other set's is null, as no model has been trained on it.
static const struct {
    uint64_t train, val, seed;
    int min_side, max_side, min_objects, max_objects, classes, large_only, quality;
    double map;
    const char *how;
} calibrated[] = {
    {64, 16, 1, 300, 340, 1, 2, 3, 1, 90, 0.01,
     "share/workloads/ssd/tiny.json (run.sh --size tiny, the cpu): the tiny SSD (width 8, 260x260, batch 4, lr "
     "0.02) reached it with train seeds 1 to 3 at step 96, 96 and 64 (epochs 6, 6, 4 of its 10); the untrained "
     "net scores 0"},
    {4096, 256, 1, 300, 340, 1, 4, 6, 1, 90, 0.55,
     "share/workloads/ssd/synth.json (run.sh --size synth, one H200): the full SSD300-ResNet34 from scratch (batch "
     "64, lr 5e-3) evaluated every epoch with train seeds 1 to 3: mAP 0.579, 0.563, 0.532 at epoch 10 (synth.json's "
     "first evaluation) and 0.638, 0.601, 0.590 at epoch 15 (its second); 0.012-0.023 after one epoch"},
};

static int calibrated_set(const coco_synth_opts *o) {
    const int omin = o->min_objects > 0 ? o->min_objects : 1, omax = o->max_objects > 0 ? o->max_objects : MAX_OBJ;
    const int ncls = o->classes > 0 ? o->classes : COCO_SYNTH_CLASSES;
    for (int i = 0; i < (int)(sizeof calibrated / sizeof calibrated[0]); i++)
        if (calibrated[i].train == o->train_images && calibrated[i].val == o->val_images &&
            calibrated[i].seed == o->seed && o->width <= 0 && calibrated[i].min_side == o->min_side &&
            calibrated[i].max_side == o->max_side && calibrated[i].min_objects == omin &&
            calibrated[i].max_objects == omax && calibrated[i].classes == ncls &&
            calibrated[i].large_only == (o->large_only != 0) && calibrated[i].quality == o->quality)
            return i;
    return -1;
}

static json_t *manifest_target(const coco_synth_opts *o) {
    int i = calibrated_set(o);
    return i < 0 ? json_null() : json_real(calibrated[i].map);
}

static const char *manifest_target_how(const coco_synth_opts *o) {
    int i = calibrated_set(o);
    return i < 0 ? NULL : calibrated[i].how;
}

static int write_manifest(const char *tmp, const coco_synth_opts *o, const coco_synth_stats *st, tk_err *e) {
    json_t *cls = json_array();
    for (int k = 0; k < COCO_SYNTH_CLASSES; k++) {
        const char *name = "";
        for (int i = 0; i < 80; i++)
            if (coco_cats[i].id == classes[k].cat) name = coco_cats[i].name;
        json_array_append_new(cls, json_pack("{s:i,s:s,s:i,s:s}", "class", k, "drawn", classes[k].desc,
                                             "category_id", classes[k].cat, "name", name));
    }
    json_t *size = o->width > 0 ? json_pack("{s:i,s:i}", "width", o->width, "height", o->height)
                                : json_pack("{s:i,s:i}", "min_side", o->min_side, "max_side", o->max_side);
    const int omin = o->min_objects > 0 ? o->min_objects : 1, omax = o->max_objects > 0 ? o->max_objects : MAX_OBJ;
    const int ncls = o->classes > 0 ? o->classes : COCO_SYNTH_CLASSES;
    json_t *m = json_pack(
        "{s:s,s:i,s:I,s:o,s:i,s:i,s:o,s:{s:o,s:o},s:o,s:s,s:s,s:{s:i,s:i,s:i,s:b},s:{s:s,s:s,s:s,s:s}}",
        "generator", "trainkit prep synth coco", "format_version", 1, "seed", (json_int_t)o->seed, "size", size,
        "quality", o->quality, "categories", 80, "planted_classes", cls, "splits", "train2017",
        split_json(&st->split[0]), "val2017", split_json(&st->split[1]), "target_map", manifest_target(o),
        "target_note",
        "a target is calibrated by training on a set: prep synth coco trains nothing, so only the sets a "
        "configuration was calibrated on carry one (the sets of share/workloads/ssd/tiny.json and synth.json, made by "
        "run.sh --size tiny and --size synth: how, in \"target_how\" and in the configuration's \"synthetic\" "
        "section); any other set's is null. The ground truth given back as detections scores 1.0 (tests/cli/prep-synth-coco.bats)",
        "objects", "an image holds min..max objects (object_options), each of one of the first `classes` planted "
        "classes: a shape with its texture and colours, rotated, at COCO's small, medium and large areas (large only "
        "with large_only); later objects drawn over earlier ones (none hidden over 60%, no holes); about 3% crowds "
        "(clusters of small copies, iscrowd 1, uncompressed RLE)",
        "object_options", "min", omin, "max", omax, "classes", ncls, "large_only", o->large_only != 0, "files",
        "train", "train2017/", "val", "val2017/", "train_annotations", "annotations/instances_train2017.json",
        "val_annotations", "annotations/instances_val2017.json");
    const char *how = manifest_target_how(o);
    if (m && how) json_object_set_new(m, "target_how", json_string(how));
    char path[4400];
    snprintf(path, sizeof path, "%s/manifest.json", tmp);
    int rc = write_json(path, m, JSON_INDENT(2), e);
    json_decref(m);
    return rc;
}

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    return remove(path);
}

int coco_synth(const char *dir, const coco_synth_opts *o, coco_synth_stats *st,
               void (*progress)(void *ctx, uint64_t done), void *pctx, tk_err *e) {
    memset(st, 0, sizeof *st);
    if (!tk_img_have_jpeg()) return tk_jpeg_encode(NULL, 1, 1, 3, 90, 1, NULL, NULL, e); // says what is missing
    const int lo = COCO_SYNTH_MIN_SIDE, hi = COCO_SYNTH_MAX_SIDE;
    int side_ok = o->width > 0 ? o->width >= lo && o->height >= lo && o->width <= hi && o->height <= hi
                               : o->min_side >= lo && o->min_side <= o->max_side && o->max_side <= hi;
    if (!side_ok || o->quality < 1 || o->quality > 100 || o->train_images + o->val_images == 0 ||
        o->train_images > ((uint64_t)1 << 30) || o->val_images > ((uint64_t)1 << 30))
        return tk_err_set(e, TK_EUSAGE, "synth coco: sides %d..%d, quality 1..100, 1 to 2^30 images a split", lo, hi);
    const int omin = o->min_objects > 0 ? o->min_objects : 1, omax = o->max_objects > 0 ? o->max_objects : MAX_OBJ;
    if (o->min_objects < 0 || o->max_objects < 0 || omin > omax || omax > MAX_OBJ || o->classes < 0 ||
        o->classes > COCO_SYNTH_CLASSES)
        return tk_err_set(e, TK_EUSAGE, "synth coco: objects MIN-MAX with 1 <= MIN <= MAX <= %d, classes 1..%d", MAX_OBJ,
                          COCO_SYNTH_CLASSES);
    if (rmdir(dir) != 0 && errno != ENOENT) // an empty directory may stand where the tree goes
        return tk_err_set(e, TK_EUSAGE, "%s exists and is not an empty directory: give a new one", dir);
    char tmp[4200], path[4400];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
    if (mkdir(tmp, 0755) != 0) return tk_err_errno(e, errno, "%s: cannot create", tmp);
    snprintf(path, sizeof path, "%s/annotations", tmp);
    int rc = mkdir(path, 0755) != 0 ? tk_err_errno(e, errno, "%s: cannot create", path) : 0;
    uint64_t done = 0;
    for (int sp = 0; sp < 2 && !rc; sp++) rc = write_split(tmp, o, sp, &done, progress, pctx, &st->split[sp], e);
    if (!rc) rc = write_manifest(tmp, o, st, e);
    if (!rc && rename(tmp, dir) != 0) rc = tk_err_errno(e, errno, "%s: cannot rename to %s", tmp, dir);
    if (rc) nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS); // no partial tree is left
    return rc;
}
