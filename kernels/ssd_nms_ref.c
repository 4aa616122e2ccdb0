// CPU reference of kernels/ssd_nms.h: the reference's decode_single written out with stable
// sorts (keys are unique, so qsort's instability does not show), one image at a time.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "act_io.h"
#include "ssd_nms.h"

static int key_desc(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}
static int key_asc(const void *a, const void *b) { return -key_desc(a, b); }

// The boxes (A, 4) and the class probabilities (A, C) of image n.
static void decode_image(tk_dtype t, const void *loc, const void *conf, const float *dbox, int n, int A, int C,
                         int softmax, float *box, float *prob) {
    for (int a = 0; a < A; a++) {
        float l[4];
        tk_act_ld_n(loc, t, ((size_t)n * A + a) * 4, l, 4);
        tk_ssd_decode(l, dbox + (size_t)a * 4, box + (size_t)a * 4);
        float *p = prob + (size_t)a * C;
        tk_act_ld_n(conf, t, ((size_t)n * A + a) * C, p, (size_t)C);
        if (!softmax) continue;
        float m = p[0];
        for (int k = 1; k < C; k++) m = p[k] > m ? p[k] : m;
        float s = 0;
        for (int k = 0; k < C; k++) s = TK_SSD_ADD(s, p[k] = tk_ssd_expf(TK_SSD_SUB(p[k], m)));
        const float r = TK_SSD_DIV(1.0f, s);
        for (int k = 0; k < C; k++) p[k] = TK_SSD_MUL(p[k], r);
    }
}

int tk_ssd_nms_ref(tk_dtype t, const void *loc, const void *conf, const float *dbox, int N, int A, int C,
                   const tk_ssd_nms_params *p, float *box, float *score, int32_t *label, int32_t *count, tk_err *e) {
    TRY(tk_ssd_nms_check(t, N, A, C, p, e));
    const int K = p->max_num, O = p->max_out;
    float *bx = malloc((size_t)A * 4 * sizeof *bx), *pr = malloc((size_t)A * C * sizeof *pr);
    uint64_t *cand = malloc((size_t)A * sizeof *cand);
    // kept per class: the anchor keys, in suppression order; then the merge keys
    uint64_t *kept = malloc((size_t)C * K * sizeof *kept), *all = malloc((size_t)C * K * sizeof *all);
    int *nkept = malloc((size_t)C * sizeof *nkept);
    uint8_t *gone = malloc((size_t)K);
    if (!bx || !pr || !cand || !kept || !all || !nkept || !gone) {
        free(bx), free(pr), free(cand), free(kept), free(all), free(nkept), free(gone);
        return tk_err_errno(e, ENOMEM, "ssd_nms reference");
    }
    for (int n = 0; n < N; n++) {
        decode_image(t, loc, conf, dbox, n, A, C, p->softmax, bx, pr);
        size_t tot = 0;
        for (int k = 1; k < C; k++) {
            size_t m = 0;
            for (int a = 0; a < A; a++)
                if (pr[(size_t)a * C + k] > p->score_min) cand[m++] = tk_ssd_key(pr[(size_t)a * C + k], (uint32_t)a);
            qsort(cand, m, sizeof *cand, key_desc);
            if (m > (size_t)K) m = (size_t)K;
            memset(gone, 0, m);
            uint64_t *kk = kept + (size_t)k * K;
            nkept[k] = 0;
            for (size_t i = 0; i < m; i++) {
                if (gone[i]) continue;
                const float *bi = bx + (size_t)(uint32_t)cand[i] * 4;
                kk[nkept[k]++] = cand[i];
                for (size_t j = i + 1; j < m; j++)
                    if (!gone[j] && !(tk_ssd_iou(bx + (size_t)(uint32_t)cand[j] * 4, bi) < p->iou)) gone[j] = 1;
            }
            for (int i = 0; i < nkept[k]; i++) all[tot + i] = (kk[i] >> 32 << 32) | (uint32_t)(tot + i);
            tot += (size_t)nkept[k];
        }
        qsort(all, tot, sizeof *all, key_asc);
        const size_t first = tot > (size_t)O ? tot - (size_t)O : 0, cnt = tot - first;
        count[n] = (int32_t)cnt;
        float *ob = box + (size_t)n * O * 4, *os = score + (size_t)n * O;
        int32_t *ol = label + (size_t)n * O;
        memset(ob, 0, (size_t)O * 4 * sizeof *ob);
        memset(os, 0, (size_t)O * sizeof *os);
        memset(ol, 0, (size_t)O * sizeof *ol);
        for (size_t s = 0; s < cnt; s++) {
            size_t pos = (uint32_t)all[first + s];
            int k = 1;
            while (pos >= (size_t)nkept[k]) pos -= (size_t)nkept[k++];
            const uint32_t a = (uint32_t)kept[(size_t)k * K + pos];
            memcpy(ob + s * 4, bx + (size_t)a * 4, 4 * sizeof *ob);
            os[s] = tk_ssd_bits_float((uint32_t)(all[first + s] >> 32));
            ol[s] = k;
        }
    }
    free(bx), free(pr), free(cand), free(kept), free(all), free(nkept), free(gone);
    return 0;
}
