// The reference of kernels/rnnt_greedy.h: the specification and the device test's oracle.
#include <string.h>

#include "act_io.h"
#include "rnnt_greedy.h"

int tk_rnnt_greedy_step_ref(tk_dtype t, const tk_rnnt_greedy *s, const void *logits, const float *hn,
                            const float *cn, float *h, float *cc, tk_err *e) {
    if (tk_rnnt_greedy_check(t, s, e)) return e->code;
    for (int b = 0; b < s->B; b++) {
        if (s->t[b] < s->T[b] && s->n[b] < s->cap) {
            int k = 0;
            float best = tk_act_ld(logits, t, (size_t)b * s->V);
            for (int v = 1; v < s->V; v++) {
                const float x = tk_act_ld(logits, t, (size_t)b * s->V + v);
                if (x > best || (best != best && x == x)) best = x, k = v;
            }
            if (k == s->blank) {
                s->t[b]++, s->sym[b] = 0;
            } else {
                s->hyp[(size_t)b * s->cap + s->n[b]] = k;
                s->n[b]++, s->label[b] = k;
                for (int l = 0; l < s->L; l++) {
                    const size_t o = ((size_t)l * s->B + b) * s->H;
                    memcpy(h + o, hn + o, (size_t)s->H * 4);
                    memcpy(cc + o, cn + o, (size_t)s->H * 4);
                }
                if (++s->sym[b] == s->max_per_step) s->t[b]++, s->sym[b] = 0;
            }
        }
        s->fidx[b] = b * s->T2 + (s->t[b] < s->T2 - 1 ? s->t[b] : s->T2 - 1);
    }
    return 0;
}
