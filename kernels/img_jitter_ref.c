// CPU reference of kernels/img_jitter.h: kernels/img_jitter_px.c's operations on a copy of each image,
// then ToTensor + Normalize as lib/workloads/ssd/data.c's ssd_normalize computes it.
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "img_jitter.h"

tk_img_jitter_job tk_img_jitter_job_of(const tk_img_jitter *j) {
    tk_img_jitter_job o = {{j->order[0], j->order[1], j->order[2], j->order[3]},
                           (float)j->brightness, (float)j->contrast, (float)j->saturation, tk_img_hue_shift(j->hue)};
    return o;
}

int tk_img_jitter_norm_ref(const uint8_t *src, const tk_img_jitter_job *jobs, int n, int S, const float mean[3],
                           const float std[3], float *out, tk_err *e) {
    if (n < 0 || S < 1 || S > 16384) return tk_err_set(e, TK_EINTERNAL, "img_jitter: n %d, S %d", n, S);
    const size_t px = (size_t)S * S;
    uint8_t *img = malloc(px * 3);
    if (!img) return tk_err_errno(e, ENOMEM, "out of memory for the jitter's image");
    for (int k = 0; k < n; k++) {
        const tk_img_jitter_job *j = &jobs[k];
        for (int q = 0; q < 4; q++)
            if (j->order[q] < -1 || j->order[q] > 3 || j->hue_shift < 0 || j->hue_shift > 255) {
                free(img);
                return tk_err_set(e, TK_EINTERNAL, "img_jitter: job %d: order %d, hue shift %d", k, j->order[q],
                                  j->hue_shift);
            }
        memcpy(img, src + (size_t)k * px * 3, px * 3);
        for (int q = 0; q < 4; q++) {
            switch (j->order[q]) {
            case TK_JITTER_BRIGHTNESS: tk_img_adjust_brightness(img, px, j->brightness); break;
            case TK_JITTER_CONTRAST: tk_img_adjust_contrast(img, px, j->contrast); break;
            case TK_JITTER_SATURATION: tk_img_adjust_saturation(img, px, j->saturation); break;
            case TK_JITTER_HUE: tk_img_adjust_hue_by(img, px, (uint8_t)j->hue_shift); break;
            default: break; // -1: none
            }
        }
        float *o = out + (size_t)k * px * 3;
        for (size_t i = 0; i < px * 3; i++) o[i] = ((float)img[i] / 255.0f - mean[i % 3]) / std[i % 3];
    }
    free(img);
    return 0;
}
