// CPU reference of kernels/bce.h.
#include <math.h>
#include <stdlib.h>

#include "bce.h"
#include "cast2d.h"

static int bce_ref(const float *logit, const uint8_t *label, int B, int N, float *dlogit, double *acc) {
    double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (int b = 0; b < B; b++) {
        double z = logit[b], y = label[b] ? 1.0 : 0.0;
        sum += fmax(z, 0) - z * y + log1p(exp(-fabs(z)));
        if (dlogit) dlogit[b] = (float)((1.0 / (1.0 + exp(-z)) - y) / N);
    }
    if (acc) {
        acc[0] += sum / N;
        acc[1] += 1;
    }
    return 0;
}

int tk_bce_logits_ref(const float *logit, const uint8_t *label, int B, float *dlogit, double *acc,
                      tk_err *e) {
    (void)e;
    return bce_ref(logit, label, B, B, dlogit, acc);
}

int tk_bce_logits_act_ref(tk_dtype lt, const void *logit, const uint8_t *label, int B, void *dlogit,
                          double *acc, tk_err *e) {
    return tk_bce_logits_act_n_ref(lt, logit, label, B, B, dlogit, acc, e);
}

int tk_bce_logits_act_n_ref(tk_dtype lt, const void *logit, const uint8_t *label, int B, int N, void *dlogit,
                            double *acc, tk_err *e) {
    if (N < B) return tk_err_set(e, TK_EINTERNAL, "bce_logits: normalizer %d < batch %d", N, B);
    if (lt == TK_F32) return bce_ref(logit, label, B, N, dlogit, acc);
    if (lt != TK_BF16) return tk_err_set(e, TK_EINTERNAL, "bce_logits: logits in %s", tk_dtype_name(lt));
    float *z = malloc((size_t)B * sizeof(float) + 1), *dz = malloc((size_t)B * sizeof(float) + 1);
    int rc = !z || !dz ? tk_err_set(e, TK_EIO, "out of host memory") : 0;
    if (!rc) rc = tk_cast2d_ref(logit, TK_BF16, B, z, TK_F32, B, 1, B, e);
    if (!rc) rc = bce_ref(z, label, B, N, dlogit ? dz : NULL, acc);
    if (!rc && dlogit) rc = tk_cast2d_ref(dz, TK_F32, B, dlogit, TK_BF16, B, 1, B, e);
    free(z);
    free(dz);
    return rc;
}
