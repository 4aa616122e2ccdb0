// CPU reference of kernels/optim.h, the specification: per segment, in segment order, fp64 sums
// of squares in element order (a tensor's pieces' sums added in segment order, then the ranks'
// in rank order in the distributed form), then the element updates of kernels/optim_math.h (OpenMP over the
// elements of a segment, which cannot change a result: every element is independent).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/bf16.h"
#include "optim_math.h"

const char *tk_opt_kind_name(tk_opt_kind k) {
    static const char *names[] = {"sgd", "momentum", "lamb", "lars", "adam", "adamw"};
    return (unsigned)k < sizeof names / sizeof names[0] ? names[k] : "?";
}

size_t tk_optim_state_floats(tk_opt_kind k) {
    switch (k) {
    case TK_OPT_MOMENTUM:
    case TK_OPT_LARS: return 1;
    case TK_OPT_LAMB:
    case TK_OPT_ADAM:
    case TK_OPT_ADAMW: return 2;
    default: return 0;
    }
}

static int bad_hp(tk_err *e, const char *what, double v) {
    return tk_err_set(e, TK_EINTERNAL, "optim: %s %g out of range", what, v);
}

int tk_optim_check(const tk_opt_hp *hp, size_t n, const tk_opt_seg *seg, int nseg, tk_dtype copy_type,
                   tk_err *e) {
    if ((unsigned)hp->kind > TK_OPT_ADAMW) return tk_err_set(e, TK_EINTERNAL, "optim: unknown kind %d", (int)hp->kind);
    int sgd = hp->kind == TK_OPT_SGD, mom = hp->kind == TK_OPT_MOMENTUM || hp->kind == TK_OPT_LARS;
    int adam = hp->kind == TK_OPT_ADAM || hp->kind == TK_OPT_ADAMW || hp->kind == TK_OPT_LAMB;
    // The negated comparisons also refuse NaN.
    if (sgd ? hp->momentum != 0 : mom && !(hp->momentum >= 0 && hp->momentum < 1))
        return bad_hp(e, "momentum", hp->momentum);
    if (!(hp->dampening >= 0 && hp->dampening <= 1)) return bad_hp(e, "dampening", hp->dampening);
    if (hp->nesterov && (!(hp->momentum > 0) || (hp->kind != TK_OPT_LARS && hp->dampening != 0) || !mom))
        return tk_err_set(e, TK_EINTERNAL, "optim: nesterov needs momentum > 0 and dampening 0 (%s)",
                          tk_opt_kind_name(hp->kind));
    if (adam && !(hp->beta1 >= 0 && hp->beta1 < 1)) return bad_hp(e, "beta1", hp->beta1);
    if (adam && !(hp->beta2 >= 0 && hp->beta2 < 1)) return bad_hp(e, "beta2", hp->beta2);
    if (!(hp->eps >= 0 && hp->eps < 1)) return bad_hp(e, "eps", hp->eps);
    if (!(hp->weight_decay >= 0 && hp->weight_decay < 1e6)) return bad_hp(e, "weight_decay", hp->weight_decay);
    if (!(hp->max_grad_norm >= 0 && hp->max_grad_norm < 1e30)) return bad_hp(e, "max_grad_norm", hp->max_grad_norm);
    if (hp->kind == TK_OPT_LARS && !(hp->trust_coef > 0 && hp->trust_coef < 1e6))
        return bad_hp(e, "trust_coef", hp->trust_coef);
    if (copy_type != TK_BF16 && copy_type != TK_F16)
        return tk_err_set(e, TK_EINTERNAL, "optim: compute copy dtype %s not supported", tk_dtype_name(copy_type));
    if (nseg < 0 || (nseg > 0 && !seg)) return tk_err_set(e, TK_EINTERNAL, "optim: %d segments", nseg);
    int64_t end = 0;
    for (int s = 0; s < nseg; s++) {
        if (seg[s].off < end || seg[s].n < 0 || seg[s].off + seg[s].n > (int64_t)n)
            return tk_err_set(e, TK_EINTERNAL,
                              "optim: segment %d [%lld, +%lld) overlaps the previous one or leaves [0, %zu)", s,
                              (long long)seg[s].off, (long long)seg[s].n, n);
        end = seg[s].off + seg[s].n;
    }
    return 0;
}

// fp64 sum of squares of x[0 .. n).
static double sumsq(const float *x, int64_t n) {
    double a = 0;
    for (int64_t i = 0; i < n; i++) a += (double)x[i] * x[i];
    return a;
}

static void put_copy(void *copy, tk_dtype t, int64_t i, float x) {
    ((uint16_t *)copy)[i] = t == TK_BF16 ? tk_f32_to_bf16(x) : tk_f32_to_f16(x);
}

int tk_optim_check_dist(const tk_opt_hp *hp, size_t n, const tk_opt_seg *seg, int nseg, const tk_optim_dist *d,
                        tk_dtype copy_type, tk_err *e) {
    TRY(tk_optim_check(hp, n, seg, nseg, copy_type, e));
    if (!d) return 0;
    if (d->world < 1 || d->world > 1 << 16 || d->nslot < 0 || !d->gather)
        return tk_err_set(e, TK_EINTERNAL, "optim: distributed over %d ranks, %d tensors, gather %s", d->world,
                          d->nslot, d->gather ? "given" : "missing");
    if (hp->kind == TK_OPT_LARS) return tk_err_set(e, TK_EINTERNAL, "optim: the distributed form does not run lars");
    for (int s = 0; s < nseg; s++)
        if (seg[s].slot < (s ? seg[s - 1].slot : 0) || seg[s].slot >= d->nslot)
            return tk_err_set(e, TK_EINTERNAL, "optim: segment %d's slot %d is out of order or outside [0, %d)", s,
                              (int)seg[s].slot, d->nslot);
    return 0;
}

// mine[i] := the sum over ranks, in rank order, of every rank's mine[i] (all: world * count doubles).
static int gather_sum(const tk_optim_dist *d, double *mine, double *all, size_t count, tk_err *e) {
    TRY(d->gather(d->arg, mine, all, count, e));
    for (size_t i = 0; i < count; i++) {
        double x = 0;
        for (int r = 0; r < d->world; r++) x += all[(size_t)r * count + i];
        mine[i] = x;
    }
    return 0;
}

// One pass per kind over all segments; LAMB in two (moments and the per-tensor sums, then the
// update), so that the distributed form can gather the sums between them. Without d a tensor's
// slot is its segment's index; the sums then are those of the one-pass form bit for bit.
static int step_ref(const tk_opt_hp *hp, float *w, const float *g, float *m, float *v, const tk_opt_seg *seg,
                    int nseg, const tk_optim_dist *d, double *red, const float *lr, int64_t *step, void *copy,
                    tk_dtype copy_type, tk_err *e) {
    const int nslot = d ? d->nslot : nseg;
    double *all = red + 2 * (size_t)nslot + 1, gsq = 0;
    if (tk_opt_needs_gnorm(hp)) {
        for (int s = 0; s < nseg; s++) gsq += sumsq(g + seg[s].off, seg[s].n);
        if (d) {
            red[0] = gsq;
            TRY(gather_sum(d, red, all, 1, e));
            gsq = red[0];
        }
    }
    const tk_opt_scal sc = tk_opt_scalars(hp, *lr, *step, gsq);
    if (sc.skip) {
        *step -= 1;
        return 0;
    }
    const tk_opt_k k = tk_opt_consts(hp);
    if (hp->kind == TK_OPT_LAMB) {
        memset(red, 0, 2 * (size_t)nslot * sizeof *red); // tensor p: ||w||^2 at 2p, ||u||^2 at 2p + 1
        for (int s = 0; s < nseg; s++) {
            int64_t o = seg[s].off, len = seg[s].n;
            size_t p = (size_t)(d ? seg[s].slot : s);
            float wd = tk_opt_seg_wd(&k, seg[s].flags);
            double usq = 0;
            red[2 * p] += sumsq(w + o, len);
            for (int64_t i = o; i < o + len; i++) {
                float u = tk_opt_lamb_moments(&k, &sc, wd, w[i], g[i], &m[i], &v[i]);
                usq += (double)u * u;
            }
            red[2 * p + 1] += usq;
        }
        if (d) TRY(gather_sum(d, red, all, 2 * (size_t)nslot, e));
    }
    for (int s = 0; s < nseg; s++) {
        int64_t o = seg[s].off, len = seg[s].n;
        float wd = tk_opt_seg_wd(&k, seg[s].flags), rate = sc.lr;
        if (hp->kind == TK_OPT_LARS) rate = tk_opt_seg_rate(hp, &sc, seg[s].flags, sumsq(w + o, len), sumsq(g + o, len));
        if (hp->kind == TK_OPT_LAMB) {
            size_t p = (size_t)(d ? seg[s].slot : s);
            rate = tk_opt_seg_rate(hp, &sc, seg[s].flags, red[2 * p], red[2 * p + 1]);
#pragma omp parallel for schedule(static)
            for (int64_t i = o; i < o + len; i++)
                w[i] = TK_FSUB(w[i], TK_FMUL(rate, tk_opt_lamb_u(&k, &sc, wd, w[i], m[i], v[i])));
        } else {
#pragma omp parallel for schedule(static)
            for (int64_t i = o; i < o + len; i++) tk_opt_elem(&k, &sc, rate, wd, &w[i], g[i], m ? &m[i] : NULL, v ? &v[i] : NULL);
        }
        if (copy)
            for (int64_t i = o; i < o + len; i++) put_copy(copy, copy_type, i, w[i]);
    }
    return 0;
}

int tk_optim_step_dist_ref(const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                           const tk_opt_seg *seg, int nseg, const tk_optim_dist *d, const float *lr, int64_t *step,
                           void *copy, tk_dtype copy_type, tk_err *e) {
    TRY(tk_optim_check_dist(hp, n, seg, nseg, d, copy ? copy_type : TK_BF16, e));
    size_t ns = tk_optim_state_floats(hp->kind);
    if (ns > 0 && !state) return tk_err_set(e, TK_EINTERNAL, "optim: %s needs a state buffer", tk_opt_kind_name(hp->kind));
    // the sums (2 per tensor and the gradient norm's), then the ranks' copies of them
    size_t cnt = 2 * (size_t)(d ? d->nslot : nseg) + 1;
    double *red = calloc(cnt * (size_t)(1 + (d ? d->world : 0)), sizeof *red);
    if (!red) return tk_err_set(e, TK_EIO, "out of host memory");
    int rc = step_ref(hp, w, g, ns > 0 ? state : NULL, ns > 1 ? state + n : NULL, seg, nseg, d, red, lr, step, copy,
                      copy_type, e);
    free(red);
    return rc;
}

int tk_optim_step_ref(const tk_opt_hp *hp, float *w, const float *g, float *state, size_t n,
                      const tk_opt_seg *seg, int nseg, const float *lr, int64_t *step, void *copy,
                      tk_dtype copy_type, tk_err *e) {
    return tk_optim_step_dist_ref(hp, w, g, state, n, seg, nseg, NULL, lr, step, copy, copy_type, e);
}
