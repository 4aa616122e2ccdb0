// CPU reference of kernels/img_norm.h.
#include "act_io.h"
#include "img_norm.h"

int tk_img_normalize_ref(const uint8_t *src, int64_t npix, tk_img_norm n, tk_dtype t, void *dst, int cin, tk_err *e) {
    TRY(tk_img_norm_check(npix, t, cin, e));
#pragma omp parallel for schedule(static)
    for (int64_t p = 0; p < npix; p++)
        for (int c = 0; c < cin; c++)
            tk_act_st(dst, t, (size_t)p * cin + c, c < 3 ? ((float)src[p * 3 + c] - n.mean[c]) / n.std[c] : 0.0f);
    return 0;
}
