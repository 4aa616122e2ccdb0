// pycocotools' COCOeval (evaluate, accumulate, summarize) for bbox and segm. Each (image,
// category) group is matched independently (in parallel); each category is accumulated
// independently (in parallel); every sum runs in a fixed order, so results do not depend on
// the number of threads. Where pycocotools' order of operations matters for the last bit it
// is kept: numpy's linspace thresholds, stable sorts by score, the `+ np.spacing(1)` in the
// precision, and numpy's pairwise summation in the means of summarize().
#include <errno.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coco/coco_int.h"

#define T_THR 10
#define R_THR 101
#define N_AREA 4

static const char *area_lbl[N_AREA] = {"all", "small", "medium", "large"};

double coco_linspace(double start, double stop, int num, int i) {
    if (num > 1 && i == num - 1) return stop; // numpy sets the endpoint exactly
    double step = (stop - start) / (double)(num - 1);
    volatile double y = (double)i * step; // keep multiply and add separate (no FMA): numpy's order
    return y + start;
}

// numpy's pairwise_sum for float64 (blocks of 8 accumulators up to 128 elements, halves above).
static double pairwise(const double *a, size_t n) {
    if (n < 8) {
        double r = 0.;
        for (size_t i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        size_t i;
        for (int j = 0; j < 8; j++) r[j] = a[j];
        for (i = 8; i < n - (n % 8); i += 8)
            for (int j = 0; j < 8; j++) r[j] += a[i + j];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

// numpy 1.x reduces in buffers of 8192 elements (pairwise inside each, sequential across them);
// the oracle's reference (numpy 1.24) does, numpy 2 sums the whole array pairwise. The two
// agree up to 8192 entries and may differ in the last bit above.
double coco_np_sum(const double *a, size_t n) {
    double s = 0.;
    for (size_t i = 0; i < n; i += 8192) s += pairwise(a + i, n - i < 8192 ? n - i : 8192);
    return s;
}

void coco_params_default(coco_params *p, coco_iou_type t) {
    memset(p, 0, sizeof *p);
    p->iou_type = t;
    p->use_cats = 1;
    p->max_dets[0] = 1;
    p->max_dets[1] = 10;
    p->max_dets[2] = 100;
    p->n_max_dets = 3;
    const double big = 1e5 * 1e5;
    double rng[N_AREA][2] = {{0, big}, {0, 32 * 32}, {32 * 32, 96 * 96}, {96 * 96, big}};
    memcpy(p->area_rng, rng, sizeof rng);
}

void coco_result_free(coco_result *r) {
    if (!r) return;
    free(r->precision);
    free(r->recall);
    free(r->cat_ids);
    free(r->ap);
    free(r->ap50);
    memset(r, 0, sizeof *r);
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

// np.unique: sorted, without repeats
static int64_t *unique_ids(const int64_t *v, size_t n, size_t *out_n) {
    int64_t *u = malloc((n ? n : 1) * sizeof *u);
    if (!u) return NULL;
    if (n) memcpy(u, v, n * sizeof *u);
    qsort(u, n, sizeof *u, cmp_i64);
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!m || u[m - 1] != u[i]) u[m++] = u[i];
    *out_n = m;
    return u;
}

// ---- ground-truth masks, rasterized once ----

static int gt_masks(coco_gt *gt, int nthreads) {
    pthread_mutex_lock(&gt->lock);
    int rc = 0;
    if (!gt->masks_ready) {
        gt->rle = calloc(gt->nanns + 1, sizeof *gt->rle);
        gt->rle_bb = calloc((gt->nanns + 1) * 4, sizeof *gt->rle_bb);
        if (!gt->rle || !gt->rle_bb) rc = ENOMEM;
        long n = (long)gt->nanns;
#pragma omp parallel for schedule(dynamic, 64) num_threads(nthreads) if (!rc)
        for (long i = 0; i < n; i++) {
            coco_gt_ann *a = &gt->anns[i];
            tk_err le;
            // a failure leaves h = w = 0 and m = 0 (marked by UINT32_MAX in h): reported when
            // the annotation is actually evaluated, as pycocotools would fail only then
            if (coco_seg_to_rle(&gt->st, &a->seg, gt->img_h[a->img], gt->img_w[a->img], &gt->rle[i], &le)) {
                memset(&gt->rle[i], 0, sizeof gt->rle[i]);
                gt->rle[i].h = UINT32_MAX;
            } else
                coco_rle_to_bbox(&gt->rle[i], gt->rle_bb + 4 * i);
        }
        if (!rc) gt->masks_ready = 1;
        else {
            free(gt->rle);
            free(gt->rle_bb);
            gt->rle = NULL;
            gt->rle_bb = NULL;
        }
    }
    pthread_mutex_unlock(&gt->lock);
    return rc;
}

// ---- per (image, category) evaluation ----

typedef struct {
    int32_t img;       // internal image index
    int32_t k;         // category position (0 when categories are pooled)
    uint32_t gbeg, gend, dbeg, dend; // ranges in the image's by_img lists (filtered by k)
    size_t off;        // first slot in the per-detection arrays
    uint32_t nd;       // detections kept (<= maxDets[-1])
} group;

typedef struct {
    coco_gt *gt;
    const coco_dt *dt;
    const coco_params *p;
    const int32_t *catpos; // internal category -> position in catIds, or -1
    int maxdet;
    double iou_thr[T_THR];
    group *groups;
    size_t ngroups;
    double *score;     // [slots]
    uint8_t *flags;    // [slots][A][T]: bit 0 matched to a GT with id != 0, bit 1 ignored
    uint32_t *dpos;    // [slots] rank of the detection in its group
    int64_t *npig;     // [groups][A]
} eval_ctx;

static int gt_in(const eval_ctx *c, const coco_gt_ann *a, int k) {
    int32_t cp = a->cat >= 0 ? c->catpos[a->cat] : -1;
    return c->p->use_cats ? cp == k : cp >= 0;
}

static int cmp_score_desc(uint32_t a, uint32_t b, const void *ctx) {
    const coco_dt_ann *d = ctx;
    double x = d[a].score, y = d[b].score;
    return x > y ? -1 : x < y; // descending; ties keep their order (stable sort)
}

typedef struct { uint32_t *gi, *di, *tmp, *gord; double *iou; uint8_t *gig, *crowd, *gtm;
                 double *dbb; uint32_t *arena; size_t cap_g, cap_d, cap_arena; } scratch;

static int scratch_fit(scratch *s, size_t G, size_t D) {
    if (G > s->cap_g) {
        size_t c = G * 2;
        free(s->gi); free(s->gord); free(s->gig); free(s->crowd); free(s->gtm);
        s->gi = malloc(c * sizeof *s->gi);
        s->gord = malloc(c * sizeof *s->gord);
        s->gig = malloc(c);
        s->crowd = malloc(c);
        s->gtm = malloc(c * T_THR);
        s->cap_g = c;
        if (!s->gi || !s->gord || !s->gig || !s->crowd || !s->gtm) return -1;
    }
    if (D > s->cap_d) {
        size_t c = D * 2;
        free(s->di); free(s->tmp); free(s->dbb);
        s->di = malloc(c * sizeof *s->di);
        s->tmp = malloc(c * sizeof *s->tmp);
        s->dbb = malloc(c * 4 * sizeof *s->dbb);
        s->cap_d = c;
        if (!s->di || !s->tmp || !s->dbb) return -1;
    }
    free(s->iou);
    s->iou = malloc((G * D + 1) * sizeof *s->iou);
    return s->iou ? 0 : -1;
}

static void scratch_free(scratch *s) {
    free(s->gi); free(s->gord); free(s->gig); free(s->crowd); free(s->gtm);
    free(s->di); free(s->tmp); free(s->dbb); free(s->iou); free(s->arena);
}

// Returns 0, ENOMEM, or 1 when a ground-truth mask is missing (reported by the caller).
static int eval_group(eval_ctx *c, size_t gidx, scratch *s) {
    group *g = &c->groups[gidx];
    const coco_gt *gt = c->gt;
    const coco_dt *dt = c->dt;
    const coco_params *p = c->p;
    size_t G = 0, D = 0;
    if (scratch_fit(s, g->gend - g->gbeg, g->dend - g->dbeg)) return ENOMEM;
    for (uint32_t j = g->gbeg; j < g->gend; j++) {
        uint32_t ai = gt->by_img[j];
        if (gt_in(c, &gt->anns[ai], g->k)) s->gi[G++] = ai;
    }
    if (dt)
        for (uint32_t j = g->dbeg; j < g->dend; j++) {
            uint32_t ai = dt->by_img[j];
            const coco_dt_ann *a = &dt->anns[ai];
            int32_t cp = a->cat >= 0 ? c->catpos[a->cat] : -1;
            if (p->use_cats ? cp == g->k : cp >= 0) s->di[D++] = ai;
        }
    coco_stable_sort(s->di, s->tmp, D, cmp_score_desc, dt ? dt->anns : NULL);
    if (D > (size_t)c->maxdet) D = (size_t)c->maxdet;
    g->nd = (uint32_t)D;
    for (size_t d = 0; d < D; d++) {
        c->score[g->off + d] = dt->anns[s->di[d]].score;
        c->dpos[g->off + d] = (uint32_t)d;
    }
    for (size_t j = 0; j < G; j++) s->crowd[j] = gt->anns[s->gi[j]].crowd;
    // IoU, s->iou[gj * D + d] (maskApi's layout)
    if (G && D) {
        if (p->iou_type == COCO_BBOX) {
            double *gb = malloc(G * 4 * sizeof *gb);
            if (!gb) return ENOMEM;
            for (size_t j = 0; j < G; j++) memcpy(gb + 4 * j, gt->anns[s->gi[j]].bbox, 4 * sizeof *gb);
            for (size_t d = 0; d < D; d++) memcpy(s->dbb + 4 * d, dt->anns[s->di[d]].bbox, 4 * sizeof *gb);
            coco_bb_iou(s->dbb, D, gb, G, s->crowd, s->iou);
            free(gb);
        } else {
            for (size_t j = 0; j < G; j++)
                if (gt->rle[s->gi[j]].h == UINT32_MAX) return 1;
            // a result's runs are decoded only when its mask's box meets a ground truth's box
            for (size_t d = 0; d < D; d++) {
                uint32_t ai = s->di[d];
                const coco_dt_ann *a = &dt->anns[ai];
                coco_rle r = {0}, made = {0};
                const double *rbb = dt->rbb + 4 * ai;
                double bb[4];
                int have = 0, rc = 0;
                tk_err le;
                if (a->seg.kind == SEG_NONE) { // a box result evaluated as a mask: loadRes made it a polygon
                    rc = coco_rle_fr_bbox(a->bbox, gt->img_h[a->img], gt->img_w[a->img], &made, &le);
                    if (rc) return rc == TK_EDATA ? 2 : ENOMEM;
                    r = made;
                    coco_rle_to_bbox(&r, bb);
                    rbb = bb;
                    have = 1;
                }
                for (size_t j = 0; j < G; j++) {
                    const double *gbb = gt->rle_bb + 4 * s->gi[j];
                    double o;
                    uint8_t cr = s->crowd[j];
                    coco_bb_iou(rbb, 1, gbb, 1, &cr, &o);
                    if (o > 0 && !have) {
                        switch (a->seg.kind) {
                        case SEG_STRING:
                            if (a->seg.n > s->cap_arena) {
                                free(s->arena);
                                s->cap_arena = a->seg.n * 2;
                                s->arena = malloc(s->cap_arena * sizeof *s->arena);
                                if (!s->arena) {
                                    s->cap_arena = 0;
                                    return ENOMEM;
                                }
                            }
                            r.h = a->seg.h;
                            r.w = a->seg.w;
                            r.cnts = s->arena;
                            rc = coco_rle_fr_string_into(dt->st.buf + a->seg.off, a->seg.n, s->arena, &r.m, &le);
                            break;
                        case SEG_COUNTS:
                            r = (coco_rle){a->seg.h, a->seg.w, a->seg.n, coco_seg_counts(&dt->st, &a->seg)};
                            break;
                        default:
                            r = dt->owned[ai];
                        }
                        if (rc) return 2;
                        have = 1;
                    }
                    s->iou[j * D + d] = o > 0 ? coco_rle_iou_pair(&r, rbb, &gt->rle[s->gi[j]], gbb, cr) : o;
                }
                coco_rle_free(&made);
            }
        }
    }
    const int T = T_THR;
    for (int a = 0; a < N_AREA; a++) {
        double lo = p->area_rng[a][0], hi = p->area_rng[a][1];
        int64_t npig = 0;
        // ground truth ignored when crowd or out of the area range; ignored ones go last
        size_t ng = 0;
        for (size_t j = 0; j < G; j++) {
            const coco_gt_ann *ga = &gt->anns[s->gi[j]];
            s->gig[j] = ga->crowd || ga->area < lo || ga->area > hi;
            if (!s->gig[j]) s->gord[ng++] = (uint32_t)j, npig++;
        }
        for (size_t j = 0; j < G; j++)
            if (s->gig[j]) s->gord[ng++] = (uint32_t)j;
        c->npig[gidx * N_AREA + a] = npig;
        if (G) memset(s->gtm, 0, G * T); // gtm is NULL for an image without GT
        for (int t = 0; t < T; t++) {
            uint8_t *gtm = s->gtm + (size_t)t * G;
            for (size_t d = 0; d < D; d++) {
                double iou = c->iou_thr[t] < 1 - 1e-10 ? c->iou_thr[t] : 1 - 1e-10;
                long m = -1;
                for (size_t q = 0; q < G; q++) {
                    size_t j = s->gord[q];
                    if (gtm[q] && !s->crowd[j]) continue;
                    if (m > -1 && !s->gig[s->gord[m]] && s->gig[j]) break;
                    double v = s->iou[j * D + d];
                    if (v < iou) continue;
                    iou = v;
                    m = (long)q;
                }
                uint8_t f = 0;
                int matched_nonzero = 0;
                if (m > -1) {
                    size_t j = s->gord[m];
                    f = s->gig[j] ? 2 : 0;
                    matched_nonzero = gt->anns[s->gi[j]].id != 0;
                    gtm[m] = 1; // the detection's id (index + 1) is never 0
                }
                if (matched_nonzero) f |= 1;
                else {
                    double da = dt->anns[s->di[d]].area;
                    if (da < lo || da > hi) f |= 2;
                }
                c->flags[((g->off + d) * N_AREA + a) * T + t] = f;
            }
        }
    }
    return 0;
}

// ---- accumulate one category ----

// Sorts (score, slot) pairs by score, descending, ties by slot: slots of a category run in
// image order then rank, numpy's concatenation order, so this is its stable mergesort.
typedef struct { double s; uint32_t slot; } scored;

static inline int scored_before(const scored *a, const scored *b) {
    return a->s > b->s || (a->s == b->s && a->slot < b->slot);
}

static void sort_scored(scored *a, scored *tmp, size_t n) {
    if (n <= 16) {
        for (size_t i = 1; i < n; i++) {
            scored x = a[i];
            size_t j = i;
            while (j > 0 && scored_before(&x, &a[j - 1])) {
                a[j] = a[j - 1];
                j--;
            }
            a[j] = x;
        }
        return;
    }
    size_t h = n / 2;
    sort_scored(a, tmp, h);
    sort_scored(a + h, tmp, n - h);
    if (!scored_before(&a[h], &a[h - 1])) return;
    memcpy(tmp, a, h * sizeof *a);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) a[k++] = scored_before(&a[j], &tmp[i]) ? a[j++] : tmp[i++];
    while (i < h) a[k++] = tmp[i++];
}

// The precision at each recall threshold, computed without numpy's full arrays but with the
// same doubles: rc = tp/npig only rises at true positives, so searchsorted(rc, r) is the
// position of the k-th true positive, k the least count with k/npig >= r; the interpolated
// precision there is the largest tp/(fp+tp+eps) at or after it, which is attained at a true
// positive (a false positive only lowers it). Ignored detections repeat the previous values.
static int accumulate_k(eval_ctx *c, int k, const uint32_t *gl, size_t ngl, int M, const int *maxdets,
                        const double *rec_thr, coco_result *r) {
    const int T = T_THR, R = R_THR, K = r->K, A = N_AREA;
    size_t n = 0;
    for (size_t i = 0; i < ngl; i++) n += c->groups[gl[i]].nd;
    scored *ent = malloc((n + 1) * sizeof *ent), *tmp = malloc((n / 2 + 2) * sizeof *tmp);
    uint8_t *fs = malloc((n + 1) * A * T);
    double *prt = malloc((n + 1) * sizeof *prt);
    if (!ent || !tmp || !fs || !prt) {
        free(ent); free(tmp); free(fs); free(prt);
        return ENOMEM;
    }
    size_t q = 0;
    for (size_t i = 0; i < ngl; i++) // image order, then rank: numpy's concatenation order
        for (uint32_t d = 0; d < c->groups[gl[i]].nd; d++) {
            uint32_t sl = (uint32_t)(c->groups[gl[i]].off + d);
            ent[q++] = (scored){c->score[sl], sl};
        }
    sort_scored(ent, tmp, n);
    int64_t npig[N_AREA] = {0};
    for (size_t i = 0; i < ngl; i++)
        for (int a = 0; a < A; a++) npig[a] += c->npig[gl[i] * N_AREA + a];
    for (int m = 0; m < M; m++) {
        // the detections within maxDets[m] of their image, in score order, one contiguous row
        // of flags per (area, IoU threshold)
        const uint32_t md = (uint32_t)maxdets[m];
        size_t nd = 0;
        for (size_t i = 0; i < n; i++) nd += c->dpos[ent[i].slot] < md;
        size_t col = 0;
        for (size_t i = 0; i < n; i++) {
            uint32_t sl = ent[i].slot;
            if (c->dpos[sl] >= md) continue;
            const uint8_t *f = c->flags + (size_t)sl * A * T;
            for (int at = 0; at < A * T; at++) fs[(size_t)at * nd + col] = f[at];
            col++;
        }
        for (int a = 0; a < A; a++) {
            if (npig[a] == 0) continue;
            const double np = (double)npig[a];
            for (int t = 0; t < T; t++) {
                const uint8_t *f = fs + (size_t)(a * T + t) * nd;
                size_t ntp = 0, nfp = 0;
                for (size_t i = 0; i < nd; i++) { // branch-free except at the (rare) true positives
                    unsigned code = f[i] & 3;
                    nfp += code == 0;
                    if (code == 1) {
                        double tp = (double)++ntp, fp = (double)nfp;
                        prt[ntp - 1] = tp / (fp + tp + DBL_EPSILON); // numpy: tp/(fp+tp+spacing(1))
                    }
                }
                r->recall[((t * K + k) * A + a) * M + m] = nd ? (double)ntp / np : 0;
                for (size_t j = ntp > 0 ? ntp - 1 : 0; j > 0; j--)
                    if (prt[j] > prt[j - 1]) prt[j - 1] = prt[j];
                size_t need = 0; // least true-positive count with need/npig >= threshold
                for (int ri = 0; ri < R; ri++) {
                    while ((double)need / np < rec_thr[ri]) need++;
                    double v;
                    if (nd == 0 || need > ntp) v = 0; // past the last detection: stays 0
                    else v = ntp ? prt[need ? need - 1 : 0] : 0;
                    r->precision[(((size_t)(t * R + ri) * K + k) * A + a) * M + m] = v;
                }
            }
        }
    }
    free(ent); free(tmp); free(fs); free(prt);
    return 0;
}

// np.mean of the selected entries, or -1 when there are none (pycocotools' convention)
static double mean_or_minus1(const double *v, size_t n) {
    return n ? coco_np_sum(v, n) / (double)n : -1;
}

// pycocotools' _summarize: mean of the entries > -1 of precision (ap) or recall, selected by
// IoU threshold (iou < 0: all), area label index and maxDets value, in numpy's C order.
static double summarize_one(const coco_result *r, int ap, double iou, int aind, int maxdets, double *buf) {
    size_t n = 0;
    const int T = r->T, R = r->R, K = r->K, A = r->A, M = r->M;
    for (int t = 0; t < T; t++) {
        if (iou >= 0 && r->iou_thrs[t] != iou) continue;
        for (int ri = 0; ri < (ap ? R : 1); ri++)
            for (int k = 0; k < K; k++)
                for (int m = 0; m < M; m++) {
                    if (r->max_dets[m] != maxdets) continue;
                    double v = ap ? r->precision[(((size_t)(t * R + ri) * K + k) * A + aind) * M + m]
                                  : r->recall[((t * K + k) * A + aind) * M + m];
                    if (v > -1) buf[n++] = v;
                }
    }
    return mean_or_minus1(buf, n);
}

static const struct { int ap; double iou; int area; int md; } stat_def[12] = {
    {1, -1, 0, -100}, {1, .5, 0, 2}, {1, .75, 0, 2}, {1, -1, 1, 2}, {1, -1, 2, 2}, {1, -1, 3, 2},
    {0, -1, 0, 0},   {0, -1, 0, 1}, {0, -1, 0, 2},  {0, -1, 1, 2}, {0, -1, 2, 2}, {0, -1, 3, 2},
};

size_t coco_format_summary(const coco_result *r, const coco_params *p, char *buf, size_t n) {
    (void)p;
    size_t len = 0;
    for (int i = 0; i < 12; i++) {
        int md = stat_def[i].md < 0 ? -stat_def[i].md : r->max_dets[stat_def[i].md];
        char iou[16];
        if (stat_def[i].iou < 0) snprintf(iou, sizeof iou, "%0.2f:%0.2f", r->iou_thrs[0], r->iou_thrs[r->T - 1]);
        else snprintf(iou, sizeof iou, "%0.2f", stat_def[i].iou);
        int w = snprintf(buf + (len < n ? len : n), len < n ? n - len : 0,
                         " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3d ] = %0.3f\n",
                         stat_def[i].ap ? "Average Precision" : "Average Recall",
                         stat_def[i].ap ? "(AP)" : "(AR)", iou, area_lbl[stat_def[i].area], md,
                         r->stats[i]);
        if (w > 0) len += (size_t)w;
    }
    return len;
}

int coco_evaluate(coco_gt *gt, const coco_dt *dt, const coco_params *p, coco_result *out, tk_err *e) {
    memset(out, 0, sizeof *out);
    if (p->n_max_dets < 3 || p->n_max_dets > COCO_MAX_MAXDETS)
        return tk_err_set(e, TK_EUSAGE, "maxDets needs 3 to %d values, got %d", COCO_MAX_MAXDETS, p->n_max_dets);
    if (dt && dt->gt != gt) return tk_err_set(e, TK_EINTERNAL, "results were loaded against another ground truth");
    int nthreads = p->n_threads > 0 ? p->n_threads : omp_get_max_threads();
    int rc = 0;
    eval_ctx c = {0};
    c.gt = gt;
    c.dt = dt && dt->nanns ? dt : NULL;
    c.p = p;
    // parameters, as COCOeval.evaluate() normalizes them
    int M = p->n_max_dets;
    memcpy(out->max_dets, p->max_dets, (size_t)M * sizeof(int));
    for (int i = 1; i < M; i++) // sorted(maxDets)
        for (int j = i; j > 0 && out->max_dets[j - 1] > out->max_dets[j]; j--) {
            int t = out->max_dets[j];
            out->max_dets[j] = out->max_dets[j - 1];
            out->max_dets[j - 1] = t;
        }
    c.maxdet = out->max_dets[M - 1];
    for (int t = 0; t < T_THR; t++) out->iou_thrs[t] = c.iou_thr[t] = coco_linspace(.5, .95, T_THR, t);
    for (int i = 0; i < R_THR; i++) out->rec_thrs[i] = coco_linspace(0, 1, R_THR, i);
    size_t nimg = 0, ncat = 0;
    int64_t *imgs, *cats;
    if (p->img_ids) imgs = unique_ids(p->img_ids, p->n_img_ids, &nimg);
    else {
        int64_t *all = malloc((gt->nimg + 1) * sizeof *all);
        size_t n = 0;
        for (size_t i = 0; all && i < gt->nimg; i++)
            if (gt->img_declared[i]) all[n++] = gt->img_id[i];
        imgs = all ? unique_ids(all, n, &nimg) : NULL;
        free(all);
    }
    if (p->cat_ids) cats = unique_ids(p->cat_ids, p->n_cat_ids, &ncat);
    else {
        int64_t *all = malloc((gt->ncat + 1) * sizeof *all);
        size_t n = 0;
        for (size_t i = 0; all && i < gt->ncat; i++)
            if (gt->cat_declared[i]) all[n++] = gt->cat_id[i];
        cats = all ? unique_ids(all, n, &ncat) : NULL;
        free(all);
    }
    int32_t *catpos = malloc((gt->ncat + 1) * sizeof *catpos);
    uint32_t *kstart = NULL, *korder = NULL;
    if (!imgs || !cats || !catpos) {
        rc = tk_err_errno(e, ENOMEM, "evaluation");
        goto done;
    }
    for (size_t i = 0; i < gt->ncat; i++) catpos[i] = -1;
    for (size_t k = 0; k < ncat; k++) {
        int32_t ci = coco_map_get(&gt->cat_map, cats[k]);
        if (ci >= 0) catpos[ci] = (int32_t)k;
    }
    c.catpos = catpos;
    int K = p->use_cats ? (int)ncat : 1;
    out->T = T_THR;
    out->R = R_THR;
    out->K = K;
    out->A = N_AREA;
    out->M = M;
    out->precision = malloc((size_t)T_THR * R_THR * (K ? K : 1) * N_AREA * M * sizeof(double));
    out->recall = malloc((size_t)T_THR * (K ? K : 1) * N_AREA * M * sizeof(double));
    out->cat_ids = malloc((K ? K : 1) * sizeof(int64_t));
    out->ap = malloc((K ? K : 1) * sizeof(double));
    out->ap50 = malloc((K ? K : 1) * sizeof(double));
    if (!out->precision || !out->recall || !out->cat_ids || !out->ap || !out->ap50) {
        rc = tk_err_errno(e, ENOMEM, "evaluation");
        goto done;
    }
    for (size_t i = 0; i < (size_t)T_THR * R_THR * K * N_AREA * M; i++) out->precision[i] = -1;
    for (size_t i = 0; i < (size_t)T_THR * K * N_AREA * M; i++) out->recall[i] = -1;
    for (int k = 0; k < K; k++) out->cat_ids[k] = p->use_cats ? cats[k] : -1;
    if (p->iou_type == COCO_SEGM && gt_masks(gt, nthreads)) {
        rc = tk_err_errno(e, ENOMEM, "rasterizing ground-truth masks");
        goto done;
    }
    // groups: (image, category) pairs with ground truth or detections, image-major
    size_t cap = 0, slots = 0;
    for (size_t ip = 0; ip < nimg; ip++) {
        int32_t ii = coco_map_get(&gt->img_map, imgs[ip]);
        if (ii < 0) continue;
        size_t gb = gt->img_start[ii], ge = gt->img_start[ii + 1];
        size_t db = c.dt ? dt->img_start[ii] : 0, de = c.dt ? dt->img_start[ii + 1] : 0;
        // both lists are sorted by category id, so category positions rise along each
        size_t gj = gb, dj = db;
        for (;;) {
            int kg = INT32_MAX, kd = INT32_MAX;
            while (gj < ge) {
                int32_t ci = gt->anns[gt->by_img[gj]].cat, cp = ci >= 0 ? catpos[ci] : -1;
                if (cp >= 0) { kg = p->use_cats ? cp : 0; break; }
                gj++;
            }
            while (dj < de) {
                int32_t ci = dt->anns[dt->by_img[dj]].cat, cp = ci >= 0 ? catpos[ci] : -1;
                if (cp >= 0) { kd = p->use_cats ? cp : 0; break; }
                dj++;
            }
            int k = kg < kd ? kg : kd;
            if (k == INT32_MAX) break;
            group g = {ii, k, (uint32_t)gj, (uint32_t)gj, (uint32_t)dj, (uint32_t)dj, 0, 0};
            if (p->use_cats) {
                while (gj < ge) {
                    int32_t ci = gt->anns[gt->by_img[gj]].cat, cp = ci >= 0 ? catpos[ci] : -1;
                    if (cp >= 0 && cp != k) break;
                    gj++;
                }
                while (dj < de) {
                    int32_t ci = dt->anns[dt->by_img[dj]].cat, cp = ci >= 0 ? catpos[ci] : -1;
                    if (cp >= 0 && cp != k) break;
                    dj++;
                }
            } else {
                gj = ge;
                dj = de;
            }
            g.gend = (uint32_t)gj;
            g.dend = (uint32_t)dj;
            if (c.ngroups == cap) {
                cap = cap ? cap * 2 : 1024;
                group *ng = realloc(c.groups, cap * sizeof *ng);
                if (!ng) {
                    rc = tk_err_errno(e, ENOMEM, "evaluation");
                    goto done;
                }
                c.groups = ng;
            }
            size_t nd = g.dend - g.dbeg; // an upper bound (filtered later), capped at maxDets
            slots += nd < (size_t)c.maxdet ? nd : (size_t)c.maxdet;
            c.groups[c.ngroups++] = g;
        }
    }
    kstart = calloc((size_t)K + 2, sizeof *kstart);
    korder = malloc((c.ngroups + 1) * sizeof *korder);
    if (!kstart || !korder) {
        rc = tk_err_errno(e, ENOMEM, "evaluation");
        goto done;
    }
    // groups of each category in image order; their slots contiguous per category, so that
    // accumulating a category touches one compact range
    for (size_t i = 0; i < c.ngroups; i++) kstart[c.groups[i].k + 2]++;
    for (int k = 0; k < K; k++) kstart[k + 2] += kstart[k + 1];
    for (size_t i = 0; i < c.ngroups; i++) korder[kstart[c.groups[i].k + 1]++] = (uint32_t)i;
    size_t next = 0;
    for (size_t q = 0; q < c.ngroups; q++) {
        group *g = &c.groups[korder[q]];
        size_t nd = g->dend - g->dbeg; // an upper bound (filtered later), capped at maxDets
        g->off = next;
        next += nd < (size_t)c.maxdet ? nd : (size_t)c.maxdet;
    }
    c.score = malloc((slots + 1) * sizeof *c.score);
    c.dpos = malloc((slots + 1) * sizeof *c.dpos);
    c.flags = malloc((slots + 1) * N_AREA * T_THR);
    c.npig = malloc((c.ngroups + 1) * N_AREA * sizeof *c.npig);
    if (!c.score || !c.dpos || !c.flags || !c.npig) {
        rc = tk_err_errno(e, ENOMEM, "evaluation");
        goto done;
    }
    long ng = (long)c.ngroups;
    long bad = -1;
    int bad_rc = 0;
#pragma omp parallel num_threads(nthreads)
    {
        scratch s = {0};
#pragma omp for schedule(dynamic, 16)
        for (long i = 0; i < ng; i++) {
            int r = eval_group(&c, (size_t)i, &s);
            if (r) {
#pragma omp critical(coco_eval_bad)
                if (bad < 0 || i < bad) bad = i, bad_rc = r;
            }
        }
        scratch_free(&s);
    }
    if (bad >= 0) {
        if (bad_rc == ENOMEM) rc = tk_err_errno(e, ENOMEM, "evaluation");
        else if (bad_rc == 1) { // say which ground-truth mask could not be made, and why
            group *g = &c.groups[bad];
            for (uint32_t j = g->gbeg; j < g->gend; j++) {
                coco_gt_ann *a = &gt->anns[gt->by_img[j]];
                if (!gt_in(&c, a, g->k) || gt->rle[gt->by_img[j]].h != UINT32_MAX) continue;
                coco_rle tmp;
                rc = coco_seg_to_rle(&gt->st, &a->seg, gt->img_h[a->img], gt->img_w[a->img], &tmp, e);
                if (!rc) {
                    coco_rle_free(&tmp);
                    rc = tk_err_set(e, TK_EINTERNAL, "mask failed once and not twice");
                }
                tk_err_where(e, "%s: $.annotations[%u].segmentation", gt->name, a->file_idx);
                if (!gt->img_h[a->img] || !gt->img_w[a->img])
                    tk_err_hint(e, "image %lld has no height/width in $.images", (long long)gt->img_id[a->img]);
                break;
            }
            if (!rc) rc = tk_err_set(e, TK_EINTERNAL, "a ground-truth mask is missing");
        } else
            rc = tk_err_set(e, TK_EDATA, "%s: a result's mask could not be made", dt->name);
        goto done;
    }
    int acc_fail = 0;
#pragma omp parallel for schedule(dynamic, 1) num_threads(nthreads)
    for (int k = 0; k < K; k++)
        if (accumulate_k(&c, k, korder + kstart[k], kstart[k + 1] - kstart[k], M, out->max_dets,
                         out->rec_thrs, out)) {
#pragma omp atomic write
            acc_fail = 1;
        }
    if (acc_fail) {
        rc = tk_err_errno(e, ENOMEM, "evaluation");
        goto done;
    }
    // summarize
    size_t cap_buf = (size_t)T_THR * R_THR * (K ? K : 1) * M + 1;
    double *buf = malloc(cap_buf * sizeof *buf);
    if (!buf) {
        rc = tk_err_errno(e, ENOMEM, "evaluation");
        goto done;
    }
    for (int i = 0; i < 12; i++) {
        int md = stat_def[i].md < 0 ? -stat_def[i].md : out->max_dets[stat_def[i].md];
        out->stats[i] = summarize_one(out, stat_def[i].ap, stat_def[i].iou, stat_def[i].area, md, buf);
    }
    for (int k = 0; k < K; k++) { // detectron2: precision[:, :, k, 0, -1] > -1
        size_t n = 0, n50 = 0;
        for (int t = 0; t < T_THR; t++)
            for (int ri = 0; ri < R_THR; ri++) {
                double v = out->precision[(((size_t)(t * R_THR + ri) * K + k) * N_AREA + 0) * M + M - 1];
                if (v > -1) buf[n++] = v;
            }
        out->ap[k] = mean_or_minus1(buf, n);
        for (int ri = 0; ri < R_THR; ri++) {
            double v = out->precision[(((size_t)(0 * R_THR + ri) * K + k) * N_AREA + 0) * M + M - 1];
            if (v > -1) buf[n50++] = v;
        }
        out->ap50[k] = mean_or_minus1(buf, n50);
    }
    free(buf);
done:
    free(imgs);
    free(cats);
    free(catpos);
    free(kstart);
    free(korder);
    free(c.groups);
    free(c.score);
    free(c.dpos);
    free(c.flags);
    free(c.npig);
    if (rc) coco_result_free(out);
    return rc;
}
