// CPU reference of kernels/bce.h.
#include <math.h>

#include "bce.h"

int tk_bce_logits_ref(const float *logit, const uint8_t *label, int B, float *dlogit, double *acc,
                      tk_err *e) {
    (void)e;
    double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
    for (int b = 0; b < B; b++) {
        double z = logit[b], y = label[b] ? 1.0 : 0.0;
        sum += fmax(z, 0) - z * y + log1p(exp(-fabs(z)));
        if (dlogit) dlogit[b] = (float)((1.0 / (1.0 + exp(-z)) - y) / B);
    }
    if (acc) {
        acc[0] += sum / B;
        acc[1] += 1;
    }
    return 0;
}
