// CPU reference of kernels/ssd_box.h: the default boxes and the matching in the reference's fp32
// (each operation rounded once, as torch's elementwise ops: C11 without contraction), the loss and
// its gradient in fp64, the mining by a sort (key descending, index ascending).
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "act_io.h"
#include "ssd_box.h"

const tk_ssd_dbox_cfg tk_ssd300_coco = {
    .fig = 300,
    .nmap = 6,
    .feat = {38, 19, 10, 5, 3, 1},
    .step = {8, 16, 32, 64, 100, 300},
    .scale = {21, 45, 99, 153, 207, 261, 315},
    .nar = {1, 2, 2, 2, 1, 1},
    .ar = {{2}, {2, 3}, {2, 3}, {2, 3}, {2}, {2}},
};

int tk_ssd_dbox_count(const tk_ssd_dbox_cfg *g) {
    if (!g || g->fig < 1 || g->nmap < 1 || g->nmap > TK_SSD_MAX_MAPS) return -1;
    int64_t n = 0;
    for (int k = 0; k < g->nmap; k++) {
        if (g->feat[k] < 1 || g->feat[k] > 4096 || g->step[k] < 1 || g->scale[k] < 1 || g->scale[k + 1] < 1 ||
            g->nar[k] < 0 || g->nar[k] > 4)
            return -1;
        for (int a = 0; a < g->nar[k]; a++)
            if (g->ar[k][a] < 1) return -1;
        n += (int64_t)(2 + 2 * g->nar[k]) * g->feat[k] * g->feat[k];
    }
    return n > INT32_MAX / 4 ? -1 : (int)n;
}

static float clamp01(float v) { return v < 0 ? 0.0f : v > 1 ? 1.0f : v; }

int tk_ssd_dboxes(const tk_ssd_dbox_cfg *g, float *xywh, float *ltrb, tk_err *e) {
    if (tk_ssd_dbox_count(g) < 0) return tk_err_set(e, TK_EINTERNAL, "ssd_dboxes: malformed default-box layout");
    size_t n = 0;
    for (int k = 0; k < g->nmap; k++) {
        // the reference's numbers in fp64: fk = fig / step (numpy), sk = scale / fig
        const double fk = (double)g->fig / g->step[k], sk1 = (double)g->scale[k] / g->fig,
                     sk2 = (double)g->scale[k + 1] / g->fig;
        double sz[2 + 2 * 4][2] = {{sk1, sk1}, {sqrt(sk1 * sk2), sqrt(sk1 * sk2)}};
        int ns = 2;
        for (int a = 0; a < g->nar[k]; a++) {
            const double r = sqrt((double)g->ar[k][a]), w = sk1 * r, h = sk1 / r;
            sz[ns][0] = w, sz[ns][1] = h, ns++;
            sz[ns][0] = h, sz[ns][1] = w, ns++;
        }
        for (int s = 0; s < ns; s++)
            for (int i = 0; i < g->feat[k]; i++)
                for (int j = 0; j < g->feat[k]; j++, n++) {
                    const float b[4] = {clamp01((float)((j + 0.5) / fk)), clamp01((float)((i + 0.5) / fk)),
                                        clamp01((float)sz[s][0]), clamp01((float)sz[s][1])};
                    if (xywh)
                        for (int q = 0; q < 4; q++) xywh[n * 4 + q] = b[q];
                    if (ltrb) {
                        ltrb[n * 4 + 0] = b[0] - 0.5f * b[2], ltrb[n * 4 + 1] = b[1] - 0.5f * b[3];
                        ltrb[n * 4 + 2] = b[0] + 0.5f * b[2], ltrb[n * 4 + 3] = b[1] + 0.5f * b[3];
                    }
                }
    }
    return 0;
}

// calc_iou_tensor of two ltrb boxes in fp32 (the operations in the reference's order).
static float iou_f(const float *a, const float *b) {
    float dx = fminf(a[2], b[2]) - fmaxf(a[0], b[0]), dy = fminf(a[3], b[3]) - fmaxf(a[1], b[1]);
    if (dx < 0) dx = 0;
    if (dy < 0) dy = 0;
    const float inter = dx * dy, a1 = (a[2] - a[0]) * (a[3] - a[1]), a2 = (b[2] - b[0]) * (b[3] - b[1]);
    return inter / (a1 + a2 - inter);
}

int tk_ssd_match_ref(const float *gt, const int32_t *gt_label, const int32_t *gt_off, int N, int64_t ngt,
                     const float *dbox_ltrb, int D, float thresh, float *box, int32_t *label, tk_err *e) {
    TRY(tk_ssd_match_check(N, ngt, D, e));
    if (gt_off[0] != 0 || gt_off[N] != ngt)
        return tk_err_set(e, TK_EINTERNAL, "ssd_match: offsets run %d .. %d for %lld boxes", gt_off[0], gt_off[N],
                          (long long)ngt);
    for (int n = 0; n < N; n++)
        if (gt_off[n + 1] < gt_off[n])
            return tk_err_set(e, TK_EINTERNAL, "ssd_match: offsets of image %d decrease (%d, %d)", n, gt_off[n],
                              gt_off[n + 1]);
    float *bv = malloc((size_t)D * sizeof *bv);
    int32_t *bg = malloc((size_t)D * sizeof *bg);
    if (!bv || !bg) {
        free(bv), free(bg);
        return tk_err_errno(e, ENOMEM, "ssd_match: out of memory for %d default boxes", D);
    }
    for (int n = 0; n < N; n++) {
        const float *g = gt + (size_t)gt_off[n] * 4;
        const int32_t G = gt_off[n + 1] - gt_off[n];
        for (int d = 0; d < D; d++) { // each default box's best ground truth (max(dim=0): the first)
            bv[d] = -INFINITY, bg[d] = -1;
            for (int32_t j = 0; j < G; j++) {
                const float v = iou_f(g + (size_t)j * 4, dbox_ltrb + (size_t)d * 4);
                if (j == 0 || v > bv[d]) bv[d] = v, bg[d] = j;
            }
        }
        for (int32_t j = 0; j < G; j++) { // each ground truth's best default box (max(dim=1)), forced
            float best = 0;
            int bd = 0;
            for (int d = 0; d < D; d++) {
                const float v = iou_f(g + (size_t)j * 4, dbox_ltrb + (size_t)d * 4);
                if (d == 0 || v > best) best = v, bd = d;
            }
            bv[bd] = 2.0f, bg[bd] = j; // in ground-truth order: the later of two wins
        }
        for (int d = 0; d < D; d++) {
            const size_t i = (size_t)n * D + d;
            const int hit = G > 0 && bv[d] > thresh;
            const float *b = hit ? g + (size_t)bg[d] * 4 : dbox_ltrb + (size_t)d * 4;
            label[i] = hit ? gt_label[gt_off[n] + bg[d]] : 0;
            box[i * 4 + 0] = 0.5f * (b[0] + b[2]), box[i * 4 + 1] = 0.5f * (b[1] + b[3]);
            box[i * 4 + 2] = b[2] - b[0], box[i * 4 + 3] = b[3] - b[1];
        }
    }
    free(bv), free(bg);
    return 0;
}

typedef struct {
    double key;
    int idx;
} ranked;

// The mining's order: key descending, then index ascending (a stable descending sort).
static int by_key_desc(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->key != b->key) return a->key > b->key ? -1 : 1;
    return (a->idx > b->idx) - (a->idx < b->idx);
}

int tk_ssd_loss_ref(tk_dtype t, const void *ploc, const void *pconf, const float *gbox, const int32_t *label,
                    const float *dbox, int N, int D, int C, float *loss, void *dploc, void *dpconf, uint8_t *sel,
                    tk_err *e) {
    return tk_ssd_loss_acc_ref(t, ploc, pconf, gbox, label, dbox, N, D, C, 1.0f, NULL, loss, dploc, dpconf, sel, e);
}

int tk_ssd_loss_acc_ref(tk_dtype t, const void *ploc, const void *pconf, const float *gbox, const int32_t *label,
                        const float *dbox, int N, int D, int C, float scale, double *acc, float *loss, void *dploc,
                        void *dpconf, uint8_t *sel, tk_err *e) {
    TRY(tk_ssd_loss_check(t, N, D, C, e));
    for (size_t i = 0; i < (size_t)N * D; i++)
        if (label[i] < 0 || label[i] >= C)
            return tk_err_set(e, TK_EINTERNAL, "ssd_loss: label %d at box %zu of image %zu (not in 0..%d)", label[i],
                              i % (size_t)D, i / (size_t)D, C - 1);
    double *con = malloc((size_t)D * sizeof *con), *lse = malloc((size_t)D * sizeof *lse);
    ranked *ord = malloc((size_t)D * sizeof *ord);
    uint8_t *w = malloc((size_t)D);
    if (!con || !lse || !ord || !w) {
        free(con), free(lse), free(ord), free(w);
        return tk_err_errno(e, ENOMEM, "ssd_loss: out of memory for %d boxes", D);
    }
    const double sxy = 1.0 / TK_SSD_SCALE_XY, swh = 1.0 / TK_SSD_SCALE_WH;
    double total = 0;
    for (int n = 0; n < N; n++) {
        int P = 0;
        double sl1 = 0, closs = 0, x[4];
        for (int d = 0; d < D; d++) {
            const size_t i = (size_t)n * D + d;
            double mx = -INFINITY, s = 0;
            for (int c = 0; c < C; c++) mx = fmax(mx, tk_act_ld(pconf, t, i * C + c));
            for (int c = 0; c < C; c++) s += exp(tk_act_ld(pconf, t, i * C + c) - mx);
            lse[d] = mx + log(s);
            con[d] = lse[d] - tk_act_ld(pconf, t, i * C + label[i]);
            ord[d] = (ranked){label[i] > 0 || !(con[d] > 0) ? 0 : con[d], d};
            if (label[i] == 0) continue;
            P++;
            const float *g = gbox + i * 4, *a = dbox + (size_t)d * 4;
            x[0] = sxy * (g[0] - (double)a[0]) / a[2], x[1] = sxy * (g[1] - (double)a[1]) / a[3];
            x[2] = swh * log((double)g[2] / a[2]), x[3] = swh * log((double)g[3] / a[3]);
            for (int k = 0; k < 4; k++) {
                const double r = tk_act_ld(ploc, t, i * 4 + k) - x[k];
                sl1 += fabs(r) < 1 ? 0.5 * r * r : fabs(r) - 0.5;
            }
        }
        qsort(ord, (size_t)D, sizeof *ord, by_key_desc);
        const int nneg = TK_SSD_NEG_RATIO * P < D ? TK_SSD_NEG_RATIO * P : D;
        for (int d = 0; d < D; d++) w[d] = label[(size_t)n * D + d] > 0;
        for (int r = 0; r < nneg; r++) w[ord[r].idx]++;
        for (int d = 0; d < D; d++) closs += w[d] * con[d];
        if (P > 0) total += (sl1 + closs) / P;
        if (sel)
            for (int d = 0; d < D; d++) sel[(size_t)n * D + d] = w[d];
        const double q = P > 0 ? scale / ((double)N * P) : 0;
        for (int d = 0; dpconf && d < D; d++) {
            const size_t i = (size_t)n * D + d;
            for (int c = 0; c < C; c++)
                tk_act_st(dpconf, t, i * C + c,
                          w[d] ? (float)(q * w[d] * (exp(tk_act_ld(pconf, t, i * C + c) - lse[d]) - (c == label[i])))
                               : 0.0f);
        }
        for (int d = 0; dploc && d < D; d++) {
            const size_t i = (size_t)n * D + d;
            const float *g = gbox + i * 4, *a = dbox + (size_t)d * 4;
            x[0] = sxy * (g[0] - (double)a[0]) / a[2], x[1] = sxy * (g[1] - (double)a[1]) / a[3];
            x[2] = swh * log((double)g[2] / a[2]), x[3] = swh * log((double)g[3] / a[3]);
            for (int k = 0; k < 4; k++) {
                const double r = tk_act_ld(ploc, t, i * 4 + k) - x[k];
                tk_act_st(dploc, t, i * 4 + k, label[i] > 0 ? (float)(q * fmin(fmax(r, -1.0), 1.0)) : 0.0f);
            }
        }
    }
    *loss = (float)(total / N);
    if (acc) acc[0] += (double)scale * (total / N), acc[1] += 1;
    free(con), free(lse), free(ord), free(w);
    return 0;
}
